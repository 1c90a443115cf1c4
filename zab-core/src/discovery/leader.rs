//! `LeaderDiscovery`: the leader's side of Zab discovery and its heartbeats, as a sans-IO state
//! machine (Zab's phase 1, ZooKeeper's `Leader.lead`; Z1, Z5, Z6).
//!
//! 1. Collect FOLLOWERINFO (each learner's `acceptedEpoch`). Once the senders plus ourselves
//!    contain a quorum, propose `max(acceptedEpoch) + 1`, persist it as our `acceptedEpoch` and
//!    send LEADERINFO.
//! 2. Collect ACKEPOCH (`currentEpoch`, last zxid); a learner more recent than us is refused.
//!    Once a quorum acknowledged, persist `currentEpoch` and sync each learner: DIFF / TRUNC /
//!    SNAP chosen from the in-memory window of the newest committed transactions given with
//!    [`LeaderDiscovery::set_history`] (ZooKeeper's `committedLog`; an empty DIFF without
//!    one), or, for a learner older than the window, from the transaction log read in chunks
//!    through [`DiscoveryAction::ReadLog`] and the snapshot read through
//!    [`DiscoveryAction::ReadSnapshot`] (`LearnerHandler.syncFollower`); the transactions,
//!    then NEWLEADER (ZOOKEEPER-3104).
//! 3. Once a quorum acknowledged NEWLEADER the epoch is established; send UPTODATE.
//! 4. Ping every half tick; a learner silent for `syncLimit` ticks is dropped; without a quorum
//!    of live learners the leader steps down. Nothing is established without a quorum within
//!    `initLimit` ticks.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use tracing::{debug, info, warn};

use super::action::{DiscoveryAction, Timing};
use crate::broadcast::{
    choose_sync, diff_exceeds_snapshot_factor, leader_sync_packets, snap_packet_count,
    snap_packets, sync_weight, BroadcastAction, LogRead, COMMIT_LOG_COUNT,
};
use crate::packet::QuorumPacket;
use crate::packet::{
    check_learner_claim, decode_i32_payload, i32_payload, packet_type, LEARNER_PROTOCOL_VERSION,
};
use crate::packet::{epoch_zxid, zxid_epoch};
use crate::quorum::QuorumVerifier;
use crate::store::PersistedEpochs;
use crate::txnlog::{Snapshot, Txn};
use crate::types::ServerId;
use crate::zxid::Zxid;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    /// FOLLOWERINFO received.
    Info,
    /// LEADERINFO sent.
    LeaderInfoSent,
    /// ACKEPOCH received.
    EpochAcked,
    /// DIFF + NEWLEADER sent.
    NewLeaderSent,
    /// NEWLEADER acknowledged.
    Synced,
}

/// Most [`sync_weight`] of transactions asked in one [`DiscoveryAction::ReadLog`] chunk.
pub const LOG_READ_CHUNK_BYTES: u64 = 4 << 20;

/// Most transactions asked in one [`DiscoveryAction::ReadLog`] chunk (two packets each).
pub const LOG_READ_CHUNK_TXNS: usize = 512;

#[derive(Debug)]
struct Learner {
    stage: Stage,
    last_heard: Instant,
    /// The last zxid from its ACKEPOCH.
    last_zxid: i64,
    /// Where its sync from the log stands, while one runs.
    sync: Option<LogSync>,
    /// The snapshot being sent to it, while [`LogSync::SnapPackets`].
    snapshot: Option<Snapshot>,
}

/// A learner's sync from the transaction log, one read at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LogSync {
    /// Probed the log after the learner's last zxid.
    Probing { peer_last: Zxid },
    /// The DIFF, TRUNC or SNAP was sent, and every transaction up to `cursor`: reading on.
    Reading { cursor: Zxid },
    /// Waiting for the snapshot.
    Snapshot,
    /// Sending the snapshot: the first `sent` of its packets (header, chunks) went out, the
    /// next ones follow the [`DiscoveryAction::AwaitDrain`] asked for.
    SnapPackets { sent: usize },
}

/// Most SNAP packets (1 MiB chunks, the first one a size header) sent to a learner before the
/// next ones wait for a [`DiscoveryAction::AwaitDrain`]: a snapshot of any size reaches the
/// transport a few dozen packets at a time, never all at once.
pub const SNAP_PACKETS_PER_BATCH: usize = 64;

