//! The consumer-group coordinator in the simulator: brokers 1..=n each own a
//! `kafka-group-coordinator` [`GroupCoordinator`]
//! and a replica of every `__consumer_offsets` partition ([`log`]); the partitions' leadership
//! moves under crashes and restarts and controller-driven leadership changes (as after a
//! controller failover or a controlled shutdown), a deposed broker may keep acting as leader
//! or as coordinator for a while (a zombie: its LeaderAndIsr, or its coordinator's unload, is
//! held back), and simulated consumers ([`consumer`]) of several groups — dynamic and static
//! members — join, sync, heartbeat, commit, fetch, leave and come back over a network that
//! loses, delays, reorders and duplicates messages (the broker drops a request older than one
//! it already took from the same client, as one TCP connection would).
//!
//! Checked after every step and every delivered message ([`sim`]): an acknowledged commit is
//! never lost (every OffsetFetch answered by a coordinator loaded at the same or a later leader
//! epoch returns at least the last acknowledged offset) and never moves backwards within a
//! generation; every append acknowledged as committed is in the log of the partition's current
//! leader (so a deposed coordinator's appends never commit); every member of a generation got
//! its part of the same assignment set; once faults stop, every group is Stable with all its
//! members within a bounded time.

pub mod consumer;
pub mod log;
pub mod sim;

use kafka_group_coordinator::{GroupCoordinator, Request, Response};

use crate::net::{NetConfig, NodeId};

/// The topic the consumers consume.
pub const TOPIC: &str = "t";

/// A message between a consumer and a broker.
#[derive(Debug, Clone)]
pub enum Msg {
    /// Which broker leads this offsets partition (FindCoordinator by the partition-for-group
    /// rule, answered from the broker's metadata).
    FindCoordinator {
        /// The client's request id.
        req: u64,
        /// The group's offsets partition.
        partition: i32,
    },
    /// The answer: the leader the broker believes in.
    FindCoordinatorResponse {
        /// The client's request id.
        req: u64,
        /// The coordinator, `None` when unknown (COORDINATOR_NOT_AVAILABLE).
        coordinator: Option<NodeId>,
    },
    /// A group request.
    Request {
        /// The client's request id.
        req: u64,
        /// The request.
        request: Request,
    },
    /// Its response.
    Response {
        /// The client's request id.
        req: u64,
        /// The response.
        response: Response,
    },
}

/// How often each fault happens: probabilities per step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroupFaultRates {
    /// A broker crashes (its log survives) and restarts later.
    pub crash: f64,
    /// The controller moves a partition's leadership to another ISR member.
    pub leader_move: f64,
    /// A deposed leader's LeaderAndIsr is held back (it keeps acting as leader for a while).
    pub zombie_leader: f64,
    /// A deposed coordinator's unload is held back (it keeps answering from its cache).
    pub zombie_coordinator: f64,
    /// A consumer leaves (a dynamic one with LeaveGroup) and comes back later.
    pub leave: f64,
}

impl Default for GroupFaultRates {
    fn default() -> Self {
        GroupFaultRates {
            crash: 0.003,
            leader_move: 0.006,
            zombie_leader: 0.4,
            zombie_coordinator: 0.5,
            leave: 0.001,
        }
    }
}

/// One run's settings.
#[derive(Debug, Clone, Copy)]
pub struct GroupSimConfig {
    /// Brokers 1..=n, every one a replica of every offsets partition.
    pub brokers: i32,
    /// `offsets.topic.num.partitions`.
    pub offsets_partitions: i32,
    /// `min.insync.replicas` of the offsets topic.
    pub min_insync_replicas: usize,
    /// `replica.lag.time.max.ms`.
    pub replica_lag_time_max_ms: u64,
    /// `offsets.commit.timeout.ms`.
    pub commit_timeout_ms: u64,
    /// Groups.
    pub groups: usize,
    /// Members per group.
    pub members_per_group: usize,
    /// Of those, static members (KIP-345).
    pub static_members_per_group: usize,
    /// Partitions of the consumed topic.
    pub topic_partitions: i32,
    /// `group.initial.rebalance.delay.ms`.
    pub initial_rebalance_delay_ms: i32,
    /// The members' session timeout.
    pub session_timeout_ms: i32,
    /// The members' rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// Time between heartbeats.
    pub heartbeat_interval_ms: u64,
    /// Time between commits.
    pub commit_interval_ms: u64,
    /// Simulated time per step.
    pub tick_ms: u64,
    /// Faults happen before this time.
    pub fault_ms: u64,
    /// Once faults stop, every group must be Stable within this.
    pub settle_ms: u64,
    /// The network between consumers and brokers while faults happen (calm afterwards).
    pub net: NetConfig,
    /// Fault rates.
    pub faults: GroupFaultRates,
    /// Called on every coordinator a broker creates (tests use it to plant the core's
    /// `never-in-production` bugs).
    pub coordinator_hook: Option<fn(&mut GroupCoordinator)>,
    /// Events kept for the failure trace.
    pub trace_capacity: usize,
}

impl Default for GroupSimConfig {
    fn default() -> Self {
        GroupSimConfig {
            brokers: 3,
            offsets_partitions: 4,
            min_insync_replicas: 2,
            replica_lag_time_max_ms: 300,
            commit_timeout_ms: 1_000,
            groups: 3,
            members_per_group: 3,
            static_members_per_group: 1,
            topic_partitions: 6,
            initial_rebalance_delay_ms: 100,
            session_timeout_ms: 1_000,
            rebalance_timeout_ms: 2_000,
            heartbeat_interval_ms: 150,
            commit_interval_ms: 100,
            tick_ms: 10,
            fault_ms: 5_000,
            settle_ms: 15_000,
            net: NetConfig::default(),
            faults: GroupFaultRates::default(),
            coordinator_hook: None,
            trace_capacity: 80,
        }
    }
}
