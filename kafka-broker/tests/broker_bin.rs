//! The `ha-broker` binary as an operator runs it: `--config server.properties` with Kafka's
//! keys (bad values stop it with an error naming the key, unknown keys are warned about), and
//! SIGTERM on a partition leader of a three-broker cluster on a real ZooKeeper (started by
//! `ha-testkit`; fails under `CI` when ZooKeeper is missing, skips otherwise) runs a controlled
//! shutdown: the leaderships move while the broker is still registered, then it deregisters
//! and exits 0. A broker process paused (SIGSTOP) until its session expired registers again
//! by itself when resumed, and rejoins the ISR.

mod kcat_common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ha_coordination::{Coordination, ZooKeeperCoordination};
use ha_testkit::{require_zookeeper, ZkEnsemble};
use kafka_controller::admin;
use kafka_controller::assignment::AssignmentStart;
use kafka_controller::zk_data::{paths, KafkaZkClient};
use kcat_common::{run, tail, BrokerProcess};

const START: Duration = Duration::from_secs(60);
const WAIT: Duration = Duration::from_secs(60);

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

fn broker_args(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn a_bad_server_properties_value_stops_the_broker_with_an_error_naming_the_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("server.properties");
    let cases = [
        ("broker.id=1\nnum.io.threads=zero\n", "num.io.threads"),
        (
            "broker.id=1\nunclean.leader.election.enable=maybe\n",
            "unclean.leader.election.enable",
        ),
        ("num.partitions=3\n", "broker.id"),
        (
            "broker.id=1\nlisteners=PLAINTEXT://0.0.0.0:0\n",
            "advertised.listeners",
        ),
    ];
    for (text, key) in cases {
        write(&config, text);
        let out = run(
            env!("CARGO_BIN_EXE_ha-broker"),
            &broker_args(&["--config", &config.display().to_string(), "--memory"]),
            "",
            Duration::from_secs(30),
        );
        assert!(!out.ok, "{text:?} was accepted");
        assert!(
            out.stderr.contains(key),
            "{text:?}: the error names {key}:\n{}",
            out.stderr
        );
    }
}

#[test]
fn server_properties_with_an_unknown_key_starts_and_warns_flags_override_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("server.properties");
    write(
        &config,
        "broker.id=4\nlisteners=PLAINTEXT://127.0.0.1:0\nlog.cleaner.enable=true\n\
         min.insync.replicas=3\n",
    );
    let log = dir.path().join("broker.log");
    // --id overrides broker.id (the process prints the id it runs as).
    let mut broker = BrokerProcess::start(
        9,
        &broker_args(&[
            "--config",
            &config.display().to_string(),
            "--id",
            "9",
            "--override",
            "min.insync.replicas=1",
            "--memory",
        ]),
        &log,
        START,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        broker.terminate(Duration::from_secs(30)),
        "{}",
        tail(&log, 30)
    );
    let text = tail(&log, 200);
    assert!(
        text.contains("log.cleaner.enable") && text.contains("unknown or unsupported setting"),
        "{text}"
    );
    assert!(text.contains("controlled shutdown"), "{text}");
}

/// The leader of each partition of `topic`.
async fn leaders(zk: &KafkaZkClient, topic: &str, partitions: i32) -> Vec<Option<i32>> {
    let wanted: Vec<(String, i32)> = (0..partitions).map(|p| (topic.to_owned(), p)).collect();
    zk.partition_states(&wanted)
        .await
        .into_iter()
        .map(|r| r.ok().flatten().map(|(s, _)| s.leader).filter(|l| *l >= 0))
        .collect()
}

