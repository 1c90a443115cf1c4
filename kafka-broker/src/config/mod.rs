//! The broker's `server.properties`, with Kafka's own keys: [`ServerSettings::from_properties`]
//! reads a map of properties (from [`properties::parse`], with command-line overrides put in
//! the same map) into typed settings, reporting keys it does not know and refusing bad values
//! with an error naming the key; [`ServerSettings::node_config`] turns them into a
//! [`NodeConfig`]. Pure: no file, socket or clock is touched.
//!
//! ```
//! use kafka_broker::config::{properties, ServerSettings};
//!
//! let text = "broker.id=1\nlisteners=PLAINTEXT://127.0.0.1:9092\nzookeeper.connect=zk:2181\n";
//! let mut props = properties::parse(text).unwrap();
//! props.insert("min.insync.replicas".into(), "2".into()); // a command-line override
//! let (settings, unknown) = ServerSettings::from_properties(&props).unwrap();
//! assert!(unknown.is_empty());
//! assert_eq!(settings.broker_id, 1);
//! assert_eq!(settings.min_insync_replicas, 2);
//! ```

pub mod properties;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use kafka_replication::log::{FileLogConfig, RetentionPolicy};

use kafka_group_coordinator::GroupCoordinatorConfig;

use crate::group::GroupConfig;
use crate::node::{AutoCreateConfig, ControlledShutdownConfig, LogPlacement, NodeConfig, LISTENER};

/// A setting that is missing or does not hold a valid value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A required setting is missing.
    #[error("{key} is required")]
    Missing {
        /// The key.
        key: String,
    },
    /// A setting's value is not valid.
    #[error("{key}={value:?}: {reason}")]
    Invalid {
        /// The key.
        key: String,
        /// The value given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
}

fn invalid(key: &str, value: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_owned(),
        value: value.to_owned(),
        reason: reason.into(),
    }
}

/// One listener, `NAME://host:port` (an empty host: every interface, as in Kafka).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// The listener name (only `PLAINTEXT` is served).
    pub name: String,
    /// The host; empty for every interface.
    pub host: String,
    /// The port.
    pub port: u16,
}

impl Listener {
    /// Whether the host names every interface (empty, `0.0.0.0` or `::`).
    pub fn is_wildcard(&self) -> bool {
        self.host.is_empty()
            || self
                .host
                .parse::<IpAddr>()
                .is_ok_and(|ip| ip.is_unspecified())
    }

    /// The address to bind when the host is an IP literal (or empty: `0.0.0.0`); `None` for
    /// a host name, which the caller resolves.
    pub fn ip_addr(&self) -> Option<SocketAddr> {
        if self.host.is_empty() {
            return Some(SocketAddr::from(([0, 0, 0, 0], self.port)));
        }
        self.host
            .parse::<IpAddr>()
            .ok()
            .map(|ip| SocketAddr::new(ip, self.port))
    }
}

/// Parses one `listeners` / `advertised.listeners` value: exactly one `PLAINTEXT://host:port`
/// (IPv6 hosts in brackets).
fn parse_listener(key: &str, value: &str) -> Result<Listener, ConfigError> {
    let items: Vec<&str> = value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let [item] = items.as_slice() else {
        return Err(invalid(
            key,
            value,
            "exactly one listener is supported (PLAINTEXT://host:port)",
        ));
    };
    let Some((name, address)) = item.split_once("://") else {
        return Err(invalid(key, value, "expected NAME://host:port"));
    };
    if name != LISTENER {
        return Err(invalid(
            key,
            value,
            format!("only the {LISTENER} listener is supported"),
        ));
    }
    let Some((host, port)) = address.rsplit_once(':') else {
        return Err(invalid(key, value, "expected NAME://host:port"));
    };
    let host = match host.strip_prefix('[') {
        Some(h) => h
            .strip_suffix(']')
            .ok_or_else(|| invalid(key, value, "unclosed [ in the host"))?,
        None if host.contains(':') => {
            return Err(invalid(key, value, "an IPv6 host must be in brackets"))
        }
        None => host,
    };
    let port = port
        .parse::<u16>()
        .map_err(|_| invalid(key, value, "the port must be a number from 0 to 65535"))?;
    Ok(Listener {
        name: name.to_owned(),
        host: host.to_owned(),
        port,
    })
}

