//! The header (`apiVersion`, `kind`) and the typed reading of the file,
//! with a serde fault located at the offending node.

use coordinator_source::{Diagnostic, YamlDocument};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::Checker;
use crate::codes;
use crate::config::{
    BregConnection, CaseworkConnection, DecisionConnection, ExternalHttpConnection,
    PlainConnection, RuntimeConfig, API_VERSION, KIND,
};

impl Checker<'_> {
    /// Header, then typed reading.
    pub(super) fn read(&mut self, doc: &YamlDocument) -> Option<RuntimeConfig> {
        if let Value::Object(map) = &doc.value {
            let mut header_ok = true;
            for (key, expected, code) in [
                ("apiVersion", API_VERSION, codes::RUNTIME_API_VERSION),
                ("kind", KIND, codes::RUNTIME_KIND),
            ] {
                match map.get(key) {
                    Some(Value::String(s)) if s == expected => {}
                    Some(other) => {
                        header_ok = false;
                        let shown = match other {
                            Value::String(s) => format!("`{s}`"),
                            _ => "a non-string value".to_owned(),
                        };
                        self.err(
                            code,
                            doc.locate(&format!("/{key}")),
                            format!("`{key}` is {shown}; this reader supports only `{expected}`"),
                            format!("Write `{key}: {expected}` and bring the file to that format."),
                        );
                    }
                    None => {}
                }
            }
            if !header_ok {
                return None;
            }
        }
        match doc.deserialize::<RuntimeConfig>() {
            Ok(cfg) => Some(cfg),
            Err(d) => {
                let d = self.refine_connection_error(d);
                self.diags.push(d);
                None
            }
        }
    }

    /// serde reads `connections` through an internally tagged enum, which
    /// loses the path below the connection; read that one connection again
    /// as its variant to locate the fault precisely.
    fn refine_connection_error(&self, d: Diagnostic) -> Diagnostic {
        let Some(rest) = d.pointer.strip_prefix("/connections/") else {
            return d;
        };
        let name_token = rest.split('/').next().unwrap_or_default();
        let base = format!("/connections/{name_token}");
        let Some(Value::Object(conn)) = self.doc.value.pointer(&base) else {
            return d;
        };
        let mut body = conn.clone();
        let ty = body.remove("type");
        let body = Value::Object(body);
        let refined = match ty.as_ref().and_then(Value::as_str) {
            Some("breg") => self.reread::<BregConnection>(&base, body),
            Some("messaging" | "scheduling") => self.reread::<PlainConnection>(&base, body),
            Some("casework-review-producer") => self.reread::<CaseworkConnection>(&base, body),
            Some("external-http") => self.reread::<ExternalHttpConnection>(&base, body),
            Some("decision") => self.reread::<DecisionConnection>(&base, body),
            Some(_) => {
                let mut d = d;
                let at = self.doc.locate(&format!("{base}/type"));
                d.pointer = at.pointer;
                d.line = at.line;
                d.column = at.column;
                return d;
            }
            None => None,
        };
        refined.unwrap_or(d)
    }

    fn reread<T: DeserializeOwned>(&self, base: &str, body: Value) -> Option<Diagnostic> {
        coordinator_source::yaml::read_typed::<T>(body)
            .err()
            .map(|fault| self.doc.typed_diagnostic(base, &fault))
    }
}