/// For a learner whose last zxid `peer_last` is not a point of our history the log continues
/// from (a transaction of an abandoned epoch): the newest point below it that we share, from
/// which the log goes on. The newest logged zxid below it; else, when the log holds everything
/// after the newest snapshot and the snapshot is older than the learner, the snapshot's zxid;
/// else, with no snapshot (the log holds the whole history), zero. `None`: the learner is older
/// than the log reaches (a SNAP).
fn shared_point(read: &LogRead, peer_last: Zxid) -> Option<Zxid> {
    match (read.prev, read.snapshot) {
        (Some(p), _) => Some(p),
        (None, None) => Some(Zxid::ZERO),
        (None, Some(s)) if s.zxid < peer_last => Some(s.zxid),
        (None, Some(_)) => None,
    }
}

/// The leader's committed history in memory: the newest committed transactions (at most
/// `capacity`, ZooKeeper's `committedLog` of `commitLogCount`), after `base`. Older ones are
/// read from the log.
#[derive(Debug, Clone)]
struct History {
    base: Zxid,
    window: VecDeque<Txn>,
    /// The window's [`sync_weight`].
    weight: u64,
    capacity: usize,
}

impl History {
    fn last(&self) -> Zxid {
        self.window.back().map_or(self.base, |t| t.zxid)
    }

