//! The peer's replicated state: its transaction log, its state machine and, while it leads an
//! established epoch, the broadcast core. Carries out the log and state-machine actions of
//! synchronisation and broadcast.

use crate::broadcast::{BroadcastAction, LeaderBroadcast};
use crate::state_machine::{SnapshotError, StateMachine};
use crate::txnlog::{Snapshot, SnapshotPolicy, Txn, TxnLog, TxnLogError};
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
    pub(super) leader: Option<LeaderBroadcast>,
    /// When to snapshot and compact the log.
    pub(super) policy: SnapshotPolicy,
    /// Committed transactions applied since the last snapshot.
    since_snapshot: u64,
}

impl Replication {
    /// Restores the state machine from the newest snapshot, then replays the log after it.
    pub(super) fn open(
        log: Box<dyn TxnLog>,
        sm: Box<dyn StateMachine>,
    ) -> Result<Self, ReplicationError> {
        let mut r = Self {
            log,
            sm,
            leader: None,
            policy: SnapshotPolicy::default(),
            since_snapshot: 0,
        };
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

    /// The history a new leader syncs learners from: base, transactions after it, snapshot.
    pub(super) fn history(&self) -> Result<(Zxid, Vec<Txn>, Option<Snapshot>), ReplicationError> {
        let snapshot = self.log.latest_snapshot()?;
        let base = match (&snapshot, self.log.first_zxid()) {
            (Some(s), Some(first)) if first > s.zxid => s.zxid,
            (Some(s), None) => s.zxid,
            _ => Zxid::ZERO,
        };
        Ok((base, self.log.read_after(base)?, snapshot))
    }

    /// Carries out a log or state-machine action (learner side, or the leader's own).
    pub(super) fn carry_out(&mut self, a: BroadcastAction) -> Result<(), ReplicationError> {
        match a {
            BroadcastAction::Log(txns) => self.log.append(&txns)?,
            // Already in the state (replayed from the log at start-up): skip.
            BroadcastAction::Apply(t) if t.zxid > self.sm.last_applied() => {
                self.sm.apply(&t);
                self.since_snapshot += 1;
            }
            BroadcastAction::CommitLogged(z) => {
                for t in self.log.read_after(self.sm.last_applied())? {
                    if t.zxid > z {
                        break;
                    }
                    self.sm.apply(&t);
                    self.since_snapshot += 1;
                }
            }
            BroadcastAction::Truncate(z) => {
                self.log.truncate(z)?;
                if self.sm.last_applied() > z {
                    // Applied transactions were cut: rebuild from the snapshot and the log.
                    self.sm.reset();
                    self.reload()?;
                }
            }
            BroadcastAction::RestoreSnapshot(s) => {
                self.log.clear()?;
                self.sm.restore(&s)?;
                self.log.save_snapshot(&s)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Z2, ZooKeeper's `snapCount`: once [`SnapshotPolicy::snap_count`] committed transactions
    /// were applied since the last snapshot, takes one, stores it durably and compacts the log
    /// it covers. The caller only asks while serving an established epoch: then everything
    /// applied is committed, whereas during a sync a later leader's TRUNC may still cut
    /// applied proposals, which a snapshot would make permanent. Returns whether it took one.
    pub(super) fn snapshot_if_due(&mut self) -> Result<bool, ReplicationError> {
        if self.since_snapshot < self.policy.snap_count.max(1) {
            return Ok(false);
        }
        self.since_snapshot = 0;
        let snapshot = self.sm.take_snapshot();
        self.log.save_snapshot(&snapshot)?;
        self.log.purge(snapshot.zxid)?;
        Ok(true)
    }
}
