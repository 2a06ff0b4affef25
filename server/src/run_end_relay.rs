//! The relay of run ends between the processes of one deployment, for
//! `GET /v1/runs/{run}` with `Prefer: wait=N` (docs/decisions.md "Waiting
//! for a run's end"): the engine's `RunEndWaiters` says which runs its
//! callers wait for and which watched runs it ended ([`RunEndSignal`]);
//! this relay sends them as PostgreSQL notices
//! ([`Store::notify_run_ends`]) and hands the other processes' notices to
//! it, heard on one `LISTEN` connection ([`Store::listen_run_ends`]).
//! Under `poolingMode: transaction` there is no relay: a wait for a run
//! another process ends is answered at N.
//!
//! A notice is JSON: `{"from": <process>, "waiting": <run id>}` or
//! `{"from": <process>, "ended": <run id>}`; a process ignores its own.

use std::sync::Arc;
use std::time::Duration;

use coordinator_engine::{Engine, RunEndSignal};
use coordinator_store::{Heard, RunEndListener, Store};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch};

/// How long the relay waits before it tries a lost `LISTEN` connection
/// again.
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

/// One notice on the run-end channel.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Notice {
    /// The sending process ([`RunEndWaiters::process`](coordinator_engine::RunEndWaiters::process)).
    from: String,
    #[serde(flatten)]
    signal: Signal,
}

/// What a notice says, about which run.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Signal {
    /// A caller of the sender waits for this run.
    Waiting(String),
    /// The sender ended this run.
    Ended(String),
}

/// Relays run ends for `engine` through `store` until `stop` says stop.
/// Returns at once under `poolingMode: transaction`. A `LISTEN`
/// connection that cannot be made is tried again every
/// [`RECONNECT_PAUSE`]; each time it is made again, every wait of this
/// process reads its run anew ([`RunEndWaiters::recheck_all`](coordinator_engine::RunEndWaiters::recheck_all)), since
/// notices sent meanwhile are lost.
pub async fn relay(store: Arc<Store>, engine: Arc<Engine>, mut stop: watch::Receiver<bool>) {
    let listener = loop {
        match store.listen_run_ends().await {
            Ok(Some(listener)) => break listener,
            Ok(None) => {
                tracing::info!("poolingMode transaction: no LISTEN, so a wait for a run another process ends is answered at its N");
                return;
            }
            Err(e) => {
                tracing::warn!(code = "store-unavailable", error = %e, "cannot LISTEN for run ends; trying again");
                tokio::select! {
                    _ = tokio::time::sleep(RECONNECT_PAUSE) => {}
                    _ = stop.changed() => return,
                }
            }
        }
    };
    let (signals, mut to_send) = mpsc::unbounded_channel();
    if !engine.run_ends.attach_relay(signals) {
        return;
    }
    let hearing = tokio::spawn(hear(listener, engine.clone()));
    let process = engine.run_ends.process().to_owned();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            signal = to_send.recv() => {
                let Some(signal) = signal else { break };
                let store = store.clone();
                let payload = encode(&process, signal);
                // Sent apart, so a slow statement holds up no other notice.
                tokio::spawn(async move {
                    if let Err(e) = store.notify_run_ends(&payload).await {
                        tracing::warn!(code = "store-unavailable", error = %e, "a run-end notice was not sent; its wait is answered at its N");
                    }
                });
            }
        }
    }
    hearing.abort();
}

/// Hands every notice of another process to the engine's waits.
async fn hear(mut listener: RunEndListener, engine: Arc<Engine>) {
    loop {
        match listener.heard().await {
            Ok(Heard::Notice(payload)) => heard(&engine, &payload),
            Ok(Heard::Reconnected) => engine.run_ends.recheck_all(),
            Err(e) => {
                tracing::warn!(code = "store-unavailable", error = %e, "LISTEN for run ends failed; trying again");
                tokio::time::sleep(RECONNECT_PAUSE).await;
            }
        }
    }
}

/// One notice heard: another process's caller waits for a run (kept, and
/// the run read once: it may have ended here already), or another process
/// ended one. A notice that does not read is ignored.
fn heard(engine: &Arc<Engine>, payload: &str) {
    let Ok(notice) = serde_json::from_str::<Notice>(payload) else {
        tracing::warn!(payload, "a run-end notice that does not read; ignored");
        return;
    };
    if notice.from == engine.run_ends.process() {
        return;
    }
    match notice.signal {
        Signal::Ended(run) => engine.run_ends.ended_elsewhere(&run),
        Signal::Waiting(run) => {
            // Kept before the read: an end committed after the read is
            // relayed by its commit, one committed before it by the read.
            engine.run_ends.waited_elsewhere(&run);
            let engine = engine.clone();
            tokio::spawn(async move {
                if let Ok(Some(record)) = engine.operator.get(&run).await {
                    if record.state.status.is_terminal() {
                        engine.run_ends.run_ended(&run);
                    }
                }
            });
        }
    }
}

/// `signal` of `process` as a notice's payload.
fn encode(process: &str, signal: RunEndSignal) -> String {
    let signal = match signal {
        RunEndSignal::Waiting(run) => Signal::Waiting(run),
        RunEndSignal::Ended(run) => Signal::Ended(run),
    };
    let notice = Notice {
        from: process.to_owned(),
        signal,
    };
    serde_json::to_string(&notice).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notice_is_its_process_and_one_signal() {
        let text = encode("p1", RunEndSignal::Waiting("run-a".into()));
        assert_eq!(text, r#"{"from":"p1","waiting":"run-a"}"#);
        let read: Notice =
            serde_json::from_str(r#"{"from":"p2","ended":"run-b"}"#).expect("a notice");
        assert_eq!(
            read,
            Notice {
                from: "p2".into(),
                signal: Signal::Ended("run-b".into())
            }
        );
        assert!(serde_json::from_str::<Notice>(r#"{"from":"p2"}"#).is_err());
    }
}
