//! ZooKeeper's four-letter words (`ruok`, `srvr`, `stat`, `mntr`, `conf`, `cons`, `envi`,
//! `dirs`, `isro`, `wchs`): recognising one in the first four bytes of a connection, the
//! `4lw.commands.whitelist`, and the answers in ZooKeeper 3.8's exact text (its
//! `command/*Command` classes, `ServerStats.toString`, `ServerCnxn.dumpConnectionInfo`,
//! `ZooKeeperServer.dumpConf`).
//!
//! Pure: the server fills a [`ServerSnapshot`] with its current figures when a word is asked
//! and writes the text of [`answer`] to the connection, then closes it (as ZooKeeper does
//! after every four-letter word).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

use super::config::{PeerType, ZkConfig, ELECTION_ALG};

/// Every four-letter word ZooKeeper 3.8 knows (`FourLetterCommands.cmd2String`), by the
/// 4 bytes a client sends. `telnet close` is the control sequence telnet sends on close.
pub const KNOWN_WORDS: [([u8; 4], &str); 19] = [
    (*b"conf", "conf"),
    (*b"cons", "cons"),
    (*b"crst", "crst"),
    (*b"dirs", "dirs"),
    (*b"dump", "dump"),
    (*b"envi", "envi"),
    (*b"gtmk", "gtmk"),
    (*b"ruok", "ruok"),
    (*b"stmk", "stmk"),
    (*b"srst", "srst"),
    (*b"srvr", "srvr"),
    (*b"stat", "stat"),
    (*b"wchc", "wchc"),
    (*b"wchp", "wchp"),
    (*b"wchs", "wchs"),
    (*b"mntr", "mntr"),
    (*b"isro", "isro"),
    ([0xff, 0xf4, 0xff, 0xfd], "telnet close"),
    (*b"hash", "hash"),
];

/// The answer of the words that need a serving server while it does not serve (no quorum).
pub const NOT_SERVING: &str = "This ZooKeeper instance is not currently serving requests";

/// The four-letter word whose code is `first4`, the first 4 bytes of a new connection.
/// ZooKeeper reads them as the length of the first request unless they are one of
/// [`KNOWN_WORDS`], so a server asks this before treating them as a length.
pub fn is_four_letter_word(first4: [u8; 4]) -> Option<&'static str> {
    KNOWN_WORDS
        .iter()
        .find(|(code, _)| *code == first4)
        .map(|(_, word)| *word)
}

/// `4lw.commands.whitelist`: the words a server answers (ZooKeeper's
/// `FourLetterCommands.isEnabled`). `srvr` is always enabled (ZooKeeper's own scripts need
/// it); ZooKeeper also adds `isro` when `readonlymode.enabled` is set, a mode this server
/// does not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FourLetterWhitelist {
    words: BTreeSet<String>,
}

impl FourLetterWhitelist {
    /// ZooKeeper 3.8's whitelist when the key is absent: only `srvr`.
    pub fn zookeeper_default() -> FourLetterWhitelist {
        FourLetterWhitelist {
            words: BTreeSet::from(["srvr".to_string()]),
        }
    }

    /// Every known word (`4lw.commands.whitelist=*`).
    pub fn all() -> FourLetterWhitelist {
        FourLetterWhitelist {
            words: KNOWN_WORDS.iter().map(|(_, w)| (*w).to_string()).collect(),
        }
    }

    /// Parses the value of `4lw.commands.whitelist`: comma-separated words (trimmed, empty
    /// entries skipped); an entry `*` enables every known word. `srvr` is always added.
    pub fn parse(value: &str) -> FourLetterWhitelist {
        let mut words = BTreeSet::new();
        for entry in value.split(',').map(str::trim) {
            if entry == "*" {
                words.extend(KNOWN_WORDS.iter().map(|(_, w)| (*w).to_string()));
                break;
            }
            if !entry.is_empty() {
                words.insert(entry.to_string());
            }
        }
        words.insert("srvr".to_string());
        FourLetterWhitelist { words }
    }

    /// Whether `word` is answered.
    pub fn is_enabled(&self, word: &str) -> bool {
        self.words.contains(word)
    }

    /// The enabled words, sorted.
    pub fn words(&self) -> impl Iterator<Item = &str> {
        self.words.iter().map(String::as_str)
    }
}

impl Default for FourLetterWhitelist {
    fn default() -> Self {
        FourLetterWhitelist::zookeeper_default()
    }
}

/// The role a server reports (`Mode:` of `srvr`, `zk_server_state` of `mntr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerState {
    /// A single server without a quorum.
    Standalone,
    /// The quorum's leader.
    Leader,
    /// A follower.
    Follower,
    /// An observer.
    Observer,
}

impl ServerState {
    /// ZooKeeper's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerState::Standalone => "standalone",
            ServerState::Leader => "leader",
            ServerState::Follower => "follower",
            ServerState::Observer => "observer",
        }
    }
}

/// Request latencies in milliseconds (ZooKeeper's `AvgMinMaxCounter`): the minimum, maximum,
/// sum and count of the requests measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct LatencyStats {
    /// Smallest latency (0 before any request).
    pub min: u64,
    /// Largest latency.
    pub max: u64,
    /// Sum of all latencies.
    pub total: u64,
    /// Number of requests measured.
    pub count: u64,
}