/// Every key [`ServerSettings`] reads.
pub const KNOWN_KEYS: &[&str] = &[
    "broker.id",
    "broker.rack",
    "listeners",
    "advertised.listeners",
    "log.dirs",
    "log.dir",
    "zookeeper.connect",
    "zookeeper.session.timeout.ms",
    "zookeeper.connection.timeout.ms",
    "num.network.threads",
    "num.io.threads",
    "queued.max.requests",
    "socket.request.max.bytes",
    "connections.max.idle.ms",
    "replica.lag.time.max.ms",
    "replica.fetch.wait.max.ms",
    "replica.fetch.min.bytes",
    "replica.fetch.max.bytes",
    "replica.fetch.response.max.bytes",
    "replica.fetch.backoff.ms",
    "replica.socket.timeout.ms",
    "min.insync.replicas",
    "unclean.leader.election.enable",
    "auto.create.topics.enable",
    "num.partitions",
    "default.replication.factor",
    "delete.topic.enable",
    "auto.leader.rebalance.enable",
    "leader.imbalance.per.broker.percentage",
    "leader.imbalance.check.interval.seconds",
    "controller.socket.timeout.ms",
    "controlled.shutdown.enable",
    "controlled.shutdown.max.retries",
    "controlled.shutdown.retry.backoff.ms",
    "log.segment.bytes",
    "log.retention.ms",
    "log.retention.minutes",
    "log.retention.hours",
    "log.retention.bytes",
    "log.retention.check.interval.ms",
    "offsets.topic.num.partitions",
    "offsets.topic.replication.factor",
    "offsets.retention.minutes",
    "offsets.retention.check.interval.ms",
    "offsets.commit.timeout.ms",
    "offset.metadata.max.bytes",
    "group.min.session.timeout.ms",
    "group.max.session.timeout.ms",
    "group.initial.rebalance.delay.ms",
    "group.max.size",
];

