//! Controller failover and broker failure timings, printed beside Kafka 1.1's published figures
//! (Confluent, "Apache Kafka Supports 200K Partitions Per Cluster": controller failover with
//! 100k partitions 14 s; controlled shutdown of a broker with 10k of 50k partitions 3 s).
//!
//! `cargo run --release -p kafka-controller --example controller_bench` runs on
//! `MemoryCoordination` (1,000,000 partitions); with `--features zookeeper` it also runs on a
//! real ZooKeeper 3.8 started by `ha-testkit` (100,000 partitions). Arguments:
//! `[memory partitions] [zookeeper partitions]`, multiples of 1000 (`-- --help` describes
//! them). The set-up prints its progress at every tenth of the znodes and stops the benchmark
//! if any of its writes failed.
//!
//! Each figure is printed with Kafka 1.1's, the target and the ratio, plus the CPU time this
//! process (controller and client) and the ZooKeeper server spent meanwhile, and the load
//! average: on a shared machine the wall time alone says little.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use futures::future::join_all;
use ha_coordination::{Coordination, CreateMode, MemoryTree};
use kafka_controller::broker_channel::MemoryBrokerChannel;
use kafka_controller::controller::{
    Controller, ControllerConfig, ControllerEvent, ControllerHandle,
};
use kafka_controller::zk_data::{
    paths, BrokerRegistration, KafkaZkClient, PartitionStateZNode, TopicAssignment,
};

