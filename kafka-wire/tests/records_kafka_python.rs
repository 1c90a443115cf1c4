//! Vectors from a third implementation: batches written by kafka-python's magic v2 builder
//! (a port of the Java client's), one per codec, made by `records_vectors/make_vectors.py`.
//! Its Snappy batches use the xerial framing, as the Java client's do. Each parses here with
//! its CRC checked and yields the records the script wrote; the uncompressed one is
//! byte-for-byte what our builder writes for the same records.

use bytes::Bytes;
use kafka_wire::records::{Compression, RecordBatch, RecordBatchBuilder, RecordHeader};

struct Want {
    timestamp: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<RecordHeader>,
}

fn want() -> Vec<Want> {
    (0..25u32)
        .map(|i| Want {
            timestamp: 1_700_000_000_000 + 3 * i64::from(i),
            key: (i % 3 != 0).then(|| format!("key-{i}").into_bytes()),
            value: (i % 7 != 5).then(|| vec![(i % 251) as u8; (i * 37 % 300) as usize]),
            headers: if i % 2 == 1 {
                vec![RecordHeader::new(
                    &format!("h{i}"),
                    Some(format!("v{i}").as_bytes()),
                )]
            } else {
                vec![]
            },
        })
        .collect()
}

fn vector(codec: Compression) -> Bytes {
    Bytes::from_static(match codec {
        Compression::None => include_bytes!("records_vectors/kafka-python-none.bin"),
        Compression::Gzip => include_bytes!("records_vectors/kafka-python-gzip.bin"),
        Compression::Snappy => include_bytes!("records_vectors/kafka-python-snappy.bin"),
        Compression::Lz4 => include_bytes!("records_vectors/kafka-python-lz4.bin"),
        Compression::Zstd => include_bytes!("records_vectors/kafka-python-zstd.bin"),
    })
}

#[test]
fn kafka_python_batches_parse_with_crc_and_yield_its_records_for_every_codec() {
    for codec in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let batch = RecordBatch::parse(vector(codec)).unwrap();
        assert_eq!(batch.compression(), codec);
        assert_eq!((batch.producer_id(), batch.producer_epoch()), (4242, 7));
        assert_eq!(batch.base_sequence(), 90);
        assert_eq!(batch.next_offset(), 25);
        if !codec.is_available() {
            assert!(batch.records().is_err());
            continue;
        }
        let got: Vec<_> = batch
            .records()
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("{codec:?}: {e}"));
        let want = want();
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.offset, i as i64, "{codec:?}");
            assert_eq!(g.timestamp, w.timestamp);
            assert_eq!(g.key.as_deref(), w.key.as_deref());
            assert_eq!(g.value.as_deref(), w.value.as_deref());
            assert_eq!(g.headers, w.headers);
        }
    }
}

#[cfg(feature = "snappy")]
#[test]
fn kafka_python_snappy_vector_is_xerial_framed() {
    let v = vector(Compression::Snappy);
    assert_eq!(&v[61..69], b"\x82SNAPPY\0");
}

#[test]
fn our_builder_writes_the_uncompressed_kafka_python_batch_byte_for_byte() {
    let mut b = RecordBatchBuilder::new(0)
        .producer(4242, 7, 90)
        .partition_leader_epoch(0);
    for w in want() {
        b.append(
            w.timestamp,
            w.key.as_deref(),
            w.value.as_deref(),
            &w.headers,
        )
        .unwrap();
    }
    assert_eq!(b.build().unwrap(), vector(Compression::None));
}