impl LatencyStats {
    /// Latencies with these figures.
    pub fn new(min: u64, max: u64, total: u64, count: u64) -> LatencyStats {
        LatencyStats {
            min,
            max,
            total,
            count,
        }
    }

    /// The server-wide average as ZooKeeper computes it: total / count rounded half-up to 4
    /// decimals, 0 before any request.
    pub fn average(&self) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        // Half-up at the 4th decimal, in exact integer arithmetic. (ZooKeeper rounds the
        // double quotient, which can differ only at an exact tie the double misrepresents.)
        let scaled = (u128::from(self.total) * 20_000 / u128::from(self.count)).div_ceil(2);
        scaled as f64 / 10_000.0
    }
}

/// The session of a client connection, for `cons`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionStats {
    /// The session id.
    pub session_id: u64,
    /// The last operation answered (`NA` before any; ZooKeeper's short names such as
    /// `GETD`, `SETD`, `CREA`, `PING`, `SESS`).
    pub last_op: String,
    /// When the connection was established, in ms since the Unix epoch.
    pub established_ms: i64,
    /// Negotiated session timeout in ms.
    pub timeout_ms: u32,
    /// cxid of the last request (-1 before any: then not printed).
    pub last_cxid: i64,
    /// zxid of the last answer (-1 before any).
    pub last_zxid: i64,
    /// When the last answer was sent, in ms (0 before any).
    pub last_response_ms: i64,
    /// Latency of the last request in ms.
    pub last_latency: u64,
    /// This connection's request latencies.
    pub latency: LatencyStats,
}

impl SessionStats {
    /// Session `session_id` established at `established_ms` with this timeout, before any
    /// request (`lop=NA`, no cxid, zxid -1).
    pub fn new(session_id: u64, established_ms: i64, timeout_ms: u32) -> SessionStats {
        SessionStats {
            session_id,
            last_op: "NA".into(),
            established_ms,
            timeout_ms,
            last_cxid: -1,
            last_zxid: -1,
            last_response_ms: 0,
            last_latency: 0,
            latency: LatencyStats::default(),
        }
    }
}

/// One client connection, for `cons` and `stat`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionStats {
    /// The client's address.
    pub remote: SocketAddr,
    /// NIO interest ops (1 = read, 4 = write; printed in hex, 0 as `0`).
    pub interest_ops: u32,
    /// Requests of this connection not yet answered.
    pub queued: u64,
    /// Packets received from it.
    pub received: u64,
    /// Packets sent to it.
    pub sent: u64,
    /// Its session, once established (the details of `cons` are printed only then).
    pub session: Option<SessionStats>,
}

impl ConnectionStats {
    /// A connection from `remote` with no traffic yet and no session.
    pub fn new(remote: SocketAddr) -> ConnectionStats {
        ConnectionStats {
            remote,
            interest_ops: 1,
            queued: 0,
            received: 0,
            sent: 0,
            session: None,
        }
    }
}

/// ZooKeeper's `BufferStats`: last, minimum and maximum size in bytes, -1 before any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferSizes {
    /// Last size.
    pub last: i64,
    /// Smallest size.
    pub min: i64,
    /// Largest size.
    pub max: i64,
}

impl Default for BufferSizes {
    fn default() -> Self {
        BufferSizes {
            last: -1,
            min: -1,
            max: -1,
        }
    }
}

/// What only the leader reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct LeaderStats {
    /// Connected learners (followers and observers).
    pub learners: u64,
    /// Followers that have synced and receive proposals (`zk_synced_followers`).
    pub synced_followers: u64,
    /// Synced non-voting followers.
    pub synced_non_voting_followers: u64,
    /// Synced observers.
    pub synced_observers: u64,
    /// `sync` requests waiting for their commit.
    pub pending_syncs: u64,
    /// ms since this server became leader.
    pub leader_uptime_ms: u64,
    /// Sizes of the proposals sent.
    pub proposal_sizes: BufferSizes,
}

/// The quorum part of `conf` (ZooKeeper's `QuorumZooKeeperServer.dumpConf`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QuorumConf {
    /// `initLimit`.
    pub init_limit: u32,
    /// `syncLimit`.
    pub sync_limit: u32,
    /// `electionAlg` (always 3).
    pub election_alg: u32,
    /// This server's election port.
    pub election_port: u16,
    /// This server's quorum port.
    pub quorum_port: u16,
    /// This server's type.
    pub peer_type: PeerType,
    /// The membership lines and `version=` ([`ZkConfig::membership`]).
    pub membership: String,
}

/// The configuration `conf` prints (ZooKeeper's `ZooKeeperServer.dumpConf`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfSnapshot {
    /// Client port (-1 without one).
    pub client_port: i32,
    /// Secure client port (always -1 here: not supported).
    pub secure_client_port: i32,
    /// Absolute snapshot directory (ZooKeeper prints `<dataDir>/version-2`).
    pub data_dir: String,
    /// Bytes in the snapshot directory.
    pub data_dir_size: u64,
    /// Absolute transaction log directory (`<dataLogDir>/version-2`).
    pub data_log_dir: String,
    /// Bytes in the log directory.
    pub data_log_size: u64,
    /// `tickTime` in ms.
    pub tick_time_ms: u32,
    /// `maxClientCnxns`.
    pub max_client_cnxns: u32,
    /// Minimum session timeout in ms.
    pub min_session_timeout_ms: u32,
    /// Maximum session timeout in ms.
    pub max_session_timeout_ms: u32,
    /// The listen backlog of the client port (-1: the system's default).
    pub client_port_listen_backlog: i32,
    /// This server's id (0 when standalone).
    pub server_id: u64,
    /// The quorum part, in a quorum.
    pub quorum: Option<QuorumConf>,
}

