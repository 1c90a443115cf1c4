//! The controller as a single event loop (Kafka's `KafkaController` on its `ControllerEventManager`), feature `tokio`: a tokio task drains a queue of
//! [`ControllerEvent`]s one at a time, like Kafka's controller event thread. Coordination
//! watches, controlled-shutdown requests, broker responses and the auto-rebalance tick become
//! events; session expiry preempts everything pending (`clearAndPut(Expire)`). Every handler
//! starts with "am I the active controller?".
//!
//! Every broker runs one [`Controller`]: it campaigns for `/controller` (K6), and the winner
//! runs `onControllerFailover` (K6.1–K6.12) and then the flows: broker failure (K1) and
//! start-up (K5, bounced brokers per KIP-380), topic creation (K2.2) and deletion (K2.1),
//! reassignment (K7), preferred elections, controlled shutdown and ISR change notifications.
//! The decisions are the pure modules' (`partition_state_machine`, `replica_state_machine`,
//! `election`, `reassignment`, ...); this module performs their store work, fenced by the
//! controller epoch, and hands their request batches to the [`ChannelManager`].
//!
//! ```no_run
//! # async fn run() {
//! use std::sync::Arc;
//! use kafka_controller::broker_channel::MemoryBrokerChannel;
//! use kafka_controller::controller::{Controller, ControllerConfig};
//! use ha_coordination::MemoryTree;
//!
//! let tree = MemoryTree::new();
//! let handle = Controller::start(
//!     ControllerConfig::new(1),
//!     Arc::new(tree.connect()),
//!     Arc::new(MemoryBrokerChannel::new()),
//! );
//! assert!(handle.wait_active(std::time::Duration::from_secs(5)).await.is_some());
//! # }
//! ```

mod brokers;
mod elect_leaders;
pub mod events;
mod failover;
mod isr_change;
mod log_dirs;
mod passes;
mod reassign;
mod responses;
pub mod store;
mod topic_deletion;
mod topics;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::broker_channel::{BrokerChannel, ChannelConfig, ChannelManager, DeliveredResponse};
use crate::context::{BrokerId, ControllerContext, ControllerStats, TopicPartition};
use crate::request_batch::ControllerBrokerRequestBatch;
use crate::topic_id_source::TopicIdGenerator;
use crate::zk_data::{paths, KafkaZkClient, KafkaZkError};
use ha_coordination::{Coordination, CoordinationEvent, SessionEvent, SessionId, WatchEventKind};

pub use elect_leaders::{ElectionError, ElectionResults, ElectionType};
pub use events::{ControllerEvent, EventQueue};
pub use store::Store;

/// Why a controller operation failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ControllerError {
    /// This broker is not the active controller.
    #[error("not the active controller")]
    NotController,
    /// Another controller was elected: the write was fenced and this controller resigns.
    #[error("controller moved")]
    ControllerMoved,
    /// The event was dropped because the session expired (`clearAndPut(Expire)`).
    #[error("event preempted by session expiry")]
    Preempted,
    /// The controller loop has stopped.
    #[error("controller stopped")]
    Stopped,
    /// A controlled shutdown was refused.
    #[error(transparent)]
    ControlledShutdown(#[from] crate::election::ControlledShutdownError),
    /// The store failed or held malformed data.
    #[error(transparent)]
    Store(KafkaZkError),
}

impl From<KafkaZkError> for ControllerError {
    fn from(e: KafkaZkError) -> Self {
        match e {
            KafkaZkError::ControllerMoved { .. } => ControllerError::ControllerMoved,
            e => ControllerError::Store(e),
        }
    }
}

impl From<ha_coordination::CoordinationError> for ControllerError {
    fn from(e: ha_coordination::CoordinationError) -> Self {
        ControllerError::Store(e.into())
    }
}

