//! The runtime file's `telemetry` section and where the service exports
//! traces (docs/operations.md "Traces"): the section's endpoint, or else
//! the standard OpenTelemetry variables (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
//! `OTEL_EXPORTER_OTLP_ENDPOINT`, with `OTEL_EXPORTER_OTLP_PROTOCOL` unset or
//! `http/protobuf`), or nowhere: traces are off by default.
//!
//! Only the decision lives here, as a pure function of the section and a
//! lookup of variables; the service binary builds the exporter.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::codes;
use crate::net::{http_url, UrlFault};

/// `telemetry`: what the service exports besides its logs and metrics.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Telemetry {
    /// OpenTelemetry traces; absent: as the `OTEL_EXPORTER_OTLP_*`
    /// variables say (off when they name no endpoint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traces: Option<Traces>,
}

/// `telemetry.traces`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Traces {
    /// The OTLP/HTTP traces URL spans are posted to as protobuf, used as
    /// written (e.g. `https://collector.example.org:4318/v1/traces`):
    /// https, or http to a loopback host; no query string.
    #[schemars(extend("format" = "uri"))]
    pub endpoint: String,
}

/// The protocol this service exports in (OTLP over HTTP, protobuf bodies).
pub const PROTOCOL: &str = "http/protobuf";

/// Where traces go, and which setting said so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TracesExport {
    /// The OTLP/HTTP traces URL.
    pub endpoint: String,
    /// `telemetry.traces.endpoint`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` (the setting the endpoint came from).
    pub source: &'static str,
}

/// Why the `OTEL_*` variables name no usable export (the runtime file's
/// endpoint is checked by `check`, `coordinator.runtime.url` and
/// `coordinator.runtime.insecure-url`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TelemetryFault {
    /// The protocol variable names another protocol than [`PROTOCOL`].
    Protocol {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
    },
    /// The endpoint is not a URL the service may contact.
    Endpoint {
        /// The variable.
        variable: &'static str,
        /// What is wrong with it.
        fault: UrlFault,
    },
}

impl TelemetryFault {
    /// Its code: [`codes::RUNTIME_TELEMETRY_EXPORT`], the `reason` the
    /// service's startup refusal carries.
    pub fn code(&self) -> &'static str {
        codes::RUNTIME_TELEMETRY_EXPORT
    }
}

impl std::fmt::Display for TelemetryFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TelemetryFault::Protocol { variable, value } => write!(
                f,
                "{variable} is `{value}`; this service exports traces as `{PROTOCOL}` only"
            ),
            TelemetryFault::Endpoint { variable, fault } => {
                write!(f, "{variable} is not a usable URL: {fault}")
            }
        }
    }
}

/// Where traces go: `telemetry.traces.endpoint` when the runtime file sets
/// it (already checked), else `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as
/// written, else `OTEL_EXPORTER_OTLP_ENDPOINT` with `v1/traces` appended
/// to its path, each read through `var` (an empty value counts as unset);
/// `None` when none is set, or for the variables when
/// `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`.
///
/// # Errors
/// For the variables only: a protocol variable
/// (`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else `OTEL_EXPORTER_OTLP_PROTOCOL`)
/// other than [`PROTOCOL`], or an endpoint that [`http_url`] refuses.
pub fn traces_export(
    telemetry: Option<&Telemetry>,
    var: impl Fn(&str) -> Option<String>,
) -> Result<Option<TracesExport>, TelemetryFault> {
    if let Some(traces) = telemetry.and_then(|t| t.traces.as_ref()) {
        return Ok(Some(TracesExport {
            endpoint: traces.endpoint.clone(),
            source: "telemetry.traces.endpoint",
        }));
    }
    let var = |name: &str| var(name).filter(|v| !v.trim().is_empty());
    let disabled = var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim() == "true")
        || var("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim() == "none");
    if disabled {
        return Ok(None);
    }
    let (variable, endpoint) = if let Some(e) = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", e)
    } else if let Some(base) = var("OTEL_EXPORTER_OTLP_ENDPOINT") {
        let joined = if base.ends_with('/') {
            format!("{base}v1/traces")
        } else {
            format!("{base}/v1/traces")
        };
        ("OTEL_EXPORTER_OTLP_ENDPOINT", joined)
    } else {
        return Ok(None);
    };
    for protocol in [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ] {
        if let Some(value) = var(protocol) {
            if value.trim() != PROTOCOL {
                return Err(TelemetryFault::Protocol {
                    variable: protocol,
                    value,
                });
            }
            break;
        }
    }
    http_url(endpoint.trim(), false)
        .map_err(|fault| TelemetryFault::Endpoint { variable, fault })?;
    Ok(Some(TracesExport {
        endpoint: endpoint.trim().to_owned(),
        source: variable,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn nothing_configured_is_off() {
        assert_eq!(traces_export(None, vars(&[])), Ok(None));
        let empty = Telemetry { traces: None };
        assert_eq!(
            traces_export(Some(&empty), vars(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])),
            Ok(None)
        );
    }

    #[test]
    fn the_runtime_file_wins_over_the_variables() {
        let file = Telemetry {
            traces: Some(Traces {
                endpoint: "https://tempo.example.org/v1/traces".into(),
            }),
        };
        let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")];
        let got = traces_export(Some(&file), vars(&env)).expect("usable");
        assert_eq!(
            got.map(|e| (e.endpoint, e.source)),
            Some((
                "https://tempo.example.org/v1/traces".to_owned(),
                "telemetry.traces.endpoint"
            ))
        );
    }

    #[test]
    fn the_standard_variables_work_on_their_own() {
        let base = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ];
        let got = traces_export(None, vars(&base)).expect("usable");
        assert_eq!(
            got.map(|e| e.endpoint),
            Some("http://127.0.0.1:4318/v1/traces".to_owned())
        );
        let signal = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "https://collector.example.org/custom/traces",
            ),
        ];
        let got = traces_export(None, vars(&signal)).expect("usable");
        assert_eq!(
            got.map(|e| (e.endpoint, e.source)),
            Some((
                "https://collector.example.org/custom/traces".to_owned(),
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
            ))
        );
        let off = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_SDK_DISABLED", "true"),
        ];
        assert_eq!(traces_export(None, vars(&off)), Ok(None));
    }

    #[test]
    fn another_protocol_or_an_unusable_url_is_a_fault() {
        let grpc = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ];
        assert!(matches!(
            traces_export(None, vars(&grpc)),
            Err(TelemetryFault::Protocol {
                variable: "OTEL_EXPORTER_OTLP_PROTOCOL",
                ..
            })
        ));
        let plaintext = [(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://collector.example.org:4318/v1/traces",
        )];
        assert!(matches!(
            traces_export(None, vars(&plaintext)),
            Err(TelemetryFault::Endpoint {
                fault: UrlFault::Plaintext { .. },
                ..
            })
        ));
    }
}
