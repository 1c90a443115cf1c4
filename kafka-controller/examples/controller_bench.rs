//! Controller failover and broker failure timings, printed beside Kafka 1.1's published figures
//! (Confluent, "Apache Kafka Supports 200K Partitions Per Cluster": controller failover with
//! 100k partitions 14 s; controlled shutdown of a broker with 10k of 50k partitions 3 s).
//!
//! `cargo run --release -p kafka-controller --example controller_bench` runs on
//! `MemoryCoordination` (1,000,000 partitions); with `--features zookeeper` it also runs on a
//! real ZooKeeper 3.8 started by `ha-testkit` (100,000 partitions). Arguments:
//! `[memory partitions] [zookeeper partitions]`.
//!
//! Each figure is printed with Kafka 1.1's, the target and the ratio, plus the CPU time this
//! process (controller and client) and the ZooKeeper server spent meanwhile, and the load
//! average: on a shared machine the wall time alone says little.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// Writes topics of 1000 partitions with RF 3 over `BROKERS` brokers, leader = first replica,
/// with up to `window` writes in flight.
async fn populate(coord: &dyn Coordination, partitions: i32, window: usize) {
    let topics = partitions / PARTITIONS_PER_TOPIC;
    let mut paths_data: Vec<(String, Vec<u8>)> = Vec::new();
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
        let data = znode.to_json().unwrap_or_default();
        coord
            .create(&paths::topic(&topic), &data, CreateMode::Persistent)
            .await
            .ok();
        coord
            .create(
                &paths::topic_partitions(&topic),
                b"",
                CreateMode::Persistent,
            )
            .await
            .ok();
        for (p, replicas) in assignment {
            paths_data.push((paths::partition(&topic, p), Vec::new()));
            let state = PartitionStateZNode::new(replicas[0], 0, 1, replicas.clone());
            paths_data.push((
                paths::partition_state(&topic, p),
                state.to_json().unwrap_or_default(),
            ));
        }
    }
    // Parents before children: partition nodes first, then states.
    for parity in [0, 1] {
        let batch: Vec<&(String, Vec<u8>)> = paths_data.iter().skip(parity).step_by(2).collect();
        for chunk in batch.chunks(window) {
            join_all(
                chunk
                    .iter()
                    .map(|(p, d)| coord.create(p, d, CreateMode::Persistent)),
            )
            .await;
        }
    }
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
) -> (ControllerHandle, Phase, usize) {
    for (i, s) in sessions.iter().enumerate() {
        let id = i32::try_from(i).unwrap_or(0) + 1;
        KafkaZkClient::new(s.clone())
            .register_broker(
                id,
                &BrokerRegistration::plaintext("localhost", 9092, None, 0),
            )
            .await
            .ok();
    }
    let mut config = ControllerConfig::new(1);
    config.auto_leader_rebalance_enable = false;
    let channel = MemoryBrokerChannel::new();
    channel.set_recording(false);
    let (handle, elapsed) = timed(server, async {
        let handle = Controller::start(config, sessions[0].clone(), Arc::new(channel));
        handle.wait_active(Duration::from_secs(600)).await;
        handle
    })
    .await;
    let led_by_2 = handle
        .context()
        .await
        .map(|c| c.partitions_led_by(2).len())
        .unwrap_or(0);
    (handle, elapsed, led_by_2)
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
        targets.then_some(1.4 / 100_000.0 * f64::from(partitions)),
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
async fn main() {
    let args: Vec<i32> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let memory_partitions = args.first().copied().unwrap_or(1_000_000);
    let tree = MemoryTree::new();
    let admin = tree.connect();
    KafkaZkClient::new(Arc::new(admin.clone()))
        .create_persistent_paths()
        .await
        .ok();
    populate(&admin, memory_partitions, 10_000).await;
    let sessions: Vec<Arc<dyn Coordination>> = (0..BROKERS)
        .map(|_| Arc::new(tree.connect()) as Arc<dyn Coordination>)
        .collect();
    let (handle, failover_time, moved) = failover(&sessions, None).await;
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
    {
        let zk_partitions = args.get(1).copied().unwrap_or(100_000);
        if zk_partitions > 0 {
            zookeeper_run(zk_partitions).await;
        }
    }
}

#[cfg(feature = "zookeeper")]
async fn zookeeper_run(partitions: i32) {
    use ha_coordination::{ZooKeeperCoordination, ZooKeeperOptions};
    // A heap large enough for 100k partitions without full collections.
    let zk = match ha_testkit::ZkEnsemble::builder().heap_mb(2048).start() {
        Ok(zk) => zk,
        Err(e) => {
            println!("ZooKeeper not available ({e}); real-ZooKeeper figures skipped");
            return;
        }
    };
    let options = ZooKeeperOptions::new()
        .with_session_timeout(Duration::from_secs(30))
        .with_connection_timeout(Duration::from_secs(10));
    let mut clients: Vec<Arc<dyn Coordination>> = Vec::new();
    for _ in 0..=BROKERS {
        match ZooKeeperCoordination::connect_with(&zk.connect_string(), options.clone()).await {
            Ok(c) => clients.push(Arc::new(c)),
            Err(e) => {
                println!("cannot connect to ZooKeeper: {e}");
                return;
            }
        }
    }
    let admin = clients.remove(0);
    KafkaZkClient::new(admin.clone())
        .create_persistent_paths()
        .await
        .ok();
    let setup = Instant::now();
    populate(&*admin, partitions, 2_000).await;
    println!(
        "(ZooKeeper set-up of {partitions} partitions: {:.1} s)",
        setup.elapsed().as_secs_f64()
    );
    // Let the server finish what the set-up left (snapshots) before timing.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let server = zk.sids().first().and_then(|sid| zk.pid(*sid));
    let (handle, failover_time, moved) = failover(&clients, server).await;
    // Broker 2's registration vanishes (as when its session ends).
    let ((), failure) = timed(server, async {
        let _ = clients[1].delete(&paths::broker(2), -1).await;
        broker_failure(&handle).await;
    })
    .await;
    let figures = Figures {
        failover: failover_time,
        failure,
        moved,
    };
    handle.shutdown();
    report("ZooKeeper 3.8 (loopback)", partitions, &figures, true);
}