impl ConfSnapshot {
    /// `conf` of a server run from `config`, with the sizes of its directories. The
    /// directories are printed as `config` has them plus `version-2`; give `config` absolute
    /// paths to print what ZooKeeper prints.
    pub fn from_config(config: &ZkConfig, data_dir_size: u64, data_log_size: u64) -> Self {
        let quorum = if config.is_distributed() {
            config
                .my_id
                .and_then(|id| config.servers.get(&id))
                .map(|me| QuorumConf {
                    init_limit: config.init_limit,
                    sync_limit: config.sync_limit,
                    election_alg: ELECTION_ALG,
                    election_port: me.election_port,
                    quorum_port: me.quorum_port,
                    peer_type: config.peer_type,
                    membership: config.membership(),
                })
        } else {
            None
        };
        ConfSnapshot {
            client_port: config.client_address().map_or(-1, |a| i32::from(a.port)),
            secure_client_port: -1,
            data_dir: config.data_dir.join("version-2").display().to_string(),
            data_dir_size,
            data_log_dir: config.data_log_dir.join("version-2").display().to_string(),
            data_log_size,
            tick_time_ms: config.tick_time_ms,
            max_client_cnxns: config.max_client_cnxns,
            min_session_timeout_ms: config.min_session_timeout_ms,
            max_session_timeout_ms: config.max_session_timeout_ms,
            client_port_listen_backlog: -1,
            server_id: if quorum.is_some() {
                config.my_id.unwrap_or(0)
            } else {
                0
            },
            quorum,
        }
    }
}

/// Data-watch totals for `wchs` (ZooKeeper's `WatchManager.toString` of the data watches).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct WatchSummary {
    /// Connections with at least one data watch.
    pub connections: u64,
    /// Watched paths.
    pub paths: u64,
    /// Watches (connection, path pairs).
    pub total: u64,
}

/// The figures a server fills in when a four-letter word is asked.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ServerSnapshot {
    /// Whether the server serves requests (standalone, or in a quorum). Otherwise most words
    /// answer [`NOT_SERVING`].
    pub serving: bool,
    /// The version string (`Zookeeper version:` and `zk_version`), e.g.
    /// `3.8.0-<build>, built on <date>`.
    pub version: String,
    /// The server's role.
    pub state: ServerState,
    /// The last processed zxid.
    pub zxid: u64,
    /// Server-wide request latencies.
    pub latency: LatencyStats,
    /// Packets received from clients.
    pub packets_received: u64,
    /// Packets sent to clients.
    pub packets_sent: u64,
    /// Open client connections (`Connections:`).
    pub alive_connections: u64,
    /// Requests queued and not yet answered.
    pub outstanding_requests: u64,
    /// Number of znodes.
    pub node_count: u64,
    /// Number of watches (data and child).
    pub watch_count: u64,
    /// Number of ephemeral znodes.
    pub ephemerals_count: u64,
    /// Sum of path lengths and data sizes of all znodes (ZooKeeper's
    /// `DataTree.approximateDataSize`).
    pub approximate_data_size: u64,
    /// Open file descriptors of the process (`None`: unknown, printed as -1).
    pub open_file_descriptors: Option<u64>,
    /// The process's file-descriptor limit (`None`: unknown, printed as -1).
    pub max_file_descriptors: Option<u64>,
    /// ms since the server started serving.
    pub uptime_ms: u64,
    /// Global sessions.
    pub global_sessions: u64,
    /// Local sessions (0: local sessions are not enabled).
    pub local_sessions: u64,
    /// The client connections, for `stat` and `cons`.
    pub connections: Vec<ConnectionStats>,
    /// The leader's figures (leader only).
    pub leader: Option<LeaderStats>,
    /// Voting members (`zk_quorum_size`; in a quorum only).
    pub quorum_size: Option<u64>,
    /// In a quorum, ZooKeeper's `QuorumPeer.getDetailedPeerState` (`zk_peer_state`):
    /// `leading - broadcast`, `following - broadcast`, `observing - broadcast` once synced.
    pub peer_state: Option<String>,
    /// An observer's learner master (`zk_observer_master_id`; observers only).
    pub observer_master_id: Option<i64>,
    /// Data-watch totals for `wchs`.
    pub watches: WatchSummary,
    /// What `conf` prints.
    pub conf: ConfSnapshot,
    /// `envi`'s `key=value` lines in order (ZooKeeper's `Environment.list`: `zookeeper.version`,
    /// `host.name`, `java.version`, ... `user.dir`, `os.memory.*`; a server that is not a JVM
    /// fills in what applies, e.g. `<NA>` for the Java keys).
    pub environment: Vec<(String, String)>,
}

