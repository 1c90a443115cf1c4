//! [`RecordBatches`]: iterates the batches of a record set (concatenated batches, as in a
//! fetch response or a log segment), yielding whole batches as zero-copy slices and stopping
//! cleanly at a partial trailing batch.

use bytes::Bytes;

use super::batch::{claimed_size, RecordBatch, LOG_OVERHEAD};
use crate::DecodeError;

/// An iterator over the record batches of a record set.
///
/// Yields `Ok(batch)` for each whole batch (checked as [`RecordBatch::parse`] does, CRC
/// included unless [`RecordBatches::without_crc_check`] was called). A trailing partial batch,
/// which fetch responses may carry, ends the iteration without an error:
/// [`RecordBatches::whole_len`] then tells how many leading bytes were whole batches. A
/// malformed batch yields one `Err` and ends the iteration.
#[derive(Debug, Clone)]
pub struct RecordBatches {
    bytes: Bytes,
    pos: usize,
    check_crc: bool,
    done: bool,
}

impl RecordBatches {
    /// Iterates the batches of `record_set`.
    pub fn new(record_set: Bytes) -> RecordBatches {
        RecordBatches {
            bytes: record_set,
            pos: 0,
            check_crc: true,
            done: false,
        }
    }

    /// Skips the CRC check of each batch.
    #[must_use]
    pub fn without_crc_check(mut self) -> RecordBatches {
        self.check_crc = false;
        self
    }

    /// Bytes of whole batches yielded so far; after the iteration ended without an error,
    /// the length of the record set's prefix made of whole batches.
    pub fn whole_len(&self) -> usize {
        self.pos
    }

    /// The bytes not yet yielded (after the end: the partial trailing batch, if any).
    pub fn remaining(&self) -> Bytes {
        self.bytes.slice(self.pos..)
    }

    /// Whether bytes remain after the last whole batch.
    pub fn has_partial_tail(&self) -> bool {
        self.pos < self.bytes.len()
    }

    /// Splits `record_set` into its prefix of whole batches and the partial tail, checking
    /// every whole batch (CRC included).
    pub fn split_whole(record_set: Bytes) -> Result<(Bytes, Bytes), DecodeError> {
        let mut it = RecordBatches::new(record_set.clone());
        for batch in it.by_ref() {
            batch?;
        }
        let whole = it.whole_len();
        Ok((record_set.slice(..whole), record_set.slice(whole..)))
    }
}

impl Iterator for RecordBatches {
    type Item = Result<RecordBatch, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let rest = &self.bytes[self.pos..];
        if rest.len() < LOG_OVERHEAD {
            self.done = true;
            return None;
        }
        let size = match claimed_size(rest) {
            Ok(size) => size,
            Err(e) => {
                self.done = true;
                return Some(Err(e));
            }
        };
        if rest.len() < size {
            self.done = true;
            return None;
        }
        let slice = self.bytes.slice(self.pos..self.pos + size);
        let parsed = if self.check_crc {
            RecordBatch::parse(slice)
        } else {
            RecordBatch::parse_without_crc(slice)
        };
        match parsed {
            Ok(batch) => {
                self.pos += size;
                Some(Ok(batch))
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
