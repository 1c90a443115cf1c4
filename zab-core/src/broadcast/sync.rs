//! The leader's synchronisation choice (ZooKeeper's `LearnerHandler.syncFollower`) and the
//! packet sequence it sends a learner.

use crate::packet::{epoch_zxid, packet_type, QuorumPacket};
use crate::txnlog::{Snapshot, Txn};
use crate::zxid::Zxid;

/// How the leader brings a learner up to date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncPlan {
    /// DIFF: the learner's history is a prefix of ours; send what follows `after`.
    Diff {
        /// The learner's last zxid.
        after: Zxid,
        /// The committed transactions it lacks.
        txns: Vec<Txn>,
    },
    /// TRUNC: the learner holds transactions we never committed; it cuts its log to `to`,
    /// then receives what follows.
    Trunc {
        /// The zxid to truncate to.
        to: Zxid,
        /// The committed transactions after `to`.
        txns: Vec<Txn>,
    },
    /// SNAP: the learner is older than our log reaches; it restores our snapshot, then
    /// receives what follows it.
    Snap {
        /// The snapshot.
        snapshot: Snapshot,
        /// The committed transactions after the snapshot.
        txns: Vec<Txn>,
    },
}

/// Chooses DIFF, TRUNC or SNAP for a learner whose last logged zxid is `peer_last`.
///
/// `committed` holds, in order, every committed transaction of the leader with a zxid above
/// `base` (what its log still holds; [`Zxid::ZERO`] when it holds everything), and `snapshot`
/// is its newest snapshot, needed only when the learner is older than `base`. Returns `None`
/// when a snapshot is needed and none covers `base` (the leader cannot sync this learner).
pub fn choose_sync(
    peer_last: Zxid,
    base: Zxid,
    committed: &[Txn],
    snapshot: Option<&Snapshot>,
) -> Option<SyncPlan> {
    let last = committed.last().map(|t| t.zxid).unwrap_or(base);
    let after = |z: Zxid| {
        let i = committed.partition_point(|t| t.zxid <= z);
        committed[i..].to_vec()
    };
    if peer_last > last {
        // The learner is ahead of everything we committed: cut it back.
        return Some(SyncPlan::Trunc {
            to: last,
            txns: Vec::new(),
        });
    }
    if peer_last == base || committed.iter().any(|t| t.zxid == peer_last) {
        return Some(SyncPlan::Diff {
            after: peer_last,
            txns: after(peer_last),
        });
    }
    if peer_last > base {
        // Within our range but not one of ours: a transaction of an abandoned epoch. Cut the
        // learner back to the last zxid we share, then diff from there.
        let i = committed.partition_point(|t| t.zxid < peer_last);
        let to = i
            .checked_sub(1)
            .and_then(|j| committed.get(j))
            .map(|t| t.zxid)
            .unwrap_or(base);
        return Some(SyncPlan::Trunc {
            to,
            txns: after(to),
        });
    }
    let snapshot = snapshot.filter(|s| s.zxid >= base && s.zxid <= last)?;
    Some(SyncPlan::Snap {
        snapshot: snapshot.clone(),
        txns: after(snapshot.zxid),
    })
}

/// The packets the leader queues for a learner after its ACKEPOCH: DIFF / TRUNC / SNAP, a
/// PROPOSAL and COMMIT per transaction, and only then NEWLEADER (ZOOKEEPER-3104: a NEWLEADER
/// sent before the diff lets the learner acknowledge an epoch whose history it lacks).
///
/// A SNAP carries the snapshot in its data buffer, so it is limited to
/// [`MAX_PACKET_DATA`](crate::packet::MAX_PACKET_DATA).
pub fn leader_sync_packets(plan: &SyncPlan, new_epoch: i64) -> Vec<QuorumPacket> {
    let (head, txns) = match plan {
        SyncPlan::Diff { after, txns } => (QuorumPacket::new(packet_type::DIFF, after.0), txns),
        SyncPlan::Trunc { to, txns } => (QuorumPacket::new(packet_type::TRUNC, to.0), txns),
        SyncPlan::Snap { snapshot, txns } => (
            QuorumPacket::with_data(packet_type::SNAP, snapshot.zxid.0, snapshot.data.clone()),
            txns,
        ),
    };
    let mut out = Vec::with_capacity(2 + 2 * txns.len());
    out.push(head);
    for t in txns {
        out.push(QuorumPacket::with_data(
            packet_type::PROPOSAL,
            t.zxid.0,
            t.data.clone(),
        ));
        out.push(QuorumPacket::new(packet_type::COMMIT, t.zxid.0));
    }
    out.push(QuorumPacket::new(
        packet_type::NEWLEADER,
        epoch_zxid(new_epoch),
    ));
    out
}
