//! The Program cache: the VM of each revision this process serves (the
//! active ones, loaded at construction) or a run needs (an older revision,
//! loaded from the store's definitions when a run asks for it).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use coordinator_ir::Definition;
use coordinator_ports::store::{Definitions, StoreError};
use coordinator_runtime::config::Connection;
use coordinator_vm::Vm;

use crate::config::EngineError;

/// Programs by revision, and the active revision of each workflow.
pub(crate) struct Programs {
    definitions: Arc<dyn Definitions>,
    connections: Arc<BTreeMap<String, Connection>>,
    loaded: RwLock<HashMap<String, Arc<Vm>>>,
    active: BTreeMap<String, String>,
}

impl Programs {
    /// The cache holding `active` (each the active revision of its
    /// workflow), loading older revisions from `definitions`.
    ///
    /// # Errors
    /// A Program the VM cannot load, two definitions of one workflow, or a
    /// connection a workflow names that `connections` lacks.
    pub(crate) fn new(
        definitions: Arc<dyn Definitions>,
        connections: Arc<BTreeMap<String, Connection>>,
        active_definitions: &[Definition],
    ) -> Result<Programs, EngineError> {
        let mut loaded = HashMap::new();
        let mut active = BTreeMap::new();
        for d in active_definitions {
            let vm = Vm::new(&d.program)
                .map_err(|e| EngineError(format!("workflow `{}`: {}", d.program.workflow, e.0)))?;
            for c in &d.program.connections {
                if !connections.contains_key(c) {
                    return Err(EngineError(format!(
                        "workflow `{}` uses connection `{c}`, which the runtime file lacks",
                        d.program.workflow
                    )));
                }
            }
            if active
                .insert(d.program.workflow.clone(), d.revision.clone())
                .is_some()
            {
                return Err(EngineError(format!(
                    "two packages serve workflow `{}`",
                    d.program.workflow
                )));
            }
            loaded.insert(d.revision.clone(), Arc::new(vm));
        }
        Ok(Programs {
            definitions,
            connections,
            loaded: RwLock::new(loaded),
            active,
        })
    }

    /// The active revision of each workflow.
    pub(crate) fn active_revisions(&self) -> &BTreeMap<String, String> {
        &self.active
    }

    /// The VM of `revision` if it is loaded (every active revision is).
    pub(crate) fn cached(&self, revision: &str) -> Option<Arc<Vm>> {
        self.loaded
            .read()
            .ok()
            .and_then(|p| p.get(revision).cloned())
    }

    /// The VM of `revision`: cached, or loaded from the store's definitions
    /// (every revision ever applied), so a run keeps its Program after its
    /// workflow moved on. `None` when no definition exists or it cannot be
    /// served (a connection the runtime file lacks: logged).
    ///
    /// # Errors
    /// The store's.
    pub(crate) async fn load(&self, revision: &str) -> Result<Option<Arc<Vm>>, StoreError> {
        if let Some(vm) = self.cached(revision) {
            return Ok(Some(vm));
        }
        let Some(d) = self.definitions.definition(revision).await? else {
            return Ok(None);
        };
        if d.revision != revision {
            tracing::error!(revision, "the stored definition names another revision");
            return Ok(None);
        }
        let vm = match Vm::new(&d.program) {
            Ok(vm) => Arc::new(vm),
            Err(e) => {
                tracing::error!(revision, error = %e.0, "a stored definition does not load");
                return Ok(None);
            }
        };
        if let Some(c) = d
            .program
            .connections
            .iter()
            .find(|c| !self.connections.contains_key(*c))
        {
            tracing::error!(revision, connection = %c, "a stored revision uses a connection the runtime file lacks");
            return Ok(None);
        }
        if let Ok(mut p) = self.loaded.write() {
            p.insert(revision.to_owned(), vm.clone());
        }
        tracing::info!(revision, workflow = %d.program.workflow, "loaded the Program of an earlier revision");
        Ok(Some(vm))
    }
}
