//! A cluster of controllers on one in-memory coordination tree and one in-memory broker
//! channel, with brokers registered the way Kafka brokers register, and a crash-injecting
//! coordination client (a controller "dies" after a given number of store writes).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ha_coordination::{
    Coordination, CoordinationError, CreateMode, EventStream, MemoryCoordination, MemoryTree, Op,
    OpResult, SessionId, SessionState, Stat,
};
use kafka_controller::broker_channel::MemoryBrokerChannel;
use kafka_controller::context::{BrokerId, PartitionLeadership, TopicPartition};
use kafka_controller::controller::store::leadership_from_znode;
use kafka_controller::controller::{Controller, ControllerConfig, ControllerHandle};
use kafka_controller::zk_data::{
    paths, BrokerRegistration, KafkaZkClient, PartitionStateZNode, TopicAssignment,
};

/// A coordination client that fails every operation with `ConnectionLoss` once it has
/// performed `writes_left` multis (a controller process dying mid-flow).
pub struct Crashing {
    pub inner: MemoryCoordination,
    pub writes_left: AtomicUsize,
    pub crashed: AtomicBool,
}

impl Crashing {
    pub fn new(inner: MemoryCoordination, writes: usize) -> Self {
        Self {
            inner,
            writes_left: AtomicUsize::new(writes),
            crashed: AtomicBool::new(false),
        }
    }

