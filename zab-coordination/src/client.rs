//! [`ZabCoordination`]: a client of a [`ZabEnsemble`](super::ZabEnsemble) implementing the
//! controller's [`Coordination`] trait, bound to one server at a time as a ZooKeeper client is.
//!
//! - Writes go to its server, which proposes them through Zab; the result is the one the
//!   server computed when it applied the committed transaction. Reads are served by the server
//!   from its own replica; [`Coordination::sync`] makes the server catch up with the leader.
//! - The client keeps its session alive by touching it at its server (on every request and on
//!   a heartbeat every third of the session timeout); the ensemble's leader expires it
//!   otherwise, through a committed `CloseSession`. A server that stops serving (it lost its
//!   leader) for two heartbeats is left for another one, as a ZooKeeper server closes its
//!   clients' connections then. Then the client reports `Expired`, opens a
//!   new session and reports `Connected` with it.
//! - Watches are registered at its server, which fires them as it applies transactions. If the
//!   server dies (or the connection is cut), the client reports `Disconnected`, moves to
//!   another server, makes it catch up (`sync`), checks there that its session still exists
//!   and re-registers its watches, firing at once those whose node changed after the last
//!   transaction the client saw (ZooKeeper's `SetWatches` with its relative zxid); then it
//!   reports `Connected` with the same session.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use async_trait::async_trait;
use futures::channel::mpsc as fmpsc;
use ha_coordination::path::validate_path;
use ha_coordination::{
    Coordination, CoordinationError, CoordinationEvent, CreateMode, EventStream, Op, OpResult,
    SessionEvent, SessionId, SessionState, Stat, WatchEvent, WatchEventKind, ZnodeTree,
};
use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;
use tracing::{debug, info};

use super::codec::TxnBody;
use super::ensemble::Directory;
use super::server::ZabServer;
use super::state::{Notice, Outcome, WatchKind};

/// Timeouts of a client: [`ClientTimeouts::new`] or [`ClientTimeouts::default`] (a 6 s
/// session, 5 s per operation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientTimeouts {
    /// The session timeout the leader enforces.
    pub session: Duration,
    /// How long an operation may wait (for its server to serve, for its write to be applied)
    /// before failing with `ConnectionLoss`.
    pub operation: Duration,
}

impl ClientTimeouts {
    /// A `session` timeout and an `operation` timeout.
    pub const fn new(session: Duration, operation: Duration) -> Self {
        Self { session, operation }
    }
}

impl Default for ClientTimeouts {
    /// A 6 s session timeout; an operation may wait 5 s.
    fn default() -> Self {
        Self::new(Duration::from_secs(6), Duration::from_secs(5))
    }
}

/// The mutable part of a client.
struct ClientState {
    server: Arc<ZabServer>,
    session: SessionId,
    state: SessionState,
    /// Cut off on purpose ([`ZabCoordination::disconnect`]) until reconnected.
    held_off: bool,
    /// The last transaction this client saw (results, reads, watch events).
    last_zxid: i64,
    /// The watches registered, to re-register elsewhere.
    watches: BTreeSet<(String, WatchKind)>,
    subscribers: Vec<fmpsc::UnboundedSender<CoordinationEvent>>,
}

impl ClientState {
    fn emit(&mut self, ev: CoordinationEvent) {
        self.subscribers
            .retain(|s| s.unbounded_send(ev.clone()).is_ok());
    }

    fn emit_session(&mut self, ev: SessionEvent) {
        self.emit(CoordinationEvent::Session(ev));
    }

    fn usable(&self) -> Result<(Arc<ZabServer>, SessionId), CoordinationError> {
        match self.state {
            SessionState::Connected => Ok((self.server.clone(), self.session)),
            SessionState::Disconnected => Err(CoordinationError::ConnectionLoss),
            SessionState::Expired => Err(CoordinationError::SessionExpired),
            SessionState::Closed => Err(CoordinationError::Closed),
        }
    }
}

