//! A connection's *binding*: the settings of a `runtime.yaml` connection
//! that decide where a call goes and as whom it is made (seed 000 "Apply
//! and start": a live run's "endpoint, identity, scopes, or task
//! authority"), and its digest.
//!
//! At admission the engine records, per connection the run's Program uses,
//! the digest of that connection's binding ([`binding_digests`]). Startup,
//! `apply` and `deployment-status` compare the digests of runs that have not
//! ended with the runtime file's ([`conflicts`]) and refuse a change
//! (`live-binding-conflict`); docs/service.md "Connection bindings" lists the
//! rule.
//!
//! The binding of a connection is this JSON object (absent keys do not
//! apply to the type):
//!
//! | key | types | value |
//! | --- | --- | --- |
//! | `bindingVersion` | all | `1` (this layout) |
//! | `type` | all | the connection type |
//! | `baseUrl` | all | as written (a trailing `/` is a change) |
//! | `profile` | breg, casework-review-producer | the profile (`null` when a Casework connection has none) |
//! | `producer` | casework-review-producer | the trusted producer key |
//! | `model` | decision | the decision model |
//! | `paths`, `queryParameters` | external-http | sorted, duplicates removed |
//! | `authorization` | all (`null` for an external-http connection without one) | `tokenEndpoint`, `clientId`, `scopes` (sorted, duplicates removed), `resource` (`null` when absent) |
//!
//! Not in the binding: `requestTimeoutMilliseconds`, `limits`, `resultCheckSeconds`,
//! Casework `completion` (its `recipientBinding` and token), and
//! `authorization.signingKeyRef`: none of them changes where a call goes or
//! as whom (the issuer knows the client by `clientId`, so a new signing key
//! is a rotation, not another identity), and no secret's content is ever
//! read here.
//!
//! The digest is `sha256:` + the lowercase hex SHA-256 of the binding's
//! canonical JSON ([`coordinator_ir::canonical`]).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::config::{Authorization, Connection};

/// The `bindingVersion` of the binding layout above. Changing the layout
/// changes every digest, so every live run would conflict: bump it only
/// with a migration of the recorded digests.
pub const BINDING_VERSION: u32 = 1;

/// A sorted, duplicate-free list (the order of scopes, paths and query
/// parameter names carries no meaning).
fn set(items: &[String]) -> Value {
    let sorted: BTreeSet<&str> = items.iter().map(String::as_str).collect();
    Value::Array(
        sorted
            .into_iter()
            .map(|s| Value::String(s.into()))
            .collect(),
    )
}

fn authorization(a: Option<&Authorization>) -> Value {
    match a {
        None => Value::Null,
        Some(a) => json!({
            "tokenEndpoint": a.token_endpoint,
            "clientId": a.client_id,
            "scopes": set(&a.scopes),
            "resource": a.resource,
        }),
    }
}

/// The binding of `connection`: the JSON object described in the module
/// documentation.
pub fn binding(connection: &Connection) -> Value {
    let mut b = json!({
        "bindingVersion": BINDING_VERSION,
        "type": connection.type_name(),
        "baseUrl": connection.base_url(),
        "authorization": authorization(connection.authorization()),
    });
    let extra = match connection {
        Connection::Breg(c) => json!({"profile": c.profile}),
        Connection::Messaging(_) | Connection::Scheduling(_) => json!({}),
        Connection::CaseworkReviewProducer(c) => {
            json!({"profile": c.profile, "producer": c.producer})
        }
        Connection::ExternalHttp(c) => json!({
            "paths": set(&c.paths),
            "queryParameters": set(&c.query_parameters),
        }),
        Connection::Decision(c) => json!({"model": c.model}),
    };
    if let (Some(b), Value::Object(extra)) = (b.as_object_mut(), extra) {
        b.extend(extra);
    }
    b
}

/// `sha256:<hex>` of the canonical JSON of [`binding`].
pub fn binding_digest(connection: &Connection) -> String {
    let canonical = coordinator_ir::canonical::to_vec(&binding(connection));
    format!("sha256:{}", hex::encode(Sha256::digest(&canonical)))
}

/// The binding digest of each of `names` that `connections` holds, by
/// connection name (a name it lacks is left out: the engine refuses such a
/// Program before it admits anything).
pub fn binding_digests<'a>(
    connections: &BTreeMap<String, Connection>,
    names: impl IntoIterator<Item = &'a String>,
) -> BTreeMap<String, String> {
    names
        .into_iter()
        .filter_map(|n| connections.get(n).map(|c| (n.clone(), binding_digest(c))))
        .collect()
}

