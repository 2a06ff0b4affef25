//! `coordinatorctl --runtime-config F plan|apply|deployment-status`
//! (seed 000 "Apply and start", "Change the workflows").
//!
//! Each command first checks the runtime file offline (Deployment mode, every
//! package verified against its digest), then talks to PostgreSQL:
//! `plan` and `deployment-status` with the runtime credential, `apply` alone
//! with the migration credential.
//!
//! Text output on stdout: `plan` prints `<workflow>: <action>` lines; `apply`
//! prints them and `status: applied`, `schemaVersion: 4`;
//! `deployment-status` prints `status: checked`, `schemaVersion: 4`, one
//! `<workflow>: <package digest>` line per workflow and the holds. A refusal
//! goes to stderr as `error[<code>]: <message>`, `reason: <finer code>` (for
//! `coordinator.deployment.refused`) and `next: <repair>`
//! ([`DatabaseError::deployment_command_code`]).
//! Exit codes: 0 ok, 1 refused, 2 usage, 3 database/file/secret unavailable.

use std::path::Path;

use clap::Args;
use coordinator_runtime::audit::AuditJournal;
use coordinator_runtime::secrets::SecretResolver;
use coordinator_runtime::{check_runtime_file, Mode, RuntimeConfig};
use coordinator_store::{self as store, DatabaseError, ErrorKind, PlanEntry};
use serde::Serialize;

use crate::report::{self, EXIT_OK, EXIT_REFUSED, EXIT_UNAVAILABLE, EXIT_USAGE};
use crate::Format;

/// Arguments of `plan` and `apply`.
#[derive(Args, Debug)]
pub struct PlanArgs {
    /// The runtime file; the same as `coordinatorctl --runtime-config F
    /// plan`.
    #[arg(long, value_name = "FILE")]
    pub runtime_config: Option<std::path::PathBuf>,
    /// Remove an active workflow the runtime file no longer lists (refused
    /// while it has runs that have not ended). Repeatable.
    #[arg(long = "remove-workflow", value_name = "ID")]
    pub remove_workflow: Vec<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Arguments of `deployment-status`.
#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The runtime file; the same as `coordinatorctl --runtime-config F
    /// deployment-status`.
    #[arg(long, value_name = "FILE")]
    pub runtime_config: Option<std::path::PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Which deployment command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// `plan`
    Plan,
    /// `apply`
    Apply,
    /// `deployment-status`
    Status,
}

