//! `ha-broker`: one broker process — a [`BrokerNode`] on a real ZooKeeper ensemble, or a
//! single-node broker with an in-memory store and in-memory logs.
//!
//! ```text
//! ha-broker --id 1 --listen 127.0.0.1:9092 --data-dir /var/lib/ha-blocks/1 \
//!           --zookeeper 127.0.0.1:2181[,host:port…][/chroot]
//! ha-broker --id 1 --listen 127.0.0.1:9092 --memory --topic orders:3
//! ```
//!
//! On start it prints `broker <id> listening on <host:port>` on stdout; it logs to stderr
//! (`RUST_LOG`, default `info`) and stops cleanly on SIGTERM or SIGINT.

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use ha_coordination::{Coordination, MemoryTree, ZooKeeperCoordination, ZooKeeperOptions};
use kafka_broker::node::{AutoCreateConfig, BrokerNode, LogPlacement, NodeConfig};
use kafka_controller::admin;
use kafka_controller::assignment::AssignmentStart;

/// One ha-blocks broker: registration, controller campaign, replication and the Kafka
/// protocol on one listener.
#[derive(Debug, Parser)]
#[command(name = "broker", version)]
struct Args {
    /// The broker id (`broker.id`).
    #[arg(long)]
    id: i32,
    /// Where to listen, `host:port` (port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:9092")]
    listen: SocketAddr,
    /// The host other brokers and clients connect to (default: the listen IP).
    #[arg(long)]
    advertised_host: Option<String>,
    /// The broker's rack (`broker.rack`).
    #[arg(long)]
    rack: Option<String>,
    /// Where the partition logs live (`log.dirs`).
    #[arg(long, default_value = "data")]
    data_dir: PathBuf,
    /// The ZooKeeper ensemble, `host:port[,host:port…][/chroot]`.
    #[arg(long, required_unless_present = "memory", conflicts_with = "memory")]
    zookeeper: Option<String>,
    /// ZooKeeper session timeout in ms (`zookeeper.session.timeout.ms`).
    #[arg(long, default_value_t = 18_000)]
    zookeeper_session_timeout_ms: u64,
    /// Single-node mode: in-memory coordination store and logs; this broker is its own
    /// controller.
    #[arg(long)]
    memory: bool,
    /// With `--memory`: a topic to create at start, `name[:partitions]` (repeatable).
    #[arg(long = "topic", requires = "memory", value_name = "NAME[:PARTITIONS]")]
    topics: Vec<String>,
    /// `replica.lag.time.max.ms`.
    #[arg(long, default_value_t = 30_000)]
    replica_lag_time_max_ms: u64,
    /// `min.insync.replicas`.
    #[arg(long, default_value_t = 1)]
    min_insync_replicas: usize,
    /// `auto.create.topics.enable`: a Metadata request for an unknown topic creates it.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    auto_create_topics: bool,
    /// `num.partitions`: partitions of an auto-created topic.
    #[arg(long, default_value_t = 1)]
    num_partitions: i32,
    /// `default.replication.factor`: replicas of an auto-created topic's partitions.
    #[arg(long, default_value_t = 1)]
    default_replication_factor: i32,
    /// `auto.leader.rebalance.enable`.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    auto_leader_rebalance: bool,
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

async fn wait_for_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = interrupt => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = interrupt.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}

async fn run(args: Args) -> Result<(), String> {
    let topics = args
        .topics
        .iter()
        .map(|t| parse_topic(t))
        .collect::<Result<Vec<_>, _>>()?;
    let mut config = NodeConfig::new(args.id, args.listen);
    config.advertised_host = args.advertised_host.clone();
    config.rack = args.rack.clone();
    config.broker.partition.replica_lag_time_max_ms = args.replica_lag_time_max_ms;
    config.broker.partition.min_insync_replicas = args.min_insync_replicas;
    config.controller.auto_leader_rebalance_enable = args.auto_leader_rebalance;
    config.auto_create_topics = args.auto_create_topics.then_some(AutoCreateConfig {
        partitions: args.num_partitions,
        replication_factor: args.default_replication_factor,
    });
    let (session, admin_session): (Arc<dyn Coordination>, Option<Arc<dyn Coordination>>) =
        match &args.zookeeper {
            Some(connect) => {
                config.logs = LogPlacement::Files(args.data_dir.clone());
                let options = ZooKeeperOptions {
                    session_timeout: Duration::from_millis(args.zookeeper_session_timeout_ms),
                    ..ZooKeeperOptions::default()
                };
                let zk = ZooKeeperCoordination::connect_with(connect, options)
                    .await
                    .map_err(|e| format!("cannot connect to ZooKeeper at {connect}: {e}"))?;
                (Arc::new(zk), None)
            }
            None => {
                config.logs = LogPlacement::Memory;
                let tree = MemoryTree::new();
                (Arc::new(tree.connect()), Some(Arc::new(tree.connect())))
            }
        };
    let node = BrokerNode::start(config, session)
        .await
        .map_err(|e| format!("broker {} did not start: {e}", args.id))?;
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
    if let Some(store) = admin_session {
        if node
            .controller()
            .wait_active(Duration::from_secs(10))
            .await
            .is_none()
        {
            tracing::warn!(broker = args.id, "single node did not become controller");
        }
        for (name, partitions) in topics {
            match admin::create_topic(
                store.as_ref(),
                &name,
                partitions,
                1,
                AssignmentStart::fixed(0),
            )
            .await
            {
                Ok(_) => tracing::info!(topic = %name, partitions, "topic created"),
                Err(e) => tracing::warn!(topic = %name, error = %e, "topic not created"),
            }
        }
    }
    wait_for_signal().await;
    tracing::info!(broker = args.id, "stopping");
    if tokio::time::timeout(Duration::from_secs(15), node.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(broker = args.id, "shutdown took too long; exiting");
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
