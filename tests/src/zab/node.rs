//! One simulated ZooKeeper server: zab-core's `PeerCore` (the production composition of the
//! election, discovery, sync and broadcast cores) run through zab-core's shared simulation
//! harness ([`SimServer`]). Inputs are calls; what the server sends and what the checker
//! observes go to an [`Outbox`]. Its durable state (`currentEpoch`, `acceptedEpoch`, the
//! transaction log, hence the last zxid) is mirrored in a [`Durable`] that survives a crash;
//! everything else is lost.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use zab_core::packet::{decode_i32_payload, packet_type, QuorumPacket};
use zab_core::peer::{PeerAction, PeerConfig, PeerInput};
use zab_core::simulation::SimServer;
use zab_core::store::PersistedEpochs;
use zab_core::txnlog::{FsyncPolicy, MemoryTxnLog, SnapshotPolicy, Txn, TxnLog};
use zab_core::{
    Decision, FastLeaderElection, LearnerType, Notification, QuorumVerifier, ServerId, ServerState,
    VoteData, Zxid,
};

use super::ZabConfig;

/// What a server survives a crash with: its epochs and its transaction log (flushed after
/// every input).
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

/// A running server.
#[derive(Debug)]
pub struct Server {
    srv: SimServer,
    voter: bool,
    /// While leading: `(currentEpoch, last zxid)` at the decision (what Z5 compares with).
    recency: Option<(i64, i64)>,
    /// While leading: the learners whose ACKEPOCH arrived before the epoch was fixed (`None`
    /// once fixed).
    ackers: Option<Vec<ServerId>>,
}

impl Server {
    /// Starts a server from its durable state: a fresh `PeerCore`, LOOKING; its first round
    /// starts once every voter is connected or its connect grace ran out.
    pub fn start(
        now: Instant,
        me: ServerId,
        qv: Arc<dyn QuorumVerifier>,
        cfg: &ZabConfig,
        durable: &mut Durable,
        out: &mut Outbox,
    ) -> Server {
        let voter = qv.is_voter(me);
        let lt = if voter {
            LearnerType::Participant
        } else {
            LearnerType::Observer
        };
        let peer = PeerConfig::new(me, lt, qv)
            .with_election(cfg.election.clone())
            .with_timing(cfg.timing);
        let mut log = MemoryTxnLog::with_policy(FsyncPolicy::EveryAppend);
        // (a history built by the test is in zxid order)
        let _ = log.append(&durable.log);
        let never = SnapshotPolicy::every(u64::MAX);
        let mut srv = SimServer::from_durable(peer, never, log, durable.epochs());
        if let Some(apply) = cfg.old_election_rules {
            apply(srv.core_mut().election_mut());
        }
        let mut s = Server {
            srv,
            voter,
            recency: None,
            ackers: None,
        };
        s.input(now, PeerInput::Start, durable, out);
        s
    }

    /// The election core (state, round, votes).
    pub fn core(&self) -> &FastLeaderElection {
        self.srv.core().election()
    }

    /// Whether this server votes.
    pub fn is_voter(&self) -> bool {
        self.voter
    }

    /// The leader followed or ourselves when leading; `None` while LOOKING.
    pub fn leader(&self) -> Option<ServerId> {
        self.srv.status().leader
    }

    /// The epoch established with a quorum, as leader or learner.
    pub fn established(&self) -> Option<i64> {
        self.srv.status().epoch
    }

    /// Whether this server leads an established epoch.
    pub fn is_established_leader(&self) -> bool {
        self.srv.status().is_established_leader()
    }

