//! Preferred-replica imbalance (K6.11, `checkAndTriggerAutoLeaderRebalance`, Kafka's `PartitionLeaderElectionAlgorithms`).
//!
//! For each preferred broker B (the head of a partition's assignment), the imbalance ratio is
//! the number of B's preferred partitions not led by B over the number of B's preferred
//! partitions. Above `leader.imbalance.per.broker.percentage` (default 10 %), a preferred
//! election runs for those of B's partitions whose preferred replica is live and in the ISR.
//! Topics queued for deletion are left out. The timer (first run 5 s after failover, then
//! every `leader.imbalance.check.interval.seconds`, default 300) belongs to the event loop.

use std::collections::BTreeMap;

use crate::context::{BrokerId, ControllerContext, TopicPartition};

/// Default `leader.imbalance.per.broker.percentage`.
pub const DEFAULT_IMBALANCE_PERCENTAGE: u32 = 10;
/// Default `leader.imbalance.check.interval.seconds`.
pub const DEFAULT_CHECK_INTERVAL_SECS: u64 = 300;
/// Delay of the first check after failover, in seconds.
pub const FIRST_CHECK_DELAY_SECS: u64 = 5;

/// The imbalance of one preferred broker.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BrokerImbalance {
    /// Partitions whose preferred replica is this broker.
    pub preferred: usize,
    /// Of those, the ones this broker does not lead (with known leadership).
    pub not_led: Vec<TopicPartition>,
}

impl BrokerImbalance {
    /// True if `not_led / preferred > percentage / 100` (exact integer comparison).
    pub fn exceeds(&self, percentage: u32) -> bool {
        self.preferred > 0
            && (self.not_led.len() as u128) * 100 > (percentage as u128) * (self.preferred as u128)
    }
}

/// The imbalance of every preferred broker.
pub fn imbalance_by_broker(ctx: &ControllerContext) -> BTreeMap<BrokerId, BrokerImbalance> {
    let mut out: BTreeMap<BrokerId, BrokerImbalance> = BTreeMap::new();
    for tp in ctx.all_partitions() {
        if ctx.is_topic_queued_for_deletion(&tp.topic) {
            continue;
        }
        let Some(&preferred) = ctx.partition_replicas(&tp).first() else {
            continue;
        };
        let entry = out.entry(preferred).or_default();
        entry.preferred += 1;
        if ctx.leadership(&tp).is_some_and(|l| l.leader != preferred) {
            entry.not_led.push(tp);
        }
    }
    out
}

/// True if the preferred replica of `tp` is live and in its ISR (it can lead).
pub fn can_preferred_replica_lead(ctx: &ControllerContext, tp: &TopicPartition) -> bool {
    let Some(&preferred) = ctx.partition_replicas(tp).first() else {
        return false;
    };
    ctx.is_replica_online_for(tp, preferred, false)
        && ctx
            .leadership(tp)
            .is_some_and(|l| l.isr.contains(&preferred))
}

/// K6.11: the partitions the auto-rebalance task sends to a preferred election, given
/// `leader.imbalance.per.broker.percentage`.
pub fn partitions_to_rebalance(ctx: &ControllerContext, percentage: u32) -> Vec<TopicPartition> {
    imbalance_by_broker(ctx)
        .into_values()
        .filter(|b| b.exceeds(percentage))
        .flat_map(|b| b.not_led)
        .filter(|tp| can_preferred_replica_lead(ctx, tp))
        .collect()
}

/// An admin preferred-replica election request (`/admin/preferred_replica_election` or the
/// ElectLeaders API), split as Kafka's `processReplicaLeaderElection` does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PreferredElectionSplit {
    /// Run the partition state machine to Online with the preferred strategy for these (a
    /// failed election there means the preferred replica is not live or not in the ISR).
    pub to_elect: Vec<TopicPartition>,
    /// Already led by their preferred replica (`ELECTION_NOT_NEEDED`).
    pub already_preferred: Vec<TopicPartition>,
    /// Unknown, or without leadership (`UNKNOWN_TOPIC_OR_PARTITION`).
    pub unknown: Vec<TopicPartition>,
    /// Of topics queued for deletion (refused).
    pub being_deleted: Vec<TopicPartition>,
}

/// Splits a preferred-election request over `partitions` (duplicates are dropped).
pub fn split_preferred_election(
    ctx: &ControllerContext,
    partitions: &[TopicPartition],
) -> PreferredElectionSplit {
    let mut split = PreferredElectionSplit::default();
    let mut seen = std::collections::BTreeSet::new();
    for tp in partitions {
        if !seen.insert(tp) {
            continue;
        }
        let (Some(lead), Some(&preferred)) =
            (ctx.leadership(tp), ctx.partition_replicas(tp).first())
        else {
            split.unknown.push(tp.clone());
            continue;
        };
        if ctx.is_topic_queued_for_deletion(&tp.topic) {
            split.being_deleted.push(tp.clone());
        } else if lead.leader == preferred {
            split.already_preferred.push(tp.clone());
        } else {
            split.to_elect.push(tp.clone());
        }
    }
    split
}
