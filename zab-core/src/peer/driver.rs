//! The peer's event loop: feeds the election core and the discovery state machines from a
//! [`Transport`] and a clock, carries out their actions, and publishes [`PeerStatus`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{debug, info};

use crate::broadcast::{BroadcastAction, LeaderBroadcast, LearnerOptions};
use crate::discovery::{
    packet_type, DiscoveryAction, LeaderDiscovery, LearnerDiscovery, QuorumPacket, Timing,
};
use crate::election::{Action, Decision, ElectionConfig, FastLeaderElection, VoteData};
use crate::notification::Notification;
use crate::peer::replication::{Replication, ReplicationError};
use crate::quorum::QuorumVerifier;
use crate::state_machine::StateMachine;
use crate::store::{ElectionStore, PersistedEpochs, StoreError};
use crate::transport::{Transport, TransportEvent};
use crate::txnlog::{TxnLog, TxnLogError};
use crate::types::{LearnerType, ServerId, ServerState};
use crate::zxid::Zxid;

mod group_commit;
use group_commit::{sync_finished, GroupCommit, InFlightSync};

/// Learner packets kept while we are still LOOKING (a follower may decide before its leader).
const MAX_STASHED_LEARNERS: usize = 256;
/// LOOKING notifications kept while we are not LOOKING (one per sender).
const MAX_KEPT_LOOKING: usize = 256;
/// Writes queued from a [`PeerHandle`] and not yet taken by the peer.
const MAX_QUEUED_WRITES: usize = 1024;

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
    /// At start-up, how long to wait for connections to every other voter before the first
    /// election round. With `fast_decide`, a server that has only part of the ensemble
    /// connected may otherwise decide on that part's view at once, and make the others wait
    /// out their `finalize_wait`. Zero starts at once, as ZooKeeper does.
    pub connect_grace: Duration,
}

