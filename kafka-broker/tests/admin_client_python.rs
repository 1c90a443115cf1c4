//! A real admin client against three brokers on a real ZooKeeper: `tests/python/admin_client.py`
//! drives confluent-kafka's AdminClient (and kafka-python's for the partition reassignment,
//! which confluent-kafka does not offer) through every administration API, asserting each
//! answer and the metadata; at each `CHECK` line this test checks the coordination store
//! (and the replicas' logs) before letting the script go on.
//!
//! Fails when `CI` is set and ZooKeeper or the Python clients are missing; skips otherwise.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use ha_coordination::{ZooKeeperCoordination, ZooKeeperOptions};
use ha_testkit::{require_python, require_zookeeper, ZkEnsemble};
use kafka_broker::node::{BrokerNode, LogPlacement, NodeConfig};
use kafka_controller::zk_data::{paths, KafkaZkClient};
use kafka_replication::isr::TopicPartition;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const WAIT: Duration = Duration::from_secs(60);

fn options() -> ZooKeeperOptions {
    ZooKeeperOptions::new()
        .with_session_timeout(Duration::from_secs(6))
        .with_connection_timeout(Duration::from_secs(10))
}

/// The script's process, killed when dropped.
struct Script(Child);

impl Drop for Script {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Cluster {
    zk: ZkEnsemble,
    nodes: BTreeMap<i32, BrokerNode>,
    addrs: BTreeMap<i32, SocketAddr>,
    observer: KafkaZkClient,
}

impl Cluster {
    async fn start_node(&mut self, id: i32, listen: SocketAddr) -> TestResult {
        let mut c = NodeConfig::new(id, listen);
        c.logs = LogPlacement::Memory;
        c.controller.auto_leader_rebalance_enable = false;
        c.registration_wait = kafka_broker::glue::holder_wait_for(Duration::from_secs(6));
        let session = Arc::new(
            ZooKeeperCoordination::connect_with(&self.zk.connect_string(), options()).await?,
        );
        let node = BrokerNode::start(c, session).await?;
        self.addrs.insert(id, node.local_addr());
        self.nodes.insert(id, node);
        Ok(())
    }

    fn controller(&self) -> Option<i32> {
        self.nodes
            .values()
            .find(|n| n.controller().status().active_epoch.is_some())
            .map(|n| n.id())
    }

    async fn config(&self, topic: &str) -> BTreeMap<String, String> {
        self.observer
            .topic_config(topic)
            .await
            .ok()
            .flatten()
            .map(|c| c.config)
            .unwrap_or_default()
    }

    async fn assignment(&self, topic: &str) -> Option<BTreeMap<i32, Vec<i32>>> {
        self.observer
            .topic_assignment(topic, false)
            .await
            .ok()
            .flatten()
            .map(|(a, _)| a.partitions)
    }