/// The broker's settings, each under its Kafka key, with Kafka's defaults unless noted.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerSettings {
    /// `broker.id` (required, ≥ 0).
    pub broker_id: i32,
    /// `broker.rack`.
    pub rack: Option<String>,
    /// `listeners`: one `PLAINTEXT://host:port`. Default `PLAINTEXT://127.0.0.1:9092` (Kafka's
    /// `PLAINTEXT://:9092` listens on every interface, which needs `advertised.listeners`
    /// here).
    pub listener: Listener,
    /// `advertised.listeners`: what other brokers and clients are told; default the listener.
    /// A wildcard listener needs one.
    pub advertised_listener: Option<Listener>,
    /// `log.dirs` (or `log.dir`): one directory. Default `data`.
    pub log_dir: PathBuf,
    /// `zookeeper.connect`, `host:port[,host:port…][/chroot]`.
    pub zookeeper_connect: Option<String>,
    /// `zookeeper.session.timeout.ms` (18000).
    pub zookeeper_session_timeout_ms: u64,
    /// `zookeeper.connection.timeout.ms` (default: the session timeout).
    pub zookeeper_connection_timeout_ms: u64,
    /// `num.network.threads` (3).
    pub num_network_threads: usize,
    /// `num.io.threads` (8).
    pub num_io_threads: usize,
    /// `queued.max.requests` (500).
    pub queued_max_requests: usize,
    /// `socket.request.max.bytes` (104857600).
    pub socket_request_max_bytes: usize,
    /// `connections.max.idle.ms` (600000).
    pub connections_max_idle_ms: u64,
    /// `replica.lag.time.max.ms` (30000).
    pub replica_lag_time_max_ms: u64,
    /// `replica.fetch.wait.max.ms` (500).
    pub replica_fetch_wait_max_ms: i32,
    /// `replica.fetch.min.bytes` (1).
    pub replica_fetch_min_bytes: i32,
    /// `replica.fetch.max.bytes` (1048576).
    pub replica_fetch_max_bytes: i32,
    /// `replica.fetch.response.max.bytes` (10485760).
    pub replica_fetch_response_max_bytes: i32,
    /// `replica.fetch.backoff.ms` (1000).
    pub replica_fetch_backoff_ms: u64,
    /// `replica.socket.timeout.ms` (30000): a follower's wait for one answer of its leader.
    pub replica_socket_timeout_ms: u64,
    /// `min.insync.replicas` (1).
    pub min_insync_replicas: usize,
    /// `unclean.leader.election.enable` (false): the default of topics without their own.
    pub unclean_leader_election_enable: bool,
    /// `auto.create.topics.enable` (true).
    pub auto_create_topics_enable: bool,
    /// `num.partitions` (1): partitions of an auto-created topic.
    pub num_partitions: i32,
    /// `default.replication.factor` (1): replicas of an auto-created topic's partitions.
    pub default_replication_factor: i32,
    /// `delete.topic.enable` (true).
    pub delete_topic_enable: bool,
    /// `auto.leader.rebalance.enable` (true).
    pub auto_leader_rebalance_enable: bool,
    /// `leader.imbalance.per.broker.percentage` (10).
    pub leader_imbalance_per_broker_percentage: u32,
    /// `leader.imbalance.check.interval.seconds` (300).
    pub leader_imbalance_check_interval_seconds: u64,
    /// `controller.socket.timeout.ms` (30000): the controller's wait for one broker's answer.
    pub controller_socket_timeout_ms: u64,
    /// `controlled.shutdown.enable` (true).
    pub controlled_shutdown_enable: bool,
    /// `controlled.shutdown.max.retries` (3).
    pub controlled_shutdown_max_retries: u32,
    /// `controlled.shutdown.retry.backoff.ms` (5000).
    pub controlled_shutdown_retry_backoff_ms: u64,
    /// `log.segment.bytes` (1 GiB; at least 1024 here, at most 4 GiB).
    pub log_segment_bytes: u64,
    /// `log.retention.ms`, else `log.retention.minutes`, else `log.retention.hours` (168);
    /// -1 keeps records for ever.
    pub log_retention_ms: i64,
    /// `log.retention.bytes` (-1: no size limit).
    pub log_retention_bytes: i64,
    /// `log.retention.check.interval.ms` (300000).
    pub log_retention_check_interval_ms: u64,
    /// `offsets.topic.num.partitions` (50).
    pub offsets_topic_num_partitions: i32,
    /// `offsets.topic.replication.factor` (3; fewer when fewer brokers are registered).
    pub offsets_topic_replication_factor: i32,
    /// `offsets.retention.minutes` (10080: 7 days).
    pub offsets_retention_minutes: i64,
    /// `offsets.retention.check.interval.ms` (600000).
    pub offsets_retention_check_interval_ms: i64,
    /// `offsets.commit.timeout.ms` (5000).
    pub offsets_commit_timeout_ms: i32,
    /// `offset.metadata.max.bytes` (4096).
    pub offset_metadata_max_bytes: usize,
    /// `group.min.session.timeout.ms` (6000).
    pub group_min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms` (1800000).
    pub group_max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms` (3000).
    pub group_initial_rebalance_delay_ms: i32,
    /// `group.max.size` (2147483647).
    pub group_max_size: i32,
}

/// Typed reads of a property map, each error naming its key.
struct Reader<'a> {
    props: &'a BTreeMap<String, String>,
}

impl Reader<'_> {
    fn raw(&self, key: &str) -> Option<&str> {
        self.props
            .get(key)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }

    fn number<T>(&self, key: &str, default: T, min: T) -> Result<T, ConfigError>
    where
        T: std::str::FromStr + PartialOrd + std::fmt::Display,
    {
        let Some(v) = self.raw(key) else {
            return Ok(default);
        };
        let n = v
            .parse::<T>()
            .map_err(|_| invalid(key, v, "not a valid number"))?;
        if n < min {
            return Err(invalid(key, v, format!("must be at least {min}")));
        }
        Ok(n)
    }

    fn boolean(&self, key: &str, default: bool) -> Result<bool, ConfigError> {
        match self.raw(key) {
            None => Ok(default),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
            Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
            Some(v) => Err(invalid(key, v, "expected true or false")),
        }
    }
}

