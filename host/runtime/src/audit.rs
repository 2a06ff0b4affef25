//! The audit journal (issue 5 item 3; docs/runtime.md "The audit journal with
//! several processes: one file per process").
//!
//! Append-only JSON Lines. `deployment.auditFile` is the journal's *base
//! path*; each process appends only to `<auditFile>.<host>-<pid>-<start>`,
//! a file it creates (`O_CREAT|O_EXCL`, mode 0600) and alone writes. Every
//! [`AuditJournal::append`] writes one whole line and `fsync`s the file before
//! it returns, so an audited action's answer is released only after its
//! record is durable.
//!
//! A record holds the action, the time, the outcome, keyed references
//! (HMAC-SHA256 under the audit key, [`AuditKey::reference`]) and a few
//! non-personal facts (counts, package digests, codes). There is no field for
//! an input, a product response or a caller identity: the only way to name a
//! run or a principal is [`AuditRecord::reference`], which keys it.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::clock::{Clock, SystemClock};
use crate::keys::AuditKey;

/// One audited action, built with [`AuditRecord::new`] and its chainable
/// setters.
#[derive(Clone, Debug, Serialize)]
pub struct AuditRecord {
    /// What was done: `deployment.apply`, `run.admit`, `run.cancel`, ...
    pub action: String,
    /// `accepted`, `refused`, ... (the answer the action got).
    pub outcome: String,
    /// Keyed references by kind (`run`, `principal`, ...): lowercase hex
    /// HMAC-SHA256 values, never the raw identifier.
    pub references: BTreeMap<String, String>,
    /// Non-personal facts: counts, codes, package digests, revisions.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub facts: BTreeMap<String, Value>,
}

impl AuditRecord {
    /// A record of `action` with outcome `outcome`.
    pub fn new(action: &str, outcome: &str) -> Self {
        AuditRecord {
            action: action.to_owned(),
            outcome: outcome.to_owned(),
            references: BTreeMap::new(),
            facts: BTreeMap::new(),
        }
    }

    /// Adds a keyed reference to `value` of `kind` (`run`, `principal`,
    /// `start-identity`, ...): only `key.reference(kind, value)` is stored.
    pub fn reference(mut self, key: &AuditKey, kind: &str, value: &str) -> Self {
        self.references
            .insert(kind.to_owned(), key.reference(kind, value));
        self
    }

    /// Adds a fact that holds no personal data and no input (a count, a code,
    /// a package digest, a revision).
    pub fn fact(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.facts.insert(name.to_owned(), value.into());
        self
    }
}

#[derive(Serialize)]
struct Line<'a> {
    at: String,
    seq: u64,
    #[serde(flatten)]
    record: &'a AuditRecord,
}

/// This process's journal file. Cheap to share behind an `Arc`. Lines are
/// written one at a time under a lock; the `fsync` is shared: appends that
/// arrive while one is syncing are made durable by the next single sync
/// (group commit), and each append still returns only once its own line is
/// durable.
pub struct AuditJournal {
    path: PathBuf,
    /// Stamps each line (`at`) and names the file.
    clock: Arc<dyn Clock>,
    /// The file and the sequence number of the last line written.
    file: Mutex<(File, u64)>,
    /// A second handle on the same file for `fsync`, and the sequence
    /// number of the last line known durable.
    synced: Mutex<(File, u64)>,
    /// Set (under `file`'s lock) when [`AuditJournal::discard_if_empty`]
    /// removed the file: every later append fails.
    discarded: AtomicBool,
    /// Whether the last append failed (cleared by one that succeeds).
    failing: AtomicBool,
}

impl std::fmt::Debug for AuditJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditJournal")
            .field("path", &self.path)
            .field("discarded", &self.discarded)
            .field("failing", &self.failing)
            .finish_non_exhaustive()
    }
}

impl AuditJournal {
    /// [`AuditJournal::open_with_clock`] with the operating system's clock.
    ///
    /// # Errors
    /// As [`AuditJournal::open_with_clock`].
    pub fn open(base: &Path) -> std::io::Result<Self> {
        Self::open_with_clock(base, Arc::new(SystemClock))
    }

