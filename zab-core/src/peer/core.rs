//! [`PeerCore`]: a whole ZooKeeper server as one sans-IO state machine. It composes the
//! election ([`FastLeaderElection`]), discovery ([`LeaderDiscovery`], [`LearnerDiscovery`]),
//! synchronisation and broadcast ([`LeaderBroadcast`], and the learner's inside its
//! discovery) and the leader's [`SessionTracker`], and decides everything between them: which
//! role runs, what happens to a learner's packets while we are still LOOKING, to LOOKING votes
//! while we are not, to a learner's PING reply, and when an acknowledgement may leave.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use tracing::{debug, info};

use super::action::{PeerAction, PeerInput, SyncId};
use super::config::{LeaderFigures, PeerConfig, PeerStatus};
use super::sessions::{
    decode_touches, encode_touches, SessionId, SessionTracker, MAX_TRACKED_SESSIONS,
    TOUCH_ENTRY_BYTES,
};
use crate::broadcast::{BroadcastAction, LeaderBroadcast};
use crate::discovery::{DiscoveryAction, LeaderDiscovery, LearnerDiscovery};
use crate::election::{Action, Decision, FastLeaderElection, VoteData};
use crate::notification::Notification;
use crate::packet::{packet_type, QuorumPacket, MAX_PACKET_DATA};
use crate::store::PersistedEpochs;
use crate::txnlog::{SnapshotPolicy, Txn};
use crate::types::{ServerId, ServerState};
use crate::zxid::Zxid;

/// Learner packets kept while we are still LOOKING (a follower may decide before its leader).
const MAX_STASHED_LEARNERS: usize = 256;
/// LOOKING notifications kept while we are not LOOKING (one per sender).
const MAX_KEPT_LOOKING: usize = 256;
/// `sync` barriers waiting at once.
const MAX_PENDING_SYNCS: usize = 4096;
/// ACKs held for appends the embedder has not reported durable; beyond this the core asks
/// for a [`PeerAction::SyncLog`] rather than hold more.
const MAX_HELD_ACKS: usize = 4096;

enum Role {
    Looking,
    /// Decided to lead; waiting for [`PeerInput::History`].
    AwaitingHistory,
    Leader(LeaderDiscovery),
    Learner(LearnerDiscovery),
}

/// What the core knows of the server's log and state machine, when it keeps one.
struct LogState {
    /// The broadcast core, while leading an established epoch.
    leader: Option<LeaderBroadcast>,
    policy: SnapshotPolicy,
    /// Committed transactions applied since the last snapshot.
    since_snapshot: u64,
    /// The last transaction the state machine applied.
    applied: Zxid,
}

/// A whole server — election, discovery, synchronisation, broadcast, leader and learner
/// roles, session liveness — as one deterministic state machine. Give it what happened
/// ([`handle`](Self::handle) with a [`PeerInput`] and the time), carry out what it asks
/// ([`poll_action`](Self::poll_action), in order: see [`PeerAction`] for the contract), and
/// give it [`PeerInput::Tick`] at [`next_deadline`](Self::next_deadline). No clock, no IO,
/// no randomness: the same inputs give the same actions.
///
/// The tokio `QuorumPeer` is one embedder (sockets, the log on disk, timers, group commit);
/// the simulators are others; the crate's lib docs drive three of them by hand.
pub struct PeerCore {
    cfg: PeerConfig,
    epochs: PersistedEpochs,
    fle: FastLeaderElection,
    role: Role,
    started: bool,
    grace_end: Option<Instant>,
    stashed: BTreeMap<ServerId, QuorumPacket>,
    kept_looking: BTreeMap<ServerId, Notification>,
    status: PeerStatus,
    log: Option<LogState>,
    /// The leader's session deadlines (only while leading an established epoch).
    tracker: SessionTracker,
    /// Touches not yet reported: sent in the next PING reply when following, moved into the
    /// tracker when this server starts leading.
    touches: BTreeMap<SessionId, Duration>,
    /// The leader's own `sync` barriers: done once this zxid is applied here.
    leader_syncs: Vec<(Zxid, SyncId)>,
    /// A learner's `sync` barriers, in the order the SYNCs were sent to the leader.
    learner_syncs: VecDeque<SyncId>,
    /// The last zxid appended and not yet reported durable.
    unsynced: Option<Zxid>,
    /// ACKs waiting for the durability of the appends before them, with the last zxid
    /// appended when each was held.
    held_acks: VecDeque<(Zxid, ServerId, QuorumPacket)>,
    out: VecDeque<PeerAction>,
}

