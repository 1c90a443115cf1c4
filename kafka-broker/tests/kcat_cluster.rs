//! A real Kafka client (`kcat`, on librdkafka) against three `ha-broker` processes on a real
//! ZooKeeper: the topic is created with `ha-admin`, `kcat -L` shows its leaders and ISRs,
//! `kcat -P -X acks=all` produces keyed messages with headers and `kcat -C` reads every one
//! back in order per partition; then the leader of partition 0 is SIGKILLed, a new leader
//! takes over (K1), and after another 1,000 messages all 2,000 are read back. On the way,
//! `ha-admin` moves a partition off its leader (K7) and triggers a preferred election; at the end
//! the killed broker restarts on its data directory and rejoins every ISR, everything is read
//! back once more, and `ha-admin` deletes the topic (K2.1).
//!
//! Fails when `CI` is set and `kcat` or ZooKeeper is missing; skips with a notice otherwise.
//! Every process it starts is killed when the test ends, passing or not.

mod kcat_common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use ha_testkit::ZkEnsemble;
use kcat_common::cluster::{assert_all_read_back, environment_ready, Cluster, PARTITIONS, TOPIC};
use kcat_common::CONSUME_FORMAT;
use kcat_common::{args, kcat_present, parse_consumed, parse_metadata, run, tail, BrokerProcess};

const KCAT_LIMIT: Duration = Duration::from_secs(30);