/// Shared by the client handle and its background task.
pub(crate) struct ClientInner {
    dir: Arc<Directory>,
    timeouts: ClientTimeouts,
    st: Mutex<ClientState>,
    /// Wakes the background task: a `disconnect` / `reconnect` request.
    wake: Notify,
}

impl ClientInner {
    fn lock(&self) -> MutexGuard<'_, ClientState> {
        self.st.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The current session.
    pub(crate) fn session(&self) -> SessionId {
        self.lock().session
    }

    /// Cuts the client off its server (a connection loss); the session stays open.
    pub(crate) fn disconnect(&self) -> bool {
        let mut st = self.lock();
        if st.state != SessionState::Connected {
            return false;
        }
        st.held_off = true;
        let (server, session) = (st.server.clone(), st.session);
        drop(st);
        server.state.lock().detach(session);
        true
    }

    /// Lets a client cut off by `disconnect` reconnect.
    pub(crate) fn reconnect(&self) {
        self.lock().held_off = false;
        self.wake.notify_one();
    }
}

/// A client of a [`ZabEnsemble`](super::ZabEnsemble) (see the module docs). Dropping it
/// closes its session: its ephemerals are deleted through a committed transaction.
pub struct ZabCoordination {
    inner: Arc<ClientInner>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for ZabCoordination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.inner.lock();
        f.debug_struct("ZabCoordination")
            .field("server", &st.server.sid().0)
            .field("session", &st.session)
            .field("state", &st.state)
            .finish()
    }
}

impl ZabCoordination {
    /// Opens a session at `server` and starts the client's heartbeat and event task.
    pub(crate) async fn connect(
        dir: Arc<Directory>,
        server: Arc<ZabServer>,
        timeouts: ClientTimeouts,
    ) -> Result<(ZabCoordination, Weak<ClientInner>), CoordinationError> {
        let session = open_session(&server, timeouts).await?;
        let notices = server.state.lock().attach(session);
        let last_zxid = session;
        let inner = Arc::new(ClientInner {
            dir,
            timeouts,
            st: Mutex::new(ClientState {
                server,
                session,
                state: SessionState::Connected,
                held_off: false,
                last_zxid,
                watches: BTreeSet::new(),
                subscribers: Vec::new(),
            }),
            wake: Notify::new(),
        });
        let weak = Arc::downgrade(&inner);
        let task = tokio::spawn(run(inner.clone(), notices));
        Ok((ZabCoordination { inner, task }, weak))
    }

    /// The sid of the server this client is bound to.
    pub fn server(&self) -> zab_core::ServerId {
        self.inner.lock().server.sid()
    }

    async fn multi_raw(
        &self,
        ops: Vec<Op>,
    ) -> Result<Vec<(OpResult, Option<Stat>)>, CoordinationError> {
        let (server, session) = self.inner.lock().usable()?;
        server.touch(session, self.inner.timeouts.session);
        let (outcome, zxid) = server
            .write(
                TxnBody::Multi { session, ops },
                self.inner.timeouts.operation,
            )
            .await?;
        self.saw(zxid);
        match outcome {
            Outcome::Multi(r) => r,
            _ => Err(CoordinationError::Backend(
                "unexpected write outcome".into(),
            )),
        }
    }

    async fn single(&self, op: Op) -> Result<(OpResult, Option<Stat>), CoordinationError> {
        let mut r = self.multi_raw(vec![op]).await.map_err(|e| match e {
            CoordinationError::MultiOpFailed { error, .. } => *error,
            other => other,
        })?;
        r.pop()
            .ok_or_else(|| CoordinationError::Backend("empty transaction result".into()))
    }

    fn saw(&self, zxid: i64) {
        let mut st = self.inner.lock();
        st.last_zxid = st.last_zxid.max(zxid);
    }