impl std::fmt::Debug for PeerCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerCore")
            .field("sid", &self.cfg.my_id)
            .field("status", &self.status)
            .field("epochs", &self.epochs)
            .finish_non_exhaustive()
    }
}

impl PeerCore {
    /// A server that only elects (no transaction log), voting with the epochs and last zxid
    /// of `epochs`. Nothing happens until [`PeerInput::Start`].
    pub fn new(cfg: PeerConfig, epochs: PersistedEpochs) -> Self {
        let fle = FastLeaderElection::new(
            cfg.election.clone(),
            cfg.my_id,
            cfg.learner_type,
            cfg.quorum.clone(),
            VoteData::new(Zxid(epochs.last_zxid), epochs.current_epoch),
        );
        Self {
            cfg,
            epochs,
            fle,
            role: Role::Looking,
            started: false,
            grace_end: None,
            stashed: BTreeMap::new(),
            kept_looking: BTreeMap::new(),
            status: PeerStatus::LOOKING,
            log: None,
            tracker: SessionTracker::new(),
            touches: BTreeMap::new(),
            leader_syncs: Vec::new(),
            learner_syncs: VecDeque::new(),
            unsynced: None,
            held_acks: VecDeque::new(),
            out: VecDeque::new(),
        }
    }

    /// This server keeps a transaction log and a state machine (Z2): its log ends at
    /// `last_logged` and its state machine applied everything up to `applied` (both after
    /// restoring the newest snapshot and replaying the log). It then syncs learners when it
    /// leads, takes part in broadcast, and is asked to apply, truncate and snapshot.
    #[must_use]
    pub fn with_log(mut self, last_logged: Zxid, applied: Zxid) -> Self {
        self.epochs.last_zxid = self.epochs.last_zxid.max(last_logged.0);
        self.fle.set_vote_data(self.vote_data());
        self.log = Some(LogState {
            leader: None,
            policy: SnapshotPolicy::default(),
            since_snapshot: 0,
            applied,
        });
        self
    }

    /// When to ask for a [`PeerAction::TakeSnapshot`] (ZooKeeper's `snapCount`; default
    /// 100,000 committed transactions). Only for a server [`with_log`](Self::with_log).
    pub fn set_snapshot_policy(&mut self, policy: SnapshotPolicy) {
        if let Some(l) = self.log.as_mut() {
            l.policy = policy;
        }
    }

    /// Our sid.
    pub fn my_id(&self) -> ServerId {
        self.cfg.my_id
    }

    /// The configuration.
    pub fn config(&self) -> &PeerConfig {
        &self.cfg
    }

    /// The current status (also reported by [`PeerAction::Status`] on every change).
    pub fn status(&self) -> PeerStatus {
        self.status
    }

    /// The epochs and last zxid as the actions carried out so far made them.
    pub fn epochs(&self) -> PersistedEpochs {
        self.epochs
    }

    /// The election core (its vote, round, connected peers).
    pub fn election(&self) -> &FastLeaderElection {
        &self.fle
    }

    /// The election core, mutably: for the test-only rule switches of the
    /// `never-in-production` feature, set before [`PeerInput::Start`]. Anything else done
    /// through it bypasses the composition.
    pub fn election_mut(&mut self) -> &mut FastLeaderElection {
        &mut self.fle
    }

    /// The leader's discovery state machine (its learners, the proposed epoch), while leading.
    pub fn leader_discovery(&self) -> Option<&LeaderDiscovery> {
        match &self.role {
            Role::Leader(d) => Some(d),
            _ => None,
        }
    }

    /// The leader's broadcast core, while leading an established epoch with a log.
    pub fn leader_broadcast(&self) -> Option<&LeaderBroadcast> {
        self.log.as_ref().and_then(|l| l.leader.as_ref())
    }

