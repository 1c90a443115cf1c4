//! [`MetadataCache`]: what a broker knows of the cluster from UpdateMetadata (K5.1): the live
//! brokers with their endpoints and every partition's leader, epoch, ISR and replicas.

use std::collections::{BTreeMap, HashMap};

use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::update_metadata_request::{
    UpdateMetadataBroker, UpdateMetadataPartitionState,
};
use kafka_wire::messages::{UpdateMetadataRequest, UpdateMetadataResponse};
use kafka_wire::Uuid;

use crate::isr::{BrokerId, TopicPartition};

/// Leader id the controller sends for a partition of a topic being deleted.
pub const LEADER_DURING_DELETE: BrokerId = -2;

/// A broker's view of the cluster's metadata.
#[derive(Debug, Clone, Default)]
pub struct MetadataCache {
    controller_epoch: i32,
    controller_id: Option<BrokerId>,
    brokers: BTreeMap<BrokerId, UpdateMetadataBroker>,
    partitions: HashMap<TopicPartition, UpdateMetadataPartitionState>,
    topic_ids: HashMap<String, Uuid>,
}

impl MetadataCache {
    /// An empty cache.
    pub fn new() -> Self {
        MetadataCache {
            controller_epoch: -1,
            ..Self::default()
        }
    }

    /// K5.1: applies an UpdateMetadata request — unless it comes from a controller older than
    /// one already seen (STALE_CONTROLLER_EPOCH). The live broker list is replaced; partition
    /// states are upserted, and removed when their leader is [`LEADER_DURING_DELETE`].
    pub fn update(&mut self, request: &UpdateMetadataRequest) -> UpdateMetadataResponse {
        if request.controller_epoch < self.controller_epoch {
            return UpdateMetadataResponse {
                error_code: ErrorCode::StaleControllerEpoch.code(),
                ..Default::default()
            };
        }
        self.controller_epoch = request.controller_epoch;
        self.controller_id = Some(request.controller_id);
        self.brokers = request
            .live_brokers
            .iter()
            .map(|b| (b.id, b.clone()))
            .collect();
        let states = request
            .ungrouped_partition_states
            .iter()
            .map(|s| (s.topic_name.to_string(), s))
            .chain(request.topic_states.iter().flat_map(|t| {
                if t.topic_id != Uuid::default() {
                    self.topic_ids.insert(t.topic_name.to_string(), t.topic_id);
                }
                t.partition_states
                    .iter()
                    .map(move |s| (t.topic_name.to_string(), s))
            }))
            .collect::<Vec<_>>();
        for (topic, s) in states {
            let tp = TopicPartition::new(topic, s.partition_index);
            if s.leader == LEADER_DURING_DELETE {
                self.partitions.remove(&tp);
            } else {
                self.partitions.insert(tp, s.clone());
            }
        }
        UpdateMetadataResponse::default()
    }

    /// The controller epoch of the last applied request.
    pub fn controller_epoch(&self) -> i32 {
        self.controller_epoch
    }

    /// The controller that sent the last applied request.
    pub fn controller_id(&self) -> Option<BrokerId> {
        self.controller_id
    }

    /// The live brokers.
    pub fn live_brokers(&self) -> impl Iterator<Item = &UpdateMetadataBroker> {
        self.brokers.values()
    }

    /// Whether `broker` is live.
    pub fn is_alive(&self, broker: BrokerId) -> bool {
        self.brokers.contains_key(&broker)
    }

    /// The state of `tp`.
    pub fn partition(&self, tp: &TopicPartition) -> Option<&UpdateMetadataPartitionState> {
        self.partitions.get(tp)
    }

    /// The leader of `tp`, if it has a live one.
    pub fn leader(&self, tp: &TopicPartition) -> Option<BrokerId> {
        self.partitions
            .get(tp)
            .map(|s| s.leader)
            .filter(|l| *l >= 0 && self.is_alive(*l))
    }

    /// The id of `topic`, if the controller sent one.
    pub fn topic_id(&self, topic: &str) -> Option<Uuid> {
        self.topic_ids.get(topic).copied()
    }

    /// Every partition state known, in no particular order.
    pub fn partitions(
        &self,
    ) -> impl Iterator<Item = (&TopicPartition, &UpdateMetadataPartitionState)> {
        self.partitions.iter()
    }

    /// Number of partitions known.
    pub fn partition_count(&self) -> usize {
        self.partitions.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_wire::messages::update_metadata_request::UpdateMetadataTopicState;

    fn request(
        controller_epoch: i32,
        leader: BrokerId,
        live: &[BrokerId],
    ) -> UpdateMetadataRequest {
        UpdateMetadataRequest {
            controller_id: 9,
            controller_epoch,
            topic_states: vec![UpdateMetadataTopicState {
                topic_name: "t".into(),
                topic_id: Uuid([7; 16]),
                partition_states: vec![UpdateMetadataPartitionState {
                    topic_name: "t".into(),
                    partition_index: 0,
                    controller_epoch,
                    leader,
                    leader_epoch: 3,
                    isr: vec![1, 2].into(),
                    replicas: vec![1, 2].into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            live_brokers: live
                .iter()
                .map(|id| UpdateMetadataBroker {
                    id: *id,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn k5_1_update_metadata_fills_the_cache_and_stale_controllers_are_refused() {
        let mut c = MetadataCache::new();
        assert_eq!(c.update(&request(2, 1, &[1, 2])).error_code, 0);
        let tp = TopicPartition::new("t", 0);
        assert_eq!(c.leader(&tp), Some(1));
        assert_eq!(c.topic_id("t"), Some(Uuid([7; 16])));
        assert!(c.is_alive(2));
        let stale = c.update(&request(1, 2, &[2]));
        assert_eq!(stale.error_code, ErrorCode::StaleControllerEpoch.code());
        assert_eq!(c.leader(&tp), Some(1), "nothing applied");
        c.update(&request(2, 1, &[2]));
        assert_eq!(c.leader(&tp), None, "the leader is not live");
        c.update(&request(3, LEADER_DURING_DELETE, &[1, 2]));
        assert_eq!(c.partition_count(), 0);
    }
}
