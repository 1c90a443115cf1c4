//! The leader's synchronisation choice (ZooKeeper's `LearnerHandler.syncFollower`) and the
//! packet sequence it sends a learner.

use bytes::Bytes;

use crate::packet::{epoch_zxid, packet_type, QuorumPacket, MAX_PACKET_DATA};
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

/// ZooKeeper's `commitLogCount`: a learner missing at most this many of the newest committed
/// transactions always gets a DIFF (ZooKeeper serves it from its in-memory `committedLog`).
pub const COMMIT_LOG_COUNT: usize = 500;

/// ZooKeeper's `zookeeper.snapshotSizeFactor`: a learner further behind than
/// [`COMMIT_LOG_COUNT`] gets a DIFF only while the transactions it lacks add up to at most
/// this fraction of the snapshot's size, else a SNAP (ZooKeeper's `getProposalsFromTxnLog`
/// with its `sizeLimit`).
pub const SNAPSHOT_SIZE_FACTOR: f64 = 0.33;

/// What sending `t` in a DIFF costs: its payload and a PROPOSAL and COMMIT packet header
/// (about the 12 bytes of type and zxid and 4 of data length each), as ZooKeeper weighs a
/// DIFF by its log file size.
pub fn sync_weight(t: &Txn) -> u64 {
    t.data.len() as u64 + 2 * 16
}

/// Whether a DIFF of `count` transactions weighing `weight` ([`sync_weight`]) costs more
/// than [`SNAPSHOT_SIZE_FACTOR`] of a snapshot of `snapshot_size` bytes; only considered
/// beyond `window` ([`COMMIT_LOG_COUNT`]) transactions.
pub fn diff_exceeds_snapshot_factor(
    count: u64,
    weight: u64,
    snapshot_size: u64,
    window: usize,
) -> bool {
    count > window as u64 && weight as f64 > snapshot_size as f64 * SNAPSHOT_SIZE_FACTOR
}

/// Whether sending `lacking` as a DIFF costs more than [`SNAPSHOT_SIZE_FACTOR`] of
/// `snapshot` (only considered beyond [`COMMIT_LOG_COUNT`] transactions).
fn diff_too_large(lacking: &[Txn], snapshot: &Snapshot) -> bool {
    let diff: u64 = lacking.iter().map(sync_weight).fold(0, u64::saturating_add);
    diff_exceeds_snapshot_factor(
        lacking.len() as u64,
        diff,
        snapshot.data.len() as u64,
        COMMIT_LOG_COUNT,
    )
}

/// A snapshot's zxid and size, without its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// The last transaction the snapshot contains.
    pub zxid: Zxid,
    /// The size of its data in bytes.
    pub size: u64,
}

/// What the embedder read from its transaction log for a learner's sync: the answer to
/// [`PeerAction::ReadLog`](crate::peer::PeerAction::ReadLog), given with
/// [`PeerInput::LogRead`](crate::peer::PeerInput::LogRead). Facts only; the leader's core
/// decides DIFF, TRUNC or SNAP from them. Build it with
/// [`read_for_sync`](crate::txnlog::read_for_sync) from any [`TxnLog`](crate::txnlog::TxnLog).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogRead {
    /// The request's `after`.
    pub after: Zxid,
    /// The request's `upto`.
    pub upto: Zxid,
    /// The zxid of the oldest transaction still in the log, if any.
    pub first: Option<Zxid>,
    /// A probe's: the newest logged zxid at or below `after`, if the log holds any (`None`
    /// for a read).
    pub prev: Option<Zxid>,
    /// The newest snapshot, if any.
    pub snapshot: Option<SnapshotInfo>,
    /// How many logged transactions lie in `(after, upto]` (a probe, `max_bytes == 0`) or
    /// were read (`txns.len()`).
    pub count: u64,
    /// Their [`sync_weight`], summed.
    pub weight: u64,
    /// The transactions read, in order (none for a probe).
    pub txns: Vec<Txn>,
    /// Every logged transaction of `(after, upto]` is in `txns` (always `true` for a probe).
    pub complete: bool,
}

