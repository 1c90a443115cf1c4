//! [`ZabEnsemble`]: n coordination servers (voters, and observers with
//! [`ZabEnsembleConfig::with_observers`]) in this process, each a Zab peer on the in-memory
//! mesh or loopback TCP with its own data directory (a segmented [`FileTxnLog`] with
//! snapshots, and a file election store) and znode state machine; clients bound to a server
//! ([`ZabEnsemble::connect`]); crashes and restarts ([`kill`](ZabEnsemble::kill),
//! [`kill_leader`](ZabEnsemble::kill_leader), [`restart`](ZabEnsemble::restart), which
//! reopens the server's data directory); and the conformance suite's harness.
//!
//! The data directories live in a temporary directory deleted with the ensemble, or under
//! [`ZabEnsembleConfig::with_data_dir`] (kept): `server.<sid>/log` and `server.<sid>/epochs`.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use async_trait::async_trait;
use ha_coordination::CoordinationCluster;
use ha_coordination::{Coordination, CoordinationError, SessionId, Stat};
use tokio::sync::mpsc;
use tracing::info;
use zab_core::discovery::Timing;
use zab_core::peer::{PeerConfig, QuorumPeer};
use zab_core::store::FileElectionStore;
use zab_core::transport::{MemoryNetwork, PeerAddrs, TcpConfig, TcpTransport};
use zab_core::txnlog::{FileTxnLog, FsyncPolicy};
use zab_core::{LearnerType, QuorumMaj, ServerEntry, ServerId};

use super::client::{ClientInner, ClientTimeouts, ZabCoordination};
use super::codec::TxnBody;
use super::server::{next_incarnation, ZabServer};
use super::state::{Outcome, SharedState, ZnodeMachine};

/// Why the ensemble could not start or restart a server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EnsembleError {
    /// The peer could not be built.
    #[error("server {sid}: {reason}")]
    Peer {
        /// The server.
        sid: i64,
        /// Why.
        reason: String,
    },
    /// No such server in the ensemble.
    #[error("no server {0}")]
    NoServer(i64),
    /// No leader was established in time.
    #[error("no established leader within {0:?}")]
    NoLeader(Duration),
    /// A server's data directory could not be opened.
    #[error("server {sid}: data directory: {reason}")]
    DataDir {
        /// The server.
        sid: i64,
        /// Why.
        reason: String,
    },
    /// The TCP ports could not be bound.
    #[error("binding loopback ports: {0}")]
    Bind(#[from] std::io::Error),
}

/// How the servers of a [`ZabEnsemble`] talk to each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum EnsembleTransport {
    /// The in-memory mesh of `zab-core` (no sockets).
    #[default]
    Memory,
    /// ZooKeeper-compatible election and quorum ports on loopback TCP.
    Tcp,
}

/// How to run a [`ZabEnsemble`]: [`ZabEnsembleConfig::default`] and the `with_*` setters.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ZabEnsembleConfig {
    /// The number of voting servers, sids 1..=n.
    pub servers: usize,
    /// The number of observers (non-voting servers that serve reads and forward writes,
    /// ZooKeeper's `peerType=observer`), sids n+1..=n+observers. Default 0.
    pub observers: usize,
    /// Where the servers keep their data directories (`server.<sid>/`); `None` (the
    /// default): a temporary directory deleted with the ensemble.
    pub data_dir: Option<PathBuf>,
    /// Zab timing. Default: tick 100 ms, initLimit 10, syncLimit 5 (a dead leader's followers
    /// give up on it within 0.5 s; a crashed one is noticed at once).
    pub timing: Timing,
    /// Client timeouts: the session timeout (default 6 s) and how long an operation may wait
    /// (default 5 s).
    pub client: ClientTimeouts,
    /// In-memory mesh (default) or loopback TCP.
    pub transport: EnsembleTransport,
}

impl Default for ZabEnsembleConfig {
    fn default() -> Self {
        Self {
            servers: 3,
            observers: 0,
            data_dir: None,
            timing: Timing::new(Duration::from_millis(100), 10, 5),
            client: ClientTimeouts::default(),
            transport: EnsembleTransport::Memory,
        }
    }
}