impl PeerConfig {
    /// A configuration with the default election options, ZooKeeper's sample timing
    /// (2000 ms, 10, 5) and a 100 ms start-up connect grace.
    pub fn new(
        my_id: ServerId,
        learner_type: LearnerType,
        quorum: Arc<dyn QuorumVerifier>,
    ) -> Self {
        Self {
            my_id,
            learner_type,
            quorum,
            election: ElectionConfig::default(),
            timing: Timing::default(),
            connect_grace: Duration::from_millis(100),
        }
    }
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
    /// The transaction log or state machine failed; the peer stops.
    #[error(transparent)]
    Replication(#[from] ReplicationError),
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
    repl: Option<Replication>,
    fatal: Option<ReplicationError>,
    writes_tx: mpsc::Sender<Bytes>,
    writes: mpsc::Receiver<Bytes>,
    group: GroupCommit,
    in_flight: Option<InFlightSync>,
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
    writes: mpsc::Sender<Bytes>,
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

    /// Z2: submits a write. A leader of an established epoch proposes it; an established
    /// follower or observer forwards it to its leader (REQUEST); otherwise it is dropped, as is
    /// a write to a peer without a transaction log ([`QuorumPeer::with_replication`]). Returns
    /// `false` if the peer's queue is full or the peer stopped. Delivery is not confirmed:
    /// watch the state machine.
    pub fn propose(&self, data: Bytes) -> bool {
        self.writes.try_send(data).is_ok()
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
        let (writes_tx, writes) = mpsc::channel(MAX_QUEUED_WRITES);
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
            repl: None,
            fatal: None,
            writes_tx,
            writes,
            group: GroupCommit::default(),
            in_flight: None,
        })
    }

    /// Gives the peer a transaction log and a state machine (SPEC Z2): the state machine is
    /// restored from the newest snapshot and the log replayed; the peer then votes with the
    /// log's last zxid, syncs learners from its log when it leads, and takes part in
    /// broadcast. Without this a peer only elects.
    pub fn with_replication(
        mut self,
        log: Box<dyn TxnLog>,
        sm: Box<dyn StateMachine>,
    ) -> Result<Self, PeerError> {
        let r = Replication::open(log, sm)?;
        self.epochs.last_zxid = self.epochs.last_zxid.max(r.log.last_zxid().0);
        self.core.set_vote_data(self.vote_data());
        self.repl = Some(r);
        Ok(self)
    }

    /// A receiver of this peer's status.
    pub fn status(&self) -> watch::Receiver<PeerStatus> {
        self.status.subscribe()
    }

    /// Runs the peer on its own tokio task.
    pub fn spawn(self) -> PeerHandle {
        let sid = self.cfg.my_id;
        let status = self.status.subscribe();
        let writes = self.writes_tx.clone();
        let task = tokio::spawn(self.run());
        PeerHandle {
            sid,
            status,
            writes,
            task,
        }
    }

    /// Runs the peer until its transport closes or its store fails.
    pub async fn run(mut self) -> Result<(), PeerError> {
        self.transport.connect_all();
        // Give the connections to the other voters a moment to come up (see `connect_grace`);
        // what arrives meanwhile is queued by the election core until it starts.
        let grace_end = tokio::time::Instant::now() + self.cfg.connect_grace;
        while !self.all_voters_connected() {
            tokio::select! {
                ev = self.transport.recv() => {
                    let Some(ev) = ev else { return Err(PeerError::TransportClosed) };
                    self.on_event(ev);
                }
                _ = tokio::time::sleep_until(grace_end) => break,
            }
            self.drain().await?;
        }
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
                Some(w) = self.writes.recv() => self.on_write(w),
                done = sync_finished(&mut self.in_flight) => {
                    done?;
                    if let Some(f) = self.in_flight.take() {
                        self.release(f.group);
                    }
                }
            }
            self.take_ready()?;
            self.drain().await?;
        }
    }

    fn all_voters_connected(&self) -> bool {
        let me = self.cfg.my_id;
        let connected = self.core.connected_peers();
        self.cfg
            .quorum
            .voting_members()
            .iter()
            .all(|s| *s == me || connected.contains(s))
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
                    Role::Leader(d) => {
                        if let Some(lb) = self.repl.as_mut().and_then(|r| r.leader.as_mut()) {
                            lb.handle_packet(from, packet.clone());
                        }
                        d.handle_packet(now, from, packet);
                    }
                    // We do not lead: refuse a would-be learner at once (ZooKeeper has no
                    // listener then), so it gives up and looks for the real leader.
                    Role::Learner(_) if opens => self.transport.refuse_quorum(from),
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
                Role::Leader(d) => {
                    if let Some(lb) = self.repl.as_mut().and_then(|r| r.leader.as_mut()) {
                        lb.remove_learner(s);
                    }
                    d.learner_gone(now, s);
                }
                Role::Learner(d) if d.leader() == s => d.connection_lost(now),
                Role::Learner(_) => {}
                Role::Looking => {
                    self.stashed.remove(&s);
                }
            },
            TransportEvent::QuorumRefused(s) => match &mut self.role {
                Role::Learner(d) if d.leader() == s => d.refused(),
                Role::Leader(d) => d.learner_gone(now, s),
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
            if let Some(e) = self.fatal.take() {
                return Err(e.into());
            }
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
            let Some(a) = next else {
                if self.drain_broadcast().await? {
                    continue;
                }
                // Nothing else to do: one sync for the group gathered, then what it releases.
                if self.start_group_sync()? {
                    continue;
                }
                return Ok(());
            };
            match &a {
                // Group commit: log writes are appended now and synced together; an ACK
                // waits for that sync; sends and applies of committed (quorum-durable) writes
                // need not. Anything else first makes the group durable.
                DiscoveryAction::Zab(BroadcastAction::Log(_)) => {}
                DiscoveryAction::Zab(BroadcastAction::Apply(_)) => {}
                DiscoveryAction::Send { packet, .. } if packet.kind != packet_type::ACK => {}
                DiscoveryAction::Send { to, packet } if self.group.unsynced.is_some() => {
                    self.group.acks.push((*to, packet.clone()));
                    continue;
                }
                _ => self.sync_group().await?,
            }
            match a {
                DiscoveryAction::Zab(BroadcastAction::Log(txns)) if self.repl.is_some() => {
                    self.append_grouped(txns)?;
                }
                DiscoveryAction::Send { to, packet } => {
                    // A learner sent its sync data after the epoch was established joins the
                    // broadcast now, so that nothing committed from here on passes it by.
                    if packet.kind == packet_type::NEWLEADER {
                        if let Some(lb) = self.repl.as_mut().and_then(|r| r.leader.as_mut()) {
                            lb.add_learner(to);
                        }
                    }
                    self.transport.send_quorum(to, packet);
                }
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
                    self.start_leading_broadcast(epoch);
                    self.core.update_election_vote(epoch);
                    self.status.send_modify(|s| s.epoch = Some(epoch));
                    info!(sid = self.cfg.my_id.0, epoch, state = %self.core.state(), "epoch established");
                }
                DiscoveryAction::Abandon { reason } => self.go_looking(reason),
                DiscoveryAction::Zab(a) => match self.repl.as_mut() {
                    Some(r) => {
                        r.carry_out(a)?;
                        self.epochs.last_zxid = r.log.last_zxid().0;
                        self.core.set_vote_data(self.vote_data());
                    }
                    // Without a log, a learner ignores broadcast traffic; only sync data from a
                    // leader that has a log arrives here, and there is nowhere to keep it.
                    None => {
                        debug!(sid = self.cfg.my_id.0, action = ?a, "no transaction log attached")
                    }
                },
            }
        }
    }

    /// Carries out one action of the leader's broadcast core; `false` when there is none.
    ///
    /// The leader's PROPOSALs go out before its own log write is durable (as ZooKeeper's
    /// leader sends them before its sync thread logs them): its own acknowledgement counts only
    /// after the group's sync ([`sync_group`](Self::sync_group)).
    async fn drain_broadcast(&mut self) -> Result<bool, PeerError> {
        let Some(r) = self.repl.as_mut() else {
            return Ok(false);
        };
        let Some(a) = r.leader.as_mut().and_then(LeaderBroadcast::poll_action) else {
            return Ok(false);
        };
        match a {
            BroadcastAction::Send { to, packet } => self.transport.send_quorum(to, packet),
            BroadcastAction::Log(txns) => self.append_grouped(txns)?,
            BroadcastAction::Apply(t) => {
                r.carry_out(BroadcastAction::Apply(t.clone()))?;
                if let Role::Leader(d) = &mut self.role {
                    d.push_committed(t);
                }
            }
            BroadcastAction::Abandon { reason } => {
                self.sync_group().await?;
                self.go_looking(reason);
            }
            other => {
                self.sync_group().await?;
                if let Some(r) = self.repl.as_mut() {
                    r.carry_out(other)?;
                }
            }
        }
        Ok(true)
    }

    /// The epoch is established: a leader with a log starts broadcasting to every learner it
    /// already sent its sync data to.
    fn start_leading_broadcast(&mut self, epoch: i64) {
        let (Role::Leader(d), Some(r)) = (&self.role, self.repl.as_mut()) else {
            return;
        };
        let mut lb = LeaderBroadcast::new(
            self.cfg.my_id,
            self.cfg.quorum.clone(),
            epoch,
            r.log.last_zxid(),
        );
        for s in d.sync_sent_learners() {
            lb.add_learner(s);
        }
        r.leader = Some(lb);
    }

    /// A write from the embedder (see [`PeerHandle::propose`]).
    fn on_write(&mut self, data: Bytes) {
        let Some(r) = self.repl.as_mut() else {
            debug!(sid = self.cfg.my_id.0, "write dropped: no transaction log");
            return;
        };
        match (&mut self.role, r.leader.as_mut()) {
            (Role::Leader(_), Some(lb)) => {
                if let Err(e) = lb.propose(data) {
                    debug!(sid = self.cfg.my_id.0, "write not proposed: {e}");
                }
            }
            (Role::Learner(d), _) if d.is_established() => d.submit(data),
            _ => debug!(
                sid = self.cfg.my_id.0,
                "write dropped: no established leader"
            ),
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
                if let Some(r) = &self.repl {
                    match r.history() {
                        Ok((base, committed, snap)) => disc.set_history(base, committed, snap),
                        Err(e) => {
                            // Leading without our history would lose it: the peer stops.
                            self.fatal = Some(e);
                            return;
                        }
                    }
                }
                for (from, p) in std::mem::take(&mut self.stashed) {
                    disc.handle_packet(now, from, p);
                }
                self.role = Role::Leader(disc);
            }
            ServerState::Following | ServerState::Observing => {
                for (from, _) in std::mem::take(&mut self.stashed) {
                    self.transport.refuse_quorum(from);
                }
                let mut disc = LearnerDiscovery::new(
                    now,
                    me,
                    leader,
                    d.state == ServerState::Observing,
                    self.cfg.quorum.version(),
                    self.epochs,
                    self.cfg.timing,
                );
                if self.repl.is_some() {
                    disc.set_broadcast_options(
                        LearnerOptions::default().with_follow_broadcast(true),
                    );
                }
                self.role = Role::Learner(disc);
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
        if let Some(r) = self.repl.as_mut() {
            r.leader = None;
        }
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
