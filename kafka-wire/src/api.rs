//! API keys, the version ranges this crate implements, and which header version each API
//! version uses.

use bytes::{Buf, Bytes};

use crate::encode::{Decode, Message, WireWrite};
use crate::header::{RequestHeader, ResponseHeader};
use crate::messages::*;
use crate::{DecodeError, EncodeError};

/// The APIs this crate implements, with their numeric keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(i16)]
#[non_exhaustive]
pub enum ApiKey {
    /// Produce (0).
    Produce = 0,
    /// Fetch (1).
    Fetch = 1,
    /// ListOffsets (2).
    ListOffsets = 2,
    /// Metadata (3).
    Metadata = 3,
    /// LeaderAndIsr (4), controller to broker.
    LeaderAndIsr = 4,
    /// StopReplica (5), controller to broker.
    StopReplica = 5,
    /// UpdateMetadata (6), controller to broker.
    UpdateMetadata = 6,
    /// ControlledShutdown (7), broker to controller.
    ControlledShutdown = 7,
    /// OffsetCommit (8).
    OffsetCommit = 8,
    /// OffsetFetch (9).
    OffsetFetch = 9,
    /// FindCoordinator (10).
    FindCoordinator = 10,
    /// JoinGroup (11), to the group coordinator.
    JoinGroup = 11,
    /// Heartbeat (12), to the group coordinator.
    Heartbeat = 12,
    /// LeaveGroup (13), to the group coordinator.
    LeaveGroup = 13,
    /// SyncGroup (14), to the group coordinator.
    SyncGroup = 14,
    /// DescribeGroups (15).
    DescribeGroups = 15,
    /// ListGroups (16).
    ListGroups = 16,
    /// ApiVersions (18).
    ApiVersions = 18,
    /// CreateTopics (19).
    CreateTopics = 19,
    /// DeleteTopics (20).
    DeleteTopics = 20,
    /// DeleteRecords (21).
    DeleteRecords = 21,
    /// InitProducerId (22).
    InitProducerId = 22,
    /// OffsetForLeaderEpoch (23).
    OffsetForLeaderEpoch = 23,
    /// DescribeCluster (60).
    DescribeCluster = 60,
    /// ListPartitionReassignments (46).
    ListPartitionReassignments = 46,
    /// AlterPartitionReassignments (45).
    AlterPartitionReassignments = 45,
    /// IncrementalAlterConfigs (44).
    IncrementalAlterConfigs = 44,
    /// ElectLeaders (43).
    ElectLeaders = 43,
    /// CreatePartitions (37).
    CreatePartitions = 37,
    /// DescribeConfigs (32).
    DescribeConfigs = 32,
}

impl ApiKey {
    /// Every API key this crate implements, in numeric order.
    pub const ALL: [ApiKey; 30] = [
        ApiKey::Produce,
        ApiKey::Fetch,
        ApiKey::ListOffsets,
        ApiKey::Metadata,
        ApiKey::LeaderAndIsr,
        ApiKey::StopReplica,
        ApiKey::UpdateMetadata,
        ApiKey::ControlledShutdown,
        ApiKey::OffsetCommit,
        ApiKey::OffsetFetch,
        ApiKey::FindCoordinator,
        ApiKey::JoinGroup,
        ApiKey::Heartbeat,
        ApiKey::LeaveGroup,
        ApiKey::SyncGroup,
        ApiKey::DescribeGroups,
        ApiKey::ListGroups,
        ApiKey::ApiVersions,
        ApiKey::CreateTopics,
        ApiKey::DeleteTopics,
        ApiKey::DeleteRecords,
        ApiKey::InitProducerId,
        ApiKey::OffsetForLeaderEpoch,
        ApiKey::DescribeConfigs,
        ApiKey::CreatePartitions,
        ApiKey::ElectLeaders,
        ApiKey::IncrementalAlterConfigs,
        ApiKey::AlterPartitionReassignments,
        ApiKey::ListPartitionReassignments,
        ApiKey::DescribeCluster,
    ];

    /// The numeric key.
    pub fn as_i16(self) -> i16 {
        self as i16
    }