    /// A local read at the client's server; `watch_for` says which watch to register, given
    /// what was read (none, or none on a missing node where ZooKeeper fails the read).
    async fn read<T>(
        &self,
        path: &str,
        f: impl FnOnce(&ZnodeTree) -> T,
        watch_for: impl FnOnce(&T) -> Option<WatchKind>,
    ) -> Result<T, CoordinationError> {
        validate_path(path, false)?;
        let (server, session) = self.inner.lock().usable()?;
        server.touch(session, self.inner.timeouts.session);
        let (out, kind, zxid) = server
            .read(self.inner.timeouts.operation, |st| {
                let out = f(&st.tree);
                let kind = watch_for(&out);
                if let Some(k) = kind {
                    st.watch(session, k, path);
                }
                (out, kind, st.last_applied.0)
            })
            .await?;
        let mut st = self.inner.lock();
        st.last_zxid = st.last_zxid.max(zxid);
        if let Some(k) = kind {
            st.watches.insert((path.to_string(), k));
        }
        Ok(out)
    }
}

impl Drop for ZabCoordination {
    fn drop(&mut self) {
        self.task.abort();
        let mut st = self.inner.lock();
        if st.state != SessionState::Closed {
            st.state = SessionState::Closed;
            let session = st.session;
            st.server.state.lock().detach(session);
            st.server
                .write_and_forget(TxnBody::CloseSession { session });
            st.emit_session(SessionEvent::Closed);
        }
    }
}

async fn open_session(
    server: &ZabServer,
    timeouts: ClientTimeouts,
) -> Result<SessionId, CoordinationError> {
    let timeout_ms = i32::try_from(timeouts.session.as_millis()).unwrap_or(i32::MAX);
    match server
        .write(TxnBody::CreateSession { timeout_ms }, timeouts.operation)
        .await?
    {
        (Outcome::Session(s), _) => {
            server.touch(s, timeouts.session);
            Ok(s)
        }
        _ => Err(CoordinationError::Backend(
            "unexpected session outcome".into(),
        )),
    }
}

/// The client's background task: heartbeats, notices from its server, reconnection.
async fn run(inner: Arc<ClientInner>, mut notices: mpsc::UnboundedReceiver<Notice>) {
    let beat = (inner.timeouts.session / 3).max(Duration::from_millis(10));
    let mut heartbeat = tokio::time::interval(beat);
    let mut not_serving_since: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            n = notices.recv() => match n {
                Some(Notice::Watch(ev, zxid)) => {
                    let mut st = inner.lock();
                    st.last_zxid = st.last_zxid.max(zxid);
                    forget_fired(&mut st.watches, &ev);
                    st.emit(CoordinationEvent::Watch(ev));
                }
                Some(Notice::SessionClosed) => {
                    let (server, old) = {
                        let mut st = inner.lock();
                        st.state = SessionState::Expired;
                        st.watches.clear();
                        let old = st.session;
                        st.emit_session(SessionEvent::Expired { session_id: old });
                        (st.server.clone(), old)
                    };
                    info!(session = old, "session expired; opening a new one");
                    notices = match new_session_at(&inner, &server).await {
                        Some(rx) => rx,
                        // Elsewhere: the old session is gone there too, a new one is opened.
                        None => reattach(&inner).await,
                    };
                }
                None => {
                    {
                        let mut st = inner.lock();
                        if st.state == SessionState::Connected {
                            st.state = SessionState::Disconnected;
                            st.emit_session(SessionEvent::Disconnected);
                        }
                    }
                    notices = reattach(&inner).await;
                }
            },
            _ = heartbeat.tick() => {
                let st = inner.lock();
                if st.state != SessionState::Connected {
                    continue;
                }
                st.server.touch(st.session, inner.timeouts.session);
                // A server that lost its leader (partitioned away, or no quorum) stops serving;
                // as a ZooKeeper server closes its clients' connections then, the client moves
                // to another server after two heartbeats without service, in time to keep its
                // session.
                if st.server.status().epoch.is_some() {
                    not_serving_since = None;
                } else if not_serving_since.is_none() {
                    not_serving_since = Some(tokio::time::Instant::now());
                } else if not_serving_since.is_some_and(|t| t.elapsed() >= beat) {
                    not_serving_since = None;
                    info!(session = st.session, sid = st.server.sid().0, "server not serving: moving");
                    st.server.state.lock().detach(st.session);
                }
            }
        }
    }
}

