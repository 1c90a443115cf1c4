//! [`RecordBatch`], a checked zero-copy view of one magic v2 record batch, and the in-place
//! rewrites of the fields that lie outside the CRC (base offset, partition leader epoch).
//!
//! Layout (big-endian), offsets in bytes:
//!
//! | offset | field | | offset | field |
//! |---|---|---|---|---|
//! | 0 | baseOffset i64 | | 27 | baseTimestamp i64 |
//! | 8 | batchLength i32 | | 35 | maxTimestamp i64 |
//! | 12 | partitionLeaderEpoch i32 | | 43 | producerId i64 |
//! | 16 | magic i8 | | 51 | producerEpoch i16 |
//! | 17 | crc u32 (CRC-32C of 21..end) | | 53 | baseSequence i32 |
//! | 21 | attributes i16 | | 57 | recordCount i32 |
//! | 23 | lastOffsetDelta i32 | | 61 | records |

use bytes::Bytes;

use super::attributes::{Attributes, Compression, TimestampType};
use super::compression;
use super::record::Records;
use super::MAGIC_V2;
use crate::DecodeError;

/// Size of the fixed header of a magic v2 batch, up to the first record.
pub const RECORD_BATCH_OVERHEAD: usize = 61;
/// Size of the `baseOffset` and `batchLength` fields that precede what `batchLength` counts.
pub const LOG_OVERHEAD: usize = 12;
/// Default bound on the size of a batch's records after decompression (64 MiB).
pub const DEFAULT_MAX_DECOMPRESSED_BYTES: usize = 64 << 20;

pub(crate) const BASE_OFFSET: usize = 0;
pub(crate) const BATCH_LENGTH: usize = 8;
pub(crate) const PARTITION_LEADER_EPOCH: usize = 12;
pub(crate) const MAGIC: usize = 16;
pub(crate) const CRC: usize = 17;
pub(crate) const ATTRIBUTES: usize = 21;
const LAST_OFFSET_DELTA: usize = 23;
const BASE_TIMESTAMP: usize = 27;
const MAX_TIMESTAMP: usize = 35;
const PRODUCER_ID: usize = 43;
const PRODUCER_EPOCH: usize = 51;
const BASE_SEQUENCE: usize = 53;
pub(crate) const RECORD_COUNT: usize = 57;
/// Smallest valid `batchLength`: the header after `batchLength`, no records.
pub(crate) const MIN_BATCH_LENGTH: i32 = (RECORD_BATCH_OVERHEAD - LOG_OVERHEAD) as i32;
/// Smallest encoded record: seven one-byte fields.
pub(crate) const MIN_RECORD_SIZE: usize = 7;

pub(crate) fn read_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

pub(crate) fn read_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

pub(crate) fn read_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}

/// Checks the parts of a batch header that need only its first 17 bytes, returning the total
/// size (`12 + batchLength`) the batch claims. `buf` must hold at least [`LOG_OVERHEAD`] bytes.
pub(crate) fn claimed_size(buf: &[u8]) -> Result<usize, DecodeError> {
    let batch_length = read_i32(buf, BATCH_LENGTH);
    if buf.len() > MAGIC {
        let magic = buf[MAGIC] as i8;
        if magic != MAGIC_V2 {
            return Err(DecodeError::UnsupportedMagic(magic));
        }
    }
    if batch_length < MIN_BATCH_LENGTH {
        return Err(DecodeError::InvalidLength {
            what: "record batch length",
            length: i64::from(batch_length),
        });
    }
    Ok(LOG_OVERHEAD + batch_length as usize)
}

/// A checked, zero-copy view of one magic v2 record batch.
///
/// Construction checks the magic, that `batchLength` matches the bytes exactly, that the
/// compression codec id is known and the record count is not negative, and (with
/// [`RecordBatch::parse`]) the CRC-32C. Accessors read the header in place.
#[derive(Clone, PartialEq, Eq)]
pub struct RecordBatch {
    bytes: Bytes,
}

