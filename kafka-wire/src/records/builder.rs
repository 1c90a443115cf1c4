//! [`RecordBatchBuilder`]: appends records and produces one magic v2 batch as `Bytes`, with
//! the CRC computed and the records compressed as asked; also control batches carrying a
//! transaction marker.

use bytes::{BufMut, Bytes, BytesMut};

use super::attributes::{Attributes, Compression, TimestampType};
use super::batch::{ATTRIBUTES, CRC, MIN_BATCH_LENGTH, RECORD_BATCH_OVERHEAD};
use super::compression;
use super::control::EndTransactionMarker;
use super::record::{Record, RecordHeader};
use super::{
    MAGIC_V2, NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE,
    NO_TIMESTAMP,
};
use crate::varint::{put_varint, put_varlong, varint_len, varlong_len};
use crate::EncodeError;

/// Builds one record batch.
///
/// Records get consecutive offsets from the base offset; the first record's timestamp is the
/// batch's base timestamp.
#[derive(Debug, Clone)]
pub struct RecordBatchBuilder {
    base_offset: i64,
    partition_leader_epoch: i32,
    compression: Compression,
    timestamp_type: TimestampType,
    transactional: bool,
    control: bool,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    base_timestamp: Option<i64>,
    max_timestamp: i64,
    count: i32,
    body: BytesMut,
}

fn len_i32(what: &'static str, len: usize) -> Result<i32, EncodeError> {
    i32::try_from(len).map_err(|_| EncodeError::TooLong { what, length: len })
}

fn nullable_len(what: &'static str, v: Option<&[u8]>) -> Result<(i32, usize), EncodeError> {
    match v {
        None => Ok((-1, varint_len(-1))),
        Some(b) => {
            let n = len_i32(what, b.len())?;
            Ok((n, varint_len(n) + b.len()))
        }
    }
}

fn put_nullable(body: &mut BytesMut, len: i32, v: Option<&[u8]>) {
    put_varint(body, len);
    if let Some(b) = v {
        body.put_slice(b);
    }
}

impl RecordBatchBuilder {
    /// A builder for a batch whose first record gets `base_offset`, uncompressed, with create
    /// time stamps, no producer id and no leader epoch.
    pub fn new(base_offset: i64) -> RecordBatchBuilder {
        RecordBatchBuilder {
            base_offset,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            compression: Compression::None,
            timestamp_type: TimestampType::CreateTime,
            transactional: false,
            control: false,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            base_sequence: NO_SEQUENCE,
            base_timestamp: None,
            max_timestamp: NO_TIMESTAMP,
            count: 0,
            body: BytesMut::new(),
        }
    }

    /// Sets the compression codec.
    #[must_use]
    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// Sets the partition leader epoch.
    #[must_use]
    pub fn partition_leader_epoch(mut self, epoch: i32) -> Self {
        self.partition_leader_epoch = epoch;
        self
    }

    /// Sets the timestamp type.
    #[must_use]
    pub fn timestamp_type(mut self, timestamp_type: TimestampType) -> Self {
        self.timestamp_type = timestamp_type;
        self
    }

    /// Marks the batch as part of a transaction.
    #[must_use]
    pub fn transactional(mut self, transactional: bool) -> Self {
        self.transactional = transactional;
        self
    }

