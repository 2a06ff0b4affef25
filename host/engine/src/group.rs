//! Group commit in the engine: commits (and "mark sending" fences) that
//! arrive while earlier ones are being written are written together, in
//! one store call ([`JobQueue::commit_batch`],
//! [`JobQueue::mark_sending_batch`]), so runs finishing at the same time
//! share one round trip, one transaction and one WAL flush.
//!
//! There is no timer and no batching task: a caller queues its item and,
//! if the group's slot is free ([`GROUP_SLOTS`]), takes the whole queue (up
//! to a cap) and writes it; otherwise it waits for whoever took its item to
//! answer. Alone, an item is written at once; under load, the queue that
//! builds up while the slot is busy becomes the next batch. The write runs
//! in a task of its own, so a caller that gives up (an HTTP client gone)
//! never strands the answers of the others in its batch.
//!
//! [`JobQueue::commit_batch`]: coordinator_ports::store::JobQueue::commit_batch
//! [`JobQueue::mark_sending_batch`]: coordinator_ports::store::JobQueue::mark_sending_batch

use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::{oneshot, Semaphore};

/// Batches of one group written at once (each in its own store call):
/// one. While it is written the queue builds up into the next batch, so
/// under load each statement carries more items: measured with
/// `scripts/bench.sh` on 2 cores, 3 slots gave 1.42 statements and 2.9 ms
/// of PostgreSQL CPU per run (308 runs/s), 1 slot 0.58 and 1.4 ms (454
/// runs/s), with the same one-client latency (docs/service.md).
pub(crate) const GROUP_SLOTS: usize = 1;

/// The most items one batch takes.
pub(crate) const GROUP_MAX: usize = 64;

/// A queue of items of type `T` answered with `R`, written in groups.
pub(crate) struct Group<T, R> {
    queue: Mutex<Vec<(T, oneshot::Sender<R>)>>,
    slots: Arc<Semaphore>,
    max: usize,
}

impl<T: Send + 'static, R: Send + 'static> Group<T, R> {
    /// A group with `slots` batches in flight at most, each of `max` items
    /// at most (both at least 1).
    pub(crate) fn new(slots: usize, max: usize) -> Self {
        Group {
            queue: Mutex::new(Vec::new()),
            slots: Arc::new(Semaphore::new(slots.max(1))),
            max: max.max(1),
        }
    }

    /// Queues `item` and returns its answer: `write` is called with a batch
    /// (in queue order) and must answer each item in the same order.
    /// `lost()` answers an item whose batch ended without answering it (a
    /// panic in `write`, or fewer answers than items).
    pub(crate) async fn submit<W, F>(&self, item: T, write: W, lost: impl Fn() -> R) -> R
    where
        W: Fn(Vec<T>) -> F,
        F: Future<Output = Vec<R>> + Send + 'static,
    {
        let (sender, mut answer) = oneshot::channel();
        match self.queue.lock() {
            Ok(mut queue) => queue.push((item, sender)),
            Err(_) => return lost(),
        }
        loop {
            let permit = tokio::select! {
                biased;
                answered = &mut answer => return answered.unwrap_or_else(|_| lost()),
                permit = self.slots.clone().acquire_owned() => match permit {
                    Ok(permit) => permit,
                    Err(_) => return lost(),
                },
            };
            let batch: Vec<(T, oneshot::Sender<R>)> = match self.queue.lock() {
                Ok(mut queue) => {
                    let n = queue.len().min(self.max);
                    queue.drain(..n).collect()
                }
                Err(_) => Vec::new(),
            };
            if batch.is_empty() {
                // Another caller took this item: its batch answers it.
                drop(permit);
                return answer.await.unwrap_or_else(|_| lost());
            }
            let (items, senders): (Vec<T>, Vec<oneshot::Sender<R>>) = batch.into_iter().unzip();
            let written = write(items);
            let task = tokio::spawn(async move {
                let answers = written.await;
                for (sender, answer) in senders.into_iter().zip(answers) {
                    let _ = sender.send(answer);
                }
                drop(permit);
            });
            // A panic drops the senders: their callers get `lost()`.
            let _ = task.await;
            // This item was in the batch (answered now) or is still queued
            // behind it (the next round takes it).
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_item_is_answered_once_and_batches_form_under_load() {
        let group: Arc<Group<u32, u32>> = Arc::new(Group::new(2, 8));
        let calls = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for i in 0..200u32 {
            let group = group.clone();
            let calls = calls.clone();
            tasks.push(tokio::spawn(async move {
                group
                    .submit(
                        i,
                        move |items: Vec<u32>| {
                            calls.fetch_add(1, Ordering::SeqCst);
                            async move {
                                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                                items.into_iter().map(|x| x * 2).collect()
                            }
                        },
                        || u32::MAX,
                    )
                    .await
            }));
        }
        for (i, task) in tasks.into_iter().enumerate() {
            assert_eq!(task.await.ok(), Some(i as u32 * 2));
        }
        let calls = calls.load(Ordering::SeqCst);
        assert!(
            calls < 200,
            "{calls} writes for 200 items: nothing was grouped"
        );
        assert!(calls >= 200 / 8, "{calls} writes: a batch above the cap");
    }

    #[tokio::test]
    async fn a_write_answering_too_few_leaves_the_rest_lost() {
        let group: Group<u32, Option<u32>> = Group::new(1, 4);
        let answer = group
            .submit(7, |_items: Vec<u32>| async { Vec::new() }, || None)
            .await;
        assert_eq!(answer, None);
    }
}