impl std::fmt::Debug for RecordBatch {
    /// The header fields, not the bytes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordBatch")
            .field("base_offset", &self.base_offset())
            .field("size", &self.size())
            .field("partition_leader_epoch", &self.partition_leader_epoch())
            .field("attributes", &self.attributes())
            .field("last_offset_delta", &self.last_offset_delta())
            .field("base_timestamp", &self.base_timestamp())
            .field("max_timestamp", &self.max_timestamp())
            .field("producer_id", &self.producer_id())
            .field("producer_epoch", &self.producer_epoch())
            .field("base_sequence", &self.base_sequence())
            .field("record_count", &self.record_count())
            .finish()
    }
}

impl RecordBatch {
    /// Checks `bytes` as exactly one record batch, CRC included.
    pub fn parse(bytes: Bytes) -> Result<RecordBatch, DecodeError> {
        let batch = RecordBatch::parse_without_crc(bytes)?;
        batch.verify_crc()?;
        Ok(batch)
    }

    /// Checks `bytes` as exactly one record batch, all but the CRC (for callers that check
    /// it later with [`RecordBatch::verify_crc`], or trust the bytes).
    pub fn parse_without_crc(bytes: Bytes) -> Result<RecordBatch, DecodeError> {
        if bytes.len() < LOG_OVERHEAD {
            return Err(DecodeError::Truncated {
                needed: LOG_OVERHEAD,
                remaining: bytes.len(),
            });
        }
        let size = claimed_size(&bytes)?;
        if bytes.len() < RECORD_BATCH_OVERHEAD || bytes.len() < size {
            return Err(DecodeError::Truncated {
                needed: size.max(RECORD_BATCH_OVERHEAD),
                remaining: bytes.len(),
            });
        }
        if bytes.len() > size {
            return Err(DecodeError::InvalidLength {
                what: "record batch length (bytes follow the batch)",
                length: i64::from(read_i32(&bytes, BATCH_LENGTH)),
            });
        }
        let batch = RecordBatch { bytes };
        batch.attributes().compression()?;
        let count = batch.record_count();
        if count < 0 {
            return Err(DecodeError::InvalidLength {
                what: "record count",
                length: i64::from(count),
            });
        }
        if batch.compression() == Compression::None
            && count as usize > batch.records_bytes().len() / MIN_RECORD_SIZE
        {
            return Err(DecodeError::InvalidLength {
                what: "record count",
                length: i64::from(count),
            });
        }
        Ok(batch)
    }

    /// The CRC-32C of the bytes it covers (attributes to the end).
    pub fn compute_crc(&self) -> u32 {
        crc32c::crc32c(&self.bytes[ATTRIBUTES..])
    }

    /// Compares the stored CRC with the computed one.
    pub fn verify_crc(&self) -> Result<(), DecodeError> {
        let stored = self.crc();
        let computed = self.compute_crc();
        if stored == computed {
            Ok(())
        } else {
            Err(DecodeError::BadCrc { stored, computed })
        }
    }

    /// The whole batch.
    pub fn as_bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// The whole batch, by value.
    pub fn into_bytes(self) -> Bytes {
        self.bytes
    }

    /// Size of the whole batch in bytes (`12 + batchLength`).
    pub fn size(&self) -> usize {
        self.bytes.len()
    }

    /// The records section (compressed as the attributes say), zero-copy.
    pub fn records_bytes(&self) -> Bytes {
        self.bytes.slice(RECORD_BATCH_OVERHEAD..)
    }

    /// Offset of the first record.
    pub fn base_offset(&self) -> i64 {
        read_i64(&self.bytes, BASE_OFFSET)
    }

    /// The `batchLength` field: bytes after it.
    pub fn batch_length(&self) -> i32 {
        read_i32(&self.bytes, BATCH_LENGTH)
    }

    /// Epoch of the leader that appended the batch.
    pub fn partition_leader_epoch(&self) -> i32 {
        read_i32(&self.bytes, PARTITION_LEADER_EPOCH)
    }

    /// Record format version (always 2 here).
    pub fn magic(&self) -> i8 {
        self.bytes[MAGIC] as i8
    }

    /// The stored CRC-32C.
    pub fn crc(&self) -> u32 {
        read_i32(&self.bytes, CRC) as u32
    }

