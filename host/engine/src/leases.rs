//! The lease rule of this process: who leases (its worker id), for how
//! long, and under which restore epoch ([`Holds::restore_epoch`]), adopted
//! once and never changed afterwards.
//!
//! [`Holds::restore_epoch`]: coordinator_ports::store::Holds::restore_epoch

use std::sync::{Arc, OnceLock};

use coordinator_ir::instant::Instant;
use coordinator_ports::clock::{seconds_after, whole_second};
use coordinator_ports::store::{HoldsAndReviews, LeaseOnInsert, StoreError};

use crate::health::Fence;

/// This process's leases: owner, length, restore epoch.
pub(crate) struct LeaseRule {
    owner: String,
    lease_seconds: i64,
    recovery_only: bool,
    /// The restore epoch this process works under: adopted once, at
    /// startup ([`LeaseRule::adopt_restore_epoch`]) or at its first lease.
    epoch: OnceLock<u64>,
    /// Read once, for the restore epoch.
    holds: Arc<dyn HoldsAndReviews>,
    fence: Arc<Fence>,
}

impl LeaseRule {
    /// Leases owned by `owner`, `lease_seconds` long; none stated under an
    /// epoch when `recovery_only`; the epoch read from `holds`.
    pub(crate) fn new(
        owner: String,
        lease_seconds: i64,
        recovery_only: bool,
        holds: Arc<dyn HoldsAndReviews>,
        fence: Arc<Fence>,
    ) -> Self {
        LeaseRule {
            owner,
            lease_seconds,
            recovery_only,
            epoch: OnceLock::new(),
            holds,
            fence,
        }
    }

    /// The lease owner: this process's worker id.
    pub(crate) fn owner(&self) -> &str {
        &self.owner
    }

    /// When a lease taken at `now` (engine clock) runs out: the one lease
    /// rule, `EngineConfig::lease_seconds` after its whole second (a store
    /// keeps leases in whole seconds).
    pub(crate) fn lease_until(&self, now: &Instant) -> Instant {
        seconds_after(&whole_second(now), self.lease_seconds)
    }

    /// The lease new jobs are inserted under ([`LeaseOnInsert`]): this
    /// process's worker id and adopted restore epoch; none on a
    /// `--recovery-only` instance, before an epoch is adopted, or while
    /// this process's clock is out of its bound.
    pub(crate) fn on_insert(&self, now: &Instant) -> Option<LeaseOnInsert> {
        if self.recovery_only || self.fence.clock_out_of_service() {
            return None;
        }
        let epoch = self.adopted_epoch()?;
        Some(LeaseOnInsert {
            owner: self.owner.clone(),
            now: *now,
            lease_until: self.lease_until(now),
            epoch,
            mark_sending: None,
        })
    }

    /// The restore epoch adopted so far, if any.
    pub(crate) fn adopted_epoch(&self) -> Option<u64> {
        self.epoch.get().copied()
    }

    /// Reads the store's restore epoch and works under it from now on; a
    /// later call changes nothing. Returns the epoch this process works
    /// under.
    ///
    /// # Errors
    /// The store's (an outage counted).
    pub(crate) async fn adopt_restore_epoch(&self) -> Result<u64, StoreError> {
        if let Some(e) = self.epoch.get() {
            return Ok(*e);
        }
        let epoch = self
            .holds
            .holds()
            .await
            .map_err(|e| self.fence.count_outage(e))?
            .restore_epoch;
        Ok(*self.epoch.get_or_init(|| epoch))
    }

    /// What this process states when it leases: `None` for a
    /// `--recovery-only` instance (it is given receipt lookups only), else
    /// the epoch it works under ([`LeaseRule::adopt_restore_epoch`]).
    ///
    /// # Errors
    /// The store's.
    pub(crate) async fn lease_epoch(&self) -> Result<Option<u64>, StoreError> {
        if self.recovery_only {
            return Ok(None);
        }
        self.adopt_restore_epoch().await.map(Some)
    }
}
