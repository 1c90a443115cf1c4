//! The ZooKeeper ensemble model: 3, 5 or 7 voters plus observers, each a [`node::Server`]
//! running zab-core's real election, discovery and broadcast cores, over the simulated network
//! with every fault, and the ZAB invariants checked as the run goes ([`ensemble`]).

pub mod ensemble;
pub mod node;

use std::time::Duration;

use zab_core::discovery::Timing;
use zab_core::{ElectionConfig, FastLeaderElection};

use crate::net::NetConfig;

/// How often each fault is injected: the probability per fault tick (`tick_ms`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ZabFaultRates {
    /// A server crashes (its epochs and log survive) and restarts 200–1500 ms later.
    pub crash: f64,
    /// A server pauses 100–1500 ms (past `syncLimit` or not) and wakes believing it still
    /// leads or follows.
    pub pause: f64,
    /// The servers split into two sides, both directions cut between them.
    pub partition: f64,
    /// One direction between two servers is cut.
    pub one_way: f64,
    /// Every cut heals.
    pub heal: f64,
    /// One quorum connection is reset (both ends see it close).
    pub conn_reset: f64,
}

impl Default for ZabFaultRates {
    fn default() -> Self {
        ZabFaultRates {
            crash: 0.006,
            pause: 0.003,
            partition: 0.004,
            one_way: 0.003,
            heal: 0.006,
            conn_reset: 0.004,
        }
    }
}

impl ZabFaultRates {
    /// No faults at all (scripted schedules).
    pub fn none() -> Self {
        ZabFaultRates {
            crash: 0.0,
            pause: 0.0,
            partition: 0.0,
            one_way: 0.0,
            heal: 0.0,
            conn_reset: 0.0,
        }
    }
}

/// One ensemble run.
#[derive(Debug, Clone)]
pub struct ZabConfig {
    /// Voters (ids 1..=voters).
    pub voters: usize,
    /// Observers (ids 101..).
    pub observers: usize,
    /// The election core's configuration (timings, `fast_decide`, the vote order).
    pub election: ElectionConfig,
    /// `tickTime`, `initLimit`, `syncLimit`.
    pub timing: Timing,
    /// The network while faults are on; afterwards it is reliable (1–20 ms, nothing lost).
    pub net: NetConfig,
    /// Faults and writes are decided every `tick_ms`.
    pub tick_ms: u64,
    /// Simulated time with faults on.
    pub chaos_ms: u64,
    /// After faults stop, every server must follow one established leader within this bound
    /// (the liveness check).
    pub settle_bound_ms: u64,
    /// Fault rates while faults are on.
    pub faults: ZabFaultRates,
    /// Probability per tick that the established leader gets a client write.
    pub write: f64,
    /// Hierarchical quorums instead of a majority (needs 5 or more voters): three groups
    /// (voter `i` in group `i % 3`), and voter 1 of weight 0, which can never be elected.
    pub hierarchical: bool,
    /// Initial durable history by server id, or `None` for a random one (varied epochs and
    /// zxids that often tie on the zxid across epochs: the ZOOKEEPER-1419 trap).
    pub initial: Option<fn(i64) -> node::Durable>,
    /// Applied to every election core as it is built, before its first round: a test turns
    /// on one of zab-core's pre-fix election rules with it (its `never-in-production`
    /// setters), to show the schedule that needs the fix fails without it. `None` normally.
    pub old_election_rules: Option<fn(&mut FastLeaderElection)>,
}

impl ZabConfig {
    /// `voters` voters and `observers` observers with the default fault mix: election as in
    /// zab-core's default (fast decision on) with the notification back-off capped at
    /// 800 ms; tickTime 100 ms, initLimit 10, syncLimit 5; 3 s of faults, then 15 s to settle.
    pub fn new(voters: usize, observers: usize) -> Self {
        ZabConfig {
            voters,
            observers,
            election: ElectionConfig::default()
                .with_max_notification_interval(Duration::from_millis(800)),
            timing: Timing::new(Duration::from_millis(100), 10, 5),
            net: NetConfig {
                min_delay_ms: 1,
                max_delay_ms: 30,
                loss: 0.05,
                duplicate: 0.03,
                long_delay: 0.01,
                long_delay_ms: 500,
            },
            tick_ms: 10,
            chaos_ms: 3_000,
            settle_bound_ms: 15_000,
            faults: ZabFaultRates::default(),
            write: 0.3,
            hierarchical: false,
            initial: None,
            old_election_rules: None,
        }
    }
}
