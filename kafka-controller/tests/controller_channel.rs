//! The controller's broker channel manager (Kafka's `ControllerChannelManager`): one FIFO queue and one
//! in-flight request per broker, the same item retried until it succeeds, nothing after it
//! overtaking it, responses delivered back in order.

use std::sync::Arc;
use std::time::Duration;

use kafka_controller::broker_channel::{ChannelConfig, ChannelManager, MemoryBrokerChannel};
use kafka_controller::context::{BrokerInfo, ControllerContext, TopicPartition};
use kafka_controller::context::{PartitionLeadership, ReplicaAssignment};
use kafka_controller::request_batch::ControllerBrokerRequestBatch;
use kafka_wire::RequestBody;
use tokio::sync::mpsc;

fn context() -> ControllerContext {
    let mut ctx = ControllerContext::new(1, 3, 3);
    for b in [1, 2] {
        ctx.add_live_broker(BrokerInfo::new(b, 10).with_plaintext("localhost", 9092));
    }
    let tp = TopicPartition::new("t", 0);
    ctx.set_partition_assignment(&tp, ReplicaAssignment::new(vec![1, 2]));
    ctx.put_leadership(tp, PartitionLeadership::new(1, 0, vec![1, 2], 3, 0));
    ctx
}

#[tokio::test]
async fn k6_10_update_metadata_stays_ahead_of_leader_and_isr_through_failures() {
    let ctx = context();
    let channel = MemoryBrokerChannel::new();
    channel.fail_next(2, 5);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let config = ChannelConfig::new().with_retry_backoff(Duration::from_millis(1));
    let mut manager = ChannelManager::new(Arc::new(channel.clone()), config, "PLAINTEXT", tx);
    for b in ctx.live_or_shutting_down_brokers() {
        manager.add_broker(b.clone());
    }
    let mut batch = ControllerBrokerRequestBatch::new();
    batch.add_update_metadata(&ctx, &[1, 2], &[]);
    manager.enqueue(batch.send_requests(&ctx));
    batch.add_leader_and_isr(&ctx, &[1, 2], &TopicPartition::new("t", 0), false);
    manager.enqueue(batch.send_requests(&ctx));
    // Every request reaches its broker and is answered.
    let mut answered = 0;
    while answered < 6 {
        tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .expect("responses")
            .expect("open");
        answered += 1;
    }
    let kinds: Vec<&'static str> = channel
        .sent_to(2)
        .iter()
        .map(|r| match r.body {
            RequestBody::UpdateMetadata(_) => "UpdateMetadata",
            RequestBody::LeaderAndIsr(_) => "LeaderAndIsr",
            _ => "other",
        })
        .collect();
    // The failed first item was retried, never overtaken.
    assert_eq!(
        kinds,
        vec!["UpdateMetadata", "LeaderAndIsr", "UpdateMetadata"]
    );
    assert!(channel.attempts() >= 6 + 5);
}

#[tokio::test]
async fn removed_broker_queue_stops_retrying() {
    let ctx = context();
    let channel = MemoryBrokerChannel::new();
    channel.set_down(2, true);
    let (tx, _rx) = mpsc::unbounded_channel();
    let config = ChannelConfig::new().with_retry_backoff(Duration::from_millis(1));
    let mut manager = ChannelManager::new(Arc::new(channel.clone()), config, "PLAINTEXT", tx);
    for b in ctx.live_or_shutting_down_brokers() {
        manager.add_broker(b.clone());
    }
    let mut batch = ControllerBrokerRequestBatch::new();
    batch.add_update_metadata(&ctx, &[2], &[]);
    manager.enqueue(batch.send_requests(&ctx));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while channel.attempts() < 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the down broker was not retried"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    manager.remove_broker(2);
    // Deliberate windows, the thing tested: one for an attempt already in flight to end, then
    // one in which a retry would show.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let after = channel.attempts();
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(
        channel.attempts(),
        after,
        "no attempts once the broker is removed"
    );
    assert!(channel.sent_to(2).is_empty());
}
