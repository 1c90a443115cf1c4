//! One seeded run of the Kafka cluster on the real cores: the step loop on a paused tokio
//! clock, fault injection, the acks=all producer and the consumer, and the checks after every
//! step, every delivered message and every store write (the replication invariants of [`crate::kafka::check`], plus one active controller per
//! controller epoch and the store audit of stale controller writes).

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ha_coordination::{Coordination, CreateMode, MemoryCoordination, MemoryTree, SessionId};
use kafka_controller::zk_data::{
    paths, KafkaZkClient, PartitionStateZNode, ReassignPartitions, ReassignmentEntry,
    TopicAssignment, TopicConfig,
};
use kafka_replication::isr::{BrokerId, LeaderAndIsr, TopicPartition};
use kafka_wire::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_wire::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_wire::messages::{FetchRequest, ProduceRequest};
use kafka_wire::records::RecordBatches;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use tokio::sync::{mpsc, oneshot};

use super::broker::{lock, Env, SimBroker};
use super::channel::Outgoing;
use super::coord::{StaleWrite, StoreSnapshot, WriteLog};
use super::{Msg, RealConfig};
use crate::kafka::broker::produce_batch;
use crate::kafka::check::{BrokerView, Checker, Invariant, Violation};
use crate::kafka::cluster::Failure;
use crate::net::{NetConfig, NetStats, Network, NodeId};
use crate::trace::Trace;

/// The producer's node.
pub const PRODUCER: NodeId = 100;
/// The consumer's node.
pub const CONSUMER: NodeId = 101;
/// The topic.
pub const TOPIC: &str = "sim";

const METADATA_REFRESH_MS: u64 = 100;
const CONSUME_INTERVAL_MS: u64 = 20;
const CLIENT_TIMEOUT_MS: u64 = 600;
const MAX_OUTSTANDING: usize = 5;

/// Faults injected, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct RealFaultCounts {
    /// Process crashes (each followed by a restart).
    pub crash: u64,
    /// Long pauses.
    pub pause: u64,
    /// Of those, pauses of the active controller (it wakes as a zombie).
    pub controller_pause: u64,
    /// Symmetric network partitions.
    pub partition: u64,
    /// One-way cuts.
    pub one_way: u64,
    /// Forced session expiries.
    pub session_expiry: u64,
    /// Cuts between a broker and the coordination store.
    pub store_isolation: u64,
    /// Partition reassignments requested.
    pub reassign: u64,
    /// Of those, reassignments the controller completed (it deleted the request).
    pub reassign_completed: u64,
    /// Second topics created.
    pub topic_create: u64,
    /// Topic deletions requested.
    pub topic_delete: u64,
    /// Of those, deletions the controller completed (the topic's znodes are gone).
    pub topic_delete_completed: u64,
    /// Clean stops begun (ControlledShutdown).
    pub controlled_shutdown: u64,
    /// Of those, brokers that stopped (and restarted later).
    pub controlled_shutdown_stopped: u64,
}

impl RealFaultCounts {
    /// Adds `o` to `self`.
    pub fn add(&mut self, o: &RealFaultCounts) {
        self.crash += o.crash;
        self.pause += o.pause;
        self.controller_pause += o.controller_pause;
        self.partition += o.partition;
        self.one_way += o.one_way;
        self.session_expiry += o.session_expiry;
        self.store_isolation += o.store_isolation;
        self.reassign += o.reassign;
        self.reassign_completed += o.reassign_completed;
        self.topic_create += o.topic_create;
        self.topic_delete += o.topic_delete;
        self.topic_delete_completed += o.topic_delete_completed;
        self.controlled_shutdown += o.controlled_shutdown;
        self.controlled_shutdown_stopped += o.controlled_shutdown_stopped;
    }
}

/// What one run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RealStats {
    /// Steps simulated.
    pub steps: u64,
    /// Faults injected.
    pub faults: RealFaultCounts,
    /// The network's doings.
    pub net: NetStats,
    /// Records acknowledged with acks=all.
    pub acked: u64,
    /// Records consumed.
    pub consumed: u64,
    /// Controller epochs elected.
    pub controller_epochs: u64,
    /// Control requests the brokers refused as stale.
    pub refused_stale: u64,
    /// A digest of the run (the same seed gives the same digest).
    pub fingerprint: u64,
}

struct Client {
    leaders: BTreeMap<i32, BrokerId>,
    last_metadata: u64,
    next_seq: i64,
    next_id: u64,
    last_produce: u64,
    outstanding: BTreeMap<u64, (i64, i32, u64)>,
    consumer_offset: BTreeMap<i32, i64>,
    consumer_in_flight: BTreeMap<i32, (u64, u64)>,
    last_consume: u64,
}

/// A cluster being simulated.
pub struct RealCluster {
    cfg: RealConfig,
    seed: u64,
    rng: StdRng,
    now: u64,
    steps: u64,
    tree: MemoryTree,
    observer: MemoryCoordination,
    net: Network<Msg>,
    brokers: BTreeMap<BrokerId, SimBroker>,
    outbox_tx: mpsc::UnboundedSender<Outgoing>,
    outbox: mpsc::UnboundedReceiver<Outgoing>,
    replies_tx: mpsc::UnboundedSender<(NodeId, NodeId, Msg)>,
    replies: mpsc::UnboundedReceiver<(NodeId, NodeId, Msg)>,
    pending_control: BTreeMap<u64, oneshot::Sender<kafka_wire::ResponseBody>>,
    next_control: u64,
    audit: Arc<Mutex<Vec<StaleWrite>>>,
    writes: WriteLog,
    restart_at: BTreeMap<BrokerId, u64>,
    isolated: BTreeMap<BrokerId, u64>,
    isolation_expiry: Vec<(u64, BrokerId)>,
    expire_at: Vec<(u64, SessionId)>,
    heal_at: Option<u64>,
    checkers: BTreeMap<i32, Checker>,
    controllers_by_epoch: BTreeMap<i32, BrokerId>,
    client: Client,
    acked_in_calm: u64,
    reassign_pending: bool,
    /// The second topic and whether its deletion was asked for.
    churn: Option<(String, bool)>,
    last_status: Vec<(BrokerId, Option<i32>, Option<SessionId>, bool)>,
    faults: RealFaultCounts,
    trace: Option<Trace<String>>,
    digest: std::collections::hash_map::DefaultHasher,
}

