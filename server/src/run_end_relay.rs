//! The relay of run ends between the processes of one deployment, for
//! `GET /v1/runs/{run}` with `Prefer: wait=N` (docs/decisions.md "Waiting
//! for a run's end"): the engine's `RunEndWaiters` says which runs its
//! callers wait for and which watched runs it ended ([`RunEndSignal`]);
//! this relay sends them as PostgreSQL notices
//! ([`RunEndChannel::notify_run_ends`]) and hands the other processes' notices to
//! it, heard on one `LISTEN` connection ([`RunEndChannel::listen_run_ends`]).
//! Under `poolingMode: transaction` there is no relay: a wait for a run
//! another process ends is answered at N.
//!
//! A notice is JSON: `{"from": <process>, "waiting": <run id>}`,
//! `{"from": <process>, "ended": <run id>}`, or a process's presence:
//! `{"from": <process>, "hello": true}` when it starts hearing (each
//! process that hears it answers `{"hello": false}`), `{"gone": true}`
//! when it stops. A process tells its waits only while it knows another
//! ([`RunEndWaiters::others_hear`](coordinator_engine::RunEndWaiters::others_hear)),
//! so a lone process sends one notice when it starts and one when it
//! stops, none for its runs. A process ignores its own notices.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use coordinator_engine::{Engine, RunEndSignal};
use coordinator_ports::{Heard, RunEndChannel, RunEndHearing};
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
    /// The sender hears the channel; `true` from a process that has just
    /// started (answered with `false` by each that hears it).
    Hello(bool),
    /// The sender stops hearing the channel.
    Gone(bool),
}

/// Relays run ends for `engine` through `channel` (the store's run-end
/// channel, the only port the relay takes) until `stop` says stop.
/// Returns at once under `poolingMode: transaction`. A `LISTEN`
/// connection that cannot be made is tried again every
/// second (`RECONNECT_PAUSE`); each time it is made again, every wait of this
/// process reads its run anew ([`RunEndWaiters::recheck_all`](coordinator_engine::RunEndWaiters::recheck_all)), since
/// notices sent meanwhile are lost.
pub async fn relay(
    channel: Arc<dyn RunEndChannel>,
    engine: Arc<Engine>,
    mut stop: watch::Receiver<bool>,
) {
    let listener = loop {
        match channel.listen_run_ends().await {
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
    let process = engine.run_ends.process().to_owned();
    let (presence, mut to_announce) = mpsc::unbounded_channel();
    let hearing = tokio::spawn(hear(listener, engine.clone(), presence));
    send(&channel, encode(&process, Signal::Hello(true)));
    loop {
        let signal = tokio::select! {
            _ = stop.changed() => break,
            signal = to_send.recv() => match signal {
                Some(RunEndSignal::Waiting(run)) => Signal::Waiting(run),
                Some(RunEndSignal::Ended(run)) => Signal::Ended(run),
                None => break,
            },
            answer = to_announce.recv() => match answer {
                Some(signal) => signal,
                None => break,
            },
        };
        send(&channel, encode(&process, signal));
    }
    hearing.abort();
    // Said before the process stops (within the drain), so the others stop
    // telling their waits when it was the last to hear them.
    if let Err(e) = channel
        .notify_run_ends(&encode(&process, Signal::Gone(true)))
        .await
    {
        tracing::warn!(code = "store-unavailable", error = %e, "the run-end channel was not told this process stops");
    }
}

/// Sends `payload` on the run-end channel in a task of its own, so a slow
/// statement holds up no other notice.
fn send(channel: &Arc<dyn RunEndChannel>, payload: String) {
    let channel = channel.clone();
    tokio::spawn(async move {
        if let Err(e) = channel.notify_run_ends(&payload).await {
            tracing::warn!(code = "store-unavailable", error = %e, "a run-end notice was not sent; its wait is answered at its N");
        }
    });
}

/// Hands every notice of another process to the engine's waits; the
/// presence answers to send go to `presence`.
async fn hear(
    mut listener: Box<dyn RunEndHearing>,
    engine: Arc<Engine>,
    presence: mpsc::UnboundedSender<Signal>,
) {
    let mut others: HashSet<String> = HashSet::new();
    loop {
        match listener.heard().await {
            Ok(Heard::Notice(payload)) => heard(&engine, &payload, &mut others, &presence),
            Ok(Heard::Reconnected) => engine.run_ends.recheck_all(),
            Err(e) => {
                tracing::warn!(code = "store-unavailable", error = %e, "LISTEN for run ends failed; trying again");
                tokio::time::sleep(RECONNECT_PAUSE).await;
            }
        }
    }
}

/// One notice heard: another process's caller waits for a run (kept, and
/// the run read once: it may have ended here already), another process
/// ended one, or a process came or went (`others`, the processes known to
/// hear). A notice that does not read is ignored.
fn heard(
    engine: &Arc<Engine>,
    payload: &str,
    others: &mut HashSet<String>,
    presence: &mpsc::UnboundedSender<Signal>,
) {
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
        Signal::Hello(new) => {
            if new {
                let _ = presence.send(Signal::Hello(false));
            }
            // A process learnt of is told every wait held now.
            if others.insert(notice.from) {
                engine.run_ends.others_hear();
            }
        }
        Signal::Gone(_) => {
            others.remove(&notice.from);
            if others.is_empty() {
                engine.run_ends.others_gone();
            }
        }
    }
}

/// `signal` of `process` as a notice's payload.
fn encode(process: &str, signal: Signal) -> String {
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
        let text = encode("p1", Signal::Waiting("run-a".into()));
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
        assert_eq!(
            encode("p1", Signal::Hello(true)),
            r#"{"from":"p1","hello":true}"#
        );
    }
}