    /// The attributes.
    pub fn attributes(&self) -> Attributes {
        Attributes(read_i16(&self.bytes, ATTRIBUTES))
    }

    /// The compression codec (checked at construction).
    pub fn compression(&self) -> Compression {
        self.attributes().compression().unwrap_or(Compression::None)
    }

    /// The timestamp type.
    pub fn timestamp_type(&self) -> TimestampType {
        self.attributes().timestamp_type()
    }

    /// Whether the batch belongs to a transaction.
    pub fn is_transactional(&self) -> bool {
        self.attributes().is_transactional()
    }

    /// Whether the batch holds control records.
    pub fn is_control(&self) -> bool {
        self.attributes().is_control()
    }

    /// Offset of the last record relative to the base offset.
    pub fn last_offset_delta(&self) -> i32 {
        read_i32(&self.bytes, LAST_OFFSET_DELTA)
    }

    /// Timestamp of the first record (or the delete horizon, see
    /// [`Attributes::has_delete_horizon`]).
    pub fn base_timestamp(&self) -> i64 {
        read_i64(&self.bytes, BASE_TIMESTAMP)
    }

    /// Largest timestamp in the batch (the append time for log-append-time batches).
    pub fn max_timestamp(&self) -> i64 {
        read_i64(&self.bytes, MAX_TIMESTAMP)
    }

    /// Producer id, or -1.
    pub fn producer_id(&self) -> i64 {
        read_i64(&self.bytes, PRODUCER_ID)
    }

    /// Producer epoch, or -1.
    pub fn producer_epoch(&self) -> i16 {
        read_i16(&self.bytes, PRODUCER_EPOCH)
    }

    /// Sequence number of the first record, or -1.
    pub fn base_sequence(&self) -> i32 {
        read_i32(&self.bytes, BASE_SEQUENCE)
    }

    /// Sequence number of the last record, or -1 (wraps at `i32::MAX` as Kafka does).
    pub fn last_sequence(&self) -> i32 {
        let base = self.base_sequence();
        if base < 0 {
            return base;
        }
        let last = i64::from(base) + i64::from(self.last_offset_delta());
        if last > i64::from(i32::MAX) {
            (last - i64::from(i32::MAX) - 1) as i32
        } else {
            last as i32
        }
    }

    /// Number of records the header declares.
    pub fn record_count(&self) -> i32 {
        read_i32(&self.bytes, RECORD_COUNT)
    }

    /// Offset of the last record: `baseOffset + lastOffsetDelta`.
    pub fn last_offset(&self) -> i64 {
        self.base_offset()
            .saturating_add(i64::from(self.last_offset_delta()))
    }

    /// Offset after the batch: `last_offset() + 1`, the log end offset once it is appended
    /// (the LEO a follower reports, K8.2).
    pub fn next_offset(&self) -> i64 {
        self.last_offset().saturating_add(1)
    }

    /// Iterates the records lazily, decompressing at most
    /// [`DEFAULT_MAX_DECOMPRESSED_BYTES`].
    pub fn records(&self) -> Result<Records, DecodeError> {
        self.records_bounded(DEFAULT_MAX_DECOMPRESSED_BYTES)
    }

    /// Iterates the records lazily; a compressed batch is decompressed first, and fails with
    /// [`DecodeError::Decompression`] once its output would exceed `max_decompressed` bytes.
    /// Uncompressed records are zero-copy slices of the batch.
    pub fn records_bounded(&self, max_decompressed: usize) -> Result<Records, DecodeError> {
        let count = self.record_count();
        let body = match self.compression() {
            Compression::None => self.records_bytes(),
            codec => {
                if (count as usize).saturating_mul(MIN_RECORD_SIZE) > max_decompressed {
                    return Err(DecodeError::InvalidLength {
                        what: "record count",
                        length: i64::from(count),
                    });
                }
                compression::decompress(
                    codec,
                    &self.bytes[RECORD_BATCH_OVERHEAD..],
                    max_decompressed,
                )?
            }
        };
        let log_append_time = match self.timestamp_type() {
            TimestampType::LogAppendTime => Some(self.max_timestamp()),
            TimestampType::CreateTime => None,
        };
        Records::new(
            body,
            count,
            self.base_offset(),
            self.base_timestamp(),
            log_append_time,
        )
    }
}

