//! Hostile frames fail cleanly and cheaply: input declaring huge counts returns a typed error
//! with under 64 KiB allocated (measured with a counting global allocator), where a decoder
//! that trusts counts would try to allocate gigabytes.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_wire::{ApiKey, DecodeError, RequestBody};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

const LIMIT: usize = 64 * 1024;

/// Decodes `frame` as a request body and returns the error and the bytes allocated meanwhile.
fn decode_measured(key: ApiKey, version: i16, frame: Bytes) -> (Result<(), DecodeError>, usize) {
    let region = Region::new(GLOBAL);
    let result = RequestBody::decode(key, version, &mut frame.clone()).map(drop);
    let stats = region.change();
    (result, stats.bytes_allocated)
}

/// A 25-byte FetchRequest v4 body: replica id, max wait, min bytes, max bytes, isolation
/// level, then a topic count of i32::MAX followed by four bytes.
fn fetch_v4_huge_topic_count() -> Bytes {
    let mut b = BytesMut::new();
    b.put_i32(-1); // replica id
    b.put_i32(500); // max wait
    b.put_i32(1); // min bytes
    b.put_i32(1 << 20); // max bytes
    b.put_i8(0); // isolation level
    b.put_i32(i32::MAX); // topic count
    b.put_slice(&[0, 1, b'x', 0]);
    assert_eq!(b.len(), 25);
    b.freeze()
}

/// A FetchRequest v12 body whose topics compact array declares u32::MAX - 1 elements.
fn fetch_v12_huge_compact_length() -> Bytes {
    let mut b = BytesMut::new();
    b.put_i32(-1); // replica id
    b.put_i32(500); // max wait
    b.put_i32(1); // min bytes
    b.put_i32(1 << 20); // max bytes
    b.put_i8(0); // isolation level
    b.put_i32(0); // session id
    b.put_i32(-1); // session epoch
    b.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]); // compact length u32::MAX
    b.put_slice(&[2, b'x', 0]);
    b.freeze()
}

#[test]
fn hostile_fetch_frames_fail_with_little_allocated() {
    let (result, allocated) = decode_measured(ApiKey::Fetch, 4, fetch_v4_huge_topic_count());
    assert!(
        matches!(result, Err(DecodeError::InvalidLength { .. })),
        "{result:?}"
    );
    assert!(
        allocated < LIMIT,
        "FetchRequest v4: {allocated} bytes allocated"
    );

    let (result, allocated) = decode_measured(ApiKey::Fetch, 12, fetch_v12_huge_compact_length());
    assert!(
        matches!(result, Err(DecodeError::InvalidLength { .. })),
        "{result:?}"
    );
    assert!(
        allocated < LIMIT,
        "FetchRequest v12: {allocated} bytes allocated"
    );

    // A nested count: one topic whose partition array declares i32::MAX elements.
    let mut b = BytesMut::from(&fetch_v4_huge_topic_count()[..21]);
    b.put_i32(1);
    b.put_i16(1);
    b.put_u8(b't');
    b.put_i32(i32::MAX);
    let (result, allocated) = decode_measured(ApiKey::Fetch, 4, b.freeze());
    assert!(result.is_err());
    assert!(
        allocated < LIMIT,
        "nested count: {allocated} bytes allocated"
    );

    // Every API and version on a frame of 0xff bytes: errors, little allocated.
    for key in ApiKey::ALL {
        let (lo, hi) = key.versions();
        for version in lo..=hi {
            let (_, allocated) = decode_measured(key, version, Bytes::from(vec![0x7f; 64]));
            assert!(
                allocated < LIMIT,
                "{key:?} v{version}: {allocated} bytes allocated"
            );
        }
    }
}
