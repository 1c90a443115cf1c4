//! The coordinator's view of the `__consumer_offsets` records against `kafka-wire`'s generated
//! record types it is written with: every version `kafka-wire` writes is read back field for
//! field (the mapping drops or swaps no field), and every record the coordinator writes is at
//! the version Kafka writes and decodes with `kafka-wire` to the same values.

use kafka_group_coordinator::records::{
    GroupMetadataValue, MemberMetadataValue, OffsetCommitValue, RecordKey,
};
use kafka_wire::messages as wire;
use kafka_wire::sample::Gen;
use kafka_wire::DataRecord;

const SEEDS: u64 = 200;

fn to_wire_group(v: &GroupMetadataValue) -> wire::GroupMetadataValue {
    wire::GroupMetadataValue {
        protocol_type: v.protocol_type.as_str().into(),
        generation: v.generation,
        protocol: v.protocol.as_deref().map(Into::into),
        leader: v.leader.as_deref().map(Into::into),
        current_state_timestamp: v.current_state_timestamp,
        members: v
            .members
            .iter()
            .map(|m| wire::group_metadata_value::MemberMetadata {
                member_id: m.member_id.as_str().into(),
                group_instance_id: m.group_instance_id.as_deref().map(Into::into),
                client_id: m.client_id.as_str().into(),
                client_host: m.client_host.as_str().into(),
                rebalance_timeout: m.rebalance_timeout,
                session_timeout: m.session_timeout,
                subscription: m.subscription.clone(),
                assignment: m.assignment.clone(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

#[test]
fn every_offset_commit_value_version_kafka_wire_writes_is_read_back() {
    for version in wire::OffsetCommitValue::MIN_VERSION..=wire::OffsetCommitValue::MAX_VERSION {
        for seed in 0..SEEDS {
            let w = wire::OffsetCommitValue::sample(&mut Gen::new(seed), version);
            let bytes = w.to_versioned_bytes(version).expect("encodes");
            let mine = OffsetCommitValue::decode(&bytes).expect("decodes");
            assert_eq!(mine.offset, w.offset, "v{version} seed {seed}");
            assert_eq!(mine.leader_epoch, w.leader_epoch, "v{version} seed {seed}");
            assert_eq!(
                mine.metadata,
                w.metadata.to_string(),
                "v{version} seed {seed}"
            );
            assert_eq!(mine.commit_timestamp, w.commit_timestamp);
            assert_eq!(mine.expire_timestamp, w.expire_timestamp);
        }
    }
}

#[test]
fn every_group_metadata_value_version_kafka_wire_writes_is_read_back() {
    for version in wire::GroupMetadataValue::MIN_VERSION..=wire::GroupMetadataValue::MAX_VERSION {
        for seed in 0..SEEDS {
            let w = wire::GroupMetadataValue::sample(&mut Gen::new(seed), version);
            let bytes = w.to_versioned_bytes(version).expect("encodes");
            let mine = GroupMetadataValue::decode(&bytes).expect("decodes");
            // Only the fields of the version: compare through kafka-wire's type.
            let mut expected = w.clone();
            expected.unknown_tagged_fields = Default::default();
            for m in &mut expected.members {
                m.unknown_tagged_fields = Default::default();
            }
            assert_eq!(to_wire_group(&mine), expected, "v{version} seed {seed}");
        }
    }
}

#[test]
fn keys_kafka_wire_writes_are_read_back() {
    for seed in 0..SEEDS {
        for version in 0..=1 {
            let w = wire::OffsetCommitKey::sample(&mut Gen::new(seed), version);
            let bytes = w.to_versioned_bytes(version).expect("encodes");
            assert_eq!(
                RecordKey::decode(&bytes).expect("decodes"),
                Some(RecordKey::OffsetCommit {
                    group: w.group.to_string(),
                    topic: w.topic.to_string(),
                    partition: w.partition,
                })
            );
        }
        let w = wire::GroupMetadataKey::sample(&mut Gen::new(seed), 2);
        let bytes = w.to_versioned_bytes(2).expect("encodes");
        assert_eq!(
            RecordKey::decode(&bytes).expect("decodes"),
            Some(RecordKey::GroupMetadata {
                group: w.group.to_string()
            })
        );
    }
}

#[test]
fn what_the_coordinator_writes_decodes_with_kafka_wire() {
    let key = RecordKey::OffsetCommit {
        group: "g".into(),
        topic: "t".into(),
        partition: 7,
    };
    let (v, k) = wire::OffsetCommitKey::from_versioned_bytes(key.encode().expect("encodes"))
        .expect("decodes");
    assert_eq!(
        (v, k.group.to_string(), k.topic.to_string(), k.partition),
        (1, "g".into(), "t".into(), 7)
    );
    let (v, k) = wire::GroupMetadataKey::from_versioned_bytes(
        RecordKey::GroupMetadata { group: "g".into() }
            .encode()
            .expect("encodes"),
    )
    .expect("decodes");
    assert_eq!((v, k.group.to_string()), (2, "g".into()));
    for expire in [-1, 99] {
        let value = OffsetCommitValue {
            offset: 5,
            leader_epoch: if expire < 0 { 3 } else { -1 },
            metadata: "m".into(),
            commit_timestamp: 10,
            expire_timestamp: expire,
        };
        let (v, w) =
            wire::OffsetCommitValue::from_versioned_bytes(value.encode().expect("encodes"))
                .expect("decodes");
        assert_eq!(v, if expire < 0 { 3 } else { 1 });
        assert_eq!(
            (
                w.offset,
                w.leader_epoch,
                w.metadata.to_string(),
                w.commit_timestamp,
                w.expire_timestamp
            ),
            (5, value.leader_epoch, "m".into(), 10, expire)
        );
    }
    let group = GroupMetadataValue {
        protocol_type: "consumer".into(),
        generation: 3,
        protocol: Some("range".into()),
        leader: Some("m-1".into()),
        current_state_timestamp: 1234,
        members: vec![MemberMetadataValue {
            member_id: "m-1".into(),
            group_instance_id: Some("i".into()),
            client_id: "c".into(),
            client_host: "/h".into(),
            rebalance_timeout: 300_000,
            session_timeout: 10_000,
            subscription: bytes::Bytes::from_static(b"s"),
            assignment: bytes::Bytes::from_static(b"a"),
        }],
    };
    let (v, w) = wire::GroupMetadataValue::from_versioned_bytes(group.encode().expect("encodes"))
        .expect("decodes");
    assert_eq!(v, 3);
    assert_eq!(w, to_wire_group(&group));
}