impl ServerSnapshot {
    /// A serving server in `state` with the given version and `conf`, every figure zero, no
    /// connections and no environment.
    pub fn new(version: impl Into<String>, state: ServerState, conf: ConfSnapshot) -> Self {
        ServerSnapshot {
            serving: true,
            version: version.into(),
            state,
            zxid: 0,
            latency: LatencyStats::default(),
            packets_received: 0,
            packets_sent: 0,
            alive_connections: 0,
            outstanding_requests: 0,
            node_count: 0,
            watch_count: 0,
            ephemerals_count: 0,
            approximate_data_size: 0,
            open_file_descriptors: None,
            max_file_descriptors: None,
            uptime_ms: 0,
            global_sessions: 0,
            local_sessions: 0,
            connections: Vec::new(),
            leader: None,
            quorum_size: None,
            peer_state: None,
            observer_master_id: None,
            watches: WatchSummary::default(),
            conf,
            environment: Vec::new(),
        }
    }
}

/// What the server does with a four-letter word.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FourLetterAnswer {
    /// Write this text, then close the connection.
    Reply(String),
    /// A word ZooKeeper knows that this server does not answer (`dump`, `crst`, `srst`,
    /// `gtmk`, `stmk`, `wchc`, `wchp`, `hash`, `telnet close`): close the connection without
    /// writing anything.
    NotAnswered(&'static str),
    /// Not a four-letter word at all.
    Unknown,
}

impl FourLetterAnswer {
    /// The text to write, if any.
    pub fn text(&self) -> Option<&str> {
        match self {
            FourLetterAnswer::Reply(t) => Some(t),
            _ => None,
        }
    }
}

/// The answer to `word` from a server in `snapshot`'s state, honouring `whitelist`: a word
/// not on it is answered `<word> is not executed because it is not in the whitelist.`
pub fn answer(
    word: &str,
    snapshot: &ServerSnapshot,
    whitelist: &FourLetterWhitelist,
) -> FourLetterAnswer {
    let Some(&(_, word)) = KNOWN_WORDS.iter().find(|(_, w)| *w == word) else {
        return FourLetterAnswer::Unknown;
    };
    if !whitelist.is_enabled(word) {
        return FourLetterAnswer::Reply(format!(
            "{word} is not executed because it is not in the whitelist.\n"
        ));
    }
    let s = snapshot;
    let needs_serving = matches!(
        word,
        "srvr" | "stat" | "mntr" | "conf" | "cons" | "wchs" | "dirs"
    );
    if needs_serving && !s.serving {
        return FourLetterAnswer::Reply(format!("{NOT_SERVING}\n"));
    }
    let text = match word {
        "ruok" => "imok".to_string(),
        "isro" => if s.serving { "rw" } else { "null" }.to_string(),
        "srvr" => stat_text(s, false),
        "stat" => stat_text(s, true),
        "mntr" => mntr_text(s),
        "conf" => conf_text(&s.conf),
        "cons" => {
            let mut t = String::new();
            for c in &s.connections {
                connection_line(&mut t, c, false);
                t.push('\n');
            }
            t.push('\n');
            t
        }
        "envi" => {
            let mut t = String::from("Environment:\n");
            for (k, v) in &s.environment {
                let _ = writeln!(t, "{k}={v}");
            }
            t
        }
        "dirs" => format!(
            "datadir_size: {}\nlogdir_size: {}\n",
            s.conf.data_dir_size, s.conf.data_log_size
        ),
        "wchs" => format!(
            "{} connections watching {} paths\nTotal watches:{}\n",
            s.watches.connections, s.watches.paths, s.watches.total
        ),
        other => return FourLetterAnswer::NotAnswered(other),
    };
    FourLetterAnswer::Reply(text)
}

/// `srvr` (and `stat`, which adds the clients): ZooKeeper's `StatCommand`.
fn stat_text(s: &ServerSnapshot, with_clients: bool) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "Zookeeper version: {}", s.version);
    if with_clients {
        t.push_str("Clients:\n");
        for c in &s.connections {
            connection_line(&mut t, c, true);
            t.push('\n');
        }
        t.push('\n');
    }
    let _ = writeln!(
        t,
        "Latency min/avg/max: {}/{}/{}",
        s.latency.min,
        java_double(s.latency.average()),
        s.latency.max
    );
    let _ = writeln!(t, "Received: {}", s.packets_received);
    let _ = writeln!(t, "Sent: {}", s.packets_sent);
    let _ = writeln!(t, "Connections: {}", s.alive_connections);
    let _ = writeln!(t, "Outstanding: {}", s.outstanding_requests);
    let _ = writeln!(t, "Zxid: 0x{:x}", s.zxid);
    let _ = writeln!(t, "Mode: {}", s.state.as_str());
    let _ = writeln!(t, "Node count: {}", s.node_count);
    if let (ServerState::Leader, Some(l)) = (s.state, &s.leader) {
        let p = l.proposal_sizes;
        let _ = writeln!(
            t,
            "Proposal sizes last/min/max: {}/{}/{}",
            p.last, p.min, p.max
        );
    }
    t
}

