//! [`CoordinationIsrWriter`]: the [`IsrWriter`] of ZooKeeper-mode Kafka on a
//! [`Coordination`](kafka_controller::coordination::Coordination) store — a compare-and-set of
//! `/brokers/topics/<t>/partitions/<p>/state` at the partition epoch (the znode version), then
//! an ISR change notification for the controller (KAFKA-NOTES §13.1).

use async_trait::async_trait;
use kafka_controller::zk_data::{paths, KafkaZkClient, PartitionStateZNode};
use kafka_replication::isr::{IsrProposal, IsrResult, IsrWriter, LeaderAndIsr};

/// Writes ISR changes to the partition-state znodes.
pub struct CoordinationIsrWriter {
    zk: KafkaZkClient,
}

impl CoordinationIsrWriter {
    /// A writer on `zk`.
    pub fn new(zk: KafkaZkClient) -> Self {
        CoordinationIsrWriter { zk }
    }

    /// The state the store holds now, as a conflict answer (`None` when unreadable: the
    /// partition drops its proposal and proposes again on its next ISR check).
    async fn current(&self, path: &str) -> IsrResult {
        let current = match self.zk.coordination().get_data(path, false).await {
            Ok((data, stat)) => PartitionStateZNode::from_json(&data)
                .ok()
                .map(|s| LeaderAndIsr {
                    leader: s.leader,
                    leader_epoch: s.leader_epoch,
                    isr: s.isr,
                    partition_epoch: stat.version,
                }),
            Err(_) => None,
        };
        IsrResult::Conflict { current }
    }
}

#[async_trait]
impl IsrWriter for CoordinationIsrWriter {
    /// Reads the state znode; if its version is still the proposal's partition epoch, writes
    /// the new ISR conditionally on that version (keeping leader, epochs and unknown fields),
    /// then records an ISR change notification. A version that moved answers a conflict with
    /// the stored state — or success if the stored state already is the proposal.
    async fn propose(&mut self, proposal: &IsrProposal) -> IsrResult {
        let tp = &proposal.topic_partition;
        let path = paths::partition_state(&tp.topic, tp.partition);
        let p = &proposal.proposed;
        let (data, stat) = match self.zk.coordination().get_data(&path, false).await {
            Ok(read) => read,
            Err(e) => {
                tracing::warn!(topic = %tp.topic, partition = tp.partition, error = %e, "ISR state unreadable");
                return IsrResult::Conflict { current: None };
            }
        };
        let Ok(mut state) = PartitionStateZNode::from_json(&data) else {
            return IsrResult::Conflict { current: None };
        };
        if stat.version != p.partition_epoch {
            if state.leader == p.leader
                && state.leader_epoch == p.leader_epoch
                && state.isr == p.isr
            {
                return IsrResult::Committed {
                    partition_epoch: stat.version,
                };
            }
            return IsrResult::Conflict {
                current: Some(LeaderAndIsr {
                    leader: state.leader,
                    leader_epoch: state.leader_epoch,
                    isr: state.isr,
                    partition_epoch: stat.version,
                }),
            };
        }
        state.isr.clone_from(&p.isr);
        let Ok(json) = state.to_json() else {
            return IsrResult::Conflict { current: None };
        };
        match self
            .zk
            .coordination()
            .set_data(&path, &json, p.partition_epoch)
            .await
        {
            Ok(stat) => {
                let entry = kafka_controller::zk_data::TopicPartitionEntry {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                    extra: Default::default(),
                };
                if let Err(e) = self.zk.create_isr_change_notification(vec![entry]).await {
                    // The ISR is written; the controller learns it on its next read.
                    tracing::warn!(topic = %tp.topic, partition = tp.partition, error = %e, "ISR change notification failed");
                }
                IsrResult::Committed {
                    partition_epoch: stat.version,
                }
            }
            Err(_) => self.current(&path).await,
        }
    }
}
