//! Records inside a batch: [`Record`], [`RecordHeader`] and the lazy [`Records`] iterator
//! that decodes the varint fields one record at a time.
//!
//! Record layout: `length varint`, `attributes int8`, `timestampDelta varlong`,
//! `offsetDelta varint`, `keyLength varint` + key, `valueLength varint` + value,
//! `headerCount varint`, then per header `keyLength varint` + key (UTF-8),
//! `valueLength varint` + value. Lengths of -1 mean null.

use bytes::{Buf, Bytes};

use super::batch::MIN_RECORD_SIZE;
use crate::varint::{get_varint, get_varlong};
use crate::DecodeError;

/// A record header: a UTF-8 key (checked) and an optional value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordHeader {
    /// The key; valid UTF-8.
    pub key: Bytes,
    /// The value, or `None` for null.
    pub value: Option<Bytes>,
}

impl RecordHeader {
    /// A header from a string key and an optional value.
    pub fn new(key: &str, value: Option<&[u8]>) -> RecordHeader {
        RecordHeader {
            key: Bytes::copy_from_slice(key.as_bytes()),
            value: value.map(Bytes::copy_from_slice),
        }
    }

    /// The key as a string (checked to be UTF-8 when decoded).
    pub fn key_str(&self) -> &str {
        std::str::from_utf8(&self.key).unwrap_or("")
    }
}

/// One record, with its absolute offset and timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// `baseOffset + offsetDelta`.
    pub offset: i64,
    /// `baseTimestamp + timestampDelta`, or the batch's `maxTimestamp` for log-append-time
    /// batches.
    pub timestamp: i64,
    /// The key, or `None` for null.
    pub key: Option<Bytes>,
    /// The value, or `None` for null (a tombstone).
    pub value: Option<Bytes>,
    /// The headers, in order.
    pub headers: Vec<RecordHeader>,
}

/// Lazily decodes the records of one batch.
///
/// Construction checks that the declared record count fits the bytes (each record takes at
/// least 7 bytes), so a hostile count fails before anything is allocated. Each record is a
/// zero-copy slice of the (decompressed) records section. The first malformed record yields
/// an `Err` and ends the iteration; so do bytes left over after the last declared record.
#[derive(Debug, Clone)]
pub struct Records {
    buf: Bytes,
    remaining: usize,
    base_offset: i64,
    base_timestamp: i64,
    log_append_time: Option<i64>,
    done: bool,
}

fn invalid_len(what: &'static str, length: i64) -> DecodeError {
    DecodeError::InvalidLength { what, length }
}

/// Reads a varint length, `-1` meaning null, and slices that many bytes.
fn get_nullable_bytes(buf: &mut Bytes, what: &'static str) -> Result<Option<Bytes>, DecodeError> {
    let len = get_varint(buf)?;
    if len == -1 {
        return Ok(None);
    }
    if len < 0 || len as usize > buf.len() {
        return Err(invalid_len(what, i64::from(len)));
    }
    Ok(Some(buf.split_to(len as usize)))
}

impl Records {
    pub(crate) fn new(
        buf: Bytes,
        count: i32,
        base_offset: i64,
        base_timestamp: i64,
        log_append_time: Option<i64>,
    ) -> Result<Records, DecodeError> {
        if count < 0 || count as usize > buf.len() / MIN_RECORD_SIZE {
            return Err(invalid_len("record count", i64::from(count)));
        }
        Ok(Records {
            buf,
            remaining: count as usize,
            base_offset,
            base_timestamp,
            log_append_time,
            done: false,
        })
    }

    /// Records not yet yielded.
    pub fn remaining(&self) -> usize {
        self.remaining
    }

    fn decode_one(&mut self) -> Result<Record, DecodeError> {
        let length = get_varint(&mut self.buf)?;
        if length < 0 || length as usize > self.buf.len() {
            return Err(invalid_len("record length", i64::from(length)));
        }
        let mut r = self.buf.split_to(length as usize);
        if !r.has_remaining() {
            return Err(DecodeError::Truncated {
                needed: 1,
                remaining: 0,
            });
        }
        let _attributes = r.get_i8();
        let timestamp_delta = get_varlong(&mut r)?;
        let offset_delta = get_varint(&mut r)?;
        let key = get_nullable_bytes(&mut r, "record key length")?;
        let value = get_nullable_bytes(&mut r, "record value length")?;
        let header_count = get_varint(&mut r)?;
        if header_count < 0 || header_count as usize > r.len() / 2 {
            return Err(invalid_len("record header count", i64::from(header_count)));
        }
        let mut headers = Vec::with_capacity(header_count as usize);
        for _ in 0..header_count {
            let key = get_nullable_bytes(&mut r, "record header key length")?
                .ok_or(invalid_len("record header key length", -1))?;
            if std::str::from_utf8(&key).is_err() {
                return Err(DecodeError::InvalidUtf8);
            }
            let value = get_nullable_bytes(&mut r, "record header value length")?;
            headers.push(RecordHeader { key, value });
        }
        if r.has_remaining() {
            return Err(invalid_len(
                "record length (bytes left inside the record)",
                i64::from(length),
            ));
        }
        Ok(Record {
            offset: self.base_offset.wrapping_add(i64::from(offset_delta)),
            timestamp: self
                .log_append_time
                .unwrap_or_else(|| self.base_timestamp.wrapping_add(timestamp_delta)),
            key,
            value,
            headers,
        })
    }
}

impl Iterator for Records {
    type Item = Result<Record, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.remaining == 0 {
            self.done = true;
            if self.buf.has_remaining() {
                return Some(Err(invalid_len(
                    "record batch (bytes left after the last record)",
                    self.buf.len() as i64,
                )));
            }
            return None;
        }
        self.remaining -= 1;
        let r = self.decode_one();
        if r.is_err() {
            self.done = true;
        }
        Some(r)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done {
            (0, Some(0))
        } else {
            (0, Some(self.remaining + 1))
        }
    }
}