fn forget_fired(watches: &mut BTreeSet<(String, WatchKind)>, ev: &WatchEvent) {
    let kinds: &[WatchKind] = match ev.kind {
        WatchEventKind::NodeCreated | WatchEventKind::NodeDataChanged => {
            &[WatchKind::Data, WatchKind::Exist]
        }
        WatchEventKind::NodeChildrenChanged => &[WatchKind::Child],
        WatchEventKind::NodeDeleted => &[WatchKind::Data, WatchKind::Exist, WatchKind::Child],
    };
    for k in kinds {
        watches.remove(&(ev.path.clone(), *k));
    }
}

/// Opens a new session at `server` after an expiry and reports it; `None` if the server
/// cannot (the caller moves elsewhere).
async fn new_session_at(
    inner: &ClientInner,
    server: &Arc<ZabServer>,
) -> Option<mpsc::UnboundedReceiver<Notice>> {
    let session = open_session(server, inner.timeouts).await.ok()?;
    let rx = server.state.lock().attach(session);
    let mut st = inner.lock();
    st.server = server.clone();
    st.session = session;
    st.state = SessionState::Connected;
    st.last_zxid = st.last_zxid.max(session);
    st.emit_session(SessionEvent::Connected {
        session_id: session,
    });
    Some(rx)
}

