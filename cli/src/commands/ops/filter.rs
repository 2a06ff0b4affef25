//! `--filter` of the bulk actions (`cancel`, `retry-same`, `reconcile`):
//! `key=value` pairs separated by `,`, read into the query of
//! `GET /v1/runs` ([`parse_filter`]).
//!
//! The keys are `list`'s filters plus the current step and its effect:
//! `workflow`, `state`, `attention`, `step`, `effect` and
//! `admitted-before`. An empty filter (nothing but spaces and commas), an
//! unknown key, a pair without `=`, a key given twice and a value the key
//! does not take are each refused with their own code and the column of
//! the pair in the filter (1-based, in characters), before any request.

use coordinator_api as api;
use coordinator_ir::instant::Instant;
use coordinator_ir::name::is_name;

use crate::codes;

/// A filter refused: its code (`coordinator.bulk.…`), where (the 1-based
/// column of the pair in `--filter`, `None` for the whole filter) and
/// what is wrong.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct FilterError {
    /// The code, one of `codes::BULK_FILTER_*`.
    pub code: &'static str,
    /// The 1-based column of the pair, in characters.
    pub column: Option<usize>,
    /// What is wrong, naming the key and value.
    pub message: String,
}

/// The filter keys, each with its `GET /v1/runs` query parameter.
const KEYS: [(&str, &str); 6] = [
    ("workflow", "workflow"),
    ("state", "state"),
    ("attention", "attention"),
    ("step", "step"),
    ("effect", "effect"),
    ("admitted-before", "admittedBefore"),
];

/// `text` as the query pairs of `GET /v1/runs`, in the order given; the
/// value of `admitted-before` is passed as written (an RFC 3339 instant
/// [`Instant::parse`] reads).
pub(crate) fn parse_filter(text: &str) -> Result<Vec<(&'static str, String)>, FilterError> {
    let mut query: Vec<(&'static str, String)> = Vec::new();
    let mut column = 1;
    for pair in text.split(',') {
        let at = column;
        column += pair.chars().count() + 1;
        let pair = pair.trim();
        if pair.is_empty() {
            continue;
        }
        let refuse = |code, message: String| FilterError {
            code,
            column: Some(at),
            message,
        };
        let Some((key, value)) = pair.split_once('=') else {
            return Err(refuse(
                codes::BULK_FILTER_VALUE,
                format!("`{pair}` is not key=value"),
            ));
        };
        let (key, value) = (key.trim(), value.trim());
        let Some(&(_, param)) = KEYS.iter().find(|(k, _)| *k == key) else {
            let known: Vec<&str> = KEYS.iter().map(|(k, _)| *k).collect();
            return Err(refuse(
                codes::BULK_FILTER_KEY,
                format!("unknown key `{key}`; one of {}", known.join(", ")),
            ));
        };
        if query.iter().any(|(p, _)| *p == param) {
            return Err(refuse(
                codes::BULK_FILTER_VALUE,
                format!("`{key}` is given twice"),
            ));
        }
        if let Some(why) = value_fault(key, value) {
            return Err(refuse(
                codes::BULK_FILTER_VALUE,
                format!("`{key}={value}`: {why}"),
            ));
        }
        query.push((param, value.to_owned()));
    }
    if query.is_empty() {
        return Err(FilterError {
            code: codes::BULK_FILTER_EMPTY,
            column: None,
            message: "the filter names no runs: it would act on every run".into(),
        });
    }
    Ok(query)
}

/// Why `value` is not a value of `key`, or `None` when it is one.
fn value_fault(key: &str, value: &str) -> Option<String> {
    let ok = match key {
        "workflow" | "step" => is_name(value),
        "state" => api::RUN_STATES.contains(&value),
        "attention" => value == "true" || value == "false",
        "effect" => api::EFFECT_STATES.contains(&value),
        _ => return Instant::parse(value).err().map(|e| e.to_string()),
    };
    (!ok).then(|| match key {
        "workflow" | "step" => {
            "not a name (a lowercase letter, then lowercase letters, digits and `-`, at most 64)"
                .to_owned()
        }
        "state" => format!("one of {}", api::RUN_STATES.join(", ")),
        "attention" => "true or false".to_owned(),
        _ => format!("one of {}", api::EFFECT_STATES.join(", ")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_become_the_list_query_in_order() {
        let q = parse_filter(
            "workflow=follow-up, state=attention,step=notify,effect=unknown,admitted-before=2026-12-03T10:00:00Z",
        )
        .unwrap();
        assert_eq!(
            q,
            vec![
                ("workflow", "follow-up".to_owned()),
                ("state", "attention".to_owned()),
                ("step", "notify".to_owned()),
                ("effect", "unknown".to_owned()),
                ("admittedBefore", "2026-12-03T10:00:00Z".to_owned()),
            ]
        );
        assert_eq!(
            parse_filter("attention=true,").unwrap(),
            vec![("attention", "true".to_owned())]
        );
    }

    #[test]
    fn an_empty_filter_is_refused() {
        for text in ["", " ", ",", " , ,"] {
            let e = parse_filter(text).unwrap_err();
            assert_eq!(
                (e.code, e.column),
                (codes::BULK_FILTER_EMPTY, None),
                "{text:?}"
            );
        }
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused_at_their_column() {
        let cases = [
            ("state=attention,colour=red", codes::BULK_FILTER_KEY, 17),
            ("state=paused", codes::BULK_FILTER_VALUE, 1),
            ("state", codes::BULK_FILTER_VALUE, 1),
            ("attention=yes", codes::BULK_FILTER_VALUE, 1),
            ("effect=maybe", codes::BULK_FILTER_VALUE, 1),
            ("step=Notify", codes::BULK_FILTER_VALUE, 1),
            ("workflow=", codes::BULK_FILTER_VALUE, 1),
            ("admitted-before=yesterday", codes::BULK_FILTER_VALUE, 1),
            (
                "state=attention,state=running",
                codes::BULK_FILTER_VALUE,
                17,
            ),
            ("ä=1,step=x,", codes::BULK_FILTER_KEY, 1),
            ("ä=1", codes::BULK_FILTER_KEY, 1),
        ];
        for (text, code, column) in cases {
            let e = parse_filter(text).unwrap_err();
            assert_eq!((e.code, e.column), (code, Some(column)), "{text}: {e:?}");
        }
        let e = parse_filter("step=a,ä=1").unwrap_err();
        assert_eq!(e.column, Some(8), "columns count characters: {e:?}");
    }
}
