//! Property tests: any records built into a batch (any codec compiled in, any producer
//! fields) parse back to the same records; rewriting the base offset in place shifts every
//! offset and keeps the CRC valid; a record set cut anywhere yields exactly the whole batches
//! before the cut.

use bytes::{Bytes, BytesMut};
use kafka_wire::records::{
    set_base_offset, Compression, RecordBatch, RecordBatchBuilder, RecordBatches, RecordHeader,
};
use proptest::prelude::*;

type Input = (
    i64,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Option<Vec<u8>>)>,
);

fn record() -> impl Strategy<Value = Input> {
    (
        any::<i64>(),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..200)),
        proptest::collection::vec(
            (
                "[a-z\u{e9}]{0,6}",
                proptest::option::of(proptest::collection::vec(any::<u8>(), 0..10)),
            ),
            0..3,
        ),
    )
}

fn codec() -> impl Strategy<Value = Compression> {
    let available: Vec<Compression> = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ]
    .into_iter()
    .filter(|c| c.is_available())
    .collect();
    proptest::sample::select(available)
}

fn build(
    base_offset: i64,
    codec: Compression,
    producer: (i64, i16, i32),
    records: &[Input],
) -> Bytes {
    let mut b = RecordBatchBuilder::new(base_offset)
        .compression(codec)
        .producer(producer.0, producer.1, producer.2);
    for (ts, k, v, hs) in records {
        let hs: Vec<RecordHeader> = hs
            .iter()
            .map(|(k, v)| RecordHeader::new(k, v.as_deref()))
            .collect();
        b.append(*ts, k.as_deref(), v.as_deref(), &hs).unwrap();
    }
    b.build().unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn built_batches_parse_back_to_the_same_records(
        base_offset in 0i64..i64::MAX / 2,
        codec in codec(),
        producer in (any::<i64>(), any::<i16>(), 0i32..i32::MAX),
        records in proptest::collection::vec(record(), 0..12),
    ) {
        let bytes = build(base_offset, codec, producer, &records);
        let batch = RecordBatch::parse(bytes).unwrap();
        prop_assert_eq!(batch.compression(), codec);
        prop_assert_eq!(batch.record_count() as usize, records.len());
        prop_assert_eq!((batch.producer_id(), batch.producer_epoch(), batch.base_sequence()), producer);
        if !records.is_empty() {
            prop_assert_eq!(batch.next_offset(), base_offset + records.len() as i64);
            prop_assert_eq!(batch.max_timestamp(), records.iter().map(|r| r.0).max().unwrap());
        }
        let got: Vec<_> = batch.records().unwrap().collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(got.len(), records.len());
        for (i, (g, w)) in got.iter().zip(&records).enumerate() {
            prop_assert_eq!(g.offset, base_offset + i as i64);
            prop_assert_eq!(g.timestamp, w.0);
            prop_assert_eq!(g.key.as_deref(), w.1.as_deref());
            prop_assert_eq!(g.value.as_deref(), w.2.as_deref());
            prop_assert_eq!(g.headers.len(), w.3.len());
            for (gh, (k, v)) in g.headers.iter().zip(&w.3) {
                prop_assert_eq!(gh.key_str(), k.as_str());
                prop_assert_eq!(gh.value.as_deref(), v.as_deref());
            }
        }
    }

    #[test]
    fn base_offset_rewritten_in_place_shifts_offsets_and_keeps_the_crc(
        codec in codec(),
        records in proptest::collection::vec(record(), 1..6),
        new_base in 0i64..i64::MAX / 2,
    ) {
        let bytes = build(0, codec, (-1, -1, -1), &records);
        let mut m = BytesMut::from(&bytes[..]);
        set_base_offset(&mut m, new_base).unwrap();
        let batch = RecordBatch::parse(m.freeze()).unwrap();
        let offsets: Vec<i64> = batch.records().unwrap().map(|r| r.unwrap().offset).collect();
        let want: Vec<i64> = (0..records.len() as i64).map(|i| new_base + i).collect();
        prop_assert_eq!(offsets, want);
    }

    #[test]
    fn record_set_cut_anywhere_yields_the_whole_batches_before_the_cut(
        sizes in proptest::collection::vec(0usize..5, 1..5),
        cut_frac in 0.0f64..=1.0,
    ) {
        let mut set = BytesMut::new();
        let mut ends = Vec::new();
        let mut offset = 0;
        for n in &sizes {
            let recs: Vec<Input> = (0..*n).map(|i| (i as i64, None, Some(vec![1; i]), vec![])).collect();
            set.extend_from_slice(&build(offset, Compression::None, (-1, -1, -1), &recs));
            offset += (*n).max(1) as i64;
            ends.push(set.len());
        }
        let cut = (set.len() as f64 * cut_frac) as usize;
        let mut it = RecordBatches::new(set.freeze().slice(..cut));
        let got = it.by_ref().collect::<Result<Vec<_>, _>>().unwrap();
        let whole: Vec<usize> = ends.iter().copied().filter(|e| *e <= cut).collect();
        prop_assert_eq!(got.len(), whole.len());
        prop_assert_eq!(it.whole_len(), whole.last().copied().unwrap_or(0));
        prop_assert_eq!(it.has_partial_tail(), it.whole_len() < cut);
    }
}
