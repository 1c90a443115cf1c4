//! The transaction log: the [`TxnLog`] storage trait (append with an fsync policy, read after a
//! zxid, truncate, last zxid, snapshots) with an in-memory ([`MemoryTxnLog`]) and a file
//! ([`FileTxnLog`]) implementation. Zab's recovery and broadcast write proposals here
//! before acknowledging them, and choose DIFF / TRUNC / SNAP from what it holds.
//!
//! The trait is synchronous: a file log blocks on disk writes, so an async driver calls it
//! from a blocking context.

mod error;
mod file;
mod memory;
mod retain;
mod sync_read;

pub use error::TxnLogError;
pub use file::{FileTxnLog, FileTxnLogOptions, DEFAULT_SEGMENT_SIZE};
pub use memory::MemoryTxnLog;
pub use retain::MIN_SNAP_RETAIN_COUNT;
pub use sync_read::{read_committed_window, read_for_sync};

use bytes::Bytes;

use crate::broadcast::SnapshotInfo;

use crate::zxid::Zxid;

/// Largest transaction payload a log accepts or reads back (16 MiB): a corrupt length field
/// never makes us allocate more.
pub const MAX_TXN_DATA: usize = 16 << 20;

/// Largest snapshot a file log reads back (1 GiB).
pub const MAX_SNAPSHOT_DATA: usize = 1 << 30;

/// One transaction: its zxid (`epoch << 32 | counter`, assigned by the leader) and its opaque
/// payload, which only the embedder's [`StateMachine`](crate::state_machine::StateMachine)
/// interprets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Txn {
    /// The transaction's zxid.
    pub zxid: Zxid,
    /// The payload.
    pub data: Bytes,
}

impl Txn {
    /// A transaction.
    pub fn new(zxid: Zxid, data: impl Into<Bytes>) -> Self {
        Self {
            zxid,
            data: data.into(),
        }
    }
}

/// A state-machine snapshot: everything applied up to and including `zxid`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The last transaction the snapshot contains.
    pub zxid: Zxid,
    /// The serialized state.
    pub data: Bytes,
}

/// The rest of a sync begun by [`TxnLog::start_sync`], to run on another thread.
pub type PendingSync = Box<dyn FnOnce() -> Result<(), TxnLogError> + Send>;

/// When appended transactions reach stable storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsyncPolicy {
    /// Each [`TxnLog::append`] call is durable when it returns (ZooKeeper's default,
    /// `forceSync=yes`, one fsync per group of transactions).
    #[default]
    EveryAppend,
    /// Only [`TxnLog::sync`] makes appends durable (`forceSync=no`): faster, and a crash may
    /// lose acknowledged transactions. For tests and benchmarks.
    OnSync,
}

/// When a server snapshots its state machine and compacts its log (ZooKeeper's `snapCount`).
///
/// Snapshot only while serving an established epoch: then everything applied is committed.
/// A learner applies synced transactions before the leader established its epoch, and a
/// later leader may still cut those by TRUNC; a snapshot taken then would keep them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SnapshotPolicy {
    /// Take a snapshot after this many committed transactions were applied since the last
    /// one, then [purge](TxnLog::purge) the log it covers.
    pub snap_count: u64,
}

impl SnapshotPolicy {
    /// Snapshot after every `snap_count` committed transactions.
    pub const fn every(snap_count: u64) -> Self {
        Self { snap_count }
    }
}

impl Default for SnapshotPolicy {
    /// ZooKeeper's default `snapCount`: 100 000.
    fn default() -> Self {
        Self {
            snap_count: 100_000,
        }
    }
}

/// Where a server keeps its transactions and snapshots.
///
/// Invariants every implementation keeps: zxids in the log strictly increase; the log never
/// holds a hole a reader could observe; a snapshot replaces its file atomically.
pub trait TxnLog: Send {
    /// Appends `txns`, which must have strictly increasing zxids above
    /// [`last_zxid`](Self::last_zxid) (else [`TxnLogError::OutOfOrder`] and nothing is
    /// appended). Durable on return under [`FsyncPolicy::EveryAppend`].
    fn append(&mut self, txns: &[Txn]) -> Result<(), TxnLogError>;

    /// Group commit: appends `txns` as [`append`](Self::append) does, but they may stay not
    /// durable until the next [`sync`](Self::sync), whatever the [`FsyncPolicy`]. A writer
    /// appends many batches this way and pays for one fsync; it must not acknowledge any of
    /// them before `sync` returns. The default appends durably at once.
    fn append_deferred(&mut self, txns: &[Txn]) -> Result<(), TxnLogError> {
        self.append(txns)
    }

