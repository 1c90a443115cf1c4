//! The peer's event loop: the IO around a [`PeerCore`]. It feeds the core from a
//! [`Transport`], a clock and a [`PeerHandle`], and carries out the core's actions: sends,
//! the [`ElectionStore`], the transaction log (with group commit) and the state machine, and
//! the status and session-expiry channels. Every protocol decision is the core's.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tracing::debug;

use super::action::{PeerAction, PeerInput, SyncId};
use super::config::{LeaderFigures, PeerConfig, PeerStatus};
use super::core::PeerCore;
use crate::notification::Notification;
use crate::packet::MAX_PACKET_DATA;
use crate::peer::replication::{Replication, ReplicationError};
use crate::peer::sessions::SessionId;
use crate::state_machine::StateMachine;
use crate::store::{ElectionStore, StoreError};
use crate::transport::{Transport, TransportEvent};
use crate::txnlog::{read_committed_window, read_for_sync, SnapshotPolicy, TxnLog, TxnLogError};
use crate::types::ServerId;
use crate::zxid::Zxid;

mod group_commit;
use group_commit::{sync_finished, GroupCommit, InFlightSync};

/// Writes, barriers and session touches queued from a [`PeerHandle`] and not yet taken.
const MAX_QUEUED_WRITES: usize = 4096;
/// Expired sessions reported to the embedder and not yet taken.
const MAX_QUEUED_EXPIRIES: usize = 1024;
/// A learner's next chunk of a sync from the log is read once at most this many packets to it
/// wait in the transport ([`Transport::quorum_backlog`]): a chunk (two packets per
/// transaction, [`LOG_READ_CHUNK_TXNS`](crate::discovery::LOG_READ_CHUNK_TXNS)) and the
/// leader's in-memory window after it then fit in the transport's queue, so that a learner any
/// distance behind is brought back, one chunk at a time, and never dropped.
const SYNC_BACKLOG: usize = 1024;
/// How often a held sync read checks the transport's backlog again.
const SYNC_PACE: Duration = Duration::from_millis(2);

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
    LeaderFigures(oneshot::Sender<Option<LeaderFigures>>),
}

/// A server taking part in elections over a [`Transport`], with its epochs in an
/// [`ElectionStore`]: the tokio driver of a [`PeerCore`].
///
/// Three peers on the in-memory mesh elect server 3 (equal zxids: the largest sid wins), which
/// then leads epoch 1 with a quorum's acknowledgement; killing it makes server 2 lead epoch 2:
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// use zab_core::peer::{PeerConfig, QuorumPeer};
/// use zab_core::store::MemoryElectionStore;
/// use zab_core::transport::MemoryNetwork;
/// use zab_core::{LearnerType, QuorumMaj, ServerId};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let net = MemoryNetwork::new();
/// let quorum = Arc::new(QuorumMaj::with_ids([1, 2, 3], []));
/// let mut peers = Vec::new();
/// for sid in 1..=3 {
///     let cfg = PeerConfig::new(ServerId(sid), LearnerType::Participant, quorum.clone());
///     let store = MemoryElectionStore::default();
///     let peer = QuorumPeer::new(cfg, net.endpoint(ServerId(sid)), store).await.unwrap();
///     peers.push(peer.spawn());
/// }
/// let wait = Duration::from_secs(5);
/// let led = peers[2].wait_for(wait, |s| s.is_established_leader()).await.unwrap();
/// assert_eq!((led.leader, led.epoch), (Some(ServerId(3)), Some(1)));
///
/// peers[2].kill();
/// let led = peers[1].wait_for(wait, |s| s.is_established_leader()).await.unwrap();
/// assert_eq!((led.leader, led.epoch), (Some(ServerId(2)), Some(2)));
/// # }
/// ```
///
#[must_use = "a peer does nothing until it is spawned or run"]
pub struct QuorumPeer<T: Transport, S: ElectionStore> {
    core: PeerCore,
    transport: T,
    store: S,
    status: watch::Sender<PeerStatus>,
    repl: Option<Replication>,
    control_tx: mpsc::Sender<Control>,
    control: mpsc::Receiver<Control>,
    expired_tx: mpsc::Sender<SessionId>,
    expired_rx: Option<mpsc::Receiver<SessionId>>,
    /// The `sync` barriers the core is working on.
    syncs: BTreeMap<SyncId, oneshot::Sender<Zxid>>,
    next_sync: SyncId,
    group: GroupCommit,
    in_flight: Option<InFlightSync>,
    /// `ReadLog` requests waiting for their learner's transport backlog to drain.
    held_reads: Vec<HeldRead>,
    /// Learners of a [`PeerAction::AwaitDrain`] whose transport backlog has not drained yet.
    held_drains: Vec<ServerId>,
}

/// A [`PeerAction::ReadLog`] not answered yet.
#[derive(Debug, Clone, Copy)]
struct HeldRead {
    learner: ServerId,
    after: Zxid,
    upto: Zxid,
    max_bytes: u64,
    max_txns: usize,
}

