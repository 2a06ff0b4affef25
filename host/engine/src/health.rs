//! The process's health: the fence a `restore.lease-incompatible` refusal
//! raises (`Fence`, held by every role that leases or acts), and the
//! [`Health`] part of the [`Engine`](crate::Engine) that `/ready`, doctor
//! and `/metrics` read (the fence, the audit journal, the store's ping, the
//! counters).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use coordinator_ports::store::{Maintenance, StoreError};
use coordinator_runtime::audit::{AuditJournal, AuditRecord};
use coordinator_runtime::keys::AuditKey;

use crate::metrics::Counters;

/// Whether this process may still work, and the count of store outages.
/// A restore hold placed after the process started fences it
/// ([`Fence::fence_if_incompatible`]); from then on it leases nothing.
pub(crate) struct Fence {
    fenced: AtomicBool,
    /// Set while this process's clock stands further from the database's
    /// than the bound ([`Health::set_clock_standing`]): it leases nothing.
    clock_out_of_service: AtomicBool,
    counters: Arc<Counters>,
}

impl Fence {
    /// An open fence counting outages in `counters`.
    pub(crate) fn new(counters: Arc<Counters>) -> Self {
        Fence {
            fenced: AtomicBool::new(false),
            clock_out_of_service: AtomicBool::new(false),
            counters,
        }
    }

    /// Whether this process's clock is out of its bound now: no lease is
    /// taken (neither by a worker nor on a commit's new jobs).
    pub(crate) fn clock_out_of_service(&self) -> bool {
        self.clock_out_of_service.load(Ordering::SeqCst)
    }

    /// Whether the store refused this process's lease as
    /// `restore.lease-incompatible`.
    pub(crate) fn fenced(&self) -> bool {
        self.fenced.load(Ordering::SeqCst)
    }

    /// Counts `e` when it is an outage (`coordinator_store_errors_total`)
    /// and hands it back. Never fences.
    pub(crate) fn count_outage(&self, e: StoreError) -> StoreError {
        if matches!(e, StoreError::Unavailable(_)) {
            self.counters.store_error();
        }
        e
    }

    /// Fences this process when `e` is a `restore.lease-incompatible`
    /// refusal (logged once), counts it when it is an outage
    /// ([`Fence::count_outage`]), and hands it back.
    pub(crate) fn fence_if_incompatible(&self, e: StoreError) -> StoreError {
        if let StoreError::LeaseIncompatible { process, store } = &e {
            if !self.fenced.swap(true, Ordering::SeqCst) {
                tracing::error!(
                    code = "restore.lease-incompatible",
                    process_epoch = process,
                    store_epoch = store,
                    next = "restart this process: the restore hold was placed after it started",
                    "a restore hold was placed after this process started; it does no more work"
                );
            }
        }
        self.count_outage(e)
    }
}

/// The engine's health part: what `/ready`, doctor and `/metrics` ask of
/// this process besides its roles. It holds the fence, the audit
/// journal once attached ([`crate::Engine::with_audit`]), the counters, and
/// the store's upkeep port, which it only pings.
pub struct Health {
    fence: Arc<Fence>,
    counters: Arc<Counters>,
    maintenance: Arc<dyn Maintenance>,
    audit: OnceLock<(Arc<AuditJournal>, AuditKey)>,
    recovery_only: bool,
    /// The last measured clock offset (`f64` bits, seconds; this process
    /// minus the database), valid once `clock_measured` is set.
    clock_offset_bits: AtomicU64,
    clock_measured: AtomicBool,
}

impl Health {
    /// The health part over `fence` and `counters`, pinging through
    /// `maintenance`.
    pub(crate) fn new(
        fence: Arc<Fence>,
        counters: Arc<Counters>,
        maintenance: Arc<dyn Maintenance>,
        recovery_only: bool,
    ) -> Self {
        Health {
            fence,
            counters,
            maintenance,
            audit: OnceLock::new(),
            recovery_only,
            clock_offset_bits: AtomicU64::new(0),
            clock_measured: AtomicBool::new(false),
        }
    }

