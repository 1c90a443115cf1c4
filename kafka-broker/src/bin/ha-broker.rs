//! `ha-broker`: one broker process — a [`BrokerNode`] on a real ZooKeeper ensemble, or a
//! single-node broker with an in-memory store and in-memory logs.
//!
//! ```text
//! ha-broker --config server.properties [--override key=value …] [flags]
//! ha-broker --id 1 --listen 127.0.0.1:9092 --data-dir /var/lib/ha-blocks/1 \
//!           --zookeeper 127.0.0.1:2181[,host:port…][/chroot]
//! ha-broker --id 1 --listen 127.0.0.1:9092 --memory --topic orders:3
//! ```
//!
//! Settings come from `--config` (Kafka's `server.properties` keys: `broker.id`, `listeners`,
//! `advertised.listeners`, `log.dirs`, `zookeeper.connect`, …), then `--override key=value`,
//! then the flags, each later one winning. Unknown keys are warned about; a bad value stops
//! the broker with an error naming the key.
//!
//! On start it prints `broker <id> listening on <host:port>` on stdout; it logs to stderr
//! (`RUST_LOG`, default `info`). On SIGTERM or SIGINT it shuts down in a controlled way (Kafka's
//! `KafkaServer.controlledShutdown`): the controller moves its leaderships first
//! (`controlled.shutdown.*`), then replication stops, the registration is removed and the
//! process exits 0. A second signal during the controlled shutdown skips the rest of it. The
//! signals are caught from the start: one arriving while the broker starts (for instance while
//! it waits for its previous process's registration to expire) ends it without harm.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use ha_coordination::{Coordination, MemoryTree, ZooKeeperCoordination, ZooKeeperOptions};
use kafka_broker::config::{properties, ServerSettings};
use kafka_broker::node::{BrokerNode, LogPlacement};
use kafka_controller::admin;
use kafka_controller::zk_data::KafkaZkClient;

/// One ha-blocks broker: registration, controller campaign, replication and the Kafka
/// protocol on one listener.
#[derive(Debug, Parser)]
#[command(name = "ha-broker", version)]
struct Args {
    /// A `server.properties` file with Kafka's keys.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// A setting overriding the file, `key=value` (repeatable).
    #[arg(long = "override", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
    /// The broker id (`broker.id`).
    #[arg(long)]
    id: Option<i32>,
    /// Where to listen, `host:port` (`listeners=PLAINTEXT://host:port`; port 0 picks a free
    /// one). Default 127.0.0.1:9092.
    #[arg(long)]
    listen: Option<String>,
    /// The host other brokers and clients connect to, with the bound port (default: the
    /// listen host; required when listening on every interface).
    #[arg(long)]
    advertised_host: Option<String>,
    /// The broker's rack (`broker.rack`).
    #[arg(long)]
    rack: Option<String>,
    /// Where the partition logs live (`log.dirs`, default `data`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The ZooKeeper ensemble, `host:port[,host:port…][/chroot]` (`zookeeper.connect`).
    #[arg(long, conflicts_with = "memory")]
    zookeeper: Option<String>,
    /// ZooKeeper session timeout in ms (`zookeeper.session.timeout.ms`, default 18000).
    #[arg(long)]
    zookeeper_session_timeout_ms: Option<u64>,
    /// Single-node mode: in-memory coordination store and logs; this broker is its own
    /// controller.
    #[arg(long)]
    memory: bool,
    /// With `--memory`: a topic to create at start, `name[:partitions]` (repeatable).
    #[arg(long = "topic", requires = "memory", value_name = "NAME[:PARTITIONS]")]
    topics: Vec<String>,
    /// `replica.lag.time.max.ms`.
    #[arg(long)]
    replica_lag_time_max_ms: Option<u64>,
    /// `min.insync.replicas`.
    #[arg(long)]
    min_insync_replicas: Option<usize>,
    /// `auto.create.topics.enable`: a Metadata request for an unknown topic creates it.
    #[arg(long, action = clap::ArgAction::Set)]
    auto_create_topics: Option<bool>,
    /// `num.partitions`: partitions of an auto-created topic.
    #[arg(long)]
    num_partitions: Option<i32>,
    /// `default.replication.factor`: replicas of an auto-created topic's partitions.
    #[arg(long)]
    default_replication_factor: Option<i32>,
    /// `auto.leader.rebalance.enable`.
    #[arg(long, action = clap::ArgAction::Set)]
    auto_leader_rebalance: Option<bool>,
    /// `controlled.shutdown.enable`.
    #[arg(long, action = clap::ArgAction::Set)]
    controlled_shutdown: Option<bool>,
    /// `controlled.shutdown.max.retries`.
    #[arg(long)]
    controlled_shutdown_max_retries: Option<u32>,
    /// `controlled.shutdown.retry.backoff.ms`.
    #[arg(long)]
    controlled_shutdown_retry_backoff_ms: Option<u64>,
    /// Serve the broker's metrics in Prometheus' text format on `host:port` (`/metrics`); off
    /// unless given.
    #[arg(long, value_name = "HOST:PORT")]
    metrics_listen: Option<SocketAddr>,
}

