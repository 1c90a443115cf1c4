//! [`ZooKeeperCoordination`]: the [`Coordination`] trait on a real ZooKeeper 3.8 server or
//! ensemble, through the `zookeeper-client` crate (feature `zookeeper`).
//!
//! One background task per client owns the session: it forwards fired one-shot watches and
//! session-state changes to the subscribers in the order the server sent them, and after an
//! expiry opens a new session (reporting `Expired`, then `Connected` with the new id).
//! Connection losses are handled by the crate, which reconnects within the session and
//! re-registers the watches.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use async_trait::async_trait;
use futures::channel::mpsc;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use zookeeper_client as zk;

use super::error::CoordinationError;
use super::path::validate_path;
use super::service::Coordination;
use super::types::{
    CoordinationEvent, CreateMode, EventStream, Op, OpResult, SessionEvent, SessionId,
    SessionState, Stat, WatchEvent, WatchEventKind,
};

/// Reads per multi-read request of [`Coordination::get_data_many`]: large enough that the
/// server's per-request cost vanishes, small enough that a response stays far below
/// ZooKeeper's 1 MB packet limit (a partition state and its stat are ~150 bytes).
const MULTI_READ_BATCH: usize = 1000;

/// Backoff bounds while re-opening a session after expiry.
const RENEW_BACKOFF_MIN: Duration = Duration::from_millis(100);
const RENEW_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Connection settings: [`ZooKeeperOptions::default`] (Kafka's defaults) and the `with_*`
/// setters.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ZooKeeperOptions {
    /// The session timeout asked of the server (it clamps it to 2..20 ticks).
    pub session_timeout: Duration,
    /// How long one connection attempt may take.
    pub connection_timeout: Duration,
}

impl Default for ZooKeeperOptions {
    fn default() -> Self {
        // Kafka's zookeeper.session.timeout.ms default (18 s since 2.5).
        ZooKeeperOptions {
            session_timeout: Duration::from_secs(18),
            connection_timeout: Duration::from_secs(10),
        }
    }
}

impl ZooKeeperOptions {
    /// Kafka's defaults: an 18 s session timeout, 10 s per connection attempt.
    pub fn new() -> Self {
        Self::default()
    }

    /// The session timeout asked of the server.
    #[must_use]
    pub fn with_session_timeout(mut self, session_timeout: Duration) -> Self {
        self.session_timeout = session_timeout;
        self
    }

    /// How long one connection attempt may take.
    #[must_use]
    pub fn with_connection_timeout(mut self, connection_timeout: Duration) -> Self {
        self.connection_timeout = connection_timeout;
        self
    }
}

/// Which one-shot watch a registration is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Slot {
    /// Set by `get_data` or `exists`.
    Data,
    /// Set by `children`.
    Child,
}

/// A new server-side watch for the session task to await.
struct Registration {
    generation: u64,
    path: String,
    slot: Slot,
    id: u64,
    watcher: zk::OneshotWatcher,
}

/// State shared by the client's handles and its session task.
struct Inner {
    connect_string: String,
    options: ZooKeeperOptions,
    current: Mutex<Current>,
    subscribers: Mutex<Vec<mpsc::UnboundedSender<CoordinationEvent>>>,
}

/// The current session.
struct Current {
    client: zk::Client,
    generation: u64,
    state: SessionState,
    /// Active watches of this generation: (path, slot) → registration id.
    watches: HashMap<(String, Slot), u64>,
    next_watch_id: u64,
    registrations: mpsc::UnboundedSender<Registration>,
}

impl Inner {
    fn current(&self) -> MutexGuard<'_, Current> {
        self.current.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn publish(&self, event: CoordinationEvent) {
        self.subscribers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|s| s.unbounded_send(event.clone()).is_ok());
    }
}

/// A client of a real ZooKeeper ensemble implementing [`Coordination`]. Clones share the
/// client; its session is closed (ephemerals deleted) when the last clone is dropped.
#[derive(Clone)]
pub struct ZooKeeperCoordination {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ZooKeeperCoordination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZooKeeperCoordination")
            .field("connect_string", &self.inner.connect_string)
            .field("session_id", &self.session_id())
            .finish()
    }
}

