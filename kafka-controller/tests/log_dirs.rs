//! Failed log directories (Kafka's `replicasOnOfflineDirs`, `onReplicasBecomeOffline`,
//! `LogDirEventNotification`): a replica answered `KAFKA_STORAGE_ERROR` in a LeaderAndIsr
//! response goes offline (a new leader if it led, out of the ISR), and a log dir event
//! notification makes the controller ask the broker with LeaderAndIsr for all its replicas,
//! then delete the notification.

mod controller_harness;

use std::collections::BTreeMap;
use std::sync::Arc;

use controller_harness::{wait_for, Cluster};
use ha_coordination::Coordination;
use kafka_controller::admin;
use kafka_controller::context::{BrokerId, TopicPartition};
use kafka_controller::zk_data::{paths, KafkaZkClient};
use kafka_wire::error_code::ErrorCode;
use kafka_wire::RequestBody;

fn tp(t: &str, p: i32) -> TopicPartition {
    TopicPartition::new(t, p)
}

async fn create(c: &Cluster, topic: &str, assignment: &[(i32, &[BrokerId])]) {
    let a: BTreeMap<i32, Vec<BrokerId>> =
        assignment.iter().map(|(p, r)| (*p, r.to_vec())).collect();
    admin::create_topic_with_assignment(&c.admin, topic, &a)
        .await
        .unwrap();
    for (p, _) in assignment {
        let t = tp(topic, *p);
        wait_for("partition state", || async { c.state(&t).await.is_some() }).await;
    }
}

/// The partitions named in the LeaderAndIsr requests `broker` received.
fn leader_and_isr_partitions(c: &Cluster, broker: BrokerId) -> Vec<(String, i32)> {
    let mut out = Vec::new();
    for r in c.channel.sent_to(broker) {
        if let RequestBody::LeaderAndIsr(l) = &r.body {
            for t in &l.topic_states {
                for p in &t.partition_states {
                    out.push((t.topic_name.to_string(), p.partition_index));
                }
            }
            for p in &l.ungrouped_partition_states {
                out.push((p.topic_name.to_string(), p.partition_index));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[tokio::test]
async fn kafka_storage_error_moves_leadership_off_the_failed_log_dir_and_shrinks_the_isr() {
    let c = Cluster::start(&[1, 2, 3]).await;
    let controller = c.wait_controller().await;
    c.channel
        .answer_partition_error(2, "orders", 0, ErrorCode::KafkaStorageError);
    c.channel
        .answer_partition_error(2, "orders", 1, ErrorCode::KafkaStorageError);
    create(
        &c,
        "orders",
        &[(0, &[2, 3, 1]), (1, &[3, 1, 2]), (2, &[1, 3, 2])],
    )
    .await;
    // orders-0: broker 2 led it; the next live ISR replica leads and 2 leaves the ISR.
    wait_for("orders-0 led by 3 without 2", || async {
        c.leader_isr(&tp("orders", 0)).await == Some((3, vec![3, 1]))
    })
    .await;
    // orders-1: broker 2 followed; it leaves the ISR, the leader stays.
    wait_for("orders-1 without 2 in the ISR", || async {
        c.leader_isr(&tp("orders", 1)).await == Some((3, vec![3, 1]))
    })
    .await;
    // orders-2: broker 2's replica there is fine.
    assert_eq!(
        c.leader_isr(&tp("orders", 2)).await,
        Some((1, vec![1, 3, 2]))
    );
    let ctx = c.brokers[&controller]
        .handle
        .context()
        .await
        .expect("active");
    let offline = ctx.replicas_on_offline_dirs(2).expect("tracked");
    assert!(offline.contains(&tp("orders", 0)) && offline.contains(&tp("orders", 1)));
    assert!(!offline.contains(&tp("orders", 2)));
    assert!(!ctx.is_replica_online_for(&tp("orders", 0), 2, false));
    assert!(ctx.is_replica_online_for(&tp("orders", 2), 2, false));
}

#[tokio::test]
async fn log_dir_event_notification_asks_the_broker_with_leader_and_isr_then_is_deleted() {
    let c = Cluster::start(&[1, 2, 3]).await;
    create(&c, "t", &[(0, &[2, 3, 1]), (1, &[3, 1, 2])]).await;
    c.channel.clear();
    // Broker 2's log directory holding t-1 fails; it tells the controller through the store.
    c.channel
        .answer_partition_error(2, "t", 1, ErrorCode::KafkaStorageError);
    let broker2 = KafkaZkClient::new(Arc::new(c.brokers[&2].session.clone()));
    let path = broker2.create_log_dir_event_notification(2).await.unwrap();
    assert!(path.starts_with(paths::LOG_DIR_EVENT_PREFIX), "{path}");
    wait_for("LeaderAndIsr for all of broker 2's replicas", || async {
        leader_and_isr_partitions(&c, 2) == vec![("t".to_string(), 0), ("t".to_string(), 1)]
    })
    .await;
    wait_for("notification deleted", || async {
        c.admin
            .children(paths::LOG_DIR_EVENT_NOTIFICATION, false)
            .await
            .unwrap()
            .is_empty()
    })
    .await;
    // The answer named t-1: broker 2 leaves its ISR; t-0 keeps its leader 2.
    wait_for("t-1 without 2 in the ISR", || async {
        c.leader_isr(&tp("t", 1)).await == Some((3, vec![3, 1]))
    })
    .await;
    assert_eq!(c.leader_isr(&tp("t", 0)).await, Some((2, vec![2, 3, 1])));
}

#[tokio::test]
async fn failover_deletes_stale_log_dir_event_notifications() {
    let mut c = Cluster::start(&[1, 2]).await;
    let first = c.wait_controller().await;
    let other = if first == 1 { 2 } else { 1 };
    c.kill(first).await;
    // A notification written while there is no controller.
    KafkaZkClient::new(Arc::new(c.admin.clone()))
        .create_log_dir_event_notification(other)
        .await
        .unwrap();
    assert_eq!(c.wait_controller_other_than(first).await, other);
    wait_for("stale notification deleted", || async {
        c.admin
            .children(paths::LOG_DIR_EVENT_NOTIFICATION, false)
            .await
            .unwrap()
            .is_empty()
    })
    .await;
}
