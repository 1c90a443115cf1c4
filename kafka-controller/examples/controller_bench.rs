//! Controller failover and broker failure timings, printed beside Kafka 1.1's published figures
//! (Confluent, "Apache Kafka Supports 200K Partitions Per Cluster": controller failover with
//! 100k partitions 14 s; controlled shutdown of a broker with 10k of 50k partitions 3 s).
//!
//! `cargo run --release -p kafka-controller --example controller_bench` runs on
//! `MemoryCoordination` (1,000,000 partitions); with `--features zookeeper` it also runs on a
//! real ZooKeeper 3.8 started by `ha-testkit` (100,000 partitions). Arguments:
//! `[memory partitions] [zookeeper partitions]`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use kafka_controller::broker_channel::MemoryBrokerChannel;
use kafka_controller::controller::{Controller, ControllerConfig};
use kafka_controller::coordination::{Coordination, CreateMode, MemoryTree};
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
        let data = TopicAssignment::new(assignment.clone())
            .to_json()
            .unwrap_or_default();
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

struct Figures {
    failover: Duration,
    failure: Duration,
    moved: usize,
}

/// Registers the brokers, starts broker 1's controller, times its failover (K6, loading every
/// partition), then kills broker 2 and times the leadership moves (K1).
async fn measure(
    connect: &dyn Fn() -> Arc<dyn Coordination>,
    expire: &dyn Fn(&Arc<dyn Coordination>),
) -> Figures {
    let mut sessions = Vec::new();
    for b in 1..=BROKERS {
        let s = connect();
        KafkaZkClient::new(s.clone())
            .register_broker(
                b,
                &BrokerRegistration::plaintext("localhost", 9092, None, 0),
            )
            .await
            .ok();
        sessions.push(s);
    }
    let mut config = ControllerConfig::new(1);
    config.auto_leader_rebalance_enable = false;
    let channel = MemoryBrokerChannel::new();
    let start = Instant::now();
    let handle = Controller::start(config, sessions[0].clone(), Arc::new(channel.clone()));
    handle.wait_active(Duration::from_secs(600)).await;
    let failover = start.elapsed();
    let led_by_2 = handle
        .context()
        .await
        .map(|c| c.partitions_led_by(2).len())
        .unwrap_or(0);
    let start = Instant::now();
    expire(&sessions[1]);
    // Wait for the broker change to be handled.
    loop {
        handle.sync().await;
        let done = handle
            .context()
            .await
            .is_some_and(|c| !c.is_broker_live(2) && c.partitions_led_by(2).is_empty());
        if done {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let failure = start.elapsed();
    handle.shutdown();
    Figures {
        failover,
        failure,
        moved: led_by_2,
    }
}

fn report(backend: &str, partitions: i32, f: &Figures) {
    println!("{backend}: {partitions} partitions");
    println!(
        "  controller failover: {:>8.3} s   (Kafka 1.1: 14 s for 100k; ratio {:.1}x faster per partition)",
        f.failover.as_secs_f64(),
        14.0 / 100_000.0 * f64::from(partitions) / f.failover.as_secs_f64()
    );
    println!(
        "  broker failure, {} leaderships moved: {:>8.3} s   (Kafka 1.1 controlled shutdown: 3 s for 10k)",
        f.moved,
        f.failure.as_secs_f64()
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
    let t = tree.clone();
    let connect = move || -> Arc<dyn Coordination> { Arc::new(t.connect()) };
    let t = tree.clone();
    let expire = move |c: &Arc<dyn Coordination>| {
        t.expire(c.session_id());
    };
    let figures = measure(&connect, &expire).await;
    report("MemoryCoordination", memory_partitions, &figures);
    #[cfg(feature = "zookeeper")]
    zookeeper_run(args.get(1).copied().unwrap_or(100_000)).await;
}

#[cfg(feature = "zookeeper")]
async fn zookeeper_run(partitions: i32) {
    use kafka_controller::coordination::{ZooKeeperCoordination, ZooKeeperOptions};
    let zk = match ha_testkit::ZkEnsemble::standalone() {
        Ok(zk) => zk,
        Err(e) => {
            println!("ZooKeeper not available ({e}); real-ZooKeeper figures skipped");
            return;
        }
    };
    let connect_string = zk.connect_string();
    let options = ZooKeeperOptions {
        session_timeout: Duration::from_secs(6),
        connection_timeout: Duration::from_secs(10),
    };
    let mut clients: Vec<Arc<dyn Coordination>> = Vec::new();
    for _ in 0..=BROKERS {
        match ZooKeeperCoordination::connect_with(&connect_string, options.clone()).await {
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
    let pool = std::sync::Mutex::new(clients);
    let connect = || -> Arc<dyn Coordination> {
        pool.lock()
            .map(|mut p| p.remove(0))
            .unwrap_or_else(|_| admin.clone())
    };
    // Closing a client ends its session at once (ephemerals deleted), as an expiry would.
    let doomed = std::sync::Mutex::new(Vec::new());
    let expire = |c: &Arc<dyn Coordination>| {
        if let Ok(mut d) = doomed.lock() {
            d.push(c.clone());
        }
        let c = c.clone();
        tokio::spawn(async move {
            let _ = c.delete("/brokers/ids/2", -1).await;
        });
    };
    let figures = measure(&connect, &expire).await;
    report("ZooKeeper 3.8 (loopback)", partitions, &figures);
}
