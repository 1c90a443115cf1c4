//! The `cluster` demo's flow as a library function: three brokers in one process on loopback
//! TCP over one coordination service — any backend behind a [`CoordinationCluster`] (the
//! in-memory store by default, real ZooKeeper with
//! [`ZooKeeperHarness`](crate::zookeeper_backend::ZooKeeperHarness)) — each with its
//! registration, its ISR writer and a campaigning controller reaching the brokers through
//! [`TcpBrokerChannel`]. The flow elects a controller, creates a topic, produces with
//! acks=all, kills a partition leader, kills the controller, restarts the dead brokers, moves a
//! partition onto a fourth broker started for it (K7, every step narrated), reads every
//! acknowledged record back, and deletes the topic (K2).
//!
//! A broker is killed as a crash would kill it: its server, controller and tasks stop, then
//! the harness ends its session, so its ephemeral nodes vanish as after a session timeout.
//! [`DemoConfig::on_step`] runs between steps, for an embedder to disturb the coordination
//! service (e.g. kill the leader of a replicated store) while the demo goes on.

mod config;
mod narration;
mod observe;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ha_coordination::Coordination;
use ha_coordination::CoordinationCluster;
use kafka_controller::admin;
use kafka_controller::assignment::AssignmentStart;
use kafka_controller::controller::{Controller, ControllerConfig, ControllerHandle};
use kafka_controller::zk_data::{BrokerRegistration, KafkaZkClient};
use kafka_replication::log::MemoryLog;
use kafka_replication::partition::PartitionConfig;
use kafka_wire::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_wire::messages::metadata_request::MetadataRequestTopic;
use kafka_wire::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_wire::messages::{FetchRequest, MetadataRequest, ProduceRequest};
use kafka_wire::records::{RecordBatchBuilder, RecordBatches};
use kafka_wire::{RequestBody, ResponseBody};

pub use config::{DemoConfig, DemoError, DemoReport, DemoStep, StepHook};
use narration::{K7Narration, Timeline};
pub use observe::{Observed, ObservedChannel, ObservedCoordination, Recorder};

use kafka_broker::glue::{
    BrokerRegistrar, IsrChangePropagator, IsrChangeQueue, IsrPropagationConfig, RegisteredBroker,
    ZkIsrWriter, ZkProducerIdManager,
};
use kafka_broker::{
    AddressBook, Broker, BrokerConfig, KafkaConnection, LinkError, TcpBrokerChannel,
};

/// The topic the demo creates.
pub const TOPIC: &str = "demo";
/// Partitions of the demo topic.
pub const PARTITIONS: i32 = 3;
/// Replication factor of the demo topic.
pub const REPLICATION_FACTOR: i32 = 3;
/// Produce version the demo's client sends.
const PRODUCE_VERSION: i16 = 9;
/// Metadata version the demo's client sends.
const METADATA_VERSION: i16 = 12;
/// Fetch version the demo's client sends.
const FETCH_VERSION: i16 = 12;

/// How long the demo's client waits for a Metadata or Fetch answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// One request on `c`, failing after `timeout` rather than waiting on a stuck broker.
async fn send(
    c: &mut KafkaConnection,
    version: i16,
    body: &RequestBody,
    timeout: Duration,
) -> Result<ResponseBody, LinkError> {
    tokio::time::timeout(timeout, c.send(version, body))
        .await
        .unwrap_or(Err(LinkError::Timeout))
}

type DemoBroker = Broker<MemoryLog, ZkIsrWriter>;

struct Node {
    broker: DemoBroker,
    controller: ControllerHandle,
    session: Arc<dyn Coordination>,
    registered: RegisteredBroker,
    propagator: IsrChangePropagator,
}

struct Cluster {
    harness: Arc<dyn CoordinationCluster>,
    recorder: Recorder,
    addresses: Arc<Mutex<HashMap<i32, SocketAddr>>>,
    nodes: BTreeMap<i32, Node>,
    partition: PartitionConfig,
}

