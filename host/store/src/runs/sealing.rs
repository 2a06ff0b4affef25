//! Payloads sealed with the state keyring, each bound to (database id, run
//! id, purpose, step): purposes `input`, `state`, `output`, `owner` and
//! `command` (step = the job's step).

use coordinator_runtime::keys::Binding;

use super::Store;
use crate::DatabaseError;

impl Store {
    /// The binding of a sealed value: (database id, run id, purpose, step).
    fn bind<'a>(&'a self, run_id: &'a str, purpose: &'a str, step: &'a str) -> Binding<'a> {
        Binding {
            database_id: &self.database_id,
            run_id,
            purpose,
            step,
        }
    }

    /// `value` as JSON, sealed with the active state key bound to (database
    /// id, `run_id`, `purpose`, `step`).
    pub(super) fn seal_json(
        &self,
        run_id: &str,
        purpose: &str,
        step: &str,
        value: &impl serde::Serialize,
    ) -> Vec<u8> {
        // The sealed values are plain data (JSON values, the VM state, an
        // owner) whose maps have string keys: serialising them cannot fail,
        // and sealing empty bytes instead would lose the value.
        #[allow(clippy::expect_used)]
        let bytes = serde_json::to_vec(value).expect("plain data always serialises");
        self.keyring.seal(&self.bind(run_id, purpose, step), &bytes)
    }

    /// A sealed JSON value opened with the key its binding names.
    ///
    /// # Errors
    /// `state-key-custody` (no such key), `state-tampered` (the seal or the
    /// JSON does not read back).
    pub(super) fn open_json<T: serde::de::DeserializeOwned>(
        &self,
        run_id: &str,
        purpose: &str,
        step: &str,
        sealed: &[u8],
    ) -> Result<T, DatabaseError> {
        let bytes = self
            .keyring
            .open(&self.bind(run_id, purpose, step), sealed)?;
        serde_json::from_slice(&bytes).map_err(|e| {
            DatabaseError::refused(
                "state-tampered",
                format!("a sealed {purpose} of run {run_id} does not read back: {e}"),
                "investigate the database",
            )
        })
    }
}
