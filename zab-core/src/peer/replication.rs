//! The peer's replicated state: its transaction log and its state machine. Carries out the
//! log and state-machine actions of a [`PeerCore`](super::PeerCore).

use crate::state_machine::{SnapshotError, StateMachine};
use crate::txnlog::{Snapshot, Txn, TxnLog, TxnLogError};
use crate::zxid::Zxid;

/// Why replication failed; the peer stops rather than continue with a log it cannot trust.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplicationError {
    /// The transaction log failed.
    #[error("transaction log: {0}")]
    Log(#[from] TxnLogError),
    /// A snapshot could not be restored.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
}

pub(super) struct Replication {
    pub(super) log: Box<dyn TxnLog>,
    pub(super) sm: Box<dyn StateMachine>,
}

impl Replication {
    /// Restores the state machine from the newest snapshot, then replays the log after it.
    pub(super) fn open(
        log: Box<dyn TxnLog>,
        sm: Box<dyn StateMachine>,
    ) -> Result<Self, ReplicationError> {
        let mut r = Self { log, sm };
        r.reload()?;
        Ok(r)
    }

    fn reload(&mut self) -> Result<(), ReplicationError> {
        if let Some(s) = self.log.latest_snapshot()? {
            if s.zxid > self.sm.last_applied() {
                self.sm.restore(&s)?;
            }
        }
        for t in self.log.read_after(self.sm.last_applied())? {
            self.sm.apply(&t);
        }
        Ok(())
    }

    /// Applies a committed transaction, unless the state machine already has it (replayed
    /// from the log at start-up).
    pub(super) fn apply(&mut self, t: &Txn) {
        if t.zxid > self.sm.last_applied() {
            self.sm.apply(t);
        }
    }

    /// Applies, in zxid order, every logged transaction up to `z` not applied yet.
    pub(super) fn commit_logged(&mut self, z: Zxid) -> Result<(), ReplicationError> {
        for t in self.log.read_after(self.sm.last_applied())? {
            if t.zxid > z {
                break;
            }
            self.sm.apply(&t);
        }
        Ok(())
    }

    /// TRUNC: drops the log above `z`; a state machine that applied any of it is rebuilt
    /// from the snapshot and the log.
    pub(super) fn truncate(&mut self, z: Zxid) -> Result<(), ReplicationError> {
        self.log.truncate(z)?;
        if self.sm.last_applied() > z {
            self.sm.reset();
            self.reload()?;
        }
        Ok(())
    }

    /// SNAP: clears the log, restores the state machine from `s` and stores it.
    pub(super) fn restore(&mut self, s: &Snapshot) -> Result<(), ReplicationError> {
        self.log.clear()?;
        self.sm.restore(s)?;
        self.log.save_snapshot(s)?;
        Ok(())
    }

    /// Takes a snapshot, stores it durably and compacts the log it covers; returns its zxid.
    pub(super) fn snapshot(&mut self) -> Result<Zxid, ReplicationError> {
        let snapshot = self.sm.take_snapshot();
        self.log.save_snapshot(&snapshot)?;
        self.log.purge(snapshot.zxid)?;
        Ok(snapshot.zxid)
    }
}