async fn open(
    connect_string: &str,
    options: &ZooKeeperOptions,
) -> Result<zk::Client, CoordinationError> {
    zk::Client::connector()
        .with_session_timeout(options.session_timeout)
        .with_connection_timeout(options.connection_timeout)
        .connect(connect_string)
        .await
        .map_err(|e| map_error(e, ""))
}

impl ZooKeeperCoordination {
    /// Connects to `connect_string` (`host:port,host:port[/chroot]`) with the default options.
    /// Must be called within a tokio runtime.
    pub async fn connect(connect_string: &str) -> Result<ZooKeeperCoordination, CoordinationError> {
        Self::connect_with(connect_string, ZooKeeperOptions::default()).await
    }

    /// Connects with explicit options. Must be called within a tokio runtime.
    pub async fn connect_with(
        connect_string: &str,
        options: ZooKeeperOptions,
    ) -> Result<ZooKeeperCoordination, CoordinationError> {
        let client = open(connect_string, &options).await?;
        let (tx, rx) = mpsc::unbounded();
        let state_watcher = client.state_watcher();
        let inner = Arc::new(Inner {
            connect_string: connect_string.to_string(),
            options,
            current: Mutex::new(Current {
                client,
                generation: 0,
                state: SessionState::Connected,
                watches: HashMap::new(),
                next_watch_id: 0,
                registrations: tx,
            }),
            subscribers: Mutex::new(Vec::new()),
        });
        tokio::spawn(session_task(Arc::downgrade(&inner), state_watcher, rx, 0));
        Ok(ZooKeeperCoordination { inner })
    }

    fn client(&self) -> zk::Client {
        self.inner.current().client.clone()
    }