    /// Creates this process's journal file next to `base`
    /// (`<base>.<host>-<pid>-<start>`, start in Unix nanoseconds), owner-only,
    /// append-only. Creates no directory: the audit storage must exist.
    ///
    /// # Errors
    /// The I/O error when the file cannot be created (it must not exist).
    pub fn open_with_clock(base: &Path, clock: Arc<dyn Clock>) -> std::io::Result<Self> {
        let start = clock.now().unix_nanos();
        let name = format!(
            "{}.{}-{}-{}",
            base.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "audit.jsonl".into()),
            hostname(),
            std::process::id(),
            start
        );
        let path = base.with_file_name(name);
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        let sync = file.try_clone()?;
        Ok(AuditJournal {
            path,
            clock,
            file: Mutex::new((file, 0)),
            synced: Mutex::new((sync, 0)),
            discarded: AtomicBool::new(false),
            failing: AtomicBool::new(false),
        })
    }

    /// A journal appending to `file`, an already open file named `path`
    /// (a test opens `/dev/full` to see every append fail, as on a full
    /// disk: the audited answer is then withheld).
    ///
    /// # Errors
    /// The I/O error when the file handle cannot be duplicated.
    pub fn on_file(path: &Path, file: File) -> std::io::Result<Self> {
        let sync = file.try_clone()?;
        Ok(AuditJournal {
            path: path.to_owned(),
            clock: Arc::new(SystemClock),
            file: Mutex::new((file, 0)),
            synced: Mutex::new((sync, 0)),
            discarded: AtomicBool::new(false),
            failing: AtomicBool::new(false),
        })
    }

    /// The file this process appends to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the journal's file when nothing was appended (a refused
    /// `apply`, a `coordinator` that stops having audited nothing, leave no
    /// empty journal behind); every later append then fails, so no line
    /// goes to a removed file. A journal that holds a line is kept and
    /// stays open. Returns whether the file was removed.
    ///
    /// # Errors
    /// The I/O error of the removal.
    pub fn discard_if_empty(&self) -> std::io::Result<bool> {
        let written = self
            .file
            .lock()
            .map_err(|_| std::io::Error::other("the audit journal lock is poisoned"))?;
        if written.1 != 0 || self.discarded.load(Ordering::SeqCst) {
            return Ok(false);
        }
        std::fs::remove_file(&self.path)?;
        self.discarded.store(true, Ordering::SeqCst);
        Ok(true)
    }

    /// Appends `record` as one line with the current UTC time and this
    /// file's sequence number (from 1), then `fsync`s. Returns after the
    /// line is durable.
    ///
    /// # Errors
    /// The I/O error of the write or the sync; the caller must then not
    /// release the audited answer (`audit.response-unavailable`).
    pub fn append(&self, record: &AuditRecord) -> std::io::Result<()> {
        let appended = self.append_durably(record);
        self.failing.store(appended.is_err(), Ordering::SeqCst);
        appended
    }

    /// Whether the journal can be expected to take the next append without
    /// writing one: its last append did not fail, it was not closed, and its
    /// file is still there, a regular file (`/ready` asks this; doctor
    /// appends a real probe, [`AuditJournal::probe`]).
    pub fn healthy(&self) -> bool {
        !self.failing.load(Ordering::SeqCst)
            && !self.discarded.load(Ordering::SeqCst)
            && std::fs::metadata(&self.path).is_ok_and(|m| !m.is_dir())
    }

    /// Appends a probe line (`audit.probe`, outcome `accepted`, no
    /// reference) and syncs it: whether the journal takes an append now.
    ///
    /// # Errors
    /// The append's I/O error.
    pub fn probe(&self) -> std::io::Result<()> {
        self.append(&AuditRecord::new("audit.probe", "accepted"))
    }

    fn append_durably(&self, record: &AuditRecord) -> std::io::Result<()> {
        let poisoned = || std::io::Error::other("the audit journal lock is poisoned");
        let seq = {
            let mut written = self.file.lock().map_err(|_| poisoned())?;
            if self.discarded.load(Ordering::SeqCst) {
                return Err(std::io::Error::other(
                    "the audit journal was closed (its empty file removed)",
                ));
            }
            let seq = written.1 + 1;
            let at = OffsetDateTime::from_unix_timestamp_nanos(self.clock.now().unix_nanos())
                .map_err(std::io::Error::other)?
                .format(&Rfc3339)
                .map_err(std::io::Error::other)?;
            let mut line = serde_json::to_vec(&Line { at, seq, record })?;
            line.push(b'\n');
            written.0.write_all(&line)?;
            written.1 = seq;
            seq
        };
        // Group commit: whoever holds this lock syncs every line written
        // so far; an append whose line a sync already covered returns.
        let mut synced = self.synced.lock().map_err(|_| poisoned())?;
        if synced.1 >= seq {
            return Ok(());
        }
        let target = self.file.lock().map_err(|_| poisoned())?.1;
        synced.0.sync_data()?;
        synced.1 = target;
        Ok(())
    }
}

