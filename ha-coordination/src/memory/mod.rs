//! [`MemoryCoordination`]: the embedded coordination service. One [`MemoryTree`] (the "server")
//! is shared by any number of clients, each with its own session; tests expire, suspend and
//! resume sessions on demand. Everything happens synchronously under one lock, so events are
//! delivered in a deterministic order (transaction order; within a transaction, operation
//! order, as ZooKeeper's data tree fires them).
//!
//! The same tree logic is public as [`ZnodeTree`], a deterministic state for replicated
//! implementations (zxids given from outside, watch events returned).

mod replica;
mod tree;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use futures::channel::mpsc;

pub use self::replica::{TreeChange, ZnodeTree};
use self::tree::{Tree, Trigger};
use super::error::CoordinationError;
use super::path::validate_path;
use super::service::Coordination;
use super::types::{
    CoordinationEvent, CreateMode, EventStream, Op, OpResult, SessionEvent, SessionId,
    SessionState, Stat, WatchEvent, WatchEventKind, ANY_VERSION,
};

type ClientId = u64;

/// A client's bookkeeping on the shared tree.
struct ClientEntry {
    session: SessionId,
    state: SessionState,
    subscribers: Vec<mpsc::UnboundedSender<CoordinationEvent>>,
    /// Watch events that fired while the client was disconnected.
    held: Vec<CoordinationEvent>,
}

/// Watching sessions by path (foldhash: every change looks its path up).
type Watches = HashMap<String, BTreeSet<SessionId>, foldhash::fast::RandomState>;

/// Everything behind the lock.
struct Shared {
    tree: Tree,
    data_watches: Watches,
    child_watches: Watches,
    ephemerals: HashMap<SessionId, BTreeSet<String>>,
    sessions: HashMap<SessionId, ClientId>,
    clients: HashMap<ClientId, ClientEntry>,
    next_session: SessionId,
    next_client: ClientId,
}

impl Shared {
    fn new_session(&mut self, client: ClientId) -> SessionId {
        self.next_session += 1;
        let id = self.next_session;
        self.sessions.insert(id, client);
        id
    }

    fn deliver(&mut self, client: ClientId, event: CoordinationEvent) {
        let Some(entry) = self.clients.get_mut(&client) else {
            return;
        };
        if entry.state == SessionState::Disconnected {
            if matches!(event, CoordinationEvent::Watch(_)) {
                entry.held.push(event);
            }
            return;
        }
        entry
            .subscribers
            .retain(|s| s.unbounded_send(event.clone()).is_ok());
    }

    fn deliver_session(&mut self, client: ClientId, event: SessionEvent) {
        if let Some(entry) = self.clients.get_mut(&client) {
            entry
                .subscribers
                .retain(|s| s.unbounded_send(CoordinationEvent::Session(event)).is_ok());
        }
    }

    fn fire(&mut self, sessions: BTreeSet<SessionId>, kind: WatchEventKind, path: &str) {
        for session in sessions {
            if let Some(&client) = self.sessions.get(&session) {
                self.deliver(
                    client,
                    CoordinationEvent::Watch(WatchEvent {
                        kind,
                        path: path.to_string(),
                    }),
                );
            }
        }
    }

    fn dispatch(&mut self, triggers: Vec<Trigger>) {
        for trigger in triggers {
            match trigger {
                Trigger::Created(path) => {
                    let s = self.data_watches.remove(&path).unwrap_or_default();
                    self.fire(s, WatchEventKind::NodeCreated, &path);
                }
                Trigger::DataChanged(path) => {
                    let s = self.data_watches.remove(&path).unwrap_or_default();
                    self.fire(s, WatchEventKind::NodeDataChanged, &path);
                }
                Trigger::Deleted(path) => {
                    let mut s = self.data_watches.remove(&path).unwrap_or_default();
                    s.extend(self.child_watches.remove(&path).unwrap_or_default());
                    self.fire(s, WatchEventKind::NodeDeleted, &path);
                }
                Trigger::ChildrenChanged(path) => {
                    let s = self.child_watches.remove(&path).unwrap_or_default();
                    self.fire(s, WatchEventKind::NodeChildrenChanged, &path);
                }
            }
        }
    }