#[test]
fn sigterm_on_a_leader_moves_its_leaderships_before_it_deregisters_and_exits_0() {
    let name = "sigterm_on_a_leader_moves_its_leaderships_before_it_deregisters_and_exits_0";
    match require_zookeeper(name) {
        Ok(true) => {}
        Ok(false) => return,
        Err(e) => panic!("{e}"),
    }
    let zk = ZkEnsemble::standalone().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().expect("temp dir");
    let mut brokers = Vec::new();
    for id in 1..=3 {
        let config = dir.path().join(format!("server-{id}.properties"));
        let data = dir.path().join(format!("data-{id}"));
        write(
            &config,
            &format!(
                "broker.id={id}\nlisteners=PLAINTEXT://127.0.0.1:0\nlog.dirs={}\n\
                 zookeeper.connect={}\nzookeeper.session.timeout.ms=6000\n\
                 auto.leader.rebalance.enable=false\ncontrolled.shutdown.retry.backoff.ms=500\n",
                data.display(),
                zk.connect_string()
            ),
        );
        let log = dir.path().join(format!("broker-{id}.log"));
        brokers.push(
            BrokerProcess::start(
                id,
                &broker_args(&["--config", &config.display().to_string()]),
                &log,
                START,
            )
            .unwrap_or_else(|e| panic!("{e}")),
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let store: Arc<dyn Coordination> = Arc::new(
        rt.block_on(ZooKeeperCoordination::connect(&zk.connect_string()))
            .expect("connects"),
    );
    let kzk = KafkaZkClient::new(store.clone());
    let deadline = Instant::now() + WAIT;
    while rt.block_on(kzk.live_broker_ids(false)).map(|b| b.len()) != Ok(3) {
        assert!(Instant::now() < deadline, "three brokers registered");
        std::thread::sleep(Duration::from_millis(50));
    }
    rt.block_on(admin::create_topic(
        store.as_ref(),
        "orders",
        3,
        3,
        AssignmentStart::fixed(0),
    ))
    .expect("topic created");
    let mut led = Vec::new();
    while Instant::now() < deadline {
        led = rt.block_on(leaders(&kzk, "orders", 3));
        if led.iter().all(Option::is_some) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let controller = rt
        .block_on(kzk.controller(false))
        .expect("reads /controller")
        .expect("a controller")
        .0
        .brokerid;
    let victim = (1..=3)
        .find(|id| *id != controller && led.contains(&Some(*id)))
        .expect("a leader that is not the controller");
    let process = &mut brokers[(victim - 1) as usize];
    let log = process.log.clone();
    assert!(
        process.terminate(Duration::from_secs(60)),
        "broker {victim} did not exit 0 on SIGTERM:\n{}",
        tail(&log, 40)
    );
    let text = tail(&log, 400);
    let succeeded = text
        .find("controlled shutdown succeeded")
        .unwrap_or_else(|| panic!("no controlled shutdown:\n{text}"));
    let stopped = text.find("broker node stopped").expect("stopped");
    assert!(
        succeeded < stopped,
        "leaderships moved before it stopped:\n{text}"
    );
    let now = rt.block_on(leaders(&kzk, "orders", 3));
    assert!(
        now.iter().all(|l| l.is_some_and(|l| l != victim)),
        "every partition has another leader: {now:?}"
    );
    assert_eq!(
        rt.block_on(store.exists(&paths::broker(victim), false))
            .expect("store"),
        None,
        "deregistered"
    );
}

#[test]
fn a_broker_paused_past_its_session_timeout_re_registers_and_rejoins_when_resumed() {
    let name = "a_broker_paused_past_its_session_timeout_re_registers_and_rejoins_when_resumed";
    match require_zookeeper(name) {
        Ok(true) => {}
        Ok(false) => return,
        Err(e) => panic!("{e}"),
    }
    let zk = ZkEnsemble::standalone().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().expect("temp dir");
    let mut brokers = Vec::new();
    for id in 1..=2 {
        let log = dir.path().join(format!("broker-{id}.log"));
        let data = dir.path().join(format!("data-{id}"));
        brokers.push(
            BrokerProcess::start(
                id,
                &broker_args(&[
                    "--id",
                    &id.to_string(),
                    "--listen",
                    "127.0.0.1:0",
                    "--data-dir",
                    &data.display().to_string(),
                    "--zookeeper",
                    &zk.connect_string(),
                    "--zookeeper-session-timeout-ms",
                    "4000",
                    "--replica-lag-time-max-ms",
                    "10000",
                ]),
                &log,
                START,
            )
            .unwrap_or_else(|e| panic!("{e}")),
        );
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let store: Arc<dyn Coordination> = Arc::new(
        rt.block_on(ZooKeeperCoordination::connect(&zk.connect_string()))
            .expect("connects"),
    );
    let kzk = KafkaZkClient::new(store.clone());
    let epoch_of = |id: i32| rt.block_on(kzk.broker(id)).ok().flatten().map(|(_, e)| e);
    let deadline = Instant::now() + WAIT;
    while epoch_of(1).is_none() || epoch_of(2).is_none() {
        assert!(Instant::now() < deadline, "both brokers registered");
        std::thread::sleep(Duration::from_millis(50));
    }
    let first = epoch_of(2).expect("registered");
    rt.block_on(admin::create_topic_with_assignment(
        store.as_ref(),
        "orders",
        &[(0, vec![2, 1])].into_iter().collect(),
    ))
    .expect("topic created");
    let isr = || {
        rt.block_on(kzk.partition_states(&[("orders".to_owned(), 0)]))
            .pop()
            .and_then(|r| r.ok().flatten())
            .map(|(s, _)| (s.leader, s.isr))
    };
    while isr() != Some((2, vec![2, 1])) {
        assert!(
            Instant::now() < deadline,
            "broker 2 leads orders-0 with a full ISR"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // SIGSTOP broker 2 until ZooKeeper expires its session.
    assert!(brokers[1].signal("STOP"));
    let deadline = Instant::now() + WAIT;
    while epoch_of(2).is_some() || isr().map(|(l, _)| l) != Some(1) {
        assert!(
            Instant::now() < deadline,
            "broker 2's session expired and broker 1 leads: {:?}",
            isr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // SIGCONT: it notices the expiry, registers again with a new epoch, and catches up.
    assert!(brokers[1].signal("CONT"));
    let deadline = Instant::now() + WAIT;
    loop {
        let epoch = epoch_of(2);
        let back_in_isr = isr().is_some_and(|(_, isr)| isr.contains(&2));
        if epoch.is_some_and(|e| e > first) && back_in_isr {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "broker 2 re-registered ({epoch:?} after {first}) and rejoined the ISR ({:?}):\n{}",
            isr(),
            tail(&brokers[1].log, 40)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(brokers[1].running(), "it never exited");
    for b in &mut brokers {
        assert!(b.terminate(Duration::from_secs(60)), "{}", tail(&b.log, 30));
    }
}
