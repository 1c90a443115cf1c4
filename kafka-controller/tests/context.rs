//! The controller context: broker bookkeeping (KIP-380 bounced brokers, shutting-down
//! brokers) and the reassignment arithmetic of replica assignments.

mod common;

use common::*;
use std::sync::Arc;

use kafka_controller::context::{BrokerInfo, ReplicaAssignment, TopicPartition};

#[test]
fn kip_380_broker_change_detects_new_dead_and_bounced_brokers() {
    let mut ctx = context(&[1, 2, 3]);
    ctx.mark_shutting_down(3);
    let now = [
        BrokerInfo::new(2, 102),
        BrokerInfo::new(3, 900),
        BrokerInfo::new(4, 50),
    ];
    let change = ctx.broker_change(&now);
    assert_eq!(change.dead, vec![1]);
    assert_eq!(change.new, vec![BrokerInfo::new(4, 50)]);
    assert_eq!(change.bounced, vec![BrokerInfo::new(3, 900)]);
    ctx.apply_broker_change(&change);
    assert_eq!(
        ctx.live_broker_ids().iter().copied().collect::<Vec<_>>(),
        vec![2, 3, 4]
    );
    assert_eq!(ctx.broker_epoch(3), 900);
    assert_eq!(ctx.broker_epoch(1), -1, "unknown epoch for a dead broker");
    assert!(ctx.shutting_down_broker_ids().is_empty());
}

#[test]
fn k7_step_1_full_assignment_arithmetic() {
    let a = ReplicaAssignment::new(vec![1, 2, 3]).reassign_to(&[3, 4]);
    assert_eq!(a.replicas, vec![3, 4, 1, 2], "RS = TRS ++ (ORS - TRS)");
    assert_eq!(a.adding_replicas, vec![4]);
    assert_eq!(a.removing_replicas, vec![1, 2]);
    assert_eq!(a.origin_replicas(), vec![3, 1, 2]);
    assert_eq!(a.target_replicas(), vec![3, 4]);
    assert!(a.is_being_reassigned());
    // Replacing it keeps the original replicas; 4 is no longer added.
    let b = a.reassign_to(&[5]);
    assert_eq!(b.replicas, vec![5, 3, 1, 2]);
    assert_eq!(b.adding_replicas, vec![5]);
    assert_eq!(b.removing_replicas, vec![3, 1, 2]);
}

#[test]
fn shutting_down_brokers_are_live_or_shutting_down_but_not_live() {
    let mut ctx = context(&[1, 2]);
    ctx.mark_shutting_down(2);
    ctx.mark_shutting_down(7); // unknown brokers are ignored
    assert!(!ctx.is_broker_live(2));
    assert!(ctx.is_live_or_shutting_down(2));
    assert!(ctx.is_replica_online(2, true));
    assert!(!ctx.is_replica_online(2, false));
    assert!(!ctx.is_live_or_shutting_down(7));
    ctx.remove_live_broker(2);
    assert!(ctx.shutting_down_broker_ids().is_empty());
}

#[test]
fn topic_partitions_compare_by_name_then_index_whether_or_not_they_share_the_name() {
    let shared: Arc<str> = Arc::from("orders");
    let a0 = TopicPartition::new(shared.clone(), 0);
    let a1 = TopicPartition::new(shared, 1);
    let b0 = TopicPartition::new("orders", 0);
    let c0 = TopicPartition::new("audit", 5);
    assert_eq!(a0, b0);
    assert_eq!(a0.cmp(&b0), std::cmp::Ordering::Equal);
    assert!(a0 < a1 && b0 < a1);
    assert!(c0 < a0 && c0 < b0);
    let mut set = std::collections::HashSet::new();
    set.insert(a0);
    assert!(set.contains(&b0));
}

#[test]
fn controller_stats_count_offline_and_imbalanced_partitions_and_elections() {
    use kafka_controller::context::PartitionLeadership;
    let mut ctx = context(&[1, 2, 3]);
    for (p, leader) in [(0, 1), (1, 2), (2, 3)] {
        let tp = TopicPartition::new("t", p);
        ctx.set_partition_assignment(&tp, ReplicaAssignment::new(vec![1, 2, 3]));
        ctx.put_leadership(tp, PartitionLeadership::new(leader, 0, vec![1, 2, 3], 5, 0));
    }
    let s = ctx.stats();
    assert_eq!(
        (
            s.global_partition_count,
            s.global_topic_count,
            s.live_brokers
        ),
        (3, 1, 3)
    );
    assert_eq!(s.offline_partitions, 0);
    assert_eq!(
        s.preferred_replica_imbalance, 2,
        "partitions 1 and 2 are not led by broker 1"
    );
    ctx.remove_live_broker(3);
    assert_eq!(
        ctx.stats().offline_partitions,
        1,
        "partition 2's leader is gone"
    );
    ctx.record_leader_election(false);
    ctx.record_leader_election(true);
    let s = ctx.stats();
    assert_eq!((s.leader_elections, s.unclean_leader_elections), (2, 1));
}