    /// Sets the idempotent producer's id, epoch and the sequence of the first record.
    #[must_use]
    pub fn producer(mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Number of records appended.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether no record was appended.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Appends a record with the next offset.
    pub fn append(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[RecordHeader],
    ) -> Result<(), EncodeError> {
        if self.count == i32::MAX {
            return Err(EncodeError::TooLong {
                what: "record batch",
                length: self.count as usize,
            });
        }
        let base_timestamp = *self.base_timestamp.get_or_insert(timestamp);
        let timestamp_delta = timestamp.wrapping_sub(base_timestamp);
        let offset_delta = self.count;
        let (key_len, key_size) = nullable_len("record key", key)?;
        let (value_len, value_size) = nullable_len("record value", value)?;
        let header_count = len_i32("record headers", headers.len())?;
        let mut size = 1
            + varlong_len(timestamp_delta)
            + varint_len(offset_delta)
            + key_size
            + value_size
            + varint_len(header_count);
        let mut header_lens = Vec::with_capacity(headers.len());
        for h in headers {
            let (k, ks) = nullable_len("record header key", Some(&h.key))?;
            let (v, vs) = nullable_len("record header value", h.value.as_deref())?;
            size += ks + vs;
            header_lens.push((k, v));
        }
        let size_i32 = len_i32("record", size)?;
        self.body.reserve(varint_len(size_i32) + size);
        put_varint(&mut self.body, size_i32);
        self.body.put_i8(0);
        put_varlong(&mut self.body, timestamp_delta);
        put_varint(&mut self.body, offset_delta);
        put_nullable(&mut self.body, key_len, key);
        put_nullable(&mut self.body, value_len, value);
        put_varint(&mut self.body, header_count);
        for (h, (k, v)) in headers.iter().zip(header_lens) {
            put_nullable(&mut self.body, k, Some(&h.key));
            put_nullable(&mut self.body, v, h.value.as_deref());
        }
        if self.count == 0 || timestamp > self.max_timestamp {
            self.max_timestamp = timestamp;
        }
        self.count += 1;
        Ok(())
    }

    /// Appends a decoded record (its offset is ignored: records get consecutive offsets).
    pub fn append_record(&mut self, record: &Record) -> Result<(), EncodeError> {
        self.append(
            record.timestamp,
            record.key.as_deref(),
            record.value.as_deref(),
            &record.headers,
        )
    }

    /// Finishes the batch: header, (compressed) records and CRC.
    pub fn build(self) -> Result<Bytes, EncodeError> {
        let records = compression::compress(self.compression, &self.body)?;
        let batch_length = MIN_BATCH_LENGTH as usize + records.len();
        let batch_length = len_i32("record batch", batch_length)?;
        let attributes = Attributes::new(
            self.compression,
            self.timestamp_type,
            self.transactional,
            self.control,
        );
        let mut out = BytesMut::with_capacity(RECORD_BATCH_OVERHEAD + records.len());
        out.put_i64(self.base_offset);
        out.put_i32(batch_length);
        out.put_i32(self.partition_leader_epoch);
        out.put_i8(MAGIC_V2);
        out.put_u32(0);
        out.put_i16(attributes.raw());
        out.put_i32((self.count - 1).max(0));
        out.put_i64(self.base_timestamp.unwrap_or(NO_TIMESTAMP));
        out.put_i64(self.max_timestamp);
        out.put_i64(self.producer_id);
        out.put_i16(self.producer_epoch);
        out.put_i32(self.base_sequence);
        out.put_i32(self.count);
        out.put_slice(&records);
        let crc = crc32c::crc32c(&out[ATTRIBUTES..]);
        out[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
        Ok(out.freeze())
    }

    /// A control batch holding one end-transaction marker (commit or abort), as a
    /// transaction coordinator writes to each partition of a transaction.
    pub fn end_transaction_marker(
        base_offset: i64,
        producer_id: i64,
        producer_epoch: i16,
        partition_leader_epoch: i32,
        timestamp: i64,
        marker: EndTransactionMarker,
    ) -> Result<Bytes, EncodeError> {
        let mut b = RecordBatchBuilder::new(base_offset)
            .producer(producer_id, producer_epoch, NO_SEQUENCE)
            .partition_leader_epoch(partition_leader_epoch)
            .transactional(true);
        b.control = true;
        b.append(
            timestamp,
            Some(&marker.kind.key()),
            Some(&marker.value()),
            &[],
        )?;
        b.build()
    }
}