#[test]
fn kcat_against_three_broker_processes_on_zookeeper_survives_killing_a_partition_leader() {
    let name =
        "kcat_against_three_broker_processes_on_zookeeper_survives_killing_a_partition_leader";
    if !environment_ready(name) {
        return;
    }
    let started = Instant::now();
    let zk = ZkEnsemble::builder()
        .servers(1)
        .tick_time(Duration::from_millis(200))
        .start()
        .expect("ZooKeeper starts");
    let mut cluster = Cluster::start(zk);

    // Wait for the three registrations, then create the topic with the admin tool; kcat -L
    // shows every partition led, three replicas, all in sync.
    cluster.wait_registered();
    let meta = cluster.create_topic();
    let described = cluster.admin(&["describe", TOPIC]);
    assert!(described.ok, "admin describe: {}", described.stderr);
    assert!(described
        .stdout
        .contains("PartitionCount: 3\tReplicationFactor: 3"));

    // K7 through `ha-admin`: partition 1 moves off its leader onto its two followers; then a
    // preferred election for it (its leader is then the preferred replica).
    let target: Vec<i32> = meta[&1].replicas.iter().copied().skip(1).collect();
    let list = target
        .iter()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let out = cluster.admin(&["reassign", TOPIC, "1", &list]);
    assert!(out.ok, "admin reassign: {}\n{}", out.stdout, out.stderr);
    let wanted = "Partition: 1\t";
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = cluster.admin(&["describe", TOPIC]);
        let line = out
            .stdout
            .lines()
            .find(|l| l.contains(wanted))
            .unwrap_or_default()
            .to_owned();
        if line.contains(&format!("Replicas: {list}\t"))
            && !line.contains("AddingReplicas")
            && !line.contains("RemovingReplicas")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "partition 1 not reassigned:\n{}\n{}\n{}",
            out.stdout,
            out.stderr,
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // Refused while the reassignment request is still pending.
        let out = cluster.admin(&["preferred-election", TOPIC, "1"]);
        if out.ok {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "admin preferred-election: {}\n{}",
            out.stdout,
            out.stderr
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (meta, _) = cluster.wait_metadata("partition 1 led by its preferred replica", |m| {
        m.len() == PARTITIONS as usize
            && m.get(&1)
                .is_some_and(|p| p.leader == target[0] && p.replicas == target && p.isr.len() == 2)
            && m.values()
                .all(|p| p.leader > 0 && p.isr.len() == p.replicas.len())
    });

    // 1,000 keyed messages with headers, acks=all; all read back.
    cluster.produce(0..1000, "first");
    assert_all_read_back(&cluster.consume_all(), 1000, 1000);

    // SIGKILL the leader of partition 0 and wait for a new one out of the ISR.
    let (victim, _) = cluster.kill_partition_leader(&meta, 0);
    let described = cluster.admin(&["describe", TOPIC]);
    assert!(
        !described.stdout.contains(&format!("Leader: {victim}\t")),
        "admin still shows the dead leader:\n{}",
        described.stdout
    );

    // 1,000 more on the two survivors; all 2,000 read back, nothing missing.
    cluster.produce(1000..2000, "second");
    assert_all_read_back(&cluster.consume_all(), 2000, 1000);

    // The killed broker restarts on its data directory (FileLog recovery), registers with a
    // new broker epoch and catches up: every ISR is full again (K5).
    cluster.start_broker(victim, "restarted");
    cluster.wait_metadata("the restarted broker back in every ISR", |m| {
        m.len() == PARTITIONS as usize
            && m.values()
                .all(|p| p.leader > 0 && p.isr.len() == p.replicas.len())
    });
    assert_all_read_back(&cluster.consume_all(), 2000, 1000);

    // K2.1 through `ha-admin`: with every replica online the controller deletes the topic.
    let out = cluster.admin(&["delete-topic", TOPIC]);
    assert!(out.ok, "admin delete-topic: {}\n{}", out.stdout, out.stderr);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let described = cluster.admin(&["describe", TOPIC]);
        if described.stderr.contains("does not exist") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "topic not deleted:\n{}\n{}\n{}",
            described.stdout,
            described.stderr,
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }

    eprintln!(
        "kcat cluster test: killed and restarted broker {victim}; took {:.1}s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn kcat_against_a_single_in_memory_broker_with_auto_created_topics_then_sigterm_stops_it_cleanly() {
    let name = "kcat_against_a_single_in_memory_broker_with_auto_created_topics_then_sigterm_stops_it_cleanly";
    if !kcat_present() {
        if std::env::var_os("CI").is_some() {
            panic!("kcat is required under CI (Debian package `kcat`)");
        }
        eprintln!("SKIPPED {name}: kcat not found (set CI to make this a failure)");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("broker.log");
    let mut broker = BrokerProcess::start(
        1,
        &args(&[
            "--id",
            "1",
            "--listen",
            "127.0.0.1:0",
            "--memory",
            "--topic",
            "orders:2",
        ]),
        &log,
        Duration::from_secs(30),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let b = broker.addr.clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = run(
            "kcat",
            &args(&["-b", &b, "-L", "-t", "orders", "-m", "5"]),
            "",
            KCAT_LIMIT,
        );
        let m = parse_metadata(&out.stdout, "orders");
        if m.len() == 2 && m.values().all(|p| p.leader == 1 && p.isr == vec![1]) {
            assert!(out.stdout.contains("broker 1 at ") && out.stdout.contains("(controller)"));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "topic not online:\n{}\n{}\n{}",
            out.stdout,
            out.stderr,
            tail(&log, 30)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let input: String = (0..100).map(|i| format!("k{i}:v{i}\n")).collect();
    let out = run(
        "kcat",
        &args(&["-b", &b, "-P", "-t", "orders", "-K:", "-X", "acks=all"]),
        &input,
        KCAT_LIMIT,
    );
    assert!(out.ok, "kcat -P: {}", out.stderr);
    let out = run(
        "kcat",
        &args(&[
            "-b",
            &b,
            "-C",
            "-t",
            "orders",
            "-o",
            "beginning",
            "-e",
            "-f",
            CONSUME_FORMAT,
        ]),
        "",
        KCAT_LIMIT,
    );
    assert!(out.ok, "kcat -C: {}", out.stderr);
    let got = parse_consumed(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    let keys: BTreeSet<String> = got
        .iter()
        .map(|m| format!("{}:{}", m.key, m.value))
        .collect();
    let expected: BTreeSet<String> = (0..100).map(|i| format!("k{i}:v{i}")).collect();
    assert_eq!(keys, expected);
    assert_eq!(got.len(), 100);
    // auto.create.topics.enable: producing to an unknown topic creates it (1 partition).
    let out = run(
        "kcat",
        &args(&["-b", &b, "-P", "-t", "auto", "-K:", "-X", "acks=all"]),
        "a:1\nb:2\n",
        KCAT_LIMIT,
    );
    assert!(
        out.ok,
        "kcat -P to a new topic: {}\n{}",
        out.stderr,
        tail(&log, 30)
    );
    let out = run(
        "kcat",
        &args(&[
            "-b",
            &b,
            "-C",
            "-t",
            "auto",
            "-o",
            "beginning",
            "-e",
            "-f",
            CONSUME_FORMAT,
        ]),
        "",
        KCAT_LIMIT,
    );
    let got = parse_consumed(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    let pairs: Vec<(i32, String, String)> = got
        .into_iter()
        .map(|m| (m.partition, m.key, m.value))
        .collect();
    assert_eq!(
        pairs,
        vec![(0, "a".into(), "1".into()), (0, "b".into(), "2".into())],
        "{}",
        out.stderr
    );
    assert!(
        broker.terminate(Duration::from_secs(20)),
        "broker did not exit cleanly on SIGTERM:\n{}",
        tail(&log, 30)
    );
    assert!(tail(&log, 30).contains("broker node stopped"));
}
