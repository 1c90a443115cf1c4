//! `LeaderDiscovery`: the leader's side of Zab discovery and its heartbeats, as a sans-IO state
//! machine (Zab's phase 1, ZooKeeper's `Leader.lead`; Z1, Z5, Z6).
//!
//! 1. Collect FOLLOWERINFO (each learner's `acceptedEpoch`). Once the senders plus ourselves
//!    contain a quorum, propose `max(acceptedEpoch) + 1`, persist it as our `acceptedEpoch` and
//!    send LEADERINFO.
//! 2. Collect ACKEPOCH (`currentEpoch`, last zxid); a learner more recent than us is refused.
//!    Once a quorum acknowledged, persist `currentEpoch` and sync each learner: DIFF / TRUNC /
//!    SNAP chosen from the history given with [`LeaderDiscovery::set_history`] (an empty DIFF
//!    without one), the transactions, then NEWLEADER (ZOOKEEPER-3104).
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
use crate::broadcast::{choose_sync, leader_sync_packets, BroadcastAction};
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

#[derive(Debug)]
struct Learner {
    stage: Stage,
    last_heard: Instant,
    /// The last zxid from its ACKEPOCH.
    last_zxid: i64,
}

/// The leader's committed history, from which learners are synchronised.
#[derive(Debug, Clone)]
struct History {
    base: Zxid,
    committed: Vec<Txn>,
    snapshot: Option<Snapshot>,
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
        };
        // A single-voter ensemble is its own quorum.
        d.try_propose_epoch();
        d
    }

    /// Sets the committed history learners are synchronised from: every committed
    /// transaction above `base`, in order, and the newest snapshot (needed for learners older
    /// than `base`). Without it every learner gets an empty DIFF.
    pub fn set_history(&mut self, base: Zxid, committed: Vec<Txn>, snapshot: Option<Snapshot>) {
        self.history = Some(History {
            base,
            committed,
            snapshot,
        });
    }

    /// Appends a transaction committed during broadcast to the history, so that a learner
    /// that syncs later receives it.
    pub fn push_committed(&mut self, txn: Txn) {
        if let Some(h) = self.history.as_mut() {
            h.committed.push(txn);
        }
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

    fn send_newleader(&mut self, to: ServerId) {
        let newleader = QuorumPacket::with_data(
            packet_type::NEWLEADER,
            epoch_zxid(self.new_epoch),
            Bytes::from(self.qv.config_string()),
        );
        let packets = match &self.history {
            // No history given: an empty DIFF, then NEWLEADER.
            None => vec![
                QuorumPacket::new(packet_type::DIFF, self.own.last_zxid),
                newleader,
            ],
            Some(h) => {
                let peer_last = Zxid(self.learners.get(&to).map_or(0, |l| l.last_zxid));
                let Some(plan) = choose_sync(peer_last, h.base, &h.committed, h.snapshot.as_ref())
                else {
                    warn!(
                        sid = to.0,
                        zxid = peer_last.0,
                        "no snapshot to sync learner, closing"
                    );
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
            .filter(|(_, l)| l.stage == Stage::EpochAcked)
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
