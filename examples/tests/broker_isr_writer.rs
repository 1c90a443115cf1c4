//! The coordination-store `IsrWriter` on an in-memory store: a proposal at the stored
//! partition epoch is written with a conditional set and announced by an ISR change
//! notification; a proposal from an older partition epoch gets the stored state back.

use std::sync::Arc;

use ha_examples::broker::CoordinationIsrWriter;
use kafka_controller::coordination::{Coordination, CreateMode, MemoryTree};
use kafka_controller::zk_data::{paths, KafkaZkClient, PartitionStateZNode};
use kafka_replication::isr::{IsrProposal, IsrResult, IsrWriter, LeaderAndIsr, TopicPartition};

async fn store_with_partition_state() -> KafkaZkClient {
    let coordination: Arc<dyn Coordination> = Arc::new(MemoryTree::new().connect());
    let zk = KafkaZkClient::new(coordination.clone());
    zk.create_persistent_paths().await.expect("paths");
    for path in [
        paths::topic("orders"),
        paths::topic_partitions("orders"),
        paths::partition("orders", 0),
    ] {
        coordination
            .create(&path, b"", CreateMode::Persistent)
            .await
            .expect("parent created");
    }
    let state = PartitionStateZNode::new(1, 4, 2, vec![1, 2, 3]);
    coordination
        .create(
            &paths::partition_state("orders", 0),
            &state.to_json().expect("json"),
            CreateMode::Persistent,
        )
        .await
        .expect("state created");
    zk
}

fn proposal(isr: Vec<i32>, partition_epoch: i32) -> IsrProposal {
    IsrProposal {
        topic_partition: TopicPartition::new("orders", 0),
        proposed: LeaderAndIsr {
            leader: 1,
            leader_epoch: 4,
            isr,
            partition_epoch,
        },
    }
}

#[tokio::test]
async fn isr_shrink_is_a_conditional_write_of_the_state_znode_then_a_change_notification() {
    let zk = store_with_partition_state().await;
    let mut writer = CoordinationIsrWriter::new(zk.clone());

    let result = writer.propose(&proposal(vec![1, 2], 0)).await;
    assert_eq!(result, IsrResult::Committed { partition_epoch: 1 });
    let (data, stat) = zk
        .coordination()
        .get_data(&paths::partition_state("orders", 0), false)
        .await
        .expect("state");
    let state = PartitionStateZNode::from_json(&data).expect("decodes");
    assert_eq!(
        (
            state.isr,
            state.leader_epoch,
            state.controller_epoch,
            stat.version
        ),
        (vec![1, 2], 4, 2, 1)
    );
    assert_eq!(
        zk.isr_change_notifications(false)
            .await
            .expect("listed")
            .len(),
        1
    );

    // The same proposal again (its answer was lost): the store already holds it.
    let again = writer.propose(&proposal(vec![1, 2], 0)).await;
    assert_eq!(again, IsrResult::Committed { partition_epoch: 1 });
}

#[tokio::test]
async fn a_proposal_at_a_stale_partition_epoch_gets_the_stored_state_back() {
    let zk = store_with_partition_state().await;
    let mut writer = CoordinationIsrWriter::new(zk.clone());
    writer.propose(&proposal(vec![1, 2], 0)).await;

    let result = writer.propose(&proposal(vec![1], 0)).await;
    assert_eq!(
        result,
        IsrResult::Conflict {
            current: Some(LeaderAndIsr {
                leader: 1,
                leader_epoch: 4,
                isr: vec![1, 2],
                partition_epoch: 1,
            })
        }
    );
}

#[tokio::test]
async fn a_missing_partition_state_is_a_conflict_without_state() {
    let coordination: Arc<dyn Coordination> = Arc::new(MemoryTree::new().connect());
    let mut writer = CoordinationIsrWriter::new(KafkaZkClient::new(coordination));
    let result = writer.propose(&proposal(vec![1], 0)).await;
    assert_eq!(result, IsrResult::Conflict { current: None });
}
