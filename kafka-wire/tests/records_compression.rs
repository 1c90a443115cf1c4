//! Compression: bounded decompression for every codec compiled in, Snappy in both the plain
//! (librdkafka) and xerial-framed (Java client) forms, and codecs that are not compiled in.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_wire::records::{Compression, RecordBatch, RecordBatchBuilder};
use kafka_wire::DecodeError;

const ALL: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

/// Replaces the records section of an uncompressed batch with `body`, marks it with `codec`
/// and fixes `batchLength` and the CRC.
#[allow(dead_code)]
fn rewrap(batch: &Bytes, codec: u8, body: &[u8]) -> Bytes {
    let mut m = BytesMut::from(&batch[..61]);
    m.put_slice(body);
    let len = (m.len() - 12) as i32;
    m[8..12].copy_from_slice(&len.to_be_bytes());
    m[22] = (m[22] & !0x07) | codec;
    let crc = crc32c::crc32c(&m[21..]);
    m[17..21].copy_from_slice(&crc.to_be_bytes());
    m.freeze()
}

#[test]
fn decompression_beyond_the_bound_is_an_error_for_every_codec() {
    for codec in ALL
        .into_iter()
        .filter(|c| c.is_available() && *c != Compression::None)
    {
        let mut b = RecordBatchBuilder::new(0).compression(codec);
        b.append(1, None, Some(&vec![0u8; 1 << 20]), &[]).unwrap();
        let bytes = b.build().unwrap();
        assert!(
            bytes.len() < 64 * 1024,
            "{codec:?} compressed to {}",
            bytes.len()
        );
        let batch = RecordBatch::parse(bytes).unwrap();
        assert!(
            matches!(
                batch.records_bounded(64 * 1024),
                Err(DecodeError::Decompression(_))
            ),
            "{codec:?}"
        );
        let r = batch
            .records_bounded(2 << 20)
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        assert_eq!(r.value.unwrap().len(), 1 << 20);
    }
}

#[test]
fn record_count_beyond_the_decompression_bound_is_refused_before_decompressing() {
    for codec in ALL
        .into_iter()
        .filter(|c| c.is_available() && *c != Compression::None)
    {
        let mut b = RecordBatchBuilder::new(0).compression(codec);
        b.append(1, None, Some(b"x"), &[]).unwrap();
        let mut m = BytesMut::from(&b.build().unwrap()[..]);
        m[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        let batch = RecordBatch::parse_without_crc(m.freeze()).unwrap();
        assert!(matches!(
            batch.records(),
            Err(DecodeError::InvalidLength { .. })
        ));
    }
}

#[cfg(feature = "snappy")]
#[test]
fn snappy_xerial_framing_as_java_clients_write_it_is_decoded() {
    let mut b = RecordBatchBuilder::new(10);
    for i in 0..50u8 {
        b.append(i64::from(i), Some(&[i]), Some(&vec![i; 3000]), &[])
            .unwrap();
    }
    let plain = b.build().unwrap();
    let body = &plain[61..];
    // xerial: magic, version 1, compatible version 1, then length-prefixed blocks.
    let mut framed = vec![
        0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1,
    ];
    for chunk in body.chunks(32 * 1024) {
        let c = snap::raw::Encoder::new().compress_vec(chunk).unwrap();
        framed.extend_from_slice(&(c.len() as u32).to_be_bytes());
        framed.extend_from_slice(&c);
    }
    let batch = RecordBatch::parse(rewrap(&plain, 2, &framed)).unwrap();
    let want: Vec<_> = RecordBatch::parse(plain)
        .unwrap()
        .records()
        .unwrap()
        .collect();
    let got: Vec<_> = batch.records().unwrap().collect();
    assert_eq!(got.len(), 50);
    assert_eq!(got, want);

    // A truncated block length is an error, not a panic.
    framed.truncate(framed.len() - 3);
    let batch = RecordBatch::parse(rewrap(&batch.into_bytes(), 2, &framed)).unwrap();
    assert!(batch.records().is_err());
}

#[cfg(feature = "snappy")]
#[test]
fn snappy_block_declaring_more_than_it_can_expand_to_is_refused() {
    let mut b = RecordBatchBuilder::new(0);
    b.append(0, None, Some(b"x"), &[]).unwrap();
    let plain = b.build().unwrap();
    // Declares 2^28 bytes of output from a handful of input bytes.
    let body = [0x80, 0x80, 0x80, 0x80, 0x01, 0x00, 0x41];
    let batch = RecordBatch::parse(rewrap(&plain, 2, &body)).unwrap();
    assert!(matches!(
        batch.records(),
        Err(DecodeError::Decompression(_))
    ));
}

#[cfg(not(feature = "gzip"))]
#[test]
fn codec_not_compiled_in_is_unsupported_compression() {
    let mut b = RecordBatchBuilder::new(0);
    b.append(0, None, Some(b"x"), &[]).unwrap();
    let batch = RecordBatch::parse(rewrap(&b.build().unwrap(), 1, b"junk")).unwrap();
    assert_eq!(
        batch.records().err(),
        Some(DecodeError::UnsupportedCompression(1))
    );
    let mut b = RecordBatchBuilder::new(0).compression(Compression::Gzip);
    b.append(0, None, Some(b"x"), &[]).unwrap();
    assert!(b.build().is_err());
}

#[cfg(feature = "zstd")]
#[test]
fn zstd_frame_declaring_a_1_gib_window_is_refused() {
    let mut b = RecordBatchBuilder::new(0);
    b.append(0, None, Some(b"x"), &[]).unwrap();
    let plain = b.build().unwrap();
    // Magic, frame header descriptor 0, window descriptor for 2^30, then a raw last block.
    let body = [
        0x28,
        0xb5,
        0x2f,
        0xfd,
        0x00,
        20 << 3,
        0x09,
        0x00,
        0x00,
        b'x',
    ];
    let batch = RecordBatch::parse(rewrap(&plain, 4, &body)).unwrap();
    assert!(matches!(
        batch.records(),
        Err(DecodeError::Decompression(_))
    ));
    // The same frame with a 1 MiB window decompresses (to one byte, too short for a record).
    let mut small = body;
    small[5] = 10 << 3;
    let batch = RecordBatch::parse(rewrap(&plain, 4, &small)).unwrap();
    assert!(matches!(
        batch.records(),
        Err(DecodeError::InvalidLength { .. })
    ));
}
