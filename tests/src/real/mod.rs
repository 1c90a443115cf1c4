//! The Kafka cluster on the real cores: every broker runs `kafka-controller`'s
//! [`Controller`](kafka_controller::controller::Controller) (they campaign for `/controller`
//! on a shared `MemoryCoordination` tree) and `kafka-replication`'s `ReplicaManager` with its
//! `ReplicaFetcher`s; the controllers' LeaderAndIsr / UpdateMetadata / StopReplica requests,
//! the followers' Fetch and OffsetForLeaderEpoch, and the producer's and consumer's requests
//! are `kafka-wire` messages carried by the simulated network.
//!
//! Determinism: the whole cluster runs on one tokio current-thread runtime whose clock is
//! paused, so simulated time moves only when every task is idle, and tasks run in a fixed
//! order; the network, the faults and the clients draw from the seeded generator; every map
//! whose order decides anything is ordered or has a fixed hasher. One seed, one run: the
//! test `real_one_seed_is_one_run` replays seeds and compares their fingerprints.

pub mod broker;
pub mod channel;
pub mod cluster;
pub mod coord;

use kafka_replication::log::MemoryLog;
use kafka_replication::partition::{Partition, PartitionConfig};
use kafka_replication::replica_manager::ReplicaManager;
use kafka_wire::messages::{
    FetchRequest, FetchResponse, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
    ProduceRequest, ProduceResponse,
};
use kafka_wire::{RequestBody, ResponseBody};

use crate::net::NetConfig;
pub use coord::StoreBreakage;

/// One message between nodes.
#[derive(Debug, Clone)]
pub enum Msg {
    /// Controller → broker: LeaderAndIsr, UpdateMetadata or StopReplica.
    Control {
        /// Matches the answer.
        id: u64,
        /// Wire version.
        version: i16,
        /// The request.
        body: RequestBody,
    },
    /// Broker → controller.
    ControlResp {
        /// The request's id.
        id: u64,
        /// The answer.
        body: ResponseBody,
    },
    /// Follower or consumer → leader.
    Fetch {
        /// Matches the answer.
        id: u64,
        /// The request.
        request: FetchRequest,
    },
    /// Leader → follower or consumer.
    FetchResp {
        /// The request's id.
        id: u64,
        /// The answer.
        response: FetchResponse,
    },
    /// Follower → leader (KIP-101 / KIP-279 truncation).
    EpochQuery {
        /// Matches the answer.
        id: u64,
        /// The request.
        request: OffsetForLeaderEpochRequest,
    },
    /// Leader → follower.
    EpochAnswer {
        /// The request's id.
        id: u64,
        /// The answer.
        response: OffsetForLeaderEpochResponse,
    },
    /// Broker → the controller its metadata names: ControlledShutdown (K6).
    ControlledShutdown {
        /// Matches the answer.
        id: u64,
        /// The broker's epoch (KIP-380).
        broker_epoch: i64,
    },
    /// Controller → broker: how many partitions it still leads, or a refusal.
    ControlledShutdownResp {
        /// The request's id.
        id: u64,
        /// Partitions still led, or why the controller refused.
        result: Result<usize, String>,
    },
    /// Producer → leader, acks=all.
    Produce {
        /// Matches the answer.
        id: u64,
        /// The request.
        request: ProduceRequest,
    },
    /// Leader → producer.
    ProduceResp {
        /// The request's id.
        id: u64,
        /// The answer.
        response: ProduceResponse,
    },
}

/// How often each fault is injected: the probability per step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RealFaults {
    /// A broker process crashes (its disk survives) and restarts later.
    pub crash: f64,
    /// A broker pauses longer than its session (a GC pause), half the time the active
    /// controller: it wakes up believing it still leads.
    pub pause: f64,
    /// The network splits the brokers and clients into two sides.
    pub partition: f64,
    /// One direction between two nodes is cut.
    pub one_way: f64,
    /// A broker's coordination session expires (half the time the controller's).
    pub session_expiry: f64,
    /// A broker loses its connection to the coordination store (half the time the
    /// controller) but not to its peers; past the session timeout its session expires, and it
    /// reconnects only when the cut heals.
    pub store_isolation: f64,
    /// An administrator asks to move a partition to other brokers (K7; only when there are
    /// more brokers than replicas).
    pub reassign: f64,
    /// An administrator creates a second topic (K2.2), or deletes the one created before
    /// (K2.1); the deletion must complete once the faults stop.
    pub topic_churn: f64,
    /// A broker stops cleanly: it asks the controller to move its leaderships
    /// (ControlledShutdown, up to 3 times as `controlled.shutdown.max.retries`), then stops
    /// and closes its session; it starts again later.
    pub controlled_shutdown: f64,
}

