//! The peer's event loop: feeds the election core and the discovery state machines from a
//! [`Transport`] and a clock, carries out their actions, and publishes [`PeerStatus`].

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tracing::{debug, info};

use crate::broadcast::{BroadcastAction, LeaderBroadcast, LearnerOptions};
use crate::discovery::{
    packet_type, DiscoveryAction, LeaderDiscovery, LearnerDiscovery, QuorumPacket, Timing,
    MAX_PACKET_DATA,
};
use crate::election::{Action, Decision, ElectionConfig, FastLeaderElection, VoteData};
use crate::notification::Notification;
use crate::peer::replication::{Replication, ReplicationError};
use crate::peer::sessions::{
    decode_touches, encode_touches, SessionId, SessionTracker, MAX_TRACKED_SESSIONS,
    TOUCH_ENTRY_BYTES,
};
use crate::quorum::QuorumVerifier;
use crate::state_machine::StateMachine;
use crate::store::{ElectionStore, PersistedEpochs, StoreError};
use crate::transport::{Transport, TransportEvent};
use crate::txnlog::{SnapshotPolicy, TxnLog, TxnLogError};
use crate::types::{LearnerType, ServerId, ServerState};
use crate::zxid::Zxid;

mod group_commit;
use group_commit::{sync_finished, GroupCommit, InFlightSync};

/// Learner packets kept while we are still LOOKING (a follower may decide before its leader).
const MAX_STASHED_LEARNERS: usize = 256;
/// LOOKING notifications kept while we are not LOOKING (one per sender).
const MAX_KEPT_LOOKING: usize = 256;
/// Writes, barriers and session touches queued from a [`PeerHandle`] and not yet taken.
const MAX_QUEUED_WRITES: usize = 4096;
/// Expired sessions reported to the embedder and not yet taken.
const MAX_QUEUED_EXPIRIES: usize = 1024;
/// `sync` barriers waiting at once on one peer.
const MAX_PENDING_SYNCS: usize = 4096;

/// Configuration of a [`QuorumPeer`]: [`PeerConfig::new`] and the `with_*` setters.
#[derive(Debug, Clone)]
#[non_exhaustive]
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

    /// This configuration with other election options.
    #[must_use]
    pub fn with_election(mut self, election: ElectionConfig) -> Self {
        self.election = election;
        self
    }

    /// This configuration with another `tickTime`, `initLimit` and `syncLimit`.
    #[must_use]
    pub fn with_timing(mut self, timing: Timing) -> Self {
        self.timing = timing;
        self
    }

    /// This configuration with another start-up [`connect_grace`](Self::connect_grace).
    #[must_use]
    pub fn with_connect_grace(mut self, grace: Duration) -> Self {
        self.connect_grace = grace;
        self
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
#[non_exhaustive]
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

/// Why a [`PeerHandle::sync`] barrier did not complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SyncError {
    /// The peer serves no established epoch (it is LOOKING or still synchronising), has no
    /// transaction log, or left its epoch before the barrier completed. Retry once it serves.
    #[error("the peer does not serve an established epoch")]
    NotServing,
    /// The peer stopped, or too many barriers are waiting.
    #[error("the peer is stopped or overloaded")]
    Unavailable,
}

/// What a [`PeerHandle`] asks of its running peer, in one queue so that a barrier asked after
/// a write from the same handle is ordered after it.
enum Control {
    Write(Bytes),
    Sync(oneshot::Sender<Zxid>),
    Touch(SessionId, Duration),
    EndSession(SessionId),
}

enum Role {
    Looking,
    Leader(LeaderDiscovery),
    Learner(LearnerDiscovery),
}

/// A server taking part in elections over a [`Transport`], with its epochs in an
/// [`ElectionStore`].
#[must_use = "a peer does nothing until it is spawned or run"]
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
    control_tx: mpsc::Sender<Control>,
    control: mpsc::Receiver<Control>,
    /// The leader's session deadlines (only while leading an established epoch).
    tracker: SessionTracker,
    /// Touches not yet reported: sent in the next PING reply when following, moved into the
    /// tracker when this peer starts leading.
    touches: BTreeMap<SessionId, Duration>,
    expired_tx: mpsc::Sender<SessionId>,
    expired_rx: Option<mpsc::Receiver<SessionId>>,
    /// The leader's own `sync` barriers: released once this zxid is applied here.
    leader_syncs: Vec<(Zxid, oneshot::Sender<Zxid>)>,
    /// A learner's `sync` barriers, in the order the SYNCs were sent to the leader.
    learner_syncs: VecDeque<oneshot::Sender<Zxid>>,
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

