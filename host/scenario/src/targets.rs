//! The revisions a scenarios file's cases move to ([`MoveTargets`], which
//! the caller compiles: this crate compiles nothing) and whether a step is
//! one where a run can move ([`is_movable_wait`]). Both the file's checks
//! and the runs read them; this module takes nothing from either, so the
//! crate's modules import one way (`moves.rs` re-exports both).

use std::collections::BTreeMap;

use coordinator_ir::Program;
use coordinator_vm::Vm;

/// The revisions the cases of one scenarios file move to, by `move.project`
/// as written: each loaded (a [`Vm`] and its revision) or the reason it
/// could not be (it does not compile, or its Program does not load).
#[derive(Debug, Default)]
pub struct MoveTargets {
    loaded: BTreeMap<String, Result<Target, String>>,
}

#[derive(Debug)]
struct Target {
    vm: Vm,
    revision: String,
}

impl MoveTargets {
    /// Records `project` (as written in `move.project`) as compiled to
    /// `program`, or as refused with `reason` (a sentence naming what is
    /// wrong: it does not compile, its files are missing); a Program that
    /// does not load is recorded as refused with the VM's reason.
    pub fn insert(&mut self, project: &str, program: Result<&Program, String>) {
        let loaded = program.and_then(|p| {
            Vm::new(p)
                .map(|vm| Target {
                    vm,
                    revision: p.revision(),
                })
                .map_err(|e| format!("its compiled workflow does not load: {}", e.0))
        });
        self.loaded.insert(project.to_owned(), loaded);
    }

    /// `project`'s loaded revision, or the reason it could not be loaded;
    /// `None` when it was never given.
    pub fn get(&self, project: &str) -> Option<Result<&Vm, &str>> {
        self.loaded.get(project).map(|t| match t {
            Ok(t) => Ok(&t.vm),
            Err(reason) => Err(reason.as_str()),
        })
    }

    /// `project`'s revision (`sha256:...`), when it was loaded.
    pub fn revision(&self, project: &str) -> Option<&str> {
        match self.loaded.get(project) {
            Some(Ok(t)) => Some(&t.revision),
            Some(Err(_)) | None => None,
        }
    }
}

/// Whether `step` of `program` is a step where a run can move (a
/// `wait-until` or `wait-for`: the VM's [`coordinator_vm::move_source`]).
pub fn is_movable_wait(program: &Program, step: &str) -> bool {
    coordinator_vm::move_source(program, step).is_ok()
}
