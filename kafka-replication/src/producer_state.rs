//! Idempotent-producer state of one partition's log (Kafka 2.8's `ProducerStateManager` /
//! `ProducerAppendInfo`, client appends only, KIP-98), sans-IO.
//!
//! For each producer id the [`ProducerStateManager`] keeps the producer epoch and the metadata
//! of the last [`BATCHES_TO_RETAIN`] batches appended (sequence range and offsets). Before a
//! leader append, each batch carrying a producer id is checked in order:
//!
//! - same epoch and exactly the sequence range of a cached batch: a retry of an appended
//!   batch — answered with the original offsets, not appended again;
//! - an epoch older than the producer's: `INVALID_PRODUCER_EPOCH`;
//! - a newer epoch must start at sequence 0 (unless the producer had no epoch yet);
//! - the same epoch must continue the last sequence (`last + 1`, or 0 after `i32::MAX`),
//!   unless the producer is unknown here: `OUT_OF_ORDER_SEQUENCE_NUMBER` otherwise.
//!
//! A [`Partition`](crate::partition::Partition) owns the manager next to its log, as Kafka's
//! `UnifiedLog` owns its `ProducerStateManager`. It is kept up to date by the leader's own
//! appends and rebuilt from the log's batch headers ([`ProducerStateManager::rebuild`]) when
//! the replica becomes leader, so a new leader knows the batches written under the previous
//! one (Kafka rebuilds it from the log and its snapshots; there are no snapshots here). A
//! follower drops it: its log moves on under another leader. A producer with no state here
//! may start at any sequence.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::records::{RecordBatch, RecordBatches};

use crate::log::LogStorage;

/// Batches remembered per producer for duplicate detection (Kafka's `NumBatchesToRetain`).
pub const BATCHES_TO_RETAIN: usize = 5;
/// The producer id of a batch written without idempotence.
pub const NO_PRODUCER_ID: i64 = -1;
/// No producer epoch yet.
pub const NO_PRODUCER_EPOCH: i16 = -1;
/// No sequence yet.
pub const NO_SEQUENCE: i32 = -1;

/// What the checks need of a batch: its producer fields, sequence range and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerBatch {
    /// The producer id ([`NO_PRODUCER_ID`]: not idempotent, not checked).
    pub producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
    /// The sequence of the first record.
    pub first_seq: i32,
    /// The sequence of the last record.
    pub last_seq: i32,
    /// The offset delta of the last record (records - 1).
    pub last_offset_delta: i32,
}

/// An appended batch as remembered: its sequence range and offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    /// First sequence.
    pub first_seq: i32,
    /// Last sequence.
    pub last_seq: i32,
    /// Offset of the first record.
    pub first_offset: i64,
    /// Offset of the last record.
    pub last_offset: i64,
}

/// Why a batch is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProducerStateError {
    /// The batch's epoch is older than the producer's current one.
    #[error("producer {producer_id}: epoch {epoch} is older than the current {current}")]
    InvalidProducerEpoch {
        /// The producer.
        producer_id: i64,
        /// The batch's epoch.
        epoch: i16,
        /// The producer's epoch here.
        current: i16,
    },
    /// The batch does not continue the producer's sequence.
    #[error("producer {producer_id}: sequence {first_seq} does not follow {last_seq}")]
    OutOfOrderSequence {
        /// The producer.
        producer_id: i64,
        /// The batch's first sequence.
        first_seq: i32,
        /// The last sequence appended ([`NO_SEQUENCE`] for a new epoch).
        last_seq: i32,
    },
}

impl ProducerStateError {
    /// The Produce error code.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            ProducerStateError::InvalidProducerEpoch { .. } => ErrorCode::InvalidProducerEpoch,
            ProducerStateError::OutOfOrderSequence { .. } => ErrorCode::OutOfOrderSequenceNumber,
        }
    }
}

/// What to do with a partition's batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Append them; then [`ProducerStateManager::record`] them at their offsets.
    Append,
    /// A retry of an appended batch: answer with its offsets, append nothing.
    Duplicate(BatchMetadata),
    /// Refuse the partition's data.
    Refuse(ProducerStateError),
}

/// One producer's state on one partition.
#[derive(Debug, Clone)]
struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<BatchMetadata>,
}

impl ProducerEntry {
    fn empty() -> Self {
        ProducerEntry {
            epoch: NO_PRODUCER_EPOCH,
            batches: VecDeque::new(),
        }
    }

    fn last_seq(&self) -> i32 {
        self.batches.back().map_or(NO_SEQUENCE, |b| b.last_seq)
    }