/// Finds a server to continue on (keeping the session if it still exists), retrying until
/// one answers.
async fn reattach(inner: &ClientInner) -> mpsc::UnboundedReceiver<Notice> {
    let mut round = 0usize;
    loop {
        while inner.lock().held_off {
            inner.wake.notified().await;
        }
        let current = inner.lock().server.sid();
        let servers = inner.dir.servers_from(current, round);
        round += 1;
        for server in servers {
            if let Some(rx) = try_attach(inner, &server).await {
                return rx;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Moves the client to `server`: catch it up, revalidate the session there, re-register
/// the watches (firing those that missed a change).
async fn try_attach(
    inner: &ClientInner,
    server: &Arc<ZabServer>,
) -> Option<mpsc::UnboundedReceiver<Notice>> {
    if !server.is_alive() {
        return None;
    }
    server.sync(inner.timeouts.operation).await.ok()?;
    let (session, last_zxid, watches) = {
        let st = inner.lock();
        (st.session, st.last_zxid, st.watches.clone())
    };
    let open = {
        let sst = server.state.lock();
        if !server.is_alive() || sst.last_applied.0 < last_zxid {
            return None;
        }
        sst.sessions.contains_key(&session)
    };
    if !open {
        // The session ended while we were away (reported once, however many servers we try
        // before one opens the new session).
        {
            let mut st = inner.lock();
            if st.state != SessionState::Expired {
                st.state = SessionState::Expired;
                st.watches.clear();
                st.emit_session(SessionEvent::Expired {
                    session_id: session,
                });
            }
        }
        return new_session_at(inner, server).await;
    }
    let mut sst = server.state.lock();
    if !sst.sessions.contains_key(&session) {
        return None; // closed just now: the next attempt reports the expiry
    }
    let rx = sst.attach(session);
    let mut fired = Vec::new();
    for (path, kind) in &watches {
        let stat = sst.tree.stat(path);
        let ev = match (kind, stat) {
            (WatchKind::Exist, Some(_)) => Some(WatchEventKind::NodeCreated),
            (WatchKind::Data | WatchKind::Child, None) => Some(WatchEventKind::NodeDeleted),
            (WatchKind::Data, Some(s)) if s.mzxid > last_zxid => {
                Some(WatchEventKind::NodeDataChanged)
            }
            (WatchKind::Child, Some(s)) if s.pzxid > last_zxid => {
                Some(WatchEventKind::NodeChildrenChanged)
            }
            _ => None,
        };
        match ev {
            Some(kind) => fired.push(WatchEvent {
                kind,
                path: path.clone(),
            }),
            None => sst.watch(session, *kind, path),
        }
    }
    let applied = sst.last_applied.0;
    drop(sst);
    server.touch(session, inner.timeouts.session);
    let mut st = inner.lock();
    st.server = server.clone();
    st.state = SessionState::Connected;
    st.last_zxid = st.last_zxid.max(applied);
    debug!(session, sid = server.sid().0, "reconnected");
    st.emit_session(SessionEvent::Connected {
        session_id: session,
    });
    // A deleted node fires one NodeDeleted for all its watches.
    let mut seen = std::collections::HashSet::new();
    for ev in fired {
        if seen.insert(ev.clone()) {
            forget_fired(&mut st.watches, &ev);
            st.emit(CoordinationEvent::Watch(ev));
        }
    }
    Some(rx)
}

#[async_trait]
impl Coordination for ZabCoordination {
    fn session_id(&self) -> SessionId {
        self.inner.lock().session
    }

    fn session_state(&self) -> SessionState {
        self.inner.lock().state
    }

    fn events(&self) -> EventStream {
        let (tx, rx) = fmpsc::unbounded();
        self.inner.lock().subscribers.push(tx);
        Box::pin(rx)
    }

    async fn create(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> Result<(String, Stat), CoordinationError> {
        match self.single(Op::create(path, data.to_vec(), mode)).await? {
            (OpResult::Create { path }, stat) => Ok((path, stat.unwrap_or_default())),
            _ => Err(CoordinationError::Backend(
                "unexpected create result".into(),
            )),
        }
    }

    async fn get_data(
        &self,
        path: &str,
        watch: bool,
    ) -> Result<(Vec<u8>, Stat), CoordinationError> {
        self.read(
            path,
            |t| t.get(path),
            |r| (watch && r.is_some()).then_some(WatchKind::Data),
        )
        .await?
        .ok_or_else(|| CoordinationError::NoNode {
            path: path.to_string(),
        })
    }

    async fn exists(&self, path: &str, watch: bool) -> Result<Option<Stat>, CoordinationError> {
        self.read(
            path,
            |t| t.stat(path),
            |s| {
                watch.then_some(if s.is_some() {
                    WatchKind::Data
                } else {
                    WatchKind::Exist
                })
            },
        )
        .await
    }

    async fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: i32,
    ) -> Result<Stat, CoordinationError> {
        match self
            .single(Op::set_data(path, data.to_vec(), version))
            .await?
        {
            (OpResult::SetData { stat }, _) => Ok(stat),
            _ => Err(CoordinationError::Backend(
                "unexpected set_data result".into(),
            )),
        }
    }

    async fn delete(&self, path: &str, version: i32) -> Result<(), CoordinationError> {
        self.single(Op::delete(path, version)).await.map(|_| ())
    }

    async fn children(&self, path: &str, watch: bool) -> Result<Vec<String>, CoordinationError> {
        self.read(
            path,
            |t| t.children(path),
            |c| (watch && c.is_some()).then_some(WatchKind::Child),
        )
        .await?
        .ok_or_else(|| CoordinationError::NoNode {
            path: path.to_string(),
        })
    }

    async fn sync(&self, path: &str) -> Result<(), CoordinationError> {
        let _ = path;
        let (server, session) = self.inner.lock().usable()?;
        server.touch(session, self.inner.timeouts.session);
        server.sync(self.inner.timeouts.operation).await?;
        let applied = server.state.lock().last_applied.0;
        self.saw(applied);
        Ok(())
    }

    async fn multi(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, CoordinationError> {
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        Ok(self
            .multi_raw(ops)
            .await?
            .into_iter()
            .map(|(r, _)| r)
            .collect())
    }
}