    /// Ends this client's session as an expiry would, with ZooKeeper's documented test trick: a
    /// second connection to `connect_string` with the same session id and password, closed
    /// at once; returns once the server confirms the session is gone. Its ephemerals vanish;
    /// when this client reconnects it reports `Expired` and opens a new session.
    ///
    /// Cut this client off first (e.g. connect it through `ha_testkit::TcpProxy` and pause it,
    /// passing the server's own address here): otherwise its reconnection races the second
    /// connection for the session and this may take long or fail.
    pub async fn close_session_at(&self, connect_string: &str) -> Result<(), CoordinationError> {
        let session = self.client().session().clone();
        let mut last = CoordinationError::ConnectionLoss;
        for _ in 0..50 {
            let twin = zk::Client::connector()
                .with_session(session.clone())
                .with_session_timeout(self.inner.options.session_timeout)
                .with_connection_timeout(self.inner.options.connection_timeout)
                .connect(connect_string)
                .await;
            match twin {
                Err(zk::Error::SessionExpired) => return Ok(()),
                // Dropping the only handle of the twin closes the session.
                Ok(twin) => drop(twin),
                Err(e) => last = map_error(e, ""),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(last)
    }

    /// Registers a watch unless an identical one is active; returns the id to register with
    /// the crate's watcher, or `None` when the read should not set a new server-side watch.
    fn reserve_watch(&self, path: &str, slot: Slot) -> Option<(u64, u64)> {
        let mut current = self.inner.current();
        let key = (path.to_string(), slot);
        if current.watches.contains_key(&key) {
            return None;
        }
        current.next_watch_id += 1;
        let id = current.next_watch_id;
        current.watches.insert(key, id);
        Some((current.generation, id))
    }

    fn unreserve_watch(&self, path: &str, slot: Slot, id: u64) {
        let mut current = self.inner.current();
        let key = (path.to_string(), slot);
        if current.watches.get(&key) == Some(&id) {
            current.watches.remove(&key);
        }
    }

    fn hand_over(
        &self,
        generation: u64,
        path: &str,
        slot: Slot,
        id: u64,
        watcher: zk::OneshotWatcher,
    ) {
        let current = self.inner.current();
        let _ = current.registrations.unbounded_send(Registration {
            generation,
            path: path.to_string(),
            slot,
            id,
            watcher,
        });
    }
}

type Fired = (String, Slot, u64, zk::WatchedEvent);

/// Owns the session: forwards watch events and state changes in order; renews after expiry.
async fn session_task(
    inner: Weak<Inner>,
    mut state_watcher: zk::StateWatcher,
    mut registrations: mpsc::UnboundedReceiver<Registration>,
    mut generation: u64,
) {
    let mut pending: FuturesUnordered<BoxFuture<'static, Fired>> = FuturesUnordered::new();
    loop {
        tokio::select! {
            // Session changes first: a watch delivered after a reconnection must not overtake
            // the `Connected` it follows.
            biased;
            state = state_watcher.changed() => {
                let Some(strong) = inner.upgrade() else { return };
                match state {
                    zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                        let session_id = {
                            let mut current = strong.current();
                            current.state = SessionState::Connected;
                            current.client.session_id().0
                        };
                        strong.publish(CoordinationEvent::Session(SessionEvent::Connected { session_id }));
                    }
                    zk::SessionState::Disconnected => {
                        strong.current().state = SessionState::Disconnected;
                        strong.publish(CoordinationEvent::Session(SessionEvent::Disconnected));
                    }
                    zk::SessionState::Expired => {
                        let old = {
                            let mut current = strong.current();
                            current.state = SessionState::Expired;
                            current.watches.clear();
                            current.client.session_id().0
                        };
                        tracing::warn!(session = old, "coordination session expired; opening a new one");
                        strong.publish(CoordinationEvent::Session(SessionEvent::Expired { session_id: old }));
                        pending = FuturesUnordered::new();
                        drop(strong);
                        let Some((client, watcher)) = renew(&inner).await else { return };
                        let Some(strong) = inner.upgrade() else { return };
                        generation += 1;
                        let session_id = client.session_id().0;
                        {
                            let mut current = strong.current();
                            current.client = client;
                            current.generation = generation;
                            current.state = SessionState::Connected;
                            current.watches.clear();
                        }
                        state_watcher = watcher;
                        strong.publish(CoordinationEvent::Session(SessionEvent::Connected { session_id }));
                    }
                    _ => {
                        strong.current().state = SessionState::Closed;
                        strong.publish(CoordinationEvent::Session(SessionEvent::Closed));
                        return;
                    }
                }
            }
            Some(fired) = pending.next(), if !pending.is_empty() => {
                let Some(inner) = inner.upgrade() else { return };
                forward_watch(&inner, generation, fired);
            }
            reg = registrations.next() => {
                let Some(reg) = reg else { return };
                if reg.generation == generation {
                    let (path, slot, id, watcher) = (reg.path, reg.slot, reg.id, reg.watcher);
                    pending.push(async move { (path, slot, id, watcher.changed().await) }.boxed());
                }
            }
        }
    }
}

/// Opens a new session after expiry, retrying with backoff while the client is alive.
async fn renew(inner: &Weak<Inner>) -> Option<(zk::Client, zk::StateWatcher)> {
    let mut backoff = RENEW_BACKOFF_MIN;
    loop {
        let (connect_string, options) = {
            let strong = inner.upgrade()?;
            (strong.connect_string.clone(), strong.options.clone())
        };
        match open(&connect_string, &options).await {
            Ok(client) => {
                let watcher = client.state_watcher();
                return Some((client, watcher));
            }
            Err(error) => {
                tracing::warn!(%error, "re-opening the coordination session failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(RENEW_BACKOFF_MAX);
            }
        }
    }
}

fn forward_watch(inner: &Inner, generation: u64, (path, slot, id, event): Fired) {
    let kind = match event.event_type {
        zk::EventType::NodeCreated => WatchEventKind::NodeCreated,
        zk::EventType::NodeDeleted => WatchEventKind::NodeDeleted,
        zk::EventType::NodeDataChanged => WatchEventKind::NodeDataChanged,
        zk::EventType::NodeChildrenChanged => WatchEventKind::NodeChildrenChanged,
        // The session ended; the session state handler reports it.
        _ => return,
    };
    {
        let mut current = inner.current();
        if current.generation != generation {
            return;
        }
        let key = (path.clone(), slot);
        if current.watches.get(&key) != Some(&id) {
            // Already reported through the other slot (one NodeDeleted for both).
            return;
        }
        current.watches.remove(&key);
        if kind == WatchEventKind::NodeDeleted {
            let other = match slot {
                Slot::Data => Slot::Child,
                Slot::Child => Slot::Data,
            };
            current.watches.remove(&(path.clone(), other));
        }
    }
    inner.publish(CoordinationEvent::Watch(WatchEvent { kind, path }));
}

fn convert_stat(s: &zk::Stat) -> Stat {
    Stat {
        czxid: s.czxid,
        mzxid: s.mzxid,
        pzxid: s.pzxid,
        ctime: s.ctime,
        mtime: s.mtime,
        version: s.version,
        cversion: s.cversion,
        ephemeral_owner: s.ephemeral_owner,
        data_length: s.data_length,
        num_children: s.num_children,
    }
}

fn zk_mode(mode: CreateMode) -> zk::CreateMode {
    match mode {
        CreateMode::Persistent => zk::CreateMode::Persistent,
        CreateMode::PersistentSequential => zk::CreateMode::PersistentSequential,
        CreateMode::Ephemeral => zk::CreateMode::Ephemeral,
        CreateMode::EphemeralSequential => zk::CreateMode::EphemeralSequential,
    }
}

fn expected(version: i32) -> Option<i32> {
    (version >= 0).then_some(version)
}

/// Maps the crate's error for an operation on `path`.
fn map_error(e: zk::Error, path: &str) -> CoordinationError {
    let path = path.to_string();
    match e {
        zk::Error::NoNode => CoordinationError::NoNode { path },
        zk::Error::NodeExists => CoordinationError::NodeExists { path },
        zk::Error::BadVersion => CoordinationError::BadVersion { path },
        zk::Error::NotEmpty => CoordinationError::NotEmpty { path },
        zk::Error::NoChildrenForEphemerals => CoordinationError::NoChildrenForEphemerals { path },
        zk::Error::SessionExpired => CoordinationError::SessionExpired,
        // `Custom` carries the crate's IO failures and "no response from connection" timeouts:
        // the connection is gone and the outcome of a write is unknown.
        zk::Error::ConnectionLoss
        | zk::Error::Timeout
        | zk::Error::NoHosts
        | zk::Error::Custom(_) => CoordinationError::ConnectionLoss,
        zk::Error::ClientClosed => CoordinationError::Closed,
        zk::Error::BadArguments(reason) => CoordinationError::BadArguments(reason.to_string()),
        other => CoordinationError::Backend(other.to_string()),
    }
}

/// One read's outcome: the data and metadata, or why not.
type Read = Result<(Vec<u8>, Stat), CoordinationError>;

/// Reads `paths` with one multi-read request (ZooKeeper 3.6+), one result per path; falls
/// back to single reads on a server without multi-read.
async fn multi_read(client: &zk::Client, paths: &[String]) -> Vec<Read> {
    let mut out: Vec<Option<Read>> = Vec::with_capacity(paths.len());
    let mut reader = client.new_multi_reader();
    let mut sent = Vec::with_capacity(paths.len());
    for (i, path) in paths.iter().enumerate() {
        let added = validate_path(path, false)
            .and_then(|()| reader.add_get_data(path).map_err(|e| map_error(e, path)));
        match added {
            Ok(()) => {
                out.push(None);
                sent.push(i);
            }
            Err(e) => out.push(Some(Err(e))),
        }
    }
    match reader.commit().await {
        Ok(results) if results.len() == sent.len() => {
            for (i, r) in sent.into_iter().zip(results) {
                let path = paths.get(i).map_or("", String::as_str);
                let r = match r {
                    zk::MultiReadResult::Data { data, stat } => Ok((data, convert_stat(&stat))),
                    zk::MultiReadResult::Error { err } => Err(map_error(err, path)),
                    other => Err(CoordinationError::Backend(format!(
                        "unexpected multi-read result {other:?}"
                    ))),
                };
                if let Some(slot) = out.get_mut(i) {
                    *slot = Some(r);
                }
            }
        }
        Ok(results) => {
            let e = CoordinationError::Backend(format!(
                "multi-read returned {} results for {} reads",
                results.len(),
                sent.len()
            ));
            for i in sent {
                if let Some(slot) = out.get_mut(i) {
                    *slot = Some(Err(e.clone()));
                }
            }
        }
        Err(zk::Error::Unimplemented) => {
            let singles = futures::future::join_all(sent.iter().map(|&i| {
                let path = paths.get(i).map_or("", String::as_str);
                async move {
                    client
                        .get_data(path)
                        .await
                        .map(|(data, stat)| (data, convert_stat(&stat)))
                        .map_err(|e| map_error(e, path))
                }
            }))
            .await;
            for (i, r) in sent.into_iter().zip(singles) {
                if let Some(slot) = out.get_mut(i) {
                    *slot = Some(r);
                }
            }
        }
        Err(e) => {
            let e = map_error(e, "");
            for i in sent {
                if let Some(slot) = out.get_mut(i) {
                    *slot = Some(Err(e.clone()));
                }
            }
        }
    }
    out.into_iter()
        .map(|r| r.unwrap_or(Err(CoordinationError::ConnectionLoss)))
        .collect()
}

fn validate_op(op: &Op) -> Result<(), CoordinationError> {
    match op {
        Op::Create { path, mode, .. } => validate_path(path, mode.is_sequential()),
        other => validate_path(other.path(), false),
    }
}

#[async_trait]
impl Coordination for ZooKeeperCoordination {
    fn session_id(&self) -> SessionId {
        self.inner.current().client.session_id().0
    }

    fn session_state(&self) -> SessionState {
        self.inner.current().state
    }

    fn events(&self) -> EventStream {
        let (tx, rx) = mpsc::unbounded();
        self.inner
            .subscribers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(tx);
        Box::pin(rx)
    }

    async fn create(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> Result<(String, Stat), CoordinationError> {
        validate_path(path, mode.is_sequential())?;
        if path == "/" && !mode.is_sequential() {
            return Err(CoordinationError::NodeExists {
                path: path.to_string(),
            });
        }
        let client = self.client();
        let options = zk_mode(mode).with_acls(zk::Acls::anyone_all());
        let (stat, sequence) = client
            .create(path, data, &options)
            .await
            .map_err(|e| map_error(e, path))?;
        let created = if mode.is_sequential() {
            format!("{path}{sequence}")
        } else {
            path.to_string()
        };
        Ok((created, convert_stat(&stat)))
    }

    async fn get_data(
        &self,
        path: &str,
        watch: bool,
    ) -> Result<(Vec<u8>, Stat), CoordinationError> {
        validate_path(path, false)?;
        let client = self.client();
        let reserved = if watch {
            self.reserve_watch(path, Slot::Data)
        } else {
            None
        };
        match reserved {
            None => {
                let (data, stat) = client
                    .get_data(path)
                    .await
                    .map_err(|e| map_error(e, path))?;
                Ok((data, convert_stat(&stat)))
            }
            Some((generation, id)) => match client.get_and_watch_data(path).await {
                Ok((data, stat, watcher)) => {
                    self.hand_over(generation, path, Slot::Data, id, watcher);
                    Ok((data, convert_stat(&stat)))
                }
                Err(e) => {
                    self.unreserve_watch(path, Slot::Data, id);
                    Err(map_error(e, path))
                }
            },
        }
    }

    async fn exists(&self, path: &str, watch: bool) -> Result<Option<Stat>, CoordinationError> {
        validate_path(path, false)?;
        let client = self.client();
        let reserved = if watch {
            self.reserve_watch(path, Slot::Data)
        } else {
            None
        };
        match reserved {
            None => {
                let stat = client
                    .check_stat(path)
                    .await
                    .map_err(|e| map_error(e, path))?;
                Ok(stat.as_ref().map(convert_stat))
            }
            Some((generation, id)) => match client.check_and_watch_stat(path).await {
                Ok((stat, watcher)) => {
                    self.hand_over(generation, path, Slot::Data, id, watcher);
                    Ok(stat.as_ref().map(convert_stat))
                }
                Err(e) => {
                    self.unreserve_watch(path, Slot::Data, id);
                    Err(map_error(e, path))
                }
            },
        }
    }

    async fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: i32,
    ) -> Result<Stat, CoordinationError> {
        validate_path(path, false)?;
        let client = self.client();
        let stat = client
            .set_data(path, data, expected(version))
            .await
            .map_err(|e| map_error(e, path))?;
        Ok(convert_stat(&stat))
    }

    async fn delete(&self, path: &str, version: i32) -> Result<(), CoordinationError> {
        validate_path(path, false)?;
        if path == "/" {
            return Err(CoordinationError::BadArguments(
                "cannot delete the root".into(),
            ));
        }
        let client = self.client();
        client
            .delete(path, expected(version))
            .await
            .map_err(|e| map_error(e, path))
    }

    async fn children(&self, path: &str, watch: bool) -> Result<Vec<String>, CoordinationError> {
        validate_path(path, false)?;
        let client = self.client();
        let reserved = if watch {
            self.reserve_watch(path, Slot::Child)
        } else {
            None
        };
        let mut children = match reserved {
            None => client
                .list_children(path)
                .await
                .map_err(|e| map_error(e, path))?,
            Some((generation, id)) => match client.list_and_watch_children(path).await {
                Ok((children, watcher)) => {
                    self.hand_over(generation, path, Slot::Child, id, watcher);
                    children
                }
                Err(e) => {
                    self.unreserve_watch(path, Slot::Child, id);
                    return Err(map_error(e, path));
                }
            },
        };
        children.sort_unstable();
        Ok(children)
    }

    async fn get_data_many(
        &self,
        paths: &[String],
    ) -> Vec<Result<(Vec<u8>, Stat), CoordinationError>> {
        let client = self.client();
        // Every batch in flight at once on the one session (pipelined multi-reads).
        let batches = paths
            .chunks(MULTI_READ_BATCH)
            .map(|chunk| multi_read(&client, chunk));
        futures::future::join_all(batches)
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    async fn sync(&self, path: &str) -> Result<(), CoordinationError> {
        validate_path(path, false)?;
        let client = self.client();
        client.sync(path).await.map_err(|e| map_error(e, path))
    }

    async fn multi(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, CoordinationError> {
        for (index, op) in ops.iter().enumerate() {
            validate_op(op).map_err(|error| CoordinationError::MultiOpFailed {
                index,
                error: Box::new(error),
            })?;
        }
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        let client = self.client();
        let mut writer = client.new_multi_writer();
        let acls = zk::Acls::anyone_all();
        for (index, op) in ops.iter().enumerate() {
            let added = match op {
                Op::Check { path, version } => writer.add_check_version(path, *version),
                Op::Create { path, data, mode } => {
                    writer.add_create(path, data, &zk_mode(*mode).with_acls(acls))
                }
                Op::SetData {
                    path,
                    data,
                    version,
                } => writer.add_set_data(path, data, expected(*version)),
                Op::Delete { path, version } => writer.add_delete(path, expected(*version)),
            };
            added.map_err(|e| CoordinationError::MultiOpFailed {
                index,
                error: Box::new(map_error(e, op.path())),
            })?;
        }
        let results = match writer.commit().await {
            Ok(results) => results,
            Err(zk::MultiWriteError::OperationFailed { index, source }) => {
                let path = ops.get(index).map(Op::path).unwrap_or("");
                return Err(CoordinationError::MultiOpFailed {
                    index,
                    error: Box::new(map_error(source, path)),
                });
            }
            Err(zk::MultiWriteError::RequestFailed { source }) => {
                return Err(map_error(source, ""))
            }
        };
        results
            .into_iter()
            .map(|r| match r {
                zk::MultiWriteResult::Check => Ok(OpResult::Check),
                zk::MultiWriteResult::Delete => Ok(OpResult::Delete),
                zk::MultiWriteResult::Create { path, .. } => Ok(OpResult::Create { path }),
                zk::MultiWriteResult::SetData { stat } => Ok(OpResult::SetData {
                    stat: convert_stat(&stat),
                }),
                other => Err(CoordinationError::Backend(format!(
                    "unexpected multi result {other:?}"
                ))),
            })
            .collect()
    }
}