impl ServerSettings {
    /// Reads `props` (Kafka keys). Returns the settings and the keys it does not know, sorted,
    /// for the caller to warn about; a bad value or a missing `broker.id` is an error naming
    /// the key.
    pub fn from_properties(
        props: &BTreeMap<String, String>,
    ) -> Result<(ServerSettings, Vec<String>), ConfigError> {
        let r = Reader { props };
        let broker_id = match r.raw("broker.id") {
            None => {
                return Err(ConfigError::Missing {
                    key: "broker.id".into(),
                })
            }
            Some(v) => v
                .parse::<i32>()
                .ok()
                .filter(|id| *id >= 0)
                .ok_or_else(|| invalid("broker.id", v, "must be a number ≥ 0"))?,
        };
        let listener = match r.raw("listeners") {
            None => Listener {
                name: LISTENER.to_owned(),
                host: "127.0.0.1".to_owned(),
                port: 9092,
            },
            Some(v) => parse_listener("listeners", v)?,
        };
        let advertised_listener = match r.raw("advertised.listeners") {
            None => None,
            Some(v) => {
                let l = parse_listener("advertised.listeners", v)?;
                if l.is_wildcard() {
                    return Err(invalid(
                        "advertised.listeners",
                        v,
                        "cannot advertise a wildcard address; name the host clients connect to",
                    ));
                }
                if l.port == 0 {
                    return Err(invalid(
                        "advertised.listeners",
                        v,
                        "cannot advertise port 0",
                    ));
                }
                Some(l)
            }
        };
        let log_dir = match r
            .raw("log.dirs")
            .map(|v| ("log.dirs", v))
            .or(r.raw("log.dir").map(|v| ("log.dir", v)))
        {
            None => PathBuf::from("data"),
            Some((key, v)) => {
                let dirs: Vec<&str> = v
                    .split(',')
                    .map(str::trim)
                    .filter(|d| !d.is_empty())
                    .collect();
                match dirs.as_slice() {
                    [one] => PathBuf::from(one),
                    _ => return Err(invalid(key, v, "exactly one directory is supported")),
                }
            }
        };
        let zookeeper_session_timeout_ms = r.number("zookeeper.session.timeout.ms", 18_000, 1)?;
        let settings = ServerSettings {
            broker_id,
            rack: r.raw("broker.rack").map(str::to_owned),
            listener,
            advertised_listener,
            log_dir,
            zookeeper_connect: r.raw("zookeeper.connect").map(str::to_owned),
            zookeeper_session_timeout_ms,
            zookeeper_connection_timeout_ms: r.number(
                "zookeeper.connection.timeout.ms",
                zookeeper_session_timeout_ms,
                1,
            )?,
            num_network_threads: r.number("num.network.threads", 3, 1)?,
            num_io_threads: r.number("num.io.threads", 8, 1)?,
            queued_max_requests: r.number("queued.max.requests", 500, 1)?,
            socket_request_max_bytes: r.number("socket.request.max.bytes", 104_857_600, 1)?,
            connections_max_idle_ms: r.number("connections.max.idle.ms", 600_000, 1)?,
            replica_lag_time_max_ms: r.number("replica.lag.time.max.ms", 30_000, 1)?,
            replica_fetch_wait_max_ms: r.number("replica.fetch.wait.max.ms", 500, 0)?,
            replica_fetch_min_bytes: r.number("replica.fetch.min.bytes", 1, 0)?,
            replica_fetch_max_bytes: r.number("replica.fetch.max.bytes", 1 << 20, 0)?,
            replica_fetch_response_max_bytes: r.number(
                "replica.fetch.response.max.bytes",
                10 << 20,
                0,
            )?,
            replica_fetch_backoff_ms: r.number("replica.fetch.backoff.ms", 1_000, 0)?,
            replica_socket_timeout_ms: r.number("replica.socket.timeout.ms", 30_000, 1)?,
            min_insync_replicas: r.number("min.insync.replicas", 1, 1)?,
            unclean_leader_election_enable: r.boolean("unclean.leader.election.enable", false)?,
            auto_create_topics_enable: r.boolean("auto.create.topics.enable", true)?,
            num_partitions: r.number("num.partitions", 1, 1)?,
            default_replication_factor: r.number("default.replication.factor", 1, 1)?,
            delete_topic_enable: r.boolean("delete.topic.enable", true)?,
            auto_leader_rebalance_enable: r.boolean("auto.leader.rebalance.enable", true)?,
            leader_imbalance_per_broker_percentage: r.number(
                "leader.imbalance.per.broker.percentage",
                10,
                0,
            )?,
            leader_imbalance_check_interval_seconds: r.number(
                "leader.imbalance.check.interval.seconds",
                300,
                1,
            )?,
            controller_socket_timeout_ms: r.number("controller.socket.timeout.ms", 30_000, 1)?,
            controlled_shutdown_enable: r.boolean("controlled.shutdown.enable", true)?,
            controlled_shutdown_max_retries: r.number("controlled.shutdown.max.retries", 3, 0)?,
            controlled_shutdown_retry_backoff_ms: r.number(
                "controlled.shutdown.retry.backoff.ms",
                5_000,
                0,
            )?,
            log_segment_bytes: {
                let b: u64 = r.number("log.segment.bytes", 1 << 30, 1_024)?;
                if b > u64::from(u32::MAX) {
                    return Err(invalid(
                        "log.segment.bytes",
                        &b.to_string(),
                        "at most 4294967295 (segment positions are 32-bit)",
                    ));
                }
                b
            },
            // Kafka's precedence: ms, then minutes, then hours.
            log_retention_ms: match (r.raw("log.retention.ms"), r.raw("log.retention.minutes")) {
                (Some(_), _) => r.number("log.retention.ms", -1i64, -1)?,
                (None, Some(_)) => {
                    let m: i64 = r.number("log.retention.minutes", -1, -1)?;
                    if m < 0 {
                        -1
                    } else {
                        m.saturating_mul(60_000)
                    }
                }
                (None, None) => {
                    let h: i64 = r.number("log.retention.hours", 168, -1)?;
                    if h < 0 {
                        -1
                    } else {
                        h.saturating_mul(3_600_000)
                    }
                }
            },
            log_retention_bytes: r.number("log.retention.bytes", -1i64, -1)?,
            log_retention_check_interval_ms: r.number(
                "log.retention.check.interval.ms",
                300_000,
                1,
            )?,
            offsets_topic_num_partitions: r.number("offsets.topic.num.partitions", 50, 1)?,
            offsets_topic_replication_factor: r.number("offsets.topic.replication.factor", 3, 1)?,
            offsets_retention_minutes: r.number("offsets.retention.minutes", 10_080, 1)?,
            offsets_retention_check_interval_ms: r.number(
                "offsets.retention.check.interval.ms",
                600_000,
                1,
            )?,
            offsets_commit_timeout_ms: r.number("offsets.commit.timeout.ms", 5_000, 1)?,
            offset_metadata_max_bytes: r.number("offset.metadata.max.bytes", 4_096, 0)?,
            group_min_session_timeout_ms: r.number("group.min.session.timeout.ms", 6_000, 0)?,
            group_max_session_timeout_ms: r.number("group.max.session.timeout.ms", 1_800_000, 0)?,
            group_initial_rebalance_delay_ms: r.number(
                "group.initial.rebalance.delay.ms",
                3_000,
                0,
            )?,
            group_max_size: r.number("group.max.size", i32::MAX, 1)?,
        };
        let unknown = props
            .keys()
            .filter(|k| !KNOWN_KEYS.contains(&k.as_str()))
            .cloned()
            .collect();
        Ok((settings, unknown))
    }