impl Which {
    fn name(self) -> &'static str {
        match self {
            Which::Plan => "plan",
            Which::Apply => "apply",
            Which::Status => "deployment-status",
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ErrorJson<'a> {
    code: String,
    /// The finer code of a `coordinator.deployment.refused`.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    message: &'a str,
    next: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Extra<'a, T: Serialize> {
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    result: Option<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorJson<'a>>,
}

fn exit_for(e: &DatabaseError) -> u8 {
    match e.kind {
        ErrorKind::Unavailable => EXIT_UNAVAILABLE,
        ErrorKind::Refused => EXIT_REFUSED,
    }
}

fn print_error(e: &DatabaseError) {
    let (code, reason) = e.deployment_command_code();
    errln!("error[{code}]: {}", e.message);
    if let Some(reason) = reason {
        errln!("  reason: {reason}");
    }
    errln!("  next: {}", e.next);
}

fn print_entries(entries: &[PlanEntry]) {
    for e in entries {
        outln!("{}: {}", e.workflow, e.action.as_str());
    }
}

/// Runs `plan`, `apply` or `deployment-status`; returns the exit code.
pub fn run(which: Which, runtime_config: Option<&Path>, remove: &[String], format: Format) -> u8 {
    let Some(path) = runtime_config else {
        errln!(
            "coordinatorctl {}: --runtime-config FILE is required (before the command)",
            which.name()
        );
        return EXIT_USAGE;
    };
    let display = path.to_string_lossy().into_owned();
    let mut checked = check_runtime_file(path, &display, None, Mode::Deployment);
    // A file that pins no package is how a workflow is dropped: the
    // deployment commands answer it with `deployment.workflow-unlisted` (or
    // remove it with `--remove-workflow`), so `no-packages` does not stop them.
    checked
        .diagnostics
        .retain(|d| d.code != coordinator_runtime::codes::RUNTIME_NO_PACKAGES);
    let config = match (&checked.config, checked.is_valid()) {
        (Some(c), true) => c.clone(),
        _ => {
            let code = if checked.resource_unavailable {
                EXIT_UNAVAILABLE
            } else {
                EXIT_REFUSED
            };
            match format {
                Format::Json => report::print_json(
                    which.name(),
                    false,
                    "refused",
                    &checked.diagnostics,
                    Extra::<()> {
                        result: None,
                        error: None,
                    },
                ),
                Format::Text => report::print_diagnostics(&checked.diagnostics),
            }
            return code;
        }
    };
    match report::io_runtime() {
        Ok(runtime) => runtime.block_on(run_async(which, &config, remove, format)),
        Err(exit) => exit,
    }
}

async fn run_async(which: Which, config: &RuntimeConfig, remove: &[String], format: Format) -> u8 {
    let resolver = SecretResolver::new(&config.secret_providers);
    match which {
        Which::Plan => {
            let result = store::plan(config, &resolver, remove).await;
            let (plan, error) = match result {
                Ok(mut p) => {
                    let refusal = p.refusal.take();
                    (Some(p), refusal)
                }
                Err(e) => (None, Some(e)),
            };
            finish(which, format, plan, error, |p| print_entries(&p.entries))
        }
        Which::Apply => {
            let Some(deployment) = &config.deployment else {
                return EXIT_REFUSED;
            };
            let journal = match AuditJournal::open(Path::new(&deployment.audit_file)) {
                Ok(j) => j,
                Err(e) => {
                    let err = DatabaseError::unavailable(
                        coordinator_store::codes::AUDIT_UNAVAILABLE,
                        format!(
                            "cannot create this process's audit journal next to {}: {e}",
                            deployment.audit_file
                        ),
                        "make the audit storage writable by this user, or run apply where it is",
                    );
                    return finish::<()>(which, format, None, Some(err), |_| {});
                }
            };
            let result = store::apply(config, &resolver, remove, &journal).await;
            // A refused apply wrote no record: leave no empty journal file.
            // (Failing to remove it changes nothing the operator relies on.)
            let _ = journal.discard_if_empty();
            let (report, error) = match result {
                Ok(r) => (Some(r), None),
                Err(e) => (None, Some(e)),
            };
            finish(which, format, report, error, |r| {
                print_entries(&r.entries);
                outln!("status: applied");
                outln!("schemaVersion: {}", r.schema_version);
            })
        }
        Which::Status => {
            let result = store::deployment_status(config, &resolver).await;
            let (status, error) = match result {
                Ok(s) => (Some(s), None),
                Err(e) => (None, Some(e)),
            };
            finish(which, format, status, error, |s| {
                outln!("status: checked");
                outln!("schemaVersion: {}", s.schema_version);
                outln!("databaseId: {}", s.database_id);
                for w in &s.workflows {
                    outln!("{}: {}", w.workflow, w.package_digest);
                    outln!("  revision: {}", w.revision);
                }
                outln!("restoreHold: {}", s.restore_hold);
                outln!("admissionHold: {}", s.admission_hold);
                outln!("activeStateKey: {}", s.active_state_key);
            })
        }
    }
}

fn finish<T: Serialize>(
    which: Which,
    format: Format,
    result: Option<T>,
    error: Option<DatabaseError>,
    text: impl FnOnce(&T),
) -> u8 {
    let code = error.as_ref().map_or(EXIT_OK, exit_for);
    match format {
        Format::Json => {
            let status = match (which, &error) {
                (_, Some(_)) => "refused",
                (Which::Plan, None) => "planned",
                (Which::Apply, None) => "applied",
                (Which::Status, None) => "checked",
            };
            report::print_json(
                which.name(),
                error.is_none(),
                status,
                &[],
                Extra {
                    result: result.as_ref(),
                    error: error.as_ref().map(|e| {
                        let (code, reason) = e.deployment_command_code();
                        ErrorJson {
                            code,
                            reason,
                            message: &e.message,
                            next: &e.next,
                        }
                    }),
                },
            );
        }
        Format::Text => {
            if let Some(r) = &result {
                text(r);
            }
            if let Some(e) = &error {
                print_error(e);
            }
        }
    }
    code
}
