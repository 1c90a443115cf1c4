//! Record batch view, iterator, records and builder: round trips and the checks on
//! malformed headers (magic, batchLength, CRC, record count) and partial trailing batches.

use bytes::{Bytes, BytesMut};
use kafka_wire::records::{
    rewrite_record_set, set_base_offset, set_log_append_time, set_partition_leader_epoch,
    Compression, ControlRecordType, EndTransactionMarker, RecordBatch, RecordBatchBuilder,
    RecordBatches, RecordHeader, TimestampType, RECORD_BATCH_OVERHEAD,
};
use kafka_wire::DecodeError;

fn sample(base_offset: i64, n: usize) -> Bytes {
    let mut b = RecordBatchBuilder::new(base_offset)
        .producer(42, 3, 100)
        .partition_leader_epoch(5);
    for i in 0..n {
        let key = format!("k{i}");
        let value = vec![i as u8; i * 10];
        let headers = [
            RecordHeader::new("h", Some(b"v")),
            RecordHeader::new("n", None),
        ];
        b.append(
            1000 + i as i64 * 7,
            Some(key.as_bytes()),
            Some(&value),
            &headers,
        )
        .unwrap();
    }
    b.build().unwrap()
}

#[test]
fn built_batch_parses_with_header_fields_and_crc() {
    let bytes = sample(100, 5);
    let batch = RecordBatch::parse(bytes.clone()).unwrap();
    assert_eq!(batch.size(), bytes.len());
    assert_eq!(batch.base_offset(), 100);
    assert_eq!(batch.batch_length() as usize, bytes.len() - 12);
    assert_eq!(batch.partition_leader_epoch(), 5);
    assert_eq!(batch.magic(), 2);
    assert_eq!(batch.crc(), batch.compute_crc());
    assert_eq!(batch.compression(), Compression::None);
    assert_eq!(batch.timestamp_type(), TimestampType::CreateTime);
    assert!(!batch.is_transactional() && !batch.is_control());
    assert_eq!(batch.last_offset_delta(), 4);
    assert_eq!(batch.base_timestamp(), 1000);
    assert_eq!(batch.max_timestamp(), 1028);
    assert_eq!(batch.producer_id(), 42);
    assert_eq!(batch.producer_epoch(), 3);
    assert_eq!(batch.base_sequence(), 100);
    assert_eq!(batch.last_sequence(), 104);
    assert_eq!(batch.record_count(), 5);
    assert_eq!(batch.last_offset(), 104);
    assert_eq!(batch.next_offset(), 105);
}

#[test]
fn records_round_trip_with_offsets_timestamps_keys_values_headers() {
    let batch = RecordBatch::parse(sample(100, 5)).unwrap();
    let records: Vec<_> = batch.records().unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(records.len(), 5);
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r.offset, 100 + i as i64);
        assert_eq!(r.timestamp, 1000 + i as i64 * 7);
        assert_eq!(r.key.as_deref(), Some(format!("k{i}").as_bytes()));
        assert_eq!(r.value.as_deref(), Some(&vec![i as u8; i * 10][..]));
        assert_eq!(r.headers.len(), 2);
        assert_eq!(r.headers[0].key_str(), "h");
        assert_eq!(r.headers[0].value.as_deref(), Some(&b"v"[..]));
        assert_eq!(r.headers[1].value, None);
    }
}

#[test]
fn uncompressed_record_values_are_zero_copy_slices_of_the_batch() {
    let bytes = sample(0, 3);
    let range = bytes.as_ptr() as usize..bytes.as_ptr() as usize + bytes.len();
    let batch = RecordBatch::parse(bytes.clone()).unwrap();
    for r in batch.records().unwrap() {
        let v = r.unwrap().value.unwrap();
        if !v.is_empty() {
            assert!(range.contains(&(v.as_ptr() as usize)));
        }
    }
}

#[test]
fn null_key_and_value_and_empty_batch() {
    let mut b = RecordBatchBuilder::new(7);
    b.append(5, None, None, &[]).unwrap();
    let batch = RecordBatch::parse(b.build().unwrap()).unwrap();
    let r = batch.records().unwrap().next().unwrap().unwrap();
    assert_eq!((r.offset, r.timestamp, r.key, r.value), (7, 5, None, None));

    let empty = RecordBatch::parse(RecordBatchBuilder::new(3).build().unwrap()).unwrap();
    assert_eq!(empty.size(), RECORD_BATCH_OVERHEAD);
    assert_eq!(empty.record_count(), 0);
    assert_eq!(empty.records().unwrap().count(), 0);
}

