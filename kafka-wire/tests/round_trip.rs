//! Round trips of every request and response at every version: a pseudo-random value holding
//! only the fields of that version encodes to exactly `encoded_len` bytes, decodes back equal,
//! and encodes the same through `ChunkedWriter`.

use bytes::{Bytes, BytesMut};
use kafka_wire::sample::Gen;
use kafka_wire::{ApiKey, ChunkedWriter, RequestBody, ResponseBody};
use proptest::prelude::*;

fn check_request(key: ApiKey, version: i16, seed: u64) -> Result<(), TestCaseError> {
    let value = RequestBody::sample(key, version, &mut Gen::new(seed));
    let len = value
        .encoded_len(version)
        .map_err(|e| TestCaseError::fail(format!("{key:?} v{version}: {e}")))?;
    let mut buf = BytesMut::new();
    value
        .encode(&mut buf, version)
        .map_err(|e| TestCaseError::fail(format!("{e}")))?;
    prop_assert_eq!(buf.len(), len, "{:?} v{} encoded_len", key, version);
    let bytes = buf.freeze();
    let mut chunked = ChunkedWriter::new();
    value
        .encode(&mut chunked, version)
        .map_err(|e| TestCaseError::fail(format!("{e}")))?;
    prop_assert_eq!(chunked.into_bytes(), bytes.clone());
    let mut input = bytes.clone();
    let back = RequestBody::decode(key, version, &mut input)
        .map_err(|e| TestCaseError::fail(format!("{key:?} v{version} decode: {e}")))?;
    prop_assert!(input.is_empty(), "{:?} v{} left bytes", key, version);
    prop_assert_eq!(back, value, "{:?} v{}", key, version);
    Ok(())
}

fn check_response(key: ApiKey, version: i16, seed: u64) -> Result<(), TestCaseError> {
    let value = ResponseBody::sample(key, version, &mut Gen::new(seed));
    let len = value
        .encoded_len(version)
        .map_err(|e| TestCaseError::fail(format!("{key:?} v{version}: {e}")))?;
    let mut buf = BytesMut::new();
    value
        .encode(&mut buf, version)
        .map_err(|e| TestCaseError::fail(format!("{e}")))?;
    prop_assert_eq!(buf.len(), len, "{:?} v{} encoded_len", key, version);
    let bytes: Bytes = buf.freeze();
    let mut chunked = ChunkedWriter::new();
    value
        .encode(&mut chunked, version)
        .map_err(|e| TestCaseError::fail(format!("{e}")))?;
    prop_assert_eq!(chunked.into_bytes(), bytes.clone());
    let mut input = bytes.clone();
    let back = ResponseBody::decode(key, version, &mut input)
        .map_err(|e| TestCaseError::fail(format!("{key:?} v{version} decode: {e}")))?;
    prop_assert!(input.is_empty(), "{:?} v{} left bytes", key, version);
    prop_assert_eq!(back, value, "{:?} v{}", key, version);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_request_round_trips_at_every_version(seed in any::<u64>()) {
        for key in ApiKey::ALL {
            let (lo, hi) = key.versions();
            for version in lo..=hi {
                check_request(key, version, seed)?;
            }
        }
    }

    #[test]
    fn every_response_round_trips_at_every_version(seed in any::<u64>()) {
        for key in ApiKey::ALL {
            let (lo, hi) = key.versions();
            for version in lo..=hi {
                check_response(key, version, seed)?;
            }
        }
    }
}

#[test]
fn every_api_covers_the_versions_the_spec_lists() {
    let expected = [
        (ApiKey::LeaderAndIsr, 7),
        (ApiKey::UpdateMetadata, 8),
        (ApiKey::StopReplica, 4),
        (ApiKey::Fetch, 17),
        (ApiKey::OffsetForLeaderEpoch, 4),
        (ApiKey::ApiVersions, 4),
        (ApiKey::Metadata, 12),
        (ApiKey::ListOffsets, 10),
        (ApiKey::Produce, 11),
        (ApiKey::InitProducerId, 5),
        (ApiKey::FindCoordinator, 6),
        (ApiKey::ControlledShutdown, 3),
        (ApiKey::OffsetCommit, 9),
        (ApiKey::OffsetFetch, 9),
        (ApiKey::JoinGroup, 9),
        (ApiKey::Heartbeat, 4),
        (ApiKey::LeaveGroup, 5),
        (ApiKey::SyncGroup, 5),
        (ApiKey::DescribeGroups, 5),
        (ApiKey::ListGroups, 5),
        (ApiKey::CreateTopics, 7),
        (ApiKey::DeleteTopics, 6),
        (ApiKey::DeleteRecords, 2),
        (ApiKey::DescribeConfigs, 4),
        (ApiKey::CreatePartitions, 3),
        (ApiKey::ElectLeaders, 2),
        (ApiKey::IncrementalAlterConfigs, 1),
        (ApiKey::AlterPartitionReassignments, 0),
        (ApiKey::ListPartitionReassignments, 0),
        (ApiKey::DescribeCluster, 1),
    ];
    for (key, max) in expected {
        assert_eq!(key.versions(), (0, max), "{key:?}");
    }
}

#[test]
fn unsupported_versions_are_typed_errors() {
    for key in ApiKey::ALL {
        let (_, hi) = key.versions();
        let err = RequestBody::decode(key, hi + 1, &mut Bytes::new()).unwrap_err();
        assert_eq!(
            err,
            kafka_wire::DecodeError::UnsupportedVersion {
                api_key: key.as_i16(),
                version: hi + 1
            }
        );
    }
}
