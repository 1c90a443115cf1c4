//! Hostile input against a counting global allocator: a record batch declaring a record count
//! of `i32::MAX` (with a valid CRC) is refused with a typed error after allocating under
//! 64 KiB, whether it is parsed alone, found in a record set, or compressed. (`kafka-protocol`
//! reserves a vector for the declared count and aborts the process on the same bytes.)

use std::alloc::System;

use bytes::{Bytes, BytesMut};
use kafka_wire::records::{Compression, RecordBatch, RecordBatchBuilder, RecordBatches};
use kafka_wire::DecodeError;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const LIMIT: usize = 64 * 1024;

/// A batch of one small record whose header declares `i32::MAX` records; CRC valid.
fn hostile(codec: Compression) -> Bytes {
    let mut b = RecordBatchBuilder::new(0).compression(codec);
    b.append(0, Some(b"k"), Some(b"v"), &[]).unwrap();
    let mut m = BytesMut::from(&b.build().unwrap()[..]);
    m[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    let crc = crc32c::crc32c(&m[21..]);
    m[17..21].copy_from_slice(&crc.to_be_bytes());
    m.freeze()
}

fn allocated_by<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let region = Region::new(GLOBAL);
    let out = f();
    (out, region.change().bytes_allocated)
}

// One test function, so no other test allocates while a region is open.
#[test]
fn record_batch_with_record_count_i32_max_is_an_error_with_under_64_kib_allocated() {
    let bytes = hostile(Compression::None);
    assert!(bytes.len() < 100);

    let (r, n) = allocated_by(|| RecordBatch::parse(bytes.clone()));
    assert!(
        matches!(
            r,
            Err(DecodeError::InvalidLength {
                what: "record count",
                ..
            })
        ),
        "{r:?}"
    );
    assert!(n < LIMIT, "parse allocated {n} bytes");

    let (r, n) = allocated_by(|| RecordBatches::new(bytes.clone()).collect::<Vec<_>>());
    assert!(matches!(
        r.as_slice(),
        [Err(DecodeError::InvalidLength { .. })]
    ));
    assert!(n < LIMIT, "record set iteration allocated {n} bytes");

    // The records iterator refuses the count on its own too (header checked without it).
    let mut m = BytesMut::from(&bytes[..]);
    m[57..61].copy_from_slice(&1i32.to_be_bytes());
    let crc = crc32c::crc32c(&m[21..]);
    m[17..21].copy_from_slice(&crc.to_be_bytes());
    assert!(RecordBatch::parse(m.freeze()).is_ok());

    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        if !codec.is_available() {
            continue;
        }
        let bytes = hostile(codec);
        let batch = RecordBatch::parse(bytes).unwrap();
        let (r, n) = allocated_by(|| batch.records().map(|it| it.count()));
        assert!(
            matches!(r, Err(DecodeError::InvalidLength { .. })),
            "{codec:?}: {r:?}"
        );
        assert!(n < LIMIT, "{codec:?}: records() allocated {n} bytes");
    }
}
