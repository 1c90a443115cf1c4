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
//! average: on a shared machine the wall time alone says little. The controller's memory is
//! counted by a counting global allocator (bytes live after the failover minus before) and as
//! the process's resident set.
//!
//! `--ensemble 3` (with `--features zookeeper`) runs instead one benchmark on a real
//! three-server Apache ZooKeeper ensemble started by `ha-testkit`, each server on the JVM's
//! server defaults with `--heap-mb` of heap: `--ensemble-partitions` (1,000,000) partitions
//! over `--brokers` brokers, written in pipelined `multi`s, then the controller's failover and
//! a broker failure, the servers' heap and snapshot sizes and, with `--follower-resync`, the
//! time a follower with an empty data directory takes to rejoin.

use std::alloc::System;
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
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

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
    /// Registered brokers; every partition has 3 replicas on consecutive brokers.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(i32).range(3..=1000))]
    brokers: i32,
    /// Instead of the runs above, one run on a real ensemble of this many Apache ZooKeeper
    /// servers (only with `--features zookeeper`); 0 (the default) runs the ones above.
    #[arg(long, default_value_t = 0)]
    ensemble: usize,
    /// Partitions of the ensemble run: a positive multiple of 1000.
    #[arg(long, default_value_t = 1_000_000, value_parser = memory_partitions)]
    ensemble_partitions: i32,
    /// Maximum Java heap of each ensemble server, in MiB.
    #[arg(long, default_value_t = 3072)]
    heap_mb: u32,
    /// `jute.maxbuffer` of each ensemble server in bytes (default: ZooKeeper's, 1 MiB - 1).
    #[arg(long)]
    jute_maxbuffer: Option<u32>,
    /// `snapCount` of each ensemble server: a snapshot after snapCount/2 to snapCount
    /// transactions (a `multi` is one). The run triggers one after the set-up with this many
    /// small writes, to report the snapshot of the whole tree.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(2..))]
    snap_count: u32,
    /// Set-up `multi`s in flight at once on the ensemble (one per topic, ~300 KiB each).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    window: u32,
    /// After the timed phases of the ensemble run, kill a follower, empty its data directory
    /// and time how long it takes to rejoin (a full snapshot sent by the leader).
    #[arg(long)]
    follower_resync: bool,
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

    /// Counts the outcome of `n` writes done as one transaction (the first at `path`).
    #[cfg(feature = "zookeeper")]
    fn count_many<T, E: std::fmt::Display>(&mut self, path: &str, n: usize, outcome: Result<T, E>) {
        self.done += n;
        if let Err(e) = outcome {
            self.failed += n;
            self.first_error
                .get_or_insert_with(|| format!("multi from {path}: {e}"));
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

/// Znodes (path, data) of topic `t`, by level: the topic (v3, with an id, as a Kafka 2.8
/// cluster writes it), its `partitions` node, the 1000 partition nodes, their states (leader =
/// first replica, leader epoch 0, controller epoch 1, ISR = replicas). Partition `p` has the 3
/// consecutive brokers from `(t * 1000 + p) % brokers + 1` as replicas.
type Levels = [Vec<(String, Vec<u8>)>; 4];

fn topic_znodes(t: i32, brokers: i32) -> Result<Levels, BoxError> {
    let topic = format!("topic-{t:05}");
    let assignment: BTreeMap<i32, Vec<i32>> = (0..PARTITIONS_PER_TOPIC)
        .map(|p| {
            let first = (t * PARTITIONS_PER_TOPIC + p) % brokers;
            (p, (0..3).map(|i| (first + i) % brokers + 1).collect())
        })
        .collect();
    let mut znode = TopicAssignment::new(assignment.clone());
    znode.set_id(kafka_wire::Uuid::from_u128(
        u128::from(t.unsigned_abs()) + 2,
    ));
    let mut levels = Levels::default();
    levels[0].push((paths::topic(&topic), znode.to_json()?));
    levels[1].push((paths::topic_partitions(&topic), Vec::new()));
    for (p, replicas) in assignment {
        levels[2].push((paths::partition(&topic, p), Vec::new()));
        let state = PartitionStateZNode::new(replicas[0], 0, 1, replicas.clone());
        levels[3].push((paths::partition_state(&topic, p), state.to_json()?));
    }
    Ok(levels)
}

/// Writes topics of 1000 partitions with RF 3 over `brokers` brokers (see [`topic_znodes`])
/// with up to `window` writes in flight, printing progress; fails if any write failed.
async fn populate(
    label: &str,
    coord: &dyn Coordination,
    partitions: i32,
    brokers: i32,
    window: usize,
) -> Result<(), BoxError> {
    let topics = partitions / PARTITIONS_PER_TOPIC;
    // Parents before children: each level is written once the one before it is complete.
    let mut levels = Levels::default();
    for t in 0..topics {
        for (all, mut of_topic) in levels.iter_mut().zip(topic_znodes(t, brokers)?) {
            all.append(&mut of_topic);
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

/// Heap bytes this process has allocated and not freed (the counting global allocator;
/// `stats_alloc` counts a realloc's growth as allocated and its shrinking as deallocated).
fn live_bytes() -> i64 {
    let s = GLOBAL.stats();
    i64::try_from(s.bytes_allocated).unwrap_or(i64::MAX)
        - i64::try_from(s.bytes_deallocated).unwrap_or(i64::MAX)
}

/// The resident set of process `pid` (`None`: this process) in bytes, from
/// `/proc/<pid>/status` (`VmRSS`).
fn rss_bytes(pid: Option<u32>) -> Option<i64> {
    let path = pid.map_or("/proc/self/status".to_string(), |p| {
        format!("/proc/{p}/status")
    });
    let status = std::fs::read_to_string(path).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: i64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Waits (at most 60 s) until this process's live heap bytes change by less than 1 MiB in
/// half a second: the tasks still working on what a phase left (the broker channels turning
/// requests into messages) are done.
async fn settle() {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = live_bytes();
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = live_bytes();
        if (now - last).abs() < 1 << 20 {
            return;
        }
        last = now;
    }
}

fn mib(bytes: i64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Wall time and CPU time of one timed phase.
#[derive(Default)]
struct Phase {
    wall: Duration,
    /// CPU seconds of this process (controller, coordination client, in-memory server).
    own_cpu: f64,
    /// CPU seconds of each ZooKeeper server, when there are any.
    server_cpu: Vec<f64>,
    /// The 1-minute load average right after the phase.
    load: String,
    /// Live heap bytes of this process after the phase minus before (allocator count).
    live_delta: i64,
    /// Resident set of this process after the phase minus before.
    rss_delta: i64,
    /// For a failover: live heap bytes of a copy of the controller's context.
    context_bytes: i64,
}

/// Times `f`, with this process's and the servers' (`servers` pids) CPU time and this
/// process's memory growth.
async fn timed<T>(servers: &[u32], f: impl std::future::Future<Output = T>) -> (T, Phase) {
    let own = cpu_seconds(None);
    let srv: Vec<f64> = servers.iter().map(|&p| cpu_seconds(Some(p))).collect();
    let (live, rss) = (live_bytes(), rss_bytes(None).unwrap_or(0));
    let start = Instant::now();
    let out = f.await;
    let wall = start.elapsed();
    let phase = Phase {
        wall,
        own_cpu: cpu_seconds(None) - own,
        server_cpu: servers
            .iter()
            .zip(srv)
            .map(|(&p, s)| cpu_seconds(Some(p)) - s)
            .collect(),
        load: load_average(),
        live_delta: live_bytes() - live,
        rss_delta: rss_bytes(None).unwrap_or(0) - rss,
        context_bytes: 0,
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
/// The phase's memory growth is taken once the controller is active and idle.
async fn failover(
    sessions: &[Arc<dyn Coordination>],
    servers: &[u32],
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
    let (live, rss) = (live_bytes(), rss_bytes(None).unwrap_or(0));
    let ((handle, active), mut elapsed) = timed(servers, async {
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
    // Once what the failover queued is handled and the broker channels' tasks are done with
    // the requests it built, before the context is copied out below.
    handle.sync().await;
    settle().await;
    elapsed.live_delta = live_bytes() - live;
    elapsed.rss_delta = rss_bytes(None).unwrap_or(0) - rss;
    let before_copy = live_bytes();
    let Some(context) = handle.context().await else {
        handle.shutdown();
        return Err("the active controller returned no context".into());
    };
    // A copy of the context: about what the controller's own one holds.
    elapsed.context_bytes = live_bytes() - before_copy;
    let led_by_2 = context.partitions_led_by(2).len();
    drop(context);
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
    let server = match p.server_cpu.as_slice() {
        [] => String::new(),
        [one] => format!(", ZooKeeper server {one:.2} s"),
        several => format!(
            ", ZooKeeper servers {} = {:.2} s",
            several
                .iter()
                .map(|s| format!("{s:.2}"))
                .collect::<Vec<_>>()
                .join(" + "),
            several.iter().sum::<f64>()
        ),
    };
    println!(
        "      CPU: this process {:.2} s{server}; load average {}",
        p.own_cpu, p.load
    );
}

/// The failover's target for `partitions`: 1.0 s per 100,000 partitions (issue 19: ≤ 1.0 s
/// for 100,000 on a ZooKeeper server, ≤ 10 s for 1,000,000 on a three-server ensemble).
fn failover_target(partitions: i32) -> f64 {
    1.0 / 100_000.0 * f64::from(partitions)
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
        targets.then_some(failover_target(partitions)),
    );
    let per_partition = |bytes: i64| bytes as f64 / f64::from(partitions);
    println!(
        "      controller memory: {:+.1} MiB live heap = {:.0} B per partition{} (a copy of the \
         context: {:.0} B per partition); resident set {:+.1} MiB = {:.0} B per partition",
        mib(f.failover.live_delta),
        per_partition(f.failover.live_delta),
        if targets {
            if per_partition(f.failover.live_delta) <= 1024.0 {
                " (target 1 KiB: met)"
            } else {
                " (target 1 KiB: NOT met)"
            }
        } else {
            ""
        },
        per_partition(f.failover.context_bytes),
        mib(f.failover.rss_delta),
        per_partition(f.failover.rss_delta),
    );
    // Kafka 1.1's controlled shutdown moved 10k leaderships in 3 s: scaled to ours.
    let moved = f64::from(u32::try_from(f.moved).unwrap_or(u32::MAX));
    let kafka_failure = 3.0 / 10_000.0 * moved;
    phase_line(
        &format!("broker failure, {} leaderships moved", f.moved),
        &f.failure,
        &format!("{kafka_failure:.1} s at 3 s per 10k leaderships"),
        kafka_failure,
        (targets && partitions <= 100_000).then_some(0.3 / 20_000.0 * moved),
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
    if args.ensemble > 0 {
        #[cfg(feature = "zookeeper")]
        return ensemble::run(args).await;
        #[cfg(not(feature = "zookeeper"))]
        return Err("`--ensemble` needs the example built with `--features zookeeper`".into());
    }
    let memory_partitions = args.memory_partitions;
    let tree = MemoryTree::new();
    let admin = tree.connect();
    KafkaZkClient::new(Arc::new(admin.clone()))
        .create_persistent_paths()
        .await?;
    populate(
        "MemoryCoordination",
        &admin,
        memory_partitions,
        args.brokers,
        10_000,
    )
    .await?;
    let sessions: Vec<Arc<dyn Coordination>> = (0..args.brokers)
        .map(|_| Arc::new(tree.connect()) as Arc<dyn Coordination>)
        .collect();
    let (handle, failover_time, moved) = failover(&sessions, &[]).await?;
    let ((), failure) = timed(&[], async {
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
        zookeeper_run(args.zookeeper_partitions, args.brokers).await?;
    }
    #[cfg(not(feature = "zookeeper"))]
    if args.zookeeper_partitions > 0 {
        println!("(real-ZooKeeper figures: build with `--features zookeeper`)");
    }
    Ok(())
}

#[cfg(feature = "zookeeper")]
async fn zookeeper_run(partitions: i32, brokers: i32) -> Result<(), BoxError> {
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
    for _ in 0..=brokers {
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
    populate("ZooKeeper", &*admin, partitions, brokers, 2_000).await?;
    println!(
        "(ZooKeeper set-up of {partitions} partitions: {:.1} s)",
        setup.elapsed().as_secs_f64()
    );
    // Let the server finish what the set-up left (snapshots) before timing.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let servers: Vec<u32> = zk.sids().iter().filter_map(|sid| zk.pid(*sid)).collect();
    let (handle, failover_time, moved) = failover(&clients, &servers).await?;
    // Broker 2's registration vanishes (as when its session ends).
    let (deleted, failure) = timed(&servers, async {
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

/// The run on a real ZooKeeper ensemble (`--ensemble N`).
#[cfg(feature = "zookeeper")]
mod ensemble {
    use std::path::Path;
    use std::process::Command;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use futures::stream::{FuturesOrdered, FuturesUnordered};
    use futures::StreamExt;
    use ha_coordination::{
        Coordination, CreateMode, Op, ZooKeeperCoordination, ZooKeeperOptions, ANY_VERSION,
    };
    use ha_testkit::{ServerMode, ZkEnsemble};
    use kafka_controller::zk_data::{paths, KafkaZkClient, FENCED_BATCH_BYTES};

    use super::{
        broker_failure, cpu_seconds, failover, load_average, mib, report, rss_bytes, timed,
        topic_znodes, Args, BoxError, Figures, Progress, PARTITIONS_PER_TOPIC,
    };

    /// A scratch znode (not Kafka's) whose writes make each server take a snapshot.
    const SNAPSHOT_TRIGGER: &str = "/controller-bench-snapshot-trigger";
    /// How long the servers may take for one snapshot of the whole tree.
    const SNAPSHOT_WAIT: Duration = Duration::from_secs(180);
    /// How long a follower with an empty data directory may take to rejoin.
    const RESYNC_WAIT: Duration = Duration::from_secs(600);

    /// ZooKeeper's encoded size of a create inside a `multi` (header, path, data, the
    /// `world:anyone` ACL, flags), rounded up.
    fn create_size(path: &str, data: &[u8]) -> usize {
        64 + path.len() + data.len()
    }

    /// Writes the topics (see [`topic_znodes`]) with `multi`s: each topic's znodes, parents
    /// first, in transactions of at most [`FENCED_BATCH_BYTES`] (one for a topic of 1000
    /// partitions with RF 3, ~320 KB), `window` transactions in flight on the one session
    /// (a session's requests are applied in the order sent, so a topic split over two
    /// transactions still gets its parents first). Returns the znodes and bytes written.
    async fn populate_multi(
        coord: &dyn Coordination,
        partitions: i32,
        brokers: i32,
        window: usize,
    ) -> Result<(usize, usize), BoxError> {
        let topics = partitions / PARTITIONS_PER_TOPIC;
        let per_topic = 2 + 2 * usize::try_from(PARTITIONS_PER_TOPIC)?;
        let total = usize::try_from(topics)? * per_topic;
        let mut progress = Progress::new("ensemble set-up".to_string(), total);
        let mut bytes = 0;
        let mut in_flight = FuturesOrdered::new();
        for t in 0..topics {
            let mut batch: Vec<Op> = Vec::new();
            let mut batch_bytes = 0;
            let mut batches = Vec::new();
            for (path, data) in topic_znodes(t, brokers)?.into_iter().flatten() {
                let size = create_size(&path, &data);
                bytes += path.len() + data.len();
                if !batch.is_empty() && batch_bytes + size > FENCED_BATCH_BYTES {
                    batches.push(std::mem::take(&mut batch));
                    batch_bytes = 0;
                }
                batch_bytes += size;
                batch.push(Op::create(path, data, CreateMode::Persistent));
            }
            batches.push(batch);
            for ops in batches {
                let first = ops
                    .first()
                    .map(|o| o.path().to_string())
                    .unwrap_or_default();
                let n = ops.len();
                in_flight.push_back(async move { (first, n, coord.multi(ops).await) });
                while in_flight.len() >= window {
                    if let Some((first, n, outcome)) = in_flight.next().await {
                        progress.count_many(&first, n, outcome);
                        progress.report();
                    }
                }
            }
        }
        while let Some((first, n, outcome)) = in_flight.next().await {
            progress.count_many(&first, n, outcome);
            progress.report();
        }
        progress.finish()?;
        Ok((total, bytes))
    }

    /// `jcmd <pid> GC.heap_info`'s heap line as (total, used) in bytes.
    fn heap_info(pid: u32) -> Option<(i64, i64)> {
        let out = Command::new("jcmd")
            .arg(pid.to_string())
            .arg("GC.heap_info")
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find(|l| l.contains("heap") && l.contains("total") && l.contains("used"))?;
        let kib_after = |word: &str| -> Option<i64> {
            let rest = &line[line.find(word)? + word.len()..];
            let digits: String = rest
                .trim_start()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse::<i64>().ok().map(|k| k * 1024)
        };
        Some((kib_after("total")?, kib_after("used")?))
    }

    /// Runs a full collection in `pid` (`jcmd <pid> GC.run`), so the used heap after it is the
    /// live set.
    fn full_gc(pid: u32) -> bool {
        Command::new("jcmd")
            .arg(pid.to_string())
            .arg("GC.run")
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// The snapshots under `server_dir/data/version-2` as (zxid, bytes), newest last.
    fn snapshots(server_dir: &Path) -> Vec<(u64, u64)> {
        let Ok(entries) = std::fs::read_dir(server_dir.join("data").join("version-2")) else {
            return Vec::new();
        };
        let mut out: Vec<(u64, u64)> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let zxid = u64::from_str_radix(name.strip_prefix("snapshot.")?, 16).ok()?;
                Some((zxid, e.metadata().ok()?.len()))
            })
            .collect();
        out.sort_unstable();
        out
    }

    /// The snapshots a server's log reports as written, as (zxid, ms): each `Snapshotting: 0x…`
    /// line (the start) paired with the `Snapshot taken in N ms` line that ends it.
    fn snapshot_times(log: &str) -> Vec<(u64, u64)> {
        let mut started = None;
        let mut out = Vec::new();
        for line in log.lines() {
            if let Some(i) = line.find("Snapshotting: 0x") {
                let hex: String = line[i + "Snapshotting: 0x".len()..]
                    .chars()
                    .take_while(char::is_ascii_hexdigit)
                    .collect();
                started = u64::from_str_radix(&hex, 16).ok();
            } else if let Some(i) = line.find("Snapshot taken in ") {
                let ms = line[i + "Snapshot taken in ".len()..]
                    .split_whitespace()
                    .next()
                    .and_then(|m| m.parse().ok());
                if let (Some(zxid), Some(ms)) = (started.take(), ms) {
                    out.push((zxid, ms));
                }
            }
        }
        out
    }

    /// `key` of server `sid`'s `mntr` answer.
    fn mntr(zk: &ZkEnsemble, sid: u64, key: &str) -> Option<String> {
        let answer = zk.four_letter_word(sid, "mntr").ok()?;
        answer.lines().find_map(|l| {
            let (k, v) = l.split_once('\t')?;
            (k == key).then(|| v.trim().to_string())
        })
    }

    /// The servers' pids, in sid order.
    fn pids(zk: &ZkEnsemble) -> Result<Vec<u32>, BoxError> {
        zk.sids()
            .iter()
            .map(|&sid| {
                zk.pid(sid)
                    .ok_or_else(|| format!("server {sid} is not running").into())
            })
            .collect()
    }

    fn print_servers(zk: &ZkEnsemble, when: &str) {
        for sid in zk.sids() {
            let mode = zk
                .srvr(sid)
                .map(|s| format!("{:?}", s.mode))
                .unwrap_or_else(|e| format!("not serving ({e})"));
            let znodes = mntr(zk, sid, "zk_znode_count").unwrap_or_else(|| "?".into());
            let data = mntr(zk, sid, "zk_approximate_data_size")
                .and_then(|d| d.parse::<i64>().ok())
                .map_or("?".to_string(), |d| format!("{:.0} MiB", mib(d)));
            let pid = zk.pid(sid);
            let heap = pid
                .and_then(heap_info)
                .map_or("? (no jcmd)".to_string(), |(t, u)| {
                    format!("{:.0} MiB used of {:.0} MiB committed", mib(u), mib(t))
                });
            let rss = pid
                .and_then(|p| rss_bytes(Some(p)))
                .map_or("?".to_string(), |r| format!("{:.0} MiB", mib(r)));
            println!(
                "  server {sid} ({when}): {mode}, {znodes} znodes, data {data}; heap (jcmd \
                 GC.heap_info) {heap}; resident set {rss}"
            );
        }
    }

    /// Writes `count` small updates to [`SNAPSHOT_TRIGGER`] (a `multi` or a write each counts
    /// one transaction towards `snapCount`), 500 in flight.
    async fn trigger_writes(coord: &dyn Coordination, count: u32) -> Result<(), BoxError> {
        let mut in_flight = FuturesUnordered::new();
        for i in 0..count {
            let data = i.to_be_bytes();
            in_flight
                .push(async move { coord.set_data(SNAPSHOT_TRIGGER, &data, ANY_VERSION).await });
            if in_flight.len() >= 500 {
                if let Some(r) = in_flight.next().await {
                    r?;
                }
            }
        }
        while let Some(r) = in_flight.next().await {
            r?;
        }
        Ok(())
    }

    /// Makes every server snapshot the whole tree (writes past `snapCount`, again while a
    /// server has not written a snapshot that starts after `after`, the zxid the set-up ended
    /// at) and prints each one's.
    async fn snapshot_report(
        zk: &ZkEnsemble,
        coord: &dyn Coordination,
        snap_count: u32,
        after: u64,
    ) -> Result<(), BoxError> {
        let complete = |sid: u64| {
            snapshot_times(&zk.log(sid))
                .into_iter()
                .find(|&(zxid, _)| zxid >= after)
        };
        coord
            .create(SNAPSHOT_TRIGGER, b"", CreateMode::Persistent)
            .await?;
        let started = Instant::now();
        let mut rounds = 0;
        loop {
            trigger_writes(coord, snap_count).await?;
            rounds += 1;
            let round = Instant::now();
            let done = loop {
                let done = zk.sids().iter().all(|&sid| complete(sid).is_some());
                if done || round.elapsed() > SNAPSHOT_WAIT / 4 {
                    break done;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            };
            if done {
                break;
            }
            if started.elapsed() > SNAPSHOT_WAIT {
                return Err(format!(
                    "the servers did not all take a snapshot within {SNAPSHOT_WAIT:?}"
                )
                .into());
            }
        }
        println!(
            "snapshots of the whole tree (set-up ended at zxid {after:#x}; {rounds} × \
             {snap_count} trigger writes, {:.1} s until every server had written one):",
            started.elapsed().as_secs_f64()
        );
        for sid in zk.sids() {
            let snaps = zk.dir(sid).map(snapshots).unwrap_or_default();
            let Some((zxid, ms)) = complete(sid) else {
                continue;
            };
            let size = snaps
                .iter()
                .find(|(z, _)| *z == zxid)
                .map_or("?".to_string(), |(_, len)| {
                    format!("{:.1} MiB", mib(i64::try_from(*len).unwrap_or(0)))
                });
            println!(
                "  server {sid}: snapshot.{zxid:x}: {size}, taken in {ms} ms ({} snapshot files \
                 on disk)",
                snaps.len()
            );
        }
        Ok(())
    }

    /// Kills a follower, empties its data directory (keeping `myid`) and times its restart
    /// until it serves again: the leader sends it the whole tree (a SNAP sync).
    async fn follower_resync(zk: &mut ZkEnsemble) -> Result<(), BoxError> {
        let leader = zk.wait_for_leader(Duration::from_secs(60))?;
        let Some(follower) = zk.sids().into_iter().find(|&sid| {
            sid != leader && zk.srvr(sid).is_ok_and(|s| s.mode == ServerMode::Follower)
        }) else {
            return Err("no follower to resync".into());
        };
        zk.kill(follower)?;
        let version2 = zk.dir(follower)?.join("data").join("version-2");
        std::fs::remove_dir_all(&version2)
            .map_err(|e| format!("removing {}: {e}", version2.display()))?;
        let leader_pid = zk.pid(leader).ok_or("the leader is not running")?;
        let leader_cpu = cpu_seconds(Some(leader_pid));
        let snaps_before = snapshot_times(&zk.log(follower)).len();
        let start = Instant::now();
        zk.restart(follower)?;
        let follower_cpu_start = zk.pid(follower).map(|p| cpu_seconds(Some(p)));
        let sync = tokio::task::block_in_place(|| zk.wait_serving(follower, RESYNC_WAIT));
        let wall = start.elapsed();
        sync.map_err(|e| format!("server {follower} did not rejoin: {e}"))?;
        let follower_cpu = zk
            .pid(follower)
            .zip(follower_cpu_start)
            .map_or(0.0, |(p, s)| cpu_seconds(Some(p)) - s);
        let znodes = mntr(zk, follower, "zk_znode_count").unwrap_or_else(|| "?".into());
        println!(
            "follower resync: server {follower} (empty data directory) serving again after \
             {:.1} s with {znodes} znodes; CPU leader {:.2} s, follower {:.2} s; load average {}",
            wall.as_secs_f64(),
            cpu_seconds(Some(leader_pid)) - leader_cpu,
            follower_cpu,
            load_average()
        );
        // After a SNAP sync the follower writes a snapshot of its own.
        let deadline = Instant::now() + SNAPSHOT_WAIT;
        while snapshot_times(&zk.log(follower)).len() <= snaps_before && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let times = snapshot_times(&zk.log(follower));
        if times.len() > snaps_before {
            if let Some((zxid, ms)) = times.last() {
                println!("  its first snapshot: snapshot.{zxid:x} in {ms} ms");
            }
        }
        Ok(())
    }

    /// Sessions that are not the ones opened at the start (an expiry renews the session).
    fn renewed(clients: &[Arc<dyn Coordination>], ids: &[i64]) -> usize {
        clients
            .iter()
            .zip(ids)
            .filter(|(c, id)| c.session_id() != **id)
            .count()
    }

    pub(super) async fn run(args: &Args) -> Result<(), BoxError> {
        let partitions = args.ensemble_partitions;
        println!(
            "ensemble run: {} Apache ZooKeeper servers, heap {} MiB each, snapCount {}, \
             jute.maxbuffer {}; {partitions} partitions, RF 3 over {} brokers; load average {}",
            args.ensemble,
            args.heap_mb,
            args.snap_count,
            args.jute_maxbuffer
                .map_or("default (1 MiB - 1)".to_string(), |b| b.to_string()),
            args.brokers,
            load_average()
        );
        let mut builder = ZkEnsemble::builder()
            .servers(args.ensemble)
            .heap_mb(args.heap_mb)
            .server_jvm(true)
            .start_timeout(Duration::from_secs(180))
            .config("snapCount", args.snap_count.to_string());
        if let Some(bytes) = args.jute_maxbuffer {
            builder = builder.jvm_arg(format!("-Djute.maxbuffer={bytes}"));
        }
        let mut zk = builder
            .start()
            .map_err(|e| format!("the ZooKeeper ensemble did not start: {e}"))?;
        let leader = zk.wait_for_leader(Duration::from_secs(60))?;
        println!(
            "ensemble up, leader: server {leader}; connect string {}",
            zk.connect_string()
        );
        // Kafka's session timeout is 18 s; 30 s (within tickTime 2 s × 20) leaves room for a
        // loaded machine.
        let options = ZooKeeperOptions::new()
            .with_session_timeout(Duration::from_secs(30))
            .with_connection_timeout(Duration::from_secs(10));
        let mut clients: Vec<Arc<dyn Coordination>> = Vec::new();
        for _ in 0..=args.brokers {
            let c = ZooKeeperCoordination::connect_with(&zk.connect_string(), options.clone())
                .await
                .map_err(|e| format!("cannot connect to ZooKeeper: {e}"))?;
            clients.push(Arc::new(c));
        }
        let session_ids: Vec<i64> = clients.iter().map(|c| c.session_id()).collect();
        let admin = clients.remove(0);
        KafkaZkClient::new(admin.clone())
            .create_persistent_paths()
            .await?;

        let servers = pids(&zk)?;
        let window = usize::try_from(args.window)?;
        let (setup, setup_phase) = timed(
            &servers,
            populate_multi(&*admin, partitions, args.brokers, window),
        )
        .await;
        let (znodes, bytes) = setup?;
        let secs = setup_phase.wall.as_secs_f64();
        println!(
            "set-up: {znodes} znodes ({:.0} MiB of paths and data) in {secs:.1} s = {:.0} znodes/s, \
             {:.1} MiB/s; CPU this process {:.1} s, ZooKeeper servers {}; load average {}",
            mib(i64::try_from(bytes)?),
            znodes as f64 / secs,
            mib(i64::try_from(bytes)?) / secs,
            setup_phase.own_cpu,
            setup_phase
                .server_cpu
                .iter()
                .map(|s| format!("{s:.1}"))
                .collect::<Vec<_>>()
                .join(" + "),
            setup_phase.load
        );
        print_servers(&zk, "after the set-up");
        let leader = zk.wait_for_leader(Duration::from_secs(60))?;
        let setup_end = zk.srvr(leader)?.zxid;
        snapshot_report(&zk, &*admin, args.snap_count, setup_end).await?;

        let (handle, failover_time, moved) = failover(&clients, &servers).await?;
        // Broker 2's registration vanishes (as when its session ends). Its session may be on
        // another server than the controller's, which may not have applied the deletion yet:
        // a `sync` on the controller's session first, so the broker change it handles sees it
        // (its watch on the brokers would fire once that server has applied it).
        let (deleted, failure) = timed(&servers, async {
            clients[1]
                .delete(&paths::broker(2), -1)
                .await
                .map_err(|e| format!("deleting broker 2's registration: {e}"))?;
            let synced = clients[0].sync(paths::BROKER_IDS).await;
            broker_failure(&handle).await;
            synced.map_err(|e| format!("sync on the controller's session: {e}"))
        })
        .await;
        let stats = handle.stats().await;
        handle.shutdown();
        deleted?;
        let figures = Figures {
            failover: failover_time,
            failure,
            moved,
        };
        let Some(stats) = stats else {
            return Err("the controller was not active after the broker failure".into());
        };
        println!(
            "controller after the broker failure: {} partitions, {} live brokers, {} leader \
             elections written, {} offline partitions",
            stats.global_partition_count,
            stats.live_brokers,
            stats.leader_elections,
            stats.offline_partitions
        );
        let expected_live = usize::try_from(args.brokers - 1)?;
        if stats.live_brokers != expected_live || stats.leader_elections < moved as u64 {
            return Err(format!(
                "the broker failure was not handled within the timed phase ({} live brokers, {} \
                 elections; expected {expected_live} and {moved}): the figure would be meaningless",
                stats.live_brokers, stats.leader_elections
            )
            .into());
        }
        report(
            &format!(
                "ZooKeeper 3.8, {}-server ensemble (loopback)",
                args.ensemble
            ),
            partitions,
            &figures,
            true,
        );
        let mut sessions = vec![admin.clone()];
        sessions.extend(clients.iter().cloned());
        println!(
            "sessions renewed after an expiry during the run: {} of {}",
            renewed(&sessions, &session_ids),
            sessions.len()
        );
        print_servers(&zk, "after the broker failure");
        for sid in zk.sids() {
            if let Some(pid) = zk.pid(sid) {
                let gc = Instant::now();
                if full_gc(pid) {
                    let live = heap_info(pid)
                        .map_or("?".to_string(), |(_, used)| format!("{:.0} MiB", mib(used)));
                    println!(
                        "  server {sid}: live heap after a full collection (jcmd GC.run, {:.1} s): \
                         {live}",
                        gc.elapsed().as_secs_f64()
                    );
                }
            }
        }
        if args.follower_resync {
            follower_resync(&mut zk).await?;
        }
        Ok(())
    }
}