    fn check(&self) -> Result<(), CoordinationError> {
        if self.crashed.load(Ordering::SeqCst) {
            Err(CoordinationError::ConnectionLoss)
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl Coordination for Crashing {
    fn session_id(&self) -> SessionId {
        self.inner.session_id()
    }
    fn session_state(&self) -> SessionState {
        self.inner.session_state()
    }
    fn events(&self) -> EventStream {
        self.inner.events()
    }
    async fn create(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> Result<(String, Stat), CoordinationError> {
        self.check()?;
        self.inner.create(path, data, mode).await
    }
    async fn get_data(
        &self,
        path: &str,
        watch: bool,
    ) -> Result<(Vec<u8>, Stat), CoordinationError> {
        self.check()?;
        self.inner.get_data(path, watch).await
    }
    async fn exists(&self, path: &str, watch: bool) -> Result<Option<Stat>, CoordinationError> {
        self.check()?;
        self.inner.exists(path, watch).await
    }
    async fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: i32,
    ) -> Result<Stat, CoordinationError> {
        self.check()?;
        self.inner.set_data(path, data, version).await
    }
    async fn delete(&self, path: &str, version: i32) -> Result<(), CoordinationError> {
        self.check()?;
        self.inner.delete(path, version).await
    }
    async fn children(&self, path: &str, watch: bool) -> Result<Vec<String>, CoordinationError> {
        self.check()?;
        self.inner.children(path, watch).await
    }
    async fn multi(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, CoordinationError> {
        self.check()?;
        let left = self.writes_left.load(Ordering::SeqCst);
        if left == 0 {
            self.crashed.store(true, Ordering::SeqCst);
            return Err(CoordinationError::ConnectionLoss);
        }
        self.writes_left.store(left - 1, Ordering::SeqCst);
        self.inner.multi(ops).await
    }
}

/// One broker: its session (shared by its registration and its controller) and controller.
pub struct Broker {
    pub session: MemoryCoordination,
    pub handle: ControllerHandle,
    pub crashing: Option<Arc<Crashing>>,
}

/// Brokers, their controllers, the channel and an admin client on one tree.
pub struct Cluster {
    pub tree: MemoryTree,
    pub admin: MemoryCoordination,
    pub channel: MemoryBrokerChannel,
    pub brokers: BTreeMap<BrokerId, Broker>,
    pub config: fn(BrokerId) -> ControllerConfig,
}

pub fn test_config(id: BrokerId) -> ControllerConfig {
    let mut c = ControllerConfig::new(id);
    c.auto_leader_rebalance_enable = false;
    c.channel.retry_backoff = Duration::from_millis(5);
    c
}

pub const WAIT: Duration = Duration::from_secs(10);

/// Polls `f` until it is true (panics after [`WAIT`]).
pub async fn wait_for<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if f().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

impl Cluster {
    /// An empty cluster with Kafka's persistent paths.
    pub async fn empty(config: fn(BrokerId) -> ControllerConfig) -> Cluster {
        let tree = MemoryTree::new();
        let admin = tree.connect();
        KafkaZkClient::new(Arc::new(admin.clone()))
            .create_persistent_paths()
            .await
            .unwrap();
        Cluster {
            tree,
            admin,
            channel: MemoryBrokerChannel::new(),
            brokers: BTreeMap::new(),
            config,
        }
    }

    /// A cluster of `ids`, the first one started first (it becomes controller).
    pub async fn start(ids: &[BrokerId]) -> Cluster {
        let mut c = Cluster::empty(test_config).await;
        for &id in ids {
            c.add_broker(id, None).await;
            if c.brokers.len() == 1 {
                c.wait_controller().await;
            }
        }
        c
    }

    /// Registers broker `id` and starts its controller; with `crash_after`, the controller's
    /// client dies after that many store writes.
    pub async fn add_broker(&mut self, id: BrokerId, crash_after: Option<usize>) {
        let session = self.tree.connect();
        KafkaZkClient::new(Arc::new(session.clone()))
            .register_broker(
                id,
                &BrokerRegistration::plaintext("localhost", 9000 + id as u16, None, 0),
            )
            .await
            .unwrap();
        let (coord, crashing): (Arc<dyn Coordination>, _) = match crash_after {
            Some(n) => {
                let c = Arc::new(Crashing::new(session.clone(), n));
                (c.clone(), Some(c))
            }
            None => (Arc::new(session.clone()), None),
        };
        let handle = Controller::start((self.config)(id), coord, Arc::new(self.channel.clone()));
        self.brokers.insert(
            id,
            Broker {
                session,
                handle,
                crashing,
            },
        );
    }

    /// The active controller's id, waiting for one.
    pub async fn wait_controller(&self) -> BrokerId {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            for (id, b) in &self.brokers {
                if b.handle.status().active_epoch.is_some() {
                    return *id;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no controller elected"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The broker whose controller is active, waiting for it to be `other than` one.
    pub async fn wait_controller_other_than(&self, old: BrokerId) -> BrokerId {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            for (id, b) in &self.brokers {
                if *id != old && b.handle.status().active_epoch.is_some() {
                    return *id;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no new controller elected"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Kills broker `id` as a crash would: its process stops, then its session expires
    /// (ephemerals vanish).
    pub async fn kill(&mut self, id: BrokerId) {
        let Some(b) = self.brokers.remove(&id) else {
            return;
        };
        let session = b.session.session_id();
        self.tree.suspend(session);
        b.handle.shutdown();
        // The scenario's crash-to-expiry delay, not a wait for a condition: the loop may be
        // blocked in a store call of the cut-off session (those wait for the connection), so
        // there is nothing to wait on; the Shutdown queued before the expiry's events ends it.
        tokio::time::sleep(Duration::from_millis(20)).await;
        self.tree.expire(session);
    }

    /// The partition state in the store.
    pub async fn state(&self, tp: &TopicPartition) -> Option<PartitionLeadership> {
        match self
            .admin
            .get_data(&paths::partition_state(&tp.topic, tp.partition), false)
            .await
        {
            Ok((data, stat)) => Some(leadership_from_znode(
                &PartitionStateZNode::from_json(&data).unwrap(),
                stat.version,
            )),
            Err(_) => None,
        }
    }

    /// (leader, ISR) in the store.
    pub async fn leader_isr(&self, tp: &TopicPartition) -> Option<(BrokerId, Vec<BrokerId>)> {
        self.state(tp).await.map(|l| (l.leader, l.isr))
    }

    /// The replicas of `tp` in `/brokers/topics/<t>`.
    pub async fn assignment(&self, tp: &TopicPartition) -> Option<Vec<BrokerId>> {
        let (data, _) = self
            .admin
            .get_data(&paths::topic(&tp.topic), false)
            .await
            .ok()?;
        TopicAssignment::from_json(&data)
            .ok()?
            .partitions
            .get(&tp.partition)
            .cloned()
    }

    /// Writes a state znode as a ZooKeeper-mode leader changing its ISR would (CAS on the
    /// version), then an ISR change notification.
    pub async fn leader_sets_isr(&self, tp: &TopicPartition, isr: Vec<BrokerId>) {
        let path = paths::partition_state(&tp.topic, tp.partition);
        let (data, stat) = self.admin.get_data(&path, false).await.unwrap();
        let mut z = PartitionStateZNode::from_json(&data).unwrap();
        z.isr = isr;
        self.admin
            .set_data(&path, &z.to_json().unwrap(), stat.version)
            .await
            .unwrap();
        let n = kafka_controller::zk_data::IsrChangeNotification::new(vec![
            kafka_controller::zk_data::TopicPartitionEntry::new(&tp.topic, tp.partition),
        ]);
        self.admin
            .create(
                paths::ISR_CHANGE_PREFIX,
                &n.to_json().unwrap(),
                CreateMode::PersistentSequential,
            )
            .await
            .unwrap();
    }

    /// The active controller's handle.
    pub async fn controller(&self) -> &ControllerHandle {
        let id = self.wait_controller().await;
        &self.brokers[&id].handle
    }
}