/// The controller's settings (Kafka's names in parentheses): [`ControllerConfig::new`] and the
/// `with_*` setters.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ControllerConfig {
    /// This broker's id (`broker.id`).
    pub broker_id: BrokerId,
    /// Execute topic deletions (`delete.topic.enable`, default true).
    pub delete_topic_enable: bool,
    /// Run the preferred-leader rebalance task (`auto.leader.rebalance.enable`, default true).
    pub auto_leader_rebalance_enable: bool,
    /// The broker default of `unclean.leader.election.enable` (false), for topics whose
    /// `/config/topics/<t>` does not set it.
    pub unclean_leader_election_enable: bool,
    /// Allowed share of non-preferred leaders per broker, percent
    /// (`leader.imbalance.per.broker.percentage`, default 10).
    pub leader_imbalance_per_broker_percentage: u32,
    /// Period of the rebalance check (`leader.imbalance.check.interval.seconds`, default 300 s).
    pub leader_imbalance_check_interval: Duration,
    /// Channel retry policy and wire versions.
    pub channel: ChannelConfig,
    /// The inter-broker listener whose endpoints go into requests.
    pub listener: String,
    /// Rounds of re-read and retry of a partition-state CAS before giving up on it.
    pub max_cas_retries: usize,
    /// Where fresh topic ids (KIP-516) come from; random by default. A simulation passes a
    /// seeded source so that a seed replays exactly.
    pub topic_ids: TopicIdGenerator,
}

impl ControllerConfig {
    /// Kafka's defaults for broker `broker_id`.
    pub fn new(broker_id: BrokerId) -> Self {
        Self {
            broker_id,
            delete_topic_enable: true,
            auto_leader_rebalance_enable: true,
            unclean_leader_election_enable: false,
            leader_imbalance_per_broker_percentage: crate::rebalance::DEFAULT_IMBALANCE_PERCENTAGE,
            leader_imbalance_check_interval: Duration::from_secs(
                crate::rebalance::DEFAULT_CHECK_INTERVAL_SECS,
            ),
            channel: ChannelConfig::default(),
            listener: "PLAINTEXT".to_string(),
            max_cas_retries: 10,
            topic_ids: TopicIdGenerator::random(),
        }
    }

    /// Executes topic deletions or only records them (`delete.topic.enable`).
    #[must_use]
    pub fn with_delete_topic_enable(mut self, enable: bool) -> Self {
        self.delete_topic_enable = enable;
        self
    }

    /// Runs the preferred-leader rebalance task or not (`auto.leader.rebalance.enable`).
    #[must_use]
    pub fn with_auto_leader_rebalance_enable(mut self, enable: bool) -> Self {
        self.auto_leader_rebalance_enable = enable;
        self
    }

    /// The allowed share of non-preferred leaders per broker, percent
    /// (`leader.imbalance.per.broker.percentage`).
    #[must_use]
    pub fn with_leader_imbalance_per_broker_percentage(mut self, percentage: u32) -> Self {
        self.leader_imbalance_per_broker_percentage = percentage;
        self
    }

    /// The period of the rebalance check (`leader.imbalance.check.interval.seconds`).
    #[must_use]
    pub fn with_leader_imbalance_check_interval(mut self, interval: Duration) -> Self {
        self.leader_imbalance_check_interval = interval;
        self
    }

    /// The channel's retry policy and wire versions.
    #[must_use]
    pub fn with_channel(mut self, channel: ChannelConfig) -> Self {
        self.channel = channel;
        self
    }

    /// The inter-broker listener whose endpoints go into requests.
    #[must_use]
    pub fn with_listener(mut self, listener: impl Into<String>) -> Self {
        self.listener = listener.into();
        self
    }

    /// Rounds of re-read and retry of a partition-state CAS.
    #[must_use]
    pub fn with_max_cas_retries(mut self, retries: usize) -> Self {
        self.max_cas_retries = retries;
        self
    }

    /// The source of fresh topic ids.
    #[must_use]
    pub fn with_topic_ids(mut self, topic_ids: TopicIdGenerator) -> Self {
        self.topic_ids = topic_ids;
        self
    }
}

/// Whether this broker is the active controller, and of which epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ControllerStatus {
    /// The epoch this broker controls, if it is the active controller.
    pub active_epoch: Option<i32>,
}

/// A handle on a running [`Controller`].
#[derive(Debug, Clone)]
pub struct ControllerHandle {
    queue: Arc<EventQueue>,
    status: watch::Receiver<ControllerStatus>,
}

