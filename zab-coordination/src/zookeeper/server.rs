//! [`ZkServer`]: one server of a ZooKeeper-compatible ensemble — a `zab-core`
//! [`QuorumPeer`] with a file transaction log and ZooKeeper's data tree as its state machine
//! ([`ZkMachine`]), serving ZooKeeper's client protocol on the client port.
//!
//! Each accepted connection is served by [`connection`](super::connection). Besides the
//! connections the server runs its housekeeping: while its peer leads an established epoch it
//! tracks every open session (a new leader loads them from its database, as ZooKeeper's does),
//! closes the sessions the tracker expires through a committed `closeSession`, and deletes
//! empty containers and expired TTL nodes (ZooKeeper's `ContainerManager`); on every server it
//! stops tracking sessions once their close is applied.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};
use zab_core::discovery::Timing;
use zab_core::peer::{PeerConfig, PeerHandle, PeerStatus, QuorumPeer};
use zab_core::store::FileElectionStore;
use zab_core::transport::{MemoryNetwork, PeerAddrs, TcpConfig, TcpTransport};
use zab_core::txnlog::{FileTxnLog, FileTxnLogOptions, FsyncPolicy, SnapshotPolicy};
use zab_core::{LearnerType, QuorumMaj, ServerEntry, ServerId};

use super::config::ZkConfig;
use super::machine::{ZkMachine, ZkShared, ZkState};
use super::sessions::{SessionIds, TimeoutLimits};
use super::txn::{validate_payload, TxnBody, TxnOp, ZkTxn};

/// How often the leader looks for empty containers and expired TTL nodes (ZooKeeper's
/// `znode.container.checkIntervalMs`, 60 s by default; `zoo.cfg` may set it under that key).
const DEFAULT_CONTAINER_CHECK: Duration = Duration::from_secs(60);
/// How many containers / TTL nodes the leader deletes per check at most (ZooKeeper's
/// `znode.container.maxPerMinute`, 10 000 by default).
const MAX_REAPED_PER_CHECK: usize = 10_000;

