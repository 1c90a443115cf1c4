//! What the recovery and broadcast state machines ask their driver to do.

use crate::packet::QuorumPacket;
use crate::txnlog::{Snapshot, Txn};
use crate::types::ServerId;
use crate::zxid::Zxid;

/// One step for the driver, carried out in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BroadcastAction {
    /// Send a quorum packet.
    Send {
        /// The destination.
        to: ServerId,
        /// The packet.
        packet: QuorumPacket,
    },
    /// Append these transactions to the [`TxnLog`](crate::txnlog::TxnLog) and make them
    /// durable before carrying out any later action. A leader then reports the write with
    /// [`LeaderBroadcast::local_logged`](super::LeaderBroadcast::local_logged).
    Log(Vec<Txn>),
    /// TRUNC: drop every logged transaction above this zxid.
    Truncate(Zxid),
    /// SNAP: clear the log, restore the state machine from this snapshot and store it.
    RestoreSnapshot(Snapshot),
    /// Apply a committed transaction to the state machine (in zxid order).
    Apply(Txn),
    /// Every transaction in the log up to and including this zxid is committed: apply, in
    /// zxid order, those the state machine has not applied yet. A learner synced by DIFF (or
    /// cut back by TRUNC) may hold logged proposals whose COMMIT it never received; the
    /// leader's choice vouches for them. A new leader commits its whole log the same way.
    CommitLogged(Zxid),
    /// Durably store `currentEpoch`.
    PersistCurrentEpoch(i64),
    /// The learner received UPTODATE: it may serve in this epoch.
    Established {
        /// The epoch.
        epoch: i64,
    },
    /// A `sync` barrier asked by this learner completed: everything committed before it was
    /// asked has been applied here.
    SyncDone {
        /// The leader's last committed zxid when it answered.
        zxid: Zxid,
    },
    /// Leave the epoch and go back to LOOKING.
    Abandon {
        /// Why.
        reason: &'static str,
    },
}

/// Why a write could not be proposed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BroadcastError {
    /// The zxid counter of this epoch is exhausted; the leader steps down so that a new
    /// epoch starts (ZOOKEEPER-1277).
    #[error("zxid counter exhausted in epoch {epoch}: a new epoch is needed")]
    Rollover {
        /// The exhausted epoch.
        epoch: i64,
    },
    /// The leader already gave up this epoch.
    #[error("the leader has left its epoch")]
    NotLeading,
}
