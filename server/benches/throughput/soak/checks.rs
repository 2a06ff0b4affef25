//! The soak's checks after the drain: every admitted run read back (it
//! exists and is `finished` with a message of its own, or held in
//! `attention`, and where those stand), and Messaging's requests since the
//! soak began, from the sandbox's log (no key performed twice, no earlier
//! key again, as many keys as the runs that may have sent one).

use std::io::{BufRead, Seek};

use super::shared::Soak;
use super::*;

/// What the checks after the drain found.
pub(super) struct Checked {
    /// How many runs were admitted.
    pub(super) admitted: usize,
    /// What reading every admitted run back found.
    pub(super) verified: Verified,
    /// Admitted runs read back `finished`.
    pub(super) finished: usize,
    /// Admitted runs read back held in `attention`.
    pub(super) held: usize,
    /// The summary line of Messaging's requests (or that they were not
    /// checked).
    pub(super) messages: String,
    /// What failed, in the order checked.
    pub(super) failures: Vec<String>,
}

/// The checks after the drain, in this order: every run started was
/// admitted (`started` of them), none was still running after the drain
/// (`still_running`), every admitted run reads back as it should (see
/// `verify`), and, with a sandbox log whose soak part begins at byte
/// `log_start`, Messaging's requests (read 1.5 s after the drain, the
/// sandbox printing them every half second).
pub(super) async fn check_every_admitted_run_and_message(
    s: &Arc<Soak>,
    a: &SoakArgs,
    started: usize,
    still_running: bool,
    log_start: Option<u64>,
) -> Result<Checked, Failure> {
    let mut failures: Vec<String> = Vec::new();
    let admitted: Vec<(usize, String)> = std::mem::take(&mut *s.admitted.lock().unwrap());
    let not_admitted = s.not_admitted.lock().unwrap().clone();
    if !not_admitted.is_empty() {
        failures.push(format!(
            "{} of {started} runs not admitted, e.g. {}",
            not_admitted.len(),
            not_admitted
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    if still_running {
        failures.push(format!(
            "runs still running {} s after the admissions stopped",
            a.drain_seconds
        ));
    }
    let v = verify(s, &admitted).await?;
    failures.extend(v.failures.iter().cloned());
    let finished = v.states.get("finished").copied().unwrap_or(0);
    let held = v.states.get("attention").copied().unwrap_or(0);
    let messages = match (&a.target.sandbox_log, log_start) {
        (Some(file), Some(from)) => {
            // The sandbox prints Messaging's requests every half second.
            tokio::time::sleep(Duration::from_millis(1500)).await;
            let (line, bad) = check_soak_messages(file, from, finished, held)?;
            failures.extend(bad);
            line
        }
        _ => "messages not checked (no --sandbox-log)".to_owned(),
    };
    Ok(Checked {
        admitted: admitted.len(),
        verified: v,
        finished,
        held,
        messages,
        failures,
    })
}

/// What one reading task found: runs by state; the runs in an
/// unexpected state (how many, the first few); the held runs; the
/// finished runs' message ids.
#[derive(Default)]
struct Seen {
    states: BTreeMap<String, usize>,
    odd: BTreeMap<String, (usize, Vec<String>)>,
    held: Vec<String>,
    message_ids: Vec<String>,
}

impl Seen {
    fn odd(&mut self, what: String, run: &str) {
        let e = self.odd.entry(what).or_default();
        e.0 += 1;
        if e.1.len() < 3 {
            e.1.push(run.to_owned());
        }
    }
}

/// What reading every run back found.
pub(super) struct Verified {
    /// The admitted runs by state read back (`missing` for a 404).
    states: BTreeMap<String, usize>,
    /// The summary line: how many admitted runs, how many in each state.
    pub(super) line: String,
    /// Where the held runs stand (a line each).
    pub(super) held_where: Vec<String>,
    /// What failed.
    failures: Vec<String>,
}

/// Reads every admitted run back (32 at a time): it must exist and be
/// `finished` with `message-accepted` and a `messageId` of its own, or in
/// `attention` (where those stand: their steps' effects, from inspect).
async fn verify(s: &Arc<Soak>, admitted: &[(usize, String)]) -> Result<Verified, Failure> {
    let (all, message_ids) = read_every_admitted_run_back(s, admitted).await?;
    let (states, held) = (all.states, all.held);
    let mut failures = Vec::new();
    for (what, (n, examples)) in &all.odd {
        failures.push(format!(
            "{n} admitted runs {what}{}, e.g. {}",
            if what == "missing" { " (lost)" } else { "" },
            examples
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let shared = message_ids.values().filter(|n| **n > 1).count();
    if shared > 0 {
        failures.push(format!(
            "{shared} Messaging message ids are the outcome of more than one run"
        ));
    }
    let held_where = where_the_held_runs_stand(s, &held).await?;
    let line = format!(
        "{} admitted runs: {}",
        admitted.len(),
        states
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(Verified {
        states,
        line,
        held_where,
        failures,
    })
}

/// Reads every admitted run back (32 at a time, see `verify`): what the
/// readers found together, and how many runs have each message id.
async fn read_every_admitted_run_back(
    s: &Arc<Soak>,
    admitted: &[(usize, String)],
) -> Result<(Seen, HashMap<String, usize>), Failure> {
    let runs: Arc<Vec<String>> = Arc::new(admitted.iter().map(|(_, r)| r.clone()).collect());
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..32 {
        let (s, runs, next) = (s.clone(), runs.clone(), next.clone());
        tasks.spawn(async move {
            let mut seen = Seen::default();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(run) = runs.get(i) else {
                    return Ok::<_, Failure>(seen);
                };
                let (status, v) = s.get_retrying(i, &format!("/v1/runs/{run}")).await?;
                let state = match status {
                    200 => v["state"].as_str().unwrap_or("?").to_owned(),
                    404 => "missing".to_owned(),
                    other => format!("answered {other}"),
                };
                let outcome = v["outcome"].as_str().unwrap_or("");
                let message = v["output"]["messageId"].as_str().unwrap_or("");
                *seen.states.entry(state.clone()).or_insert(0) += 1;
                match state.as_str() {
                    "finished" if outcome == "message-accepted" && !message.is_empty() => {
                        seen.message_ids.push(message.to_owned());
                    }
                    "finished" => seen.odd(format!("finished {outcome} without a messageId"), run),
                    "attention" => seen.held.push(run.clone()),
                    _ => seen.odd(state, run),
                }
            }
        });
    }
    let mut all = Seen::default();
    let mut message_ids: HashMap<String, usize> = HashMap::new();
    while let Some(joined) = tasks.join_next().await {
        let seen = joined.map_err(|e| e.to_string())??;
        for (k, n) in seen.states {
            *all.states.entry(k).or_insert(0) += n;
        }
        for (k, (n, examples)) in seen.odd {
            let e = all.odd.entry(k).or_default();
            e.0 += n;
            e.1.extend(examples);
        }
        all.held.extend(seen.held);
        for m in seen.message_ids {
            *message_ids.entry(m).or_insert(0) += 1;
        }
    }
    Ok((all, message_ids))
}

/// Where the held runs stand (the first 200 of them): how many have each
/// list of visited steps' effects (from inspect), then a few of their ids.
async fn where_the_held_runs_stand(s: &Soak, held: &[String]) -> Result<Vec<String>, Failure> {
    // Where the held runs stand: each visited step's effect, from inspect.
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    for (i, run) in held.iter().take(200).enumerate() {
        let (_, v) = s
            .get_retrying(i, &format!("/v1/runs/{run}/inspect"))
            .await?;
        let steps: Vec<String> = v["steps"]
            .as_array()
            .map(|steps| {
                steps
                    .iter()
                    .filter_map(|st| {
                        let effect = st["effect"].as_str()?;
                        Some(format!(
                            "{} {effect} ({} attempts)",
                            st["name"].as_str().unwrap_or("?"),
                            st["attempts"].as_u64().unwrap_or(0)
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        *by.entry(steps.join(", ")).or_insert(0) += 1;
    }
    let mut held_where: Vec<String> = by.into_iter().map(|(k, n)| format!("{n} x {k}")).collect();
    if !held.is_empty() {
        held_where.push(format!(
            "e.g. {}",
            held.iter().take(5).cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    Ok(held_where)
}

/// Messaging's requests in the sandbox's log from byte `from` on, against
/// the keys before it: a summary line and the failures.
fn check_soak_messages(
    file: &PathBuf,
    from: u64,
    finished: usize,
    held: usize,
) -> Result<(String, Vec<String>), Failure> {
    let before = message_keys(file, 0, Some(from))?;
    let after = message_keys(file, from, None)?;
    let twice = after.values().filter(|(_, p)| *p > 1).count();
    let replayed = after.values().filter(|(n, p)| *n > 1 && *p <= 1).count();
    let again = after.keys().filter(|k| before.contains_key(*k)).count();
    let keys = after.len();
    let mut failures = Vec::new();
    if twice > 0 {
        failures.push(format!(
            "{twice} Messaging keys performed more than once (a message sent twice)"
        ));
    }
    if again > 0 {
        failures.push(format!(
            "{again} Messaging keys of an earlier phase requested again"
        ));
    }
    if keys < finished {
        failures.push(format!(
            "{keys} Messaging keys for {finished} finished runs: a finished run's message is missing"
        ));
    }
    if keys > finished + held {
        failures.push(format!(
            "{keys} Messaging keys for {finished} finished and {held} held runs: more messages than runs"
        ));
    }
    Ok((
        format!(
            "{keys} Messaging keys for {finished} finished + {held} held runs (between {finished} and {}), none performed twice{}, {replayed} requested again and answered from Messaging's record",
            finished + held,
            if twice > 0 { " NOT TRUE" } else { "" }
        ),
        failures,
    ))
}

/// Messaging's requests by key, from byte `from` to byte `to` (or the
/// end) of the sandbox's log: (requests, the highest "performed" count).
fn message_keys(file: &PathBuf, from: u64, to: Option<u64>) -> Result<Messages, Failure> {
    let mut f = std::fs::File::open(file)
        .map_err(|e| format!("cannot read the sandbox log {}: {e}", file.display()))?;
    f.seek(std::io::SeekFrom::Start(from))
        .map_err(|e| e.to_string())?;
    let mut reader = std::io::BufReader::new(f);
    let mut at = from;
    let mut out: Messages = HashMap::new();
    let mut line = String::new();
    loop {
        if to.is_some_and(|to| at >= to) {
            break;
        }
        line.clear();
        let n = reader.read_line(&mut line).map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        at += n as u64;
        super::super::meter::count_message_line(&mut out, &line);
    }
    Ok(out)
}