#[test]
fn log_append_time_batches_give_every_record_the_max_timestamp() {
    let mut b = RecordBatchBuilder::new(0).timestamp_type(TimestampType::LogAppendTime);
    b.append(10, None, Some(b"a"), &[]).unwrap();
    b.append(30, None, Some(b"b"), &[]).unwrap();
    let batch = RecordBatch::parse(b.build().unwrap()).unwrap();
    let ts: Vec<i64> = batch
        .records()
        .unwrap()
        .map(|r| r.unwrap().timestamp)
        .collect();
    assert_eq!(ts, vec![30, 30]);
}

#[test]
fn corrupted_byte_is_bad_crc() {
    let bytes = sample(0, 3);
    for at in [21, 30, 61, bytes.len() - 1] {
        let mut m = BytesMut::from(&bytes[..]);
        m[at] ^= 0x01;
        assert!(
            matches!(
                RecordBatch::parse(m.freeze()),
                Err(DecodeError::BadCrc { .. })
            ),
            "byte {at}"
        );
    }
}

#[test]
fn magic_0_and_1_are_unsupported_magic() {
    for magic in [0u8, 1] {
        let mut m = BytesMut::from(&sample(0, 1)[..]);
        m[16] = magic;
        assert_eq!(
            RecordBatch::parse(m.clone().freeze()),
            Err(DecodeError::UnsupportedMagic(magic as i8))
        );
        let mut it = RecordBatches::new(m.freeze());
        assert_eq!(
            it.next(),
            Some(Err(DecodeError::UnsupportedMagic(magic as i8)))
        );
        assert_eq!(it.next(), None);
    }
}

#[test]
fn batch_length_must_match_the_bytes() {
    let bytes = sample(0, 2);
    assert!(matches!(
        RecordBatch::parse(bytes.slice(..bytes.len() - 1)),
        Err(DecodeError::Truncated { .. })
    ));
    let mut longer = BytesMut::from(&bytes[..]);
    longer.extend_from_slice(&[0]);
    assert!(matches!(
        RecordBatch::parse(longer.freeze()),
        Err(DecodeError::InvalidLength { .. })
    ));
    let mut small = BytesMut::from(&bytes[..]);
    small[8..12].copy_from_slice(&48i32.to_be_bytes());
    assert!(matches!(
        RecordBatch::parse(small.freeze()),
        Err(DecodeError::InvalidLength { .. })
    ));
}

#[test]
fn unknown_compression_codec_is_rejected() {
    let mut m = BytesMut::from(&sample(0, 1)[..]);
    m[22] |= 0x07;
    assert_eq!(
        RecordBatch::parse_without_crc(m.freeze()),
        Err(DecodeError::UnsupportedCompression(7))
    );
}

#[test]
fn record_count_larger_than_the_bytes_can_hold_is_invalid_length() {
    let mut m = BytesMut::from(&sample(0, 2)[..]);
    m[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    assert!(matches!(
        RecordBatch::parse_without_crc(m.clone().freeze()),
        Err(DecodeError::InvalidLength {
            what: "record count",
            ..
        })
    ));
    m[57..61].copy_from_slice(&(-1i32).to_be_bytes());
    assert!(matches!(
        RecordBatch::parse_without_crc(m.freeze()),
        Err(DecodeError::InvalidLength { .. })
    ));
}

#[test]
fn fewer_declared_records_than_present_is_an_error_after_the_last() {
    let mut m = BytesMut::from(&sample(0, 3)[..]);
    m[57..61].copy_from_slice(&2i32.to_be_bytes());
    let batch = RecordBatch::parse_without_crc(m.freeze()).unwrap();
    let results: Vec<_> = batch.records().unwrap().collect();
    assert_eq!(results.len(), 3);
    assert!(results[0].is_ok() && results[1].is_ok() && results[2].is_err());
}

#[test]
fn record_set_iterator_yields_whole_batches_and_stops_at_a_partial_tail() {
    let a = sample(0, 3);
    let b = sample(3, 2);
    let mut set = BytesMut::new();
    set.extend_from_slice(&a);
    set.extend_from_slice(&b);
    let whole = set.len();
    set.extend_from_slice(&sample(5, 4)[..40]);
    let set = set.freeze();
    let mut it = RecordBatches::new(set.clone());
    let got: Vec<_> = it.by_ref().collect::<Result<_, _>>().unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].as_bytes(), &a);
    assert_eq!(got[1].as_bytes(), &b);
    assert_eq!(got[1].base_offset(), 3);
    assert_eq!(it.whole_len(), whole);
    assert!(it.has_partial_tail());
    assert_eq!(it.remaining().len(), 40);
    let (w, tail) = RecordBatches::split_whole(set).unwrap();
    assert_eq!((w.len(), tail.len()), (whole, 40));
    // Fewer than 12 bytes is a partial tail too.
    let mut it = RecordBatches::new(a.slice(..5));
    assert_eq!(it.next(), None);
    assert_eq!(it.whole_len(), 0);
}