/// How many runs that have not ended recorded `digest` for `connection`
/// (what the run store port's `live_bindings` returns).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveBinding {
    /// The connection name.
    pub connection: String,
    /// The recorded digest (`sha256:<hex>`).
    pub digest: String,
    /// Runs that have not ended with this digest for this connection (≥ 1).
    pub runs: u64,
}

/// A connection whose binding changed under runs that have not ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindingConflict {
    /// The connection name.
    pub connection: String,
    /// Runs that have not ended and recorded another digest for it (a run
    /// counts once per connection).
    pub runs: u64,
    /// Whether the runtime file no longer has the connection at all.
    pub missing: bool,
}

/// The connections of `live` whose recorded digest differs from the
/// runtime file's `connections` (or that the file no longer has), sorted
/// by name, with the count of runs each affects.
pub fn conflicts(
    live: &[LiveBinding],
    connections: &BTreeMap<String, Connection>,
) -> Vec<BindingConflict> {
    let mut out: BTreeMap<&str, BindingConflict> = BTreeMap::new();
    for l in live {
        let current = connections.get(&l.connection);
        if current.is_some_and(|c| binding_digest(c) == l.digest) {
            continue;
        }
        let entry = out
            .entry(l.connection.as_str())
            .or_insert_with(|| BindingConflict {
                connection: l.connection.clone(),
                runs: 0,
                missing: current.is_none(),
            });
        entry.runs = entry.runs.saturating_add(l.runs);
    }
    out.into_values().collect()
}

/// The first connection of `recorded` (a run's digests) whose binding in
/// `connections` differs or is gone, if any.
pub fn changed_connection<'a>(
    recorded: &'a BTreeMap<String, String>,
    connections: &BTreeMap<String, Connection>,
) -> Option<&'a str> {
    recorded
        .iter()
        .find(|(name, digest)| {
            connections
                .get(*name)
                .is_none_or(|c| binding_digest(c) != **digest)
        })
        .map(|(name, _)| name.as_str())
}