impl ZabEnsembleConfig {
    /// This configuration with `servers` voters, sids 1..=servers.
    #[must_use]
    pub fn with_servers(mut self, servers: usize) -> Self {
        self.servers = servers;
        self
    }

    /// This configuration with `observers` observers, sids after the voters'.
    #[must_use]
    pub fn with_observers(mut self, observers: usize) -> Self {
        self.observers = observers;
        self
    }

    /// This configuration keeping the servers' data directories under `dir` (created if
    /// missing; an existing one is reopened, so an ensemble can be restarted from it).
    #[must_use]
    pub fn with_data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }

    /// This configuration with another Zab timing.
    #[must_use]
    pub fn with_timing(mut self, timing: Timing) -> Self {
        self.timing = timing;
        self
    }

    /// This configuration with other client timeouts.
    #[must_use]
    pub fn with_client(mut self, client: ClientTimeouts) -> Self {
        self.client = client;
        self
    }

    /// This configuration with another transport between the servers.
    #[must_use]
    pub fn with_transport(mut self, transport: EnsembleTransport) -> Self {
        self.transport = transport;
        self
    }
}

/// The network between the servers.
enum Net {
    Memory(MemoryNetwork),
    Tcp(HashMap<ServerId, PeerAddrs>),
}

/// The running servers, by sid (the clients look here for another server).
#[derive(Debug, Default)]
pub(crate) struct Directory {
    servers: Mutex<BTreeMap<ServerId, Arc<ZabServer>>>,
}

impl Directory {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<ServerId, Arc<ZabServer>>> {
        self.servers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The live servers in the order a client moving off `current` tries them: the ones after
    /// it (wrapping), itself last; shifted by `round` so retries spread.
    pub(crate) fn servers_from(&self, current: ServerId, round: usize) -> Vec<Arc<ZabServer>> {
        let all: Vec<Arc<ZabServer>> = self.lock().values().cloned().collect();
        if all.is_empty() {
            return all;
        }
        let pos = all
            .iter()
            .position(|s| s.sid() == current)
            .unwrap_or(all.len() - 1);
        let n = all.len();
        (1..=n)
            .map(|i| all[(pos + i + round) % n].clone())
            .filter(|s| s.is_alive())
            .collect()
    }

    fn get(&self, sid: ServerId) -> Option<Arc<ZabServer>> {
        self.lock().get(&sid).cloned()
    }
}

/// What survives a server's crash: its data directory (log, snapshots, election store).
#[derive(Debug, Clone)]
struct Disk {
    dir: PathBuf,
    observer: bool,
}

/// A coordination service of n in-process Zab servers (see the module docs).
///
/// ```no_run
/// use ha_coordination::{Coordination, CreateMode};
/// use zab_coordination::ZabEnsemble;
/// use zab_core::ServerId;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let ensemble = ZabEnsemble::start(3).await?;
/// let a = ensemble.connect(ServerId(1)).await?;
/// let b = ensemble.connect(ServerId(2)).await?;
/// a.create("/brokers", b"", CreateMode::Persistent).await?;
/// b.sync("/brokers").await?;
/// assert!(b.exists("/brokers", false).await?.is_some());
/// ensemble.kill_leader().await; // the clients carry on once a new leader is established
/// # Ok(()) }
/// ```
pub struct ZabEnsemble {
    cfg: ZabEnsembleConfig,
    net: Net,
    quorum: Arc<QuorumMaj>,
    disks: BTreeMap<ServerId, Disk>,
    /// The temporary directory holding the data directories, unless one was given.
    _temp: Option<tempfile::TempDir>,
    dir: Arc<Directory>,
    clients: Mutex<Vec<Weak<ClientInner>>>,
    next_server: AtomicUsize,
}

impl std::fmt::Debug for ZabEnsemble {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZabEnsemble")
            .field("servers", &self.cfg.servers)
            .field("observers", &self.cfg.observers)
            .field("leader", &self.leader())
            .finish()
    }
}

impl ZabEnsemble {
    /// Starts `n` servers with the default configuration and waits for an established leader.
    pub async fn start(n: usize) -> Result<ZabEnsemble, EnsembleError> {
        Self::start_with(ZabEnsembleConfig::default().with_servers(n)).await
    }