/// A running peer: its status channel and its task, and what a client library built on the
/// peer needs: writes ([`propose`](Self::propose)), `sync` barriers ([`sync`](Self::sync)),
/// and client session liveness ([`touch_session`](Self::touch_session),
/// [`take_session_expiries`](Self::take_session_expiries)).
#[derive(Debug)]
#[must_use = "dropping the handle stops the peer"]
pub struct PeerHandle {
    sid: ServerId,
    status: watch::Receiver<PeerStatus>,
    control: mpsc::Sender<Control>,
    expired: Option<mpsc::Receiver<SessionId>>,
    task: JoinHandle<Result<(), PeerError>>,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Control::Write(w) => write!(f, "Write({} bytes)", w.len()),
            Control::Sync(_) => f.write_str("Sync"),
            Control::Touch(s, t) => write!(f, "Touch({s}, {t:?})"),
            Control::EndSession(s) => write!(f, "EndSession({s})"),
        }
    }
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
    /// `false` if the peer's queue is full or the peer stopped.
    ///
    /// Delivery is not confirmed here. **How a caller learns the result of its write:** put a
    /// request id in the payload (ZooKeeper puts the session id and a per-session counter,
    /// `cxid`, in each request) together with this server's identity, and let the state
    /// machine, when it applies a transaction carrying one of this server's ids, hand the
    /// result to whoever waits for it. Every server applies the same transactions in the same
    /// order, so the result the originating server computes is the result of the write. A
    /// write that was dropped (no established leader, or the leader failed before committing
    /// it) never shows up: wait with a timeout, and treat the timeout as ZooKeeper's
    /// `CONNECTIONLOSS` (the outcome is unknown). [`current`](Self::current) tells whether the
    /// peer serves an established epoch (`epoch.is_some()`) before proposing.
    ///
    /// A payload larger than [`MAX_PACKET_DATA`] (ZooKeeper's `jute.maxbuffer`) is refused
    /// (`false`): no learner would accept the PROPOSAL carrying it.
    #[must_use = "`false` means the write was not queued and will never be committed"]
    pub fn propose(&self, data: Bytes) -> bool {
        data.len() <= MAX_PACKET_DATA && self.control.try_send(Control::Write(data)).is_ok()
    }

    /// Z2 (reads are served locally): ZooKeeper's `sync`, a barrier after which this server
    /// has applied every transaction the leader committed before the call, and every write
    /// [`propose`](Self::propose)d through this handle before it that the leader committed
    /// (read-your-writes). A follower or observer sends SYNC to its leader and completes when
    /// the leader's answer comes back (behind every COMMIT sent before it); the leader
    /// completes once it applied everything it had proposed when asked. Returns the
    /// zxid the barrier waited for. Fails with [`SyncError::NotServing`] when the peer serves
    /// no established epoch, or leaves it before the barrier completes.
    pub async fn sync(&self) -> Result<Zxid, SyncError> {
        let (tx, rx) = oneshot::channel();
        self.control
            .try_send(Control::Sync(tx))
            .map_err(|_| SyncError::Unavailable)?;
        rx.await.map_err(|_| SyncError::NotServing)
    }

    /// A sign of life of a client session at this server (a request or a client heartbeat).
    /// The leader of an established epoch resets the session's deadline to now + `timeout`;
    /// any other server keeps the touch and reports it to its leader in its next PING reply,
    /// as ZooKeeper's learners do. A session the leader hears nothing of for its timeout is
    /// reported by the leader's [`take_session_expiries`](Self::take_session_expiries).
    /// Returns `false` if the peer's queue is full or the peer stopped.
    #[must_use = "`false` means the touch was not queued: the session may expire"]
    pub fn touch_session(&self, session: SessionId, timeout: Duration) -> bool {
        self.control
            .try_send(Control::Touch(session, timeout))
            .is_ok()
    }

    /// The session was closed (its close transaction applied): stop tracking it.
    #[must_use = "`false` means the peer did not take it and still tracks the session"]
    pub fn end_session(&self, session: SessionId) -> bool {
        self.control.try_send(Control::EndSession(session)).is_ok()
    }

    /// The stream of sessions this peer, while it leads an established epoch, found expired
    /// (no touch within their timeout). The embedder commits each close through a transaction
    /// (ZooKeeper's `closeSession`); a session is reported once, then forgotten by the tracker.
    /// A new leader starts with an empty tracker: the embedder touches every session its
    /// state holds when the peer becomes leader (ZooKeeper's leader loads them from its
    /// database). Can be taken once; `None` afterwards.
    #[must_use = "the expiries can be taken only once; dropping the receiver loses them"]
    pub fn take_session_expiries(&mut self) -> Option<mpsc::Receiver<SessionId>> {
        self.expired.take()
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
        let (control_tx, control) = mpsc::channel(MAX_QUEUED_WRITES);
        let (expired_tx, expired_rx) = mpsc::channel(MAX_QUEUED_EXPIRIES);
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
            control_tx,
            control,
            tracker: SessionTracker::new(),
            touches: BTreeMap::new(),
            expired_tx,
            expired_rx: Some(expired_rx),
            leader_syncs: Vec::new(),
            learner_syncs: VecDeque::new(),
            group: GroupCommit::default(),
            in_flight: None,
        })
    }

    /// Gives the peer a transaction log and a state machine (Z2): the state machine is
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

    /// Sets when this peer snapshots its state machine and compacts its log (ZooKeeper's
    /// `snapCount`; default 100,000 committed transactions). Takes effect only on a peer
    /// [`with_replication`](Self::with_replication), so call it after that.
    pub fn with_snapshot_policy(mut self, policy: SnapshotPolicy) -> Self {
        if let Some(r) = self.repl.as_mut() {
            r.policy = policy;
        }
        self
    }

    /// Snapshots and compacts the log when due, only while serving an established epoch.
    fn snapshot_if_due(&mut self) -> Result<(), ReplicationError> {
        if self.status.borrow().epoch.is_none() {
            return Ok(());
        }
        if let Some(r) = self.repl.as_mut() {
            if r.snapshot_if_due()? {
                debug!(sid = self.cfg.my_id.0, zxid = %r.sm.last_applied(), "snapshot taken, log compacted");
            }
        }
        Ok(())
    }

    /// A receiver of this peer's status.
    pub fn status(&self) -> watch::Receiver<PeerStatus> {
        self.status.subscribe()
    }

    /// Runs the peer on its own tokio task.
    pub fn spawn(mut self) -> PeerHandle {
        let sid = self.cfg.my_id;
        let status = self.status.subscribe();
        let control = self.control_tx.clone();
        let expired = self.expired_rx.take();
        let task = tokio::spawn(self.run());
        PeerHandle {
            sid,
            status,
            control,
            expired,
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
            let deadline = [
                self.core.next_deadline(),
                self.role_deadline(),
                self.tracker.next_deadline(),
            ]
            .into_iter()
            .flatten()
            .min();
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
                Some(c) = self.control.recv() => self.on_control(c),
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
        self.expire_sessions(now);
    }

    /// Whether we lead an established epoch.
    fn leading_established(&self) -> bool {
        matches!(&self.role, Role::Leader(d) if d.is_established())
    }

    /// Reports the sessions whose deadline passed to the embedder.
    fn expire_sessions(&mut self, now: Instant) {
        if !self.leading_established() {
            return;
        }
        for s in self.tracker.expire(now) {
            match self.expired_tx.try_send(s) {
                Ok(()) => info!(sid = self.cfg.my_id.0, session = s, "session expired"),
                // The embedder is slow: report it again a moment later.
                Err(mpsc::error::TrySendError::Full(_)) => self.tracker.touch(
                    s,
                    self.cfg.timing.tick_time.max(Duration::from_millis(1)),
                    now,
                ),
                Err(mpsc::error::TrySendError::Closed(_)) => {}
            }
        }
    }

    /// A sync barrier, a session touch or a session's end from the embedder.
    fn on_control(&mut self, c: Control) {
        let now = Instant::now();
        match c {
            Control::Write(w) => self.on_write(w),
            Control::Touch(s, t) => {
                if self.leading_established() {
                    self.tracker.touch(s, t, now);
                } else if self.touches.len() < MAX_TRACKED_SESSIONS || self.touches.contains_key(&s)
                {
                    self.touches.insert(s, t);
                }
            }
            Control::EndSession(s) => {
                self.tracker.remove(s);
                self.touches.remove(&s);
            }
            Control::Sync(tx) => {
                if self.leader_syncs.len() + self.learner_syncs.len() >= MAX_PENDING_SYNCS {
                    return; // dropping `tx` fails the barrier
                }
                let Some(r) = self.repl.as_mut() else {
                    return;
                };
                match (&mut self.role, r.leader.as_ref()) {
                    (Role::Leader(_), Some(lb)) => {
                        // Everything proposed so far must be applied here first.
                        if lb.outstanding().is_empty() {
                            let _ = tx.send(r.sm.last_applied());
                        } else {
                            self.leader_syncs.push((lb.last_proposed(), tx));
                        }
                    }
                    (Role::Learner(d), _) if d.is_established() => {
                        d.sync();
                        self.learner_syncs.push_back(tx);
                    }
                    _ => {} // not serving: dropping `tx` fails the barrier
                }
            }
        }
    }

    /// Releases the leader's own `sync` barriers covered by what it applied.
    fn release_leader_syncs(&mut self) {
        let Some(applied) = self.repl.as_ref().map(|r| r.sm.last_applied()) else {
            return;
        };
        let (done, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.leader_syncs)
            .into_iter()
            .partition(|(z, _)| *z <= applied);
        self.leader_syncs = waiting;
        for (_, tx) in done {
            let _ = tx.send(applied);
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
                // Malformed notifications are dropped; the receiver keeps going (as ZooKeeper's `WorkerReceiver` does).
                Err(e) => debug!(sid = from.0, "undecodable notification dropped: {e}"),
            },
            TransportEvent::ConnectionUp(s) => self.core.connection_up(now, s),
            TransportEvent::ConnectionDown(s) => self.core.connection_down(now, s),
            TransportEvent::Quorum { from, packet } => {
                let opens = packet.kind == packet_type::FOLLOWERINFO
                    || packet.kind == packet_type::OBSERVERINFO;
                match &mut self.role {
                    Role::Leader(d) => {
                        if packet.kind == packet_type::PING && d.is_established() {
                            touch_from_ping(&mut self.tracker, from, &packet, now);
                        }
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
                DiscoveryAction::Send { to, mut packet } => {
                    // A learner answers the leader's PING with the sessions its clients
                    // touched since the last one (ZooKeeper's session-touch table).
                    if packet.kind == packet_type::PING
                        && matches!(self.role, Role::Learner(_))
                        && !self.touches.is_empty()
                    {
                        packet.data = Some(encode_touches(&take_touches(&mut self.touches)));
                    }
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
                    if matches!(self.role, Role::Leader(_)) {
                        let now = Instant::now();
                        for (s, t) in std::mem::take(&mut self.touches) {
                            self.tracker.touch(s, t, now);
                        }
                    }
                    self.start_leading_broadcast(epoch);
                    self.core.update_election_vote(epoch);
                    self.status.send_modify(|s| s.epoch = Some(epoch));
                    info!(sid = self.cfg.my_id.0, epoch, state = %self.core.state(), "epoch established");
                }
                DiscoveryAction::Abandon { reason } => self.go_looking(reason),
                DiscoveryAction::Zab(BroadcastAction::SyncDone { zxid }) => {
                    if let Some(tx) = self.learner_syncs.pop_front() {
                        let _ = tx.send(zxid);
                    }
                }
                DiscoveryAction::Zab(a) => match self.repl.as_mut() {
                    Some(r) => {
                        let applied = matches!(
                            a,
                            BroadcastAction::Apply(_) | BroadcastAction::CommitLogged(_)
                        );
                        r.carry_out(a)?;
                        self.epochs.last_zxid = r.log.last_zxid().0;
                        self.core.set_vote_data(self.vote_data());
                        if applied {
                            self.snapshot_if_due()?;
                        }
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
                self.release_leader_syncs();
                self.snapshot_if_due()?;
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
        // Barriers of the epoch we leave fail; the leader's session deadlines go with it.
        self.leader_syncs.clear();
        self.learner_syncs.clear();
        self.tracker.clear();
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
        // (ZooKeeper's `FastLeaderElection.Messenger.WorkerReceiver`, the race behind its bimodal failover times). We kept the vote: hand
        // it to the new election now. This only delivers a message late, which the election
        // tolerates like any network delay.
        for (from, n) in std::mem::take(&mut self.kept_looking) {
            self.core.handle_notification(now, from, n);
        }
    }
}

/// The leader reads a learner's PING reply: every session in its touch table is alive.
fn touch_from_ping(
    tracker: &mut SessionTracker,
    from: ServerId,
    packet: &QuorumPacket,
    now: Instant,
) {
    let Some(data) = packet.data.as_ref().filter(|d| !d.is_empty()) else {
        return;
    };
    match decode_touches(data) {
        Ok(touches) => {
            for (s, t) in touches {
                tracker.touch(s, t, now);
            }
        }
        Err(e) => debug!(sid = from.0, "malformed session-touch table ignored: {e}"),
    }
}

/// Takes the touches for one PING reply: as many as a quorum packet may carry, the rest wait
/// for the next PING.
fn take_touches(touches: &mut BTreeMap<SessionId, Duration>) -> BTreeMap<SessionId, Duration> {
    let limit = MAX_PACKET_DATA / TOUCH_ENTRY_BYTES;
    match touches.keys().nth(limit).copied() {
        Some(first_left) => {
            let rest = touches.split_off(&first_left);
            std::mem::replace(touches, rest)
        }
        None => std::mem::take(touches),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ping_reply_carries_at_most_a_packets_worth_of_touches_and_keeps_the_rest() {
        let limit = MAX_PACKET_DATA / TOUCH_ENTRY_BYTES;
        let mut touches: BTreeMap<SessionId, Duration> = (0..limit as i64 + 5)
            .map(|s| (s, Duration::from_secs(1)))
            .collect();
        let first = take_touches(&mut touches);
        assert_eq!(first.len(), limit);
        assert!(encode_touches(&first).len() <= MAX_PACKET_DATA);
        assert_eq!(touches.len(), 5);
        assert_eq!(take_touches(&mut touches).len(), 5);
        assert!(touches.is_empty());
    }
}