    /// (lowest, highest) version implemented, the same for request and response.
    pub fn versions(self) -> (i16, i16) {
        fn r<M: Message>() -> (i16, i16) {
            (M::MIN_VERSION, M::MAX_VERSION)
        }
        match self {
            ApiKey::Produce => r::<ProduceRequest>(),
            ApiKey::Fetch => r::<FetchRequest>(),
            ApiKey::ListOffsets => r::<ListOffsetsRequest>(),
            ApiKey::Metadata => r::<MetadataRequest>(),
            ApiKey::LeaderAndIsr => r::<LeaderAndIsrRequest>(),
            ApiKey::StopReplica => r::<StopReplicaRequest>(),
            ApiKey::UpdateMetadata => r::<UpdateMetadataRequest>(),
            ApiKey::ControlledShutdown => r::<ControlledShutdownRequest>(),
            ApiKey::FindCoordinator => r::<FindCoordinatorRequest>(),
            ApiKey::ApiVersions => r::<ApiVersionsRequest>(),
            ApiKey::InitProducerId => r::<InitProducerIdRequest>(),
            ApiKey::OffsetForLeaderEpoch => r::<OffsetForLeaderEpochRequest>(),
            ApiKey::OffsetCommit => r::<OffsetCommitRequest>(),
            ApiKey::OffsetFetch => r::<OffsetFetchRequest>(),
            ApiKey::JoinGroup => r::<JoinGroupRequest>(),
            ApiKey::Heartbeat => r::<HeartbeatRequest>(),
            ApiKey::LeaveGroup => r::<LeaveGroupRequest>(),
            ApiKey::SyncGroup => r::<SyncGroupRequest>(),
            ApiKey::DescribeGroups => r::<DescribeGroupsRequest>(),
            ApiKey::ListGroups => r::<ListGroupsRequest>(),
            ApiKey::CreateTopics => r::<CreateTopicsRequest>(),
            ApiKey::DeleteTopics => r::<DeleteTopicsRequest>(),
            ApiKey::DeleteRecords => r::<DeleteRecordsRequest>(),
            ApiKey::DescribeConfigs => r::<DescribeConfigsRequest>(),
            ApiKey::CreatePartitions => r::<CreatePartitionsRequest>(),
            ApiKey::ElectLeaders => r::<ElectLeadersRequest>(),
            ApiKey::IncrementalAlterConfigs => r::<IncrementalAlterConfigsRequest>(),
            ApiKey::AlterPartitionReassignments => r::<AlterPartitionReassignmentsRequest>(),
            ApiKey::ListPartitionReassignments => r::<ListPartitionReassignmentsRequest>(),
            ApiKey::DescribeCluster => r::<DescribeClusterRequest>(),
        }
    }

    /// Whether `version` is implemented for this API.
    pub fn supports(self, version: i16) -> bool {
        let (lo, hi) = self.versions();
        (lo..=hi).contains(&version)
    }

    /// The first flexible version (compact encodings, tagged fields).
    pub fn flexible_min(self) -> i16 {
        fn f<M: Message>() -> i16 {
            M::FLEXIBLE_MIN
        }
        match self {
            ApiKey::Produce => f::<ProduceRequest>(),
            ApiKey::Fetch => f::<FetchRequest>(),
            ApiKey::ListOffsets => f::<ListOffsetsRequest>(),
            ApiKey::Metadata => f::<MetadataRequest>(),
            ApiKey::LeaderAndIsr => f::<LeaderAndIsrRequest>(),
            ApiKey::StopReplica => f::<StopReplicaRequest>(),
            ApiKey::UpdateMetadata => f::<UpdateMetadataRequest>(),
            ApiKey::ControlledShutdown => f::<ControlledShutdownRequest>(),
            ApiKey::FindCoordinator => f::<FindCoordinatorRequest>(),
            ApiKey::ApiVersions => f::<ApiVersionsRequest>(),
            ApiKey::InitProducerId => f::<InitProducerIdRequest>(),
            ApiKey::OffsetForLeaderEpoch => f::<OffsetForLeaderEpochRequest>(),
            ApiKey::OffsetCommit => f::<OffsetCommitRequest>(),
            ApiKey::OffsetFetch => f::<OffsetFetchRequest>(),
            ApiKey::JoinGroup => f::<JoinGroupRequest>(),
            ApiKey::Heartbeat => f::<HeartbeatRequest>(),
            ApiKey::LeaveGroup => f::<LeaveGroupRequest>(),
            ApiKey::SyncGroup => f::<SyncGroupRequest>(),
            ApiKey::DescribeGroups => f::<DescribeGroupsRequest>(),
            ApiKey::ListGroups => f::<ListGroupsRequest>(),
            ApiKey::CreateTopics => f::<CreateTopicsRequest>(),
            ApiKey::DeleteTopics => f::<DeleteTopicsRequest>(),
            ApiKey::DeleteRecords => f::<DeleteRecordsRequest>(),
            ApiKey::DescribeConfigs => f::<DescribeConfigsRequest>(),
            ApiKey::CreatePartitions => f::<CreatePartitionsRequest>(),
            ApiKey::ElectLeaders => f::<ElectLeadersRequest>(),
            ApiKey::IncrementalAlterConfigs => f::<IncrementalAlterConfigsRequest>(),
            ApiKey::AlterPartitionReassignments => f::<AlterPartitionReassignmentsRequest>(),
            ApiKey::ListPartitionReassignments => f::<ListPartitionReassignmentsRequest>(),
            ApiKey::DescribeCluster => f::<DescribeClusterRequest>(),
        }
    }