impl<T: Transport, S: ElectionStore> std::fmt::Debug for QuorumPeer<T, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuorumPeer")
            .field("sid", &self.core.my_id())
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
            Control::LeaderFigures(_) => f.write_str("LeaderFigures"),
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

    /// The leader's figures while this peer leads an established epoch (`None` otherwise, or
    /// when the peer is stopped or its queue is full).
    pub async fn leader_figures(&self) -> Option<LeaderFigures> {
        let (tx, rx) = oneshot::channel();
        self.control.try_send(Control::LeaderFigures(tx)).ok()?;
        rx.await.ok().flatten()
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
        let (status, _) = watch::channel(PeerStatus::LOOKING);
        let (control_tx, control) = mpsc::channel(MAX_QUEUED_WRITES);
        let (expired_tx, expired_rx) = mpsc::channel(MAX_QUEUED_EXPIRIES);
        Ok(Self {
            core: PeerCore::new(cfg, epochs),
            transport,
            store,
            status,
            repl: None,
            control_tx,
            control,
            expired_tx,
            expired_rx: Some(expired_rx),
            syncs: BTreeMap::new(),
            next_sync: 0,
            group: GroupCommit::default(),
            in_flight: None,
            held_reads: Vec::new(),
            held_drains: Vec::new(),
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
        self.core = self.core.with_log(r.log.last_zxid(), r.sm.last_applied());
        self.repl = Some(r);
        Ok(self)
    }

    /// Sets when this peer snapshots its state machine and compacts its log (ZooKeeper's
    /// `snapCount`; default 100,000 committed transactions). Takes effect only on a peer
    /// [`with_replication`](Self::with_replication), so call it after that.
    pub fn with_snapshot_policy(mut self, policy: SnapshotPolicy) -> Self {
        self.core.set_snapshot_policy(policy);
        self
    }

    /// A receiver of this peer's status.
    pub fn status(&self) -> watch::Receiver<PeerStatus> {
        self.status.subscribe()
    }

    /// Runs the peer on its own tokio task.
    pub fn spawn(mut self) -> PeerHandle {
        let sid = self.core.my_id();
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
        self.core.handle(Instant::now(), PeerInput::Start);
        self.drain().await?;
        loop {
            let deadline = self.core.next_deadline();
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
                _ = sleep => self.core.handle(Instant::now(), PeerInput::Tick),
                Some(c) = self.control.recv() => self.on_control(c),
                done = sync_finished(&mut self.in_flight) => {
                    done?;
                    if let Some(f) = self.in_flight.take() {
                        self.release(f.group);
                    }
                }
                _ = tokio::time::sleep(SYNC_PACE),
                    if !self.held_reads.is_empty() || !self.held_drains.is_empty() => {}
            }
            self.answer_held_reads()?;
            self.take_ready()?;
            self.drain().await?;
        }
    }

    /// A write, a sync barrier, a session touch or a session's end from the embedder.
    fn on_control(&mut self, c: Control) {
        let input = match c {
            Control::Write(w) => PeerInput::Write(w),
            Control::Touch(session, timeout) => PeerInput::Touch { session, timeout },
            Control::EndSession(s) => PeerInput::EndSession(s),
            Control::LeaderFigures(tx) => {
                let _ = tx.send(self.core.leader_figures());
                return;
            }
            Control::Sync(tx) => {
                let id = self.next_sync;
                self.next_sync = self.next_sync.wrapping_add(1);
                self.syncs.insert(id, tx);
                PeerInput::Sync(id)
            }
        };
        self.core.handle(Instant::now(), input);
    }

    fn on_event(&mut self, ev: TransportEvent) {
        let input = match ev {
            TransportEvent::Election { from, payload } => match Notification::decode(&payload) {
                Ok(notification) => PeerInput::Notification { from, notification },
                // Malformed notifications are dropped; the receiver keeps going (as
                // ZooKeeper's `WorkerReceiver` does).
                Err(e) => {
                    debug!(sid = from.0, "undecodable notification dropped: {e}");
                    return;
                }
            },
            TransportEvent::ConnectionUp(s) => PeerInput::ElectionConnected(s),
            TransportEvent::ConnectionDown(s) => PeerInput::ElectionDisconnected(s),
            TransportEvent::Quorum { from, packet } => PeerInput::Packet { from, packet },
            TransportEvent::QuorumDown(s) => PeerInput::QuorumDown(s),
            TransportEvent::QuorumRefused(s) => PeerInput::QuorumRefused(s),
        };
        self.core.handle(Instant::now(), input);
    }

    /// Carries out every pending action of the core, in order (the contract of
    /// [`PeerAction`]); when none is left, starts the sync of the appends gathered.
    async fn drain(&mut self) -> Result<(), PeerError> {
        loop {
            let Some(a) = self.core.poll_action() else {
                if self.start_group_sync()? {
                    continue;
                }
                return Ok(());
            };
            self.carry_out(a).await?;
        }
    }

    /// Answers the held sync reads whose learner's transport backlog has drained (flow
    /// control only: what is read and sent is the core's choice).
    fn answer_held_reads(&mut self) -> Result<(), PeerError> {
        for learner in std::mem::take(&mut self.held_drains) {
            if self.transport.quorum_backlog(learner) > SYNC_BACKLOG {
                self.held_drains.push(learner);
            } else {
                self.core
                    .handle(Instant::now(), PeerInput::Drained(learner));
            }
        }
        if self.held_reads.is_empty() {
            return Ok(());
        }
        for h in std::mem::take(&mut self.held_reads) {
            if self.transport.quorum_backlog(h.learner) > SYNC_BACKLOG {
                self.held_reads.push(h);
                continue;
            }
            let Some(r) = self.repl.as_ref() else {
                continue;
            };
            let read = read_for_sync(r.log.as_ref(), h.after, h.upto, h.max_bytes, h.max_txns)
                .map_err(ReplicationError::from)?;
            let input = PeerInput::LogRead {
                learner: h.learner,
                read,
            };
            self.core.handle(Instant::now(), input);
        }
        Ok(())
    }

    async fn carry_out(&mut self, a: PeerAction) -> Result<(), PeerError> {
        let sid = self.core.my_id().0;
        match a {
            PeerAction::SendNotification { to, notification } => {
                self.transport.send_notification(to, &notification);
            }
            PeerAction::ConnectAll => self.transport.connect_all(),
            PeerAction::Send { to, packet } => self.transport.send_quorum(to, packet),
            PeerAction::Close(s) => self.transport.close_quorum(s),
            PeerAction::AwaitDrain(learner) => {
                self.held_drains.push(learner);
                self.answer_held_reads()?;
            }
            PeerAction::Refuse(s) => self.transport.refuse_quorum(s),
            PeerAction::PersistAcceptedEpoch(e) => self.store.save_accepted_epoch(e).await?,
            PeerAction::PersistCurrentEpoch(e) => self.store.save_current_epoch(e).await?,
            PeerAction::Append(txns) => self.append_grouped(txns)?,
            PeerAction::SyncLog => self.sync_group().await?,
            PeerAction::Decided(_) => {}
            PeerAction::Status(s) => {
                self.status.send_replace(s);
            }
            PeerAction::SyncDone { id, zxid } => {
                if let Some(tx) = self.syncs.remove(&id) {
                    let _ = tx.send(zxid);
                }
            }
            // Dropping the sender fails the barrier.
            PeerAction::SyncFailed(id) => drop(self.syncs.remove(&id)),
            PeerAction::SessionExpired(s) => match self.expired_tx.try_send(s) {
                Ok(()) => {}
                // The embedder is slow: report it again a moment later.
                Err(mpsc::error::TrySendError::Full(_)) => {
                    let timeout = self.core.config().timing.tick_time;
                    let timeout = timeout.max(Duration::from_millis(1));
                    let touch = PeerInput::Touch {
                        session: s,
                        timeout,
                    };
                    self.core.handle(Instant::now(), touch);
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {}
            },
            log_action => {
                let Some(r) = self.repl.as_mut() else {
                    debug!(sid, action = ?log_action, "no transaction log attached");
                    return Ok(());
                };
                match log_action {
                    PeerAction::Apply(t) => r.apply(&t),
                    PeerAction::CommitLogged(z) => r.commit_logged(z)?,
                    PeerAction::Truncate(z) => r.truncate(z)?,
                    PeerAction::RestoreSnapshot(s) => r.restore(&s)?,
                    PeerAction::TakeSnapshot => {
                        let zxid = r.snapshot()?;
                        debug!(sid, %zxid, "snapshot taken, log compacted");
                    }
                    PeerAction::LoadHistory { max } => {
                        let (base, committed) = read_committed_window(r.log.as_ref(), max)
                            .map_err(ReplicationError::from)?;
                        let history = PeerInput::History { base, committed };
                        self.core.handle(Instant::now(), history);
                    }
                    PeerAction::ReadLog {
                        learner,
                        after,
                        upto,
                        max_bytes,
                        max_txns,
                    } => {
                        self.held_reads.push(HeldRead {
                            learner,
                            after,
                            upto,
                            max_bytes,
                            max_txns,
                        });
                        self.answer_held_reads()?;
                    }
                    PeerAction::ReadSnapshot(learner) => {
                        let snapshot = r.log.latest_snapshot().map_err(ReplicationError::from)?;
                        let input = PeerInput::SnapshotRead { learner, snapshot };
                        self.core.handle(Instant::now(), input);
                    }
                    other => debug!(sid, action = ?other, "action not carried out"),
                }
            }
        }
        Ok(())
    }
}