    fn push(&mut self, t: Txn) {
        if t.zxid <= self.last() {
            return;
        }
        self.weight = self.weight.saturating_add(sync_weight(&t));
        self.window.push_back(t);
        while self.window.len() > self.capacity {
            if let Some(old) = self.window.pop_front() {
                self.weight = self.weight.saturating_sub(sync_weight(&old));
                self.base = old.zxid;
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    CollectingInfo,
    WaitingEpochAcks,
    WaitingNewLeaderAcks,
    Established,
    Abandoned,
}

/// The leader's discovery and heartbeat state machine.
#[derive(Debug)]
pub struct LeaderDiscovery {
    me: ServerId,
    qv: Arc<dyn QuorumVerifier>,
    own: PersistedEpochs,
    timing: Timing,
    phase: Phase,
    new_epoch: i64,
    accepted: BTreeMap<ServerId, i64>,
    epoch_ackers: BTreeSet<ServerId>,
    newleader_ackers: BTreeSet<ServerId>,
    learners: BTreeMap<ServerId, Learner>,
    init_deadline: Instant,
    next_ping: Instant,
    actions: VecDeque<DiscoveryAction>,
    history: Option<History>,
    commit_log_count: usize,
}

impl LeaderDiscovery {
    /// Starts discovery at `now` for leader `me` whose durable state is `own`.
    pub fn new(
        now: Instant,
        me: ServerId,
        qv: Arc<dyn QuorumVerifier>,
        own: PersistedEpochs,
        timing: Timing,
    ) -> Self {
        let mut d = Self {
            me,
            qv,
            own,
            timing,
            phase: Phase::CollectingInfo,
            new_epoch: -1,
            accepted: BTreeMap::new(),
            epoch_ackers: BTreeSet::new(),
            newleader_ackers: BTreeSet::new(),
            learners: BTreeMap::new(),
            init_deadline: now + timing.init_timeout(),
            next_ping: now + timing.tick_time / 2,
            actions: VecDeque::new(),
            history: None,
            commit_log_count: COMMIT_LOG_COUNT,
        };
        // A single-voter ensemble is its own quorum.
        d.try_propose_epoch();
        d
    }

    /// How many of the newest committed transactions the leader keeps in memory
    /// (ZooKeeper's `commitLogCount`, default [`COMMIT_LOG_COUNT`]); set before
    /// [`set_history`](Self::set_history). A learner missing no more than these gets a DIFF
    /// from memory; one further behind is synced from the log.
    pub fn set_commit_log_count(&mut self, n: usize) {
        self.commit_log_count = n;
    }

    /// Sets the committed history learners are synchronised from: the newest logged
    /// transactions, in order, following `base` without a gap (only the newest
    /// [`set_commit_log_count`](Self::set_commit_log_count) of them are kept). A learner older
    /// than the window is synced from the log through [`DiscoveryAction::ReadLog`] and
    /// [`DiscoveryAction::ReadSnapshot`]. Without a history every learner gets an empty DIFF.
    pub fn set_history(&mut self, base: Zxid, committed: Vec<Txn>) {
        let mut h = History {
            base,
            window: VecDeque::with_capacity(committed.len().min(self.commit_log_count)),
            weight: 0,
            capacity: self.commit_log_count,
        };
        for t in committed {
            h.push(t);
        }
        self.history = Some(h);
    }

    /// Appends a transaction committed during broadcast to the in-memory window (the oldest
    /// one leaves it beyond its capacity), so that a learner that syncs later receives it.
    pub fn push_committed(&mut self, txn: Txn) {
        if let Some(h) = self.history.as_mut() {
            h.push(txn);
        }
    }

    /// The zxid the in-memory window of committed transactions follows, and how many it
    /// holds (while a history is set).
    pub fn committed_window(&self) -> Option<(Zxid, usize)> {
        self.history.as_ref().map(|h| (h.base, h.window.len()))
    }

    /// The proposed epoch, once a quorum's accepted epochs fixed it.
    pub fn proposed_epoch(&self) -> Option<i64> {
        (self.new_epoch >= 0).then_some(self.new_epoch)
    }

    /// Whether the epoch is established with a quorum.
    pub fn is_established(&self) -> bool {
        self.phase == Phase::Established
    }

    /// Every learner with an open discovery or synced session.
    pub fn learners(&self) -> Vec<ServerId> {
        self.learners.keys().copied().collect()
    }

    /// The learners that were sent their sync data and NEWLEADER (acknowledged or not).
    pub fn sync_sent_learners(&self) -> Vec<ServerId> {
        self.learners
            .iter()
            .filter(|(_, l)| l.stage >= Stage::NewLeaderSent)
            .map(|(s, _)| *s)
            .collect()
    }

    /// The learners that acknowledged NEWLEADER and are alive.
    pub fn synced_learners(&self) -> BTreeSet<ServerId> {
        self.learners
            .iter()
            .filter(|(_, l)| l.stage == Stage::Synced)
            .map(|(s, _)| *s)
            .collect()
    }

    fn with_me(&self, set: &BTreeSet<ServerId>) -> bool {
        let mut s = set.clone();
        s.insert(self.me);
        self.qv.contains_quorum(&s)
    }

    fn send(&mut self, to: ServerId, packet: QuorumPacket) {
        self.actions.push_back(DiscoveryAction::Send { to, packet });
    }

    fn abandon(&mut self, reason: &'static str) {
        if self.phase == Phase::Abandoned {
            return;
        }
        warn!(sid = self.me.0, reason, "leader gives up, going LOOKING");
        self.phase = Phase::Abandoned;
        self.actions.push_back(DiscoveryAction::Abandon { reason });
    }

    fn leader_info(&self) -> QuorumPacket {
        QuorumPacket::with_data(
            packet_type::LEADERINFO,
            epoch_zxid(self.new_epoch),
            i32_payload(LEARNER_PROTOCOL_VERSION),
        )
    }

    fn newleader(&self) -> QuorumPacket {
        QuorumPacket::with_data(
            packet_type::NEWLEADER,
            epoch_zxid(self.new_epoch),
            Bytes::from(self.qv.config_string()),
        )
    }

    fn send_newleader(&mut self, to: ServerId) {
        let newleader = self.newleader();
        let peer_last = Zxid(self.learners.get(&to).map_or(0, |l| l.last_zxid));
        let packets = match self.history.as_mut() {
            // No history given: an empty DIFF, then NEWLEADER.
            None => vec![
                QuorumPacket::new(packet_type::DIFF, self.own.last_zxid),
                newleader,
            ],
            Some(h) if peer_last < h.base => {
                // Older than the window: LearnerHandler.syncFollower reads the log.
                let upto = h.base;
                self.start_log_sync(to, peer_last, upto);
                return;
            }
            Some(h) => {
                let window = h.window.make_contiguous();
                let Some(plan) = choose_sync(peer_last, h.base, window, None) else {
                    warn!(sid = to.0, zxid = peer_last.0, "no sync plan, closing");
                    self.drop_learner(to);
                    return;
                };
                // The sync data, then NEWLEADER last (ZOOKEEPER-3104).
                let mut p = leader_sync_packets(&plan, self.new_epoch);
                p.pop();
                p.push(newleader);
                p
            }
        };
        for p in packets {
            self.send(to, p);
        }
        if let Some(l) = self.learners.get_mut(&to) {
            l.stage = Stage::NewLeaderSent;
        }
    }

    fn start_log_sync(&mut self, to: ServerId, peer_last: Zxid, upto: Zxid) {
        let Some(l) = self.learners.get_mut(&to) else {
            return;
        };
        debug!(
            sid = to.0,
            zxid = peer_last.0,
            "learner older than the committed window: probing the log"
        );
        l.sync = Some(LogSync::Probing { peer_last });
        self.actions.push_back(DiscoveryAction::ReadLog {
            learner: to,
            after: peer_last,
            upto,
            max_bytes: 0,
            max_txns: 0,
        });
    }

    fn set_sync(&mut self, to: ServerId, sync: Option<LogSync>) {
        if let Some(l) = self.learners.get_mut(&to) {
            l.sync = sync;
        }
    }

    fn ask_snapshot(&mut self, to: ServerId) {
        self.set_sync(to, Some(LogSync::Snapshot));
        self.actions.push_back(DiscoveryAction::ReadSnapshot(to));
    }

    /// Everything up to `cursor` was sent to `to`: read the next chunk of the log, or send
    /// the window's transactions after it and NEWLEADER.
    fn continue_log_sync(&mut self, to: ServerId, cursor: Zxid) {
        let Some(base) = self.history.as_ref().map(|h| h.base) else {
            return;
        };
        if cursor < base {
            self.set_sync(to, Some(LogSync::Reading { cursor }));
            self.actions.push_back(DiscoveryAction::ReadLog {
                learner: to,
                after: cursor,
                upto: base,
                max_bytes: LOG_READ_CHUNK_BYTES,
                max_txns: LOG_READ_CHUNK_TXNS,
            });
            return;
        }
        let Some(h) = self.history.as_ref() else {
            return;
        };
        let i = h.window.partition_point(|t| t.zxid <= cursor);
        let rest: Vec<Txn> = h.window.range(i..).cloned().collect();
        for t in &rest {
            self.send_txn(to, t);
        }
        let newleader = self.newleader();
        self.send(to, newleader);
        if let Some(l) = self.learners.get_mut(&to) {
            l.sync = None;
            l.stage = Stage::NewLeaderSent;
        }
    }

    fn send_txn(&mut self, to: ServerId, t: &Txn) {
        self.send(
            to,
            QuorumPacket::with_data(packet_type::PROPOSAL, t.zxid.0, t.data.clone()),
        );
        self.send(to, QuorumPacket::new(packet_type::COMMIT, t.zxid.0));
    }

    /// The answer, at `now`, to a [`DiscoveryAction::ReadLog`] for `learner`. One that no
    /// longer fits the learner's sync (it left, or started over) is ignored. A learner whose
    /// sync goes on counts as alive: its driver answers the next read once the learner took
    /// in what was sent before (see `QuorumPeer`), and the learner sends nothing until its
    /// sync is complete.
    pub fn log_read(&mut self, now: Instant, learner: ServerId, read: LogRead) {
        if self.phase == Phase::Abandoned {
            return;
        }
        if let Some(l) = self.learners.get_mut(&learner).filter(|l| l.sync.is_some()) {
            l.last_heard = now;
        }
        let Some(h) = self.history.as_ref() else {
            return;
        };
        let (window_count, window_weight, last) = (h.window.len() as u64, h.weight, h.last());
        let capacity = h.capacity;
        match self.learners.get(&learner).and_then(|l| l.sync) {
            Some(LogSync::Probing { peer_last }) if read.after == peer_last => {
                if read.continues_from_after() {
                    // ZooKeeper's getProposalsFromTxnLog with its size limit: a SNAP instead
                    // of a DIFF that outweighs snapshotSizeFactor of the snapshot.
                    let count = read.count.saturating_add(window_count);
                    let weight = read.weight.saturating_add(window_weight);
                    let snap_better = read.snapshot.is_some_and(|s| {
                        s.zxid > peer_last
                            && s.zxid <= last
                            && diff_exceeds_snapshot_factor(count, weight, s.size, capacity)
                    });
                    if snap_better {
                        self.ask_snapshot(learner);
                        return;
                    }
                    self.send(learner, QuorumPacket::new(packet_type::DIFF, peer_last.0));
                    self.continue_log_sync(learner, peer_last);
                } else if let Some(shared) = shared_point(&read, peer_last) {
                    // Not one of ours but within the history the log holds: a transaction of
                    // an abandoned epoch. Cut the learner back to the last zxid we share.
                    self.send(learner, QuorumPacket::new(packet_type::TRUNC, shared.0));
                    self.continue_log_sync(learner, shared);
                } else {
                    // Older than the log reaches.
                    self.ask_snapshot(learner);
                }
            }
            Some(LogSync::Reading { cursor }) if read.after == cursor => {
                if !read.still_reaches(cursor) {
                    warn!(
                        sid = learner.0,
                        zxid = cursor.0,
                        "the log no longer reaches the learner's sync point, closing"
                    );
                    self.drop_learner(learner);
                    return;
                }
                let mut cursor = cursor;
                for t in read
                    .txns
                    .iter()
                    .filter(|t| t.zxid > read.after && t.zxid <= read.upto)
                {
                    if t.zxid <= cursor {
                        continue;
                    }
                    self.send_txn(learner, t);
                    cursor = t.zxid;
                }
                if read.complete {
                    cursor = cursor.max(read.upto);
                } else if cursor == read.after {
                    warn!(sid = learner.0, "an empty incomplete log read, closing");
                    self.drop_learner(learner);
                    return;
                }
                self.continue_log_sync(learner, cursor);
            }
            other => debug!(sid = learner.0, state = ?other, "log read ignored"),
        }
    }

    /// The answer to a [`DiscoveryAction::ReadSnapshot`] for `learner`: the newest snapshot,
    /// if any. One that no longer fits the learner's sync is ignored.
    pub fn snapshot_read(&mut self, learner: ServerId, snapshot: Option<Snapshot>) {
        if self.phase == Phase::Abandoned {
            return;
        }
        let Some(last) = self.history.as_ref().map(History::last) else {
            return;
        };
        if self.learners.get(&learner).and_then(|l| l.sync) != Some(LogSync::Snapshot) {
            debug!(sid = learner.0, "snapshot read ignored");
            return;
        }
        let Some(s) = snapshot.filter(|s| s.zxid <= last) else {
            warn!(sid = learner.0, "no snapshot to sync learner, closing");
            self.drop_learner(learner);
            return;
        };
        if let Some(l) = self.learners.get_mut(&learner) {
            l.snapshot = Some(s);
            l.sync = Some(LogSync::SnapPackets { sent: 0 });
        }
        self.send_snap_batch(learner);
    }

    /// The answer, at `now`, to a [`DiscoveryAction::AwaitDrain`] for `learner`: what was
    /// sent to it before has been taken in, so the next SNAP packets go out. One that no longer
    /// fits the learner's sync is ignored. Like a log read, it counts as a sign of life of a
    /// learner being synced.
    pub fn drained(&mut self, now: Instant, learner: ServerId) {
        if self.phase == Phase::Abandoned {
            return;
        }
        match self.learners.get_mut(&learner) {
            Some(l) if matches!(l.sync, Some(LogSync::SnapPackets { .. })) => {
                l.last_heard = now;
                self.send_snap_batch(learner);
            }
            _ => debug!(sid = learner.0, "drained ignored"),
        }
    }

    /// Sends `learner` the next [`SNAP_PACKETS_PER_BATCH`] packets of its snapshot, then asks
    /// for [`DiscoveryAction::AwaitDrain`] while some are left, or goes on with the
    /// transactions after the snapshot once all are sent.
    fn send_snap_batch(&mut self, learner: ServerId) {
        let Some(l) = self.learners.get(&learner) else {
            return;
        };
        let (Some(LogSync::SnapPackets { sent }), Some(s)) = (l.sync, l.snapshot.clone()) else {
            return;
        };
        let batch: Vec<QuorumPacket> = snap_packets(&s)
            .skip(sent)
            .take(SNAP_PACKETS_PER_BATCH)
            .collect();
        let sent = sent + batch.len();
        let done = sent >= snap_packet_count(&s);
        for p in batch {
            self.send(learner, p);
        }
        if done {
            if let Some(l) = self.learners.get_mut(&learner) {
                l.snapshot = None;
            }
            self.continue_log_sync(learner, s.zxid);
        } else {
            self.set_sync(learner, Some(LogSync::SnapPackets { sent }));
            self.actions.push_back(DiscoveryAction::AwaitDrain(learner));
        }
    }

    /// Z1: once FOLLOWERINFO from a quorum (with us) arrived, fix `max(acceptedEpoch) + 1`.
    fn try_propose_epoch(&mut self) {
        if self.phase != Phase::CollectingInfo {
            return;
        }
        let voters: BTreeSet<ServerId> = self.accepted.keys().copied().collect();
        if !self.with_me(&voters) {
            return;
        }
        let max = self
            .accepted
            .values()
            .copied()
            .chain(std::iter::once(self.own.accepted_epoch))
            .max()
            .unwrap_or(self.own.accepted_epoch);
        self.new_epoch = max.saturating_add(1);
        self.own.accepted_epoch = self.new_epoch;
        self.phase = Phase::WaitingEpochAcks;
        info!(
            sid = self.me.0,
            epoch = self.new_epoch,
            "proposing new epoch"
        );
        self.actions
            .push_back(DiscoveryAction::PersistAcceptedEpoch(self.new_epoch));
        let waiting: Vec<ServerId> = self.learners.keys().copied().collect();
        for sid in waiting {
            self.send(sid, self.leader_info());
            if let Some(l) = self.learners.get_mut(&sid) {
                l.stage = Stage::LeaderInfoSent;
            }
        }
        // A single-voter ensemble: our own acknowledgement is a quorum.
        self.try_establish_epoch();
    }

    fn try_establish_epoch(&mut self) {
        if self.phase != Phase::WaitingEpochAcks || !self.with_me(&self.epoch_ackers.clone()) {
            return;
        }
        self.own.current_epoch = self.new_epoch;
        self.phase = Phase::WaitingNewLeaderAcks;
        self.actions
            .push_back(DiscoveryAction::PersistCurrentEpoch(self.new_epoch));
        let acked: Vec<ServerId> = self
            .learners
            .iter()
            .filter(|(_, l)| l.stage == Stage::EpochAcked && l.sync.is_none())
            .map(|(s, _)| *s)
            .collect();
        for sid in acked {
            self.send_newleader(sid);
        }
        self.try_finish();
    }

    fn try_finish(&mut self) {
        if self.phase != Phase::WaitingNewLeaderAcks
            || !self.with_me(&self.newleader_ackers.clone())
        {
            return;
        }
        self.phase = Phase::Established;
        // The whole history of the new leader is committed in its epoch, including proposals
        // it logged as a follower without seeing their COMMIT.
        if self.own.last_zxid > 0 {
            self.actions
                .push_back(DiscoveryAction::Zab(BroadcastAction::CommitLogged(Zxid(
                    self.own.last_zxid,
                ))));
        }
        info!(
            sid = self.me.0,
            epoch = self.new_epoch,
            "leading: epoch established"
        );
        self.actions.push_back(DiscoveryAction::Established {
            epoch: self.new_epoch,
        });
        for sid in self.synced_learners() {
            self.send(sid, QuorumPacket::new(packet_type::UPTODATE, -1));
        }
    }

    /// A quorum packet from learner `from` arrived.
    pub fn handle_packet(&mut self, now: Instant, from: ServerId, p: QuorumPacket) {
        if self.phase == Phase::Abandoned {
            return;
        }
        if let Some(l) = self.learners.get_mut(&from) {
            l.last_heard = now;
        }
        // A learner claiming what no correct learner holds is dropped; the rest go on.
        if let Err(e) = check_learner_claim(&p, from.0, self.proposed_epoch()) {
            warn!(sid = from.0, "refusing learner: {e}");
            self.drop_learner(from);
            return;
        }
        match p.kind {
            packet_type::FOLLOWERINFO | packet_type::OBSERVERINFO => {
                let accepted = zxid_epoch(p.zxid);
                debug!(sid = from.0, accepted_epoch = accepted, "learner info");
                self.learners.insert(
                    from,
                    Learner {
                        stage: Stage::Info,
                        last_heard: now,
                        last_zxid: 0,
                        sync: None,
                        snapshot: None,
                    },
                );
                self.epoch_ackers.remove(&from);
                self.newleader_ackers.remove(&from);
                if p.kind == packet_type::FOLLOWERINFO && self.qv.is_voter(from) {
                    self.accepted.insert(from, accepted);
                }
                if self.phase == Phase::CollectingInfo {
                    self.try_propose_epoch();
                } else {
                    self.send(from, self.leader_info());
                    if let Some(l) = self.learners.get_mut(&from) {
                        l.stage = Stage::LeaderInfoSent;
                    }
                }
            }
            packet_type::ACKEPOCH => {
                let Some(stage) = self.learners.get(&from).map(|l| l.stage) else {
                    return;
                };
                if stage != Stage::LeaderInfoSent {
                    return;
                }
                let Ok(cur) = decode_i32_payload(p.data.as_ref(), "ACKEPOCH") else {
                    warn!(sid = from.0, "malformed ACKEPOCH, closing learner");
                    self.drop_learner(from);
                    return;
                };
                let cur = i64::from(cur);
                if cur != -1 {
                    // A learner whose history is more recent than ours cannot follow us (Z5).
                    let ahead = cur > self.own.current_epoch
                        || (cur == self.own.current_epoch && p.zxid > self.own.last_zxid);
                    if ahead {
                        warn!(
                            sid = from.0,
                            zxid = p.zxid,
                            "learner is ahead of the leader, closing"
                        );
                        self.drop_learner(from);
                        return;
                    }
                    if p.zxid != -1 && self.qv.is_voter(from) {
                        self.epoch_ackers.insert(from);
                    }
                }
                if let Some(l) = self.learners.get_mut(&from) {
                    l.stage = Stage::EpochAcked;
                    l.last_zxid = p.zxid;
                }
                match self.phase {
                    Phase::WaitingEpochAcks => self.try_establish_epoch(),
                    Phase::WaitingNewLeaderAcks | Phase::Established => self.send_newleader(from),
                    _ => {}
                }
            }
            packet_type::ACK => {
                let stage = self.learners.get(&from).map(|l| l.stage);
                if stage == Some(Stage::NewLeaderSent) && p.zxid == epoch_zxid(self.new_epoch) {
                    if let Some(l) = self.learners.get_mut(&from) {
                        l.stage = Stage::Synced;
                    }
                    if self.qv.is_voter(from) {
                        self.newleader_ackers.insert(from);
                    }
                    if self.phase == Phase::Established {
                        self.send(from, QuorumPacket::new(packet_type::UPTODATE, -1));
                    } else {
                        self.try_finish();
                    }
                }
            }
            // PING replies and anything else only prove liveness.
            _ => {}
        }
    }

    fn drop_learner(&mut self, sid: ServerId) {
        self.learners.remove(&sid);
        self.epoch_ackers.remove(&sid);
        self.newleader_ackers.remove(&sid);
        self.actions.push_back(DiscoveryAction::Close(sid));
    }

    /// The quorum connection of learner `sid` closed.
    pub fn learner_gone(&mut self, now: Instant, sid: ServerId) {
        if self.learners.remove(&sid).is_none() {
            return;
        }
        self.newleader_ackers.remove(&sid);
        debug!(sid = sid.0, "learner gone");
        if self.phase == Phase::Established {
            self.check_quorum(now);
        }
    }

    fn check_quorum(&mut self, now: Instant) {
        let timeout = self.timing.sync_timeout();
        let dead: Vec<ServerId> = self
            .learners
            .iter()
            .filter(|(_, l)| now.saturating_duration_since(l.last_heard) > timeout)
            .map(|(s, _)| *s)
            .collect();
        for sid in dead {
            warn!(sid = sid.0, "learner silent for syncLimit, dropping it");
            self.drop_learner(sid);
        }
        if !self.with_me(&self.synced_learners()) {
            self.abandon("lost the quorum of synced followers");
        }
    }

    /// Time passed: send pings, check liveness and the `initLimit` deadline.
    pub fn handle_tick(&mut self, now: Instant) {
        match self.phase {
            Phase::Abandoned => {}
            Phase::Established => {
                if now >= self.next_ping {
                    self.next_ping = now + self.timing.tick_time / 2;
                    for sid in self.synced_learners() {
                        self.send(
                            sid,
                            QuorumPacket::new(packet_type::PING, self.own.last_zxid),
                        );
                    }
                    self.check_quorum(now);
                }
            }
            _ => {
                if now >= self.init_deadline {
                    self.abandon("no quorum acknowledged the new epoch within initLimit");
                }
            }
        }
    }

    /// When [`handle_tick`](Self::handle_tick) must next be called.
    pub fn next_deadline(&self) -> Option<Instant> {
        match self.phase {
            Phase::Abandoned => None,
            Phase::Established => Some(self.next_ping),
            _ => Some(self.init_deadline),
        }
    }

    /// The next action, if any.
    #[must_use = "an action not carried out is a lost send, persist or apply"]
    pub fn poll_action(&mut self) -> Option<DiscoveryAction> {
        self.actions.pop_front()
    }
}
