//! `zoo.cfg`: the configuration file of a ZooKeeper server, read with ZooKeeper 3.8's
//! `QuorumPeerConfig` rules (defaults, validation, `server.N` lines, `myid`).
//!
//! The file is a Java properties file (`key=value`, `key: value` or `key value`; `#` and `!`
//! comment lines; a trailing backslash continues a line; the last of repeated keys wins).
//! [`ZkConfig::parse`] applies every rule that needs only the text; [`ZkConfig::load`] also
//! reads `myid` from `dataDir` and applies the rules that need the server's own id, as
//! `QuorumPeerConfig.parse` does.
//!
//! Relative paths are kept as written and so resolve against the working directory of the
//! process, as ZooKeeper's `new File(value)` does (ZooKeeper only warns about them).
//!
//! Keys that ZooKeeper reads elsewhere as system properties (`snapCount`,
//! `globalOutstandingLimit`, `4lw.commands.whitelist`: ZooKeeper turns any key it does not
//! know into the system property `zookeeper.<key>`) are read here directly; `jute.maxbuffer`,
//! a plain system property in ZooKeeper, is accepted as a key too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::four_letter::FourLetterWhitelist;

/// ZooKeeper's `ZooKeeperServer.DEFAULT_TICK_TIME`, in milliseconds.
pub const DEFAULT_TICK_TIME_MS: u32 = 3000;
/// `maxClientCnxns` when absent: connections per client IP address.
pub const DEFAULT_MAX_CLIENT_CNXNS: u32 = 60;
/// `snapCount` when absent: transactions between snapshots.
pub const DEFAULT_SNAP_COUNT: u32 = 100_000;
/// The smallest `snapCount` ZooKeeper accepts; smaller values are raised to it.
pub const MIN_SNAP_COUNT: u32 = 2;
/// `autopurge.snapRetainCount` when absent, and its minimum (smaller values are raised to it).
pub const MIN_SNAP_RETAIN_COUNT: u32 = 3;
/// `globalOutstandingLimit` when absent.
pub const DEFAULT_GLOBAL_OUTSTANDING_LIMIT: u32 = 1000;
/// `jute.maxbuffer` when absent (0xfffff bytes).
pub const DEFAULT_JUTE_MAX_BUFFER: u32 = 0xf_ffff;
/// The only leader-election algorithm ZooKeeper 3.8 accepts (`electionAlg`).
pub const ELECTION_ALG: u32 = 3;

/// Whether a server votes (a participant) or only follows (an observer): ZooKeeper's
/// `LearnerType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PeerType {
    /// A voting member (the default).
    #[default]
    Participant,
    /// A non-voting member.
    Observer,
}

impl PeerType {
    /// ZooKeeper's spelling (`participant` / `observer`).
    pub fn as_str(self) -> &'static str {
        match self {
            PeerType::Participant => "participant",
            PeerType::Observer => "observer",
        }
    }

    /// The ordinal of ZooKeeper's `LearnerType` (`conf` prints it as `peerType=`).
    pub fn ordinal(self) -> u32 {
        match self {
            PeerType::Participant => 0,
            PeerType::Observer => 1,
        }
    }

    fn parse(value: &str) -> Option<PeerType> {
        match value.trim().to_ascii_lowercase().as_str() {
            "participant" => Some(PeerType::Participant),
            "observer" => Some(PeerType::Observer),
            _ => None,
        }
    }
}

/// A host and port as written in `zoo.cfg` (the host is not resolved).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    /// Host name or address, without IPv6 brackets.
    pub host: String,
    /// Port.
    pub port: u16,
}