impl Args {
    /// The settings: the file, then `--override`, then the flags.
    fn properties(&self) -> Result<BTreeMap<String, String>, String> {
        let mut props = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                properties::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?
            }
            None => BTreeMap::new(),
        };
        for o in &self.overrides {
            let (k, v) = o
                .split_once('=')
                .ok_or_else(|| format!("--override {o}: expected key=value"))?;
            props.insert(k.trim().to_owned(), v.trim().to_owned());
        }
        let mut set = |key: &str, value: Option<String>| {
            if let Some(v) = value {
                props.insert(key.to_owned(), v);
            }
        };
        set("broker.id", self.id.map(|v| v.to_string()));
        set(
            "listeners",
            self.listen.as_ref().map(|l| format!("PLAINTEXT://{l}")),
        );
        set("broker.rack", self.rack.clone());
        set(
            "log.dirs",
            self.data_dir.as_ref().map(|d| d.display().to_string()),
        );
        set("zookeeper.connect", self.zookeeper.clone());
        let n = |v: Option<u64>| v.map(|v| v.to_string());
        set(
            "zookeeper.session.timeout.ms",
            n(self.zookeeper_session_timeout_ms),
        );
        set("replica.lag.time.max.ms", n(self.replica_lag_time_max_ms));
        set(
            "min.insync.replicas",
            self.min_insync_replicas.map(|v| v.to_string()),
        );
        set(
            "auto.create.topics.enable",
            self.auto_create_topics.map(|v| v.to_string()),
        );
        set("num.partitions", self.num_partitions.map(|v| v.to_string()));
        set(
            "default.replication.factor",
            self.default_replication_factor.map(|v| v.to_string()),
        );
        set(
            "auto.leader.rebalance.enable",
            self.auto_leader_rebalance.map(|v| v.to_string()),
        );
        set(
            "controlled.shutdown.enable",
            self.controlled_shutdown.map(|v| v.to_string()),
        );
        set(
            "controlled.shutdown.max.retries",
            self.controlled_shutdown_max_retries.map(|v| v.to_string()),
        );
        set(
            "controlled.shutdown.retry.backoff.ms",
            n(self.controlled_shutdown_retry_backoff_ms),
        );
        Ok(props)
    }
}

fn parse_topic(spec: &str) -> Result<(String, i32), String> {
    match spec.split_once(':') {
        None => Ok((spec.to_owned(), 1)),
        Some((name, n)) => match n.parse::<i32>() {
            Ok(n) if n > 0 => Ok((name.to_owned(), n)),
            _ => Err(format!(
                "--topic {spec}: partitions must be a positive number"
            )),
        },
    }
}

