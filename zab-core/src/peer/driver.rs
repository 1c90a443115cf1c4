//! The peer's event loop: feeds the election core and the discovery state machines from a
//! [`Transport`] and a clock, carries out their actions, and publishes [`PeerStatus`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{debug, info};

use crate::discovery::{
    packet_type, DiscoveryAction, LeaderDiscovery, LearnerDiscovery, QuorumPacket, Timing,
};
use crate::election::{Action, Decision, ElectionConfig, FastLeaderElection, VoteData};
use crate::notification::Notification;
use crate::quorum::QuorumVerifier;
use crate::store::{ElectionStore, PersistedEpochs, StoreError};
use crate::transport::{Transport, TransportEvent};
use crate::types::{LearnerType, ServerId, ServerState};
use crate::zxid::Zxid;

/// Learner packets kept while we are still LOOKING (a follower may decide before its leader).
const MAX_STASHED_LEARNERS: usize = 256;
/// LOOKING notifications kept while we are not LOOKING (one per sender).
const MAX_KEPT_LOOKING: usize = 256;

/// Configuration of a [`QuorumPeer`].
#[derive(Debug, Clone)]
pub struct PeerConfig {
    /// Our sid (`myid`).
    pub my_id: ServerId,
    /// Participant or observer.
    pub learner_type: LearnerType,
    /// The ensemble's quorum rule.
    pub quorum: Arc<dyn QuorumVerifier>,
    /// Election timing and options.
    pub election: ElectionConfig,
    /// `tickTime`, `initLimit`, `syncLimit` (Z6).
    pub timing: Timing,
}

/// What a peer is doing, as published on its watch channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerStatus {
    /// LOOKING, LEADING, FOLLOWING or OBSERVING (Z3).
    pub state: ServerState,
    /// The leader we decided for (ourselves when LEADING); `None` while LOOKING.
    pub leader: Option<ServerId>,
    /// The epoch, set only once it is established with a quorum: for a leader, a quorum
    /// acknowledged NEWLEADER; for a learner, UPTODATE arrived. `None` during discovery.
    pub epoch: Option<i64>,
}

impl PeerStatus {
    const LOOKING: PeerStatus = PeerStatus {
        state: ServerState::Looking,
        leader: None,
        epoch: None,
    };

    /// Whether this is an established leader ("I lead epoch E").
    pub fn is_established_leader(&self) -> bool {
        self.state == ServerState::Leading && self.epoch.is_some()
    }
}

/// Why a peer stopped.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// The durable store failed; the peer stops rather than continue without its epochs.
    #[error("election store: {0}")]
    Store(#[from] StoreError),
    /// The transport shut down.
    #[error("transport closed")]
    TransportClosed,
}

enum Role {
    Looking,
    Leader(LeaderDiscovery),
    Learner(LearnerDiscovery),
}

/// A server taking part in elections over a [`Transport`], with its epochs in an
/// [`ElectionStore`].
pub struct QuorumPeer<T: Transport, S: ElectionStore> {
    cfg: PeerConfig,
    transport: T,
    store: S,
    epochs: PersistedEpochs,
    core: FastLeaderElection,
    role: Role,
    stashed: BTreeMap<ServerId, QuorumPacket>,
    kept_looking: BTreeMap<ServerId, Notification>,
    status: watch::Sender<PeerStatus>,
}

impl<T: Transport, S: ElectionStore> std::fmt::Debug for QuorumPeer<T, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuorumPeer")
            .field("sid", &self.cfg.my_id)
            .field("status", &*self.status.borrow())
            .finish()
    }
}

/// A running peer: its status channel and its task.
#[derive(Debug)]
pub struct PeerHandle {
    sid: ServerId,
    status: watch::Receiver<PeerStatus>,
    task: JoinHandle<Result<(), PeerError>>,
}

impl PeerHandle {
    /// The peer's sid.
    pub fn sid(&self) -> ServerId {
        self.sid
    }

    /// A receiver of the peer's status.
    pub fn status(&self) -> watch::Receiver<PeerStatus> {
        self.status.clone()
    }

    /// The current status.
    pub fn current(&self) -> PeerStatus {
        *self.status.borrow()
    }

    /// Waits (up to `timeout`) until the status satisfies `pred`; returns it, or `None` on
    /// timeout or if the peer stopped.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        mut pred: impl FnMut(&PeerStatus) -> bool,
    ) -> Option<PeerStatus> {
        let mut rx = self.status.clone();
        let r = tokio::time::timeout(timeout, rx.wait_for(|s| pred(s))).await;
        match r {
            Ok(Ok(s)) => Some(*s),
            _ => None,
        }
    }

    /// Stops the peer abruptly, as a crash: its transport is dropped with it.
    pub fn kill(&self) {
        self.task.abort();
    }

    /// Whether the peer's task has ended.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

