//! Conformance against an independent implementation, the `kafka-protocol` crate (0.15.1, the
//! last release that still has LeaderAndIsr, UpdateMetadata and StopReplica).
//!
//! For every message and every version both crates support, and many pseudo-random values
//! holding only the fields of that version: `kafka-protocol` decodes our bytes, its own
//! encoding of what it decoded equals our bytes byte for byte, and we decode its bytes back
//! to a value equal to the one we started from. Its sizes agree with ours too.

use std::fmt::Debug;

use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::{Decodable, Encodable, Message as TheirMessage};
use kafka_wire::sample::Gen;
use kafka_wire::Message;

const SEEDS: u64 = 150;

fn check<O, T>(sample: fn(&mut Gen, i16) -> O)
where
    O: Message + Debug + PartialEq,
    T: Encodable + Decodable + TheirMessage + Debug,
{
    let lo = O::MIN_VERSION.max(T::VERSIONS.min);
    let hi = O::MAX_VERSION.min(T::VERSIONS.max);
    assert!(lo <= hi, "no common version");
    for version in lo..=hi {
        for seed in 0..SEEDS {
            let ours = sample(&mut Gen::new(seed), version);
            let our_bytes = ours.encode_to_bytes(version).expect("we encode our sample");
            let theirs = T::decode(&mut our_bytes.clone(), version).unwrap_or_else(|e| {
                panic!("kafka-protocol cannot decode our v{version} bytes (seed {seed}): {e}\n{ours:?}")
            });
            let size = theirs.compute_size(version).expect("their size");
            assert_eq!(
                size,
                our_bytes.len(),
                "sizes differ at v{version}, seed {seed}"
            );
            let mut their_bytes = BytesMut::new();
            theirs
                .encode(&mut their_bytes, version)
                .expect("they encode what they decoded");
            let their_bytes: Bytes = their_bytes.freeze();
            assert_eq!(
                their_bytes, our_bytes,
                "encodings differ at v{version}, seed {seed}\nours: {ours:?}\ntheirs: {theirs:?}"
            );
            let back = O::decode(&mut their_bytes.clone(), version).expect("we decode their bytes");
            assert_eq!(back, ours, "v{version}, seed {seed}");
        }
    }
}

macro_rules! conformance {
    ($($test:ident: $ours:ident <=> $theirs:ident;)*) => {$(
        #[test]
        fn $test() {
            check::<kafka_wire::messages::$ours, kafka_protocol::messages::$theirs>(
                kafka_wire::messages::$ours::sample,
            );
        }
    )*};
}