impl HostPort {
    /// `host:port`, with brackets around an IPv6 address as ZooKeeper prints it.
    pub fn to_delimited(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// One `server.N=host:quorumPort:electionPort[:type][;[clientHost:]clientPort]` line.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QuorumServer {
    /// The server id `N`.
    pub sid: u64,
    /// Host of the quorum and election ports.
    pub host: String,
    /// Port followers connect to the leader on.
    pub quorum_port: u16,
    /// Leader-election port.
    pub election_port: u16,
    /// Participant (default) or observer.
    pub peer_type: PeerType,
    /// The client address given after `;` (host `0.0.0.0` when only a port is given).
    pub client_addr: Option<HostPort>,
}

impl QuorumServer {
    /// The line's value as ZooKeeper's `QuorumServer.toString` prints it (in `conf`'s
    /// membership): `host:quorum:election:type[;clientHost:clientPort]`.
    pub fn to_config_value(&self) -> String {
        let host = HostPort {
            host: self.host.clone(),
            port: self.quorum_port,
        };
        let mut s = format!(
            "{}:{}:{}",
            host.to_delimited(),
            self.election_port,
            self.peer_type.as_str()
        );
        if let Some(c) = &self.client_addr {
            s.push(';');
            s.push_str(&c.to_delimited());
        }
        s
    }
}

/// A typed error reading `zoo.cfg`, naming the line or key at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file (or `myid`) could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A line is not a valid properties line (a bad `\u` escape).
    #[error("line {line}: {message}")]
    Syntax {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A key has a value ZooKeeper refuses.
    #[error("line {line}: invalid {key}={value}: {reason}")]
    InvalidValue {
        /// 1-based line number.
        line: usize,
        /// The key.
        key: String,
        /// The value as written.
        value: String,
        /// Why it is refused.
        reason: String,
    },
    /// A key ZooKeeper accepts but this server does not implement.
    #[error("line {line}: {key} is not supported: {reason}")]
    Unsupported {
        /// 1-based line number.
        line: usize,
        /// The key.
        key: String,
        /// Why, and what to use instead.
        reason: String,
    },
    /// A required key is missing.
    #[error("{key} is not set")]
    Missing {
        /// The key.
        key: &'static str,
    },
    /// Keys that are valid one by one but not together.
    #[error("invalid configuration: {0}")]
    Inconsistent(String),
    /// The `myid` file is missing (in a quorum) or does not hold a valid server id.
    #[error("myid {path}: {reason}")]
    MyId {
        /// The `myid` file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// A parsed `zoo.cfg`, with ZooKeeper 3.8's defaults for what it does not set.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ZkConfig {
    /// `tickTime` in milliseconds (default 3000; 0 is refused).
    pub tick_time_ms: u32,
    /// `initLimit` in ticks (no default: required in a quorum, 0 = not set).
    pub init_limit: u32,
    /// `syncLimit` in ticks (no default: required in a quorum, 0 = not set).
    pub sync_limit: u32,
    /// `dataDir` (required): snapshots, and `myid`.
    pub data_dir: PathBuf,
    /// `dataLogDir`: the transaction log (default `dataDir`).
    pub data_log_dir: PathBuf,
    /// `clientPort` (no default: without it the server has no client port, unless its
    /// `server.N` line gives one).
    pub client_port: Option<u16>,
    /// `clientPortAddress` (default: all addresses, `0.0.0.0`). Needs `clientPort`.
    pub client_port_address: Option<String>,
    /// The `server.N` lines, by sid.
    pub servers: BTreeMap<u64, QuorumServer>,
    /// `peerType` (default participant). After [`load`](Self::load) it is the type of this
    /// server's `server.N` line, which wins over `peerType` as in ZooKeeper.
    pub peer_type: PeerType,
    /// The server id from `dataDir/myid`, read by [`load`](Self::load) (or
    /// [`apply_my_id`](Self::apply_my_id)).
    pub my_id: Option<u64>,
    /// `maxClientCnxns`: connections per client IP address (default 60; 0 = no limit; a
    /// negative value, which ZooKeeper also treats as no limit, is stored as 0).
    pub max_client_cnxns: u32,
    /// `minSessionTimeout` in ms (default 2 × tickTime; -1 means the default).
    pub min_session_timeout_ms: u32,
    /// `maxSessionTimeout` in ms (default 20 × tickTime; -1 means the default).
    pub max_session_timeout_ms: u32,
    /// `snapCount` (default 100000; values below 2 are raised to 2).
    pub snap_count: u32,
    /// `autopurge.snapRetainCount` (default 3; values below 3 are raised to 3).
    pub snap_retain_count: u32,
    /// `autopurge.purgeInterval` in hours (default 0: no purge).
    pub purge_interval_hours: u32,
    /// `4lw.commands.whitelist` (default: only `srvr`, which ZooKeeper always enables).
    pub four_letter_whitelist: FourLetterWhitelist,
    /// `globalOutstandingLimit` (default 1000).
    pub global_outstanding_limit: u32,
    /// `jute.maxbuffer` in bytes (default 0xfffff).
    pub jute_max_buffer: u32,
    /// `standaloneEnabled` (default true): a single participant runs standalone.
    pub standalone_enabled: bool,
    /// `reconfigEnabled` (default false).
    pub reconfig_enabled: bool,
    /// `admin.*` and `metricsProvider.*` lines: accepted and ignored (there is no admin server
    /// and no pluggable metrics provider).
    pub ignored: Vec<(String, String)>,
    /// Every other key, in file order (ZooKeeper turns these into the system properties
    /// `zookeeper.<key>`; ZooKeeper keys this server does not act on land here too).
    pub unknown: Vec<(String, String)>,
}

impl ZkConfig {
    /// The configuration of a standalone server keeping its data in `data_dir`, with every
    /// other key at ZooKeeper's default (no client port).
    pub fn new(data_dir: impl Into<PathBuf>) -> ZkConfig {
        let data_dir = data_dir.into();
        ZkConfig {
            tick_time_ms: DEFAULT_TICK_TIME_MS,
            init_limit: 0,
            sync_limit: 0,
            data_log_dir: data_dir.clone(),
            data_dir,
            client_port: None,
            client_port_address: None,
            servers: BTreeMap::new(),
            peer_type: PeerType::Participant,
            my_id: None,
            max_client_cnxns: DEFAULT_MAX_CLIENT_CNXNS,
            min_session_timeout_ms: 2 * DEFAULT_TICK_TIME_MS,
            max_session_timeout_ms: 20 * DEFAULT_TICK_TIME_MS,
            snap_count: DEFAULT_SNAP_COUNT,
            snap_retain_count: MIN_SNAP_RETAIN_COUNT,
            purge_interval_hours: 0,
            four_letter_whitelist: FourLetterWhitelist::zookeeper_default(),
            global_outstanding_limit: DEFAULT_GLOBAL_OUTSTANDING_LIMIT,
            jute_max_buffer: DEFAULT_JUTE_MAX_BUFFER,
            standalone_enabled: true,
            reconfig_enabled: false,
            ignored: Vec::new(),
            unknown: Vec::new(),
        }
    }

    /// Reads `path` as ZooKeeper's `QuorumPeerConfig.parse` does: [`parse`](Self::parse), then
    /// `myid` from `dataDir` when that file exists (required in a quorum), then the rules
    /// that need it ([`apply_my_id`](Self::apply_my_id)).
    pub fn load(path: &Path) -> Result<ZkConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut config = ZkConfig::parse(&text)?;
        let myid = config.data_dir.join("myid");
        if myid.is_file() {
            let text = std::fs::read_to_string(&myid).map_err(|source| ConfigError::Io {
                path: myid.clone(),
                source,
            })?;
            let first = text.lines().next().unwrap_or("");
            let id = first.parse::<u64>().map_err(|_| ConfigError::MyId {
                path: myid.clone(),
                reason: format!("serverid {first} is not a number"),
            })?;
            config.apply_my_id(id)?;
        } else if config.is_distributed() {
            return Err(ConfigError::MyId {
                path: myid,
                reason: "myid file is missing".into(),
            });
        }
        Ok(config)
    }

    /// Parses the text of a `zoo.cfg` and applies every ZooKeeper rule that does not need the
    /// server's own id.
    pub fn parse(text: &str) -> Result<ZkConfig, ConfigError> {
        let entries = properties(text)?;
        let mut c = ZkConfig::new(PathBuf::new());
        let mut data_dir = None;
        let mut data_log_dir = None;
        let mut min_session = -1i64;
        let mut max_session = -1i64;
        for Entry { line, key, value } in entries {
            let bad = |reason: &str| ConfigError::InvalidValue {
                line,
                key: key.clone(),
                value: value.clone(),
                reason: reason.to_string(),
            };
            let int = || -> Result<i64, ConfigError> {
                value
                    .parse::<i32>()
                    .map(i64::from)
                    .map_err(|_| bad("not a 32-bit integer"))
            };
            let unsigned = || -> Result<u32, ConfigError> {
                u32::try_from(int()?).map_err(|_| bad("must not be negative"))
            };
            let boolean = || -> Result<bool, ConfigError> {
                if value.eq_ignore_ascii_case("true") {
                    Ok(true)
                } else if value.eq_ignore_ascii_case("false") {
                    Ok(false)
                } else {
                    Err(bad("choose 'true' or 'false'"))
                }
            };
            match key.as_str() {
                "dataDir" => data_dir = Some(PathBuf::from(&value)),
                "dataLogDir" => data_log_dir = Some(PathBuf::from(&value)),
                "clientPort" => {
                    c.client_port = Some(port(&value).ok_or_else(|| bad("not a port"))?)
                }
                "clientPortAddress" => c.client_port_address = Some(value.clone()),
                "secureClientPort" | "secureClientPortAddress" => {
                    return Err(ConfigError::Unsupported {
                        line,
                        key,
                        reason: "TLS on the client port is not implemented; use clientPort".into(),
                    })
                }
                "dynamicConfigFile" => {
                    return Err(ConfigError::Unsupported {
                        line,
                        key,
                        reason: "dynamic reconfiguration files are not implemented; list the \
                                 servers as server.N lines"
                            .into(),
                    })
                }
                "tickTime" => c.tick_time_ms = unsigned()?,
                "initLimit" => c.init_limit = unsigned()?,
                "syncLimit" => c.sync_limit = unsigned()?,
                "maxClientCnxns" => c.max_client_cnxns = int()?.max(0) as u32,
                "minSessionTimeout" => min_session = session_timeout(int()?, &bad)?,
                "maxSessionTimeout" => max_session = session_timeout(int()?, &bad)?,
                "electionAlg" => {
                    if int()? != i64::from(ELECTION_ALG) {
                        return Err(bad("only 3 is supported"));
                    }
                }
                "peerType" => {
                    c.peer_type =
                        PeerType::parse(&value).ok_or_else(|| bad("unrecognised peer type"))?
                }
                "snapCount" => {
                    let n = int()?;
                    c.snap_count = if n < i64::from(MIN_SNAP_COUNT) {
                        tracing::warn!(snap_count = n, "snapCount must be 2 or more; using 2");
                        MIN_SNAP_COUNT
                    } else {
                        n as u32
                    };
                }
                "autopurge.snapRetainCount" => {
                    let n = int()?;
                    c.snap_retain_count = if n < i64::from(MIN_SNAP_RETAIN_COUNT) {
                        tracing::warn!(
                            snap_retain_count = n,
                            "invalid autopurge.snapRetainCount; using 3"
                        );
                        MIN_SNAP_RETAIN_COUNT
                    } else {
                        n as u32
                    };
                }
                // ZooKeeper purges when the interval is positive; zero or negative is off.
                "autopurge.purgeInterval" => c.purge_interval_hours = int()?.max(0) as u32,
                "4lw.commands.whitelist" => {
                    c.four_letter_whitelist = FourLetterWhitelist::parse(&value)
                }
                "globalOutstandingLimit" => c.global_outstanding_limit = unsigned()?,
                "jute.maxbuffer" => c.jute_max_buffer = unsigned()?,
                "standaloneEnabled" => c.standalone_enabled = boolean()?,
                "reconfigEnabled" => c.reconfig_enabled = boolean()?,
                k if k.starts_with("server.") => {
                    let sid = k["server.".len()..]
                        .parse::<u64>()
                        .map_err(|_| bad("the server id is not a non-negative number"))?;
                    let server = parse_server(sid, &value).map_err(|r| bad(&r))?;
                    c.servers.insert(sid, server);
                }
                k if k.starts_with("admin.") || k.starts_with("metricsProvider.") => {
                    tracing::info!(key = k, value = %value, "zoo.cfg key ignored");
                    c.ignored.push((key, value));
                }
                k if k.starts_with("group.") || k.starts_with("weight.") => {
                    return Err(ConfigError::Unsupported {
                        line,
                        key,
                        reason: "hierarchical quorums are not implemented".into(),
                    })
                }
                _ => c.unknown.push((key, value)),
            }
        }
        c.data_dir = data_dir.ok_or(ConfigError::Missing { key: "dataDir" })?;
        c.data_log_dir = data_log_dir.unwrap_or_else(|| c.data_dir.clone());
        if c.client_port.is_none() && c.client_port_address.is_some() {
            return Err(ConfigError::Inconsistent(
                "clientPortAddress is set but clientPort is not set".into(),
            ));
        }
        if c.tick_time_ms == 0 {
            return Err(ConfigError::Missing { key: "tickTime" });
        }
        c.min_session_timeout_ms = if min_session == -1 {
            c.tick_time_ms.saturating_mul(2)
        } else {
            min_session as u32
        };
        c.max_session_timeout_ms = if max_session == -1 {
            c.tick_time_ms.saturating_mul(20)
        } else {
            max_session as u32
        };
        if c.min_session_timeout_ms > c.max_session_timeout_ms {
            return Err(ConfigError::Inconsistent(
                "minSessionTimeout must not be larger than maxSessionTimeout".into(),
            ));
        }
        c.check_membership()?;
        if c.is_distributed() {
            if c.init_limit == 0 {
                return Err(ConfigError::Missing { key: "initLimit" });
            }
            if c.sync_limit == 0 {
                return Err(ConfigError::Missing { key: "syncLimit" });
            }
        }
        Ok(c)
    }

    /// Applies this server's id (the content of `myid`) as ZooKeeper does once it has read it:
    /// in a quorum the id must be one of the `server.N` lines; a client address on this
    /// server's line must agree with `clientPortAddress`/`clientPort` and then wins; the
    /// line's type wins over `peerType`.
    pub fn apply_my_id(&mut self, id: u64) -> Result<(), ConfigError> {
        self.my_id = Some(id);
        if self.is_distributed() && !self.servers.contains_key(&id) {
            return Err(ConfigError::Inconsistent(format!(
                "my id {id} is not in the server list"
            )));
        }
        let Some(server) = self.servers.get(&id) else {
            return Ok(());
        };
        if let (Some(line_addr), Some(port)) = (&server.client_addr, self.client_port) {
            let static_host = self.client_port_address.as_deref().unwrap_or("0.0.0.0");
            let any = matches!(static_host, "0.0.0.0" | "::" | "0:0:0:0:0:0:0:0");
            let differs = if any {
                line_addr.port != port
            } else {
                line_addr.port != port || line_addr.host != static_host
            };
            if differs {
                return Err(ConfigError::Inconsistent(format!(
                    "client address for this server (id = {id}) is {static_host}:{port} in \
                     clientPortAddress/clientPort but {} in its server.{id} line",
                    line_addr.to_delimited()
                )));
            }
        }
        if server.peer_type != self.peer_type {
            tracing::warn!(
                sid = id,
                "peer type of the servers list ({}) does not match peerType ({}); using the \
                 servers list",
                server.peer_type.as_str(),
                self.peer_type.as_str()
            );
            self.peer_type = server.peer_type;
        }
        Ok(())
    }

    /// The address the client port listens on: this server's `server.N` client address if
    /// it has one, else `clientPortAddress` (default `0.0.0.0`) with `clientPort`; `None`
    /// without a client port.
    pub fn client_address(&self) -> Option<HostPort> {
        if let Some(addr) = self
            .my_id
            .and_then(|id| self.servers.get(&id))
            .and_then(|s| s.client_addr.clone())
        {
            return Some(addr);
        }
        self.client_port.map(|port| HostPort {
            host: self
                .client_port_address
                .clone()
                .unwrap_or_else(|| "0.0.0.0".into()),
            port,
        })
    }

    /// The voting members (`server.N` lines of type participant).
    pub fn participants(&self) -> impl Iterator<Item = &QuorumServer> {
        self.servers
            .values()
            .filter(|s| s.peer_type == PeerType::Participant)
    }

    /// The observers.
    pub fn observers(&self) -> impl Iterator<Item = &QuorumServer> {
        self.servers
            .values()
            .filter(|s| s.peer_type == PeerType::Observer)
    }

    /// ZooKeeper's `QuorumPeerConfig.isDistributed`: there are `server.N` lines and either
    /// more than one participant or `standaloneEnabled=false`.
    pub fn is_distributed(&self) -> bool {
        !self.servers.is_empty() && (!self.standalone_enabled || self.participants().count() > 1)
    }

    /// Whether the server runs standalone (ZooKeeperServerMain): not
    /// [`is_distributed`](Self::is_distributed). A single `server.N` line with
    /// `standaloneEnabled=true` still runs standalone, as in ZooKeeper.
    pub fn is_standalone(&self) -> bool {
        !self.is_distributed()
    }

    /// The membership text of `conf` (ZooKeeper's `QuorumMaj.toString`): a `server.N=...`
    /// line per member, then `version=<hex>` (0 for a static configuration).
    pub fn membership(&self) -> String {
        let mut s = String::new();
        for (sid, server) in &self.servers {
            s.push_str(&format!("server.{sid}={}\n", server.to_config_value()));
        }
        s.push_str("version=0");
        s
    }

    /// ZooKeeper's checks of the membership (`QuorumPeerConfig.parseDynamicConfig`).
    fn check_membership(&self) -> Result<(), ConfigError> {
        let participants = self.participants().count();
        let observers = self.observers().count();
        if participants == 0 {
            if !self.standalone_enabled {
                return Err(ConfigError::Inconsistent(
                    "standaloneEnabled = false then number of participants should be >0".into(),
                ));
            }
            if observers > 0 {
                return Err(ConfigError::Inconsistent(
                    "Observers w/o participants is an invalid configuration".into(),
                ));
            }
        } else if participants == 1 && self.standalone_enabled {
            tracing::warn!("only one server specified: running standalone (standaloneEnabled)");
            if observers > 0 {
                return Err(ConfigError::Inconsistent(
                    "Observers w/o quorum is an invalid configuration".into(),
                ));
            }
        } else if participants <= 2 {
            tracing::warn!("no server failure will be tolerated: at least 3 servers are needed");
        } else if participants.is_multiple_of(2) {
            tracing::warn!("non-optimal configuration: consider an odd number of servers");
        }
        Ok(())
    }
}

/// `minSessionTimeout`/`maxSessionTimeout`: -1 is ZooKeeper's "use the default"; other
/// negative values are refused.
fn session_timeout(n: i64, bad: &dyn Fn(&str) -> ConfigError) -> Result<i64, ConfigError> {
    if n < -1 {
        Err(bad("must be -1 (the default) or a timeout in milliseconds"))
    } else {
        Ok(n)
    }
}

fn port(s: &str) -> Option<u16> {
    s.trim().parse::<u16>().ok()
}

/// Java's `String.split`: trailing empty strings removed.
fn java_split(s: &str, sep: char) -> Vec<&str> {
    let mut parts: Vec<&str> = s.split(sep).collect();
    while parts.len() > 1 && parts.last() == Some(&"") {
        parts.pop();
    }
    parts
}

/// ZooKeeper's `ConfigUtils.getHostAndPort`: `[ipv6]:a:b` or `host:a:b`.
fn host_and_ports(s: &str) -> Result<Vec<String>, String> {
    if let Some(rest) = s.strip_prefix('[') {
        let close = rest
            .find(']')
            .ok_or_else(|| format!("{s} starts with '[' but has no matching ']:'"))?;
        let host = &rest[..close];
        let after = &rest[close + 1..];
        let Some(ports) = after.strip_prefix(':') else {
            return Err(format!("{s} doesn't have a port after colon"));
        };
        if ports.is_empty() {
            return Err(format!("{s} doesn't have a port after colon"));
        }
        let mut out = vec![host.to_string()];
        out.extend(java_split(ports, ':').into_iter().map(str::to_string));
        Ok(out)
    } else {
        Ok(java_split(s, ':').into_iter().map(str::to_string).collect())
    }
}

/// A `server.N` value, by ZooKeeper's `QuorumServer` rules.
fn parse_server(sid: u64, value: &str) -> Result<QuorumServer, String> {
    let wrong = "does not have the form host:port:port[:type][;[clientHost:]clientPort]";
    let halves = java_split(value, ';');
    if halves.len() > 2 {
        return Err(wrong.into());
    }
    let client_addr = match halves.get(1) {
        Some(client) => {
            let parts = host_and_ports(client)?;
            if parts.len() > 2 {
                return Err(wrong.into());
            }
            let p = port(parts.last().map(String::as_str).unwrap_or(""))
                .ok_or_else(|| format!("client port {} is not a port", client))?;
            let host = if parts.len() == 2 {
                parts[0].clone()
            } else {
                "0.0.0.0".to_string()
            };
            Some(HostPort { host, port: p })
        }
        None => None,
    };
    if halves[0].contains('|') {
        return Err("multiple addresses per server (multiAddress) are not supported".into());
    }
    let parts = host_and_ports(halves[0])?;
    if parts.len() < 3 || parts.len() > 4 {
        return Err(wrong.into());
    }
    let quorum_port =
        port(&parts[1]).ok_or_else(|| format!("quorum port {} is not a port", parts[1]))?;
    let election_port =
        port(&parts[2]).ok_or_else(|| format!("election port {} is not a port", parts[2]))?;
    if quorum_port == election_port {
        return Err(format!(
            "quorum and election port must be different (server.{sid})"
        ));
    }
    let peer_type = match parts.get(3) {
        Some(t) => PeerType::parse(t).ok_or_else(|| format!("unrecognised peer type {t}"))?,
        None => PeerType::Participant,
    };
    Ok(QuorumServer {
        sid,
        host: parts[0].clone(),
        quorum_port,
        election_port,
        peer_type,
        client_addr,
    })
}

/// One `key=value` of a properties file, with the line it starts on.
struct Entry {
    line: usize,
    key: String,
    value: String,
}

/// Java's `Properties.load` on `text` (keys and values trimmed, as `QuorumPeerConfig` trims
/// them). A repeated key keeps its last value, at the place of its last occurrence.
fn properties(text: &str) -> Result<Vec<Entry>, ConfigError> {
    let mut out: Vec<Entry> = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((i, raw)) = lines.next() {
        let start = i + 1;
        let first = raw.trim_start_matches([' ', '\t', '\x0c']);
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        // Join continuation lines: an odd number of trailing backslashes continues.
        let mut logical = String::new();
        let mut current = first.to_string();
        loop {
            let trailing = current.chars().rev().take_while(|&ch| ch == '\\').count();
            if trailing % 2 == 1 {
                current.pop();
                logical.push_str(&current);
                match lines.next() {
                    Some((_, next)) => {
                        current = next.trim_start_matches([' ', '\t', '\x0c']).to_string()
                    }
                    None => break,
                }
            } else {
                logical.push_str(&current);
                break;
            }
        }
        let (key, value) = split_key_value(&logical);
        let key = unescape(key, start)?.trim().to_string();
        let value = unescape(value, start)?.trim().to_string();
        out.retain(|e| e.key != key);
        out.push(Entry {
            line: start,
            key,
            value,
        });
    }
    Ok(out)
}

/// Splits a logical line at the first unescaped `=`, `:` or whitespace.
fn split_key_value(line: &str) -> (&str, &str) {
    let bytes = line.as_bytes();
    let mut i = 0;
    let mut escaped = false;
    while i < bytes.len() {
        let b = bytes[i];
        if escaped {
            escaped = false;
        } else if b == b'\\' {
            escaped = true;
        } else if matches!(b, b'=' | b':' | b' ' | b'\t' | b'\x0c') {
            break;
        }
        i += 1;
    }
    let key = &line[..i];
    let mut rest = &line[i..];
    rest = rest.trim_start_matches([' ', '\t', '\x0c']);
    if let Some(r) = rest.strip_prefix(['=', ':']) {
        rest = r.trim_start_matches([' ', '\t', '\x0c']);
    }
    (key, rest)
}

/// Java properties escapes: `\t \n \r \f`, `\u` followed by four hex digits, and `\x` for
/// any other `x`.
fn unescape(s: &str, line: usize) -> Result<String, ConfigError> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(ch) = chars.next() {
        if ch != '\\' {
            out.push(ch);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let code = (hex.len() == 4)
                    .then(|| u32::from_str_radix(&hex, 16).ok())
                    .flatten()
                    .and_then(char::from_u32)
                    .ok_or_else(|| ConfigError::Syntax {
                        line,
                        message: format!("malformed \\uxxxx encoding \\u{hex}"),
                    })?;
                out.push(code);
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

/// What the server needs of a configuration, in the types it runs with.
impl ZkConfig {
    /// `tickTime`.
    pub fn tick_time(&self) -> std::time::Duration {
        std::time::Duration::from_millis(u64::from(self.tick_time_ms))
    }

    /// `minSessionTimeout`.
    pub fn min_session_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(u64::from(self.min_session_timeout_ms))
    }

    /// `maxSessionTimeout`.
    pub fn max_session_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_millis(u64::from(self.max_session_timeout_ms))
    }

    /// The server id the server runs as: `myid`, or 1 for a standalone server without one.
    pub fn server_id(&self) -> u64 {
        self.my_id.unwrap_or(1)
    }

    /// Whether server `sid` is an observer.
    pub fn is_observer(&self, sid: u64) -> bool {
        self.servers
            .get(&sid)
            .is_some_and(|s| s.peer_type == PeerType::Observer)
    }

    /// The value of a key this crate does not know (ZooKeeper keeps those as system
    /// properties `zookeeper.<key>`), e.g. `znode.container.checkIntervalMs`.
    pub fn unknown_value(&self, key: &str) -> Option<&str> {
        self.unknown
            .iter()
            .rev()
            .find(|(k, _)| k == key || k.strip_prefix("zookeeper.") == Some(key))
            .map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> ZkConfig {
        ZkConfig::parse(text).expect("parses")
    }

    #[test]
    fn defaults_are_zookeeper_3_8s() {
        let c = parse("dataDir=/var/lib/zk\n");
        assert_eq!(c.tick_time_ms, 3000);
        assert_eq!(c.init_limit, 0);
        assert_eq!(c.sync_limit, 0);
        assert_eq!(c.data_log_dir, PathBuf::from("/var/lib/zk"));
        assert_eq!(c.client_port, None);
        assert_eq!(c.max_client_cnxns, 60);
        assert_eq!(c.min_session_timeout_ms, 6000);
        assert_eq!(c.max_session_timeout_ms, 60000);
        assert_eq!(c.snap_count, 100_000);
        assert_eq!(c.snap_retain_count, 3);
        assert_eq!(c.purge_interval_hours, 0);
        assert_eq!(c.global_outstanding_limit, 1000);
        assert_eq!(c.jute_max_buffer, 0xfffff);
        assert!(c.standalone_enabled);
        assert!(!c.reconfig_enabled);
        assert_eq!(c.peer_type, PeerType::Participant);
        assert!(c.is_standalone());
    }

    #[test]
    fn data_dir_is_required() {
        assert!(matches!(
            ZkConfig::parse("tickTime=2000\n"),
            Err(ConfigError::Missing { key: "dataDir" })
        ));
    }

    #[test]
    fn data_log_dir_defaults_to_data_dir_and_can_be_set() {
        let c = parse("dataDir=/d\ndataLogDir=/l\n");
        assert_eq!(c.data_dir, PathBuf::from("/d"));
        assert_eq!(c.data_log_dir, PathBuf::from("/l"));
    }

    #[test]
    fn relative_paths_are_kept_relative_to_the_working_directory() {
        let c = parse("dataDir=data\n");
        assert_eq!(c.data_dir, PathBuf::from("data"));
        assert!(c.data_dir.is_relative());
    }

    #[test]
    fn tick_time_zero_is_not_set() {
        assert!(matches!(
            ZkConfig::parse("dataDir=/d\ntickTime=0\n"),
            Err(ConfigError::Missing { key: "tickTime" })
        ));
    }

    #[test]
    fn session_timeouts_default_to_two_and_twenty_ticks() {
        let c = parse("dataDir=/d\ntickTime=200\n");
        assert_eq!(c.min_session_timeout_ms, 400);
        assert_eq!(c.max_session_timeout_ms, 4000);
        let c = parse("dataDir=/d\ntickTime=200\nminSessionTimeout=-1\nmaxSessionTimeout=9000\n");
        assert_eq!(c.min_session_timeout_ms, 400);
        assert_eq!(c.max_session_timeout_ms, 9000);
    }

    #[test]
    fn min_session_timeout_larger_than_max_is_refused() {
        let e = ZkConfig::parse("dataDir=/d\nminSessionTimeout=5000\nmaxSessionTimeout=4000\n")
            .unwrap_err();
        assert!(e.to_string().contains("minSessionTimeout"), "{e}");
        // Against the default max too: 20 ticks of 100 ms.
        assert!(ZkConfig::parse("dataDir=/d\ntickTime=100\nminSessionTimeout=3000\n").is_err());
    }

    #[test]
    fn client_port_address_without_client_port_is_refused() {
        assert!(matches!(
            ZkConfig::parse("dataDir=/d\nclientPortAddress=127.0.0.1\n"),
            Err(ConfigError::Inconsistent(_))
        ));
        let c = parse("dataDir=/d\nclientPort=2181\nclientPortAddress=127.0.0.1\n");
        assert_eq!(
            c.client_address(),
            Some(HostPort {
                host: "127.0.0.1".into(),
                port: 2181
            })
        );
        let c = parse("dataDir=/d\nclientPort=2181\n");
        assert_eq!(c.client_address().map(|a| a.host), Some("0.0.0.0".into()));
    }

    #[test]
    fn a_bad_client_port_names_its_line_and_key() {
        let e = ZkConfig::parse("dataDir=/d\n\nclientPort=70000\n").unwrap_err();
        match e {
            ConfigError::InvalidValue { line, key, .. } => {
                assert_eq!(line, 3);
                assert_eq!(key, "clientPort");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn secure_client_port_is_refused_with_a_clear_error() {
        let e = ZkConfig::parse("dataDir=/d\nsecureClientPort=2281\n").unwrap_err();
        assert!(
            matches!(&e, ConfigError::Unsupported { key, line: 2, .. } if key == "secureClientPort")
        );
        assert!(e.to_string().contains("TLS"), "{e}");
    }

    #[test]
    fn max_client_cnxns_is_per_ip_and_zero_or_negative_means_no_limit() {
        assert_eq!(
            parse("dataDir=/d\nmaxClientCnxns=10\n").max_client_cnxns,
            10
        );
        assert_eq!(parse("dataDir=/d\nmaxClientCnxns=0\n").max_client_cnxns, 0);
        assert_eq!(parse("dataDir=/d\nmaxClientCnxns=-5\n").max_client_cnxns, 0);
    }

    #[test]
    fn snap_count_below_two_is_raised_to_two() {
        assert_eq!(parse("dataDir=/d\nsnapCount=1\n").snap_count, 2);
        assert_eq!(parse("dataDir=/d\nsnapCount=500\n").snap_count, 500);
    }

    #[test]
    fn autopurge_snap_retain_count_below_three_is_raised_to_three() {
        assert_eq!(
            parse("dataDir=/d\nautopurge.snapRetainCount=1\n").snap_retain_count,
            3
        );
        assert_eq!(
            parse("dataDir=/d\nautopurge.snapRetainCount=7\n").snap_retain_count,
            7
        );
    }

    #[test]
    fn autopurge_purge_interval_is_in_hours_and_zero_is_off() {
        assert_eq!(
            parse("dataDir=/d\nautopurge.purgeInterval=24\n").purge_interval_hours,
            24
        );
        assert_eq!(
            parse("dataDir=/d\nautopurge.purgeInterval=0\n").purge_interval_hours,
            0
        );
    }

    #[test]
    fn four_letter_whitelist_defaults_to_srvr_only() {
        let c = parse("dataDir=/d\n");
        assert!(c.four_letter_whitelist.is_enabled("srvr"));
        assert!(!c.four_letter_whitelist.is_enabled("ruok"));
        assert!(!c.four_letter_whitelist.is_enabled("mntr"));
    }

    #[test]
    fn four_letter_whitelist_star_enables_every_word() {
        let c = parse("dataDir=/d\n4lw.commands.whitelist=*\n");
        for w in [
            "ruok", "srvr", "stat", "mntr", "conf", "cons", "envi", "isro", "wchs",
        ] {
            assert!(c.four_letter_whitelist.is_enabled(w), "{w}");
        }
    }

    #[test]
    fn four_letter_whitelist_lists_words_and_always_adds_srvr() {
        let c = parse("dataDir=/d\n4lw.commands.whitelist=ruok, stat ,\n");
        assert!(c.four_letter_whitelist.is_enabled("ruok"));
        assert!(c.four_letter_whitelist.is_enabled("stat"));
        assert!(c.four_letter_whitelist.is_enabled("srvr"));
        assert!(!c.four_letter_whitelist.is_enabled("mntr"));
    }

    #[test]
    fn global_outstanding_limit_and_jute_maxbuffer_are_read() {
        let c = parse("dataDir=/d\nglobalOutstandingLimit=50\njute.maxbuffer=4194304\n");
        assert_eq!(c.global_outstanding_limit, 50);
        assert_eq!(c.jute_max_buffer, 4_194_304);
    }

    #[test]
    fn admin_and_metrics_provider_keys_are_ignored() {
        let c = parse(
            "dataDir=/d\nadmin.enableServer=false\nadmin.serverPort=8080\n\
             metricsProvider.className=org.example.Foo\n",
        );
        assert_eq!(c.ignored.len(), 3);
        assert!(c.unknown.is_empty());
    }

    #[test]
    fn unknown_keys_are_kept_in_file_order() {
        let c = parse("dataDir=/d\nfoo.bar=1\nlocalSessionsEnabled=true\n");
        assert_eq!(
            c.unknown,
            vec![
                ("foo.bar".to_string(), "1".to_string()),
                ("localSessionsEnabled".to_string(), "true".to_string())
            ]
        );
    }

    #[test]
    fn booleans_are_true_or_false_in_any_case() {
        let c = parse(
            "dataDir=/d\ninitLimit=1\nsyncLimit=1\nreconfigEnabled=TRUE\nstandaloneEnabled=False\n\
             server.1=a:1:2\n",
        );
        assert!(c.reconfig_enabled);
        assert!(!c.standalone_enabled);
        assert!(matches!(
            ZkConfig::parse("dataDir=/d\nreconfigEnabled=yes\n"),
            Err(ConfigError::InvalidValue { line: 2, .. })
        ));
    }

    #[test]
    fn election_alg_other_than_3_is_refused() {
        assert!(ZkConfig::parse("dataDir=/d\nelectionAlg=3\n").is_ok());
        assert!(ZkConfig::parse("dataDir=/d\nelectionAlg=1\n").is_err());
    }

    #[test]
    fn peer_type_is_participant_or_observer() {
        assert_eq!(
            parse("dataDir=/d\npeerType=OBSERVER\n").peer_type,
            PeerType::Observer
        );
        assert!(ZkConfig::parse("dataDir=/d\npeerType=voter\n").is_err());
    }

    const THREE: &str = "tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir=/d\nclientPort=2181\n\
        server.1=10.0.0.1:2888:3888\nserver.2=10.0.0.2:2888:3888:participant\n\
        server.3=10.0.0.3:2888:3888;2182\n";

    #[test]
    fn server_lines_give_the_membership() {
        let c = parse(THREE);
        assert_eq!(c.servers.len(), 3);
        let s1 = &c.servers[&1];
        assert_eq!(s1.host, "10.0.0.1");
        assert_eq!((s1.quorum_port, s1.election_port), (2888, 3888));
        assert_eq!(s1.client_addr, None);
        let s3 = &c.servers[&3];
        assert_eq!(
            s3.client_addr,
            Some(HostPort {
                host: "0.0.0.0".into(),
                port: 2182
            })
        );
        assert!(c.is_distributed());
        assert!(!c.is_standalone());
        assert_eq!(
            c.membership(),
            "server.1=10.0.0.1:2888:3888:participant\n\
             server.2=10.0.0.2:2888:3888:participant\n\
             server.3=10.0.0.3:2888:3888:participant;0.0.0.0:2182\nversion=0"
        );
    }

    #[test]
    fn server_line_with_observer_type_and_client_address() {
        let c = parse(
            "dataDir=/d\ninitLimit=5\nsyncLimit=2\nserver.1=a:1:2\nserver.2=b:1:2\n\
             server.3=[::1]:1:2:observer;[::1]:2181\n",
        );
        let s3 = &c.servers[&3];
        assert_eq!(s3.host, "::1");
        assert_eq!(s3.peer_type, PeerType::Observer);
        assert_eq!(
            s3.client_addr,
            Some(HostPort {
                host: "::1".into(),
                port: 2181
            })
        );
        assert_eq!(c.participants().count(), 2);
        assert_eq!(c.observers().count(), 1);
    }

    #[test]
    fn server_line_needs_quorum_and_election_ports() {
        for bad in [
            "server.1=a:2888",
            "server.1=a:2888:3888:observer:x",
            "server.1=a:x:3888",
            "server.1=a:2888:3888:voter",
            "server.1=a:2888:2888",
            "server.1=a:1:2;b:c:3",
            "server.1=a:1:2;3;4",
            "server.x=a:1:2",
            "server.1=a:1:2|b:1:2",
        ] {
            let e = ZkConfig::parse(&format!("dataDir=/d\n{bad}\n")).unwrap_err();
            assert!(
                matches!(&e, ConfigError::InvalidValue { line: 2, .. }),
                "{bad}: {e:?}"
            );
        }
    }

    #[test]
    fn a_quorum_needs_init_limit_and_sync_limit() {
        let e = ZkConfig::parse("dataDir=/d\nsyncLimit=2\nserver.1=a:1:2\nserver.2=b:1:2\n")
            .unwrap_err();
        assert!(matches!(e, ConfigError::Missing { key: "initLimit" }));
        let e = ZkConfig::parse("dataDir=/d\ninitLimit=2\nserver.1=a:1:2\nserver.2=b:1:2\n")
            .unwrap_err();
        assert!(matches!(e, ConfigError::Missing { key: "syncLimit" }));
    }

    #[test]
    fn a_single_server_line_runs_standalone_unless_standalone_is_disabled() {
        let c = parse("dataDir=/d\nserver.1=a:1:2\n");
        assert!(c.is_standalone());
        let c = parse(
            "dataDir=/d\ninitLimit=1\nsyncLimit=1\nstandaloneEnabled=false\nserver.1=a:1:2\n",
        );
        assert!(c.is_distributed());
    }

    #[test]
    fn observers_without_a_quorum_are_refused() {
        assert!(ZkConfig::parse("dataDir=/d\nserver.1=a:1:2:observer\n").is_err());
        assert!(ZkConfig::parse("dataDir=/d\nserver.1=a:1:2\nserver.2=b:1:2:observer\n").is_err());
    }

    #[test]
    fn standalone_disabled_without_servers_is_refused() {
        assert!(ZkConfig::parse("dataDir=/d\nstandaloneEnabled=false\n").is_err());
    }

    #[test]
    fn my_id_must_be_in_the_server_list() {
        let mut c = parse(THREE);
        assert!(c.clone().apply_my_id(2).is_ok());
        assert!(matches!(
            c.apply_my_id(9),
            Err(ConfigError::Inconsistent(_))
        ));
    }

    #[test]
    fn my_server_line_client_address_must_agree_with_client_port() {
        // server.3 says ;2182 but clientPort is 2181.
        let mut c = parse(THREE);
        assert!(c.apply_my_id(3).is_err());
        let mut c = parse(&THREE.replace("clientPort=2181\n", ""));
        c.apply_my_id(3).expect("no static client port");
        assert_eq!(c.client_address().map(|a| a.port), Some(2182));
    }

    #[test]
    fn my_server_line_type_wins_over_peer_type() {
        let mut c = parse(&format!(
            "{THREE}server.4=10.0.0.4:2888:3888:observer\npeerType=participant\n"
        ));
        c.apply_my_id(4).expect("valid");
        assert_eq!(c.peer_type, PeerType::Observer);
    }

    #[test]
    fn java_properties_syntax_is_understood() {
        let c = parse(
            "# comment\n! also a comment\n   \ndataDir = /d\ntickTime: 100\nclientPort 2181\n\
             4lw.commands.whitelist=ruok,\\\n    stat\nfoo\\u0041=b\\tc\ntickTime=200\n",
        );
        assert_eq!(c.data_dir, PathBuf::from("/d"));
        assert_eq!(c.tick_time_ms, 200, "the last of repeated keys wins");
        assert_eq!(c.client_port, Some(2181));
        assert!(c.four_letter_whitelist.is_enabled("stat"));
        assert_eq!(c.unknown, vec![("fooA".to_string(), "b\tc".to_string())]);
        assert!(matches!(
            ZkConfig::parse("dataDir=/d\nx=\\u12\n"),
            Err(ConfigError::Syntax { line: 2, .. })
        ));
    }

    #[test]
    fn negative_or_huge_integers_are_refused() {
        assert!(ZkConfig::parse("dataDir=/d\ntickTime=-1\n").is_err());
        assert!(ZkConfig::parse("dataDir=/d\ninitLimit=99999999999\n").is_err());
        assert!(ZkConfig::parse("dataDir=/d\nminSessionTimeout=-2\n").is_err());
    }

    #[test]
    fn dynamic_config_files_and_hierarchical_quorums_are_refused() {
        assert!(matches!(
            ZkConfig::parse("dataDir=/d\ndynamicConfigFile=/x\n"),
            Err(ConfigError::Unsupported { .. })
        ));
        assert!(matches!(
            ZkConfig::parse("dataDir=/d\ngroup.1=1:2:3\n"),
            Err(ConfigError::Unsupported { .. })
        ));
    }

    /// The zoo.cfg `ha_testkit::ZkEnsembleBuilder` writes (see its `prepare`), for a
    /// three-server ensemble, and its `myid`.
    fn testkit_ensemble_cfg(dir: &Path, sid: u64) -> PathBuf {
        let data = dir.join("data");
        std::fs::create_dir_all(&data).unwrap();
        let cfg = format!(
            "tickTime=200\ninitLimit=10\nsyncLimit=5\ndataDir={}\nclientPort=40001\n\
             clientPortAddress=127.0.0.1\n4lw.commands.whitelist=*\nadmin.enableServer=false\n\
             server.1=127.0.0.1:40002:40003\nserver.2=127.0.0.1:40005:40006\n\
             server.3=127.0.0.1:40008:40009\n",
            data.display()
        );
        let path = dir.join("zoo.cfg");
        std::fs::write(&path, cfg).unwrap();
        std::fs::write(data.join("myid"), format!("{sid}\n")).unwrap();
        path
    }

    #[test]
    fn the_zoo_cfg_of_ha_testkit_loads_with_its_myid() {
        let dir = tempfile::tempdir().unwrap();
        let path = testkit_ensemble_cfg(dir.path(), 2);
        let c = ZkConfig::load(&path).expect("loads");
        assert_eq!(c.my_id, Some(2));
        assert_eq!(c.tick_time_ms, 200);
        assert_eq!((c.init_limit, c.sync_limit), (10, 5));
        assert_eq!(c.data_dir, dir.path().join("data"));
        assert_eq!(c.data_log_dir, c.data_dir);
        assert_eq!(
            c.client_address(),
            Some(HostPort {
                host: "127.0.0.1".into(),
                port: 40001
            })
        );
        assert_eq!(c.min_session_timeout_ms, 400);
        assert_eq!(c.max_session_timeout_ms, 4000);
        assert!(c.four_letter_whitelist.is_enabled("mntr"));
        assert_eq!(
            c.ignored,
            vec![("admin.enableServer".to_string(), "false".to_string())]
        );
        assert!(c.unknown.is_empty());
        assert_eq!(c.servers.len(), 3);
        assert_eq!(c.servers[&3].quorum_port, 40008);
        assert!(c.is_distributed());
    }

    #[test]
    fn the_standalone_zoo_cfg_of_ha_testkit_needs_no_myid() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let path = dir.path().join("zoo.cfg");
        std::fs::write(
            &path,
            format!(
                "tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir={}\nclientPort=40001\n\
                 clientPortAddress=127.0.0.1\n4lw.commands.whitelist=*\nadmin.enableServer=false\n",
                data.display()
            ),
        )
        .unwrap();
        let c = ZkConfig::load(&path).expect("loads");
        assert!(c.is_standalone());
        assert_eq!(c.my_id, None);
    }

    #[test]
    fn a_quorum_without_myid_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = testkit_ensemble_cfg(dir.path(), 1);
        std::fs::remove_file(dir.path().join("data/myid")).unwrap();
        assert!(matches!(
            ZkConfig::load(&path),
            Err(ConfigError::MyId { .. })
        ));
    }

    #[test]
    fn myid_that_is_not_a_number_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = testkit_ensemble_cfg(dir.path(), 1);
        std::fs::write(dir.path().join("data/myid"), "one\n").unwrap();
        assert!(matches!(
            ZkConfig::load(&path),
            Err(ConfigError::MyId { .. })
        ));
    }

    #[test]
    fn a_missing_file_is_an_io_error() {
        assert!(matches!(
            ZkConfig::load(Path::new("/nonexistent/zoo.cfg")),
            Err(ConfigError::Io { .. })
        ));
    }
}