impl Default for RealFaults {
    fn default() -> Self {
        RealFaults {
            crash: 0.003,
            pause: 0.002,
            partition: 0.003,
            one_way: 0.002,
            session_expiry: 0.002,
            store_isolation: 0.002,
            reassign: 0.002,
            topic_churn: 0.002,
            controlled_shutdown: 0.002,
        }
    }
}

/// One run's settings.
#[derive(Debug, Clone, Copy)]
pub struct RealConfig {
    /// Brokers 1..=n, every one a controller candidate.
    pub brokers: i32,
    /// Replicas per partition (at most `brokers`).
    pub replication_factor: i32,
    /// Partitions of the one topic.
    pub partitions: i32,
    /// Simulated run length; the last `calm_ms` of it have no new faults.
    pub duration_ms: u64,
    /// The fault-free end of the run, in which the cluster must make progress again.
    pub calm_ms: u64,
    /// Simulated time per step.
    pub tick_ms: u64,
    /// The network.
    pub net: NetConfig,
    /// `min.insync.replicas`.
    pub min_insync_replicas: usize,
    /// `replica.lag.time.max.ms`.
    pub replica_lag_time_max_ms: u64,
    /// The coordination session timeout.
    pub session_timeout_ms: u64,
    /// `replica.fetch.wait.max.ms`.
    pub fetch_max_wait_ms: i32,
    /// `replica.fetch.backoff.ms`.
    pub fetch_backoff_ms: u64,
    /// A follower's request with no answer after this long is a link error.
    pub fetch_timeout_ms: u64,
    /// A control request with no answer after this long is retried.
    pub control_timeout_ms: u64,
    /// The controller channel's retry backoff.
    pub control_backoff_ms: u64,
    /// `leader.imbalance.check.interval` (the auto preferred-leader election).
    pub rebalance_interval_ms: u64,
    /// Time between produce requests.
    pub produce_interval_ms: u64,
    /// Fault rates.
    pub faults: RealFaults,
    /// Test-only breakage of the store.
    pub breakage: StoreBreakage,
    /// The topic's `unclean.leader.election.enable`.
    pub unclean_election: bool,
    /// Test-only broken brokers: they apply every LeaderAndIsr whatever its controller,
    /// leader and broker epochs (no K4.1, K4.2 or KIP-380); `ha-tests`' own tests only (the
    /// switch needs `kafka-replication`'s `never-in-production`).
    pub brokers_ignore_epochs: Option<fn(&mut ReplicaManager<MemoryLog>)>,
    /// Called on every partition core of every broker after each LeaderAndIsr (tests use it
    /// to set the core's legacy switches).
    pub partition_hook: Option<fn(&mut Partition<MemoryLog>)>,
    /// Events kept for the failure trace.
    pub trace_capacity: usize,
}

impl Default for RealConfig {
    fn default() -> Self {
        RealConfig {
            brokers: 3,
            replication_factor: 3,
            partitions: 2,
            duration_ms: 4_000,
            calm_ms: 1_500,
            tick_ms: 5,
            net: NetConfig::default(),
            min_insync_replicas: 2,
            replica_lag_time_max_ms: 300,
            session_timeout_ms: 300,
            fetch_max_wait_ms: 50,
            fetch_backoff_ms: 50,
            fetch_timeout_ms: 250,
            control_timeout_ms: 200,
            control_backoff_ms: 50,
            rebalance_interval_ms: 1_000,
            produce_interval_ms: 15,
            faults: RealFaults::default(),
            breakage: StoreBreakage::default(),
            unclean_election: false,
            brokers_ignore_epochs: None,
            partition_hook: None,
            trace_capacity: 60,
        }
    }
}

impl RealConfig {
    /// The partition settings every broker uses.
    pub fn partition_config(&self) -> PartitionConfig {
        PartitionConfig::default()
            .with_replica_lag_time_max_ms(self.replica_lag_time_max_ms)
            .with_min_insync_replicas(self.min_insync_replicas)
    }
}
