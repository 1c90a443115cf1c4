//! [`ReplicaOffsetsLog`]: the [`OffsetsLog`] of a broker, over its replica manager.
//!
//! Reads go straight to the partition's log (from its log start to its log end, as Kafka's
//! `GroupMetadataManager.doLoadGroupsAndOffsets` reads). Appends are produces with
//! `acks=-1` through the replica manager, checked first — under the same lock — against the
//! leader epoch the coordinator loaded the partition at: a coordinator whose partition moved
//! on cannot write.

use async_trait::async_trait;
use bytes::Bytes;
use kafka_group_coordinator::{AppendRecord, LogRecord};
use kafka_replication::isr::{IsrWriter, TopicPartition};
use kafka_replication::log::LogStorage;
use kafka_replication::replica_driver::{DelayedAnswer, ReplicaDriver};
use kafka_replication::replica_fetcher::LeaderLink;
use kafka_replication::replica_manager::ProduceOutcome;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_wire::messages::{ProduceRequest, ProduceResponse};
use kafka_wire::records::{RecordBatchBuilder, RecordBatches};

use super::service::OffsetsLog;
use super::OFFSETS_TOPIC;

/// How many bytes one read of a partition's log takes while loading it.
const LOAD_READ_BYTES: usize = 5 << 20;

/// The offsets partitions of a broker's [`ReplicaDriver`].
pub struct ReplicaOffsetsLog<L, K, W> {
    driver: ReplicaDriver<L, K, W>,
    commit_timeout_ms: i32,
}

impl<L, K, W> ReplicaOffsetsLog<L, K, W> {
    /// Over `driver`; an append not committed within `commit_timeout_ms`
    /// (`offsets.commit.timeout.ms`) fails with `REQUEST_TIMED_OUT`.
    pub fn new(driver: ReplicaDriver<L, K, W>, commit_timeout_ms: i32) -> Self {
        ReplicaOffsetsLog {
            driver,
            commit_timeout_ms,
        }
    }
}

fn tp(partition: i32) -> TopicPartition {
    TopicPartition::new(OFFSETS_TOPIC.to_owned(), partition)
}

fn first_partition_result(response: &ProduceResponse) -> Result<i64, ErrorCode> {
    let p = response
        .responses
        .first()
        .and_then(|t| t.partition_responses.first())
        .ok_or(ErrorCode::UnknownServerError)?;
    match ErrorCode::from_code(p.error_code) {
        ErrorCode::None => Ok(p.base_offset),
        e => Err(e),
    }
}

#[async_trait]
impl<L, K, W> OffsetsLog for ReplicaOffsetsLog<L, K, W>
where
    L: LogStorage + Send + 'static,
    K: LeaderLink + 'static,
    W: IsrWriter + 'static,
{
    fn leader_epoch(&self, partition: i32) -> Result<i32, ErrorCode> {
        self.driver
            .with_manager(|m, _| match m.partition(&tp(partition)) {
                Some(p) if p.is_leader() => Ok(p.leader_epoch()),
                Some(_) => Err(ErrorCode::NotLeaderOrFollower),
                None => Err(ErrorCode::UnknownTopicOrPartition),
            })
    }

    fn read_all(&self, partition: i32, leader_epoch: i32) -> Result<Vec<LogRecord>, ErrorCode> {
        let mut out = Vec::new();
        let mut offset = None;
        loop {
            // One chunk per lock, so that produce and fetch go on while a big log loads.
            let chunk = self.driver.with_manager(|m, _| {
                let p = m
                    .partition(&tp(partition))
                    .ok_or(ErrorCode::NotLeaderOrFollower)?;
                if !p.is_leader() || p.leader_epoch() != leader_epoch {
                    return Err(ErrorCode::NotLeaderOrFollower);
                }
                let from = offset.unwrap_or_else(|| p.log_start_offset());
                let end = p.log_end_offset();
                if from >= end {
                    return Ok(None);
                }
                p.log()
                    .read(from, LOAD_READ_BYTES, end, true)
                    .map(Some)
                    .map_err(|_| ErrorCode::KafkaStorageError)
            })?;
            let Some(bytes) = chunk else {
                return Ok(out);
            };
            if bytes.is_empty() {
                return Ok(out);
            }
            let mut next = offset.unwrap_or(0);
            for batch in RecordBatches::new(bytes) {
                let batch = batch.map_err(|_| ErrorCode::CorruptMessage)?;
                next = next.max(batch.next_offset());
                if batch.is_control() {
                    continue;
                }
                for record in batch.records().map_err(|_| ErrorCode::CorruptMessage)? {
                    let record = record.map_err(|_| ErrorCode::CorruptMessage)?;
                    let Some(key) = record.key else {
                        continue;
                    };
                    out.push(LogRecord {
                        offset: record.offset,
                        key,
                        value: record.value,
                    });
                }
            }
            if Some(next) == offset {
                return Ok(out);
            }
            offset = Some(next);
        }
    }

    async fn append(
        &self,
        partition: i32,
        leader_epoch: i32,
        records: Vec<AppendRecord>,
    ) -> Result<i64, ErrorCode> {
        let now = self.driver.now_ms() as i64;
        let mut builder = RecordBatchBuilder::new(0);
        for r in &records {
            builder
                .append(now, Some(&r.key), r.value.as_deref(), &[])
                .map_err(|_| ErrorCode::RecordListTooLarge)?;
        }
        let batch: Bytes = builder.build().map_err(|_| ErrorCode::RecordListTooLarge)?;
        let request = ProduceRequest {
            acks: -1,
            timeout_ms: self.commit_timeout_ms,
            topic_data: vec![TopicProduceData {
                name: OFFSETS_TOPIC.into(),
                partition_data: vec![PartitionProduceData {
                    index: partition,
                    records: Some(batch),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let outcome = self.driver.with_core(|core, now| {
            match core.manager.partition(&tp(partition)) {
                Some(p) if p.is_leader() && p.leader_epoch() == leader_epoch => {}
                Some(p) if p.is_leader() => return Err(ErrorCode::FencedLeaderEpoch),
                _ => return Err(ErrorCode::NotLeaderOrFollower),
            }
            let outcome = core.manager.produce(now, &request);
            Ok(match outcome {
                ProduceOutcome::Delayed { request_id } => {
                    Err(ReplicaDriver::<L, K, W>::register(core, request_id))
                }
                ProduceOutcome::Respond(r) => Ok(r),
                ProduceOutcome::NoResponse => Ok(ProduceResponse::default()),
            })
        })?;
        match outcome {
            Ok(response) => first_partition_result(&response),
            Err(waiter) => match waiter.await {
                Ok(DelayedAnswer::Produce(response)) => first_partition_result(&response),
                _ => Err(ErrorCode::RequestTimedOut),
            },
        }
    }
}
