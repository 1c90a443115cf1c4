//! The four record types the group coordinator writes to `__consumer_offsets`
//! (`OffsetCommitKey`/`OffsetCommitValue`, `GroupMetadataKey`/`GroupMetadataValue`): round
//! trips of pseudo-random values at every version, the `int16 version` + body framing of
//! Kafka's `GroupMetadataManager` checked against bytes written out by hand from the specs,
//! and fuzzing of the versioned decoders.

use std::fmt::Debug;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_wire::messages::{
    GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, OffsetCommitValue,
};
use kafka_wire::sample::Gen;
use kafka_wire::{DataRecord, DecodeError};

const SEEDS: u64 = 300;

fn round_trips<R: DataRecord + Debug + PartialEq>(sample: fn(&mut Gen, i16) -> R) {
    for version in R::MIN_VERSION..=R::MAX_VERSION {
        for seed in 0..SEEDS {
            let value = sample(&mut Gen::new(seed), version);
            let bytes = value.to_versioned_bytes(version).expect("encodes");
            assert_eq!(
                bytes.len(),
                value.encoded_len(version).expect("sized") + 2,
                "v{version} seed {seed}"
            );
            let (v, back) = R::from_versioned_bytes(bytes).expect("decodes");
            assert_eq!((v, &back), (version, &value), "v{version} seed {seed}");
        }
    }
}

#[test]
fn offset_commit_key_round_trips_at_every_version() {
    round_trips(OffsetCommitKey::sample);
}

#[test]
fn offset_commit_value_round_trips_at_every_version() {
    round_trips(OffsetCommitValue::sample);
}

#[test]
fn group_metadata_key_round_trips_at_every_version() {
    round_trips(GroupMetadataKey::sample);
}

#[test]
fn group_metadata_value_round_trips_at_every_version() {
    round_trips(GroupMetadataValue::sample);
}

fn string(b: &mut BytesMut, s: &str) {
    b.put_i16(s.len() as i16);
    b.put_slice(s.as_bytes());
}

#[test]
fn offset_commit_key_v1_is_version_group_topic_partition() {
    let mut expected = BytesMut::new();
    expected.put_i16(1);
    string(&mut expected, "my-group");
    string(&mut expected, "orders");
    expected.put_i32(7);
    let key = OffsetCommitKey {
        group: "my-group".into(),
        topic: "orders".into(),
        partition: 7,
        ..Default::default()
    };
    assert_eq!(key.to_versioned_bytes(1).unwrap(), expected.freeze());
}

#[test]
fn group_metadata_key_v2_is_version_and_group() {
    let mut expected = BytesMut::new();
    expected.put_i16(2);
    string(&mut expected, "g");
    let key = GroupMetadataKey {
        group: "g".into(),
        ..Default::default()
    };
    assert_eq!(key.to_versioned_bytes(2).unwrap(), expected.freeze());
}

#[test]
fn offset_commit_value_v3_has_leader_epoch_and_no_expire_timestamp() {
    let mut expected = BytesMut::new();
    expected.put_i16(3);
    expected.put_i64(42);
    expected.put_i32(5);
    string(&mut expected, "meta");
    expected.put_i64(1_700_000_000_000);
    let value = OffsetCommitValue {
        offset: 42,
        leader_epoch: 5,
        metadata: "meta".into(),
        commit_timestamp: 1_700_000_000_000,
        expire_timestamp: -1,
        ..Default::default()
    };
    let bytes = value.to_versioned_bytes(3).unwrap();
    assert_eq!(bytes, expected.freeze());
    let (_, back) = OffsetCommitValue::from_versioned_bytes(bytes).unwrap();
    assert_eq!(back, value);
}

#[test]
fn offset_commit_value_v1_carries_the_expire_timestamp() {
    let mut expected = BytesMut::new();
    expected.put_i16(1);
    expected.put_i64(9);
    string(&mut expected, "");
    expected.put_i64(100);
    expected.put_i64(200);
    let value = OffsetCommitValue {
        offset: 9,
        leader_epoch: -1,
        commit_timestamp: 100,
        expire_timestamp: 200,
        ..Default::default()
    };
    assert_eq!(value.to_versioned_bytes(1).unwrap(), expected.freeze());
}

#[test]
fn a_record_shorter_than_its_version_or_with_trailing_bytes_is_a_typed_error() {
    assert!(matches!(
        OffsetCommitKey::from_versioned_bytes(Bytes::from_static(&[0])),
        Err(DecodeError::Truncated { .. })
    ));
    let key = GroupMetadataKey {
        group: "g".into(),
        ..Default::default()
    };
    let mut b = BytesMut::from(&key.to_versioned_bytes(2).unwrap()[..]);
    b.put_u8(0);
    assert!(matches!(
        GroupMetadataKey::from_versioned_bytes(b.freeze()),
        Err(DecodeError::InvalidValue { .. })
    ));
    assert!(matches!(
        GroupMetadataKey::from_versioned_bytes(Bytes::from_static(&[0, 9, 0, 0])),
        Err(DecodeError::UnsupportedVersion { version: 9, .. })
    ));
}

/// Decodes arbitrary bytes with each versioned decoder; whatever decodes re-encodes at the
/// version read and decodes back equal.
fn recheck<R: DataRecord + Debug + PartialEq>(bytes: &[u8]) {
    if let Ok((version, value)) = R::from_versioned_bytes(Bytes::copy_from_slice(bytes)) {
        let again = value
            .to_versioned_bytes(version)
            .unwrap_or_else(|e| panic!("decoded v{version} does not encode: {e}"));
        let (v2, back) = R::from_versioned_bytes(again).expect("re-encoding decodes");
        assert_eq!((v2, back), (version, value));
    }
}

#[test]
fn fuzz_every_record_decoder() {
    bolero::check!()
        .with_iterations(20_000)
        .for_each(|bytes: &[u8]| {
            recheck::<OffsetCommitKey>(bytes);
            recheck::<OffsetCommitValue>(bytes);
            recheck::<GroupMetadataKey>(bytes);
            recheck::<GroupMetadataValue>(bytes);
        });
}

#[test]
fn fuzz_mutated_valid_records() {
    bolero::check!()
        .with_iterations(20_000)
        .for_each(|input: &[u8]| {
            if input.len() < 3 {
                return;
            }
            let seed = u64::from(input[0]) | (u64::from(input[1]) << 8);
            let version = 4 - i16::from(input[2] % 5);
            let value = GroupMetadataValue::sample(&mut Gen::new(seed), version);
            let mut bytes = BytesMut::from(&value.to_versioned_bytes(version).unwrap()[..]);
            for (i, b) in input[3..].iter().enumerate() {
                if bytes.is_empty() {
                    break;
                }
                let at = (usize::from(*b) * 31 + i) % bytes.len();
                bytes[at] ^= b.rotate_left(3);
            }
            recheck::<GroupMetadataValue>(&bytes);
            recheck::<OffsetCommitValue>(&bytes);
        });
}