    /// The earliest time a timer of this server fires.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.srv.core().next_deadline()
    }

    /// Election wire bytes from `from`. Undecodable ones are dropped; the receiver goes on
    /// (as in ZooKeeper's `FastLeaderElection.Messenger.WorkerReceiver`, one bad message must
    /// never silence a server).
    pub fn on_vote(
        &mut self,
        now: Instant,
        from: ServerId,
        bytes: &[u8],
        d: &mut Durable,
        out: &mut Outbox,
    ) -> bool {
        let Ok(notification) = Notification::decode(bytes) else {
            return false;
        };
        self.input(now, PeerInput::Notification { from, notification }, d, out);
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
        let ackepoch = p.kind == packet_type::ACKEPOCH;
        self.srv.handle(now, PeerInput::Packet { from, packet: p });
        // The checker's record: an ACKEPOCH the leader kept (not refused as ahead of it).
        let kept = self
            .srv
            .core()
            .leader_discovery()
            .is_some_and(|disc| disc.learners().contains(&from));
        if let Some(a) = self.ackers.as_mut().filter(|_| ackepoch && kept) {
            a.push(from);
        }
        self.drain(now, d, out);
    }

    /// The connection with `peer` came up.
    pub fn link_up(&mut self, now: Instant, peer: ServerId, d: &mut Durable, out: &mut Outbox) {
        self.input(now, PeerInput::ElectionConnected(peer), d, out);
    }

    /// The connection with `peer` went down (a partition, its crash, a reset, a close).
    pub fn link_down(&mut self, now: Instant, peer: ServerId, d: &mut Durable, out: &mut Outbox) {
        self.srv.handle(now, PeerInput::ElectionDisconnected(peer));
        self.input(now, PeerInput::QuorumDown(peer), d, out);
    }

    /// Only the quorum connection with `peer` closed (the other end closed it).
    pub fn quorum_closed(
        &mut self,
        now: Instant,
        peer: ServerId,
        d: &mut Durable,
        out: &mut Outbox,
    ) {
        self.input(now, PeerInput::QuorumDown(peer), d, out);
    }

    /// The server we chose to follow refused our quorum connection: it does not lead.
    pub fn refused(&mut self, now: Instant, by: ServerId, d: &mut Durable, out: &mut Outbox) {
        self.input(now, PeerInput::QuorumRefused(by), d, out);
    }

    /// Time passed: fire due timers.
    pub fn tick(&mut self, now: Instant, d: &mut Durable, out: &mut Outbox) {
        self.input(now, PeerInput::Tick, d, out);
    }

    /// A client write: an established leader proposes it (Z2); anyone else drops it.
    pub fn write(&mut self, now: Instant, data: Bytes, d: &mut Durable, out: &mut Outbox) {
        self.input(now, PeerInput::Write(data), d, out);
    }

    /// `(currentEpoch, last zxid)` the leader had when it won its election, if it leads.
    pub fn leader_recency(&self) -> Option<(i64, i64)> {
        self.recency
    }

    /// The learners an established leader counts as synced.
    pub fn synced_learners(&self) -> Vec<ServerId> {
        match self.srv.core().leader_discovery() {
            Some(disc) => disc.synced_learners().into_iter().collect(),
            None => Vec::new(),
        }
    }

    fn input(&mut self, now: Instant, input: PeerInput, d: &mut Durable, out: &mut Outbox) {
        self.srv.handle(now, input);
        self.drain(now, d, out);
    }

    /// Carries out every pending action through the harness (the log is flushed whenever
    /// nothing else is left), mirrors the durable state into `d` and reports to the checker.
    fn drain(&mut self, now: Instant, d: &mut Durable, out: &mut Outbox) {
        loop {
            let carried = match self.srv.carry_out_next(now) {
                Ok(Some(c)) => c,
                // An in-memory log written in zxid order does not fail.
                Ok(None) | Err(_) => {
                    if self.srv.has_unsynced() && self.srv.flush(now).is_ok() {
                        continue;
                    }
                    return;
                }
            };
            self.observe(carried.action, d, out);
        }
    }

    fn observe(&mut self, a: PeerAction, d: &mut Durable, out: &mut Outbox) {
        let status = self.srv.status();
        match a {
            PeerAction::SendNotification { to, notification } => out.push(Out::Vote {
                to,
                bytes: Bytes::from(notification.encode()),
            }),
            PeerAction::Send { to, packet } => {
                let learner = matches!(
                    status.state,
                    ServerState::Following | ServerState::Observing
                );
                if learner && packet.kind == packet_type::ACKEPOCH {
                    let with_epoch =
                        decode_i32_payload(packet.data.as_ref(), "ACKEPOCH").is_ok_and(|e| e != -1);
                    out.push(Out::AckedEpoch {
                        leader: to,
                        epoch: d.accepted_epoch,
                        recency: d.recency(),
                        with_epoch,
                    });
                }
                out.push(Out::Quorum { to, packet });
            }
            PeerAction::Close(s) => out.push(Out::Close(s)),
            PeerAction::Refuse(s) => out.push(Out::Refuse(s)),
            PeerAction::Decided(decision) => {
                let leading = decision.state == ServerState::Leading;
                self.recency = leading.then(|| d.recency());
                self.ackers = leading.then(Vec::new);
                out.push(Out::Decided {
                    decision,
                    recency: d.recency(),
                });
            }
            PeerAction::PersistAcceptedEpoch(e) => d.accepted_epoch = e,
            PeerAction::PersistCurrentEpoch(e) => {
                if status.state == ServerState::Leading {
                    if let Some(ackers) = self.ackers.take() {
                        out.push(Out::EpochAcked { epoch: e, ackers });
                    }
                }
                d.current_epoch = e;
            }
            PeerAction::Append(txns) => {
                for t in txns {
                    if t.zxid > d.last_zxid() {
                        d.log.push(t);
                    }
                }
            }
            PeerAction::Truncate(z) => d.log.retain(|t| t.zxid <= z),
            PeerAction::RestoreSnapshot(_) => d.log.clear(),
            PeerAction::Apply(t) if status.state == ServerState::Leading => {
                out.push(Out::Committed(t))
            }
            PeerAction::Status(s) => match (s.leader, s.epoch) {
                (Some(leader), Some(epoch)) => out.push(Out::Established { leader, epoch }),
                (None, _) => {
                    self.recency = None;
                    self.ackers = None;
                    out.push(Out::Abandoned("left its role"));
                }
                _ => {}
            },
            _ => {}
        }
    }
}