/// `mntr`: `zk_<key>\t<value>` lines, in the order ZooKeeper registers the gauges
/// (`dumpMonitorValues` of the server and its quorum/observer subclasses, then the gauges of
/// `registerMetrics` of the server, the leader and the quorum server; a follower of ZooKeeper
/// 3.8.0 prints no `zk_synced_observers`). ZooKeeper also prints its metrics provider's counters
/// and summaries (`zk_cnt_*`, `zk_p99_*`, ...), which this server does not keep.
fn mntr_text(s: &ServerSnapshot) -> String {
    let mut t = String::new();
    let mut line = |key: &str, value: &dyn std::fmt::Display| {
        let _ = writeln!(t, "zk_{key}\t{value}");
    };
    let fd = |v: Option<u64>| v.map_or(-1, |v| v as i64);
    line("version", &s.version);
    line("server_state", &s.state.as_str());
    if let Some(p) = &s.peer_state {
        line("peer_state", p);
    }
    if let (ServerState::Observer, Some(id)) = (s.state, s.observer_master_id) {
        line("observer_master_id", &id);
    }
    line("avg_latency", &java_double(s.latency.average()));
    line("max_latency", &s.latency.max);
    line("min_latency", &s.latency.min);
    line("packets_received", &s.packets_received);
    line("packets_sent", &s.packets_sent);
    line("num_alive_connections", &s.alive_connections);
    line("outstanding_requests", &s.outstanding_requests);
    line("uptime", &s.uptime_ms);
    line("znode_count", &s.node_count);
    line("watch_count", &s.watch_count);
    line("ephemerals_count", &s.ephemerals_count);
    line("approximate_data_size", &s.approximate_data_size);
    line("global_sessions", &s.global_sessions);
    line("local_sessions", &s.local_sessions);
    line("open_file_descriptor_count", &fd(s.open_file_descriptors));
    line("max_file_descriptor_count", &fd(s.max_file_descriptors));
    if let (ServerState::Leader, Some(l)) = (s.state, &s.leader) {
        line("learners", &l.learners);
        line("synced_followers", &l.synced_followers);
        line(
            "synced_non_voting_followers",
            &l.synced_non_voting_followers,
        );
        line("synced_observers", &l.synced_observers);
        line("pending_syncs", &l.pending_syncs);
        line("leader_uptime", &l.leader_uptime_ms);
        line("last_proposal_size", &l.proposal_sizes.last);
        line("max_proposal_size", &l.proposal_sizes.max);
        line("min_proposal_size", &l.proposal_sizes.min);
    }
    if let Some(n) = s.quorum_size {
        line("quorum_size", &n);
    }
    t
}

/// `conf`: ZooKeeper's `ZooKeeperServer.dumpConf` (+ `QuorumZooKeeperServer.dumpConf`).
fn conf_text(c: &ConfSnapshot) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "clientPort={}", c.client_port);
    let _ = writeln!(t, "secureClientPort={}", c.secure_client_port);
    let _ = writeln!(t, "dataDir={}", c.data_dir);
    let _ = writeln!(t, "dataDirSize={}", c.data_dir_size);
    let _ = writeln!(t, "dataLogDir={}", c.data_log_dir);
    let _ = writeln!(t, "dataLogSize={}", c.data_log_size);
    let _ = writeln!(t, "tickTime={}", c.tick_time_ms);
    let _ = writeln!(t, "maxClientCnxns={}", c.max_client_cnxns);
    let _ = writeln!(t, "minSessionTimeout={}", c.min_session_timeout_ms);
    let _ = writeln!(t, "maxSessionTimeout={}", c.max_session_timeout_ms);
    let _ = writeln!(
        t,
        "clientPortListenBacklog={}",
        c.client_port_listen_backlog
    );
    let _ = writeln!(t, "serverId={}", c.server_id);
    if let Some(q) = &c.quorum {
        let _ = writeln!(t, "initLimit={}", q.init_limit);
        let _ = writeln!(t, "syncLimit={}", q.sync_limit);
        let _ = writeln!(t, "electionAlg={}", q.election_alg);
        let _ = writeln!(t, "electionPort={}", q.election_port);
        let _ = writeln!(t, "quorumPort={}", q.quorum_port);
        let _ = writeln!(t, "peerType={}", q.peer_type.ordinal());
        t.push_str("membership: \n");
        t.push_str(&q.membership);
    }
    t
}

/// One connection as ZooKeeper's `ServerCnxn.dumpConnectionInfo` prints it (`brief` for
/// `stat`: without the session details).
fn connection_line(t: &mut String, c: &ConnectionStats, brief: bool) {
    let _ = write!(t, " {}[", java_socket_address(&c.remote));
    if c.interest_ops == 0 {
        t.push('0');
    } else {
        let _ = write!(t, "{:x}", c.interest_ops);
    }
    let _ = write!(
        t,
        "](queued={},recved={},sent={}",
        c.queued, c.received, c.sent
    );
    if let (false, Some(s)) = (brief, &c.session) {
        if s.session_id != 0 {
            let _ = write!(
                t,
                ",sid=0x{:x},lop={},est={},to={}",
                s.session_id, s.last_op, s.established_ms, s.timeout_ms
            );
            if s.last_cxid >= 0 {
                let _ = write!(t, ",lcxid=0x{:x}", s.last_cxid);
            }
            let avg = s.latency.total.checked_div(s.latency.count).unwrap_or(0);
            let _ = write!(
                t,
                ",lzxid=0x{:x},lresp={},llat={},minlat={},avglat={},maxlat={}",
                s.last_zxid, s.last_response_ms, s.last_latency, s.latency.min, avg, s.latency.max
            );
        }
    }
    t.push(')');
}