impl Drop for PeerHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl<T: Transport, S: ElectionStore + 'static> QuorumPeer<T, S> {
    /// A peer that will vote with the epochs and last zxid found in `store`.
    pub async fn new(cfg: PeerConfig, transport: T, store: S) -> Result<Self, PeerError> {
        let epochs = store.load().await?;
        let data = VoteData::new(Zxid(epochs.last_zxid), epochs.current_epoch);
        let core = FastLeaderElection::new(
            cfg.election.clone(),
            cfg.my_id,
            cfg.learner_type,
            cfg.quorum.clone(),
            data,
        );
        let (status, _) = watch::channel(PeerStatus::LOOKING);
        Ok(Self {
            cfg,
            transport,
            store,
            epochs,
            core,
            role: Role::Looking,
            stashed: BTreeMap::new(),
            kept_looking: BTreeMap::new(),
            status,
        })
    }

    /// A receiver of this peer's status.
    pub fn status(&self) -> watch::Receiver<PeerStatus> {
        self.status.subscribe()
    }

    /// Runs the peer on its own tokio task.
    pub fn spawn(self) -> PeerHandle {
        let sid = self.cfg.my_id;
        let status = self.status.subscribe();
        let task = tokio::spawn(self.run());
        PeerHandle { sid, status, task }
    }

    /// Runs the peer until its transport closes or its store fails.
    pub async fn run(mut self) -> Result<(), PeerError> {
        self.transport.connect_all();
        self.core.start(Instant::now());
        self.drain().await?;
        loop {
            let deadline = match (self.core.next_deadline(), self.role_deadline()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let sleep = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(tokio::time::Instant::from_std(d)).await,
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                ev = self.transport.recv() => {
                    let Some(ev) = ev else { return Err(PeerError::TransportClosed) };
                    self.on_event(ev);
                }
                _ = sleep => self.on_tick(),
            }
            self.drain().await?;
        }
    }

    fn role_deadline(&self) -> Option<Instant> {
        match &self.role {
            Role::Looking => None,
            Role::Leader(d) => d.next_deadline(),
            Role::Learner(d) => d.next_deadline(),
        }
    }

    fn on_tick(&mut self) {
        let now = Instant::now();
        if self.core.next_deadline().is_some_and(|d| d <= now) {
            self.core.handle_tick(now);
        }
        match &mut self.role {
            Role::Looking => {}
            Role::Leader(d) => d.handle_tick(now),
            Role::Learner(d) => d.handle_tick(now),
        }
    }

    fn on_event(&mut self, ev: TransportEvent) {
        let now = Instant::now();
        match ev {
            TransportEvent::Election { from, payload } => match Notification::decode(&payload) {
                Ok(n) => {
                    if self.core.state() != ServerState::Looking
                        && n.state == ServerState::Looking
                        && (self.kept_looking.len() < MAX_KEPT_LOOKING
                            || self.kept_looking.contains_key(&from))
                    {
                        self.kept_looking.insert(from, n.clone());
                    }
                    self.core.handle_notification(now, from, n);
                }
                // Malformed notifications are dropped; the receiver keeps going (ZAB-NOTES §6).
                Err(e) => debug!(sid = from.0, "undecodable notification dropped: {e}"),
            },
            TransportEvent::ConnectionUp(s) => self.core.connection_up(now, s),
            TransportEvent::ConnectionDown(s) => self.core.connection_down(now, s),
            TransportEvent::Quorum { from, packet } => {
                let opens = packet.kind == packet_type::FOLLOWERINFO
                    || packet.kind == packet_type::OBSERVERINFO;
                match &mut self.role {
                    Role::Leader(d) => d.handle_packet(now, from, packet),
                    // We do not lead: refuse a would-be learner at once (ZooKeeper has no
                    // listener then), so it gives up and looks for the real leader.
                    Role::Learner(_) if opens => self.transport.close_quorum(from),
                    Role::Learner(d) => d.handle_packet(now, from, packet),
                    Role::Looking => {
                        if opens
                            && (self.stashed.len() < MAX_STASHED_LEARNERS
                                || self.stashed.contains_key(&from))
                        {
                            self.stashed.insert(from, packet);
                        }
                    }
                }
            }
            TransportEvent::QuorumDown(s) => match &mut self.role {
                Role::Leader(d) => d.learner_gone(now, s),
                Role::Learner(d) if d.leader() == s => d.connection_lost(now),
                Role::Learner(_) => {}
                Role::Looking => {
                    self.stashed.remove(&s);
                }
            },
        }
    }

    /// Carries out every pending action of the core and of the discovery role, in order.
    async fn drain(&mut self) -> Result<(), PeerError> {
        loop {
            if let Some(a) = self.core.poll_action() {
                match a {
                    Action::Send { to, notification } => {
                        self.transport.send_notification(to, &notification);
                    }
                    Action::ConnectAll => self.transport.connect_all(),
                    Action::Decided(d) => self.on_decided(d),
                }
                continue;
            }
            let next = match &mut self.role {
                Role::Looking => None,
                Role::Leader(d) => d.poll_action(),
                Role::Learner(d) => d.poll_action(),
            };
            let Some(a) = next else { return Ok(()) };
            match a {
                DiscoveryAction::Send { to, packet } => self.transport.send_quorum(to, packet),
                DiscoveryAction::PersistAcceptedEpoch(e) => {
                    self.store.save_accepted_epoch(e).await?;
                    self.epochs.accepted_epoch = e;
                }
                DiscoveryAction::PersistCurrentEpoch(e) => {
                    self.store.save_current_epoch(e).await?;
                    self.epochs.current_epoch = e;
                    self.core.set_vote_data(self.vote_data());
                }
                DiscoveryAction::Close(s) => self.transport.close_quorum(s),
                DiscoveryAction::Established { epoch } => {
                    self.core.update_election_vote(epoch);
                    self.status.send_modify(|s| s.epoch = Some(epoch));
                    info!(sid = self.cfg.my_id.0, epoch, state = %self.core.state(), "epoch established");
                }
                DiscoveryAction::Abandon { reason } => self.go_looking(reason),
            }
        }
    }

    fn vote_data(&self) -> VoteData {
        VoteData::new(Zxid(self.epochs.last_zxid), self.epochs.current_epoch)
    }

    fn on_decided(&mut self, d: Decision) {
        let now = Instant::now();
        let me = self.cfg.my_id;
        let leader = d.vote.leader;
        info!(sid = me.0, leader = leader.0, state = %d.state, path = ?d.path, "election decided");
        self.kept_looking.clear();
        match d.state {
            ServerState::Leading => {
                let mut disc = LeaderDiscovery::new(
                    now,
                    me,
                    self.cfg.quorum.clone(),
                    self.epochs,
                    self.cfg.timing,
                );
                for (from, p) in std::mem::take(&mut self.stashed) {
                    disc.handle_packet(now, from, p);
                }
                self.role = Role::Leader(disc);
            }
            ServerState::Following | ServerState::Observing => {
                for (from, _) in std::mem::take(&mut self.stashed) {
                    self.transport.close_quorum(from);
                }
                self.role = Role::Learner(LearnerDiscovery::new(
                    now,
                    me,
                    leader,
                    d.state == ServerState::Observing,
                    self.cfg.quorum.version(),
                    self.epochs,
                    self.cfg.timing,
                ));
            }
            ServerState::Looking => return,
        }
        self.status.send_replace(PeerStatus {
            state: d.state,
            leader: Some(leader),
            epoch: None,
        });
    }

    /// Z6 / Z8: leave LEADING / FOLLOWING / OBSERVING and start a new election round.
    fn go_looking(&mut self, reason: &'static str) {
        info!(sid = self.cfg.my_id.0, reason, "going LOOKING");
        match std::mem::replace(&mut self.role, Role::Looking) {
            Role::Leader(d) => {
                for s in d.learners() {
                    self.transport.close_quorum(s);
                }
            }
            Role::Learner(d) => self.transport.close_quorum(d.leader()),
            Role::Looking => {}
        }
        self.status.send_replace(PeerStatus::LOOKING);
        self.core.set_vote_data(self.vote_data());
        let now = Instant::now();
        self.core.start(now);
        // A server that went LOOKING a moment before us got only our FOLLOWING/LEADING answer;
        // ZooKeeper drops its vote and both sides wait for the 200 ms notification timeout
        // (ZAB-NOTES §4.1, the race behind its bimodal failover times). We kept the vote: hand
        // it to the new election now. This only delivers a message late, which the election
        // tolerates like any network delay.
        for (from, n) in std::mem::take(&mut self.kept_looking) {
            self.core.handle_notification(now, from, n);
        }
    }
}