#[test]
fn record_set_iterator_reports_a_corrupt_batch_once_and_stops() {
    let mut set = BytesMut::from(&sample(0, 2)[..]);
    let first = set.len();
    set.extend_from_slice(&sample(2, 2));
    set[first + 70] ^= 0xff;
    set.extend_from_slice(&sample(4, 2));
    let mut it = RecordBatches::new(set.freeze());
    assert!(it.next().unwrap().is_ok());
    assert!(matches!(it.next(), Some(Err(DecodeError::BadCrc { .. }))));
    assert_eq!(it.next(), None);
    assert_eq!(it.whole_len(), first);
}

#[test]
fn base_offset_and_leader_epoch_are_rewritten_in_place_keeping_the_crc_valid() {
    let mut m = BytesMut::from(&sample(0, 3)[..]);
    set_base_offset(&mut m, 9_000).unwrap();
    set_partition_leader_epoch(&mut m, 77).unwrap();
    let batch = RecordBatch::parse(m.freeze()).unwrap();
    assert_eq!(batch.base_offset(), 9_000);
    assert_eq!(batch.partition_leader_epoch(), 77);
    assert_eq!(batch.next_offset(), 9_003);
    assert_eq!(
        batch.records().unwrap().last().unwrap().unwrap().offset,
        9_002
    );
    assert!(set_base_offset(&mut [0u8; 7], 1).is_err());
    assert!(set_partition_leader_epoch(&mut [0u8; 15], 1).is_err());
}

#[test]
fn rewrite_record_set_assigns_consecutive_offsets_to_every_batch() {
    let mut set = BytesMut::new();
    set.extend_from_slice(&sample(0, 3));
    set.extend_from_slice(&sample(0, 2));
    let next = rewrite_record_set(&mut set, 50, 4).unwrap();
    assert_eq!(next, 55);
    let batches: Vec<_> = RecordBatches::new(set.freeze())
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(batches[0].base_offset(), 50);
    assert_eq!(batches[1].base_offset(), 53);
    assert!(batches.iter().all(|b| b.partition_leader_epoch() == 4));
    let mut partial = BytesMut::from(&sample(0, 2)[..30]);
    assert!(rewrite_record_set(&mut partial, 0, 0).is_err());
}

#[test]
fn end_transaction_marker_control_batch_round_trips() {
    let marker = EndTransactionMarker {
        kind: ControlRecordType::Commit,
        coordinator_epoch: 12,
    };
    let bytes = RecordBatchBuilder::end_transaction_marker(40, 99, 2, 6, 1234, marker).unwrap();
    let batch = RecordBatch::parse(bytes).unwrap();
    assert!(batch.is_control() && batch.is_transactional());
    assert_eq!((batch.producer_id(), batch.producer_epoch()), (99, 2));
    assert_eq!(batch.base_sequence(), -1);
    let r = batch.records().unwrap().next().unwrap().unwrap();
    assert_eq!(r.offset, 40);
    assert_eq!(EndTransactionMarker::from_record(&r).unwrap(), marker);
    assert_eq!(
        ControlRecordType::from_key(r.key.as_deref()).unwrap(),
        ControlRecordType::Commit
    );
}

#[test]
fn log_append_time_is_stamped_in_place_with_a_new_crc() {
    let bytes = sample(0, 3);
    let mut m = BytesMut::from(&bytes[..]);
    assert_eq!(set_log_append_time(&mut m, 99_999).unwrap(), bytes.len());
    let batch = RecordBatch::parse(m.freeze()).unwrap();
    assert_eq!(batch.timestamp_type(), TimestampType::LogAppendTime);
    assert_eq!(batch.max_timestamp(), 99_999);
    assert_eq!((batch.producer_id(), batch.base_sequence()), (42, 100));
    assert!(batch
        .records()
        .unwrap()
        .all(|r| r.unwrap().timestamp == 99_999));
    assert!(set_log_append_time(&mut BytesMut::from(&bytes[..60])[..], 1).is_err());
}

#[test]
fn decoded_records_rebuild_into_an_equal_batch() {
    let bytes = sample(100, 4);
    let batch = RecordBatch::parse(bytes.clone()).unwrap();
    let mut b = RecordBatchBuilder::new(100)
        .producer(42, 3, 100)
        .partition_leader_epoch(5);
    for r in batch.records().unwrap() {
        b.append_record(&r.unwrap()).unwrap();
    }
    assert_eq!(b.build().unwrap(), bytes);
}