/// Java's `InetSocketAddress.toString` of an accepted socket: `/ip:port`, an IPv6 address
/// uncompressed in brackets (`/[0:0:0:0:0:0:0:1]:port`).
fn java_socket_address(a: &SocketAddr) -> String {
    match a.ip() {
        IpAddr::V4(ip) => format!("/{ip}:{}", a.port()),
        IpAddr::V6(ip) => {
            let segments: Vec<String> = ip.segments().iter().map(|s| format!("{s:x}")).collect();
            format!("/[{}]:{}", segments.join(":"), a.port())
        }
    }
}

/// Java's `Double.toString` for the non-negative values printed here: `0.0`, `12.5`,
/// `1.0E-4`, `1.2345678E7`.
fn java_double(x: f64) -> String {
    if x == 0.0 {
        return "0.0".into();
    }
    if (1e-3..1e7).contains(&x.abs()) {
        let s = format!("{x}");
        return if s.contains('.') { s } else { format!("{s}.0") };
    }
    let s = format!("{x:e}");
    let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let mantissa = if mantissa.contains('.') {
        mantissa.to_string()
    } else {
        format!("{mantissa}.0")
    };
    format!("{mantissa}E{exp}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const VERSION: &str = "3.8.0-ha-blocks, built on 2026-01-01 00:00 UTC";

    fn conf() -> ConfSnapshot {
        let mut c = ZkConfig::parse("dataDir=/tmp/zk/data\nclientPort=21981\ntickTime=2000\n")
            .expect("parses");
        c.tick_time_ms = 2000;
        ConfSnapshot::from_config(&c, 457, 457)
    }

    fn snapshot(state: ServerState) -> ServerSnapshot {
        let mut s = ServerSnapshot::new(VERSION, state, conf());
        s.packets_received = 2;
        s.packets_sent = 1;
        s.alive_connections = 1;
        s.node_count = 5;
        s
    }

    fn reply(word: &str, s: &ServerSnapshot) -> String {
        answer(word, s, &FourLetterWhitelist::all())
            .text()
            .expect("a reply")
            .to_string()
    }

    #[test]
    fn every_known_word_is_recognised_from_its_first_four_bytes() {
        for (code, word) in KNOWN_WORDS {
            assert_eq!(is_four_letter_word(code), Some(word));
        }
        assert_eq!(is_four_letter_word(*b"ruok"), Some("ruok"));
        assert_eq!(
            is_four_letter_word([0xff, 0xf4, 0xff, 0xfd]),
            Some("telnet close")
        );
        // A connect request starts with its length (44 or 45 bytes).
        assert_eq!(is_four_letter_word([0, 0, 0, 44]), None);
        assert_eq!(is_four_letter_word(*b"RUOK"), None);
    }

    #[test]
    fn a_word_not_on_the_whitelist_is_not_executed() {
        let s = snapshot(ServerState::Standalone);
        let wl = FourLetterWhitelist::zookeeper_default();
        assert_eq!(
            answer("ruok", &s, &wl),
            FourLetterAnswer::Reply(
                "ruok is not executed because it is not in the whitelist.\n".into()
            )
        );
        assert!(answer("srvr", &s, &wl)
            .text()
            .is_some_and(|t| t.starts_with("Zookeeper version: ")));
    }

    #[test]
    fn a_word_zookeeper_does_not_know_is_unknown() {
        let s = snapshot(ServerState::Standalone);
        assert_eq!(
            answer("xyzw", &s, &FourLetterWhitelist::all()),
            FourLetterAnswer::Unknown
        );
    }

    #[test]
    fn known_words_without_an_answer_close_silently() {
        let s = snapshot(ServerState::Standalone);
        for w in [
            "dump", "crst", "srst", "gtmk", "stmk", "wchc", "wchp", "hash",
        ] {
            assert_eq!(
                answer(w, &s, &FourLetterWhitelist::all()),
                FourLetterAnswer::NotAnswered(w)
            );
        }
    }

    #[test]
    fn ruok_answers_imok_without_a_newline() {
        assert_eq!(reply("ruok", &snapshot(ServerState::Standalone)), "imok");
    }

    #[test]
    fn isro_answers_rw_or_null_when_not_serving() {
        let mut s = snapshot(ServerState::Follower);
        assert_eq!(reply("isro", &s), "rw");
        s.serving = false;
        assert_eq!(reply("isro", &s), "null");
    }

    #[test]
    fn srvr_has_zookeepers_exact_layout() {
        // Captured from ZooKeeper 3.8 (standalone, fresh).
        let zk = "Zookeeper version: VERSION\nLatency min/avg/max: 0/0.0/0\nReceived: 2\n\
                  Sent: 1\nConnections: 1\nOutstanding: 0\nZxid: 0x0\nMode: standalone\n\
                  Node count: 5\n"
            .replace("VERSION", VERSION);
        assert_eq!(reply("srvr", &snapshot(ServerState::Standalone)), zk);
    }

    #[test]
    fn srvr_of_a_leader_adds_proposal_sizes() {
        let mut s = snapshot(ServerState::Leader);
        s.zxid = 0x1_0000_0002;
        s.leader = Some(LeaderStats::default());
        let t = reply("srvr", &s);
        assert!(t.contains("Zxid: 0x100000002\nMode: leader\n"), "{t}");
        assert!(
            t.ends_with("Node count: 5\nProposal sizes last/min/max: -1/-1/-1\n"),
            "{t}"
        );
    }

    #[test]
    fn srvr_parses_with_the_testkit_parser_in_every_mode() {
        for (state, mode) in [
            (ServerState::Standalone, ha_testkit::ServerMode::Standalone),
            (ServerState::Leader, ha_testkit::ServerMode::Leader),
            (ServerState::Follower, ha_testkit::ServerMode::Follower),
            (ServerState::Observer, ha_testkit::ServerMode::Observer),
        ] {
            let mut s = snapshot(state);
            s.zxid = 0x2_0000_0007;
            s.node_count = 42;
            s.outstanding_requests = 3;
            if state == ServerState::Leader {
                s.leader = Some(LeaderStats::default());
            }
            let parsed = ha_testkit::SrvrStats::parse(&reply("srvr", &s)).expect("parses");
            assert_eq!(parsed.mode, mode);
            assert_eq!(parsed.zxid, 0x2_0000_0007);
            assert_eq!(parsed.node_count, 42);
            assert_eq!(parsed.connections, 1);
            assert_eq!(parsed.outstanding, 3);
            assert_eq!(parsed.version, VERSION);
        }
    }

    #[test]
    fn words_needing_a_serving_server_say_it_is_not_serving() {
        let mut s = snapshot(ServerState::Follower);
        s.serving = false;
        for w in ["srvr", "stat", "mntr", "conf", "cons", "wchs", "dirs"] {
            assert_eq!(reply(w, &s), format!("{NOT_SERVING}\n"), "{w}");
        }
        assert!(ha_testkit::SrvrStats::parse(&reply("srvr", &s)).is_err());
        assert_eq!(reply("ruok", &s), "imok");
        assert!(reply("envi", &s).starts_with("Environment:\n"));
    }

    #[test]
    fn stat_lists_clients_briefly_before_the_statistics() {
        // Captured from ZooKeeper 3.8 (standalone, one connection: the one asking).
        let mut s = snapshot(ServerState::Standalone);
        s.packets_received = 3;
        s.packets_sent = 2;
        let mut c = ConnectionStats::new("127.0.0.1:43672".parse().unwrap());
        c.interest_ops = 0;
        c.received = 1;
        s.connections.push(c);
        let zk = "Zookeeper version: VERSION\nClients:\n /127.0.0.1:43672[0](queued=0,recved=1,sent=0)\n\n\
                  Latency min/avg/max: 0/0.0/0\nReceived: 3\nSent: 2\nConnections: 1\n\
                  Outstanding: 0\nZxid: 0x0\nMode: standalone\nNode count: 5\n"
            .replace("VERSION", VERSION);
        assert_eq!(reply("stat", &s), zk);
    }

    #[test]
    fn cons_prints_session_details_once_a_session_exists() {
        let mut s = snapshot(ServerState::Standalone);
        let mut bare = ConnectionStats::new("127.0.0.1:43690".parse().unwrap());
        bare.interest_ops = 0;
        bare.received = 1;
        let mut with = ConnectionStats::new("[::1]:5000".parse().unwrap());
        with.received = 7;
        with.sent = 6;
        with.session = Some(SessionStats {
            session_id: 0x1000_0abc_0000,
            last_op: "GETD".into(),
            established_ms: 1_700_000_000_123,
            timeout_ms: 30000,
            last_cxid: 5,
            last_zxid: 0x12,
            last_response_ms: 1_700_000_000_456,
            last_latency: 1,
            latency: LatencyStats::new(0, 3, 5, 4),
        });
        s.connections = vec![bare, with];
        assert_eq!(
            reply("cons", &s),
            " /127.0.0.1:43690[0](queued=0,recved=1,sent=0)\n \
             /[0:0:0:0:0:0:0:1]:5000[1](queued=0,recved=7,sent=6,sid=0x10000abc0000,lop=GETD,\
             est=1700000000123,to=30000,lcxid=0x5,lzxid=0x12,lresp=1700000000456,llat=1,\
             minlat=0,avglat=1,maxlat=3)\n\n"
        );
    }

    #[test]
    fn cons_omits_last_cxid_before_any_request_and_prints_minus_one_zxid_in_hex() {
        let mut s = snapshot(ServerState::Standalone);
        let mut c = ConnectionStats::new("10.1.2.3:9".parse().unwrap());
        c.session = Some(SessionStats::new(1, 5, 4000));
        s.connections = vec![c];
        assert_eq!(
            reply("cons", &s),
            " /10.1.2.3:9[1](queued=0,recved=0,sent=0,sid=0x1,lop=NA,est=5,to=4000,\
             lzxid=0xffffffffffffffff,lresp=0,llat=0,minlat=0,avglat=0,maxlat=0)\n\n"
        );
    }

    #[test]
    fn conf_of_a_standalone_server_has_zookeepers_exact_layout() {
        // Captured from ZooKeeper 3.8 (standalone).
        assert_eq!(
            reply("conf", &snapshot(ServerState::Standalone)),
            "clientPort=21981\nsecureClientPort=-1\ndataDir=/tmp/zk/data/version-2\n\
             dataDirSize=457\ndataLogDir=/tmp/zk/data/version-2\ndataLogSize=457\n\
             tickTime=2000\nmaxClientCnxns=60\nminSessionTimeout=4000\n\
             maxSessionTimeout=40000\nclientPortListenBacklog=-1\nserverId=0\n"
        );
    }

    #[test]
    fn conf_of_a_quorum_member_adds_the_quorum_and_membership() {
        let mut c = ZkConfig::parse(
            "tickTime=200\ninitLimit=10\nsyncLimit=5\ndataDir=/d\nclientPort=2181\n\
             server.1=127.0.0.1:2888:3888\nserver.2=127.0.0.1:2889:3889\n\
             server.3=127.0.0.1:2890:3890\n",
        )
        .unwrap();
        c.apply_my_id(2).unwrap();
        let s = ServerSnapshot::new(
            VERSION,
            ServerState::Follower,
            ConfSnapshot::from_config(&c, 0, 0),
        );
        let t = reply("conf", &s);
        assert!(
            t.ends_with(
                "serverId=2\ninitLimit=10\nsyncLimit=5\nelectionAlg=3\nelectionPort=3889\n\
                 quorumPort=2889\npeerType=0\nmembership: \n\
                 server.1=127.0.0.1:2888:3888:participant\n\
                 server.2=127.0.0.1:2889:3889:participant\n\
                 server.3=127.0.0.1:2890:3890:participant\nversion=0"
            ),
            "{t}"
        );
    }

    #[test]
    fn mntr_is_tab_separated_zk_keys() {
        let mut s = snapshot(ServerState::Leader);
        s.leader = Some(LeaderStats {
            learners: 2,
            synced_followers: 2,
            ..LeaderStats::default()
        });
        s.quorum_size = Some(3);
        s.latency = LatencyStats::new(1, 9, 10, 3);
        let t = reply("mntr", &s);
        for line in t.lines() {
            let (k, v) = line.split_once('\t').expect("tab-separated");
            assert!(k.starts_with("zk_"), "{line}");
            assert!(!v.is_empty(), "{line}");
        }
        assert!(t.starts_with(&format!("zk_version\t{VERSION}\nzk_server_state\tleader\n")));
        assert!(t.contains("zk_avg_latency\t3.3333\n"), "{t}");
        assert!(t.contains("zk_synced_followers\t2\n"));
        assert!(t.contains("zk_open_file_descriptor_count\t-1\n"));
        assert!(t.ends_with("zk_quorum_size\t3\n"));
    }

    #[test]
    fn mntr_of_a_follower_has_no_leader_keys() {
        let mut s = snapshot(ServerState::Follower);
        s.leader = Some(LeaderStats::default());
        s.peer_state = Some("following - broadcast".into());
        let t = reply("mntr", &s);
        assert!(!t.contains("zk_learners"));
        assert!(!t.contains("zk_pending_syncs"));
        assert!(!t.contains("zk_synced_observers"));
        assert!(t.contains("zk_server_state\tfollower\nzk_peer_state\tfollowing - broadcast\n"));
    }

    #[test]
    fn mntr_of_an_observer_names_its_learner_master() {
        let mut s = snapshot(ServerState::Observer);
        s.peer_state = Some("observing - broadcast".into());
        s.observer_master_id = Some(2);
        assert!(reply("mntr", &s)
            .contains("zk_peer_state\tobserving - broadcast\nzk_observer_master_id\t2\n"));
    }

    #[test]
    fn average_latency_is_rounded_half_up_to_four_decimals() {
        assert_eq!(LatencyStats::default().average(), 0.0);
        assert_eq!(LatencyStats::new(0, 0, 1, 3).average(), 0.3333);
        assert_eq!(LatencyStats::new(0, 0, 2, 3).average(), 0.6667);
        assert_eq!(LatencyStats::new(0, 0, 1, 20_000).average(), 0.0001);
        assert_eq!(LatencyStats::new(0, 0, 1, 20_001).average(), 0.0);
        assert_eq!(LatencyStats::new(0, 0, 5, 2).average(), 2.5);
    }

    #[test]
    fn doubles_print_as_java_prints_them() {
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(2.0), "2.0");
        assert_eq!(java_double(0.3333), "0.3333");
        assert_eq!(java_double(0.0001), "1.0E-4");
        assert_eq!(java_double(12_345_678.0), "1.2345678E7");
    }

    #[test]
    fn envi_lists_the_environment_in_order() {
        let mut s = snapshot(ServerState::Standalone);
        s.environment = vec![
            ("zookeeper.version".into(), VERSION.into()),
            ("host.name".into(), "localhost".into()),
        ];
        assert_eq!(
            reply("envi", &s),
            format!("Environment:\nzookeeper.version={VERSION}\nhost.name=localhost\n")
        );
    }

    #[test]
    fn wchs_and_dirs_have_zookeepers_layout() {
        let mut s = snapshot(ServerState::Standalone);
        assert_eq!(
            reply("wchs", &s),
            "0 connections watching 0 paths\nTotal watches:0\n"
        );
        s.watches = WatchSummary {
            connections: 2,
            paths: 3,
            total: 4,
        };
        assert_eq!(
            reply("wchs", &s),
            "2 connections watching 3 paths\nTotal watches:4\n"
        );
        assert_eq!(reply("dirs", &s), "datadir_size: 457\nlogdir_size: 457\n");
    }
}
