//! Records inside a batch: [`Record`], [`RecordHeader`] and the lazy [`Records`] iterator
//! that decodes the varint fields one record at a time.
//!
//! Record layout: `length varint`, `attributes int8`, `timestampDelta varlong`,
//! `offsetDelta varint`, `keyLength varint` + key, `valueLength varint` + value,
//! `headerCount varint`, then per header `keyLength varint` + key (UTF-8),
//! `valueLength varint` + value. Lengths of -1 mean null.

use bytes::Bytes;

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
    pos: usize,
    remaining: usize,
    base_offset: i64,
    base_timestamp: i64,
    log_append_time: Option<i64>,
    done: bool,
}

fn invalid_len(what: &'static str, length: i64) -> DecodeError {
    DecodeError::InvalidLength { what, length }
}

/// Reads a varint length (`-1` meaning null) from `cur`, a tail of `buf` ending at `end`,
/// and returns that many bytes as a zero-copy slice of `buf`.
fn take_nullable(
    buf: &Bytes,
    cur: &mut &[u8],
    end: usize,
    what: &'static str,
) -> Result<Option<Bytes>, DecodeError> {
    let len = get_varint(cur)?;
    if len == -1 {
        return Ok(None);
    }
    if len < 0 || len as usize > cur.len() {
        return Err(invalid_len(what, i64::from(len)));
    }
    let at = end - cur.len();
    *cur = &cur[len as usize..];
    Ok(Some(buf.slice(at..at + len as usize)))
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
            pos: 0,
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
        let buf = &self.buf;
        let mut cur = &buf[self.pos..];
        let length = get_varint(&mut cur)?;
        if length < 0 || length as usize > cur.len() {
            return Err(invalid_len("record length", i64::from(length)));
        }
        let end = buf.len() - cur.len() + length as usize;
        let mut r = &cur[..length as usize];
        let Some((_attributes, rest)) = r.split_first() else {
            return Err(DecodeError::Truncated {
                needed: 1,
                remaining: 0,
            });
        };
        r = rest;
        let timestamp_delta = get_varlong(&mut r)?;
        let offset_delta = get_varint(&mut r)?;
        let key = take_nullable(buf, &mut r, end, "record key length")?;
        let value = take_nullable(buf, &mut r, end, "record value length")?;
        let header_count = get_varint(&mut r)?;
        if header_count < 0 || header_count as usize > r.len() / 2 {
            return Err(invalid_len("record header count", i64::from(header_count)));
        }
        let mut headers = Vec::with_capacity(header_count as usize);
        for _ in 0..header_count {
            let key = take_nullable(buf, &mut r, end, "record header key length")?
                .ok_or(invalid_len("record header key length", -1))?;
            if std::str::from_utf8(&key).is_err() {
                return Err(DecodeError::InvalidUtf8);
            }
            let value = take_nullable(buf, &mut r, end, "record header value length")?;
            headers.push(RecordHeader { key, value });
        }
        if !r.is_empty() {
            return Err(invalid_len(
                "record length (bytes left inside the record)",
                i64::from(length),
            ));
        }
        self.pos = end;
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
            if self.pos < self.buf.len() {
                return Some(Err(invalid_len(
                    "record batch (bytes left after the last record)",
                    (self.buf.len() - self.pos) as i64,
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
