//! ISR change propagation (Kafka's `ReplicaManager.maybePropagateIsrChanges`): the batching rule as a pure function under a fake
//! clock, and the periodic task writing `/isr_change_notification/isr_change_<seq>` on
//! `MemoryCoordination` under tokio's paused clock.

use std::sync::Arc;
use std::time::Duration;

use ha_coordination::{Coordination, MemoryCoordination};
use kafka_broker::glue::{
    propagate_once, should_propagate, IsrChangePropagator, IsrChangeQueue, IsrPropagationConfig,
    PendingIsrChanges,
};
use kafka_controller::zk_data::{KafkaZkClient, TopicPartitionEntry};
use kafka_replication::isr::TopicPartition;
use tokio::time::Instant;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn tp(p: i32) -> TopicPartition {
    TopicPartition::new("t", p)
}

#[test]
fn isr_propagation_rule_needs_pending_changes_and_linger_or_max_delay() {
    let c = IsrPropagationConfig::default();
    assert_eq!(
        (c.check_interval, c.linger, c.max_delay),
        (ms(2_500), ms(5_000), ms(60_000))
    );
    let t0 = Instant::now();
    // Nothing pending: never.
    assert!(!should_propagate(&c, false, t0, t0, t0 + ms(120_000)));
    // Quiet for exactly 5 s is not enough (strictly longer), 5.001 s is.
    assert!(!should_propagate(&c, true, t0, t0, t0 + ms(5_000)));
    assert!(should_propagate(&c, true, t0, t0, t0 + ms(5_001)));
    // A change 1 s ago, but the last propagation 60.001 s ago: go.
    let now = t0 + ms(60_001);
    assert!(should_propagate(&c, true, now - ms(1_000), t0, now));
    assert!(!should_propagate(
        &c,
        true,
        now - ms(1_000),
        t0 + ms(1),
        now
    ));
}

#[test]
fn isr_changes_are_batched_until_they_settle_for_the_linger_time() {
    let c = IsrPropagationConfig::default();
    let t0 = Instant::now();
    let mut p = PendingIsrChanges::new(t0);
    p.record(tp(0), t0);
    p.record(tp(1), t0 + ms(3_000));
    p.record(tp(0), t0 + ms(4_000));
    // Checks every 2.5 s: the last change (at 4 s) must be 5 s old first.
    for check in [2_500, 5_000, 7_500] {
        assert_eq!(p.take_due(&c, t0 + ms(check)), None, "check at {check} ms");
    }
    assert_eq!(p.take_due(&c, t0 + ms(10_000)), Some(vec![tp(0), tp(1)]));
    assert!(p.is_empty());
    assert_eq!(p.take_due(&c, t0 + ms(20_000)), None);
}

#[test]
fn isr_changes_that_never_settle_go_out_after_the_max_delay() {
    let c = IsrPropagationConfig::default();
    let t0 = Instant::now();
    let mut p = PendingIsrChanges::new(t0);
    let mut batches = Vec::new();
    // A change every second for 130 s, a check every 2.5 s.
    for tick in 1..=52u64 {
        let now = t0 + ms(tick * 2_500);
        p.record(tp((tick % 3) as i32), now - ms(500));
        if let Some(batch) = p.take_due(&c, now) {
            batches.push((tick * 2_500, batch.len()));
        }
    }
    // Only after more than 60 s since the start, then 60 s after that.
    assert_eq!(batches, vec![(62_500, 3), (125_000, 3)]);
}

#[test]
fn isr_change_batch_whose_write_failed_goes_out_at_the_next_check() {
    let c = IsrPropagationConfig::default();
    let t0 = Instant::now();
    let mut p = PendingIsrChanges::new(t0);
    p.record(tp(0), t0);
    let batch = p.take_due(&c, t0 + ms(7_500)).unwrap_or_default();
    assert_eq!(batch, vec![tp(0)]);
    p.restore(batch);
    p.record(tp(1), t0 + ms(8_000));
    assert_eq!(p.take_due(&c, t0 + ms(10_000)), None);
    assert_eq!(p.take_due(&c, t0 + ms(15_000)), Some(vec![tp(0), tp(1)]));
}

#[tokio::test(start_paused = true)]
async fn isr_change_propagator_writes_one_sequential_notification_per_batch() -> TestResult {
    let coord: Arc<dyn Coordination> = Arc::new(MemoryCoordination::new());
    let zk = KafkaZkClient::new(coord.clone());
    zk.create_persistent_paths().await?;
    let queue = IsrChangeQueue::new(Instant::now());
    let task = IsrChangePropagator::spawn(
        coord.clone(),
        queue.clone(),
        IsrPropagationConfig::default(),
    );
    queue.record(tp(0), Instant::now());
    queue.record(TopicPartition::new("u", 2), Instant::now());
    tokio::time::sleep(ms(4_000)).await;
    assert!(zk.isr_change_notifications(false).await?.is_empty());
    tokio::time::sleep(ms(4_000)).await;
    let names = zk.isr_change_notifications(false).await?;
    assert_eq!(names, vec!["isr_change_0000000000".to_string()]);
    let read = zk.read_isr_change_notifications(&names).await;
    let Some(Ok(Some(n))) = read.into_iter().next() else {
        panic!("notification unreadable");
    };
    assert_eq!(
        n.partitions,
        vec![
            TopicPartitionEntry::new("t", 0),
            TopicPartitionEntry::new("u", 2)
        ]
    );
    // A later change makes a second node.
    queue.record(tp(1), Instant::now());
    tokio::time::sleep(ms(10_000)).await;
    assert_eq!(zk.isr_change_notifications(false).await?.len(), 2);
    task.stop();
    Ok(())
}

#[tokio::test]
async fn isr_change_notification_write_failure_keeps_the_batch() -> TestResult {
    // No /isr_change_notification parent: the create fails with NoNode.
    let coord: Arc<dyn Coordination> = Arc::new(MemoryCoordination::new());
    let zk = KafkaZkClient::new(coord);
    let t0 = Instant::now();
    let queue = IsrChangeQueue::new(t0);
    queue.record(tp(0), t0);
    let c = IsrPropagationConfig::default();
    assert_eq!(propagate_once(&zk, &queue, &c, t0 + ms(6_000)).await, None);
    assert_eq!(queue.pending(), vec![tp(0)]);
    zk.create_persistent_paths().await?;
    let path = propagate_once(&zk, &queue, &c, t0 + ms(12_000)).await;
    assert_eq!(
        path.as_deref(),
        Some("/isr_change_notification/isr_change_0000000000")
    );
    assert!(queue.pending().is_empty());
    Ok(())
}
