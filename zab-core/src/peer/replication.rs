//! The peer's replicated state: its transaction log, its state machine and, while it leads an
//! established epoch, the broadcast core. Carries out the log and state-machine actions of
//! synchronisation and broadcast.

use crate::broadcast::{BroadcastAction, LeaderBroadcast};
use crate::state_machine::{SnapshotError, StateMachine};
use crate::txnlog::{Snapshot, Txn, TxnLog, TxnLogError};
use crate::zxid::Zxid;

/// Why replication failed; the peer stops rather than continue with a log it cannot trust.
#[derive(Debug, thiserror::Error)]
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
            BroadcastAction::Apply(t) if t.zxid > self.sm.last_applied() => self.sm.apply(&t),
            BroadcastAction::CommitLogged(z) => {
                for t in self.log.read_after(self.sm.last_applied())? {
                    if t.zxid > z {
                        break;
                    }
                    self.sm.apply(&t);
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
}
