//! A real Kafka client (`kcat`, on librdkafka) against one broker of `KafkaApis`: an
//! idempotent producer (InitProducerId, then Produce with acks=all) writes keyed messages, and
//! a consumer (ListOffsets, Fetch) reads every one back in order. The controller's part is
//! played by hand: LeaderAndIsr and UpdateMetadata go straight to the replica manager.
//!
//! When `kcat` is missing the test fails if the `CI` environment variable is set and is
//! skipped with a notice otherwise.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use kafka_broker::{Broker, BrokerConfig};
use kafka_replication::isr::MemoryIsrWriter;
use kafka_replication::log::MemoryLog;
use kafka_wire::messages::leader_and_isr_request::{
    LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_wire::messages::update_metadata_request::{
    UpdateMetadataBroker, UpdateMetadataEndpoint, UpdateMetadataPartitionState,
    UpdateMetadataTopicState,
};
use kafka_wire::messages::{LeaderAndIsrRequest, UpdateMetadataRequest};
use kafka_wire::Uuid;

fn kcat_present() -> bool {
    Command::new("kcat")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `kcat` with `args` and `input` on stdin, killing it after `limit`; returns
/// (success, stdout, stderr).
fn run_kcat(args: &[String], input: &str, limit: Duration) -> (bool, String, String) {
    let mut child = Command::new("kcat")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat starts");
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.as_bytes()).expect("stdin written");
    }
    let started = std::time::Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() < limit => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                break;
            }
        }
    }
    let out = child.wait_with_output().expect("kcat output");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_idempotent_producer_with_acks_all_and_consumer_read_back_every_message() {
    if !kcat_present() {
        if std::env::var_os("CI").is_some() {
            panic!("kcat is required under CI (Debian package `kcat`)");
        }
        eprintln!("kcat not found: skipping kcat_idempotent_producer_with_acks_all_and_consumer_read_back_every_message");
        return;
    }
    if let Ok(filter) = std::env::var("RUST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
    }
    let config = BrokerConfig::new(1, "127.0.0.1:0".parse().expect("address"));
    let broker = Broker::start(
        config,
        Box::new(|_| Ok(MemoryLog::new())),
        MemoryIsrWriter::new(),
        Arc::new(|_| None),
    )
    .await
    .expect("broker starts");
    let addr = broker.local_addr();
    let driver = broker.apis().driver().clone();

    let topic_id = Uuid([3; 16]);
    let leader_and_isr = LeaderAndIsrRequest {
        controller_id: 1,
        controller_epoch: 1,
        topic_states: vec![LeaderAndIsrTopicState {
            topic_name: "orders".into(),
            topic_id,
            partition_states: vec![LeaderAndIsrPartitionState {
                topic_name: "orders".into(),
                partition_index: 0,
                controller_epoch: 1,
                leader: 1,
                leader_epoch: 0,
                isr: vec![1].into(),
                replicas: vec![1].into(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let update_metadata = UpdateMetadataRequest {
        controller_id: 1,
        controller_epoch: 1,
        topic_states: vec![UpdateMetadataTopicState {
            topic_name: "orders".into(),
            topic_id,
            partition_states: vec![UpdateMetadataPartitionState {
                topic_name: "orders".into(),
                partition_index: 0,
                controller_epoch: 1,
                leader: 1,
                leader_epoch: 0,
                isr: vec![1].into(),
                replicas: vec![1].into(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        live_brokers: vec![UpdateMetadataBroker {
            id: 1,
            endpoints: vec![UpdateMetadataEndpoint {
                port: i32::from(addr.port()),
                host: "127.0.0.1".into(),
                listener: "PLAINTEXT".into(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    driver.with_manager(|m, now| {
        m.become_leader_or_follower(now, &leader_and_isr, 5);
        m.update_metadata(&update_metadata);
    });

    let bootstrap = addr.to_string();
    let input: String = (0..200).map(|i| format!("key-{i}:value-{i}\n")).collect();
    let produce: Vec<String> = [
        "-b",
        &bootstrap,
        "-P",
        "-t",
        "orders",
        "-p",
        "0",
        "-K:",
        "-X",
        "acks=all",
        "-X",
        "enable.idempotence=true",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (ok, stdout, stderr) =
        tokio::task::spawn_blocking(move || run_kcat(&produce, &input, Duration::from_secs(30)))
            .await
            .expect("kcat ran");
    assert!(ok, "kcat -P failed\nstdout:\n{stdout}\nstderr:\n{stderr}");

    let consume: Vec<String> = [
        "-b",
        &bootstrap,
        "-C",
        "-t",
        "orders",
        "-p",
        "0",
        "-o",
        "beginning",
        "-e",
        "-f",
        "%k:%s\n",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let (ok, stdout, stderr) =
        tokio::task::spawn_blocking(move || run_kcat(&consume, "", Duration::from_secs(30)))
            .await
            .expect("kcat ran");
    broker.shutdown().await;
    assert!(ok, "kcat -C failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    let expected: Vec<String> = (0..200).map(|i| format!("key-{i}:value-{i}")).collect();
    let got: Vec<String> = stdout.lines().map(str::to_owned).collect();
    assert_eq!(got, expected, "stderr:\n{stderr}");
}