    /// Runs a transaction for `client` and fires its watches.
    fn transact(
        &mut self,
        client: ClientId,
        ops: Vec<Op>,
    ) -> Result<Vec<OpResult>, CoordinationError> {
        let session = self.usable_session(client)?;
        let done = self.tree.apply_owned(ops, session)?;
        for (owner, path) in done.ephemerals_created {
            self.ephemerals.entry(owner).or_default().insert(path);
        }
        for (owner, path) in done.ephemerals_deleted {
            if let Some(set) = self.ephemerals.get_mut(&owner) {
                set.remove(&path);
            }
        }
        self.dispatch(done.triggers);
        Ok(done.results)
    }

    /// The client's session if operations may run on it now.
    fn usable_session(&self, client: ClientId) -> Result<SessionId, CoordinationError> {
        let entry = self.clients.get(&client).ok_or(CoordinationError::Closed)?;
        match entry.state {
            SessionState::Connected => Ok(entry.session),
            SessionState::Disconnected => Err(CoordinationError::ConnectionLoss),
            SessionState::Expired => Err(CoordinationError::SessionExpired),
            SessionState::Closed => Err(CoordinationError::Closed),
        }
    }

    /// Ends `session`: deletes its ephemerals in one transaction (firing other sessions'
    /// watches) and forgets its watches.
    fn end_session(&mut self, session: SessionId) {
        for set in self.data_watches.values_mut() {
            set.remove(&session);
        }
        for set in self.child_watches.values_mut() {
            set.remove(&session);
        }
        self.data_watches.retain(|_, s| !s.is_empty());
        self.child_watches.retain(|_, s| !s.is_empty());
        let ephemerals = self.ephemerals.remove(&session).unwrap_or_default();
        let ops: Vec<Op> = ephemerals
            .into_iter()
            .map(|p| Op::delete(p, ANY_VERSION))
            .collect();
        if let Ok(done) = self.tree.apply(&ops, session) {
            self.dispatch(done.triggers);
        }
        self.sessions.remove(&session);
    }

    fn expire(&mut self, session: SessionId) -> bool {
        let Some(&client) = self.sessions.get(&session) else {
            return false;
        };
        self.end_session(session);
        let new_session = self.new_session(client);
        if let Some(entry) = self.clients.get_mut(&client) {
            entry.held.clear();
            entry.session = new_session;
            entry.state = SessionState::Connected;
        }
        self.deliver_session(
            client,
            SessionEvent::Expired {
                session_id: session,
            },
        );
        self.deliver_session(
            client,
            SessionEvent::Connected {
                session_id: new_session,
            },
        );
        true
    }

    fn suspend(&mut self, session: SessionId) -> bool {
        let Some(&client) = self.sessions.get(&session) else {
            return false;
        };
        let Some(entry) = self.clients.get_mut(&client) else {
            return false;
        };
        if entry.state != SessionState::Connected {
            return false;
        }
        self.deliver_session(client, SessionEvent::Disconnected);
        if let Some(entry) = self.clients.get_mut(&client) {
            entry.state = SessionState::Disconnected;
        }
        true
    }

    fn resume(&mut self, session: SessionId) -> bool {
        let Some(&client) = self.sessions.get(&session) else {
            return false;
        };
        let Some(entry) = self.clients.get_mut(&client) else {
            return false;
        };
        if entry.state != SessionState::Disconnected {
            return false;
        }
        entry.state = SessionState::Connected;
        let held = std::mem::take(&mut entry.held);
        self.deliver_session(
            client,
            SessionEvent::Connected {
                session_id: session,
            },
        );
        for event in held {
            self.deliver(client, event);
        }
        true
    }

    fn close(&mut self, client: ClientId) {
        let Some(entry) = self.clients.get(&client) else {
            return;
        };
        let session = entry.session;
        if entry.state != SessionState::Closed {
            self.end_session(session);
            self.deliver_session(client, SessionEvent::Closed);
        }
        self.clients.remove(&client);
    }
}

/// The shared in-memory tree (the "server"). Cheap to clone; every clone is the same tree.
#[derive(Clone)]
pub struct MemoryTree {
    shared: Arc<Mutex<Shared>>,
}

impl std::fmt::Debug for MemoryTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryTree")
            .field("last_zxid", &self.last_zxid())
            .finish()
    }
}