impl std::fmt::Debug for RealCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealCluster")
            .field("seed", &self.seed)
            .field("now", &self.now)
            .field("brokers", &self.brokers)
            .finish()
    }
}

fn fail<T>(invariant: Invariant, detail: String) -> Result<T, Violation> {
    Err(Violation { invariant, detail })
}

/// Sends `msg`, noting it in the trace.
fn send(
    net: &mut Network<Msg>,
    rng: &mut StdRng,
    trace: &mut Option<Trace<String>>,
    now: u64,
    from: NodeId,
    to: NodeId,
    msg: Msg,
) {
    if let Some(t) = trace.as_mut() {
        t.push(now, format!("send {from} -> {to}: {}", summary(&msg)));
    }
    net.send(rng, now, from, to, msg);
}

fn summary(msg: &Msg) -> String {
    match msg {
        Msg::Control { id, body, .. } => format!("Control#{id} {:?}", body.api_key()),
        Msg::ControlResp { id, .. } => format!("ControlResp#{id}"),
        Msg::Fetch { id, request } => format!(
            "Fetch#{id} replica {} {:?}",
            request.replica_id,
            request
                .topics
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| (p.partition, p.fetch_offset)))
                .collect::<Vec<_>>()
        ),
        Msg::FetchResp { id, response } => format!(
            "FetchResp#{id} {:?}",
            response
                .responses
                .iter()
                .flat_map(|t| t.partitions.iter().map(|p| (
                    p.partition_index,
                    p.error_code,
                    p.high_watermark
                )))
                .collect::<Vec<_>>()
        ),
        Msg::EpochQuery { id, .. } => format!("EpochQuery#{id}"),
        Msg::EpochAnswer { id, .. } => format!("EpochAnswer#{id}"),
        Msg::Produce { id, .. } => format!("Produce#{id}"),
        Msg::ControlledShutdown { id, broker_epoch } => {
            format!("ControlledShutdown#{id} broker epoch {broker_epoch}")
        }
        Msg::ControlledShutdownResp { id, result } => {
            format!("ControlledShutdownResp#{id} {result:?}")
        }
        Msg::ProduceResp { id, response } => format!(
            "ProduceResp#{id} {:?}",
            response
                .responses
                .iter()
                .flat_map(|t| t.partition_responses.iter().map(|p| (
                    p.index,
                    p.error_code,
                    p.base_offset
                )))
                .collect::<Vec<_>>()
        ),
    }
}

impl RealCluster {
    /// A fresh cluster for `seed` (call inside a paused current-thread runtime).
    pub fn new(seed: u64, cfg: RealConfig, traced: bool) -> Self {
        let tree = MemoryTree::new();
        let observer = tree.connect();
        let (outbox_tx, outbox) = mpsc::unbounded_channel();
        let (replies_tx, replies) = mpsc::unbounded_channel();
        let audit = Arc::new(Mutex::new(Vec::new()));
        let writes = WriteLog::new(
            tree.connect(),
            (0..cfg.partitions)
                .map(|p| paths::partition_state(TOPIC, p))
                .collect(),
        );
        let mut c = RealCluster {
            cfg,
            seed,
            rng: StdRng::seed_from_u64(seed),
            now: 0,
            steps: 0,
            tree,
            observer,
            net: Network::new(cfg.net),
            brokers: BTreeMap::new(),
            outbox_tx,
            outbox,
            replies_tx,
            replies,
            pending_control: BTreeMap::new(),
            next_control: 0,
            audit,
            writes,
            restart_at: BTreeMap::new(),
            isolated: BTreeMap::new(),
            isolation_expiry: Vec::new(),
            expire_at: Vec::new(),
            heal_at: None,
            checkers: (0..cfg.partitions)
                .map(|p| (p, Checker::default()))
                .collect(),
            controllers_by_epoch: BTreeMap::new(),
            client: Client {
                leaders: BTreeMap::new(),
                last_metadata: 0,
                next_seq: 0,
                next_id: 0,
                last_produce: 0,
                outstanding: BTreeMap::new(),
                consumer_offset: (0..cfg.partitions).map(|p| (p, 0)).collect(),
                consumer_in_flight: BTreeMap::new(),
                last_consume: 0,
            },
            acked_in_calm: 0,
            reassign_pending: false,
            churn: None,
            last_status: Vec::new(),
            faults: RealFaultCounts::default(),
            trace: traced.then(|| Trace::new(cfg.trace_capacity)),
            digest: std::collections::hash_map::DefaultHasher::new(),
        };
        for id in 1..=cfg.brokers {
            let b = SimBroker::new(id, &cfg, &c.env());
            c.brokers.insert(id, b);
        }
        c
    }