/// The journal files of every process for `base` (`<base>.*`), sorted.
///
/// # Errors
/// The I/O error when the directory cannot be read.
pub fn journal_files(base: &Path) -> std::io::Result<Vec<PathBuf>> {
    let dir = base
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let prefix = format!(
        "{}.",
        base.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}

fn hostname() -> String {
    let raw = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    let clean: String = raw
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.')
        .collect();
    if clean.is_empty() {
        "host".into()
    } else {
        clean
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn one_synced_line_per_append_with_keyed_references_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = dir.path().join("audit.jsonl");
        let key = AuditKey::new(&[9; 32]).expect("key");
        let journal = AuditJournal::open(&base).expect("open");
        let mode = std::fs::metadata(journal.path())
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        journal
            .append(&AuditRecord::new("run.admit", "accepted").reference(&key, "run", "run-1"))
            .expect("append");
        journal
            .append(&AuditRecord::new("run.cancel", "accepted").fact("count", 1))
            .expect("append");
        let files = journal_files(&base).expect("list");
        assert_eq!(files, vec![journal.path().to_path_buf()]);
        let text = std::fs::read_to_string(journal.path()).expect("read");
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("json line"))
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["action"], "run.admit");
        assert_eq!(lines[0]["seq"], 1);
        assert_eq!(lines[1]["seq"], 2);
        assert!(!text.contains("run-1"));
        assert_eq!(lines[0]["references"]["run"], key.reference("run", "run-1"));
        // A second process (another open) gets its own file.
        let other = AuditJournal::open(&base).expect("open");
        assert_ne!(other.path(), journal.path());
    }

    /// Appends from many threads at once (sharing syncs) each return with
    /// their own whole line in the file, numbered 1..=n without a gap.
    #[test]
    fn concurrent_appends_share_syncs_and_keep_every_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let journal = AuditJournal::open(&dir.path().join("audit.jsonl")).expect("open");
        std::thread::scope(|scope| {
            for t in 0..8 {
                let journal = &journal;
                scope.spawn(move || {
                    for i in 0..25 {
                        journal
                            .append(
                                &AuditRecord::new("run.admit", "accepted").fact("n", t * 100 + i),
                            )
                            .expect("append");
                    }
                });
            }
        });
        let text = std::fs::read_to_string(journal.path()).expect("read");
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("whole json line"))
            .collect();
        let seqs: Vec<u64> = lines.iter().filter_map(|l| l["seq"].as_u64()).collect();
        assert_eq!(seqs, (1..=200).collect::<Vec<u64>>());
        let mut facts: Vec<u64> = lines
            .iter()
            .filter_map(|l| l["facts"]["n"].as_u64())
            .collect();
        facts.sort_unstable();
        facts.dedup();
        assert_eq!(facts.len(), 200, "every append's own line is there");
    }

    #[test]
    fn an_empty_journal_is_discarded_and_a_written_one_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = dir.path().join("audit.jsonl");
        let empty = AuditJournal::open(&base).expect("open");
        let empty_path = empty.path().to_path_buf();
        assert!(empty.discard_if_empty().expect("discard"));
        assert!(!empty_path.exists());
        assert!(
            empty
                .append(&AuditRecord::new("deployment.apply", "accepted"))
                .is_err(),
            "an append after the discard must fail, not write to a removed file"
        );
        assert!(!empty_path.exists());
        let written = AuditJournal::open(&base).expect("open");
        let written_path = written.path().to_path_buf();
        written
            .append(&AuditRecord::new("deployment.apply", "accepted"))
            .expect("append");
        assert!(!written.discard_if_empty().expect("keep"));
        assert!(written_path.exists());
    }
}
