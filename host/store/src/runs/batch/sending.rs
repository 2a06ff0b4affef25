//! The `sending` mark of several jobs in one statement
//! ([`JobQueue::mark_sending_batch`]).
//!
//! [`JobQueue::mark_sending_batch`]: coordinator_ports::store::JobQueue::mark_sending_batch

use coordinator_ports::store::StoreError as PortError;

use crate::runs::columns::epoch_column;
use crate::runs::errors::pdb;
use crate::runs::Store;

impl Store {
    /// [`JobQueue::mark_sending_batch`](coordinator_ports::store::JobQueue::mark_sending_batch) on PostgreSQL: one statement; each
    /// job is marked only under its owner's lease, its epoch and no
    /// restore hold. A lost connection answers every job unavailable; a
    /// job not marked answers [`PortError::LeaseLost`].
    pub(in crate::runs) async fn mark_sending_in_one_statement(
        &self,
        jobs: Vec<(u64, String, u64)>,
    ) -> Vec<Result<(), PortError>> {
        let ids: Vec<i64> = jobs
            .iter()
            .map(|(id, _, _)| i64::try_from(*id).unwrap_or(-1))
            .collect();
        let owners: Vec<&str> = jobs.iter().map(|(_, o, _)| o.as_str()).collect();
        let epochs: Vec<i64> = jobs.iter().map(|(_, _, e)| epoch_column(*e)).collect();
        let sql = format!(
            "UPDATE {ns}.jobs j SET state = 'sending'
               FROM unnest((SELECT $1::bigint[]), $2::text[], $3::bigint[])
                      WITH ORDINALITY AS m(job_id, owner, epoch, n),
                    {ns}.deployment d
              WHERE j.job_id = ANY((SELECT $1::bigint[])::bigint[]) AND j.job_id = m.job_id
                AND j.lease_owner = m.owner
                AND NOT d.restore_hold AND d.restore_epoch = m.epoch
          RETURNING m.n",
            ns = self.ns
        );
        let marked = sqlx::query_scalar::<_, i64>(&sql)
            .bind(&ids)
            .bind(&owners)
            .bind(&epochs)
            .fetch_all(&self.db)
            .await;
        match marked {
            Ok(marked) => (1..=ids.len())
                .map(|n| {
                    if marked.contains(&i64::try_from(n).unwrap_or(-1)) {
                        Ok(())
                    } else {
                        Err(PortError::LeaseLost)
                    }
                })
                .collect(),
            Err(e) => {
                let e = pdb(e);
                ids.iter().map(|_| Err(e.clone())).collect()
            }
        }
    }
}
