//! What `move apply` (`commands/moves/apply.rs`) adds to a bulk action
//! (`bulk.rs`): the certificate it sends ([`Moving`]), the certificate's
//! workflow joined to the filter, the listings that find where each run
//! waits, why a run is skipped without a request, and the dry run's
//! count by reason. Pure data and text: the requests are `bulk.rs`'s.

use std::collections::{BTreeMap, HashMap};

use coordinator_api as api;
use serde_json::{json, Value};

use crate::report;
use crate::Format;

/// What `move apply` adds to a bulk action: the certificate it sends and
/// what the listing is held to.
pub(crate) struct Moving {
    /// The certificate as read (the request's `certificate`).
    pub certificate: serde_json::Map<String, Value>,
    /// The certificate's workflow (added to the filter).
    pub workflow: String,
    /// Revision A: only runs on it are moved.
    pub from_revision: String,
    /// Each wait step of A, and whether the certificate says it movable.
    pub waits: Vec<(String, bool)>,
}

/// Where each listed run waits: its wait step of A and whether the
/// certificate says it movable; a run not listed here is not at a wait.
pub(crate) type AtWait = HashMap<String, (String, bool)>;

/// A listing query: its pairs, in order.
type Query = Vec<(&'static str, String)>;

impl Moving {
    /// `query` with the certificate's workflow added; `Err` with the
    /// message when the filter names another workflow.
    pub(crate) fn with_workflow(&self, mut query: Query) -> Result<Query, String> {
        match query.iter().find(|(k, _)| *k == "workflow") {
            Some((_, w)) if *w != self.workflow => Err(format!(
                "the filter names workflow `{w}`, the certificate workflow `{}`",
                self.workflow
            )),
            Some(_) => Ok(query),
            None => {
                query.push(("workflow", self.workflow.clone()));
                Ok(query)
            }
        }
    }

    /// For each wait step of A: the step, whether it is movable, and
    /// `query` listing the runs `running` at it (`step` and `state` in
    /// place of the filter's own).
    pub(crate) fn wait_queries(
        &self,
        query: &[(&'static str, String)],
    ) -> Vec<(String, bool, Query)> {
        self.waits
            .iter()
            .map(|(wait, movable)| {
                let mut at: Query = query
                    .iter()
                    .filter(|(k, _)| *k != "step" && *k != "state")
                    .cloned()
                    .collect();
                at.push(("step", wait.clone()));
                at.push(("state", "running".to_owned()));
                (wait.clone(), *movable, at)
            })
            .collect()
    }

    /// Why `listed` is skipped without a request, or `None` when it is
    /// moved: on another revision than A, not `running`, not at a wait,
    /// or at a wait the certificate refuses.
    pub(crate) fn skip_reason(&self, listed: &api::RunStatus, at_wait: &AtWait) -> Option<String> {
        if listed.revision != self.from_revision {
            return Some("on another revision than the certificate's from".to_owned());
        }
        if listed.state != "running" {
            return Some(format!("state {}", listed.state));
        }
        match at_wait.get(&listed.run) {
            None => Some("not waiting (in a call)".to_owned()),
            Some((wait, false)) => Some(format!("at wait {wait}, which the certificate refuses")),
            Some((_, true)) => None,
        }
    }
}

/// `move apply --dry-run`: how many runs would move, how many are
/// skipped by reason (`skip` says why a run is), and the first `shown`
/// runs that would move.
pub(crate) fn print_dry_run(
    command: &str,
    format: Format,
    runs: &[api::RunStatus],
    shown: usize,
    skip: impl Fn(&api::RunStatus) -> Option<String>,
) {
    let mut skipped: BTreeMap<String, usize> = BTreeMap::new();
    let mut moving: Vec<&api::RunStatus> = Vec::new();
    for r in runs {
        match skip(r) {
            Some(why) => *skipped.entry(why).or_default() += 1,
            None => moving.push(r),
        }
    }
    let shown = &moving[..moving.len().min(shown)];
    let skipped_total: usize = skipped.values().sum();
    match format {
        Format::Json => {
            let reasons: Vec<Value> = skipped
                .iter()
                .map(|(why, n)| json!({"reason": why, "runs": n}))
                .collect();
            report::print_json_line(
                command,
                true,
                "dry-run",
                json!({"matched": runs.len(), "wouldMove": moving.len(),
                       "skipped": skipped_total, "skippedBy": reasons, "first": shown}),
            );
        }
        Format::Text => {
            outln!(
                "{command} --dry-run: {} runs match the filter: {} would move, {skipped_total} skipped; nothing was done",
                runs.len(),
                moving.len()
            );
            for (why, n) in &skipped {
                outln!("  skipped  {why:<56} {n}");
            }
            for r in shown {
                outln!(
                    "  {}  {}  {}  admitted {}",
                    r.run,
                    r.workflow,
                    r.state,
                    r.admitted_at
                );
            }
            if moving.len() > shown.len() {
                outln!("  ... and {} more", moving.len() - shown.len());
            }
        }
    }
}