fn header_slice(batch: &mut [u8], end: usize) -> Result<&mut [u8], DecodeError> {
    if batch.len() < end {
        return Err(DecodeError::Truncated {
            needed: end,
            remaining: batch.len(),
        });
    }
    Ok(&mut batch[..end])
}

/// Rewrites the base offset of the batch at the start of `batch`, in place. The field lies
/// outside the CRC, so the CRC stays valid.
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) -> Result<(), DecodeError> {
    header_slice(batch, BATCH_LENGTH)?.copy_from_slice(&base_offset.to_be_bytes());
    Ok(())
}

/// Rewrites the partition leader epoch of the batch at the start of `batch`, in place. The
/// field lies outside the CRC, so the CRC stays valid.
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) -> Result<(), DecodeError> {
    header_slice(batch, MAGIC)?[PARTITION_LEADER_EPOCH..].copy_from_slice(&epoch.to_be_bytes());
    Ok(())
}

/// Stamps a log-append time on the batch at the start of `batch`, as a broker does for topics
/// with `message.timestamp.type=LogAppendTime`: sets the timestamp-type attribute and
/// `maxTimestamp`, then recomputes the CRC (both fields lie inside it). Every record of the
/// batch then reads `timestamp`. Returns the batch's size.
pub fn set_log_append_time(batch: &mut [u8], timestamp: i64) -> Result<usize, DecodeError> {
    if batch.len() < RECORD_BATCH_OVERHEAD {
        return Err(DecodeError::Truncated {
            needed: RECORD_BATCH_OVERHEAD,
            remaining: batch.len(),
        });
    }
    let size = claimed_size(batch)?;
    if batch.len() < size {
        return Err(DecodeError::Truncated {
            needed: size,
            remaining: batch.len(),
        });
    }
    let attributes = Attributes(read_i16(batch, ATTRIBUTES));
    let stamped = Attributes::new(
        attributes.compression()?,
        TimestampType::LogAppendTime,
        attributes.is_transactional(),
        attributes.is_control(),
    )
    .raw()
        | (attributes.raw() & !0x3f);
    batch[ATTRIBUTES..ATTRIBUTES + 2].copy_from_slice(&stamped.to_be_bytes());
    batch[MAX_TIMESTAMP..MAX_TIMESTAMP + 8].copy_from_slice(&timestamp.to_be_bytes());
    let crc = crc32c::crc32c(&batch[ATTRIBUTES..size]);
    batch[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(size)
}

/// Assigns consecutive offsets from `first_offset` and stamps `leader_epoch` on every batch
/// of a record set, in place, as a leader does on append. Returns the offset after the last
/// batch. Each batch's header is checked (magic, `batchLength`), but not its CRC; a record
/// set that does not end on a batch boundary is an error and leaves earlier batches rewritten.
pub fn rewrite_record_set(
    set: &mut [u8],
    first_offset: i64,
    leader_epoch: i32,
) -> Result<i64, DecodeError> {
    let mut pos = 0;
    let mut next = first_offset;
    while pos < set.len() {
        let rest = &mut set[pos..];
        if rest.len() < RECORD_BATCH_OVERHEAD {
            return Err(DecodeError::Truncated {
                needed: RECORD_BATCH_OVERHEAD,
                remaining: rest.len(),
            });
        }
        let size = claimed_size(rest)?;
        if rest.len() < size {
            return Err(DecodeError::Truncated {
                needed: size,
                remaining: rest.len(),
            });
        }
        let delta = read_i32(rest, LAST_OFFSET_DELTA);
        if delta < 0 {
            return Err(DecodeError::InvalidValue {
                what: "lastOffsetDelta",
                reason: "negative",
            });
        }
        set_base_offset(rest, next)?;
        set_partition_leader_epoch(rest, leader_epoch)?;
        next = next.saturating_add(i64::from(delta)).saturating_add(1);
        pos += size;
    }
    Ok(next)
}