    fn duplicate_of(&self, b: &ProducerBatch) -> Option<BatchMetadata> {
        if b.producer_epoch != self.epoch {
            return None;
        }
        self.batches
            .iter()
            .find(|m| m.first_seq == b.first_seq && m.last_seq == b.last_seq)
            .copied()
    }

    /// A new epoch starts with no batches.
    fn set_epoch(&mut self, epoch: i16) {
        if self.epoch != epoch {
            self.batches.clear();
            self.epoch = epoch;
        }
    }

    fn push(&mut self, epoch: i16, batch: BatchMetadata) {
        self.set_epoch(epoch);
        if self.batches.len() == BATCHES_TO_RETAIN {
            self.batches.pop_front();
        }
        self.batches.push_back(batch);
    }
}

/// `next` follows `last` (wrapping to 0 after `i32::MAX`).
fn in_sequence(last: i32, next: i32) -> bool {
    i64::from(next) == i64::from(last) + 1 || (next == 0 && last == i32::MAX)
}

impl ProducerBatch {
    /// The producer fields of `batch`.
    pub fn of(batch: &RecordBatch) -> Self {
        ProducerBatch {
            producer_id: batch.producer_id(),
            producer_epoch: batch.producer_epoch(),
            first_seq: batch.base_sequence(),
            last_seq: batch.last_sequence(),
            last_offset_delta: batch.last_offset_delta(),
        }
    }

    /// The producer fields of every batch in `records`; `None` when no batch is idempotent
    /// or the data does not parse (the log then refuses it or appends it unchecked).
    pub fn all_of(records: &Bytes) -> Option<Vec<ProducerBatch>> {
        let mut out = Vec::new();
        for batch in RecordBatches::new(records.clone()) {
            out.push(ProducerBatch::of(&batch.ok()?));
        }
        out.iter()
            .any(|b| b.producer_id != NO_PRODUCER_ID)
            .then_some(out)
    }
}

/// Batches read at a time while rebuilding.
const REBUILD_READ_BYTES: usize = 1 << 20;

/// The producer state of one partition's log.
#[derive(Debug, Default, Clone)]
pub struct ProducerStateManager {
    producers: BTreeMap<i64, ProducerEntry>,
}

