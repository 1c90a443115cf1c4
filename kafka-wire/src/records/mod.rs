//! Record batches, magic v2: the zero-copy [`RecordBatch`] view (header, `batchLength`,
//! CRC-32C, attributes), the [`RecordBatches`] iterator over a record set, lazy [`Records`]
//! iteration, the [`RecordBatchBuilder`], control batches, in-place rewriting of the base
//! offset and partition leader epoch, and compression behind the `gzip`, `snappy`, `lz4` and
//! `zstd` features.
//!
//! Magic 0 and 1 message sets are recognised and refused with
//! [`DecodeError::UnsupportedMagic`](crate::DecodeError::UnsupportedMagic).
//!
//! ```
//! use bytes::BytesMut;
//! use kafka_wire::records::{set_base_offset, RecordBatch, RecordBatchBuilder, RecordBatches, RecordHeader};
//!
//! let mut builder = RecordBatchBuilder::new(0).producer(1000, 0, 0);
//! builder.append(1_700_000_000_000, Some(b"key"), Some(b"value"), &[RecordHeader::new("h", None)])?;
//! builder.append(1_700_000_000_005, None, Some(b"second"), &[])?;
//! let mut batch = BytesMut::from(&builder.build()?[..]);
//!
//! // A leader assigns the offsets in place; the CRC stays valid.
//! set_base_offset(&mut batch, 42)?;
//!
//! // A fetched record set may end mid-batch: only whole batches come out.
//! let mut set = batch.clone();
//! set.extend_from_slice(&batch[..20]);
//! let mut batches = RecordBatches::new(set.freeze());
//! let first: RecordBatch = batches.next().unwrap()?;
//! assert!(batches.next().is_none());
//! assert_eq!(batches.whole_len(), batch.len());
//!
//! assert_eq!(first.next_offset(), 44);
//! let offsets: Vec<i64> = first.records()?.map(|r| r.map(|r| r.offset)).collect::<Result<_, _>>()?;
//! assert_eq!(offsets, [42, 43]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod attributes;
mod batch;
mod batches;
mod builder;
mod compression;
mod control;
mod record;

pub use attributes::{Attributes, Compression, TimestampType};
pub use batch::{
    rewrite_record_set, set_base_offset, set_log_append_time, set_partition_leader_epoch,
    RecordBatch, DEFAULT_MAX_DECOMPRESSED_BYTES, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD,
};
pub use batches::RecordBatches;
pub use builder::RecordBatchBuilder;
pub use control::{ControlRecordType, EndTransactionMarker};
pub use record::{Record, RecordHeader, Records};

/// The only record format version this crate decodes and encodes.
pub const MAGIC_V2: i8 = 2;
/// Producer id of a batch written without one.
pub const NO_PRODUCER_ID: i64 = -1;
/// Producer epoch of a batch written without one.
pub const NO_PRODUCER_EPOCH: i16 = -1;
/// Base sequence of a batch written without one.
pub const NO_SEQUENCE: i32 = -1;
/// Partition leader epoch of a batch not yet stamped by a leader.
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;
/// Timestamp of a batch without records.
pub const NO_TIMESTAMP: i64 = -1;
