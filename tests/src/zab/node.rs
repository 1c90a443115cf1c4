//! One simulated ZooKeeper server: zab-core's real election core ([`FastLeaderElection`]), then
//! the real discovery cores ([`LeaderDiscovery`] / [`LearnerDiscovery`]) and, once an epoch is
//! established, the real broadcast core ([`LeaderBroadcast`]) — glued together the way
//! zab-core's own peer driver glues them, but without IO: inputs are calls, outputs go to an
//! [`Outbox`]. Its durable state (`currentEpoch`, `acceptedEpoch`, the transaction log, hence
//! the last zxid) survives a crash; everything else is lost.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use zab_core::broadcast::{BroadcastAction, LeaderBroadcast, LearnerOptions};
use zab_core::discovery::{
    decode_i32_payload, packet_type, DiscoveryAction, LeaderDiscovery, LearnerDiscovery,
    QuorumPacket, Timing,
};
use zab_core::store::PersistedEpochs;

use super::ZabConfig;
use zab_core::txnlog::Txn;
use zab_core::{
    Action, Decision, FastLeaderElection, LearnerType, Notification, QuorumVerifier, ServerId,
    ServerState, VoteData, Zxid,
};

/// What a server survives a crash with: its epochs and its (always flushed) transaction log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Durable {
    /// `currentEpoch`.
    pub current_epoch: i64,
    /// `acceptedEpoch`.
    pub accepted_epoch: i64,
    /// The transaction log, in zxid order.
    pub log: Vec<Txn>,
}

impl Durable {
    /// The last logged zxid (0 for an empty log).
    pub fn last_zxid(&self) -> Zxid {
        self.log.last().map_or(Zxid::ZERO, |t| t.zxid)
    }

    /// The data this server votes with.
    pub fn vote_data(&self) -> VoteData {
        VoteData::new(self.last_zxid(), self.current_epoch)
    }

    /// The state the discovery cores start from.
    pub fn epochs(&self) -> PersistedEpochs {
        PersistedEpochs {
            current_epoch: self.current_epoch,
            accepted_epoch: self.accepted_epoch,
            last_zxid: self.last_zxid().0,
        }
    }

    /// `(currentEpoch, last zxid)`: how recent this history is (Z5 compares these).
    pub fn recency(&self) -> (i64, i64) {
        (self.current_epoch, self.last_zxid().0)
    }
}

/// Something a server did that the simulator carries out or checks.
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    /// An election notification, as wire bytes (the receiver decodes them).
    Vote {
        /// Recipient.
        to: ServerId,
        /// The encoded notification.
        bytes: Bytes,
    },
    /// A quorum packet over the (in-order) quorum connection.
    Quorum {
        /// Recipient.
        to: ServerId,
        /// The packet.
        packet: QuorumPacket,
    },
    /// Close the quorum connection with this server.
    Close(ServerId),
    /// Refuse a would-be learner: we do not lead.
    Refuse(ServerId),
    /// The election decided; `recency` is how recent our history was at the decision.
    Decided {
        /// The decision.
        decision: Decision,
        /// Our own `(currentEpoch, last zxid)`.
        recency: (i64, i64),
    },
    /// A learner acknowledged a new epoch (ACKEPOCH) with this history.
    AckedEpoch {
        /// The leader.
        leader: ServerId,
        /// The epoch acknowledged.
        epoch: i64,
        /// The learner's `(currentEpoch, last zxid)` when it acknowledged.
        recency: (i64, i64),
        /// Whether the acknowledgement carried the learner's `currentEpoch` (`false`: it had
        /// already accepted this epoch and sent −1, so the leader cannot compare epochs).
        with_epoch: bool,
    },
    /// A leader fixed its new epoch with a quorum of ACKEPOCHs (it persists `currentEpoch`).
    EpochAcked {
        /// The epoch.
        epoch: i64,
        /// The learners whose ACKEPOCH arrived before, and were not refused as ahead of us.
        ackers: Vec<ServerId>,
    },
    /// An epoch is established: as leader (`leader == me`) or as learner.
    Established {
        /// The leader.
        leader: ServerId,
        /// The epoch.
        epoch: i64,
    },
    /// The leader committed a transaction (Z2).
    Committed(Txn),
    /// The server left its role and is LOOKING again (Z6, Z8).
    Abandoned(&'static str),
}