    fn env(&self) -> Env<'_> {
        Env {
            tree: &self.tree,
            outbox: &self.outbox_tx,
            audit: &self.audit,
            writes: &self.writes,
            breakage: self.cfg.breakage,
            replies: &self.replies_tx,
            seed: self.seed,
        }
    }

    fn note(&mut self, event: impl FnOnce() -> String) {
        if let Some(t) = self.trace.as_mut() {
            t.push(self.now, event());
        }
    }

    /// The topic, created the way `kafka-topics.sh` does: the assignment znode, which the
    /// controller picks up (K2.2). Replicas are rotated so that leaderships spread.
    async fn create_topic(&self) {
        let zk = KafkaZkClient::new(Arc::new(self.observer.clone()));
        let _ = zk.create_persistent_paths().await;
        let n = self.cfg.brokers;
        let rf = self.cfg.replication_factor.clamp(1, n);
        let partitions = (0..self.cfg.partitions)
            .map(|p| (p, (0..rf).map(|i| (p + i) % n + 1).collect()))
            .collect();
        let assignment = TopicAssignment::new(partitions);
        if self.cfg.unclean_election {
            let mut config = BTreeMap::new();
            config.insert(
                "unclean.leader.election.enable".to_string(),
                "true".to_string(),
            );
            if let Ok(data) = TopicConfig::new(config).to_json() {
                let _ = self
                    .observer
                    .create(&paths::topic_config(TOPIC), &data, CreateMode::Persistent)
                    .await;
            }
        }
        if let Ok(data) = assignment.to_json() {
            let _ = self
                .observer
                .create(&paths::topic(TOPIC), &data, CreateMode::Persistent)
                .await;
        }
    }

    /// Runs to the end; the first violation.
    pub async fn run(&mut self) -> Result<(), Violation> {
        self.create_topic().await;
        let tick = Duration::from_millis(self.cfg.tick_ms);
        let calm_from = self.cfg.duration_ms.saturating_sub(self.cfg.calm_ms);
        while self.now < self.cfg.duration_ms {
            tokio::time::sleep(tick).await;
            self.now += self.cfg.tick_ms;
            self.steps += 1;
            self.drain_outbox();
            if self.trace.is_some() {
                let st: Vec<(BrokerId, Option<i32>, Option<SessionId>, bool)> = self
                    .brokers
                    .values()
                    .map(|b| {
                        (
                            b.id,
                            b.active_controller_epoch(),
                            b.session(),
                            b.is_paused(self.now),
                        )
                    })
                    .collect();
                if st != self.last_status {
                    self.note(|| format!("status {st:?}"));
                    self.last_status = st;
                }
            }
            self.check().await?;
            if self.now < calm_from {
                self.inject_faults();
                if self.rng.random_bool(self.cfg.faults.reassign) {
                    self.reassign().await;
                }
                if self.rng.random_bool(self.cfg.faults.topic_churn) {
                    self.churn_topic().await;
                }
            } else {
                self.calm();
            }
            self.timed_events();
            self.deliver_due().await?;
            let mut out = Vec::new();
            let ids: Vec<BrokerId> = self.brokers.keys().copied().collect();
            for id in ids {
                out.clear();
                if let Some(b) = self.brokers.get_mut(&id) {
                    b.step(self.now, &self.cfg, &mut out);
                }
                for (to, msg) in out.drain(..) {
                    send(
                        &mut self.net,
                        &mut self.rng,
                        &mut self.trace,
                        self.now,
                        id,
                        to,
                        msg,
                    );
                }
                self.check().await?;
            }
            self.clients();
        }
        self.drain_outbox();
        self.check().await?;
        if let Some(b) = self
            .brokers
            .values()
            .find(|b| b.stopping_since().is_some_and(|t| t < calm_from))
        {
            return fail(
                Invariant::Liveness,
                format!(
                    "broker {}'s controlled shutdown, begun at {} ms, did not finish in the last {} \
                     ms without faults",
                    b.id,
                    b.stopping_since().unwrap_or_default(),
                    self.cfg.calm_ms
                ),
            );
        }
        if self.reassign_pending {
            return fail(
                Invariant::Liveness,
                format!(
                    "a reassignment did not complete in the last {} ms without faults",
                    self.cfg.calm_ms
                ),
            );
        }
        if let Some((topic, true)) = &self.churn {
            return fail(
                Invariant::Liveness,
                format!(
                    "the deletion of topic {topic} did not complete in the last {} ms without \
                     faults",
                    self.cfg.calm_ms
                ),
            );
        }
        if self.acked_in_calm == 0 {
            return fail(
                Invariant::Liveness,
                format!(
                    "no record was acknowledged in the last {} ms without faults",
                    self.cfg.calm_ms
                ),
            );
        }
        Ok(())
    }

    fn drain_outbox(&mut self) {
        while let Ok(o) = self.outbox.try_recv() {
            self.next_control += 1;
            let id = self.next_control;
            self.pending_control.insert(id, o.reply);
            send(
                &mut self.net,
                &mut self.rng,
                &mut self.trace,
                self.now,
                o.from,
                o.to,
                Msg::Control {
                    id,
                    version: o.version,
                    body: o.body,
                },
            );
        }
        self.pending_control.retain(|_, r| !r.is_closed());
        while let Ok((from, to, msg)) = self.replies.try_recv() {
            send(
                &mut self.net,
                &mut self.rng,
                &mut self.trace,
                self.now,
                from,
                to,
                msg,
            );
        }
    }

    fn up_brokers(&self) -> Vec<BrokerId> {
        self.brokers
            .values()
            .filter(|b| b.is_up() && !b.is_paused(self.now))
            .map(|b| b.id)
            .collect()
    }

    fn active_controller(&self) -> Option<BrokerId> {
        self.brokers
            .values()
            .filter(|b| !b.is_paused(self.now))
            .filter_map(|b| b.active_controller_epoch().map(|e| (e, b.id)))
            .max()
            .map(|(_, id)| id)
    }

    /// A fault's target: half the time the active controller (a running one always is up and
    /// not paused), else a random running broker.
    fn pick_target(&mut self) -> Option<BrokerId> {
        let up = self.up_brokers();
        match self.active_controller() {
            Some(c) if self.rng.random_bool(0.5) => Some(c),
            _ if !up.is_empty() => Some(up[self.rng.random_range(0..up.len())]),
            _ => None,
        }
    }

    fn inject_faults(&mut self) {
        let f = self.cfg.faults;
        let now = self.now;
        let timeout = self.cfg.session_timeout_ms;
        if self.rng.random_bool(f.crash) {
            let up = self.up_brokers();
            if up.len() > 1 {
                let id = up[self.rng.random_range(0..up.len())];
                if let Some(session) = self.brokers.get_mut(&id).and_then(SimBroker::crash) {
                    self.expire_at.push((now + timeout, session));
                }
                let back = now + self.rng.random_range(100..800);
                self.restart_at.insert(id, back);
                self.faults.crash += 1;
                self.note(|| format!("FAULT crash broker {id}, back at {back}"));
            }
        }
        if self.rng.random_bool(f.pause) {
            let controller = self.active_controller();
            if let Some(id) = self.pick_target() {
                // Longer than the session, unless the calm begins first.
                let calm_from = self.cfg.duration_ms.saturating_sub(self.cfg.calm_ms);
                let until = (now + timeout + self.rng.random_range(50..500)).min(calm_from);
                if let Some(b) = self.brokers.get_mut(&id) {
                    if let Some(session) = b.session().filter(|_| until > now + timeout) {
                        self.expire_at.push((now + timeout, session));
                    }
                    b.pause(until);
                }
                self.faults.pause += 1;
                if controller == Some(id) {
                    self.faults.controller_pause += 1;
                }
                self.note(|| format!("FAULT pause broker {id} until {until}"));
            }
        }
        if self.heal_at.is_none() && self.rng.random_bool(f.partition) {
            let mut nodes: Vec<NodeId> = self.brokers.keys().copied().collect();
            nodes.extend([PRODUCER, CONSUMER]);
            let (a, b): (Vec<NodeId>, Vec<NodeId>) =
                nodes.iter().partition(|_| self.rng.random_bool(0.5));
            if !a.is_empty() && !b.is_empty() {
                self.net.split(&a, &b);
                let until = now + self.rng.random_range(100..800);
                self.heal_at = Some(until);
                self.faults.partition += 1;
                self.note(|| format!("FAULT partition {a:?} | {b:?} until {until}"));
            }
        }
        if self.heal_at.is_none() && self.rng.random_bool(f.one_way) {
            let ids: Vec<NodeId> = self.brokers.keys().copied().collect();
            let from = ids[self.rng.random_range(0..ids.len())];
            let to = ids[self.rng.random_range(0..ids.len())];
            if from != to {
                self.net.block(from, to);
                let until = now + self.rng.random_range(100..800);
                self.heal_at = Some(until);
                self.faults.one_way += 1;
                self.note(|| format!("FAULT one-way {from} -> {to} until {until}"));
            }
        }
        if self.rng.random_bool(f.store_isolation) {
            let pick = self.pick_target();
            let until = now + self.rng.random_range(100..800);
            if let Some(id) = pick.filter(|id| self.isolate(*id, until)) {
                self.faults.store_isolation += 1;
                self.note(|| format!("FAULT broker {id} cut from the store until {until}"));
            }
        }
        if self.rng.random_bool(f.controlled_shutdown) {
            let up = self.up_brokers();
            if up.len() > 1 {
                let id = up[self.rng.random_range(0..up.len())];
                if self
                    .brokers
                    .get_mut(&id)
                    .is_some_and(|b| b.begin_controlled_shutdown(now))
                {
                    self.faults.controlled_shutdown += 1;
                    self.note(|| format!("FAULT controlled shutdown of broker {id}"));
                }
            }
        }
        if self.rng.random_bool(f.session_expiry) {
            let pick = self.pick_target();
            if let Some(session) = pick.and_then(|id| self.brokers.get(&id)?.session()) {
                self.tree.expire(session);
                self.faults.session_expiry += 1;
                self.note(|| format!("FAULT session of broker {pick:?} expired"));
            }
        }
    }

    /// Cuts broker `id` (up, not yet cut) from the coordination store until `until`.
    fn isolate(&mut self, id: BrokerId, until: u64) -> bool {
        if self.isolated.contains_key(&id) {
            return false;
        }
        let Some(session) = self.brokers.get(&id).and_then(SimBroker::session) else {
            return false;
        };
        if !self.tree.suspend(session) {
            return false;
        }
        self.isolated.insert(id, until);
        if until > self.now + self.cfg.session_timeout_ms {
            self.isolation_expiry
                .push((self.now + self.cfg.session_timeout_ms, id));
        }
        true
    }

    /// Ends the store cut of `id`.
    fn reconnect(&mut self, id: BrokerId) {
        self.isolated.remove(&id);
        if let Some(session) = self.brokers.get(&id).and_then(SimBroker::session) {
            self.tree.resume(session);
        }
        self.note(|| format!("broker {id} reaches the store again"));
    }

    /// K7: an administrator asks to move a partition onto a random set of brokers (when none
    /// is in progress), the way `kafka-reassign-partitions.sh` does.
    async fn reassign(&mut self) {
        let (n, rf) = (self.cfg.brokers, self.cfg.replication_factor);
        if n <= rf {
            return;
        }
        if let Ok(Some(_)) = self
            .observer
            .exists(paths::REASSIGN_PARTITIONS, false)
            .await
        {
            return;
        }
        let p = self.rng.random_range(0..self.cfg.partitions);
        let mut ids: Vec<BrokerId> = (1..=n).collect();
        ids.shuffle(&mut self.rng);
        ids.truncate(usize::try_from(rf).unwrap_or(1));
        let request = ReassignPartitions {
            version: 1,
            partitions: vec![ReassignmentEntry {
                topic: TOPIC.into(),
                partition: p,
                replicas: ids.clone(),
                extra: Default::default(),
            }],
            extra: Default::default(),
        };
        if let Ok(data) = request.to_json() {
            if self
                .observer
                .create(paths::REASSIGN_PARTITIONS, &data, CreateMode::Persistent)
                .await
                .is_ok()
            {
                self.faults.reassign += 1;
                self.reassign_pending = true;
                self.note(|| format!("REASSIGN partition {p} to {ids:?}"));
            }
        }
    }

    /// K2.2 / K2.1: creates the second topic (one partition on random brokers) when there is
    /// none, else asks for its deletion, as `kafka-topics.sh` does.
    async fn churn_topic(&mut self) {
        match self.churn.clone() {
            None => {
                let topic = format!("churn-{}", self.faults.topic_create);
                let n = self.cfg.brokers;
                let mut ids: Vec<BrokerId> = (1..=n).collect();
                ids.shuffle(&mut self.rng);
                ids.truncate(usize::try_from(self.cfg.replication_factor.clamp(1, n)).unwrap_or(1));
                let assignment = TopicAssignment::new(std::iter::once((0, ids.clone())).collect());
                if let Ok(data) = assignment.to_json() {
                    if self
                        .observer
                        .create(&paths::topic(&topic), &data, CreateMode::Persistent)
                        .await
                        .is_ok()
                    {
                        self.faults.topic_create += 1;
                        self.note(|| format!("CREATE topic {topic} on {ids:?}"));
                        self.churn = Some((topic, false));
                    }
                }
            }
            Some((topic, false)) => {
                if self
                    .observer
                    .create(&paths::delete_topic(&topic), b"", CreateMode::Persistent)
                    .await
                    .is_ok()
                {
                    self.faults.topic_delete += 1;
                    self.note(|| format!("DELETE topic {topic}"));
                    self.churn = Some((topic, true));
                }
            }
            Some((_, true)) => {}
        }
    }

    /// The fault-free end: the network heals and stops losing messages, and every broker
    /// comes back (pauses end by then: none is drawn past the start of the calm).
    fn calm(&mut self) {
        if self.heal_at.take().is_some() {
            self.net.heal();
            self.note(|| "heal (calm)".into());
        }
        // The network stops losing, duplicating and holding back messages too (it still
        // reorders them): the cluster must recover by itself, not merely get lucky.
        self.net.set_config(NetConfig {
            loss: 0.0,
            duplicate: 0.0,
            long_delay: 0.0,
            ..self.cfg.net
        });
        for t in self.restart_at.values_mut() {
            *t = (*t).min(self.now);
        }
        for t in self.isolated.values_mut() {
            *t = (*t).min(self.now);
        }
    }

    fn timed_events(&mut self) {
        let now = self.now;
        if self.heal_at.is_some_and(|t| t <= now) {
            self.heal_at = None;
            self.net.heal();
            self.note(|| "heal".into());
        }
        let due: Vec<SessionId> = self
            .expire_at
            .iter()
            .filter(|(t, _)| *t <= now)
            .map(|(_, s)| *s)
            .collect();
        self.expire_at.retain(|(t, _)| *t > now);
        for s in due {
            let ok = self.tree.expire(s);
            self.note(|| format!("expire session {s}: {ok}"));
        }
        // A cut longer than the session: the store expires it; the broker, still cut, learns
        // of it only when it reconnects (its new session stays disconnected until then).
        let due: Vec<BrokerId> = self
            .isolation_expiry
            .iter()
            .filter(|(t, _)| *t <= now)
            .map(|(_, id)| *id)
            .collect();
        self.isolation_expiry.retain(|(t, _)| *t > now);
        for id in due {
            if !self.isolated.contains_key(&id) {
                continue;
            }
            if let Some(session) = self.brokers.get(&id).and_then(SimBroker::session) {
                let expired = self.tree.expire(session);
                if let Some(new) = self.brokers.get(&id).and_then(SimBroker::session) {
                    self.tree.suspend(new);
                }
                self.note(|| format!("expire session {session} of cut broker {id}: {expired}"));
            }
        }
        let healed: Vec<BrokerId> = self
            .isolated
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in healed {
            self.reconnect(id);
        }
        // Brokers through their ControlledShutdown stop and close their session.
        let stopping: Vec<BrokerId> = self
            .brokers
            .values()
            .filter(|b| b.ready_to_stop())
            .map(|b| b.id)
            .collect();
        for id in stopping {
            if let Some(session) = self.brokers.get_mut(&id).and_then(SimBroker::crash) {
                self.tree.expire(session);
            }
            let back = now + self.rng.random_range(100..800);
            self.restart_at.insert(id, back);
            self.faults.controlled_shutdown_stopped += 1;
            self.note(|| format!("broker {id} stopped cleanly, back at {back}"));
        }
        let restart: Vec<BrokerId> = self
            .restart_at
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in restart {
            self.restart_at.remove(&id);
            let cfg = self.cfg;
            let tree = self.tree.clone();
            let env = Env {
                tree: &tree,
                outbox: &self.outbox_tx,
                audit: &self.audit,
                writes: &self.writes,
                breakage: cfg.breakage,
                replies: &self.replies_tx,
                seed: self.seed,
            };
            if let Some(b) = self.brokers.get_mut(&id) {
                b.restart(&cfg, &env);
            }
            self.note(|| format!("restart broker {id}"));
        }
    }

    /// Delivers the messages due, checking every invariant after each one.
    async fn deliver_due(&mut self) -> Result<(), Violation> {
        let now = self.now;
        let mut out = Vec::new();
        while let Some((from, to, msg)) = self.net.pop_due(now) {
            if let Some(t) = self.trace.as_mut() {
                t.push(now, format!("{from} -> {to}: {}", summary(&msg)));
            }
            match to {
                PRODUCER | CONSUMER => {
                    self.client_receive(to, msg);
                    self.check().await?;
                }
                _ => {
                    if let Msg::ControlResp { id, body } = msg {
                        // Only wakes the controller's task: nothing changes until it runs.
                        if let Some(reply) = self.pending_control.remove(&id) {
                            let _ = reply.send(body);
                        }
                        continue;
                    }
                    let Some(b) = self.brokers.get_mut(&to) else {
                        continue;
                    };
                    if let Some(until) = b.paused_until(now) {
                        self.net.defer(until, from, to, msg);
                        continue;
                    }
                    out.clear();
                    if let Some(b) = self.brokers.get_mut(&to) {
                        b.handle(now, from, msg, &self.cfg, &mut out);
                    }
                    for (dest, m) in out.drain(..) {
                        send(
                            &mut self.net,
                            &mut self.rng,
                            &mut self.trace,
                            now,
                            to,
                            dest,
                            m,
                        );
                    }
                    self.check().await?;
                }
            }
        }
        Ok(())
    }

    fn clients(&mut self) {
        let now = self.now;
        let tp = |p: i32| TopicPartition::new(TOPIC, p);
        if now >= self.client.last_metadata + METADATA_REFRESH_MS {
            self.client.last_metadata = now;
            let up = self.up_brokers();
            if !up.is_empty() {
                let id = up[self.rng.random_range(0..up.len())];
                if let Some(rm) = self.brokers.get(&id).and_then(SimBroker::rm) {
                    for p in 0..self.cfg.partitions {
                        if let Some(l) = rm.metadata().leader(&tp(p)) {
                            self.client.leaders.insert(p, l);
                        }
                    }
                }
            }
        }
        self.client
            .outstanding
            .retain(|_, (_, _, sent)| now < *sent + CLIENT_TIMEOUT_MS);
        if now >= self.client.last_produce + self.cfg.produce_interval_ms
            && self.client.outstanding.len() < MAX_OUTSTANDING
        {
            self.client.last_produce = now;
            let seq = self.client.next_seq;
            let p = (seq % i64::from(self.cfg.partitions)) as i32;
            if let (Some(leader), Ok(records)) =
                (self.client.leaders.get(&p).copied(), produce_batch(seq))
            {
                self.client.next_seq += 1;
                self.client.next_id += 1;
                let id = self.client.next_id;
                let request = ProduceRequest {
                    acks: -1,
                    timeout_ms: 1_000,
                    topic_data: vec![TopicProduceData {
                        name: TOPIC.into(),
                        partition_data: vec![PartitionProduceData {
                            index: p,
                            records: Some(records),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }],
                    ..Default::default()
                };
                self.client.outstanding.insert(id, (seq, p, now));
                send(
                    &mut self.net,
                    &mut self.rng,
                    &mut self.trace,
                    now,
                    PRODUCER,
                    leader,
                    Msg::Produce { id, request },
                );
            }
        }
        if now >= self.client.last_consume + CONSUME_INTERVAL_MS {
            self.client.last_consume = now;
            for p in 0..self.cfg.partitions {
                if self
                    .client
                    .consumer_in_flight
                    .get(&p)
                    .is_some_and(|(_, sent)| now < sent + 300)
                {
                    continue;
                }
                let Some(leader) = self.client.leaders.get(&p).copied() else {
                    continue;
                };
                self.client.next_id += 1;
                let id = self.client.next_id;
                let offset = self.client.consumer_offset.get(&p).copied().unwrap_or(0);
                let request = FetchRequest {
                    replica_id: -1,
                    max_wait_ms: 0,
                    min_bytes: 1,
                    max_bytes: 1 << 20,
                    topics: vec![FetchTopic {
                        topic: TOPIC.into(),
                        partitions: vec![FetchPartition {
                            partition: p,
                            current_leader_epoch: -1,
                            fetch_offset: offset,
                            last_fetched_epoch: -1,
                            log_start_offset: -1,
                            partition_max_bytes: 1 << 16,
                            ..Default::default()
                        }],
                        ..Default::default()
                    }],
                    ..Default::default()
                };
                self.client.consumer_in_flight.insert(p, (id, now));
                send(
                    &mut self.net,
                    &mut self.rng,
                    &mut self.trace,
                    now,
                    CONSUMER,
                    leader,
                    Msg::Fetch { id, request },
                );
            }
        }
    }

    fn client_receive(&mut self, to: NodeId, msg: Msg) {
        let calm = self.now >= self.cfg.duration_ms.saturating_sub(self.cfg.calm_ms);
        match (to, msg) {
            (PRODUCER, Msg::ProduceResp { id, response }) => {
                let Some((seq, p, _)) = self.client.outstanding.remove(&id) else {
                    return;
                };
                for r in response
                    .responses
                    .iter()
                    .flat_map(|t| t.partition_responses.iter())
                {
                    if r.index == p && r.error_code == 0 {
                        if let Some(c) = self.checkers.get_mut(&p) {
                            c.acked(r.base_offset, seq);
                        }
                        if calm {
                            self.acked_in_calm += 1;
                        }
                    }
                }
            }
            (CONSUMER, Msg::FetchResp { id, response }) => {
                let Some(p) = self
                    .client
                    .consumer_in_flight
                    .iter()
                    .find(|(_, (i, _))| *i == id)
                    .map(|(p, _)| *p)
                else {
                    return;
                };
                self.client.consumer_in_flight.remove(&p);
                for d in response.responses.iter().flat_map(|t| t.partitions.iter()) {
                    if d.partition_index != p || d.error_code != 0 {
                        continue;
                    }
                    let Some(records) = d.records.clone() else {
                        continue;
                    };
                    // Whole batches, up to anything malformed.
                    for b in RecordBatches::new(records).map_while(Result::ok) {
                        let offset = self.client.consumer_offset.get(&p).copied().unwrap_or(0);
                        if b.base_offset() == offset {
                            if let Some(c) = self.checkers.get_mut(&p) {
                                c.consumed(b.base_offset(), b.base_timestamp());
                            }
                            self.client.consumer_offset.insert(p, b.next_offset());
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// The partition states of a snapshot of the store.
    fn parse_snapshot(snapshot: StoreSnapshot) -> Vec<Option<LeaderAndIsr>> {
        snapshot
            .into_iter()
            .map(|r| {
                let (data, version) = r?;
                let z = PartitionStateZNode::from_json(&data).ok()?;
                Some(LeaderAndIsr {
                    leader: z.leader,
                    leader_epoch: z.leader_epoch,
                    isr: z.isr,
                    partition_epoch: version,
                })
            })
            .collect()
    }

    /// The partition states in the store now.
    async fn store_states(&self) -> Vec<Option<LeaderAndIsr>> {
        let paths: Vec<String> = (0..self.cfg.partitions)
            .map(|p| paths::partition_state(TOPIC, p))
            .collect();
        let snapshot = self
            .observer
            .get_data_many(&paths)
            .await
            .into_iter()
            .map(|r| r.ok().map(|(data, stat)| (data, stat.version)))
            .collect();
        Self::parse_snapshot(snapshot)
    }

    /// The checks after a step, a delivered message or a store write.
    async fn check(&mut self) -> Result<(), Violation> {
        // K6: one active controller per controller epoch (a paused zombie included).
        for b in self.brokers.values() {
            if let Some(e) = b.active_controller_epoch() {
                let first = *self.controllers_by_epoch.entry(e).or_insert(b.id);
                if first != b.id {
                    return fail(
                        Invariant::OneControllerPerEpoch,
                        format!("brokers {first} and {} both control epoch {e}", b.id),
                    );
                }
            }
        }
        // K6 fencing: no controller write lands unless its epoch is the current one.
        if let Some(w) = self
            .audit
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .first()
        {
            return fail(
                Invariant::StaleControllerWrite,
                format!(
                    "broker {}'s controller wrote {:?} checking /controller_epoch version {:?} \
                     while it was {}",
                    w.broker, w.paths, w.checked_version, w.current_version
                ),
            );
        }
        if self.reassign_pending
            && matches!(
                self.observer
                    .exists(paths::REASSIGN_PARTITIONS, false)
                    .await,
                Ok(None)
            )
        {
            self.reassign_pending = false;
            self.faults.reassign_completed += 1;
            self.note(|| "reassignment complete".into());
        }
        if let Some((topic, true)) = &self.churn {
            let gone = matches!(
                self.observer.exists(&paths::topic(topic), false).await,
                Ok(None)
            ) && matches!(
                self.observer
                    .exists(&paths::delete_topic(topic), false)
                    .await,
                Ok(None)
            );
            if gone {
                let topic = topic.clone();
                self.churn = None;
                self.faults.topic_delete_completed += 1;
                self.note(|| format!("topic {topic} deleted"));
            }
        }
        // Every store write since the last check, in order, with the state it left (the
        // brokers did not change meanwhile: only their tasks ran, and those only write to the
        // store); then the store as it is now.
        for snapshot in self.writes.take() {
            let states = Self::parse_snapshot(snapshot);
            self.check_partitions(&states)?;
        }
        let states = self.store_states().await;
        self.check_partitions(&states)
    }

    /// The replication invariants of every partition against `states` (the store's).
    fn check_partitions(&mut self, states: &[Option<LeaderAndIsr>]) -> Result<(), Violation> {
        for (p, store) in (0..self.cfg.partitions).zip(states) {
            let Some(store) = store else {
                continue;
            };
            let tp = TopicPartition::new(TOPIC, p);
            let disks: Vec<(BrokerId, u64, std::sync::MutexGuard<'_, _>)> = self
                .brokers
                .values()
                .filter(|b| !b.is_up())
                .map(|b| (b.id, b.incarnation, lock(&b.disk)))
                .collect();
            let mut views: Vec<BrokerView<'_>> = Vec::new();
            for b in self.brokers.values() {
                if let Some(rm) = b.rm() {
                    let part = rm.partition(&tp);
                    views.push(BrokerView {
                        id: b.id,
                        incarnation: b.incarnation,
                        partition: part,
                        log: part.map(|x| x.log()),
                    });
                }
            }
            for (id, incarnation, disk) in &disks {
                views.push(BrokerView {
                    id: *id,
                    incarnation: *incarnation,
                    partition: None,
                    log: disk.get(&tp),
                });
            }
            views.sort_by_key(|v| v.id);
            let Some(checker) = self.checkers.get_mut(&p) else {
                continue;
            };
            checker.check(&views, store, &[]).map_err(|mut v| {
                v.detail = format!("partition {p}: {}", v.detail);
                v
            })?;
            drop(views);
            drop(disks);
        }
        Ok(())
    }

    /// What the run did so far.
    pub fn stats(&self) -> RealStats {
        let mut digest = self.digest.clone();
        self.steps.hash(&mut digest);
        self.faults.hash(&mut digest);
        let acked: u64 = self.checkers.values().map(|c| c.acked_count() as u64).sum();
        let consumed: u64 = self
            .checkers
            .values()
            .map(|c| c.consumed_count() as u64)
            .sum();
        (acked, consumed).hash(&mut digest);
        self.controllers_by_epoch.hash(&mut digest);
        self.tree.last_zxid().hash(&mut digest);
        let net = self.net.stats();
        (net.sent, net.delivered, net.lost, net.cut).hash(&mut digest);
        for b in self.brokers.values() {
            if let Some(rm) = b.rm() {
                // KIP-516: the id the controller gave the topic, as this broker knows it.
                rm.metadata()
                    .topic_id(TOPIC)
                    .map(|id| id.as_u128())
                    .hash(&mut digest);
                for p in 0..self.cfg.partitions {
                    if let Some(part) = rm.partition(&TopicPartition::new(TOPIC, p)) {
                        (
                            b.id,
                            part.leader_epoch(),
                            part.high_watermark(),
                            part.log_end_offset(),
                        )
                            .hash(&mut digest);
                    }
                }
            }
        }
        RealStats {
            steps: self.steps,
            faults: self.faults,
            net,
            acked,
            consumed,
            controller_epochs: self.controllers_by_epoch.len() as u64,
            refused_stale: self.brokers.values().map(|b| b.refused_stale).sum(),
            fingerprint: digest.finish(),
        }
    }

    /// The trace so far (empty unless traced).
    pub fn trace_text(&self) -> String {
        self.trace()
    }

    fn trace(&self) -> String {
        self.trace.as_ref().map(Trace::render).unwrap_or_default()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap_or_else(|e| panic!("a current-thread runtime: {e}"))
}

fn run_once(
    seed: u64,
    cfg: RealConfig,
    traced: bool,
) -> (RealStats, Result<(), Violation>, u64, u64, String) {
    runtime().block_on(async move {
        let mut c = RealCluster::new(seed, cfg, traced);
        let r = c.run().await;
        (c.stats(), r, c.steps, c.now, c.trace())
    })
}

/// Runs one seed; a failure is replayed with the trace on (`SIM_TRACE=N`: its last N events).
pub fn run_seed(seed: u64, cfg: RealConfig) -> (RealStats, Option<Failure>) {
    let (stats, result, _, _, _) = run_once(seed, cfg, false);
    if result.is_ok() {
        return (stats, None);
    }
    // `SIM_TRACE=N` keeps the last N events of the replay instead of `cfg.trace_capacity`.
    let traced = RealConfig {
        trace_capacity: std::env::var("SIM_TRACE")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(cfg.trace_capacity),
        ..cfg
    };
    let (_, replay, step, now, trace) = run_once(seed, traced, true);
    let violation = match replay {
        Err(v) => v,
        Ok(()) => Violation {
            invariant: Invariant::ReplayDiverged,
            detail: "the replay did not fail: the run is not deterministic".into(),
        },
    };
    (
        stats,
        Some(Failure {
            seed,
            step,
            now,
            violation,
            trace,
        }),
    )
}

/// The sum over a range of seeds.
#[derive(Debug, Clone, Default)]
pub struct RealSummary {
    /// The scenario.
    pub name: String,
    /// Seeds run.
    pub seeds: u64,
    /// Steps simulated.
    pub steps: u64,
    /// Faults injected.
    pub faults: RealFaultCounts,
    /// The network's doings.
    pub net: NetStats,
    /// Records acknowledged with acks=all.
    pub acked: u64,
    /// Records consumed.
    pub consumed: u64,
    /// Controller epochs elected.
    pub controller_epochs: u64,
    /// Stale control requests refused.
    pub refused_stale: u64,
    /// Seeds that violated an invariant.
    pub violations: u64,
    /// The first failure.
    pub first_failure: Option<Failure>,
}

impl std::fmt::Display for RealSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let fl = &self.faults;
        let n = &self.net;
        write!(
            f,
            "[{}] seeds {} steps {} | faults: crash {} pause {} (controller {}) partition {} \
             one-way {} session-expiry {} store-cut {} reassign {} (completed {}) topics created {} deleted {} \
             (completed {}) clean stops {} (stopped {}) | network: lost {} duplicated {} long-delayed {} cut {} \
             | acked {} consumed {} controller epochs {} stale requests refused {} | violations {}",
            self.name,
            self.seeds,
            self.steps,
            fl.crash,
            fl.pause,
            fl.controller_pause,
            fl.partition,
            fl.one_way,
            fl.session_expiry,
            fl.store_isolation,
            fl.reassign,
            fl.reassign_completed,
            fl.topic_create,
            fl.topic_delete,
            fl.topic_delete_completed,
            fl.controlled_shutdown,
            fl.controlled_shutdown_stopped,
            n.lost,
            n.duplicated,
            n.long_delayed,
            n.cut,
            self.acked,
            self.consumed,
            self.controller_epochs,
            self.refused_stale,
            self.violations
        )
    }
}

/// Runs `seeds` of `cfg`; with `stop_at_first` it stops at the first violation.
pub fn run_seeds(
    name: &str,
    cfg: RealConfig,
    seeds: std::ops::Range<u64>,
    stop_at_first: bool,
) -> RealSummary {
    let mut s = RealSummary {
        name: name.to_string(),
        ..RealSummary::default()
    };
    for seed in seeds {
        let (stats, failure) = run_seed(seed, cfg);
        s.seeds += 1;
        s.steps += stats.steps;
        s.faults.add(&stats.faults);
        s.net.lost += stats.net.lost;
        s.net.duplicated += stats.net.duplicated;
        s.net.long_delayed += stats.net.long_delayed;
        s.net.cut += stats.net.cut;
        s.acked += stats.acked;
        s.consumed += stats.consumed;
        s.controller_epochs += stats.controller_epochs;
        s.refused_stale += stats.refused_stale;
        if let Some(f) = failure {
            s.violations += 1;
            if s.first_failure.is_none() {
                s.first_failure = Some(f);
            }
            if stop_at_first {
                break;
            }
        }
    }
    s
}