    /// Records the last measured clock offset, `offset_seconds` (this
    /// process's wall clock minus the database's), and whether it is
    /// within the deployment's bound. Out of bound, the process leases
    /// nothing until a later measurement is within it; the server refuses
    /// starts meanwhile (docs/operations.md "Clock skew"). Returns whether
    /// this changed the process's standing (in service or not).
    pub fn set_clock_standing(&self, offset_seconds: f64, within_bound: bool) -> bool {
        self.clock_offset_bits
            .store(offset_seconds.to_bits(), Ordering::SeqCst);
        self.clock_measured.store(true, Ordering::SeqCst);
        let was_out = self
            .fence
            .clock_out_of_service
            .swap(!within_bound, Ordering::SeqCst);
        was_out == within_bound
    }

    /// The last measured clock offset in seconds (this process's wall
    /// clock minus the database's; positive: ahead), `None` before the
    /// first measurement. Doctor, `/ready` and `/metrics` read it.
    pub fn clock_offset_seconds(&self) -> Option<f64> {
        self.clock_measured
            .load(Ordering::SeqCst)
            .then(|| f64::from_bits(self.clock_offset_bits.load(Ordering::SeqCst)))
    }

    /// Whether this process is out of service because its clock stands
    /// further from the database's than the bound
    /// ([`Health::set_clock_standing`]).
    pub fn clock_out_of_service(&self) -> bool {
        self.fence.clock_out_of_service()
    }

    /// Attaches the audit journal and key; `false` when one is attached
    /// already (the second is ignored).
    pub(crate) fn attach_audit(&self, journal: Arc<AuditJournal>, key: AuditKey) -> bool {
        self.audit.set((journal, key)).is_ok()
    }

    /// Whether the store refused this process's lease as
    /// `restore.lease-incompatible` (a restore hold was placed after it
    /// started): it leases nothing any more and should stop.
    pub fn fenced(&self) -> bool {
        self.fence.fenced()
    }

    /// Whether this engine runs with `--recovery-only`.
    pub fn recovery_only(&self) -> bool {
        self.recovery_only
    }

    /// Whether the store answers and can be written to
    /// ([`coordinator_ports::store::Maintenance::ping`]).
    ///
    /// # Errors
    /// `Unavailable`, or `Refused` with `database.read-only`.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.maintenance.ping().await
    }

    /// Whether an audited answer would be released now, without writing
    /// anything: no journal is attached (nothing is audited), or the one
    /// attached did not fail its last append and its file is there
    /// ([`AuditJournal::healthy`]). `/ready` asks this.
    pub fn audit_ready(&self) -> bool {
        self.audit
            .get()
            .is_none_or(|(journal, _)| journal.healthy())
    }

    /// Whether the audit journal takes an append now: a probe line
    /// appended and synced ([`AuditJournal::probe`]); false without a
    /// journal. Doctor asks this.
    pub async fn audit_probe(&self) -> bool {
        let Some((journal, _)) = self.audit.get() else {
            return false;
        };
        let journal = journal.clone();
        tokio::task::spawn_blocking(move || journal.probe().is_ok())
            .await
            .unwrap_or(false)
    }

    /// Whether an audited action may begin (a start, an operator action):
    /// the journal is not known to be failing ([`Health::audit_ready`]),
    /// or, known to be failing, a probe line is appended and synced now
    /// and the journal is healthy after it (room was made on its disk):
    /// so the journal recovers by itself, and while it fails nothing is
    /// done that its audit record could not follow. True without a
    /// journal.
    pub async fn audit_available(&self) -> bool {
        if self.audit_ready() {
            return true;
        }
        self.audit_probe().await && self.audit_ready()
    }

    /// Appends the record `build` makes with the audit key, `fsync`ed before
    /// this returns. Records nothing (and succeeds) when no journal is
    /// attached.
    ///
    /// # Errors
    /// The journal's I/O error: the audited answer must not be released
    /// (`audit.response-unavailable`).
    pub fn audit(&self, build: impl FnOnce(&AuditKey) -> AuditRecord) -> std::io::Result<()> {
        match self.audit.get() {
            Some((journal, key)) => journal.append(&build(key)),
            None => Ok(()),
        }
    }

    /// The counters the metrics listener renders.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Counts a store error of a read the server made itself (doctor's and
    /// `/metrics`' counts) when it is an outage
    /// (`coordinator_store_errors_total`), and hands it back.
    pub fn count_outage(&self, e: StoreError) -> StoreError {
        self.fence.count_outage(e)
    }
}