    /// The leader's figures (what ZooKeeper's `mntr` reports of a leader): `None` unless this
    /// server leads an established epoch with a log.
    pub fn leader_figures(&self) -> Option<LeaderFigures> {
        let lb = self.leader_broadcast()?;
        Some(LeaderFigures {
            synced_followers: lb.followers().len(),
            synced_observers: lb.observers().len(),
            pending_syncs: self.leader_syncs.len() + lb.pending_barriers(),
        })
    }

    /// The last transaction the state machine applied, as the actions carried out so far
    /// made it (`None` without a log).
    pub fn applied(&self) -> Option<Zxid> {
        self.log.as_ref().map(|l| l.applied)
    }

    /// The next action to carry out, in order (see [`PeerAction`] for the contract).
    pub fn poll_action(&mut self) -> Option<PeerAction> {
        self.out.pop_front()
    }

    /// When to give the core [`PeerInput::Tick`] next.
    pub fn next_deadline(&self) -> Option<Instant> {
        let grace = if self.started { None } else { self.grace_end };
        let role = match &self.role {
            Role::Looking | Role::AwaitingHistory => None,
            Role::Leader(d) => d.next_deadline(),
            Role::Learner(d) => d.next_deadline(),
        };
        [
            grace,
            self.fle.next_deadline(),
            role,
            self.tracker.next_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Something happened at `now`.
    pub fn handle(&mut self, now: Instant, input: PeerInput) {
        match input {
            PeerInput::Start => {
                self.out.push_back(PeerAction::ConnectAll);
                self.grace_end = Some(now + self.cfg.connect_grace);
                if self.cfg.connect_grace.is_zero() || self.all_voters_connected() {
                    self.start_election(now);
                }
            }
            PeerInput::Notification { from, notification } => {
                // A server that went LOOKING a moment before us gets only our
                // FOLLOWING/LEADING answer; keep its vote for our own next round.
                if self.fle.state() != ServerState::Looking
                    && notification.state == ServerState::Looking
                    && (self.kept_looking.len() < MAX_KEPT_LOOKING
                        || self.kept_looking.contains_key(&from))
                {
                    self.kept_looking.insert(from, notification.clone());
                }
                self.fle.handle_notification(now, from, notification);
            }
            PeerInput::ElectionConnected(s) => {
                self.fle.connection_up(now, s);
                if !self.started && self.grace_end.is_some() && self.all_voters_connected() {
                    self.start_election(now);
                }
            }
            PeerInput::ElectionDisconnected(s) => self.fle.connection_down(now, s),
            PeerInput::Packet { from, packet } => self.on_packet(now, from, packet),
            PeerInput::QuorumDown(s) => match &mut self.role {
                Role::Leader(d) => {
                    if let Some(lb) = self.log.as_mut().and_then(|l| l.leader.as_mut()) {
                        lb.remove_learner(s);
                    }
                    d.learner_gone(now, s);
                }
                Role::Learner(d) if d.leader() == s => d.connection_lost(now),
                Role::Learner(_) => {}
                Role::Looking | Role::AwaitingHistory => {
                    self.stashed.remove(&s);
                }
            },
            PeerInput::QuorumRefused(s) => match &mut self.role {
                Role::Learner(d) if d.leader() == s => d.refused(),
                Role::Leader(d) => d.learner_gone(now, s),
                Role::Learner(_) => {}
                Role::Looking | Role::AwaitingHistory => {
                    self.stashed.remove(&s);
                }
            },
            PeerInput::Write(data) => self.on_write(data),
            PeerInput::Sync(id) => self.on_sync(id),
            PeerInput::Touch { session, timeout } => {
                if self.leading_established() {
                    self.tracker.touch(session, timeout, now);
                } else if self.touches.len() < MAX_TRACKED_SESSIONS
                    || self.touches.contains_key(&session)
                {
                    self.touches.insert(session, timeout);
                }
            }
            PeerInput::EndSession(s) => {
                self.tracker.remove(s);
                self.touches.remove(&s);
            }
            PeerInput::LogDurable(z) => self.durable_to(z),
            PeerInput::History { base, committed } => {
                if matches!(self.role, Role::AwaitingHistory) {
                    let mut d = self.new_leader_discovery(now);
                    d.set_commit_log_count(self.cfg.commit_log_count);
                    d.set_history(base, committed);
                    self.lead(now, d);
                }
            }
            PeerInput::LogRead { learner, read } => {
                if let Role::Leader(d) = &mut self.role {
                    d.log_read(now, learner, read);
                }
            }
            PeerInput::SnapshotRead { learner, snapshot } => {
                if let Role::Leader(d) = &mut self.role {
                    d.snapshot_read(learner, snapshot);
                }
            }
            PeerInput::Drained(learner) => {
                if let Role::Leader(d) = &mut self.role {
                    d.drained(now, learner);
                }
            }
            PeerInput::Tick => {
                if !self.started && self.grace_end.is_some_and(|g| g <= now) {
                    self.start_election(now);
                }
                if self.fle.next_deadline().is_some_and(|d| d <= now) {
                    self.fle.handle_tick(now);
                }
                match &mut self.role {
                    Role::Looking | Role::AwaitingHistory => {}
                    Role::Leader(d) => d.handle_tick(now),
                    Role::Learner(d) => d.handle_tick(now),
                }
                self.expire_sessions(now);
            }
        }
        self.pump(now);
    }

    fn start_election(&mut self, now: Instant) {
        self.started = true;
        self.fle.start(now);
    }

    fn all_voters_connected(&self) -> bool {
        let me = self.cfg.my_id;
        let connected = self.fle.connected_peers();
        self.cfg
            .quorum
            .voting_members()
            .iter()
            .all(|s| *s == me || connected.contains(s))
    }

    fn vote_data(&self) -> VoteData {
        VoteData::new(Zxid(self.epochs.last_zxid), self.epochs.current_epoch)
    }

    fn set_last_zxid(&mut self, z: i64) {
        self.epochs.last_zxid = z;
        self.fle.set_vote_data(self.vote_data());
    }

    fn leading_established(&self) -> bool {
        matches!(&self.role, Role::Leader(d) if d.is_established())
    }

    fn set_status(&mut self, status: PeerStatus) {
        if status != self.status {
            self.status = status;
            self.out.push_back(PeerAction::Status(status));
        }
    }

    fn on_packet(&mut self, now: Instant, from: ServerId, packet: QuorumPacket) {
        let opens =
            packet.kind == packet_type::FOLLOWERINFO || packet.kind == packet_type::OBSERVERINFO;
        match &mut self.role {
            Role::Leader(d) => {
                if packet.kind == packet_type::PING && d.is_established() {
                    touch_from_ping(&mut self.tracker, from, &packet, now);
                }
                if let Some(lb) = self.log.as_mut().and_then(|l| l.leader.as_mut()) {
                    lb.handle_packet(from, packet.clone());
                }
                d.handle_packet(now, from, packet);
            }
            // We do not lead: refuse a would-be learner at once (ZooKeeper has no listener
            // then), so that it gives up and looks for the real leader.
            Role::Learner(_) if opens => self.out.push_back(PeerAction::Refuse(from)),
            Role::Learner(d) => d.handle_packet(now, from, packet),
            Role::Looking | Role::AwaitingHistory => {
                if opens
                    && (self.stashed.len() < MAX_STASHED_LEARNERS
                        || self.stashed.contains_key(&from))
                {
                    self.stashed.insert(from, packet);
                }
            }
        }
    }

    /// A write from the embedder (see `PeerHandle::propose`).
    fn on_write(&mut self, data: bytes::Bytes) {
        let me = self.cfg.my_id.0;
        let Some(l) = self.log.as_mut() else {
            debug!(sid = me, "write dropped: no transaction log");
            return;
        };
        match (&mut self.role, l.leader.as_mut()) {
            (Role::Leader(_), Some(lb)) => {
                if !lb.accepts(&data) {
                    return;
                }
                if let Err(e) = lb.propose(data) {
                    debug!(sid = me, "write not proposed: {e}");
                }
            }
            (Role::Learner(d), _) if d.is_established() => d.submit(data),
            _ => debug!(sid = me, "write dropped: no established leader"),
        }
    }

    fn on_sync(&mut self, id: SyncId) {
        if self.leader_syncs.len() + self.learner_syncs.len() >= MAX_PENDING_SYNCS {
            self.out.push_back(PeerAction::SyncFailed(id));
            return;
        }
        let Some(l) = self.log.as_mut() else {
            self.out.push_back(PeerAction::SyncFailed(id));
            return;
        };
        match (&mut self.role, l.leader.as_ref()) {
            (Role::Leader(_), Some(lb)) => {
                // Everything proposed so far must be applied here first.
                if lb.outstanding().is_empty() {
                    self.out.push_back(PeerAction::SyncDone {
                        id,
                        zxid: l.applied,
                    });
                } else {
                    self.leader_syncs.push((lb.last_proposed(), id));
                }
            }
            (Role::Learner(d), _) if d.is_established() => {
                d.sync();
                self.learner_syncs.push_back(id);
            }
            _ => self.out.push_back(PeerAction::SyncFailed(id)),
        }
    }

    /// Reports the sessions whose deadline passed, while leading an established epoch.
    fn expire_sessions(&mut self, now: Instant) {
        if !self.leading_established() {
            return;
        }
        for s in self.tracker.expire(now) {
            info!(sid = self.cfg.my_id.0, session = s, "session expired");
            self.out.push_back(PeerAction::SessionExpired(s));
        }
    }

    /// Moves every pending action of the inner cores into the queue, carrying out the
    /// composition between them.
    fn pump(&mut self, now: Instant) {
        loop {
            if let Some(a) = self.fle.poll_action() {
                match a {
                    Action::Send { to, notification } => self
                        .out
                        .push_back(PeerAction::SendNotification { to, notification }),
                    Action::ConnectAll => self.out.push_back(PeerAction::ConnectAll),
                    Action::Decided(d) => self.on_decided(now, d),
                }
                continue;
            }
            let next = match &mut self.role {
                Role::Looking | Role::AwaitingHistory => None,
                Role::Leader(d) => d.poll_action(),
                Role::Learner(d) => d.poll_action(),
            };
            if let Some(a) = next {
                self.on_discovery_action(now, a);
                continue;
            }
            let lb = self.log.as_mut().and_then(|l| l.leader.as_mut());
            if let Some(a) = lb.and_then(LeaderBroadcast::poll_action) {
                self.on_leader_broadcast(now, a);
                continue;
            }
            return;
        }
    }

    /// Appends that are not yet durable must be before what comes next.
    fn barrier(&mut self) {
        if let Some(z) = self.unsynced {
            self.out.push_back(PeerAction::SyncLog);
            self.durable_to(z);
        }
    }

    /// The log is durable up to `z`: the leader's own acknowledgement counts, held ACKs go.
    fn durable_to(&mut self, z: Zxid) {
        if self.unsynced.is_some_and(|u| u <= z) {
            self.unsynced = None;
        }
        if let Some(lb) = self.log.as_mut().and_then(|l| l.leader.as_mut()) {
            lb.local_logged(z);
        }
        while self.held_acks.front().is_some_and(|(t, _, _)| *t <= z) {
            if let Some((_, to, packet)) = self.held_acks.pop_front() {
                self.out.push_back(PeerAction::Send { to, packet });
            }
        }
    }

    fn send(&mut self, to: ServerId, packet: QuorumPacket) {
        match self.unsynced {
            // An ACK vouches for what was appended before it (Z2).
            Some(z) if packet.kind == packet_type::ACK => {
                self.held_acks.push_back((z, to, packet));
                if self.held_acks.len() > MAX_HELD_ACKS {
                    self.barrier();
                }
            }
            _ => self.out.push_back(PeerAction::Send { to, packet }),
        }
    }

    fn append(&mut self, txns: Vec<Txn>) {
        let Some(last) = txns.last().map(|t| t.zxid) else {
            return;
        };
        self.out.push_back(PeerAction::Append(txns));
        self.unsynced = Some(last);
        self.set_last_zxid(last.0);
    }

    fn apply(&mut self, t: Txn) {
        let Some(l) = self.log.as_mut() else {
            return;
        };
        if t.zxid > l.applied {
            l.applied = t.zxid;
            l.since_snapshot += 1;
        }
        self.out.push_back(PeerAction::Apply(t));
        self.snapshot_if_due();
    }

    /// ZooKeeper's `snapCount`, only while serving an established epoch: then everything
    /// applied is committed, whereas during a sync a later leader's TRUNC may still cut
    /// applied proposals, which a snapshot would make permanent.
    fn snapshot_if_due(&mut self) {
        if self.status.epoch.is_none() {
            return;
        }
        let Some(l) = self.log.as_mut() else {
            return;
        };
        if l.since_snapshot >= l.policy.snap_count.max(1) {
            l.since_snapshot = 0;
            self.out.push_back(PeerAction::TakeSnapshot);
        }
    }

    fn on_discovery_action(&mut self, now: Instant, a: DiscoveryAction) {
        match a {
            DiscoveryAction::Zab(BroadcastAction::Log(txns)) if self.log.is_some() => {
                self.append(txns)
            }
            DiscoveryAction::Zab(BroadcastAction::Apply(t)) if self.log.is_some() => self.apply(t),
            DiscoveryAction::Send { to, mut packet } => {
                // A learner answers the leader's PING with the sessions its clients touched
                // since the last one (ZooKeeper's session-touch table).
                if packet.kind == packet_type::PING
                    && matches!(self.role, Role::Learner(_))
                    && !self.touches.is_empty()
                {
                    packet.data = Some(encode_touches(&take_touches(&mut self.touches)));
                }
                // A learner sent its sync data after the epoch was established joins the
                // broadcast now, so that nothing committed from here on passes it by.
                if packet.kind == packet_type::NEWLEADER {
                    if let Some(lb) = self.log.as_mut().and_then(|l| l.leader.as_mut()) {
                        lb.add_learner(to);
                    }
                }
                self.send(to, packet);
            }
            // Reads of what is committed: in order after the appends, no sync needed.
            DiscoveryAction::ReadLog {
                learner,
                after,
                upto,
                max_bytes,
                max_txns,
            } => self.out.push_back(PeerAction::ReadLog {
                learner,
                after,
                upto,
                max_bytes,
                max_txns,
            }),
            DiscoveryAction::ReadSnapshot(s) => self.out.push_back(PeerAction::ReadSnapshot(s)),
            DiscoveryAction::AwaitDrain(s) => self.out.push_back(PeerAction::AwaitDrain(s)),
            other => {
                self.barrier();
                self.on_ordered_action(now, other);
            }
        }
    }

    /// A discovery action that follows every earlier append's durability.
    fn on_ordered_action(&mut self, now: Instant, a: DiscoveryAction) {
        match a {
            DiscoveryAction::PersistAcceptedEpoch(e) => {
                self.epochs.accepted_epoch = e;
                self.out.push_back(PeerAction::PersistAcceptedEpoch(e));
            }
            DiscoveryAction::PersistCurrentEpoch(e) => {
                self.epochs.current_epoch = e;
                self.fle.set_vote_data(self.vote_data());
                self.out.push_back(PeerAction::PersistCurrentEpoch(e));
            }
            DiscoveryAction::Close(s) => self.out.push_back(PeerAction::Close(s)),
            DiscoveryAction::Established { epoch } => self.established(now, epoch),
            DiscoveryAction::Abandon { reason } => self.go_looking(now, reason),
            DiscoveryAction::Zab(BroadcastAction::SyncDone { zxid }) => {
                if let Some(id) = self.learner_syncs.pop_front() {
                    self.out.push_back(PeerAction::SyncDone { id, zxid });
                }
            }
            DiscoveryAction::Zab(a) => self.on_log_action(a),
            DiscoveryAction::Send { to, packet } => self.send(to, packet),
            DiscoveryAction::ReadLog { .. }
            | DiscoveryAction::ReadSnapshot(_)
            | DiscoveryAction::AwaitDrain(_) => {
                debug!(sid = self.cfg.my_id.0, action = ?a, "read action out of place");
            }
        }
    }

    /// Truncation, snapshot restore and commits of logged transactions.
    fn on_log_action(&mut self, a: BroadcastAction) {
        let Some(l) = self.log.as_mut() else {
            // Without a log, a learner ignores broadcast traffic; only sync data from a
            // leader that has a log arrives here, and there is nowhere to keep it.
            debug!(sid = self.cfg.my_id.0, action = ?a, "no transaction log attached");
            return;
        };
        match a {
            BroadcastAction::Truncate(z) => {
                l.applied = l.applied.min(z);
                self.out.push_back(PeerAction::Truncate(z));
                self.set_last_zxid(self.epochs.last_zxid.min(z.0));
            }
            BroadcastAction::RestoreSnapshot(s) => {
                l.applied = s.zxid;
                let z = s.zxid.0;
                self.out.push_back(PeerAction::RestoreSnapshot(s));
                self.set_last_zxid(z);
            }
            BroadcastAction::CommitLogged(z) => {
                let upto = z.min(Zxid(self.epochs.last_zxid));
                if upto > l.applied {
                    // Zxids of one epoch are consecutive; across epochs count at least one.
                    l.since_snapshot += if upto.epoch() == l.applied.epoch() {
                        upto.counter().saturating_sub(l.applied.counter()).into()
                    } else {
                        u64::from(upto.counter()).max(1)
                    };
                    l.applied = upto;
                }
                self.out.push_back(PeerAction::CommitLogged(z));
                self.snapshot_if_due();
            }
            BroadcastAction::Log(txns) => self.append(txns),
            BroadcastAction::Apply(t) => self.apply(t),
            BroadcastAction::Send { to, packet } => self.send(to, packet),
            BroadcastAction::PersistCurrentEpoch(e) => {
                self.epochs.current_epoch = e;
                self.fle.set_vote_data(self.vote_data());
                self.out.push_back(PeerAction::PersistCurrentEpoch(e));
            }
            BroadcastAction::Established { .. }
            | BroadcastAction::SyncDone { .. }
            | BroadcastAction::Abandon { .. } => {
                // The learner's discovery maps these to its own actions; the leader's
                // broadcast core's are handled in `on_leader_broadcast`.
                debug!(sid = self.cfg.my_id.0, action = ?a, "broadcast action out of place");
            }
        }
    }

    /// The leader's PROPOSALs go out before its own append is durable (as ZooKeeper's
    /// leader sends them before its sync thread logs them): its own acknowledgement counts only
    /// once the append is reported durable.
    fn on_leader_broadcast(&mut self, now: Instant, a: BroadcastAction) {
        match a {
            BroadcastAction::Send { to, packet } => {
                self.out.push_back(PeerAction::Send { to, packet })
            }
            BroadcastAction::Log(txns) => self.append(txns),
            BroadcastAction::Apply(t) => {
                if let Role::Leader(d) = &mut self.role {
                    d.push_committed(t.clone());
                }
                self.apply(t);
                self.release_leader_syncs();
            }
            BroadcastAction::Abandon { reason } => {
                self.barrier();
                self.go_looking(now, reason);
            }
            other => {
                self.barrier();
                self.on_log_action(other);
            }
        }
    }

    /// The leader's own `sync` barriers covered by what it applied are done.
    fn release_leader_syncs(&mut self) {
        let Some(applied) = self.applied() else {
            return;
        };
        let waiting = std::mem::take(&mut self.leader_syncs);
        for (z, id) in waiting {
            if z <= applied {
                self.out
                    .push_back(PeerAction::SyncDone { id, zxid: applied });
            } else {
                self.leader_syncs.push((z, id));
            }
        }
    }

    fn established(&mut self, now: Instant, epoch: i64) {
        if let Role::Leader(d) = &self.role {
            for (s, t) in std::mem::take(&mut self.touches) {
                self.tracker.touch(s, t, now);
            }
            // A leader with a log starts broadcasting to every learner it already sent its
            // sync data to.
            if let Some(l) = self.log.as_mut() {
                let mut lb = LeaderBroadcast::new(
                    self.cfg.my_id,
                    self.cfg.quorum.clone(),
                    epoch,
                    Zxid(self.epochs.last_zxid),
                );
                lb.set_request_validator(self.cfg.request_validator);
                for s in d.sync_sent_learners() {
                    lb.add_learner(s);
                }
                l.leader = Some(lb);
            }
        }
        self.fle.update_election_vote(epoch);
        let status = PeerStatus {
            epoch: Some(epoch),
            ..self.status
        };
        self.set_status(status);
        info!(sid = self.cfg.my_id.0, epoch, state = %self.fle.state(), "epoch established");
    }

    fn new_leader_discovery(&self, now: Instant) -> LeaderDiscovery {
        LeaderDiscovery::new(
            now,
            self.cfg.my_id,
            self.cfg.quorum.clone(),
            self.epochs,
            self.cfg.timing,
        )
    }

    /// Starts leading with `d`: the would-be learners that came while we were LOOKING go to
    /// it now.
    fn lead(&mut self, now: Instant, mut d: LeaderDiscovery) {
        for (from, p) in std::mem::take(&mut self.stashed) {
            d.handle_packet(now, from, p);
        }
        self.role = Role::Leader(d);
    }

    fn on_decided(&mut self, now: Instant, d: Decision) {
        let me = self.cfg.my_id;
        let leader = d.vote.leader;
        info!(sid = me.0, leader = leader.0, state = %d.state, path = ?d.path, "election decided");
        self.kept_looking.clear();
        if d.state != ServerState::Looking {
            self.out.push_back(PeerAction::Decided(d.clone()));
        }
        match d.state {
            ServerState::Leading if self.log.is_some() => {
                // The learners are synced from the durable log.
                self.barrier();
                self.role = Role::AwaitingHistory;
                self.out.push_back(PeerAction::LoadHistory {
                    max: self.cfg.commit_log_count,
                });
            }
            ServerState::Leading => {
                let disc = self.new_leader_discovery(now);
                self.lead(now, disc);
            }
            ServerState::Following | ServerState::Observing => {
                for (from, _) in std::mem::take(&mut self.stashed) {
                    self.out.push_back(PeerAction::Refuse(from));
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
                let follow = self.log.is_some();
                disc.set_broadcast_options(self.cfg.learner.with_follow_broadcast(follow));
                self.role = Role::Learner(disc);
            }
            ServerState::Looking => return,
        }
        self.set_status(PeerStatus {
            state: d.state,
            leader: Some(leader),
            epoch: None,
        });
    }

    /// Z6 / Z8: leave LEADING / FOLLOWING / OBSERVING and start a new election round.
    fn go_looking(&mut self, now: Instant, reason: &'static str) {
        info!(sid = self.cfg.my_id.0, reason, "going LOOKING");
        if let Some(l) = self.log.as_mut() {
            l.leader = None;
        }
        // Barriers of the epoch we leave fail; the leader's session deadlines go with it.
        for (_, id) in std::mem::take(&mut self.leader_syncs) {
            self.out.push_back(PeerAction::SyncFailed(id));
        }
        for id in std::mem::take(&mut self.learner_syncs) {
            self.out.push_back(PeerAction::SyncFailed(id));
        }
        self.tracker.clear();
        match std::mem::replace(&mut self.role, Role::Looking) {
            Role::Leader(d) => {
                for s in d.learners() {
                    self.out.push_back(PeerAction::Close(s));
                }
            }
            Role::Learner(d) => self.out.push_back(PeerAction::Close(d.leader())),
            Role::Looking | Role::AwaitingHistory => {}
        }
        self.set_status(PeerStatus::LOOKING);
        self.fle.set_vote_data(self.vote_data());
        self.fle.start(now);
        // A server that went LOOKING a moment before us got only our FOLLOWING/LEADING answer;
        // ZooKeeper drops its vote and both sides wait for the 200 ms notification timeout
        // (ZooKeeper's `FastLeaderElection.Messenger.WorkerReceiver`, the race behind its
        // bimodal failover times). We kept the vote: hand it to the new election now. This
        // only delivers a message late, which the election tolerates like any network delay.
        for (from, n) in std::mem::take(&mut self.kept_looking) {
            self.fle.handle_notification(now, from, n);
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