    /// The request header version of `version`: 2 for flexible versions, else 1 — except
    /// ControlledShutdown v0, whose header has no client id (header v0).
    pub fn request_header_version(self, version: i16) -> i16 {
        if self == ApiKey::ControlledShutdown && version == 0 {
            0
        } else if version >= self.flexible_min() {
            2
        } else {
            1
        }
    }

    /// The response header version of `version`: 1 for flexible versions, else 0 — except
    /// ApiVersions, whose response header is always v0 so that a client can read it before
    /// it knows which versions the server supports.
    pub fn response_header_version(self, version: i16) -> i16 {
        if self == ApiKey::ApiVersions {
            0
        } else if version >= self.flexible_min() {
            1
        } else {
            0
        }
    }
}

impl TryFrom<i16> for ApiKey {
    type Error = DecodeError;

    fn try_from(v: i16) -> Result<Self, DecodeError> {
        ApiKey::ALL
            .iter()
            .copied()
            .find(|k| *k as i16 == v)
            .ok_or(DecodeError::UnknownApiKey(v))
    }
}

/// Reads a whole request (the bytes of one frame after its size prefix): the header, whose
/// version follows from the API key and version it carries, then the body.
pub fn decode_request<B: Buf>(buf: &mut B) -> Result<(RequestHeader, RequestBody), DecodeError> {
    let header = RequestHeader::decode_auto(buf)?;
    let key = ApiKey::try_from(header.request_api_key)?;
    let body = RequestBody::decode(key, header.request_api_version, buf)?;
    Ok((header, body))
}

/// Writes a whole request: the header at the version `body` and `header.request_api_version`
/// call for, then the body. The header's API key is taken from the body.
pub fn encode_request<W: WireWrite>(
    header: &RequestHeader,
    body: &RequestBody,
    w: &mut W,
) -> Result<(), EncodeError> {
    let key = body.api_key();
    let version = header.request_api_version;
    let header = RequestHeader {
        request_api_key: key.as_i16(),
        ..header.clone()
    };
    header.encode(w, key.request_header_version(version))?;
    body.encode(w, version)
}

/// Reads a whole response to a request of `api_key` at `version`: the header, then the body.
pub fn decode_response<B: Buf>(
    api_key: ApiKey,
    version: i16,
    buf: &mut B,
) -> Result<(ResponseHeader, ResponseBody), DecodeError> {
    let header = ResponseHeader::decode(buf, api_key.response_header_version(version))?;
    let body = ResponseBody::decode(api_key, version, buf)?;
    Ok((header, body))
}

/// Writes a whole response at `version`: the header at the version the API calls for, then
/// the body.
pub fn encode_response<W: WireWrite>(
    header: &ResponseHeader,
    body: &ResponseBody,
    version: i16,
    w: &mut W,
) -> Result<(), EncodeError> {
    header.encode(w, body.api_key().response_header_version(version))?;
    body.encode(w, version)
}