/// What a server sends and decides, collected by the simulator after each input.
pub type Outbox = Vec<Out>;

/// The role after the election.
#[derive(Debug)]
enum Role {
    Looking,
    Leader {
        disc: Box<LeaderDiscovery>,
        broadcast: Option<Box<LeaderBroadcast>>,
        /// `(currentEpoch, last zxid)` at the decision: what Z5 compares with.
        recency: (i64, i64),
        /// ACKEPOCHs that arrived before the epoch was fixed (`None` once fixed).
        ackers: Option<Vec<ServerId>>,
    },
    Learner(Box<LearnerDiscovery>),
}

/// A running server.
#[derive(Debug)]
pub struct Server {
    me: ServerId,
    voter: bool,
    qv: Arc<dyn QuorumVerifier>,
    timing: Timing,
    core: FastLeaderElection,
    role: Role,
    /// FOLLOWERINFO / OBSERVERINFO received while LOOKING (a follower may decide first).
    stashed: BTreeMap<ServerId, QuorumPacket>,
    /// The established epoch, as leader or learner.
    established: Option<i64>,
}

impl Server {
    /// Starts a server from its durable state: a fresh election core, LOOKING, first round.
    pub fn start(
        now: Instant,
        me: ServerId,
        qv: Arc<dyn QuorumVerifier>,
        cfg: &ZabConfig,
        durable: &mut Durable,
        out: &mut Outbox,
    ) -> Server {
        let timing = cfg.timing;
        let voter = qv.is_voter(me);
        let lt = if voter {
            LearnerType::Participant
        } else {
            LearnerType::Observer
        };
        let mut core = FastLeaderElection::new(
            cfg.election.clone(),
            me,
            lt,
            qv.clone(),
            durable.vote_data(),
        );
        if let Some(apply) = cfg.old_election_rules {
            apply(&mut core);
        }
        let mut s = Server {
            me,
            voter,
            qv,
            timing,
            core,
            role: Role::Looking,
            stashed: BTreeMap::new(),
            established: None,
        };
        s.core.start(now);
        s.drain(now, durable, out);
        s
    }

    /// The election core (state, round, votes).
    pub fn core(&self) -> &FastLeaderElection {
        &self.core
    }

    /// Whether this server votes.
    pub fn is_voter(&self) -> bool {
        self.voter
    }

    /// The leader followed or ourselves when leading; `None` while LOOKING.
    pub fn leader(&self) -> Option<ServerId> {
        match &self.role {
            Role::Looking => None,
            Role::Leader { .. } => Some(self.me),
            Role::Learner(d) => Some(d.leader()),
        }
    }

    /// The epoch established with a quorum, as leader or learner.
    pub fn established(&self) -> Option<i64> {
        self.established
    }

    /// Whether this server leads an established epoch.
    pub fn is_established_leader(&self) -> bool {
        matches!(self.role, Role::Leader { .. }) && self.established.is_some()
    }

