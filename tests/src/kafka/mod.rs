//! The Kafka cluster model: brokers running the real `kafka-replication` partition core, a
//! controller electing with the real `kafka-controller` strategies over a store with
//! compare-and-set on the partition epoch, an acks=all producer and a consumer — all over the
//! simulated network, with crashes, pauses, partitions, session expiries and controller
//! failovers, and every invariant checked after every step, every delivered message and every
//! store write. The same checks run on the real
//! cores in [`crate::real`]; this model keeps the scripted known-bug schedules and the
//! model-level broken variants.

pub mod broker;
pub mod check;
pub mod cluster;
pub mod controller;
pub mod msg;

use kafka_replication::log::MemoryLog;
use kafka_replication::partition::{Partition, PartitionConfig};

use crate::net::NetConfig;

/// Deliberately broken variants of the model itself (the broken variants of the replication
/// core are its `never-in-production` switches, set through [`KafkaConfig::partition_hook`]). They exist to
/// show that the checks can fail.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Broken {
    /// Brokers ignore the controller epoch (K4.1) and, forgetting what they applied, take
    /// LeaderAndIsr states with older leader epochs (K4.2).
    pub ignore_epochs: bool,
    /// The store lets a deposed controller's writes land (no `/controller_epoch` check,
    /// KAFKA-6082).
    pub store_ignores_controller_epoch: bool,
}

/// How often each fault is injected: the probability per step (one step is `tick_ms`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultRates {
    /// A broker crashes (its log survives) and restarts later.
    pub crash: f64,
    /// A broker loses power: its unflushed log tail is lost. Off in the default mix: ZooKeeper-
    /// mode Kafka does not survive it (KIP-966, "last replica standing").
    pub power_loss: f64,
    /// A broker pauses longer than its session (a GC pause) and wakes believing it leads.
    pub pause: f64,
    /// The network splits into two sides (symmetric).
    pub partition: f64,
    /// One direction between two nodes is cut.
    pub one_way: f64,
    /// A broker's coordination session is expired.
    pub session_expiry: f64,
    /// The controller fails over; the old one acts later as a zombie.
    pub controller_failover: f64,
}

impl Default for FaultRates {
    fn default() -> Self {
        FaultRates {
            crash: 0.004,
            power_loss: 0.0,
            pause: 0.002,
            partition: 0.003,
            one_way: 0.002,
            session_expiry: 0.002,
            controller_failover: 0.001,
        }
    }
}

impl FaultRates {
    /// No faults at all.
    pub fn none() -> Self {
        FaultRates {
            crash: 0.0,
            power_loss: 0.0,
            pause: 0.0,
            partition: 0.0,
            one_way: 0.0,
            session_expiry: 0.0,
            controller_failover: 0.0,
        }
    }
}

/// One run's settings.
#[derive(Debug, Clone, Copy)]
pub struct KafkaConfig {
    /// Brokers 1..=n, all replicas of the one partition.
    pub brokers: i32,
    /// Simulated run length.
    pub duration_ms: u64,
    /// Simulated time per step.
    pub tick_ms: u64,
    /// The network.
    pub net: NetConfig,
    /// `unclean.leader.election.enable`.
    pub unclean_election: bool,
    /// `min.insync.replicas`.
    pub min_insync_replicas: usize,
    /// `replica.lag.time.max.ms`.
    pub replica_lag_time_max_ms: u64,
    /// The coordination session timeout.
    pub session_timeout_ms: u64,
    /// How often a broker's log is flushed; a power loss drops what came after.
    pub flush_interval_ms: u64,
    /// Time between produce requests.
    pub produce_interval_ms: u64,
    /// A follower fetch's byte limit (at least one batch is always returned).
    pub fetch_max_bytes: usize,
    /// Fault rates.
    pub faults: FaultRates,
    /// Deliberately broken model variants.
    pub broken: Broken,
    /// Called on every partition core a broker creates (tests use it to set the core's
    /// legacy switches).
    pub partition_hook: Option<fn(&mut Partition<MemoryLog>)>,
    /// Events kept for the failure trace.
    pub trace_capacity: usize,
}

impl Default for KafkaConfig {
    fn default() -> Self {
        KafkaConfig {
            brokers: 3,
            duration_ms: 3_000,
            tick_ms: 5,
            net: NetConfig::default(),
            unclean_election: false,
            min_insync_replicas: 2,
            replica_lag_time_max_ms: 200,
            session_timeout_ms: 300,
            flush_interval_ms: 50,
            produce_interval_ms: 15,
            fetch_max_bytes: 1 << 16,
            faults: FaultRates::default(),
            broken: Broken::default(),
            partition_hook: None,
            trace_capacity: 60,
        }
    }
}

impl KafkaConfig {
    /// The partition settings every broker uses.
    pub fn partition_config(&self) -> PartitionConfig {
        PartitionConfig::default()
            .with_replica_lag_time_max_ms(self.replica_lag_time_max_ms)
            .with_min_insync_replicas(self.min_insync_replicas)
    }
}