impl LogRead {
    /// A read result, for embedders that read their log themselves.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        after: Zxid,
        upto: Zxid,
        first: Option<Zxid>,
        prev: Option<Zxid>,
        snapshot: Option<SnapshotInfo>,
        count: u64,
        weight: u64,
        txns: Vec<Txn>,
        complete: bool,
    ) -> Self {
        Self {
            after,
            upto,
            first,
            prev,
            snapshot,
            count,
            weight,
            txns,
            complete,
        }
    }

    /// A probe's answer: whether `after` is a point of this server's history from which
    /// the log continues without a gap: it is logged, or is the newest snapshot's zxid (the
    /// log keeps everything after it), or is zero with no snapshot (nothing was ever
    /// compacted).
    pub fn continues_from_after(&self) -> bool {
        self.prev == Some(self.after)
            || self.snapshot.is_some_and(|s| s.zxid == self.after)
            || (self.after == Zxid::ZERO && self.snapshot.is_none())
    }

    /// Whether the log still holds everything after `z`, a point of the history it held
    /// everything after before (a position reached in earlier reads): compaction only drops
    /// a prefix, so it does while it keeps a transaction at or below `z`, or `z` is the newest
    /// snapshot's zxid, or zero with no snapshot.
    pub fn still_reaches(&self, z: Zxid) -> bool {
        self.first.is_some_and(|f| f <= z)
            || self.snapshot.is_some_and(|s| s.zxid == z)
            || (z == Zxid::ZERO && self.snapshot.is_none())
    }
}

/// Chooses DIFF, TRUNC or SNAP for a learner whose last logged zxid is `peer_last`.
///
/// `committed` holds, in order, every committed transaction of the leader with a zxid above
/// `base` (what its log still holds; [`Zxid::ZERO`] when it holds everything), and `snapshot`
/// is its newest snapshot, needed when the learner is older than `base`, and chosen instead of
/// a DIFF longer than [`COMMIT_LOG_COUNT`] transactions whose size exceeds
/// [`SNAPSHOT_SIZE_FACTOR`] of the snapshot's (`LearnerHandler.syncFollower`). Returns `None`
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
        let lacking = &committed[committed.partition_point(|t| t.zxid <= peer_last)..];
        if let Some(s) = snapshot.filter(|s| s.zxid > peer_last && s.zxid <= last) {
            if diff_too_large(lacking, s) {
                return Some(SyncPlan::Snap {
                    snapshot: s.clone(),
                    txns: after(s.zxid),
                });
            }
        }
        return Some(SyncPlan::Diff {
            after: peer_last,
            txns: lacking.to_vec(),
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
/// A SNAP of any size goes as [`snap_packets`]: a header and chunks of at most
/// [`SNAP_CHUNK`] bytes each.
pub fn leader_sync_packets(plan: &SyncPlan, new_epoch: i64) -> Vec<QuorumPacket> {
    let mut out = Vec::new();
    let txns = match plan {
        SyncPlan::Diff { after, txns } => {
            out.push(QuorumPacket::new(packet_type::DIFF, after.0));
            txns
        }
        SyncPlan::Trunc { to, txns } => {
            out.push(QuorumPacket::new(packet_type::TRUNC, to.0));
            txns
        }
        SyncPlan::Snap { snapshot, txns } => {
            out.extend(snap_packets(snapshot));
            txns
        }
    };
    out.reserve(1 + 2 * txns.len());
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

/// Bytes of snapshot carried by one SNAP chunk: one packet's data limit
/// ([`MAX_PACKET_DATA`], ZooKeeper's `jute.maxbuffer`).
pub const SNAP_CHUNK: usize = MAX_PACKET_DATA;

/// Length of the data of the SNAP header packet: the snapshot's size, an `i64` big-endian.
pub const SNAP_HEADER_LEN: usize = 8;

/// How many packets [`snap_packets`] makes of `snapshot`: the header and its chunks.
pub fn snap_packet_count(snapshot: &Snapshot) -> usize {
    1 + snapshot.data.len().div_ceil(SNAP_CHUNK)
}

/// The SNAP of `snapshot` between two of our peers: a header `SNAP(zxid, data = i64 size)`,
/// then `ceil(size / SNAP_CHUNK)` packets `SNAP(zxid, data = chunk)` in order. The learner
/// assembles the chunks and restores the snapshot only once the last byte of `size` arrived.
/// The chunks share the snapshot's buffer (no copy).
///
/// ZooKeeper's leader instead sends `SNAP` with null data followed by the serialized data tree
/// as one raw stream (`LearnerHandler.syncFollower`, `Learner.syncWithLeader`); the header and
/// chunks here are that stream cut at packet boundaries, so that no packet exceeds
/// `jute.maxbuffer` and the transport can pace them.
pub fn snap_packets(snapshot: &Snapshot) -> impl Iterator<Item = QuorumPacket> {
    let zxid = snapshot.zxid.0;
    let data = snapshot.data.clone();
    let size = i64::try_from(data.len()).unwrap_or(i64::MAX);
    let header = QuorumPacket::with_data(
        packet_type::SNAP,
        zxid,
        Bytes::copy_from_slice(&size.to_be_bytes()),
    );
    let chunks = data.len().div_ceil(SNAP_CHUNK);
    std::iter::once(header).chain((0..chunks).map(move |i| {
        let end = ((i + 1) * SNAP_CHUNK).min(data.len());
        QuorumPacket::with_data(packet_type::SNAP, zxid, data.slice(i * SNAP_CHUNK..end))
    }))
}