impl ControllerHandle {
    /// The current status.
    pub fn status(&self) -> ControllerStatus {
        *self.status.borrow()
    }

    /// Waits until this broker is the active controller (returns its epoch) or `timeout`.
    pub async fn wait_active(&self, timeout: Duration) -> Option<i32> {
        let mut rx = self.status.clone();
        tokio::time::timeout(timeout, async move {
            loop {
                if let Some(e) = rx.borrow_and_update().active_epoch {
                    return Some(e);
                }
                if rx.changed().await.is_err() {
                    return None;
                }
            }
        })
        .await
        .ok()
        .flatten()
    }

    /// Queues an event.
    pub fn put(&self, event: ControllerEvent) {
        self.queue.put(event);
    }

    /// A broker's controlled-shutdown request: the partitions it still leads.
    pub async fn controlled_shutdown(
        &self,
        broker: BrokerId,
        broker_epoch: i64,
    ) -> Result<Vec<TopicPartition>, ControllerError> {
        let (reply, rx) = oneshot::channel();
        self.queue.put(ControllerEvent::ControlledShutdown {
            broker,
            broker_epoch,
            reply,
        });
        rx.await.unwrap_or(Err(ControllerError::Stopped))
    }

    /// An admin client's leader elections (ElectLeaders) on `partitions` (`None`: all),
    /// performed by the event loop: the new leader of each partition, or why not.
    /// [`ControllerError::NotController`] when this controller is not active.
    pub async fn elect_leaders(
        &self,
        partitions: Option<Vec<TopicPartition>>,
        kind: ElectionType,
    ) -> Result<ElectionResults, ControllerError> {
        let (reply, rx) = oneshot::channel();
        self.queue.put(ControllerEvent::ElectLeaders {
            partitions,
            kind,
            reply,
        });
        rx.await.unwrap_or(Err(ControllerError::Stopped))
    }

    /// A copy of the active controller's context, once every event queued before has been
    /// handled; `None` if not active.
    pub async fn context(&self) -> Option<ControllerContext> {
        let (tx, rx) = oneshot::channel();
        self.queue.put(ControllerEvent::Inspect(tx));
        rx.await.ok().flatten()
    }

    /// The active controller's metrics snapshot, once every event queued before has been
    /// handled; `None` if not active.
    pub async fn stats(&self) -> Option<ControllerStats> {
        let (tx, rx) = oneshot::channel();
        self.queue.put(ControllerEvent::Stats(tx));
        rx.await.ok().flatten()
    }

    /// Returns once every event queued before this call has been handled.
    pub async fn sync(&self) {
        let (tx, rx) = oneshot::channel();
        self.queue.put(ControllerEvent::Sync(tx));
        let _ = rx.await;
    }

    /// Stops the controller (resigning if active).
    pub fn shutdown(&self) {
        self.queue.put(ControllerEvent::Shutdown);
    }
}

/// The state of the active controller.
pub(crate) struct Active {
    pub(crate) ctx: ControllerContext,
    pub(crate) store: Store,
    pub(crate) channels: ChannelManager,
    pub(crate) batch: ControllerBrokerRequestBatch,
    pub(crate) rebalance_task: Option<JoinHandle<()>>,
    /// The session this controller was elected on (its `/controller` is that session's).
    pub(crate) session: SessionId,
}

impl Drop for Active {
    fn drop(&mut self) {
        if let Some(t) = self.rebalance_task.take() {
            t.abort();
        }
        self.channels.shutdown();
    }
}

/// One broker's controller: the event loop and its state.
pub struct Controller {
    config: ControllerConfig,
    zk: KafkaZkClient,
    channel: Arc<dyn BrokerChannel>,
    queue: Arc<EventQueue>,
    status: watch::Sender<ControllerStatus>,
    responses: mpsc::UnboundedSender<DeliveredResponse>,
    active: Option<Active>,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("broker", &self.config.broker_id)
            .field("active", &self.active.as_ref().map(|a| a.ctx.epoch))
            .finish()
    }
}