    /// A wildcard listener (every interface) with no advertised listener: there is no address
    /// to tell other brokers and clients, so this is refused rather than guessed.
    pub fn check_advertised(&self) -> Result<(), ConfigError> {
        if self.listener.is_wildcard() && self.advertised_listener.is_none() {
            let value = format!(
                "{}://{}:{}",
                self.listener.name, self.listener.host, self.listener.port
            );
            return Err(invalid(
                "listeners",
                &value,
                "listens on every interface but advertised.listeners is not set; \
                 set advertised.listeners=PLAINTEXT://<host>:<port>",
            ));
        }
        Ok(())
    }

    /// The [`NodeConfig`] of these settings, listening on `listen` (the listener, resolved).
    pub fn node_config(&self, listen: SocketAddr) -> NodeConfig {
        let mut c = NodeConfig::new(self.broker_id, listen);
        c.advertised_host = self.advertised_listener.as_ref().map(|l| l.host.clone());
        c.advertised_port = self.advertised_listener.as_ref().map(|l| l.port);
        c.rack = self.rack.clone();
        c.logs = LogPlacement::FilesWith(
            self.log_dir.clone(),
            FileLogConfig::default().with_segment_bytes(self.log_segment_bytes),
        );
        c.broker.retention = RetentionPolicy::keep_all()
            .with_retention_ms(self.log_retention_ms)
            .with_retention_bytes(self.log_retention_bytes);
        c.broker.retention_check_interval_ms = self.log_retention_check_interval_ms;
        c.registration_wait =
            crate::glue::holder_wait_for(Duration::from_millis(self.zookeeper_session_timeout_ms));
        let server = &mut c.broker.server;
        server.num_processors = self.num_network_threads;
        server.num_handlers = self.num_io_threads;
        server.request_queue_size = self.queued_max_requests;
        server.max_frame_size = self.socket_request_max_bytes;
        server.idle_timeout = Duration::from_millis(self.connections_max_idle_ms);
        let partition = &mut c.broker.partition;
        partition.replica_lag_time_max_ms = self.replica_lag_time_max_ms;
        partition.min_insync_replicas = self.min_insync_replicas;
        let fetcher = &mut c.broker.fetcher;
        fetcher.max_wait_ms = self.replica_fetch_wait_max_ms;
        fetcher.min_bytes = self.replica_fetch_min_bytes;
        fetcher.partition_max_bytes = self.replica_fetch_max_bytes;
        fetcher.max_bytes = self.replica_fetch_response_max_bytes;
        fetcher.backoff_ms = self.replica_fetch_backoff_ms;
        c.broker.leader_link_timeout = Duration::from_millis(self.replica_socket_timeout_ms);
        let controller = &mut c.controller;
        controller.delete_topic_enable = self.delete_topic_enable;
        controller.auto_leader_rebalance_enable = self.auto_leader_rebalance_enable;
        controller.unclean_leader_election_enable = self.unclean_leader_election_enable;
        controller.leader_imbalance_per_broker_percentage =
            self.leader_imbalance_per_broker_percentage;
        controller.leader_imbalance_check_interval =
            Duration::from_secs(self.leader_imbalance_check_interval_seconds);
        c.channel_timeout = Duration::from_millis(self.controller_socket_timeout_ms);
        c.auto_create_topics = self.auto_create_topics_enable.then_some(AutoCreateConfig {
            partitions: self.num_partitions,
            replication_factor: self.default_replication_factor,
        });
        c.groups = GroupConfig::new()
            .with_coordinator(
                GroupCoordinatorConfig::new()
                    .with_offsets_topic_num_partitions(self.offsets_topic_num_partitions)
                    .with_session_timeout_bounds(
                        self.group_min_session_timeout_ms,
                        self.group_max_session_timeout_ms,
                    )
                    .with_initial_rebalance_delay_ms(self.group_initial_rebalance_delay_ms)
                    .with_group_max_size(self.group_max_size)
                    .with_offsets_retention_ms(
                        self.offsets_retention_minutes.saturating_mul(60_000),
                    )
                    .with_offsets_retention_check_interval_ms(
                        self.offsets_retention_check_interval_ms,
                    )
                    .with_offset_metadata_max_bytes(self.offset_metadata_max_bytes),
            )
            .with_offsets_topic_replication_factor(self.offsets_topic_replication_factor)
            .with_offsets_commit_timeout_ms(self.offsets_commit_timeout_ms);
        c.controlled_shutdown = ControlledShutdownConfig {
            enable: self.controlled_shutdown_enable,
            max_retries: self.controlled_shutdown_max_retries,
            retry_backoff: Duration::from_millis(self.controlled_shutdown_retry_backoff_ms),
            ..ControlledShutdownConfig::default()
        };
        c
    }
}

#[cfg(test)]
mod tests;