/// Why a server could not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// A configuration the server cannot run with.
    #[error("configuration: {0}")]
    Config(String),
    /// The data directory could not be used.
    #[error("data directory {dir}: {reason}")]
    DataDir {
        /// The directory.
        dir: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// A port could not be bound or an address not resolved.
    #[error("network: {0}")]
    Io(#[from] std::io::Error),
    /// The ZAB peer could not start or stopped.
    #[error("peer: {0}")]
    Peer(String),
}

/// Counters of the server for the four-letter words (`srvr`, `stat`, `mntr`).
#[derive(Debug, Default)]
pub struct ServerCounters {
    /// Packets received from clients.
    pub received: AtomicU64,
    /// Packets sent to clients.
    pub sent: AtomicU64,
    /// Requests answered (for the average latency).
    pub answered: AtomicU64,
    /// Sum of the request latencies, µs.
    pub latency_total_us: AtomicU64,
    /// Smallest request latency, µs (`u64::MAX` before the first).
    pub latency_min_us: AtomicU64,
    /// Largest request latency, µs.
    pub latency_max_us: AtomicU64,
    /// Size of the last transaction proposed here, bytes (-1 before any).
    pub proposal_last: AtomicI64,
    /// Smallest transaction proposed here.
    pub proposal_min: AtomicI64,
    /// Largest transaction proposed here.
    pub proposal_max: AtomicI64,
    /// When this server last became the established leader, ms since the epoch (0: not
    /// leading).
    pub led_since_ms: AtomicI64,
}

impl ServerCounters {
    fn new() -> ServerCounters {
        ServerCounters {
            proposal_last: AtomicI64::new(-1),
            proposal_min: AtomicI64::new(-1),
            proposal_max: AtomicI64::new(-1),
            ..ServerCounters::default()
        }
    }

    fn record_proposal(&self, len: usize) {
        let len = len as i64;
        self.proposal_last.store(len, Ordering::Relaxed);
        self.proposal_max.fetch_max(len, Ordering::Relaxed);
        let min = self.proposal_min.load(Ordering::Relaxed);
        if min < 0 || len < min {
            self.proposal_min.store(len, Ordering::Relaxed);
        }
    }
}

impl ServerCounters {
    /// Records one answered request that took `us` microseconds.
    pub fn record_latency(&self, us: u64) {
        self.answered.fetch_add(1, Ordering::Relaxed);
        self.latency_total_us.fetch_add(us, Ordering::Relaxed);
        self.latency_max_us.fetch_max(us, Ordering::Relaxed);
        if self.latency_min_us.load(Ordering::Relaxed) == 0
            && self.answered.load(Ordering::Relaxed) == 1
        {
            self.latency_min_us.store(us, Ordering::Relaxed);
        } else {
            self.latency_min_us.fetch_min(us, Ordering::Relaxed);
        }
    }
}

/// What the `cons` word reports of one connection.
#[derive(Debug, Clone, Default)]
pub struct ConnectionInfo {
    /// The client's address.
    pub remote: Option<SocketAddr>,
    /// Its session, once established.
    pub session: i64,
    /// Negotiated timeout, ms.
    pub timeout: i32,
    /// Packets received on it.
    pub received: u64,
    /// Packets sent on it.
    pub sent: u64,
    /// Requests waiting for their answer.
    pub queued: u64,
    /// The last operation's short name (ZooKeeper's `lastOp`, e.g. `GETD`).
    pub last_op: &'static str,
    /// The last request's xid.
    pub last_cxid: i32,
    /// The zxid of the last answer.
    pub last_zxid: i64,
    /// The last request's latency, ms.
    pub last_latency_ms: u64,
    /// When the connection was accepted, ms since the epoch.
    pub established_ms: i64,
}

/// Everything the connections of a server share.
#[derive(Debug)]
pub struct ServerCtx {
    /// This server's id.
    pub sid: i64,
    /// The ZAB peer.
    pub peer: PeerHandle,
    /// The peer's status.
    pub status: watch::Receiver<PeerStatus>,
    /// The replicated tree and sessions, and this server's watches and sinks.
    pub state: ZkShared,
    /// This server incarnation's id in transaction origins.
    pub incarnation: u64,
    /// Session timeout limits.
    pub limits: TimeoutLimits,
    /// Session ids of sessions created here.
    pub ids: Mutex<SessionIds>,
    /// The configuration.
    pub config: ZkConfig,
    /// Counters for the four-letter words.
    pub counters: ServerCounters,
    /// The open connections (for `cons` and `maxClientCnxns`).
    pub connections: Mutex<HashMap<u64, Arc<Mutex<ConnectionInfo>>>>,
    /// The next connection id.
    pub next_connection: AtomicU64,
    /// When the server started, ms since the epoch.
    pub started_ms: i64,
}

impl ServerCtx {
    /// Whether the peer serves an established epoch (ZooKeeper's server is "running").
    pub fn serving(&self) -> bool {
        self.status.borrow().epoch.is_some()
    }

    /// Proposes a transaction; `false` when the peer did not take it (not serving, full, or
    /// larger than `jute.maxbuffer`).
    pub fn propose(&self, txn: &ZkTxn) -> bool {
        let bytes = txn.encode();
        self.counters.record_proposal(bytes.len());
        self.peer.propose(bytes::Bytes::from(bytes))
    }

    /// The state, locked (a poisoned lock is recovered: the state is only changed by complete
    /// applies).
    pub fn lock(&self) -> std::sync::MutexGuard<'_, ZkState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The largest packet a client may send: `jute.maxbuffer` (0xfffff by default, as
    /// ZooKeeper's `NIOServerCnxn` checks a frame's length).
    pub fn max_packet(&self) -> usize {
        self.config.jute_max_buffer as usize
    }

    /// Connections open from the client address `ip`.
    pub fn connections_from(&self, ip: std::net::IpAddr) -> usize {
        self.connections
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .filter(|c| {
                c.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .remote
                    .map(|r| r.ip())
                    == Some(ip)
            })
            .count()
    }
}

/// Milliseconds since the Unix epoch from the wall clock.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A running ZooKeeper-compatible server. Dropping it stops it.
#[derive(Debug)]
pub struct ZkServer {
    ctx: Arc<ServerCtx>,
    client_addr: SocketAddr,
    tasks: Vec<JoinHandle<()>>,
}

impl ZkServer {
    /// Starts the server `config` describes: opens (or creates) its data directories, starts
    /// its ZAB peer and binds its client port. It serves clients once its peer joins an
    /// established epoch.
    pub async fn start(config: ZkConfig) -> Result<ZkServer, ServerError> {
        let sid = config.server_id() as i64;
        let standalone = config.is_standalone();
        let timing = Timing::new(config.tick_time(), config.init_limit, config.sync_limit);
        let data_err = |dir: &PathBuf, e: &dyn std::fmt::Display| ServerError::DataDir {
            dir: dir.clone(),
            reason: e.to_string(),
        };
        let log_dir = config.data_log_dir.join("ha-zab").join("log");
        let epoch_dir = config.data_dir.join("ha-zab");
        std::fs::create_dir_all(&epoch_dir).map_err(|e| data_err(&epoch_dir, &e))?;
        // Purged after every snapshot, keeping autopurge.snapRetainCount snapshots (see
        // docs/zookeeper-server.md: autopurge.purgeInterval is not waited for).
        let log = FileTxnLog::open_with(
            &log_dir,
            FileTxnLogOptions::new()
                .with_fsync(FsyncPolicy::EveryAppend)
                .with_snap_retain_count(config.snap_retain_count as usize),
        )
        .map_err(|e| data_err(&log_dir, &e))?;
        let epochs = epoch_dir.join("epochs");
        let store = if epochs.exists() {
            FileElectionStore::open(&epochs)
        } else {
            FileElectionStore::create_fresh(&epochs)
        }
        .map_err(|e| data_err(&epochs, &e))?;
        let (closed_tx, closed_rx) = mpsc::unbounded_channel();
        let incarnation = rand::random::<u64>() | 1;
        let state: ZkShared = Arc::new(Mutex::new(ZkState::new(incarnation, closed_tx)));
        let machine = Box::new(ZkMachine(state.clone()));
        let snap = SnapshotPolicy::every(u64::from(config.snap_count.max(1)));

        let peer = if standalone {
            let quorum = Arc::new(QuorumMaj::with_ids([sid], []));
            let mut pc = PeerConfig::new(ServerId(sid), LearnerType::Participant, quorum)
                .with_request_validator(validate_payload);
            pc.timing = timing;
            let net = MemoryNetwork::new();
            QuorumPeer::new(pc, net.endpoint(ServerId(sid)), store)
                .await
                .map_err(|e| ServerError::Peer(e.to_string()))?
                .with_replication(Box::new(log), machine)
                .map_err(|e| ServerError::Peer(e.to_string()))?
                .with_snapshot_policy(snap)
                .spawn()
        } else {
            let mut members = BTreeMap::new();
            let mut addrs = HashMap::new();
            for (id, s) in config.servers.iter() {
                let line = format!("{}:{}:{}", s.host, s.quorum_port, s.election_port);
                let entry = if config.is_observer(*id) {
                    ServerEntry::observer(line)
                } else {
                    ServerEntry::participant(line)
                };
                members.insert(ServerId(*id as i64), entry);
                let quorum = resolve(&s.host, s.quorum_port).await?;
                let election = resolve(&s.host, s.election_port).await?;
                addrs.insert(ServerId(*id as i64), PeerAddrs { election, quorum });
            }
            let own = *addrs.get(&ServerId(sid)).ok_or_else(|| {
                ServerError::Config(format!("myid {sid} has no server.{sid} line"))
            })?;
            let observer = config.is_observer(sid as u64);
            let learner_type = if observer {
                LearnerType::Observer
            } else {
                LearnerType::Participant
            };
            let quorum = Arc::new(QuorumMaj::new(members, 0));
            let mut pc = PeerConfig::new(ServerId(sid), learner_type, quorum)
                .with_request_validator(validate_payload);
            pc.timing = timing;
            let t = TcpTransport::bind(
                TcpConfig::new(ServerId(sid), own.election, addrs),
                own.election,
                own.quorum,
            )
            .await?;
            QuorumPeer::new(pc, t, store)
                .await
                .map_err(|e| ServerError::Peer(e.to_string()))?
                .with_replication(Box::new(log), machine)
                .map_err(|e| ServerError::Peer(e.to_string()))?
                .with_snapshot_policy(snap)
                .spawn()
        };
        let mut peer = peer;
        let expiries = peer.take_session_expiries();
        let status = peer.status();
        let client = config
            .client_address()
            .ok_or_else(|| ServerError::Config("no clientPort".into()))?;
        let listener = TcpListener::bind((client.host.as_str(), client.port)).await?;
        let client_addr = listener.local_addr()?;
        let started_ms = now_ms();
        let ctx = Arc::new(ServerCtx {
            sid,
            peer,
            status,
            state,
            incarnation,
            limits: TimeoutLimits {
                min: config.min_session_timeout(),
                max: config.max_session_timeout(),
            },
            ids: Mutex::new(SessionIds::new(sid, started_ms)),
            counters: ServerCounters::new(),
            connections: Mutex::new(HashMap::new()),
            next_connection: AtomicU64::new(1),
            started_ms,
            config,
        });
        info!(sid, client = %client_addr, standalone, "ha-zookeeper server started");
        let tasks = vec![
            tokio::spawn(accept_loop(ctx.clone(), listener)),
            tokio::spawn(housekeeping(ctx.clone(), expiries, closed_rx)),
        ];
        Ok(ZkServer {
            ctx,
            client_addr,
            tasks,
        })
    }

    /// The address the client port is bound to.
    pub fn client_addr(&self) -> SocketAddr {
        self.client_addr
    }

    /// The shared context (peer, state, counters).
    pub fn ctx(&self) -> &Arc<ServerCtx> {
        &self.ctx
    }

    /// Stops the server as a crash would (no session is closed) and waits until its peer let
    /// go of its data directories, so that a server can be started on them again.
    pub async fn crash(self) {
        for t in &self.tasks {
            t.abort();
        }
        self.ctx.peer.kill();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !self.ctx.peer.is_finished() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Waits until the peer ends (it stops only on a fatal error of its store or log).
    pub async fn wait(&self) {
        let mut status = self.ctx.status.clone();
        while status.changed().await.is_ok() {}
    }
}

impl Drop for ZkServer {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        self.ctx.peer.kill();
    }
}

async fn resolve(host: &str, port: u16) -> Result<SocketAddr, ServerError> {
    tokio::net::lookup_host((host, port))
        .await?
        .next()
        .ok_or_else(|| ServerError::Config(format!("{host}:{port} does not resolve")))
}

async fn accept_loop(ctx: Arc<ServerCtx>, listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, remote)) => {
                let max = ctx.config.max_client_cnxns as usize;
                if max > 0 && ctx.connections_from(remote.ip()) >= max {
                    warn!(
                        sid = ctx.sid,
                        client = %remote,
                        max,
                        "too many connections from this address (maxClientCnxns): closing"
                    );
                    continue;
                }
                let _ = stream.set_nodelay(true);
                tokio::spawn(super::connection::serve(ctx.clone(), stream, remote));
            }
            Err(e) => {
                warn!(sid = ctx.sid, error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// The server's background duties (see the module header).
async fn housekeeping(
    ctx: Arc<ServerCtx>,
    expiries: Option<mpsc::Receiver<i64>>,
    mut closed_rx: mpsc::UnboundedReceiver<i64>,
) {
    let mut status = ctx.status.clone();
    let mut expiries = expiries;
    let mut led_epoch = None;
    let check = ctx
        .config
        .unknown_value("znode.container.checkIntervalMs")
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_CONTAINER_CHECK);
    let mut reaper = tokio::time::interval(check.max(Duration::from_millis(10)));
    reaper.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let st = *status.borrow_and_update();
        if !st.is_established_leader() {
            ctx.counters.led_since_ms.store(0, Ordering::Relaxed);
        }
        if st.is_established_leader() && led_epoch != st.epoch {
            led_epoch = st.epoch;
            ctx.counters.led_since_ms.store(now_ms(), Ordering::Relaxed);
            let sessions: Vec<(i64, i32)> = ctx
                .lock()
                .db
                .sessions
                .iter()
                .map(|(id, s)| (*id, s.timeout))
                .collect();
            info!(
                sid = ctx.sid,
                sessions = sessions.len(),
                "leading: tracking sessions"
            );
            for (id, ms) in sessions {
                let _ = ctx
                    .peer
                    .touch_session(id, Duration::from_millis(ms.max(1) as u64));
            }
        }
        let expired = async {
            match expiries.as_mut() {
                Some(rx) => rx.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = status.changed() => if changed.is_err() { return },
            e = expired => match e {
                Some(session) => {
                    debug!(sid = ctx.sid, session, "closing expired session");
                    let txn = ZkTxn {
                        origin: 0,
                        session,
                        cxid: 0,
                        time: now_ms(),
                        auth: Vec::new(),
                        body: TxnBody::CloseSession,
                    };
                    if !ctx.propose(&txn) {
                        debug!(sid = ctx.sid, session, "close of an expired session not queued");
                    }
                }
                None => expiries = None,
            },
            c = closed_rx.recv() => match c {
                Some(session) => {
                    if !ctx.peer.end_session(session) {
                        debug!(sid = ctx.sid, session, "session end not queued");
                    }
                }
                None => return,
            },
            _ = reaper.tick() => {
                if ctx.status.borrow().is_established_leader() {
                    let now = now_ms();
                    let candidates = ctx.lock().db.tree.reap_candidates(now);
                    for path in candidates.into_iter().take(MAX_REAPED_PER_CHECK) {
                        debug!(sid = ctx.sid, path, "deleting an empty container or expired TTL node");
                        let txn = ZkTxn {
                            origin: 0,
                            session: 0,
                            cxid: 0,
                            time: now,
                            auth: Vec::new(),
                            body: TxnBody::Op(TxnOp::DeleteContainer { path }),
                        };
                        if !ctx.propose(&txn) {
                            break;
                        }
                    }
                }
            }
        }
    }
}

/// The version the four-letter words report: the ZooKeeper release whose protocol the server
/// speaks, then this crate's version.
pub fn server_version() -> String {
    format!(
        "3.8.0-ha-blocks-{}, built on n/a",
        env!("CARGO_PKG_VERSION")
    )
}

/// The answer to the four-letter word `word` (one of [`super::four_letter::KNOWN_WORDS`]), from the
/// server's current figures; an empty string closes the connection without an answer.
pub async fn four_letter_answer(ctx: &ServerCtx, word: &str) -> String {
    use super::four_letter::{
        self, BufferSizes, ConfSnapshot, ConnectionStats, LatencyStats, LeaderStats,
        ServerSnapshot, ServerState, SessionStats, WatchSummary,
    };
    let figures = ctx.peer.leader_figures().await;
    let status = *ctx.status.borrow();
    let state = if ctx.config.is_standalone() {
        ServerState::Standalone
    } else {
        match status.state {
            zab_core::ServerState::Leading => ServerState::Leader,
            zab_core::ServerState::Observing => ServerState::Observer,
            _ => ServerState::Follower,
        }
    };
    let mut snap = ServerSnapshot::new(
        server_version(),
        state,
        ConfSnapshot::from_config(&ctx.config, 0, 0),
    );
    snap.serving = ctx.serving();
    let c = &ctx.counters;
    let answered = c.answered.load(Ordering::Relaxed);
    let ms = |us: u64| us / 1000;
    snap.latency = LatencyStats::new(
        if answered == 0 {
            0
        } else {
            ms(c.latency_min_us.load(Ordering::Relaxed))
        },
        ms(c.latency_max_us.load(Ordering::Relaxed)),
        ms(c.latency_total_us.load(Ordering::Relaxed)),
        answered,
    );
    snap.packets_received = c.received.load(Ordering::Relaxed);
    snap.packets_sent = c.sent.load(Ordering::Relaxed);
    snap.uptime_ms = (now_ms() - ctx.started_ms).max(0) as u64;
    {
        let st = ctx.lock();
        snap.zxid = st.last_applied().0 as u64;
        snap.node_count = st.db.tree.node_count() as u64;
        snap.ephemerals_count = st.db.tree.ephemeral_count() as u64;
        snap.approximate_data_size = st.db.tree.approximate_data_size().max(0) as u64;
        snap.global_sessions = st.db.sessions.len() as u64;
        let w = st.watches.summary();
        snap.watch_count = w.watches as u64;
        snap.watches = WatchSummary {
            connections: w.sessions as u64,
            paths: w.paths as u64,
            total: w.watches as u64,
        };
    }
    if !ctx.config.is_standalone() {
        snap.quorum_size = Some(ctx.config.participants().count() as u64);
        // ZooKeeper's QuorumPeer.getDetailedPeerState.
        let phase = if status.epoch.is_some() {
            "broadcast"
        } else {
            "discovery"
        };
        snap.peer_state = Some(match status.state {
            zab_core::ServerState::Looking => "looking".to_string(),
            zab_core::ServerState::Leading => format!("leading - {phase}"),
            zab_core::ServerState::Following => format!("following - {phase}"),
            zab_core::ServerState::Observing => format!("observing - {phase}"),
        });
        if let (Some(f), ServerState::Leader) = (figures, state) {
            let since = c.led_since_ms.load(Ordering::Relaxed);
            let l = LeaderStats {
                learners: (f.synced_followers + f.synced_observers) as u64,
                synced_followers: f.synced_followers as u64,
                synced_observers: f.synced_observers as u64,
                pending_syncs: f.pending_syncs as u64,
                leader_uptime_ms: if since > 0 {
                    (now_ms() - since).max(0) as u64
                } else {
                    0
                },
                proposal_sizes: BufferSizes {
                    last: c.proposal_last.load(Ordering::Relaxed),
                    min: c.proposal_min.load(Ordering::Relaxed),
                    max: c.proposal_max.load(Ordering::Relaxed),
                },
                ..LeaderStats::default()
            };
            snap.leader = Some(l);
        }
    }
    let conns: Vec<ConnectionInfo> = ctx
        .connections
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .values()
        .map(|c| {
            c.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone()
        })
        .collect();
    snap.alive_connections = conns.len() as u64;
    snap.outstanding_requests = conns.iter().map(|c| c.queued).sum();
    snap.connections = conns
        .iter()
        .filter_map(|info| {
            let remote = info.remote?;
            let mut cs = ConnectionStats::new(remote);
            cs.interest_ops = 1;
            cs.queued = info.queued;
            cs.received = info.received;
            cs.sent = info.sent;
            if info.session != 0 {
                let mut s = SessionStats::new(
                    info.session as u64,
                    info.established_ms,
                    info.timeout.max(0) as u32,
                );
                s.last_op = if info.last_op.is_empty() {
                    "NA".into()
                } else {
                    info.last_op.to_string()
                };
                s.last_cxid = i64::from(info.last_cxid);
                s.last_zxid = info.last_zxid;
                s.last_latency = info.last_latency_ms;
                cs.session = Some(s);
            }
            Some(cs)
        })
        .collect();
    snap.environment = environment();
    snap.open_file_descriptors = std::fs::read_dir("/proc/self/fd")
        .ok()
        .map(|d| d.count() as u64);
    match four_letter::answer(word, &snap, &ctx.config.four_letter_whitelist) {
        four_letter::FourLetterAnswer::Reply(text) => text,
        _ => String::new(),
    }
}

/// `envi`'s lines, in the order of ZooKeeper's `Environment.list`; the Java properties a
/// process that is not a JVM does not have read `<NA>`.
fn environment() -> Vec<(String, String)> {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "<NA>".into())
    };
    let env = |k: &str| std::env::var(k).unwrap_or_else(|_| "<NA>".into());
    let na = || "<NA>".to_string();
    vec![
        ("zookeeper.version".into(), server_version()),
        ("host.name".into(), read("/proc/sys/kernel/hostname")),
        ("java.version".into(), na()),
        ("java.vendor".into(), na()),
        ("java.home".into(), na()),
        ("java.class.path".into(), na()),
        ("java.library.path".into(), na()),
        (
            "java.io.tmpdir".into(),
            std::env::temp_dir().display().to_string(),
        ),
        ("java.compiler".into(), na()),
        ("os.name".into(), std::env::consts::OS.to_string()),
        ("os.arch".into(), std::env::consts::ARCH.to_string()),
        ("os.version".into(), read("/proc/sys/kernel/osrelease")),
        ("user.name".into(), env("USER")),
        ("user.home".into(), env("HOME")),
        (
            "user.dir".into(),
            std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_else(|_| na()),
        ),
        ("os.memory.free".into(), na()),
        ("os.memory.max".into(), na()),
        ("os.memory.total".into(), na()),
    ]
}