    /// Makes every appended transaction durable.
    fn sync(&mut self) -> Result<(), TxnLogError>;

    /// Pipelined group commit: starts making every appended transaction durable, for a caller
    /// that goes on appending meanwhile (as ZooKeeper's sync thread fsyncs one group while the
    /// next one is written). `Ok(None)`: they are durable on return (the default calls
    /// [`sync`](Self::sync)). `Ok(Some(task))`: they are durable once `task`, run on any
    /// thread, returned `Ok`. The log counts them as synced from now on, so the caller must
    /// wait for `task` before it relies on any durability, calls `sync`, `truncate` or starts
    /// another sync; an error from `task` means they may not be durable.
    fn start_sync(&mut self) -> Result<Option<PendingSync>, TxnLogError> {
        self.sync().map(|()| None)
    }

    /// The zxid of the last logged transaction, or of the latest snapshot if that is newer,
    /// or [`Zxid::ZERO`] when empty. This is the `lastLoggedZxid` of elections (Z4).
    fn last_zxid(&self) -> Zxid;

    /// The zxid of the oldest transaction still in the log, if any.
    fn first_zxid(&self) -> Option<Zxid>;

    /// Every logged transaction with a zxid greater than `after`, in order.
    fn read_after(&self, after: Zxid) -> Result<Vec<Txn>, TxnLogError>;

    /// Calls `f` with every logged transaction with a zxid greater than `after`, in order,
    /// until it returns `false`. A log that can read one record at a time overrides this so
    /// that memory stays bounded by one record whatever the log's length (the default reads
    /// them all with [`read_after`](Self::read_after)).
    fn scan_after(&self, after: Zxid, f: &mut dyn FnMut(Txn) -> bool) -> Result<(), TxnLogError> {
        for t in self.read_after(after)? {
            if !f(t) {
                break;
            }
        }
        Ok(())
    }

    /// The newest logged zxid at or below `z`, if the log holds any (the default scans the
    /// log from its start).
    fn logged_at_or_before(&self, z: Zxid) -> Result<Option<Zxid>, TxnLogError> {
        if self.first_zxid().is_none_or(|f| f > z) {
            return Ok(None);
        }
        let mut found = None;
        self.scan_after(Zxid(i64::MIN), &mut |t| {
            if t.zxid > z {
                return false;
            }
            found = Some(t.zxid);
            true
        })?;
        Ok(found)
    }

    /// Removes every transaction with a zxid greater than `to` (TRUNC), durably.
    fn truncate(&mut self, to: Zxid) -> Result<(), TxnLogError>;

    /// Stores `snapshot` atomically and durably (a crash leaves the old or the new one).
    fn save_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), TxnLogError>;

    /// The newest intact snapshot, if any.
    fn latest_snapshot(&self) -> Result<Option<Snapshot>, TxnLogError>;

    /// The newest snapshot's zxid and size, without its data (the default reads it with
    /// [`latest_snapshot`](Self::latest_snapshot)).
    fn latest_snapshot_info(&self) -> Result<Option<SnapshotInfo>, TxnLogError> {
        Ok(self.latest_snapshot()?.map(|s| SnapshotInfo {
            zxid: s.zxid,
            size: s.data.len() as u64,
        }))
    }

    /// Log compaction: drops logged transactions with a zxid up to `upto`, which a durable
    /// snapshot already covers. An implementation that cannot compact keeps them (the
    /// default); readers must not rely on them being gone.
    fn purge(&mut self, upto: Zxid) -> Result<(), TxnLogError> {
        let _ = upto;
        Ok(())
    }

    /// Drops every logged transaction (SNAP sync: the snapshot that follows replaces them).
    fn clear(&mut self) -> Result<(), TxnLogError> {
        self.truncate(Zxid::ZERO)
    }
}

/// Checks that `txns` can follow `last`: strictly increasing zxids, payloads within limits.
pub(crate) fn check_append(last: Option<Zxid>, txns: &[Txn]) -> Result<(), TxnLogError> {
    let mut prev = last;
    for t in txns {
        if prev.is_some_and(|p| t.zxid <= p) {
            return Err(TxnLogError::OutOfOrder {
                last: prev.unwrap_or(Zxid::ZERO),
                got: t.zxid,
            });
        }
        if t.data.len() > MAX_TXN_DATA {
            return Err(TxnLogError::TooLarge { len: t.data.len() });
        }
        prev = Some(t.zxid);
    }
    Ok(())
}
