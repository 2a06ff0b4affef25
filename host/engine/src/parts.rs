//! [`Parts`]: the small parts every role of the engine holds beside the
//! ports its constructor lists: the [`Committer`] (the one commit path and
//! what the roles share), the engine clock, the [`Fence`], the counters,
//! the spans and the runtime file's connections.

use std::collections::BTreeMap;
use std::sync::Arc;

use coordinator_ports::clock::Clock;
use coordinator_runtime::config::Connection;

use crate::committer::Committer;
use crate::health::Fence;
use crate::metrics::Counters;
use crate::spans::Spans;

/// What each role holds besides its ports. Cheap to clone (`Arc`s).
#[derive(Clone)]
pub(crate) struct Parts {
    /// The one commit path, the Program cache, the lease rule and the
    /// hand-off.
    pub(crate) committer: Arc<Committer>,
    /// The engine clock.
    pub(crate) clock: Arc<dyn Clock>,
    /// The fence and the count of store outages.
    pub(crate) fence: Arc<Fence>,
    /// The process's counters.
    pub(crate) counters: Arc<Counters>,
    /// The spans of runs.
    pub(crate) spans: Arc<Spans>,
    /// The runtime file's connections, by name.
    pub(crate) connections: Arc<BTreeMap<String, Connection>>,
}