impl Cluster {
    async fn start_node(&mut self, id: i32) -> Result<(), DemoError> {
        let session: Arc<dyn Coordination> = Arc::new(ObservedCoordination::new(
            self.harness.connect().await?,
            self.recorder.clone(),
        ));
        let changes = IsrChangeQueue::new(tokio::time::Instant::now());
        let isr_writer = ZkIsrWriter::new(session.clone(), changes.clone());
        let book = self.addresses.clone();
        let addresses: AddressBook = Arc::new(move |b| {
            book.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&b)
                .copied()
        });
        let mut config = BrokerConfig::new(id, SocketAddr::from(([127, 0, 0, 1], 0)));
        config.partition = self.partition;
        config.leader_link_timeout = Duration::from_secs(2);
        let broker = Broker::start(
            config,
            Box::new(|_| Ok(MemoryLog::new())),
            isr_writer,
            addresses,
        )
        .await?;
        let addr = broker.local_addr();
        self.addresses
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, addr);
        // Kafka waits up to 5 s before telling the controller of ISR changes; the demo
        // tells it within a second.
        let propagation = IsrPropagationConfig::default()
            .with_check_interval(Duration::from_millis(100))
            .with_linger(Duration::from_millis(200))
            .with_max_delay(Duration::from_secs(1));
        let propagator = IsrChangePropagator::spawn(session.clone(), changes, propagation);
        let registered = BrokerRegistrar::new(
            session.clone(),
            id,
            BrokerRegistration::plaintext("127.0.0.1", addr.port(), None, 0),
        )
        .start()
        .await?;
        // KIP-380: control requests meant for an earlier registration are refused.
        broker.apis().follow_registration(registered.subscribe());
        // Producer ids in blocks from /latest_producer_id_block, unique across restarts.
        broker
            .apis()
            .use_producer_ids(Arc::new(ZkProducerIdManager::new(session.clone(), id)));
        let channel = Arc::new(ObservedChannel::new(
            TcpBrokerChannel::new(id, "PLAINTEXT", Duration::from_secs(2)),
            self.recorder.clone(),
        ));
        let mut cc = ControllerConfig::new(id);
        // No preferred-leader moves of its own: the timeline shows only what the demo does.
        cc.auto_leader_rebalance_enable = false;
        let controller = Controller::start(cc, session.clone(), channel);
        self.nodes.insert(
            id,
            Node {
                broker,
                controller,
                session,
                registered,
                propagator,
            },
        );
        Ok(())
    }

    /// Kills broker `id` as a crash would: its server, controller and tasks stop, then its
    /// session ends (as when it times out), removing its registration and, if it was the
    /// controller, `/controller`.
    async fn kill(&mut self, id: i32) -> Result<(), DemoError> {
        let Some(node) = self.nodes.remove(&id) else {
            return Ok(());
        };
        node.controller.shutdown();
        node.propagator.stop();
        drop(node.registered);
        node.broker.shutdown().await;
        self.harness.expire(node.session.session_id()).await?;
        Ok(())
    }

    fn active_controller(&self) -> Option<(i32, i32)> {
        self.nodes
            .iter()
            .find_map(|(id, n)| n.controller.status().active_epoch.map(|e| (*id, e)))
    }

    async fn wait_controller(
        &self,
        newer_than: Option<i32>,
        timeout: Duration,
    ) -> Result<(i32, i32), DemoError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some((id, epoch)) = self.active_controller() {
                if newer_than.is_none_or(|old| epoch > old) {
                    return Ok((id, epoch));
                }
            }
            if Instant::now() > deadline {
                return Err(DemoError::Timeout("an active controller".into()));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn addr(&self, id: i32) -> Option<SocketAddr> {
        self.nodes.get(&id).map(|n| n.broker.local_addr())
    }

    /// The partitions of the topic as a live broker sees them: (leader, leader epoch, isr).
    async fn metadata(&self) -> Option<BTreeMap<i32, (i32, i32, Vec<i32>)>> {
        let (_, node) = self.nodes.iter().next()?;
        let mut c = KafkaConnection::connect(node.broker.local_addr(), "demo-admin")
            .await
            .ok()?;
        let body = RequestBody::Metadata(MetadataRequest {
            topics: Some(vec![MetadataRequestTopic {
                name: Some(TOPIC.into()),
                ..Default::default()
            }]),
            ..Default::default()
        });
        let ResponseBody::Metadata(m) = send(&mut c, METADATA_VERSION, &body, REQUEST_TIMEOUT)
            .await
            .ok()?
        else {
            return None;
        };
        let topic = m.topics.into_iter().find(|t| t.error_code == 0)?;
        Some(
            topic
                .partitions
                .into_iter()
                .map(|p| {
                    (
                        p.partition_index,
                        (p.leader_id, p.leader_epoch, p.isr_nodes.to_vec()),
                    )
                })
                .collect(),
        )
    }

    /// Waits until every partition has a live leader satisfying `ok`.
    async fn wait_metadata(
        &self,
        what: &str,
        timeout: Duration,
        ok: impl Fn(&BTreeMap<i32, (i32, i32, Vec<i32>)>) -> bool,
    ) -> Result<BTreeMap<i32, (i32, i32, Vec<i32>)>, DemoError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(m) = self.metadata().await {
                let led = m.len() == PARTITIONS as usize
                    && m.values().all(|(l, _, _)| self.nodes.contains_key(l));
                if led && ok(&m) {
                    return Ok(m);
                }
            }
            if Instant::now() > deadline {
                return Err(DemoError::Timeout(what.to_owned()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Produces `n` records to each partition with acks=all, one record per request; returns
    /// the values acknowledged.
    async fn produce_round(&self, round: usize, n: usize, timeout: Duration) -> Vec<Vec<u8>> {
        let mut acked = Vec::new();
        let Some(meta) = self.metadata().await else {
            return acked;
        };
        for (partition, (leader, _, _)) in meta {
            let Some(addr) = self.addr(leader) else {
                continue;
            };
            let Ok(mut c) = KafkaConnection::connect(addr, "demo-producer").await else {
                continue;
            };
            for i in 0..n {
                let value = format!("r{round}-p{partition}-{i}").into_bytes();
                let mut b = RecordBatchBuilder::new(0);
                if b.append(0, Some(b"k"), Some(&value), &[]).is_err() {
                    continue;
                }
                let Ok(records) = b.build() else { continue };
                let body = RequestBody::Produce(ProduceRequest {
                    acks: -1,
                    timeout_ms: i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX),
                    topic_data: vec![TopicProduceData {
                        name: TOPIC.into(),
                        partition_data: vec![PartitionProduceData {
                            index: partition,
                            records: Some(records),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }],
                    ..Default::default()
                });
                if let Ok(ResponseBody::Produce(r)) =
                    send(&mut c, PRODUCE_VERSION, &body, timeout * 2).await
                {
                    let ok = r
                        .responses
                        .iter()
                        .flat_map(|t| t.partition_responses.iter())
                        .any(|p| p.index == partition && p.error_code == 0);
                    if ok {
                        acked.push(value);
                    }
                }
            }
        }
        acked
    }

    /// Reads every partition from its leader, from offset 0 to the high watermark.
    async fn read_all(&self) -> BTreeSet<Vec<u8>> {
        let mut values = BTreeSet::new();
        let Some(meta) = self.metadata().await else {
            return values;
        };
        for (partition, (leader, epoch, _)) in meta {
            let Some(addr) = self.addr(leader) else {
                continue;
            };
            let Ok(mut c) = KafkaConnection::connect(addr, "demo-consumer").await else {
                continue;
            };
            let mut offset = 0;
            loop {
                let body = RequestBody::Fetch(FetchRequest {
                    replica_id: -1,
                    max_wait_ms: 0,
                    min_bytes: 1,
                    max_bytes: 1 << 20,
                    topics: vec![FetchTopic {
                        topic: TOPIC.into(),
                        partitions: vec![FetchPartition {
                            partition,
                            current_leader_epoch: epoch,
                            fetch_offset: offset,
                            last_fetched_epoch: -1,
                            log_start_offset: -1,
                            partition_max_bytes: 1 << 20,
                            ..Default::default()
                        }],
                        ..Default::default()
                    }],
                    ..Default::default()
                });
                let Ok(ResponseBody::Fetch(r)) =
                    send(&mut c, FETCH_VERSION, &body, REQUEST_TIMEOUT).await
                else {
                    break;
                };
                let Some(p) = r.responses.into_iter().flat_map(|t| t.partitions).next() else {
                    break;
                };
                if p.error_code != 0 {
                    break;
                }
                let before = offset;
                for batch in RecordBatches::new(p.records.unwrap_or_default()).flatten() {
                    let base = batch.base_offset();
                    let Ok(records) = batch.records() else { break };
                    for (i, record) in records.flatten().enumerate() {
                        let at = base + i64::try_from(i).unwrap_or(0);
                        if at >= offset && at < p.high_watermark {
                            if let Some(v) = record.value {
                                values.insert(v.to_vec());
                            }
                            offset = at + 1;
                        }
                    }
                }
                if offset >= p.high_watermark || offset == before {
                    break;
                }
            }
        }
        values
    }

    async fn shutdown(mut self) {
        let ids: Vec<i32> = self.nodes.keys().copied().collect();
        for id in ids {
            if let Some(node) = self.nodes.remove(&id) {
                node.controller.shutdown();
                node.propagator.stop();
                node.broker.shutdown().await;
            }
        }
    }
}

/// Runs the demo, narrating each step through `say`, and returns what it found.
pub async fn run(config: DemoConfig, say: impl FnMut(&str)) -> Result<DemoReport, DemoError> {
    let mut line = Timeline::new(say);
    let hook = config.on_step.clone();
    let mut cluster = Cluster {
        harness: config.harness.clone(),
        recorder: Recorder::new(),
        addresses: Arc::new(Mutex::new(HashMap::new())),
        nodes: BTreeMap::new(),
        partition: PartitionConfig::default().with_replica_lag_time_max_ms(2_000),
    };
    let result = flow(&mut cluster, &config, &mut line, hook).await;
    cluster.shutdown().await;
    result
}

/// Runs `hook` for `done`, if any, without counting it in the next step's time.
async fn after<F: FnMut(&str)>(hook: &Option<StepHook>, done: DemoStep, line: &mut Timeline<F>) {
    if let Some(hook) = hook {
        hook(done).await;
        line.restart();
    }
}

async fn flow<F: FnMut(&str)>(
    cluster: &mut Cluster,
    config: &DemoConfig,
    line: &mut Timeline<F>,
    hook: Option<StepHook>,
) -> Result<DemoReport, DemoError> {
    let step = config.step_timeout;
    let mut report = DemoReport::default();
    for id in 1..=3 {
        cluster.start_node(id).await?;
        let addr = cluster.addr(id).map(|a| a.to_string()).unwrap_or_default();
        line.step(format!("broker {id} listening on {addr}, registered"));
    }
    after(&hook, DemoStep::BrokersStarted, line).await;

    let (controller, epoch) = cluster.wait_controller(None, step).await?;
    report.controller_epochs.push(epoch);
    line.step(format!(
        "controller elected: broker {controller}, epoch {epoch}"
    ));
    after(&hook, DemoStep::ControllerElected, line).await;

    let admin_session = cluster.harness.connect().await?;
    let assignment = admin::create_topic(
        admin_session.as_ref(),
        TOPIC,
        PARTITIONS,
        REPLICATION_FACTOR,
        AssignmentStart::fixed(0),
    )
    .await?;
    line.step(format!("topic {TOPIC} created: assignment {assignment:?}"));
    let meta = cluster
        .wait_metadata("leaders and full ISRs", step, |m| {
            m.values().all(|(_, _, isr)| isr.len() == 3)
        })
        .await?;
    line.step(format!("partitions online (leader, epoch, isr): {meta:?}"));
    after(&hook, DemoStep::TopicOnline, line).await;

    let n = config.records_per_partition;
    let mut acked = cluster.produce_round(1, n, step).await;
    line.step(format!(
        "produced with acks=all: {} of {} acknowledged",
        acked.len(),
        n * PARTITIONS as usize
    ));
    after(&hook, DemoStep::Produced { round: 1 }, line).await;

    // Kill a partition leader that is not the controller, so the two failovers are apart.
    let (controller, _) = cluster.wait_controller(None, step).await?;
    let (victim_partition, victim) = meta
        .iter()
        .map(|(p, (l, _, _))| (*p, *l))
        .find(|(_, l)| *l != controller)
        .unwrap_or((0, controller));
    cluster.kill(victim).await?;
    line.step(format!(
        "killed broker {victim}, leader of partition {victim_partition}"
    ));
    let meta = cluster
        .wait_metadata("a new leader for every partition", step, |m| {
            m.values()
                .all(|(l, _, isr)| *l != victim && !isr.contains(&victim))
        })
        .await?;
    line.step(format!("new leaders (leader, epoch, isr): {meta:?}"));
    after(&hook, DemoStep::LeaderFailedOver { killed: victim }, line).await;
    let more = cluster.produce_round(2, n, step).await;
    line.step(format!(
        "produced with acks=all on two brokers: {} acknowledged",
        more.len()
    ));
    acked.extend(more);
    after(&hook, DemoStep::Produced { round: 2 }, line).await;

    // Kill the active controller.
    let (old_controller, old_epoch) = cluster.wait_controller(None, step).await?;
    cluster.kill(old_controller).await?;
    line.step(format!(
        "killed broker {old_controller}, the controller (epoch {old_epoch})"
    ));
    let (controller, epoch) = cluster.wait_controller(Some(old_epoch), step).await?;
    report.controller_epochs.push(epoch);
    line.step(format!(
        "new controller: broker {controller}, epoch {epoch} (was {old_epoch})"
    ));
    let meta = cluster
        .wait_metadata("every partition led by a live broker", step, |_| true)
        .await?;
    line.step(format!("partitions (leader, epoch, isr): {meta:?}"));
    after(
        &hook,
        DemoStep::ControllerFailedOver {
            killed: old_controller,
        },
        line,
    )
    .await;

    // The dead brokers come back and catch up.
    for id in [victim, old_controller] {
        cluster.start_node(id).await?;
        line.step(format!("restarted broker {id}"));
    }
    let meta = cluster
        .wait_metadata("ISR grown back to 3", step, |m| {
            m.values().all(|(_, _, isr)| isr.len() == 3)
        })
        .await?;
    line.step(format!("ISR grown back (leader, epoch, isr): {meta:?}"));
    after(&hook, DemoStep::IsrRestored, line).await;

    // K7: a fourth broker joins and partition 0 moves onto it, away from its leader.
    cluster.start_node(4).await?;
    let addr = cluster.addr(4).map(|a| a.to_string()).unwrap_or_default();
    line.step(format!(
        "broker 4 listening on {addr}, registered (the reassignment target)"
    ));
    after(&hook, DemoStep::FourthBrokerStarted, line).await;
    let (leader0, _, isr0) = meta.get(&0).cloned().unwrap_or((3, 0, vec![1, 2, 3]));
    let mut target = vec![4];
    target.extend(isr0.iter().copied().filter(|b| *b != leader0).take(2));
    reassign(
        cluster,
        admin_session.as_ref(),
        leader0,
        target.clone(),
        step,
        line,
    )
    .await?;
    let meta = cluster
        .wait_metadata("partition 0 led from its new replicas", step, |m| {
            m.get(&0).is_some_and(|(l, _, isr)| {
                target.contains(l)
                    && isr.len() == target.len()
                    && isr.iter().all(|b| target.contains(b))
            })
        })
        .await?;
    line.step(format!("after reassignment (leader, epoch, isr): {meta:?}"));
    after(&hook, DemoStep::Reassigned, line).await;
    let more = cluster.produce_round(3, n, step).await;
    line.step(format!(
        "produced with acks=all after the reassignment: {} acknowledged",
        more.len()
    ));
    acked.extend(more);
    after(&hook, DemoStep::Produced { round: 3 }, line).await;

    let read = cluster.read_all().await;
    report.acknowledged = acked.len();
    report.read_back = acked.iter().filter(|v| read.contains(*v)).count();
    report.lost = report.acknowledged - report.read_back;
    line.step(format!(
        "read back {} records; {} of {} acknowledged found",
        read.len(),
        report.read_back,
        report.acknowledged
    ));
    after(&hook, DemoStep::ReadBack, line).await;

    // K2: delete the topic and wait for the controller to finish.
    admin::delete_topic(admin_session.as_ref(), TOPIC).await?;
    line.step(format!("deletion of {TOPIC} requested"));
    let zk = KafkaZkClient::new(cluster.harness.connect().await?);
    let deadline = Instant::now() + step;
    loop {
        let topics = zk.topics(false).await?;
        let pending = zk.topics_to_delete(false).await?;
        if !topics.iter().any(|t| t == TOPIC) && pending.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            return Err(DemoError::Timeout("the topic deletion".into()));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    report.topic_deleted = true;
    line.step(format!("topic {TOPIC} deleted from the store"));
    after(&hook, DemoStep::TopicDeleted, line).await;
    Ok(report)
}

/// K7: requests the reassignment of partition 0 to `target` and narrates every write the
/// controller and the leader make to the partition's nodes and every control request for it,
/// until the request is gone and AR is the target.
async fn reassign<F: FnMut(&str)>(
    cluster: &Cluster,
    admin_session: &dyn Coordination,
    old_leader: i32,
    target: Vec<i32>,
    timeout: Duration,
    line: &mut Timeline<F>,
) -> Result<(), DemoError> {
    let zk = KafkaZkClient::new(cluster.harness.connect().await?);
    let oar = zk
        .topic_assignment(TOPIC, false)
        .await?
        .and_then(|(a, _)| a.partitions.get(&0).cloned())
        .unwrap_or_default();
    let tp = kafka_controller::context::TopicPartition::new(TOPIC, 0);
    let mut targets = BTreeMap::new();
    targets.insert(tp, target.clone());
    cluster.recorder.watch(TOPIC, 0);
    admin::reassign_partitions(admin_session, &targets).await?;
    line.step(format!(
        "reassignment of {TOPIC}-0 from {oar:?} (leader {old_leader}) to {target:?} requested"
    ));
    let deadline = Instant::now() + timeout;
    let mut narration = K7Narration {
        oar: &oar,
        rar: &target,
        old_leader,
        last: None,
    };
    let mut request_gone = false;
    // When the store was first seen with the reassignment complete.
    let mut store_done: Option<Instant> = None;
    loop {
        for event in cluster.recorder.take() {
            request_gone |= event == Observed::RequestDeleted;
            line.detail(narration.describe(&event));
        }
        // The last write is recorded just after it applies: give it a moment to show up.
        if store_done.is_some_and(|t| request_gone || t.elapsed() > Duration::from_millis(500)) {
            break;
        }
        if store_done.is_none() {
            let pending = zk.reassignment_request(false).await?.is_some();
            let ar = zk
                .topic_assignment(TOPIC, false)
                .await?
                .and_then(|(a, _)| a.partitions.get(&0).cloned())
                .unwrap_or_default();
            if !pending && ar == target {
                store_done = Some(Instant::now());
            }
        }
        if Instant::now() > deadline {
            cluster.recorder.stop();
            return Err(DemoError::Timeout("the reassignment".into()));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    cluster.recorder.stop();
    line.step(format!("reassignment of {TOPIC}-0 complete"));
    Ok(())
}
