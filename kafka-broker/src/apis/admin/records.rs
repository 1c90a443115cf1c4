//! DeleteRecords (KIP-107) on a partition leader: the log start offset moves forward
//! (`Partition.deleteRecordsOnLeader`; followers follow it through their fetches) and the
//! answer waits until the partition's low watermark — the smallest log start offset of the
//! leader and its live followers, as each follower last reported it — reaches the requested
//! offset (`DelayedDeleteRecords`), or the timeout passes (REQUEST_TIMED_OUT, low watermark
//! -1).

use std::collections::BTreeMap;

use kafka_replication::isr::{IsrWriter, TopicPartition};
use kafka_replication::log::LogStorage;
use kafka_replication::replica_fetcher::LeaderLink;
use kafka_replication::replica_manager::ReplicaManager;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_wire::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use super::KafkaApis;

/// The low watermark of `tp` on this leader, or the error that ends its wait.
fn low_watermark<L: LogStorage>(
    m: &ReplicaManager<L>,
    tp: &TopicPartition,
) -> Result<i64, ErrorCode> {
    let cache = m.metadata();
    match m.partition(tp) {
        None => Err(ErrorCode::UnknownTopicOrPartition),
        Some(p) => p
            .low_watermark_if_leader(|b| cache.is_alive(b))
            .ok_or(ErrorCode::NotLeaderOrFollower),
    }
}

impl<L, K, W> KafkaApis<L, K, W>
where
    L: LogStorage + Send + 'static,
    K: LeaderLink + 'static,
    W: IsrWriter + 'static,
{
    /// DeleteRecords: for each partition, the offset before which records go (-1: the high
    /// watermark). UNKNOWN_TOPIC_OR_PARTITION for a partition this broker does not have,
    /// NOT_LEADER_OR_FOLLOWER on a follower, OFFSET_OUT_OF_RANGE beyond the high watermark;
    /// otherwise the low watermark once every live replica has moved its log start offset
    /// there.
    pub async fn delete_records(&self, request: &DeleteRecordsRequest) -> DeleteRecordsResponse {
        // Per partition: Ok(requested offset) while waiting, or the final error.
        let applied: BTreeMap<TopicPartition, Result<i64, ErrorCode>> =
            self.driver.with_manager(|m, _| {
                let mut applied = BTreeMap::new();
                for t in &request.topics {
                    for p in &t.partitions {
                        let tp = TopicPartition::new(t.name.to_string(), p.partition_index);
                        let outcome = match m.partition_mut(&tp) {
                            None => Err(ErrorCode::UnknownTopicOrPartition),
                            Some(part) => part
                                .delete_records_on_leader(p.offset)
                                .map_err(|e| e.error_code()),
                        };
                        if let Ok(offset) = outcome {
                            tracing::info!(topic = %tp.topic, partition = tp.partition, offset,
                                "records deleted below offset");
                        }
                        applied.insert(tp, outcome);
                    }
                }
                applied
            });
        let waiting: Vec<(TopicPartition, i64)> = applied
            .iter()
            .filter_map(|(tp, r)| r.as_ref().ok().map(|o| (tp.clone(), *o)))
            .collect();
        if !waiting.is_empty() && request.timeout_ms > 0 {
            let deadline = tokio::time::Instant::now()
                + std::time::Duration::from_millis(request.timeout_ms.max(0) as u64);
            self.driver
                .wait_until(deadline, |m| {
                    waiting
                        .iter()
                        .all(|(tp, offset)| match low_watermark(m, tp) {
                            Ok(low) => low >= *offset,
                            Err(_) => true,
                        })
                })
                .await;
        }
        let final_state: BTreeMap<TopicPartition, (i64, ErrorCode)> =
            self.driver.with_manager(|m, _| {
                applied
                    .into_iter()
                    .map(|(tp, r)| {
                        let state = match r {
                            Err(code) => (-1, code),
                            Ok(offset) => match low_watermark(m, &tp) {
                                Err(code) => (-1, code),
                                Ok(low) if low >= offset => (low, ErrorCode::None),
                                Ok(_) => (-1, ErrorCode::RequestTimedOut),
                            },
                        };
                        (tp, state)
                    })
                    .collect()
            });
        let mut by_topic: BTreeMap<String, Vec<DeleteRecordsPartitionResult>> = BTreeMap::new();
        for (tp, (low, code)) in final_state {
            by_topic
                .entry(tp.topic.clone())
                .or_default()
                .push(DeleteRecordsPartitionResult {
                    partition_index: tp.partition,
                    low_watermark: low,
                    error_code: code.code(),
                    ..Default::default()
                });
        }
        DeleteRecordsResponse {
            topics: by_topic
                .into_iter()
                .map(|(name, partitions)| DeleteRecordsTopicResult {
                    name: name.as_str().into(),
                    partitions,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }
}