/// The UNSUPPORTED_VERSION error code (35).
pub const UNSUPPORTED_VERSION: i16 = 35;

/// Reads an ApiVersionsResponse body sent in answer to a request of `version`.
///
/// A server that does not support the requested version answers with a v0 body carrying
/// UNSUPPORTED_VERSION (35) and the versions it does support, so a body whose error code is
/// 35 is read as v0 whatever version was asked for (every version starts with the error
/// code).
pub fn decode_api_versions_response(
    body: Bytes,
    version: i16,
) -> Result<ApiVersionsResponse, DecodeError> {
    let chunk = body.chunk();
    let error_code = if chunk.len() >= 2 {
        i16::from_be_bytes([chunk[0], chunk[1]])
    } else {
        0
    };
    let version = if error_code == UNSUPPORTED_VERSION {
        0
    } else {
        version
    };
    ApiVersionsResponse::decode(&mut body.clone(), version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::Encode;
    use crate::messages::api_versions_response::ApiVersion;

    #[test]
    fn header_versions_follow_flexible_versions() {
        assert_eq!(ApiKey::Fetch.request_header_version(11), 1);
        assert_eq!(ApiKey::Fetch.request_header_version(12), 2);
        assert_eq!(ApiKey::Fetch.response_header_version(12), 1);
        assert_eq!(ApiKey::ApiVersions.request_header_version(3), 2);
        assert_eq!(ApiKey::ApiVersions.response_header_version(3), 0);
        assert_eq!(ApiKey::ControlledShutdown.request_header_version(0), 0);
        assert_eq!(ApiKey::ControlledShutdown.request_header_version(1), 1);
    }

    #[test]
    fn api_keys_round_trip_through_i16() {
        for k in ApiKey::ALL {
            assert_eq!(ApiKey::try_from(k.as_i16()), Ok(k));
        }
        assert_eq!(ApiKey::try_from(99), Err(DecodeError::UnknownApiKey(99)));
    }

    #[test]
    fn whole_requests_and_responses_round_trip_with_their_header_versions() {
        use crate::header::RequestHeader;
        use bytes::BytesMut;
        for (key, version) in [
            (ApiKey::Fetch, 4),
            (ApiKey::Fetch, 12),
            (ApiKey::ControlledShutdown, 0),
        ] {
            let header = RequestHeader {
                request_api_version: version,
                correlation_id: 9,
                client_id: Some("c".into()),
                ..Default::default()
            };
            let body = match key {
                ApiKey::Fetch => RequestBody::Fetch(FetchRequest {
                    max_wait_ms: 5,
                    ..Default::default()
                }),
                _ => RequestBody::ControlledShutdown(ControlledShutdownRequest {
                    broker_id: 3,
                    ..Default::default()
                }),
            };
            let mut out = BytesMut::new();
            encode_request(&header, &body, &mut out).unwrap();
            let (h, b) = decode_request(&mut out.freeze()).unwrap();
            assert_eq!(h.request_api_key, key.as_i16());
            assert_eq!(h.correlation_id, 9);
            let expect_client = if key.request_header_version(version) >= 1 {
                Some("c".into())
            } else {
                None
            };
            assert_eq!(h.client_id, expect_client);
            assert_eq!(b, body);
        }
        let resp = ResponseBody::ApiVersions(ApiVersionsResponse::default());
        let mut out = BytesMut::new();
        encode_response(
            &ResponseHeader {
                correlation_id: 4,
                ..Default::default()
            },
            &resp,
            3,
            &mut out,
        )
        .unwrap();
        let (h, b) = decode_response(ApiKey::ApiVersions, 3, &mut out.freeze()).unwrap();
        assert_eq!((h.correlation_id, b), (4, resp));
    }

    #[test]
    fn unsupported_version_reply_is_read_as_v0() {
        let reply = ApiVersionsResponse {
            error_code: UNSUPPORTED_VERSION,
            api_keys: vec![ApiVersion {
                api_key: 18,
                min_version: 0,
                max_version: 2,
                ..Default::default()
            }],
            ..Default::default()
        };
        let body = reply.encode_to_bytes(0).unwrap();
        let back = decode_api_versions_response(body, 4).unwrap();
        assert_eq!(back, reply);
    }
}