conformance! {
    leader_and_isr_request_matches_kafka_protocol: LeaderAndIsrRequest <=> LeaderAndIsrRequest;
    leader_and_isr_response_matches_kafka_protocol: LeaderAndIsrResponse <=> LeaderAndIsrResponse;
    update_metadata_request_matches_kafka_protocol: UpdateMetadataRequest <=> UpdateMetadataRequest;
    update_metadata_response_matches_kafka_protocol: UpdateMetadataResponse <=> UpdateMetadataResponse;
    stop_replica_request_matches_kafka_protocol: StopReplicaRequest <=> StopReplicaRequest;
    stop_replica_response_matches_kafka_protocol: StopReplicaResponse <=> StopReplicaResponse;
    fetch_request_matches_kafka_protocol: FetchRequest <=> FetchRequest;
    fetch_response_matches_kafka_protocol: FetchResponse <=> FetchResponse;
    offset_for_leader_epoch_request_matches_kafka_protocol: OffsetForLeaderEpochRequest <=> OffsetForLeaderEpochRequest;
    offset_for_leader_epoch_response_matches_kafka_protocol: OffsetForLeaderEpochResponse <=> OffsetForLeaderEpochResponse;
    controlled_shutdown_request_matches_kafka_protocol: ControlledShutdownRequest <=> ControlledShutdownRequest;
    controlled_shutdown_response_matches_kafka_protocol: ControlledShutdownResponse <=> ControlledShutdownResponse;
    api_versions_request_matches_kafka_protocol: ApiVersionsRequest <=> ApiVersionsRequest;
    api_versions_response_matches_kafka_protocol: ApiVersionsResponse <=> ApiVersionsResponse;
    metadata_request_matches_kafka_protocol: MetadataRequest <=> MetadataRequest;
    metadata_response_matches_kafka_protocol: MetadataResponse <=> MetadataResponse;
    list_offsets_request_matches_kafka_protocol: ListOffsetsRequest <=> ListOffsetsRequest;
    list_offsets_response_matches_kafka_protocol: ListOffsetsResponse <=> ListOffsetsResponse;
    produce_request_matches_kafka_protocol: ProduceRequest <=> ProduceRequest;
    produce_response_matches_kafka_protocol: ProduceResponse <=> ProduceResponse;
    init_producer_id_request_matches_kafka_protocol: InitProducerIdRequest <=> InitProducerIdRequest;
    init_producer_id_response_matches_kafka_protocol: InitProducerIdResponse <=> InitProducerIdResponse;
    find_coordinator_request_matches_kafka_protocol: FindCoordinatorRequest <=> FindCoordinatorRequest;
    find_coordinator_response_matches_kafka_protocol: FindCoordinatorResponse <=> FindCoordinatorResponse;
    offset_commit_request_matches_kafka_protocol: OffsetCommitRequest <=> OffsetCommitRequest;
    offset_commit_response_matches_kafka_protocol: OffsetCommitResponse <=> OffsetCommitResponse;
    offset_fetch_request_matches_kafka_protocol: OffsetFetchRequest <=> OffsetFetchRequest;
    offset_fetch_response_matches_kafka_protocol: OffsetFetchResponse <=> OffsetFetchResponse;
    join_group_request_matches_kafka_protocol: JoinGroupRequest <=> JoinGroupRequest;
    join_group_response_matches_kafka_protocol: JoinGroupResponse <=> JoinGroupResponse;
    heartbeat_request_matches_kafka_protocol: HeartbeatRequest <=> HeartbeatRequest;
    heartbeat_response_matches_kafka_protocol: HeartbeatResponse <=> HeartbeatResponse;
    leave_group_request_matches_kafka_protocol: LeaveGroupRequest <=> LeaveGroupRequest;
    leave_group_response_matches_kafka_protocol: LeaveGroupResponse <=> LeaveGroupResponse;
    sync_group_request_matches_kafka_protocol: SyncGroupRequest <=> SyncGroupRequest;
    sync_group_response_matches_kafka_protocol: SyncGroupResponse <=> SyncGroupResponse;
    describe_groups_request_matches_kafka_protocol: DescribeGroupsRequest <=> DescribeGroupsRequest;
    describe_groups_response_matches_kafka_protocol: DescribeGroupsResponse <=> DescribeGroupsResponse;
    list_groups_request_matches_kafka_protocol: ListGroupsRequest <=> ListGroupsRequest;
    list_groups_response_matches_kafka_protocol: ListGroupsResponse <=> ListGroupsResponse;
    create_topics_request_matches_kafka_protocol: CreateTopicsRequest <=> CreateTopicsRequest;
    create_topics_response_matches_kafka_protocol: CreateTopicsResponse <=> CreateTopicsResponse;
    delete_topics_request_matches_kafka_protocol: DeleteTopicsRequest <=> DeleteTopicsRequest;
    delete_topics_response_matches_kafka_protocol: DeleteTopicsResponse <=> DeleteTopicsResponse;
    delete_records_request_matches_kafka_protocol: DeleteRecordsRequest <=> DeleteRecordsRequest;
    delete_records_response_matches_kafka_protocol: DeleteRecordsResponse <=> DeleteRecordsResponse;
    describe_configs_request_matches_kafka_protocol: DescribeConfigsRequest <=> DescribeConfigsRequest;
    describe_configs_response_matches_kafka_protocol: DescribeConfigsResponse <=> DescribeConfigsResponse;
    create_partitions_request_matches_kafka_protocol: CreatePartitionsRequest <=> CreatePartitionsRequest;
    create_partitions_response_matches_kafka_protocol: CreatePartitionsResponse <=> CreatePartitionsResponse;
    elect_leaders_request_matches_kafka_protocol: ElectLeadersRequest <=> ElectLeadersRequest;
    elect_leaders_response_matches_kafka_protocol: ElectLeadersResponse <=> ElectLeadersResponse;
    incremental_alter_configs_request_matches_kafka_protocol: IncrementalAlterConfigsRequest <=> IncrementalAlterConfigsRequest;
    incremental_alter_configs_response_matches_kafka_protocol: IncrementalAlterConfigsResponse <=> IncrementalAlterConfigsResponse;
    alter_partition_reassignments_request_matches_kafka_protocol: AlterPartitionReassignmentsRequest <=> AlterPartitionReassignmentsRequest;
    alter_partition_reassignments_response_matches_kafka_protocol: AlterPartitionReassignmentsResponse <=> AlterPartitionReassignmentsResponse;
    list_partition_reassignments_request_matches_kafka_protocol: ListPartitionReassignmentsRequest <=> ListPartitionReassignmentsRequest;
    list_partition_reassignments_response_matches_kafka_protocol: ListPartitionReassignmentsResponse <=> ListPartitionReassignmentsResponse;
    describe_cluster_request_matches_kafka_protocol: DescribeClusterRequest <=> DescribeClusterRequest;
    describe_cluster_response_matches_kafka_protocol: DescribeClusterResponse <=> DescribeClusterResponse;
}

/// The two header types as well, at every header version.
#[test]
fn headers_match_kafka_protocol() {
    use kafka_protocol::messages::{RequestHeader as TheirReq, ResponseHeader as TheirResp};
    use kafka_wire::{RequestHeader, ResponseHeader};
    for hv in 0..=2i16 {
        for seed in 0..SEEDS {
            let mut g = Gen::new(seed);
            let h = RequestHeader {
                request_api_key: g.i16(),
                request_api_version: g.i16(),
                correlation_id: g.i32(),
                client_id: if hv >= 1 && !g.chance(4) {
                    Some(g.string())
                } else {
                    None
                },
                unknown_tagged_fields: if hv >= 2 {
                    g.unknown_tags()
                } else {
                    Default::default()
                },
            };
            let mut ours = BytesMut::new();
            h.encode(&mut ours, hv).unwrap();
            let theirs = TheirReq::decode(&mut ours.clone().freeze(), hv).unwrap();
            let mut tb = BytesMut::new();
            theirs.encode(&mut tb, hv).unwrap();
            assert_eq!(tb, ours, "request header v{hv}");
            assert_eq!(RequestHeader::decode(&mut tb.freeze(), hv).unwrap(), h);
        }
    }
    for hv in 0..=1i16 {
        let h = ResponseHeader {
            correlation_id: 77,
            unknown_tagged_fields: if hv >= 1 {
                Gen::new(3).unknown_tags()
            } else {
                Default::default()
            },
        };
        let mut ours = BytesMut::new();
        h.encode(&mut ours, hv).unwrap();
        let theirs = TheirResp::decode(&mut ours.clone().freeze(), hv).unwrap();
        let mut tb = BytesMut::new();
        theirs.encode(&mut tb, hv).unwrap();
        assert_eq!(tb, ours, "response header v{hv}");
    }
}
