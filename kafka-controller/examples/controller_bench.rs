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
use kafka_controller::controller::{
    Controller, ControllerConfig, ControllerEvent, ControllerHandle,
};
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

/// Registers the brokers on `sessions` (broker i + 1 on `sessions[i]`), starts broker 1's
/// controller and times its failover (K6: campaign, load every partition, start-up passes).
async fn failover(sessions: &[Arc<dyn Coordination>]) -> (ControllerHandle, Duration, usize) {
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
    let start = Instant::now();
    let handle = Controller::start(config, sessions[0].clone(), Arc::new(channel));
    handle.wait_active(Duration::from_secs(600)).await;
    let elapsed = start.elapsed();
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
    let sessions: Vec<Arc<dyn Coordination>> = (0..BROKERS)
        .map(|_| Arc::new(tree.connect()) as Arc<dyn Coordination>)
        .collect();
    let (handle, failover_time, moved) = failover(&sessions).await;
    let start = Instant::now();
    tree.expire(sessions[1].session_id());
    broker_failure(&handle).await;
    let figures = Figures {
        failover: failover_time,
        failure: start.elapsed(),
        moved,
    };
    handle.shutdown();
    report("MemoryCoordination", memory_partitions, &figures);
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
    use kafka_controller::coordination::{ZooKeeperCoordination, ZooKeeperOptions};
    // A heap large enough for 100k partitions without full collections.
    let zk = match ha_testkit::ZkEnsemble::builder().heap_mb(2048).start() {
        Ok(zk) => zk,
        Err(e) => {
            println!("ZooKeeper not available ({e}); real-ZooKeeper figures skipped");
            return;
        }
    };
    let options = ZooKeeperOptions {
        session_timeout: Duration::from_secs(30),
        connection_timeout: Duration::from_secs(10),
    };
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
    let (handle, failover_time, moved) = failover(&clients).await;
    // Broker 2's registration vanishes (as when its session ends).
    let start = Instant::now();
    let _ = clients[1].delete(&paths::broker(2), -1).await;
    broker_failure(&handle).await;
    let figures = Figures {
        failover: failover_time,
        failure: start.elapsed(),
        moved,
    };
    handle.shutdown();
    report("ZooKeeper 3.8 (loopback)", partitions, &figures);
}