impl Default for MemoryTree {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryTree {
    /// An empty tree (only `/`).
    pub fn new() -> MemoryTree {
        MemoryTree {
            shared: Arc::new(Mutex::new(Shared {
                tree: Tree::new(),
                data_watches: Watches::default(),
                child_watches: Watches::default(),
                ephemerals: HashMap::new(),
                sessions: HashMap::new(),
                clients: HashMap::new(),
                next_session: 0,
                next_client: 0,
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic while holding the lock leaves the tree consistent (every transaction is
        // applied or rolled back before anything can panic), so a poisoned lock is usable.
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new client with a new session on this tree. Its session closes (ephemerals deleted)
    /// when the client and all its clones are dropped.
    pub fn connect(&self) -> MemoryCoordination {
        let mut shared = self.lock();
        shared.next_client += 1;
        let client = shared.next_client;
        let session = shared.new_session(client);
        shared.clients.insert(
            client,
            ClientEntry {
                session,
                state: SessionState::Connected,
                subscribers: Vec::new(),
                held: Vec::new(),
            },
        );
        MemoryCoordination {
            inner: Arc::new(ClientHandle {
                tree: self.clone(),
                client,
            }),
        }
    }

    /// Expires `session` as a server would after the session timeout: its ephemerals are deleted
    /// (firing other clients' watches), its watches dropped; its client receives `Expired` and
    /// then `Connected` with a new session. False if no such live session.
    pub fn expire(&self, session: SessionId) -> bool {
        self.lock().expire(session)
    }

    /// Cuts `session`'s connection: its client receives `Disconnected`, its operations fail with
    /// `ConnectionLoss` and its watch events are held until [`resume`](Self::resume). The
    /// session and its ephemerals stay alive. False if no such connected session.
    pub fn suspend(&self, session: SessionId) -> bool {
        self.lock().suspend(session)
    }

    /// Reconnects a suspended session: its client receives `Connected` (same id) and then the
    /// watch events held meanwhile. False if no such suspended session.
    pub fn resume(&self, session: SessionId) -> bool {
        self.lock().resume(session)
    }

    /// The zxid of the last committed transaction.
    pub fn last_zxid(&self) -> i64 {
        self.lock().tree.last_zxid()
    }

    /// The number of nodes (including `/`).
    pub fn node_count(&self) -> usize {
        self.lock().tree.subtree("/").len()
    }

    /// Paths under `path` (inclusive), parents first, children in name order; for test output.
    pub fn dump(&self, path: &str) -> Vec<String> {
        self.lock().tree.subtree(path)
    }
}

/// Closes the client's session when the last clone of the client is dropped.
struct ClientHandle {
    tree: MemoryTree,
    client: ClientId,
}

impl Drop for ClientHandle {
    fn drop(&mut self) {
        self.tree.lock().close(self.client);
    }
}

/// A client of a [`MemoryTree`], implementing [`Coordination`]. Clones share the client (and
/// its session).
///
/// ```
/// use futures::StreamExt;
/// use ha_coordination::{
///     Coordination, CoordinationEvent, CreateMode, MemoryTree, WatchEvent, WatchEventKind,
/// };
///
/// # futures::executor::block_on(async {
/// let tree = MemoryTree::new();
/// let broker = tree.connect();
/// let controller = tree.connect();
/// let mut events = controller.events();
///
/// controller.create("/brokers", b"", CreateMode::Persistent).await?;
/// controller.children("/brokers", true).await?; // one-shot child watch
/// broker.create("/brokers/1", b"{}", CreateMode::Ephemeral).await?;
/// assert_eq!(
///     events.next().await,
///     Some(CoordinationEvent::Watch(WatchEvent {
///         kind: WatchEventKind::NodeChildrenChanged,
///         path: "/brokers".into(),
///     }))
/// );
///
/// // The broker's session expires: its ephemeral vanishes.
/// tree.expire(broker.session_id());
/// assert!(controller.exists("/brokers/1", false).await?.is_none());
/// # Ok::<(), ha_coordination::CoordinationError>(())
/// # }).unwrap();
/// ```
#[derive(Clone)]
pub struct MemoryCoordination {
    inner: Arc<ClientHandle>,
}

impl std::fmt::Debug for MemoryCoordination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryCoordination")
            .field("session_id", &self.session_id())
            .finish()
    }
}

impl Default for MemoryCoordination {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryCoordination {
    /// A client on a new, empty tree (reach the tree with [`tree`](Self::tree)).
    pub fn new() -> MemoryCoordination {
        MemoryTree::new().connect()
    }

    /// The tree this client works on; use it to connect more clients or to expire sessions.
    pub fn tree(&self) -> &MemoryTree {
        &self.inner.tree
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.inner.tree.lock()
    }

    fn client(&self) -> ClientId {
        self.inner.client
    }

    fn single(&self, op: Op) -> Result<OpResult, CoordinationError> {
        let mut shared = self.lock();
        let mut results = shared
            .transact(self.client(), vec![op])
            .map_err(|e| match e {
                CoordinationError::MultiOpFailed { error, .. } => *error,
                other => other,
            })?;
        results
            .pop()
            .ok_or_else(|| CoordinationError::Backend("empty transaction result".into()))
    }

    fn read<T>(
        &self,
        path: &str,
        f: impl FnOnce(&mut Shared, SessionId) -> Result<T, CoordinationError>,
    ) -> Result<T, CoordinationError> {
        validate_path(path, false)?;
        let mut shared = self.lock();
        let session = shared.usable_session(self.client())?;
        f(&mut shared, session)
    }
}

#[async_trait]
impl Coordination for MemoryCoordination {
    fn session_id(&self) -> SessionId {
        self.lock()
            .clients
            .get(&self.client())
            .map(|c| c.session)
            .unwrap_or(0)
    }

    fn session_state(&self) -> SessionState {
        self.lock()
            .clients
            .get(&self.client())
            .map(|c| c.state)
            .unwrap_or(SessionState::Closed)
    }

    fn events(&self) -> EventStream {
        let (tx, rx) = mpsc::unbounded();
        if let Some(entry) = self.lock().clients.get_mut(&self.client()) {
            entry.subscribers.push(tx);
        }
        Box::pin(rx)
    }

    async fn create(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> Result<(String, Stat), CoordinationError> {
        let mut shared = self.lock();
        let op = Op::create(path, data.to_vec(), mode);
        let results = shared
            .transact(self.client(), vec![op])
            .map_err(|e| match e {
                CoordinationError::MultiOpFailed { error, .. } => *error,
                other => other,
            })?;
        match results.into_iter().next() {
            Some(OpResult::Create { path }) => {
                let stat = shared
                    .tree
                    .get(&path)
                    .map(|n| n.full_stat())
                    .unwrap_or_default();
                Ok((path, stat))
            }
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
        self.read(path, |shared, session| {
            let node = shared
                .tree
                .get(path)
                .ok_or_else(|| CoordinationError::NoNode {
                    path: path.to_string(),
                })?;
            let out = (node.data.clone(), node.full_stat());
            if watch {
                shared
                    .data_watches
                    .entry(path.to_string())
                    .or_default()
                    .insert(session);
            }
            Ok(out)
        })
    }

    async fn get_data_many(
        &self,
        paths: &[String],
    ) -> Vec<Result<(Vec<u8>, Stat), CoordinationError>> {
        // One lock for the whole batch: a consistent snapshot, as a multi-read.
        let shared = self.lock();
        let usable = shared.usable_session(self.client()).map(|_| ());
        paths
            .iter()
            .map(|path| {
                usable.clone()?;
                validate_path(path, false)?;
                let node = shared
                    .tree
                    .get(path)
                    .ok_or_else(|| CoordinationError::NoNode { path: path.clone() })?;
                Ok((node.data.clone(), node.full_stat()))
            })
            .collect()
    }

    async fn exists(&self, path: &str, watch: bool) -> Result<Option<Stat>, CoordinationError> {
        self.read(path, |shared, session| {
            let stat = shared.tree.get(path).map(|n| n.full_stat());
            if watch {
                shared
                    .data_watches
                    .entry(path.to_string())
                    .or_default()
                    .insert(session);
            }
            Ok(stat)
        })
    }

    async fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: i32,
    ) -> Result<Stat, CoordinationError> {
        match self.single(Op::set_data(path, data.to_vec(), version))? {
            OpResult::SetData { stat } => Ok(stat),
            _ => Err(CoordinationError::Backend(
                "unexpected set_data result".into(),
            )),
        }
    }

    async fn delete(&self, path: &str, version: i32) -> Result<(), CoordinationError> {
        self.single(Op::delete(path, version)).map(|_| ())
    }

    async fn children(&self, path: &str, watch: bool) -> Result<Vec<String>, CoordinationError> {
        self.read(path, |shared, session| {
            let node = shared
                .tree
                .get(path)
                .ok_or_else(|| CoordinationError::NoNode {
                    path: path.to_string(),
                })?;
            let children: Vec<String> = node.children.iter().cloned().collect();
            if watch {
                shared
                    .child_watches
                    .entry(path.to_string())
                    .or_default()
                    .insert(session);
            }
            Ok(children)
        })
    }

    async fn multi(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, CoordinationError> {
        self.lock().transact(self.client(), ops)
    }
}