    /// Starts the servers of `cfg` and waits (up to 10 s) for an established leader.
    pub async fn start_with(cfg: ZabEnsembleConfig) -> Result<ZabEnsemble, EnsembleError> {
        let voters = cfg.servers as i64;
        let ids: Vec<i64> = (1..=voters + cfg.observers as i64).collect();
        let (net, quorum) = match cfg.transport {
            EnsembleTransport::Memory => (
                Net::Memory(MemoryNetwork::new()),
                QuorumMaj::with_ids(
                    ids.iter().copied().filter(|i| *i <= voters),
                    ids.iter().copied().filter(|i| *i > voters),
                ),
            ),
            EnsembleTransport::Tcp => {
                let addrs = free_loopback_ports(&ids).await?;
                let members = addrs
                    .iter()
                    .map(|(sid, a)| {
                        let addr = format!("127.0.0.1:{}:{}", a.quorum.port(), a.election.port());
                        let entry = if sid.0 > voters {
                            ServerEntry::observer(addr)
                        } else {
                            ServerEntry::participant(addr)
                        };
                        (*sid, entry)
                    })
                    .collect();
                (Net::Tcp(addrs), QuorumMaj::new(members, 0))
            }
        };
        let (root, temp) = match &cfg.data_dir {
            Some(d) => (d.clone(), None),
            None => {
                let t = tempfile::Builder::new().prefix("zab-ensemble").tempdir()?;
                (t.path().to_path_buf(), Some(t))
            }
        };
        let disks = ids
            .iter()
            .map(|i| {
                let disk = Disk {
                    dir: root.join(format!("server.{i}")),
                    observer: *i > voters,
                };
                (ServerId(*i), disk)
            })
            .collect();
        let ensemble = ZabEnsemble {
            cfg,
            net,
            quorum: Arc::new(quorum),
            disks,
            _temp: temp,
            dir: Arc::new(Directory::default()),
            clients: Mutex::new(Vec::new()),
            next_server: AtomicUsize::new(0),
        };
        for sid in ids {
            ensemble.start_server(ServerId(sid)).await?;
        }
        ensemble.wait_for_leader(Duration::from_secs(10)).await?;
        Ok(ensemble)
    }

