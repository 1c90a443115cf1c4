//! Bounded randomized fuzzing (bolero; a fixed number of inputs under `cargo test`) of the
//! record batch parser, the record set iterator, the record iterator and the decompressors:
//! no input panics, and none allocates more than a small multiple of its size.
//!
//! Random bytes rarely carry a valid CRC, so the record iterator is also fed batches whose
//! header and records section come from the input and whose `batchLength` and CRC are fixed
//! up to match.

use std::alloc::System;
use std::sync::Mutex;

use bytes::{Bytes, BytesMut};
use kafka_wire::records::{RecordBatch, RecordBatches};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Serialises the tests of this binary so that allocation counts are per input.
static SERIAL: Mutex<()> = Mutex::new(());

const ITERATIONS: usize = 20_000;
const MAX_DECOMPRESSED: usize = 256 * 1024;

/// Allocation allowed for an input of `len` bytes: a multiple of it, plus the bounded
/// decompression output and the decompressors' fixed state (a zstd window is up to 2 MiB).
fn bound(len: usize) -> usize {
    16 * len + 4 * MAX_DECOMPRESSED + (4 << 20)
}

fn drain_batch(batch: &RecordBatch) {
    let _ = batch.verify_crc();
    let _ = (
        batch.last_offset(),
        batch.next_offset(),
        batch.last_sequence(),
    );
    if let Ok(records) = batch.records_bounded(MAX_DECOMPRESSED) {
        for r in records {
            if r.is_err() {
                break;
            }
        }
    }
}

fn check_bounded(len: usize, f: impl FnOnce()) {
    let region = Region::new(GLOBAL);
    f();
    let n = region.change().bytes_allocated;
    assert!(n <= bound(len), "{n} bytes allocated for {len} input bytes");
}

#[test]
fn fuzz_record_set_iterator_and_batch_parser_on_arbitrary_bytes() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    bolero::check!()
        .with_iterations(ITERATIONS)
        .with_max_len(4096)
        .for_each(|input: &[u8]| {
            let bytes = Bytes::copy_from_slice(input);
            check_bounded(input.len(), || {
                let mut it = RecordBatches::new(bytes.clone()).without_crc_check();
                for batch in it.by_ref() {
                    match batch {
                        Ok(b) => drain_batch(&b),
                        Err(_) => break,
                    }
                }
                assert!(it.whole_len() <= bytes.len());
                let _ = RecordBatch::parse(bytes.clone());
            });
        });
}

/// Turns arbitrary bytes into a batch that passes the header and CRC checks: the input is
/// laid over a 61-byte header with magic 2, then `batchLength` and the CRC are fixed.
fn fixed_up_batch(input: &[u8]) -> Bytes {
    let mut m = BytesMut::zeroed(61);
    let head = input.len().min(61);
    m[..head].copy_from_slice(&input[..head]);
    m.extend_from_slice(&input[head..]);
    m[16] = 2;
    let len = (m.len() - 12) as i32;
    m[8..12].copy_from_slice(&len.to_be_bytes());
    let crc = crc32c::crc32c(&m[21..]);
    m[17..21].copy_from_slice(&crc.to_be_bytes());
    m.freeze()
}

#[test]
fn fuzz_record_iterator_and_decompressors_behind_a_valid_header() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    bolero::check!()
        .with_iterations(ITERATIONS)
        .with_max_len(4096)
        .for_each(|input: &[u8]| {
            let bytes = fixed_up_batch(input);
            check_bounded(bytes.len(), || {
                if let Ok(batch) = RecordBatch::parse(bytes.clone()) {
                    drain_batch(&batch);
                }
            });
        });
}

#[test]
fn fuzz_record_iterator_with_a_plausible_record_count() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    bolero::check!()
        .with_iterations(ITERATIONS)
        .with_max_len(2048)
        .for_each(|input: &[u8]| {
            // Uncompressed, count from the first byte, records section from the rest.
            let mut header = vec![0u8; 61];
            header[57..61].copy_from_slice(
                &i32::from(input.first().copied().unwrap_or(0) % 16).to_be_bytes(),
            );
            header.extend_from_slice(input.get(1..).unwrap_or(&[]));
            let bytes = fixed_up_batch(&header);
            check_bounded(bytes.len(), || {
                if let Ok(batch) = RecordBatch::parse(bytes.clone()) {
                    drain_batch(&batch);
                }
            });
        });
}

/// A valid batch of records with keys, values and headers, for mutation.
fn seed_batch() -> Bytes {
    let mut b = kafka_wire::records::RecordBatchBuilder::new(5);
    for i in 0..6u8 {
        let h = [kafka_wire::records::RecordHeader::new("h", Some(&[i; 3]))];
        b.append(i64::from(i), Some(&[i; 2]), Some(&[i; 9]), &h)
            .unwrap();
    }
    b.build().unwrap()
}

#[test]
fn fuzz_record_iterator_on_mutated_valid_batches() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let seed = seed_batch();
    bolero::check!()
        .with_iterations(ITERATIONS)
        .with_max_len(64)
        .for_each(|input: &[u8]| {
            // Input pairs (position, xor) mutate the batch after its CRC field.
            let mut m = BytesMut::from(&seed[..]);
            for pair in input.chunks(2) {
                let at = 21 + usize::from(pair[0]) % (m.len() - 21);
                m[at] ^= pair.get(1).copied().unwrap_or(0xff);
            }
            let bytes = fixed_up_batch(&m);
            check_bounded(bytes.len(), || {
                if let Ok(batch) = RecordBatch::parse(bytes.clone()) {
                    drain_batch(&batch);
                }
            });
        });
}
