//! Three `ha-broker` processes on a three-server ZooKeeper ensemble, by program: Apache
//! ZooKeeper 3.8 (Debian's `zookeeper`) or our `ha-zookeeper` (`ServerProgram::HaZookeeper`,
//! found by `ha_testkit::ha_zookeeper_binary`), with the same `zoo.cfg`. The brokers register,
//! `ha-admin` creates a topic of three partitions with three replicas, `kcat` produces 1,000
//! keyed messages with acks=all and reads every one back; the leader of partition 0 is
//! SIGKILLed, a new leader takes over out of the ISR (K1), and after 1,000 more messages all
//! 2,000 are read back, in order per partition, none missing or twice.
//!
//! Fails when `CI` is set and `kcat` or ZooKeeper is missing; skips with a notice otherwise.

mod kcat_common;

use std::time::Duration;

use ha_testkit::{ServerProgram, ZkEnsemble};
use kcat_common::cluster::{assert_all_read_back, environment_ready, kcat_ready, Cluster};

/// The kcat produce / kill-the-partition-leader / consume run on three servers of `program`.
fn produce_kill_partition_leader_consume(program: ServerProgram) {
    let zk = ZkEnsemble::builder()
        .servers(3)
        .tick_time(Duration::from_millis(500))
        .program(program)
        .start()
        .expect("the ensemble starts");
    let connect = zk.connect_string();
    let mut cluster = Cluster::start(zk);
    cluster.wait_registered();
    let meta = cluster.create_topic();
    cluster.produce(0..1000, "first");
    assert_all_read_back(&cluster.consume_all(), 1000, 1000);
    let (victim, after) = cluster.kill_partition_leader(&meta, 0);
    cluster.produce(1000..2000, "second");
    assert_all_read_back(&cluster.consume_all(), 2000, 1000);
    eprintln!(
        "brokers on {connect}: killed broker {victim}, partition 0 now led by {}",
        after[&0].leader
    );
}

#[test]
fn kcat_cluster_survives_killing_a_partition_leader_on_apache_zookeeper() {
    if !environment_ready("kcat_cluster_survives_killing_a_partition_leader_on_apache_zookeeper") {
        return;
    }
    produce_kill_partition_leader_consume(ServerProgram::ApacheZooKeeper);
}

#[test]
fn ha_zookeeper_kcat_cluster_survives_killing_a_partition_leader() {
    if !kcat_ready("ha_zookeeper_kcat_cluster_survives_killing_a_partition_leader") {
        return;
    }
    let bin = ha_testkit::ha_zookeeper_binary().unwrap_or_else(|e| panic!("{e}"));
    produce_kill_partition_leader_consume(ServerProgram::HaZookeeper(bin));
}