const BROKERS: i32 = 5;
const PARTITIONS_PER_TOPIC: i32 = 1000;
/// How long the controller may take to become active (it loads every partition first).
const CONTROLLER_LIMIT: Duration = Duration::from_secs(600);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Controller failover and broker failure timings on `MemoryCoordination` and (built with
/// `--features zookeeper`) on a real ZooKeeper 3.8, beside Kafka 1.1's published figures.
#[derive(Debug, Parser)]
#[command(name = "controller_bench")]
struct Args {
    /// Partitions on `MemoryCoordination`: a positive multiple of 1000 (topics of 1000
    /// partitions each).
    #[arg(default_value_t = 1_000_000, value_parser = memory_partitions)]
    memory_partitions: i32,
    /// Partitions on the real ZooKeeper (only with `--features zookeeper`): a multiple of
    /// 1000; 0 skips the real-ZooKeeper run.
    #[arg(default_value_t = 100_000, value_parser = zookeeper_partitions)]
    zookeeper_partitions: i32,
}

/// A partition count: a non-negative multiple of [`PARTITIONS_PER_TOPIC`].
fn partition_count(s: &str) -> Result<i32, String> {
    let n: i32 = s
        .parse()
        .map_err(|e| format!("not a partition count: {e}"))?;
    if n < 0 || n % PARTITIONS_PER_TOPIC != 0 {
        return Err(format!(
            "{n} is not a multiple of {PARTITIONS_PER_TOPIC} (topics have {PARTITIONS_PER_TOPIC} partitions)"
        ));
    }
    Ok(n)
}

fn memory_partitions(s: &str) -> Result<i32, String> {
    match partition_count(s)? {
        0 => Err("at least 1000 partitions".to_string()),
        n => Ok(n),
    }
}

fn zookeeper_partitions(s: &str) -> Result<i32, String> {
    partition_count(s)
}

/// Progress of a set-up phase: writes done and failed, printed at every tenth of the total.
struct Progress {
    label: String,
    total: usize,
    done: usize,
    failed: usize,
    first_error: Option<String>,
    next_report: usize,
    started: Instant,
}

impl Progress {
    fn new(label: String, total: usize) -> Self {
        println!("{label}: {total} znodes to write");
        Self {
            label,
            total,
            done: 0,
            failed: 0,
            first_error: None,
            next_report: total.div_ceil(10).max(1),
            started: Instant::now(),
        }
    }

    /// Counts the outcome of one write.
    fn count<T, E: std::fmt::Display>(&mut self, path: &str, outcome: Result<T, E>) {
        self.done += 1;
        if let Err(e) = outcome {
            self.failed += 1;
            self.first_error
                .get_or_insert_with(|| format!("{path}: {e}"));
        }
    }

    /// Prints a progress line once another tenth of the writes is done.
    fn report(&mut self) {
        if self.done < self.next_report && self.done < self.total {
            return;
        }
        while self.next_report <= self.done {
            self.next_report += self.total.div_ceil(10).max(1);
        }
        println!(
            "{}: {} / {} znodes written ({:.0} %), {} failed, {:.1} s",
            self.label,
            self.done,
            self.total,
            100.0 * self.done as f64 / self.total.max(1) as f64,
            self.failed,
            self.started.elapsed().as_secs_f64()
        );
    }

    /// `Ok` only if every write succeeded.
    fn finish(self) -> Result<(), BoxError> {
        match self.first_error {
            None => Ok(()),
            Some(first) => Err(format!(
                "{}: {} of {} set-up writes failed (first: {first}); the figures would be \
                 meaningless",
                self.label, self.failed, self.total
            )
            .into()),
        }
    }
}

/// Writes topics of 1000 partitions with RF 3 over `BROKERS` brokers, leader = first replica,
/// with up to `window` writes in flight, printing progress; fails if any write failed.
async fn populate(
    label: &str,
    coord: &dyn Coordination,
    partitions: i32,
    window: usize,
) -> Result<(), BoxError> {
    let topics = partitions / PARTITIONS_PER_TOPIC;
    // Parents before children: each level is written once the one before it is complete.
    let mut levels: [Vec<(String, Vec<u8>)>; 4] = Default::default();
    for t in 0..topics {
        let topic = format!("topic-{t:05}");
        let assignment: BTreeMap<i32, Vec<i32>> = (0..PARTITIONS_PER_TOPIC)
            .map(|p| {
                let first = (t * PARTITIONS_PER_TOPIC + p) % BROKERS;
                (p, (0..3).map(|i| (first + i) % BROKERS + 1).collect())
            })
            .collect();
        // With a topic id (v3), as a Kafka 2.8 cluster writes topics.
        let mut znode = TopicAssignment::new(assignment.clone());
        znode.set_id(kafka_wire::Uuid::from_u128(
            u128::from(t.unsigned_abs()) + 2,
        ));
        levels[0].push((paths::topic(&topic), znode.to_json()?));
        levels[1].push((paths::topic_partitions(&topic), Vec::new()));
        for (p, replicas) in assignment {
            levels[2].push((paths::partition(&topic, p), Vec::new()));
            let state = PartitionStateZNode::new(replicas[0], 0, 1, replicas.clone());
            levels[3].push((paths::partition_state(&topic, p), state.to_json()?));
        }
    }
    let total = levels.iter().map(Vec::len).sum();
    let mut progress = Progress::new(format!("{label} set-up"), total);
    for level in &levels {
        for chunk in level.chunks(window) {
            let outcomes = join_all(
                chunk
                    .iter()
                    .map(|(p, d)| coord.create(p, d, CreateMode::Persistent)),
            )
            .await;
            for ((path, _), outcome) in chunk.iter().zip(outcomes) {
                progress.count(path, outcome);
            }
            progress.report();
        }
    }
    progress.finish()
}

/// CPU seconds used so far by process `pid` (`None`: this process), from `/proc`.
fn cpu_seconds(pid: Option<u32>) -> f64 {
    let path = pid.map_or("/proc/self/stat".to_string(), |p| format!("/proc/{p}/stat"));
    let Ok(stat) = std::fs::read_to_string(path) else {
        return 0.0;
    };
    // Fields after the command name: state is field 3, utime 14 and stime 15.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15, i.e. 11 and 12 after the state (field 3).
    (ticks(11) + ticks(12)) / 100.0
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".to_string())
}

/// Wall time and CPU time of one timed phase.
#[derive(Default)]
struct Phase {
    wall: Duration,
    /// CPU seconds of this process (controller, coordination client, in-memory server).
    own_cpu: f64,
    /// CPU seconds of the ZooKeeper server, when there is one.
    server_cpu: Option<f64>,
    /// The 1-minute load average right after the phase.
    load: String,
}

/// Times `f`, with this process's and the server's (`server` pid) CPU time.
async fn timed<T>(server: Option<u32>, f: impl std::future::Future<Output = T>) -> (T, Phase) {
    let (own, srv) = (cpu_seconds(None), server.map(|p| cpu_seconds(Some(p))));
    let start = Instant::now();
    let out = f.await;
    let wall = start.elapsed();
    let phase = Phase {
        wall,
        own_cpu: cpu_seconds(None) - own,
        server_cpu: server.zip(srv).map(|(p, s)| cpu_seconds(Some(p)) - s),
        load: load_average(),
    };
    (out, phase)
}

struct Figures {
    failover: Phase,
    failure: Phase,
    moved: usize,
}

/// Registers the brokers on `sessions` (broker i + 1 on `sessions[i]`), starts broker 1's
/// controller and times its failover (K6: campaign, load every partition, start-up passes).
async fn failover(
    sessions: &[Arc<dyn Coordination>],
    server: Option<u32>,
) -> Result<(ControllerHandle, Phase, usize), BoxError> {
    for (i, s) in sessions.iter().enumerate() {
        let id = i32::try_from(i)? + 1;
        KafkaZkClient::new(s.clone())
            .register_broker(
                id,
                &BrokerRegistration::plaintext("localhost", 9092, None, 0),
            )
            .await
            .map_err(|e| format!("registering broker {id}: {e}"))?;
    }
    let mut config = ControllerConfig::new(1);
    config.auto_leader_rebalance_enable = false;
    let channel = MemoryBrokerChannel::new();
    channel.set_recording(false);
    let ((handle, active), elapsed) = timed(server, async {
        let handle = Controller::start(config, sessions[0].clone(), Arc::new(channel));
        let active = handle.wait_active(CONTROLLER_LIMIT).await;
        (handle, active)
    })
    .await;
    if active.is_none() {
        handle.shutdown();
        return Err(
            format!("broker 1's controller was not active within {CONTROLLER_LIMIT:?}").into(),
        );
    }
    let Some(context) = handle.context().await else {
        handle.shutdown();
        return Err("the active controller returned no context".into());
    };
    let led_by_2 = context.partitions_led_by(2).len();
    Ok((handle, elapsed, led_by_2))
}

/// K1: after broker 2's registration vanished, handles the broker change (elections with CAS
/// writes, ISR removals, LeaderAndIsr batches handed to the channel) and returns.
async fn broker_failure(handle: &ControllerHandle) {
    handle.put(ControllerEvent::BrokerChange);
    handle.sync().await;
}

fn phase_line(name: &str, p: &Phase, kafka: &str, kafka_secs: f64, target: Option<f64>) {
    let ours = p.wall.as_secs_f64();
    let target = target.map_or(String::new(), |t| {
        format!(
            "; target {t:.1} s: {}",
            if ours <= t { "met" } else { "NOT met" }
        )
    });
    println!(
        "  {name}: {ours:.3} s  (Kafka 1.1: {kafka}; {:.1}x faster{target})",
        kafka_secs / ours
    );
    let server = p
        .server_cpu
        .map_or(String::new(), |s| format!(", ZooKeeper server {s:.2} s"));
    println!(
        "      CPU: this process {:.2} s{server}; load average {}",
        p.own_cpu, p.load
    );
}

fn report(backend: &str, partitions: i32, f: &Figures, targets: bool) {
    println!("{backend}: {partitions} partitions");
    // Kafka 1.1's failover figure scaled to this partition count (14 s per 100k).
    let kafka_failover = 14.0 / 100_000.0 * f64::from(partitions);
    phase_line(
        "controller failover",
        &f.failover,
        &format!("{kafka_failover:.1} s at 14 s per 100k partitions"),
        kafka_failover,
        targets.then_some(1.0 / 100_000.0 * f64::from(partitions)),
    );
    // Kafka 1.1's controlled shutdown moved 10k leaderships in 3 s: scaled to ours.
    let moved = f64::from(u32::try_from(f.moved).unwrap_or(u32::MAX));
    let kafka_failure = 3.0 / 10_000.0 * moved;
    phase_line(
        &format!("broker failure, {} leaderships moved", f.moved),
        &f.failure,
        &format!("{kafka_failure:.1} s at 3 s per 10k leaderships"),
        kafka_failure,
        targets.then_some(0.3 / 20_000.0 * moved),
    );
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("controller_bench failed: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: &Args) -> Result<(), BoxError> {
    let memory_partitions = args.memory_partitions;
    let tree = MemoryTree::new();
    let admin = tree.connect();
    KafkaZkClient::new(Arc::new(admin.clone()))
        .create_persistent_paths()
        .await?;
    populate("MemoryCoordination", &admin, memory_partitions, 10_000).await?;
    let sessions: Vec<Arc<dyn Coordination>> = (0..BROKERS)
        .map(|_| Arc::new(tree.connect()) as Arc<dyn Coordination>)
        .collect();
    let (handle, failover_time, moved) = failover(&sessions, None).await?;
    let ((), failure) = timed(None, async {
        tree.expire(sessions[1].session_id());
        broker_failure(&handle).await;
    })
    .await;
    let figures = Figures {
        failover: failover_time,
        failure,
        moved,
    };
    handle.shutdown();
    report("MemoryCoordination", memory_partitions, &figures, false);
    #[cfg(feature = "zookeeper")]
    if args.zookeeper_partitions > 0 {
        zookeeper_run(args.zookeeper_partitions).await?;
    }
    #[cfg(not(feature = "zookeeper"))]
    if args.zookeeper_partitions > 0 {
        println!("(real-ZooKeeper figures: build with `--features zookeeper`)");
    }
    Ok(())
}

#[cfg(feature = "zookeeper")]
async fn zookeeper_run(partitions: i32) -> Result<(), BoxError> {
    use ha_coordination::{ZooKeeperCoordination, ZooKeeperOptions};
    // A heap large enough for 100k partitions without full collections.
    let zk = ha_testkit::ZkEnsemble::builder()
        .heap_mb(2048)
        .start()
        .map_err(|e| {
            format!(
                "ZooKeeper did not start ({e}); pass 0 as the second argument to skip the \
                 real-ZooKeeper run"
            )
        })?;
    let options = ZooKeeperOptions::new()
        .with_session_timeout(Duration::from_secs(30))
        .with_connection_timeout(Duration::from_secs(10));
    let mut clients: Vec<Arc<dyn Coordination>> = Vec::new();
    for _ in 0..=BROKERS {
        let c = ZooKeeperCoordination::connect_with(&zk.connect_string(), options.clone())
            .await
            .map_err(|e| format!("cannot connect to ZooKeeper: {e}"))?;
        clients.push(Arc::new(c));
    }
    let admin = clients.remove(0);
    KafkaZkClient::new(admin.clone())
        .create_persistent_paths()
        .await?;
    let setup = Instant::now();
    populate("ZooKeeper", &*admin, partitions, 2_000).await?;
    println!(
        "(ZooKeeper set-up of {partitions} partitions: {:.1} s)",
        setup.elapsed().as_secs_f64()
    );
    // Let the server finish what the set-up left (snapshots) before timing.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let server = zk.sids().first().and_then(|sid| zk.pid(*sid));
    let (handle, failover_time, moved) = failover(&clients, server).await?;
    // Broker 2's registration vanishes (as when its session ends).
    let (deleted, failure) = timed(server, async {
        let deleted = clients[1].delete(&paths::broker(2), -1).await;
        if deleted.is_ok() {
            broker_failure(&handle).await;
        }
        deleted
    })
    .await;
    handle.shutdown();
    deleted.map_err(|e| format!("deleting broker 2's registration: {e}"))?;
    let figures = Figures {
        failover: failover_time,
        failure,
        moved,
    };
    report("ZooKeeper 3.8 (loopback)", partitions, &figures, true);
    Ok(())
}
