//! The Prometheus endpoint of `ha-broker --metrics-listen`, scraped during a failover on real
//! ZooKeeper: Kafka's metric names, one active controller before and after the controller is
//! killed, under-replicated partitions while a replica is gone, leader elections counted by the
//! new controller, per-API request counts. Fails under `CI` when ZooKeeper is missing.

mod kcat_common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ha_coordination::{Coordination, ZooKeeperCoordination};
use ha_testkit::{free_ports, require_zookeeper, ZkEnsemble};
use kafka_controller::admin;
use kafka_controller::assignment::AssignmentStart;
use kcat_common::{tail, BrokerProcess};

const START: Duration = Duration::from_secs(60);
const WAIT: Duration = Duration::from_secs(60);

/// One scrape of `/metrics`: name (with labels) → value.
fn scrape(port: u16) -> Option<Vec<(String, f64)>> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    let text = body.split_once("\r\n\r\n")?.1;
    Some(
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .filter_map(|l| {
                let (name, value) = l.rsplit_once(' ')?;
                Some((name.to_owned(), value.parse().ok()?))
            })
            .collect(),
    )
}

/// The value of metric `name` (without labels) in a scrape, 0 when absent.
fn value(m: &[(String, f64)], name: &str) -> f64 {
    m.iter().filter(|(n, _)| n == name).map(|(_, v)| *v).sum()
}

/// The sum of metric `name` over several brokers' scrapes.
fn total(scrapes: &[Vec<(String, f64)>], name: &str) -> f64 {
    scrapes.iter().map(|s| value(s, name)).sum()
}

/// The indexes of the scrapes whose broker is the active controller.
fn active_controllers(scrapes: &[Vec<(String, f64)>]) -> Vec<usize> {
    (0..scrapes.len())
        .filter(|&i| {
            value(
                &scrapes[i],
                "kafka_controller_kafkacontroller_activecontrollercount",
            ) == 1.0
        })
        .collect()
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

#[test]
fn metrics_endpoint_reports_kafka_names_through_a_controller_failover() {
    let name = "metrics_endpoint_reports_kafka_names_through_a_controller_failover";
    match require_zookeeper(name) {
        Ok(true) => {}
        Ok(false) => return,
        Err(e) => panic!("{e}"),
    }
    let zk = ZkEnsemble::standalone().unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().expect("temp dir");
    let ports = free_ports(3).expect("free ports");
    let mut brokers = Vec::new();
    for id in 1..=3 {
        let config = dir.path().join(format!("server-{id}.properties"));
        write(
            &config,
            &format!(
                "broker.id={id}\nlisteners=PLAINTEXT://127.0.0.1:0\nlog.dirs={}\n\
                 zookeeper.connect={}\nzookeeper.session.timeout.ms=6000\n\
                 replica.lag.time.max.ms=2000\nauto.leader.rebalance.enable=false\n",
                dir.path().join(format!("data-{id}")).display(),
                zk.connect_string()
            ),
        );
        let args: Vec<String> = [
            "--config".to_owned(),
            config.display().to_string(),
            "--metrics-listen".to_owned(),
            format!("127.0.0.1:{}", ports[id as usize - 1]),
        ]
        .into();
        let log = dir.path().join(format!("broker-{id}.log"));
        brokers
            .push(BrokerProcess::start(id, &args, &log, START).unwrap_or_else(|e| panic!("{e}")));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let store: Arc<dyn Coordination> = Arc::new(
        rt.block_on(ZooKeeperCoordination::connect(&zk.connect_string()))
            .expect("connects"),
    );
    rt.block_on(admin::create_topic(
        store.as_ref(),
        "m",
        3,
        3,
        AssignmentStart::fixed(0),
    ))
    .expect("topic created");
    let scrape_all = |ids: &[i32]| -> Vec<Vec<(String, f64)>> {
        ids.iter()
            .map(|&id| scrape(ports[id as usize - 1]).unwrap_or_default())
            .collect()
    };
    let logs = |brokers: &[BrokerProcess]| {
        brokers
            .iter()
            .map(|b| format!("--- broker {} ---\n{}", b.id, tail(&b.log, 30)))
            .collect::<Vec<_>>()
            .join("\n")
    };
    // Before: one active controller, three leaders in all, everything fully replicated.
    let deadline = Instant::now() + WAIT;
    let controller = loop {
        let m = scrape_all(&[1, 2, 3]);
        let active = active_controllers(&m);
        let leaders = total(&m, "kafka_server_replicamanager_leadercount");
        let partitions = total(&m, "kafka_server_replicamanager_partitioncount");
        let urp = total(&m, "kafka_server_replicamanager_underreplicatedpartitions");
        if active.len() == 1 && leaders == 3.0 && partitions == 9.0 && urp == 0.0 {
            let c = &m[active[0]];
            assert_eq!(
                value(c, "kafka_controller_kafkacontroller_globalpartitioncount"),
                3.0
            );
            assert_eq!(
                value(c, "kafka_controller_kafkacontroller_activebrokercount"),
                3.0
            );
            assert_eq!(
                value(c, "kafka_controller_kafkacontroller_offlinepartitionscount"),
                0.0
            );
            break active[0] as i32 + 1;
        }
        assert!(
            Instant::now() < deadline,
            "the cluster never settled: active {active:?}, leaders {leaders}, partitions {partitions}, URP {urp}\n{}",
            logs(&brokers)
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    // The controller (which leads one partition too) dies.
    brokers[(controller - 1) as usize].kill();
    let survivors: Vec<i32> = (1..=3).filter(|id| *id != controller).collect();
    let deadline = Instant::now() + WAIT;
    loop {
        let m = scrape_all(&survivors);
        let active = active_controllers(&m);
        let leaders = total(&m, "kafka_server_replicamanager_leadercount");
        let urp = total(&m, "kafka_server_replicamanager_underreplicatedpartitions");
        // Exported even while zero: leaders did not shrink any ISR, the controller did.
        let shrinks_exported = m.iter().all(|s| {
            s.iter()
                .any(|(n, _)| n == "kafka_server_replicamanager_isrshrinks_total")
        });
        if let [a] = active[..] {
            let c = &m[a];
            let elections = value(c, "kafka_controller_controllerstats_leaderelections_total");
            // The controller took the dead broker out of every ISR (K1.2): all three
            // partitions are under-replicated, none is offline.
            if leaders == 3.0 && urp == 3.0 && elections >= 1.0 && shrinks_exported {
                assert_eq!(
                    value(c, "kafka_controller_kafkacontroller_activebrokercount"),
                    2.0
                );
                assert_eq!(
                    value(c, "kafka_controller_kafkacontroller_offlinepartitionscount"),
                    0.0
                );
                let served = m.iter().any(|s| {
                    s.iter().any(|(n, v)| {
                        n.starts_with("kafka_network_requestmetrics_requests_total{")
                            && n.contains("request=\"LeaderAndIsr\"")
                            && *v >= 1.0
                    })
                });
                assert!(served, "LeaderAndIsr requests are counted per API");
                assert!(
                    m.iter()
                        .all(|s| value(s, "kafka_server_brokertopicmetrics_bytesin_total") > 0.0),
                    "bytes in are counted"
                );
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "after the controller died: active {active:?}, leaders {leaders}, URP {urp}\n{}",
            logs(&brokers)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