    /// The earliest time a timer of this server fires.
    pub fn next_deadline(&self) -> Option<Instant> {
        let role = match &self.role {
            Role::Looking => None,
            Role::Leader { disc, .. } => disc.next_deadline(),
            Role::Learner(d) => d.next_deadline(),
        };
        match (self.core.next_deadline(), role) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Election wire bytes from `from`. Undecodable ones are dropped; the receiver goes on
    /// (as in ZooKeeper's `FastLeaderElection.Messenger.WorkerReceiver`, one bad message must never silence a server).
    pub fn on_vote(
        &mut self,
        now: Instant,
        from: ServerId,
        bytes: &[u8],
        d: &mut Durable,
        out: &mut Outbox,
    ) -> bool {
        let Ok(n) = Notification::decode(bytes) else {
            return false;
        };
        self.core.handle_notification(now, from, n);
        self.drain(now, d, out);
        true
    }

    /// A quorum packet from `from`.
    pub fn on_quorum(
        &mut self,
        now: Instant,
        from: ServerId,
        p: QuorumPacket,
        d: &mut Durable,
        out: &mut Outbox,
    ) {
        let opens = p.kind == packet_type::FOLLOWERINFO || p.kind == packet_type::OBSERVERINFO;
        match &mut self.role {
            Role::Leader {
                disc,
                broadcast,
                ackers,
                ..
            } => {
                if let Some(b) = broadcast.as_mut() {
                    b.handle_packet(from, p.clone());
                }
                let ackepoch = p.kind == packet_type::ACKEPOCH;
                disc.handle_packet(now, from, p);
                if let Some(a) = ackers.as_mut() {
                    if ackepoch && disc.learners().contains(&from) {
                        a.push(from);
                    }
                }
            }
            Role::Learner(_) if opens => out.push(Out::Refuse(from)),
            Role::Learner(l) => l.handle_packet(now, from, p),
            Role::Looking => {
                if opens {
                    self.stashed.insert(from, p);
                }
            }
        }
        self.drain(now, d, out);
    }

    /// The connection with `peer` came up.
    pub fn link_up(&mut self, now: Instant, peer: ServerId, d: &mut Durable, out: &mut Outbox) {
        self.core.connection_up(now, peer);
        self.drain(now, d, out);
    }

    /// The connection with `peer` went down (a partition, its crash, a reset, a close).
    pub fn link_down(&mut self, now: Instant, peer: ServerId, d: &mut Durable, out: &mut Outbox) {
        self.core.connection_down(now, peer);
        self.quorum_down(now, peer);
        self.drain(now, d, out);
    }

    /// Only the quorum connection with `peer` closed (the other end closed it).
    pub fn quorum_closed(
        &mut self,
        now: Instant,
        peer: ServerId,
        d: &mut Durable,
        out: &mut Outbox,
    ) {
        self.quorum_down(now, peer);
        self.drain(now, d, out);
    }

    fn quorum_down(&mut self, now: Instant, peer: ServerId) {
        match &mut self.role {
            Role::Leader {
                disc, broadcast, ..
            } => {
                if let Some(b) = broadcast.as_mut() {
                    b.remove_learner(peer);
                }
                disc.learner_gone(now, peer);
            }
            Role::Learner(l) if l.leader() == peer => l.connection_lost(now),
            Role::Learner(_) => {}
            Role::Looking => {
                self.stashed.remove(&peer);
            }
        }
    }

    /// The server we chose to follow refused our quorum connection: it does not lead.
    pub fn refused(&mut self, now: Instant, by: ServerId, d: &mut Durable, out: &mut Outbox) {
        match &mut self.role {
            Role::Learner(l) if l.leader() == by => l.refused(),
            Role::Leader { disc, .. } => disc.learner_gone(now, by),
            _ => {}
        }
        self.drain(now, d, out);
    }

    /// Time passed: fire due timers.
    pub fn tick(&mut self, now: Instant, d: &mut Durable, out: &mut Outbox) {
        if self.core.next_deadline().is_some_and(|t| t <= now) {
            self.core.handle_tick(now);
        }
        match &mut self.role {
            Role::Leader { disc, .. } => disc.handle_tick(now),
            Role::Learner(l) => l.handle_tick(now),
            Role::Looking => {}
        }
        self.drain(now, d, out);
    }

    /// A client write: an established leader proposes it (Z2); anyone else drops it.
    pub fn write(&mut self, now: Instant, data: Bytes, d: &mut Durable, out: &mut Outbox) {
        if let Role::Leader {
            broadcast: Some(b), ..
        } = &mut self.role
        {
            // A rollover (never reached here) makes the core abandon the epoch itself.
            let _ = b.propose(data);
        }
        self.drain(now, d, out);
    }

    /// Carries out every pending action of the cores, in order.
    fn drain(&mut self, now: Instant, d: &mut Durable, out: &mut Outbox) {
        loop {
            if let Some(a) = self.core.poll_action() {
                match a {
                    Action::Send { to, notification } => out.push(Out::Vote {
                        to,
                        bytes: Bytes::from(notification.encode()),
                    }),
                    Action::ConnectAll => {}
                    Action::Decided(dec) => self.on_decided(now, dec, d, out),
                }
                continue;
            }
            let next = match &mut self.role {
                Role::Looking => None,
                Role::Leader { disc, .. } => disc.poll_action(),
                Role::Learner(l) => l.poll_action(),
            };
            let Some(a) = next else {
                if self.drain_broadcast(now, d, out) {
                    continue;
                }
                return;
            };
            self.carry_out(now, a, d, out);
        }
    }

    fn carry_out(&mut self, now: Instant, a: DiscoveryAction, d: &mut Durable, out: &mut Outbox) {
        match a {
            DiscoveryAction::Send { to, packet } => {
                match &mut self.role {
                    // A learner synced after establishment joins the broadcast now.
                    Role::Leader {
                        broadcast: Some(b), ..
                    } if packet.kind == packet_type::NEWLEADER => b.add_learner(to),
                    Role::Learner(l) if packet.kind == packet_type::ACKEPOCH => {
                        let with_epoch = decode_i32_payload(packet.data.as_ref(), "ACKEPOCH")
                            .is_ok_and(|e| e != -1);
                        out.push(Out::AckedEpoch {
                            leader: l.leader(),
                            epoch: d.accepted_epoch,
                            recency: d.recency(),
                            with_epoch,
                        });
                    }
                    _ => {}
                }
                out.push(Out::Quorum { to, packet });
            }
            DiscoveryAction::PersistAcceptedEpoch(e) => d.accepted_epoch = e,
            DiscoveryAction::PersistCurrentEpoch(e) => {
                if let Role::Leader { ackers, .. } = &mut self.role {
                    if let Some(a) = ackers.take() {
                        out.push(Out::EpochAcked {
                            epoch: e,
                            ackers: a,
                        });
                    }
                }
                d.current_epoch = e;
                self.core.set_vote_data(d.vote_data());
            }
            DiscoveryAction::Close(s) => out.push(Out::Close(s)),
            DiscoveryAction::Established { epoch } => {
                self.established = Some(epoch);
                self.core.update_election_vote(epoch);
                let leader = self.leader().unwrap_or(self.me);
                if let Role::Leader {
                    disc, broadcast, ..
                } = &mut self.role
                {
                    let mut b =
                        LeaderBroadcast::new(self.me, self.qv.clone(), epoch, d.last_zxid());
                    for s in disc.sync_sent_learners() {
                        b.add_learner(s);
                    }
                    *broadcast = Some(Box::new(b));
                }
                out.push(Out::Established { leader, epoch });
            }
            DiscoveryAction::Abandon { reason } => self.go_looking(now, reason, d, out),
            DiscoveryAction::Zab(z) => {
                apply_to_log(d, z);
                self.core.set_vote_data(d.vote_data());
            }
        }
    }

    /// One action of the leader's broadcast core; `false` when there is none.
    fn drain_broadcast(&mut self, now: Instant, d: &mut Durable, out: &mut Outbox) -> bool {
        let Role::Leader {
            disc,
            broadcast: Some(b),
            ..
        } = &mut self.role
        else {
            return false;
        };
        let Some(a) = b.poll_action() else {
            return false;
        };
        match a {
            BroadcastAction::Send { to, packet } => out.push(Out::Quorum { to, packet }),
            BroadcastAction::Log(txns) => {
                let last = txns.last().map(|t| t.zxid);
                d.log.extend(txns);
                if let Some(z) = last {
                    b.local_logged(z);
                }
                self.core.set_vote_data(d.vote_data());
            }
            BroadcastAction::Apply(t) => {
                disc.push_committed(t.clone());
                out.push(Out::Committed(t));
            }
            BroadcastAction::Abandon { reason } => self.go_looking(now, reason, d, out),
            other => apply_to_log(d, other),
        }
        true
    }

    fn on_decided(&mut self, now: Instant, dec: Decision, d: &mut Durable, out: &mut Outbox) {
        let leader = dec.vote.leader;
        let state = dec.state;
        out.push(Out::Decided {
            decision: dec,
            recency: d.recency(),
        });
        self.established = None;
        match state {
            ServerState::Leading => {
                let mut disc =
                    LeaderDiscovery::new(now, self.me, self.qv.clone(), d.epochs(), self.timing);
                disc.set_history(Zxid::ZERO, d.log.clone(), None);
                for (from, p) in std::mem::take(&mut self.stashed) {
                    disc.handle_packet(now, from, p);
                }
                self.role = Role::Leader {
                    disc: Box::new(disc),
                    broadcast: None,
                    recency: d.recency(),
                    ackers: Some(Vec::new()),
                };
            }
            ServerState::Following | ServerState::Observing => {
                for (from, _) in std::mem::take(&mut self.stashed) {
                    out.push(Out::Refuse(from));
                }
                let mut l = LearnerDiscovery::new(
                    now,
                    self.me,
                    leader,
                    state == ServerState::Observing,
                    self.qv.version(),
                    d.epochs(),
                    self.timing,
                );
                l.set_broadcast_options(LearnerOptions::default().with_follow_broadcast(true));
                self.role = Role::Learner(Box::new(l));
            }
            ServerState::Looking => {}
        }
    }

    /// `(currentEpoch, last zxid)` the leader had when it won its election, if it leads.
    pub fn leader_recency(&self) -> Option<(i64, i64)> {
        match &self.role {
            Role::Leader { recency, .. } => Some(*recency),
            _ => None,
        }
    }

    /// The learners an established leader counts as synced.
    pub fn synced_learners(&self) -> Vec<ServerId> {
        match &self.role {
            Role::Leader { disc, .. } => disc.synced_learners().into_iter().collect(),
            _ => Vec::new(),
        }
    }

    /// Z6 / Z8: leave the role and start a new election round.
    fn go_looking(
        &mut self,
        now: Instant,
        reason: &'static str,
        d: &mut Durable,
        out: &mut Outbox,
    ) {
        match std::mem::replace(&mut self.role, Role::Looking) {
            Role::Leader { disc, .. } => {
                for s in disc.learners() {
                    out.push(Out::Close(s));
                }
            }
            Role::Learner(l) => out.push(Out::Close(l.leader())),
            Role::Looking => {}
        }
        self.established = None;
        out.push(Out::Abandoned(reason));
        self.core.set_vote_data(d.vote_data());
        self.core.start(now);
    }
}

/// Carries out a log action of synchronisation or broadcast on the durable log. The log is
/// written through (flushed) before the next action, as the cores require.
fn apply_to_log(d: &mut Durable, a: BroadcastAction) {
    match a {
        BroadcastAction::Log(txns) => {
            for t in txns {
                if t.zxid > d.last_zxid() {
                    d.log.push(t);
                }
            }
        }
        BroadcastAction::Truncate(z) => d.log.retain(|t| t.zxid <= z),
        BroadcastAction::RestoreSnapshot(_) => d.log.clear(),
        BroadcastAction::PersistCurrentEpoch(e) => d.current_epoch = e,
        _ => {}
    }
}