/// One line naming each conflict and its run count, for logs and
/// refusals, such as: connection `notices` (2 runs), connection `review`
/// (1 run, no longer in the runtime file). Never a payload or a setting's
/// value.
pub fn describe(conflicts: &[BindingConflict]) -> String {
    conflicts
        .iter()
        .map(|c| {
            let runs = if c.runs == 1 {
                "1 run".to_owned()
            } else {
                format!("{} runs", c.runs)
            };
            if c.missing {
                format!(
                    "connection `{}` ({runs}, no longer in the runtime file)",
                    c.connection
                )
            } else {
                format!("connection `{}` ({runs})", c.connection)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::config::{
        CaseworkConnection, ExternalHttpConnection, PlainConnection, ReviewCompletion, SecretRef,
    };

    fn auth() -> Authorization {
        Authorization {
            token_endpoint: "https://login.example.org/token".into(),
            client_id: "coordinator-notices".into(),
            signing_key_ref: SecretRef("secret:file/notices-key".into()),
            scopes: vec!["b".into(), "a".into()],
            resource: None,
        }
    }

    fn messaging() -> Connection {
        Connection::Messaging(PlainConnection {
            base_url: "https://messaging.example.org".into(),
            authorization: auth(),
            request_timeout_milliseconds: Some(5_000),
            limits: None,
        })
    }

    fn casework() -> CaseworkConnection {
        CaseworkConnection {
            base_url: "https://casework.example.org".into(),
            profile: Some("application-review".into()),
            producer: "coordinator".into(),
            authorization: auth(),
            completion: None,
            result_check_seconds: 900,
            request_timeout_milliseconds: None,
            limits: None,
        }
    }

    fn with(f: impl FnOnce(&mut PlainConnection)) -> Connection {
        let Connection::Messaging(mut c) = messaging() else {
            unreachable!()
        };
        f(&mut c);
        Connection::Messaging(c)
    }

    #[test]
    fn the_binding_is_canonical_and_its_digest_is_stable() {
        let text = coordinator_ir::canonical::to_string(&binding(&messaging()));
        assert_eq!(
            text,
            r#"{"authorization":{"clientId":"coordinator-notices","resource":null,"scopes":["a","b"],"tokenEndpoint":"https://login.example.org/token"},"baseUrl":"https://messaging.example.org","bindingVersion":1,"type":"messaging"}"#
        );
        let d = binding_digest(&messaging());
        assert!(d.starts_with("sha256:") && d.len() == 71, "{d}");
        assert_eq!(d, binding_digest(&messaging()));
    }

    #[test]
    fn where_and_as_whom_change_the_digest() {
        let base = binding_digest(&messaging());
        for changed in [
            with(|c| c.base_url = "https://other.example.org".into()),
            with(|c| c.authorization.token_endpoint = "https://other/token".into()),
            with(|c| c.authorization.client_id = "someone-else".into()),
            with(|c| c.authorization.scopes.push("c".into())),
            with(|c| c.authorization.resource = Some("https://api".into())),
            Connection::Scheduling(PlainConnection {
                base_url: "https://messaging.example.org".into(),
                authorization: auth(),
                request_timeout_milliseconds: Some(5_000),
                limits: None,
            }),
        ] {
            assert_ne!(binding_digest(&changed), base, "{changed:?}");
        }
        let cw = binding_digest(&Connection::CaseworkReviewProducer(casework()));
        let mut other = casework();
        other.producer = "another".into();
        assert_ne!(
            binding_digest(&Connection::CaseworkReviewProducer(other)),
            cw
        );
        let mut other = casework();
        other.profile = None;
        assert_ne!(
            binding_digest(&Connection::CaseworkReviewProducer(other)),
            cw
        );
        let ext = |paths: &[&str], query: &[&str]| {
            binding_digest(&Connection::ExternalHttp(ExternalHttpConnection {
                base_url: "https://api.example.org".into(),
                paths: paths.iter().map(|s| (*s).to_owned()).collect(),
                query_parameters: query.iter().map(|s| (*s).to_owned()).collect(),
                authorization: None,
                request_timeout_milliseconds: None,
                limits: None,
            }))
        };
        assert_ne!(ext(&["/a"], &[]), ext(&["/a", "/b"], &[]));
        assert_ne!(ext(&["/a"], &[]), ext(&["/a"], &["q"]));
        assert_eq!(ext(&["/b", "/a"], &["q"]), ext(&["/a", "/b", "/a"], &["q"]));
    }

    #[test]
    fn timeouts_checks_completion_and_key_references_do_not() {
        let base = binding_digest(&messaging());
        for same in [
            with(|c| c.request_timeout_milliseconds = None),
            with(|c| c.authorization.signing_key_ref = SecretRef("secret:file/new-key".into())),
            with(|c| c.authorization.scopes = vec!["a".into(), "b".into(), "a".into()]),
        ] {
            assert_eq!(binding_digest(&same), base, "{same:?}");
        }
        let cw = binding_digest(&Connection::CaseworkReviewProducer(casework()));
        let mut other = casework();
        other.result_check_seconds = 60;
        other.request_timeout_milliseconds = Some(1);
        other.completion = Some(ReviewCompletion {
            recipient_binding: "coordinator-v2".into(),
            bearer_token_ref: SecretRef("secret:file/t".into()),
        });
        assert_eq!(
            binding_digest(&Connection::CaseworkReviewProducer(other)),
            cw
        );
    }

    #[test]
    fn conflicts_count_runs_per_connection() {
        let mut connections = BTreeMap::new();
        connections.insert("notices".to_owned(), messaging());
        let current = binding_digest(&messaging());
        let live = [
            LiveBinding {
                connection: "notices".into(),
                digest: current.clone(),
                runs: 5,
            },
            LiveBinding {
                connection: "notices".into(),
                digest: "sha256:old".into(),
                runs: 2,
            },
            LiveBinding {
                connection: "notices".into(),
                digest: "sha256:older".into(),
                runs: 1,
            },
            LiveBinding {
                connection: "gone".into(),
                digest: "sha256:x".into(),
                runs: 1,
            },
        ];
        let found = conflicts(&live, &connections);
        assert_eq!(
            found,
            vec![
                BindingConflict {
                    connection: "gone".into(),
                    runs: 1,
                    missing: true
                },
                BindingConflict {
                    connection: "notices".into(),
                    runs: 3,
                    missing: false
                },
            ]
        );
        assert_eq!(
            describe(&found),
            "connection `gone` (1 run, no longer in the runtime file), connection `notices` (3 runs)"
        );
        assert!(conflicts(&live[..1], &connections).is_empty());
        let recorded = binding_digests(&connections, ["notices".to_owned()].iter());
        assert_eq!(changed_connection(&recorded, &connections), None);
        let mut moved = connections.clone();
        moved.insert(
            "notices".into(),
            with(|c| c.base_url = "https://elsewhere".into()),
        );
        assert_eq!(changed_connection(&recorded, &moved), Some("notices"));
        assert_eq!(
            changed_connection(&recorded, &BTreeMap::new()),
            Some("notices")
        );
    }
}