/// Maps a fired watch to the controller event it means.
fn watch_event(kind: WatchEventKind, path: &str) -> Option<ControllerEvent> {
    use ControllerEvent as E;
    Some(match path {
        paths::CONTROLLER => E::ControllerChange,
        paths::BROKER_IDS => E::BrokerChange,
        paths::BROKER_TOPICS => E::TopicChange,
        paths::DELETE_TOPICS => E::TopicDeletion,
        paths::REASSIGN_PARTITIONS => E::PartitionReassignment,
        paths::PREFERRED_REPLICA_ELECTION => E::PreferredReplicaElection,
        paths::ISR_CHANGE_NOTIFICATION => E::IsrChangeNotification,
        paths::LOG_DIR_EVENT_NOTIFICATION => E::LogDirEventNotification,
        p if kind == WatchEventKind::NodeDataChanged && p.starts_with("/brokers/ids/") => {
            E::BrokerModification(paths::parse_broker_id(p.strip_prefix("/brokers/ids/")?)?)
        }
        p if kind == WatchEventKind::NodeDataChanged => {
            let rest = p.strip_prefix("/brokers/topics/")?;
            if !rest.contains('/') {
                return Some(E::PartitionModifications(rest.to_string()));
            }
            let (topic, rest) = rest.split_once("/partitions/")?;
            let partition = rest.strip_suffix("/state")?.parse().ok()?;
            E::PartitionReassignmentIsrChange(TopicPartition::new(topic, partition))
        }
        _ => return None,
    })
}

impl Controller {
    /// Starts broker `config.broker_id`'s controller on `coord` (this broker's session) and
    /// `channel`; it campaigns at once. Must be called inside a tokio runtime. Its store
    /// operations lost with the connection are sent again once connected on the same session
    /// ([`RetryUntilConnected`](ha_coordination::RetryUntilConnected)), as Kafka's are.
    pub fn start(
        config: ControllerConfig,
        coord: Arc<dyn Coordination>,
        channel: Arc<dyn BrokerChannel>,
    ) -> ControllerHandle {
        let coord: Arc<dyn Coordination> =
            Arc::new(ha_coordination::RetryUntilConnected::new(coord));
        let queue = Arc::new(EventQueue::new());
        let (status, status_rx) = watch::channel(ControllerStatus::default());
        let (responses, mut responses_rx) = mpsc::unbounded_channel();
        // Watches and session events → controller events.
        let mut stream = coord.events();
        let q = queue.clone();
        let mut session = coord.session_id();
        let watcher = tokio::spawn(async move {
            while let Some(event) = stream.next().await {
                match event {
                    CoordinationEvent::Watch(w) => {
                        if let Some(e) = watch_event(w.kind, &w.path) {
                            q.put(e);
                        }
                    }
                    CoordinationEvent::Session(SessionEvent::Expired { session_id }) => {
                        q.clear_and_put(ControllerEvent::Expire {
                            session: session_id,
                        });
                    }
                    // A new session (after expiry) re-registers and campaigns; a reconnection
                    // of the same session changes nothing.
                    CoordinationEvent::Session(SessionEvent::Connected { session_id }) => {
                        if session_id != session {
                            session = session_id;
                            q.put(ControllerEvent::Startup);
                        }
                    }
                    CoordinationEvent::Session(_) => {}
                }
            }
        });
        let q = queue.clone();
        let forwarder = tokio::spawn(async move {
            while let Some(r) = responses_rx.recv().await {
                q.put(ControllerEvent::BrokerResponse(r));
            }
        });
        let controller = Controller {
            config,
            zk: KafkaZkClient::new(coord),
            channel,
            queue: queue.clone(),
            status,
            responses,
            active: None,
        };
        queue.put(ControllerEvent::Startup);
        tokio::spawn(async move {
            controller.run().await;
            watcher.abort();
            forwarder.abort();
        });
        ControllerHandle {
            queue,
            status: status_rx,
        }
    }