    async fn start_server(&self, sid: ServerId) -> Result<(), EnsembleError> {
        let disk = self.disks.get(&sid).ok_or(EnsembleError::NoServer(sid.0))?;
        let peer_err = |e: &dyn std::fmt::Display| EnsembleError::Peer {
            sid: sid.0,
            reason: e.to_string(),
        };
        // A server killed a moment ago may still be dropping its log: wait until it let go
        // of its files before reopening them.
        let old = self.dir.get(sid);
        if let Some(old) = old {
            old.kill();
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            while !old.is_stopped() && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        let disk_err = |e: &dyn std::fmt::Display| EnsembleError::DataDir {
            sid: sid.0,
            reason: e.to_string(),
        };
        let learner_type = if disk.observer {
            LearnerType::Observer
        } else {
            LearnerType::Participant
        };
        let mut pc = PeerConfig::new(sid, learner_type, self.quorum.clone());
        pc.timing = self.cfg.timing;
        let (closed_tx, closed_rx) = mpsc::unbounded_channel();
        let state = SharedState::new(next_incarnation(), closed_tx);
        let log = Box::new(
            FileTxnLog::open(disk.dir.join("log"), FsyncPolicy::EveryAppend)
                .map_err(|e| disk_err(&e))?,
        );
        let epochs = disk.dir.join("epochs");
        let store = if epochs.exists() {
            FileElectionStore::open(epochs)
        } else {
            FileElectionStore::create_fresh(epochs)
        }
        .map_err(|e| disk_err(&e))?;
        let sm = Box::new(ZnodeMachine(state.clone()));
        let peer = match &self.net {
            Net::Memory(net) => QuorumPeer::new(pc, net.endpoint(sid), store)
                .await
                .map_err(|e| peer_err(&e))?
                .with_replication(log, sm)
                .map_err(|e| peer_err(&e))?
                .spawn(),
            Net::Tcp(addrs) => {
                let own = addrs.get(&sid).ok_or(EnsembleError::NoServer(sid.0))?;
                let t = TcpTransport::bind(
                    TcpConfig::new(sid, own.election, addrs.clone()),
                    own.election,
                    own.quorum,
                )
                .await?;
                QuorumPeer::new(pc, t, store)
                    .await
                    .map_err(|e| peer_err(&e))?
                    .with_replication(log, sm)
                    .map_err(|e| peer_err(&e))?
                    .spawn()
            }
        };
        let server = ZabServer::new(peer, state, closed_rx);
        if let Some(old) = self.dir.lock().insert(sid, server) {
            old.kill();
        }
        Ok(())
    }

    /// Waits up to `timeout` for a leader of an established epoch; returns its sid.
    pub async fn wait_for_leader(&self, timeout: Duration) -> Result<ServerId, EnsembleError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(l) = self.leader() {
                return Ok(l);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(EnsembleError::NoLeader(timeout));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The live server leading an established epoch, if any.
    pub fn leader(&self) -> Option<ServerId> {
        self.dir
            .lock()
            .values()
            .find(|s| s.is_alive() && s.status().is_established_leader())
            .map(|s| s.sid())
    }

    /// The sids of the observers (after the voters').
    pub fn observers(&self) -> Vec<ServerId> {
        self.disks
            .iter()
            .filter(|(_, d)| d.observer)
            .map(|(s, _)| *s)
            .collect()
    }

    /// Server `sid`'s data directory.
    pub fn data_dir(&self, sid: ServerId) -> Option<PathBuf> {
        self.disks.get(&sid).map(|d| d.dir.clone())
    }

    /// The sids of the live servers.
    pub fn live_servers(&self) -> Vec<ServerId> {
        self.dir
            .lock()
            .values()
            .filter(|s| s.is_alive())
            .map(|s| s.sid())
            .collect()
    }

    /// A new client with a new session, bound to server `sid` (it moves to another server,
    /// keeping its session, if that one dies).
    pub async fn connect(&self, sid: ServerId) -> Result<Arc<dyn Coordination>, CoordinationError> {
        Ok(self.connect_client(sid).await?)
    }

    /// As [`connect`](Self::connect), returning the concrete client.
    pub async fn connect_client(
        &self,
        sid: ServerId,
    ) -> Result<Arc<ZabCoordination>, CoordinationError> {
        let server = self
            .dir
            .get(sid)
            .filter(|s| s.is_alive())
            .ok_or(CoordinationError::ConnectionLoss)?;
        let (client, weak) =
            ZabCoordination::connect(self.dir.clone(), server, self.cfg.client).await?;
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        clients.retain(|c| c.strong_count() > 0);
        clients.push(weak);
        Ok(Arc::new(client))
    }

    /// A new client bound to the next live server in turn (clients spread over the servers).
    pub async fn connect_spread(&self) -> Result<Arc<dyn Coordination>, CoordinationError> {
        let live = self.live_servers();
        if live.is_empty() {
            return Err(CoordinationError::ConnectionLoss);
        }
        let i = self.next_server.fetch_add(1, Ordering::Relaxed);
        self.connect(live[i % live.len()]).await
    }

    /// Crashes server `sid`: its peer stops, its clients move to other servers. False if it
    /// was not running.
    pub fn kill(&self, sid: ServerId) -> bool {
        match self.dir.get(sid) {
            Some(s) if s.is_alive() => {
                info!(sid = sid.0, "killing server");
                s.kill();
                // Over TCP the stopped peer's sockets close with it.
                if let Net::Memory(net) = &self.net {
                    net.crash(sid);
                }
                true
            }
            _ => false,
        }
    }

    /// Cuts server `sid` off from every other server (in-memory mesh only; false over TCP).
    /// It keeps running: it loses its leader (or its quorum) and stops serving.
    pub fn isolate(&self, sid: ServerId) -> bool {
        match &self.net {
            Net::Memory(net) => {
                net.isolate(sid);
                true
            }
            Net::Tcp(_) => false,
        }
    }

    /// Restores every link cut by [`isolate`](Self::isolate).
    pub fn heal(&self) {
        if let Net::Memory(net) = &self.net {
            net.heal();
        }
    }

    /// Crashes the current leader (waiting up to 10 s for one); returns its sid.
    pub async fn kill_leader(&self) -> Option<ServerId> {
        let l = self.wait_for_leader(Duration::from_secs(10)).await.ok()?;
        self.kill(l).then_some(l)
    }

    /// Restarts server `sid` from its log and election store (after [`kill`](Self::kill); a
    /// running server is crashed first). It rejoins and catches up by Zab synchronisation.
    pub async fn restart(&self, sid: ServerId) -> Result<(), EnsembleError> {
        self.kill(sid);
        self.start_server(sid).await
    }

    /// Runs `f` on server `sid`'s replica of the tree (for checks: every server must agree).
    pub fn inspect<T>(
        &self,
        sid: ServerId,
        f: impl FnOnce(&ha_coordination::ZnodeTree) -> T,
    ) -> Option<T> {
        let s = self.dir.get(sid).filter(|s| s.is_alive())?;
        let st = s.state.lock();
        Some(f(&st.tree))
    }

    /// The node's stat on server `sid`'s replica (`None` inside when missing).
    pub fn stat_on(&self, sid: ServerId, path: &str) -> Option<Option<Stat>> {
        self.inspect(sid, |t| t.stat(path))
    }

    /// Whether session `session` is open on server `sid`'s replica.
    pub fn session_open_on(&self, sid: ServerId, session: SessionId) -> Option<bool> {
        let s = self.dir.get(sid).filter(|s| s.is_alive())?;
        let open = s.state.lock().sessions.contains_key(&session);
        Some(open)
    }

    fn client_of(&self, session: SessionId) -> Option<Arc<ClientInner>> {
        self.clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(Weak::upgrade)
            .find(|c| c.session() == session)
    }

    /// Expires `session` now, as the leader does when it times out: a committed
    /// `CloseSession` deletes its ephemerals on every server; its client reports `Expired`,
    /// then `Connected` with a new session.
    pub async fn expire(&self, session: SessionId) -> Result<(), CoordinationError> {
        let mut last = CoordinationError::ConnectionLoss;
        for sid in self.live_servers() {
            let Some(s) = self.dir.get(sid) else { continue };
            match s
                .write(TxnBody::CloseSession { session }, self.cfg.client.operation)
                .await
            {
                Ok((Outcome::Closed, _)) => return Ok(()),
                Ok(_) => return Err(CoordinationError::Backend("unexpected outcome".into())),
                Err(e) => last = e,
            }
        }
        Err(last)
    }
}

impl Drop for ZabEnsemble {
    fn drop(&mut self) {
        for s in self.dir.lock().values() {
            s.kill();
        }
    }
}

#[async_trait]
impl CoordinationCluster for ZabEnsemble {
    /// A client on the next server in turn: the suite's clients are spread over the ensemble.
    async fn connect(&self) -> Result<Arc<dyn Coordination>, CoordinationError> {
        self.connect_spread().await
    }

    async fn expire(&self, session: SessionId) -> Result<(), CoordinationError> {
        ZabEnsemble::expire(self, session).await
    }

    async fn disconnect(&self, session: SessionId) -> Result<bool, CoordinationError> {
        Ok(self.client_of(session).is_some_and(|c| c.disconnect()))
    }

    async fn reconnect(&self, session: SessionId) -> Result<(), CoordinationError> {
        if let Some(c) = self.client_of(session) {
            c.reconnect();
        }
        Ok(())
    }
}

/// Election and quorum ports on loopback for each server: bound to port 0 to learn free ports,
/// then released for the servers to bind (a restarted server binds the same ones again).
async fn free_loopback_ports(ids: &[i64]) -> std::io::Result<HashMap<ServerId, PeerAddrs>> {
    let mut held = Vec::new();
    let mut addrs = HashMap::new();
    for sid in ids {
        let e = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let q = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        addrs.insert(
            ServerId(*sid),
            PeerAddrs {
                election: e.local_addr()?,
                quorum: q.local_addr()?,
            },
        );
        held.push((e, q));
    }
    drop(held);
    Ok(addrs)
}