    async fn state(&self, topic: &str, partition: i32) -> Option<(i32, Vec<i32>)> {
        let states = self
            .observer
            .partition_states(&[(topic.to_owned(), partition)])
            .await;
        match states.into_iter().next() {
            Some(Ok(Some((s, _)))) => Some((s.leader, s.isr)),
            _ => None,
        }
    }
}

async fn wait_until<Fut: std::future::Future<Output = bool>>(
    what: &str,
    mut f: impl FnMut() -> Fut,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !f().await {
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("timed out waiting for {what}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Checks the store for one `CHECK` line; the words to answer after "ok".
async fn check(cluster: &mut Cluster, words: &[&str]) -> Result<String, String> {
    let arg = |i: usize| words.get(i).copied().unwrap_or("");
    let pairs = |from: usize| -> BTreeMap<String, String> {
        words[from..]
            .iter()
            .filter_map(|w| w.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    };
    match arg(0) {
        "absent" => {
            let topic = arg(1).to_owned();
            wait_until("the topic gone from the store", || async {
                cluster.assignment(&topic).await.is_none()
            })
            .await?;
            Ok(String::new())
        }
        "created" => {
            let (topic, partitions, rf): (&str, usize, usize) = (
                arg(1),
                arg(2).parse().map_err(|_| "partitions")?,
                arg(3).parse().map_err(|_| "rf")?,
            );
            let a = cluster.assignment(topic).await.ok_or("no assignment")?;
            if a.len() != partitions || a.values().any(|r| r.len() != rf) {
                return Err(format!("assignment {a:?}"));
            }
            let config = cluster.config(topic).await;
            if config != pairs(4) {
                return Err(format!("config {config:?}"));
            }
            Ok(String::new())
        }
        "config" => {
            let config = cluster.config(arg(1)).await;
            if config != pairs(2) {
                return Err(format!("config {config:?}"));
            }
            let changes = cluster
                .observer
                .coordination()
                .children(paths::CONFIG_CHANGES, false)
                .await
                .map_err(|e| e.to_string())?;
            if !changes.iter().any(|c| c.starts_with("config_change_")) {
                return Err(format!("no change notification: {changes:?}"));
            }
            Ok(String::new())
        }
        "partitions" => {
            let a = cluster.assignment(arg(1)).await.ok_or("no assignment")?;
            if a.len().to_string() != arg(2) {
                return Err(format!("assignment {a:?}"));
            }
            Ok(String::new())
        }
        "unpreferred" => {
            let topic = arg(1).to_owned();
            let controller = cluster.controller().ok_or("no controller")?;
            let a = cluster.assignment(&topic).await.ok_or("no assignment")?;
            let (partition, preferred) = a
                .iter()
                .map(|(p, r)| (*p, r[0]))
                .find(|(_, b)| *b != controller)
                .ok_or("no partition preferring another broker than the controller")?;
            let listen = cluster.addrs[&preferred];
            let node = cluster.nodes.remove(&preferred).ok_or("not running")?;
            node.shutdown().await;
            wait_until("another leader", || async {
                cluster
                    .state(&topic, partition)
                    .await
                    .is_some_and(|(l, _)| l >= 0 && l != preferred)
            })
            .await?;
            cluster
                .start_node(preferred, listen)
                .await
                .map_err(|e| e.to_string())?;
            wait_until("the preferred replica back in the ISR", || async {
                cluster
                    .state(&topic, partition)
                    .await
                    .is_some_and(|(_, isr)| isr.contains(&preferred))
            })
            .await?;
            // Every broker's metadata shows the restarted broker before the script goes on.
            let node = cluster.nodes.get(&controller).ok_or("controller stopped")?;
            wait_until("the restarted broker in the metadata", || async {
                node.apis()
                    .driver()
                    .with_manager(|m, _| m.metadata().is_alive(preferred))
            })
            .await?;
            Ok(partition.to_string())
        }
        "leader" => {
            let (partition, leader): (i32, i32) = (
                arg(2).parse().map_err(|_| "partition")?,
                arg(3).parse().map_err(|_| "leader")?,
            );
            match cluster.state(arg(1), partition).await {
                Some((l, _)) if l == leader => Ok(String::new()),
                other => Err(format!("state {other:?}")),
            }
        }
        "assignment" => {
            let partition: i32 = arg(2).parse().map_err(|_| "partition")?;
            let target: Vec<i32> = arg(3)
                .split(',')
                .map(|b| b.parse().map_err(|_| "broker"))
                .collect::<Result<_, _>>()?;
            let topic = arg(1).to_owned();
            wait_until("the reassignment done in the store", || async {
                cluster
                    .assignment(&topic)
                    .await
                    .is_some_and(|a| a.get(&partition) == Some(&target))
                    && cluster
                        .observer
                        .coordination()
                        .exists(paths::REASSIGN_PARTITIONS, false)
                        .await
                        .is_ok_and(|s| s.is_none())
            })
            .await?;
            Ok(String::new())
        }
        "cluster" => {
            let id = cluster
                .observer
                .get_or_create_cluster_id("unused")
                .await
                .map_err(|e| e.to_string())?;
            if id != arg(1)
                || cluster.controller().map(|c| c.to_string()).as_deref() != Some(arg(2))
            {
                return Err(format!(
                    "cluster id {id}, controller {:?}",
                    cluster.controller()
                ));
            }
            Ok(String::new())
        }
        "log-start" => {
            let tp =
                TopicPartition::new(arg(1).to_owned(), arg(2).parse().map_err(|_| "partition")?);
            let want: i64 = arg(3).parse().map_err(|_| "offset")?;
            // Every replica of the partition, as the store assigns it.
            let replicas = cluster
                .assignment(&tp.topic)
                .await
                .and_then(|a| a.get(&tp.partition).cloned())
                .ok_or("no assignment")?;
            for node in cluster
                .nodes
                .values()
                .filter(|n| replicas.contains(&n.id()))
            {
                let start = node
                    .apis()
                    .driver()
                    .with_manager(|m, _| m.partition(&tp).map(|p| p.log_start_offset()));
                if start != Some(want) {
                    return Err(format!("broker {}: log start {start:?}", node.id()));
                }
            }
            Ok(String::new())
        }
        other => Err(format!("unknown check {other}")),
    }
}

fn answer(stdin: &mut ChildStdin, line: &str) -> std::io::Result<()> {
    stdin.write_all(line.as_bytes())?;
    stdin.write_all(b"\n")?;
    stdin.flush()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_kafka_admin_client_administers_three_brokers_on_zookeeper() -> TestResult {
    const NAME: &str = "confluent_kafka_admin_client_administers_three_brokers_on_zookeeper";
    if !require_zookeeper(NAME)? {
        return Ok(());
    }
    let Some(python) = require_python(NAME, &["confluent_kafka", "kafka"])? else {
        return Ok(());
    };
    let zk = ZkEnsemble::builder()
        .tick_time(Duration::from_millis(500))
        .start()?;
    let observer = KafkaZkClient::new(Arc::new(
        ZooKeeperCoordination::connect(&zk.connect_string()).await?,
    ));
    let mut cluster = Cluster {
        zk,
        nodes: BTreeMap::new(),
        addrs: BTreeMap::new(),
        observer,
    };
    for id in 1..=3 {
        cluster.start_node(id, "127.0.0.1:0".parse()?).await?;
    }
    wait_until("a controller that sees the three brokers", || async {
        cluster.controller().is_some_and(|c| {
            cluster.nodes[&c]
                .apis()
                .driver()
                .with_manager(|m, _| m.metadata().live_brokers().count() == 3)
        })
    })
    .await?;
    let bootstrap: Vec<String> = cluster.addrs.values().map(|a| a.to_string()).collect();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/admin_client.py");
    let mut child = Script(
        Command::new(&python)
            .args([script, &bootstrap.join(","), "1,2,3"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?,
    );
    let mut stdin = child.0.stdin.take().ok_or("no stdin")?;
    let stdout = child.0.stdout.take().ok_or("no stdout")?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut steps = Vec::new();
    let mut done = false;
    while let Some(line) = tokio::time::timeout(Duration::from_secs(180), rx.recv()).await? {
        println!("{line}");
        if let Some(step) = line.strip_prefix("STEP ") {
            steps.push(step.to_owned());
        } else if let Some(what) = line.strip_prefix("CHECK ") {
            let words: Vec<&str> = what.split_whitespace().collect();
            match check(&mut cluster, &words).await {
                Ok(extra) => answer(&mut stdin, format!("ok {extra}").trim_end())?,
                Err(e) => {
                    answer(&mut stdin, "failed")?;
                    return Err(format!("store check {what}: {e}").into());
                }
            }
        } else if line == "DONE" {
            done = true;
        }
    }
    let status = child.0.wait()?;
    assert!(
        status.success() && done,
        "the script failed after steps {steps:?}"
    );
    assert_eq!(steps.len(), 10, "{steps:?}");
    for node in std::mem::take(&mut cluster.nodes).into_values() {
        node.shutdown().await;
    }
    Ok(())
}
