//! The demo's settings ([`DemoConfig`]: records, step timeout, the coordination backend and
//! the hook between steps), its [`DemoStep`]s, what it reports and why it may stop.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use ha_coordination::CoordinationError;
use ha_coordination::{CoordinationCluster, MemoryCluster};
use kafka_controller::admin::AdminError;
use kafka_controller::zk_data::KafkaZkError;

use kafka_broker::server::ServerError;

/// Why the demo could not run to its verdict.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// A broker's server did not start.
    #[error("broker start: {0}")]
    Server(#[from] ServerError),
    /// A store operation of a broker failed.
    #[error("store: {0}")]
    Store(#[from] KafkaZkError),
    /// The coordination service refused a new session or an expiry.
    #[error("coordination service: {0}")]
    Coordination(#[from] CoordinationError),
    /// An admin operation failed.
    #[error("admin: {0}")]
    Admin(#[from] AdminError),
    /// A step did not complete in time.
    #[error("timed out waiting for: {0}")]
    Timeout(String),
}

/// A step of the demo, as passed to [`DemoConfig::on_step`] once it is complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DemoStep {
    /// Brokers 1–3 listen and are registered.
    BrokersStarted,
    /// The first controller is active.
    ControllerElected,
    /// The topic exists and every partition has a leader and a full ISR.
    TopicOnline,
    /// A produce round (1, 2 or 3) is over.
    Produced {
        /// The round.
        round: u8,
    },
    /// A partition leader was killed and every partition has a live leader again.
    LeaderFailedOver {
        /// The killed broker.
        killed: i32,
    },
    /// The controller was killed and a new one with a higher epoch is active.
    ControllerFailedOver {
        /// The killed broker.
        killed: i32,
    },
    /// The dead brokers are back and every ISR is full again.
    IsrRestored,
    /// Broker 4 listens and is registered.
    FourthBrokerStarted,
    /// The K7 reassignment of partition 0 is complete.
    Reassigned,
    /// Every partition was read back.
    ReadBack,
    /// The topic is deleted from the store.
    TopicDeleted,
}

impl std::fmt::Display for DemoStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// What runs between steps: awaited before the next step starts.
pub type StepHook = Arc<dyn Fn(DemoStep) -> BoxFuture<'static, ()> + Send + Sync>;

/// Settings of the demo.
#[derive(Clone)]
pub struct DemoConfig {
    /// Records produced to each partition in each produce round.
    pub records_per_partition: usize,
    /// How long any one step may take.
    pub step_timeout: Duration,
    /// The coordination service: every broker, controller and admin client gets its own
    /// session from [`CoordinationCluster::connect`]; a killed broker's session is ended with
    /// [`CoordinationCluster::expire`]. Default: a new in-memory store ([`MemoryCluster`]).
    pub harness: Arc<dyn CoordinationCluster>,
    /// Awaited after each step, before the next one starts (`None`: nothing).
    pub on_step: Option<StepHook>,
}

impl DemoConfig {
    /// The default settings on `harness`.
    pub fn on(harness: Arc<dyn CoordinationCluster>) -> Self {
        DemoConfig {
            harness,
            ..DemoConfig::default()
        }
    }

    /// Sets [`on_step`](Self::on_step) from an async closure.
    pub fn with_step_hook<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn(DemoStep) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        self.on_step = Some(Arc::new(move |step| Box::pin(hook(step))));
        self
    }
}

impl std::fmt::Debug for DemoConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DemoConfig")
            .field("records_per_partition", &self.records_per_partition)
            .field("step_timeout", &self.step_timeout)
            .field("on_step", &self.on_step.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for DemoConfig {
    fn default() -> Self {
        DemoConfig {
            records_per_partition: 100,
            step_timeout: Duration::from_secs(20),
            harness: Arc::new(MemoryCluster::new()),
            on_step: None,
        }
    }
}

/// What the demo found.
#[derive(Debug, Clone, Default)]
pub struct DemoReport {
    /// Records the cluster acknowledged (acks=all).
    pub acknowledged: usize,
    /// Acknowledged records found when reading back.
    pub read_back: usize,
    /// Acknowledged records missing when reading back.
    pub lost: usize,
    /// The controller epochs seen, in order.
    pub controller_epochs: Vec<i32>,
    /// True once the topic was deleted at the end (after the read-back).
    pub topic_deleted: bool,
}

impl DemoReport {
    /// True if nothing acknowledged was lost and something was acknowledged.
    pub fn passed(&self) -> bool {
        self.acknowledged > 0 && self.lost == 0
    }
}