    async fn run(mut self) {
        loop {
            let event = self.queue.take().await;
            if matches!(event, ControllerEvent::Shutdown) {
                if let Some(a) = self.active.take() {
                    let _ = a.store.zk.resign(a.store.epoch).await;
                }
                self.publish_status();
                return;
            }
            if let Some(a) = &self.active {
                a.store.begin_event();
            }
            if let Err(e) = self.process(event).await {
                match e {
                    ControllerError::ControllerMoved => {
                        tracing::warn!(
                            broker = self.config.broker_id,
                            "controller moved; resigning"
                        );
                        self.resign();
                        self.queue.put(ControllerEvent::ControllerChange);
                    }
                    e => {
                        tracing::warn!(broker = self.config.broker_id, error = %e, "controller event failed")
                    }
                }
            }
        }
    }

    async fn process(&mut self, event: ControllerEvent) -> Result<(), ControllerError> {
        use ControllerEvent as E;
        match event {
            E::Startup | E::ControllerChange => self.elect().await,
            // K6: an expiry ends the controllership won on that session. One of an older
            // session can arrive after this client already opened a new session and won a
            // newer epoch on it (the old `/controller` vanished first): that one stays.
            E::Expire { session } => {
                match &self.active {
                    Some(a) if a.session != session => tracing::info!(
                        broker = self.config.broker_id,
                        "expiry of an earlier session; staying controller on the new one"
                    ),
                    _ => self.resign(),
                }
                Ok(())
            }
            E::Sync(reply) => {
                let _ = reply.send(());
                Ok(())
            }
            E::Inspect(reply) => {
                let _ = reply.send(self.active.as_ref().map(|a| a.ctx.clone()));
                Ok(())
            }
            E::Stats(reply) => {
                let _ = reply.send(self.active.as_ref().map(|a| a.ctx.stats()));
                Ok(())
            }
            E::ControlledShutdown {
                broker,
                broker_epoch,
                reply,
            } => {
                let result = self.controlled_shutdown(broker, broker_epoch).await;
                let moved = matches!(result, Err(ControllerError::ControllerMoved));
                let _ = reply.send(result);
                if moved {
                    return Err(ControllerError::ControllerMoved);
                }
                Ok(())
            }
            E::ElectLeaders {
                partitions,
                kind,
                reply,
            } => {
                let result = self.elect_leaders(partitions, kind).await;
                let moved = matches!(result, Err(ControllerError::ControllerMoved));
                let _ = reply.send(result);
                if moved {
                    return Err(ControllerError::ControllerMoved);
                }
                Ok(())
            }
            // Every other handler needs an active controller.
            _ if self.active.is_none() => Ok(()),
            E::BrokerChange => self.process_broker_change().await,
            E::BrokerModification(id) => self.process_broker_modification(id).await,
            E::TopicChange => self.process_topic_change().await,
            E::PartitionModifications(topic) => self.process_partition_modifications(topic).await,
            E::TopicDeletion => self.process_topic_deletion().await,
            E::PartitionReassignment => self.process_partition_reassignment().await,
            E::PartitionReassignmentIsrChange(tp) => self.process_reassignment_isr_change(tp).await,
            E::PreferredReplicaElection => self.process_preferred_election().await,
            E::IsrChangeNotification => self.process_isr_change_notification().await,
            E::LogDirEventNotification => self.process_log_dir_event_notification().await,
            E::BrokerResponse(r) => self.process_broker_response(r).await,
            E::AutoPreferredReplicaLeaderElection => self.process_auto_rebalance().await,
            E::Shutdown => Ok(()),
        }
    }

    fn publish_status(&self) {
        let active_epoch = self.active.as_ref().map(|a| a.ctx.epoch);
        self.status.send_replace(ControllerStatus { active_epoch });
    }

    /// The active controller's state (handlers run only when active).
    fn active(&mut self) -> Result<&mut Active, ControllerError> {
        self.active.as_mut().ok_or(ControllerError::NotController)
    }

    /// Sends the pending batch: one LeaderAndIsr, one UpdateMetadata and one StopReplica per
    /// broker (K1.4), each on the broker's FIFO queue.
    fn send_batch(&mut self) -> Result<(), ControllerError> {
        let a = self.active()?;
        let requests = a.batch.send_requests(&a.ctx);
        a.channels.enqueue(requests);
        Ok(())
    }
}
