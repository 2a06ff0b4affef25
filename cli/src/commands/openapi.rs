//! `coordinatorctl openapi`: prints the OpenAPI 3.1 document of the
//! service's HTTP API (SPEC §8), generated from the `coordinator-api` types.
//! `docs/openapi.json` keeps a copy, checked by a test.

use crate::report::EXIT_OK;

/// The document's text: pretty JSON and a final newline, exactly as
/// committed in `docs/openapi.json`.
pub fn openapi_text() -> String {
    let mut text =
        serde_json::to_string_pretty(&coordinator_api::openapi::document()).unwrap_or_default();
    text.push('\n');
    text
}

/// Runs `openapi`; returns the exit code.
pub fn run() -> u8 {
    out!("{}", openapi_text());
    EXIT_OK
}
