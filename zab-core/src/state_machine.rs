//! The [`StateMachine`] embedders implement: what committed transactions mean. Zab orders and
//! commits opaque payloads (Z2); the state machine applies them in zxid order, and takes and
//! restores snapshots for SNAP synchronisation and log compaction.

use bytes::Bytes;

use crate::txnlog::{Snapshot, Txn};
use crate::zxid::Zxid;

/// Why a snapshot could not be restored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("snapshot at {zxid} cannot be restored: {reason}")]
pub struct SnapshotError {
    /// The snapshot's zxid.
    pub zxid: Zxid,
    /// What was wrong with it.
    pub reason: String,
}

/// The replicated state an embedder keeps on top of Zab.
pub trait StateMachine: Send {
    /// Applies one committed transaction. Called exactly once per committed zxid, in zxid
    /// order, on every server (Z2). It must be deterministic.
    fn apply(&mut self, txn: &Txn);

    /// The zxid of the last applied transaction (or of the restored snapshot).
    fn last_applied(&self) -> Zxid;

    /// Serialises the whole state as of [`last_applied`](Self::last_applied).
    fn take_snapshot(&self) -> Snapshot;

    /// Replaces the whole state with `snapshot` (SNAP synchronisation or start-up).
    fn restore(&mut self, snapshot: &Snapshot) -> Result<(), SnapshotError>;

    /// Discards the whole state (empty, nothing applied). Used when a TRUNC removes
    /// transactions already applied: the state is rebuilt from the snapshot and the log, as
    /// ZooKeeper reloads its database.
    fn reset(&mut self);
}

/// A state machine that keeps every applied payload in order: handy in tests to compare what
/// servers committed. Its snapshot is the payloads, each prefixed with its zxid and length.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordingStateMachine {
    /// Every applied transaction, in order.
    pub applied: Vec<Txn>,
    last: Zxid,
}

impl StateMachine for RecordingStateMachine {
    fn apply(&mut self, txn: &Txn) {
        self.last = txn.zxid;
        self.applied.push(txn.clone());
    }

    fn last_applied(&self) -> Zxid {
        self.last
    }

    fn take_snapshot(&self) -> Snapshot {
        let mut out = Vec::new();
        for t in &self.applied {
            out.extend_from_slice(&t.zxid.0.to_be_bytes());
            out.extend_from_slice(&(t.data.len() as u32).to_be_bytes());
            out.extend_from_slice(&t.data);
        }
        Snapshot {
            zxid: self.last,
            data: Bytes::from(out),
        }
    }

    fn restore(&mut self, snapshot: &Snapshot) -> Result<(), SnapshotError> {
        let bad = |reason: &str| SnapshotError {
            zxid: snapshot.zxid,
            reason: reason.to_string(),
        };
        let mut applied = Vec::new();
        let mut rest: &[u8] = &snapshot.data;
        while !rest.is_empty() {
            let (Some(z), Some(l)) = (rest.get(..8), rest.get(8..12)) else {
                return Err(bad("truncated entry header"));
            };
            let mut zb = [0u8; 8];
            zb.copy_from_slice(z);
            let mut lb = [0u8; 4];
            lb.copy_from_slice(l);
            let len = u32::from_be_bytes(lb) as usize;
            let Some(data) = rest.get(12..12 + len) else {
                return Err(bad("truncated entry data"));
            };
            applied.push(Txn::new(
                Zxid(i64::from_be_bytes(zb)),
                Bytes::copy_from_slice(data),
            ));
            rest = &rest[12 + len..];
        }
        self.applied = applied;
        self.last = snapshot.zxid;
        Ok(())
    }

    fn reset(&mut self) {
        self.applied.clear();
        self.last = Zxid::ZERO;
    }
}
