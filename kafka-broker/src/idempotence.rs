//! The leader's idempotent-producer checks around an append (see
//! [`producer_state`](super::producer_state) for the rules): [`screen`] takes out of a
//! Produce request the partitions answered without an append (a retried batch, a fenced epoch,
//! a sequence gap), [`record_appends`] remembers the batches once appended, and [`merge`] puts
//! the early answers into the response. All of it runs under the replica manager's lock, so the
//! offsets read before and after an append are the append's own.

use kafka_replication::isr::TopicPartition;
use kafka_replication::log::LogStorage;
use kafka_replication::replica_manager::ReplicaManager;
use kafka_wire::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_wire::messages::{ProduceRequest, ProduceResponse};
use kafka_wire::records::RecordBatches;

use super::producer_state::{ProducerBatch, ProducerStateTable, Verdict, NO_PRODUCER_ID};

/// A partition answered without an append.
#[derive(Debug, Clone)]
pub(crate) struct EarlyAnswer {
    /// The topic name.
    pub topic: String,
    /// The answer.
    pub answer: PartitionProduceResponse,
    /// For a retried batch: the partition and the offset of its last record, which an acks=-1
    /// answer waits to see committed.
    pub committed_at: Option<(TopicPartition, i64)>,
}

/// A Produce request after the idempotence checks.
#[derive(Debug, Default)]
pub(crate) struct Screened {
    /// The request to append, when some partitions were taken out (`None`: all of it).
    pub rest: Option<ProduceRequest>,
    /// The partitions answered without an append.
    pub early: Vec<EarlyAnswer>,
    /// The partitions to record after the append: their batches and log end offset before it.
    pub accepted: Vec<(TopicPartition, Vec<ProducerBatch>, i64)>,
}

impl Screened {
    /// True when nothing is left to append.
    pub fn nothing_left(&self) -> bool {
        self.rest.as_ref().is_some_and(|r| r.topic_data.is_empty())
    }
}

/// The producer fields of every batch in `records`; `None` when there is no idempotent batch
/// or the data does not parse (the replica manager then answers as for any produce).
fn producer_batches(records: &bytes::Bytes) -> Option<Vec<ProducerBatch>> {
    let mut out = Vec::new();
    for batch in RecordBatches::new(records.clone()) {
        let batch = batch.ok()?;
        out.push(ProducerBatch {
            producer_id: batch.producer_id(),
            producer_epoch: batch.producer_epoch(),
            first_seq: batch.base_sequence(),
            last_seq: batch.last_sequence(),
            last_offset_delta: batch.last_offset_delta(),
        });
    }
    out.iter()
        .any(|b| b.producer_id != NO_PRODUCER_ID)
        .then_some(out)
}

/// Checks every partition this broker leads whose data carries a producer id.
pub(crate) fn screen<L: LogStorage>(
    manager: &ReplicaManager<L>,
    table: &ProducerStateTable,
    request: &ProduceRequest,
) -> Screened {
    let mut screened = Screened::default();
    let mut rest = request.clone();
    for t in rest.topic_data.iter_mut() {
        let topic = t.name.to_string();
        t.partition_data.retain(|p| {
            let tp = TopicPartition::new(topic.clone(), p.index);
            let Some(part) = manager.partition(&tp).filter(|part| part.is_leader()) else {
                return true;
            };
            let Some(batches) = p.records.as_ref().and_then(producer_batches) else {
                return true;
            };
            let answer = |error_code: i16, base_offset: i64| PartitionProduceResponse {
                index: p.index,
                error_code,
                base_offset,
                log_start_offset: part.log_start_offset(),
                ..Default::default()
            };
            match table.check(&tp, &batches) {
                Verdict::Append => {
                    screened
                        .accepted
                        .push((tp, batches, part.log_end_offset()));
                    true
                }
                Verdict::Duplicate(m) => {
                    tracing::debug!(topic = %tp.topic, partition = tp.partition, first_seq = m.first_seq, base_offset = m.first_offset, "retried batch answered from the producer state");
                    screened.early.push(EarlyAnswer {
                        topic: topic.clone(),
                        answer: answer(0, m.first_offset),
                        committed_at: Some((tp, m.last_offset)),
                    });
                    false
                }
                Verdict::Refuse(e) => {
                    tracing::debug!(topic = %tp.topic, partition = tp.partition, error = %e, "produce refused by the producer state");
                    screened.early.push(EarlyAnswer {
                        topic: topic.clone(),
                        answer: answer(e.error_code().code(), -1),
                        committed_at: None,
                    });
                    false
                }
            }
        });
    }
    if !screened.early.is_empty() {
        rest.topic_data.retain(|t| !t.partition_data.is_empty());
        screened.rest = Some(rest);
    }
    screened
}

/// Records the accepted batches of the partitions whose log grew by the append.
pub(crate) fn record_appends<L: LogStorage>(
    manager: &ReplicaManager<L>,
    table: &mut ProducerStateTable,
    accepted: Vec<(TopicPartition, Vec<ProducerBatch>, i64)>,
) {
    for (tp, batches, before) in accepted {
        let appended = manager
            .partition(&tp)
            .is_some_and(|p| p.is_leader() && p.log_end_offset() > before);
        if appended {
            table.record(&tp, &batches, before);
        }
    }
}

/// Batches read at a time while rebuilding.
const REBUILD_READ_BYTES: usize = 1 << 20;

/// Rebuilds `tp`'s producer state from the batch headers in `log` (a broker that becomes
/// leader: the batches it replicated as a follower were appended by another leader). Stops at
/// the first read or parse error, keeping what was read.
pub(crate) fn rebuild<L: LogStorage>(log: &L, tp: &TopicPartition, table: &mut ProducerStateTable) {
    let end = log.log_end_offset();
    let mut offset = log.log_start_offset();
    while offset < end {
        let Ok(bytes) = log.read(offset, REBUILD_READ_BYTES, end, true) else {
            break;
        };
        let before = offset;
        for batch in RecordBatches::new(bytes) {
            let Ok(batch) = batch else { break };
            if batch.producer_id() != NO_PRODUCER_ID && !batch.is_control() {
                let b = ProducerBatch {
                    producer_id: batch.producer_id(),
                    producer_epoch: batch.producer_epoch(),
                    first_seq: batch.base_sequence(),
                    last_seq: batch.last_sequence(),
                    last_offset_delta: batch.last_offset_delta(),
                };
                table.record(tp, &[b], batch.base_offset());
            }
            offset = offset.max(batch.next_offset());
        }
        if offset == before {
            break;
        }
    }
}

/// Adds the early answers to `response`.
pub(crate) fn merge(response: &mut ProduceResponse, early: Vec<EarlyAnswer>) {
    for e in early {
        match response
            .responses
            .iter_mut()
            .find(|t| &*t.name == e.topic.as_str())
        {
            Some(t) => t.partition_responses.push(e.answer),
            None => response.responses.push(TopicProduceResponse {
                name: e.topic.as_str().into(),
                partition_responses: vec![e.answer],
                ..Default::default()
            }),
        }
    }
}