/// SIGTERM and SIGINT (Ctrl-C), caught from the moment this is made: a signal arriving
/// while the broker starts is not lost, nor does it kill the process uncontrolled.
struct StopSignals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    fn install() -> StopSignals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            StopSignals {
                term: signal(SignalKind::terminate()).ok(),
                interrupt: signal(SignalKind::interrupt()).ok(),
            }
        }
        #[cfg(not(unix))]
        {
            StopSignals {}
        }
    }

    /// Waits for the next SIGTERM or SIGINT.
    async fn recv(&mut self) {
        #[cfg(unix)]
        {
            async fn next(s: &mut Option<tokio::signal::unix::Signal>) {
                match s {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            }
            tokio::select! {
                _ = next(&mut self.term) => {}
                _ = next(&mut self.interrupt) => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    if let Some(addr) = args.metrics_listen {
        metrics_exporter_prometheus::PrometheusBuilder::new()
            .with_http_listener(addr)
            .install()
            .map_err(|e| format!("--metrics-listen {addr}: {e}"))?;
        tracing::info!(%addr, "serving metrics");
    }
    let mut signals = StopSignals::install();
    let topics = args
        .topics
        .iter()
        .map(|t| parse_topic(t))
        .collect::<Result<Vec<_>, _>>()?;
    let props = args.properties()?;
    let (settings, unknown) = ServerSettings::from_properties(&props).map_err(|e| e.to_string())?;
    for key in unknown {
        tracing::warn!(key = %key, "unknown or unsupported setting; ignored");
    }
    if args.advertised_host.is_none() {
        settings.check_advertised().map_err(|e| e.to_string())?;
    }
    let listener = &settings.listener;
    let listen: SocketAddr = match listener.ip_addr() {
        Some(a) => a,
        None => tokio::net::lookup_host((listener.host.as_str(), listener.port))
            .await
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| {
                format!(
                    "listeners: cannot resolve {}:{}",
                    listener.host, listener.port
                )
            })?,
    };
    let mut config = settings.node_config(listen);
    if config.advertised_host.is_none() && listener.ip_addr().is_none() {
        // A listener named by host name is advertised by that name, as Kafka does.
        config.advertised_host = Some(listener.host.clone());
    }
    if let Some(h) = &args.advertised_host {
        config.advertised_host = Some(h.clone());
    }
    let id = settings.broker_id;
    let (session, admin_session): (Arc<dyn Coordination>, Option<Arc<dyn Coordination>>) =
        match (&settings.zookeeper_connect, args.memory) {
            (_, true) => {
                config.logs = LogPlacement::Memory;
                let tree = MemoryTree::new();
                (Arc::new(tree.connect()), Some(Arc::new(tree.connect())))
            }
            (Some(connect), false) => {
                let options = ZooKeeperOptions::new()
                    .with_session_timeout(Duration::from_millis(
                        settings.zookeeper_session_timeout_ms,
                    ))
                    .with_connection_timeout(Duration::from_millis(
                        settings.zookeeper_connection_timeout_ms,
                    ));
                let zk = ZooKeeperCoordination::connect_with(connect, options)
                    .await
                    .map_err(|e| format!("cannot connect to ZooKeeper at {connect}: {e}"))?;
                (Arc::new(zk), None)
            }
            (None, false) => {
                return Err(
                    "zookeeper.connect is required (or --zookeeper, or --memory)".to_owned(),
                )
            }
        };
    // A single in-memory node's topics are in the store before it serves anything, so that no
    // Metadata request auto-creates one of them first with the default partition count.
    if let Some(store) = &admin_session {
        let zk = KafkaZkClient::new(store.clone());
        zk.create_persistent_paths()
            .await
            .map_err(|e| format!("cannot prepare the store: {e}"))?;
        for (name, partitions) in &topics {
            let assignment: BTreeMap<i32, Vec<i32>> =
                (0..*partitions).map(|p| (p, vec![id])).collect();
            match admin::create_topic_with_assignment(store.as_ref(), name, &assignment).await {
                Ok(()) => tracing::info!(topic = %name, partitions, "topic created"),
                Err(e) => tracing::warn!(topic = %name, error = %e, "topic not created"),
            }
        }
    }
    // A start may wait (up to the session timeout plus a margin) for an older session's
    // registration; a stop signal meanwhile ends the process, which has nothing to hand over.
    let node = tokio::select! {
        started = BrokerNode::start(config, session) => {
            started.map_err(|e| format!("broker {id} did not start: {e}"))?
        }
        _ = signals.recv() => {
            tracing::info!(broker = id, "stopped before the start completed");
            return Ok(());
        }
    };
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "broker {} listening on {}",
            node.id(),
            node.local_addr()
        );
        let _ = out.flush();
    }
    if admin_session.is_some()
        && node
            .controller()
            .wait_active(Duration::from_secs(10))
            .await
            .is_none()
    {
        tracing::warn!(broker = id, "single node did not become controller");
    }
    signals.recv().await;
    tracing::info!(broker = id, "stopping: controlled shutdown");
    tokio::select! {
        outcome = node.controlled_shutdown() => {
            tracing::info!(broker = id, ?outcome, "controlled shutdown finished");
        }
        _ = signals.recv() => {
            tracing::warn!(broker = id, "second signal: skipping the rest of the controlled shutdown");
        }
    }
    if tokio::time::timeout(Duration::from_secs(15), node.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(broker = id, "shutdown took too long; exiting");
    }
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("broker: {e}");
            ExitCode::FAILURE
        }
    }
}