impl ProducerStateManager {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks `batches` (one append's data, in order) without changing anything.
    #[must_use = "the verdict decides whether to append"]
    pub fn check(&self, batches: &[ProducerBatch]) -> Verdict {
        let producers = &self.producers;
        // The batches of this request as they would update each producer (Kafka's
        // `updatedEntry`, starting from the current epoch with no batches).
        let mut updated: BTreeMap<i64, ProducerEntry> = BTreeMap::new();
        for b in batches.iter().filter(|b| b.producer_id != NO_PRODUCER_ID) {
            let current = producers.get(&b.producer_id);
            if let Some(duplicate) = current.and_then(|c| c.duplicate_of(b)) {
                return Verdict::Duplicate(duplicate);
            }
            let current_epoch = current.map_or(NO_PRODUCER_EPOCH, |c| c.epoch);
            let next = updated
                .entry(b.producer_id)
                .or_insert_with(|| ProducerEntry {
                    epoch: current_epoch,
                    batches: VecDeque::new(),
                });
            if b.producer_epoch < next.epoch {
                return Verdict::Refuse(ProducerStateError::InvalidProducerEpoch {
                    producer_id: b.producer_id,
                    epoch: b.producer_epoch,
                    current: next.epoch,
                });
            }
            if b.producer_epoch != next.epoch {
                if b.first_seq != 0 && next.epoch != NO_PRODUCER_EPOCH {
                    return Verdict::Refuse(ProducerStateError::OutOfOrderSequence {
                        producer_id: b.producer_id,
                        first_seq: b.first_seq,
                        last_seq: NO_SEQUENCE,
                    });
                }
            } else {
                let last_seq = if !next.batches.is_empty() {
                    next.last_seq()
                } else if Some(b.producer_epoch) == current.map(|c| c.epoch) {
                    current.map_or(NO_SEQUENCE, ProducerEntry::last_seq)
                } else {
                    NO_SEQUENCE
                };
                // A producer with no epoch here (new to this leader) may start anywhere.
                if current_epoch != NO_PRODUCER_EPOCH && !in_sequence(last_seq, b.first_seq) {
                    return Verdict::Refuse(ProducerStateError::OutOfOrderSequence {
                        producer_id: b.producer_id,
                        first_seq: b.first_seq,
                        last_seq,
                    });
                }
            }
            // Offsets do not matter for the checks of the following batches.
            next.push(
                b.producer_epoch,
                BatchMetadata {
                    first_seq: b.first_seq,
                    last_seq: b.last_seq,
                    first_offset: -1,
                    last_offset: -1,
                },
            );
        }
        Verdict::Append
    }

    /// Records `batches`, appended from offset `base_offset` on (each batch takes
    /// `last_offset_delta + 1` offsets), after [`check`](Self::check) said
    /// [`Verdict::Append`].
    pub fn record(&mut self, batches: &[ProducerBatch], base_offset: i64) {
        let mut offset = base_offset;
        for b in batches {
            let first_offset = offset;
            let last_offset = offset + i64::from(b.last_offset_delta.max(0));
            offset = last_offset + 1;
            if b.producer_id == NO_PRODUCER_ID {
                continue;
            }
            self.producers
                .entry(b.producer_id)
                .or_insert_with(ProducerEntry::empty)
                .push(
                    b.producer_epoch,
                    BatchMetadata {
                        first_seq: b.first_seq,
                        last_seq: b.last_seq,
                        first_offset,
                        last_offset,
                    },
                );
        }
    }

    /// Forgets every producer (the replica follows: its log moves on without it).
    pub fn clear(&mut self) {
        self.producers.clear();
    }

    /// Whether no producer is known.
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// The current epoch of `producer_id`, if it is known.
    pub fn producer_epoch(&self, producer_id: i64) -> Option<i16> {
        self.producers.get(&producer_id).map(|e| e.epoch)
    }

    /// The cached batches of `producer_id`, oldest first.
    pub fn batches(&self, producer_id: i64) -> Vec<BatchMetadata> {
        self.producers
            .get(&producer_id)
            .map(|e| e.batches.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Rebuilds the state from the batch headers in `log` (a replica that becomes leader:
    /// the batches it replicated as a follower were appended by another leader). Stops at
    /// the first read or parse error, keeping what was read.
    pub fn rebuild<L: LogStorage>(&mut self, log: &L) {
        self.producers.clear();
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
                    self.record(&[ProducerBatch::of(&batch)], batch.base_offset());
                }
                offset = offset.max(batch.next_offset());
            }
            if offset == before {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(epoch: i16, first_seq: i32, n: i32) -> ProducerBatch {
        let last = i64::from(first_seq) + i64::from(n) - 1;
        ProducerBatch {
            producer_id: 7,
            producer_epoch: epoch,
            first_seq,
            last_seq: if last > i64::from(i32::MAX) {
                (last - i64::from(i32::MAX) - 1) as i32
            } else {
                last as i32
            },
            last_offset_delta: n - 1,
        }
    }

    #[test]
    fn sequence_wraps_to_zero_after_i32_max() {
        let mut table = ProducerStateManager::new();
        let last = batch(0, i32::MAX - 1, 2);
        assert_eq!(table.check(&[last]), Verdict::Append);
        table.record(&[last], 10);
        assert_eq!(table.check(&[batch(0, 0, 1)]), Verdict::Append);
        assert!(matches!(
            table.check(&[batch(0, 1, 1)]),
            Verdict::Refuse(ProducerStateError::OutOfOrderSequence { .. })
        ));
    }

    #[test]
    fn batches_of_one_request_are_checked_in_order_and_recorded_at_their_offsets() {
        let mut table = ProducerStateManager::new();
        let two = [batch(0, 0, 2), batch(0, 2, 3)];
        assert_eq!(table.check(&two), Verdict::Append);
        table.record(&two, 100);
        // A gap between the batches of one request is refused as a whole.
        assert!(matches!(
            table.check(&[batch(0, 5, 2), batch(0, 8, 1)]),
            Verdict::Refuse(ProducerStateError::OutOfOrderSequence { first_seq: 8, .. })
        ));
        assert_eq!(
            table.check(&[batch(0, 5, 2), batch(0, 7, 1)]),
            Verdict::Append
        );
        assert_eq!(
            table.batches(7),
            vec![
                BatchMetadata {
                    first_seq: 0,
                    last_seq: 1,
                    first_offset: 100,
                    last_offset: 101
                },
                BatchMetadata {
                    first_seq: 2,
                    last_seq: 4,
                    first_offset: 102,
                    last_offset: 104
                },
            ]
        );
        assert_eq!(
            table.check(&[batch(0, 2, 3)]),
            Verdict::Duplicate(table.batches(7)[1])
        );
    }

    #[test]
    fn batches_without_a_producer_id_are_not_checked() {
        let mut table = ProducerStateManager::new();
        let plain = ProducerBatch {
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            first_seq: NO_SEQUENCE,
            last_seq: NO_SEQUENCE,
            last_offset_delta: 4,
        };
        assert_eq!(table.check(&[plain, plain]), Verdict::Append);
        table.record(&[plain, batch(0, 0, 1)], 0);
        // The idempotent batch came after five plain records.
        assert_eq!(table.batches(7)[0].first_offset, 5);
    }
}
