//! The coordinator's requests and responses, independent of any wire version.
//!
//! A shell decodes a JoinGroup (any version) into a [`JoinGroupRequest`] and encodes a
//! [`JoinGroupResponse`] back at the version asked, dropping the fields that version lacks;
//! the same for the other APIs. Empty `member_id` is Kafka's `UNKNOWN_MEMBER_ID`.

use bytes::Bytes;
use kafka_wire::error_code::ErrorCode;

/// The id a shell gives a request so that it can match the response (responses of JoinGroup
/// and SyncGroup come later, after other members' requests).
pub type RequestId = u64;

/// The generation of a group that has none, and of a commit from outside group management.
pub const NO_GENERATION: i32 = -1;

/// One protocol a joining member supports, with its metadata (for a consumer, the
/// subscription), in the member's order of preference.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JoinGroupProtocol {
    /// The protocol name (`"range"`, `"cooperative-sticky"`).
    pub name: String,
    /// The member's metadata for that protocol.
    pub metadata: Bytes,
}

/// A JoinGroup request (all versions).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JoinGroupRequest {
    /// The group id.
    pub group_id: String,
    /// The session timeout (ms).
    pub session_timeout_ms: i32,
    /// The rebalance timeout (ms); v0 has none: pass the session timeout.
    pub rebalance_timeout_ms: i32,
    /// The member id, empty for a new member.
    pub member_id: String,
    /// The static member's `group.instance.id` (v5+, KIP-345).
    pub group_instance_id: Option<String>,
    /// The protocol type (`"consumer"`).
    pub protocol_type: String,
    /// The supported protocols.
    pub protocols: Vec<JoinGroupProtocol>,
    /// Whether a new member must first get its member id (KIP-394): true from v4.
    pub require_known_member_id: bool,
    /// The client id of the request header.
    pub client_id: String,
    /// The client's host (`/127.0.0.1`).
    pub client_host: String,
}

/// A member as the leader sees it in its JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JoinGroupMember {
    /// The member id.
    pub member_id: String,
    /// The static member's instance id.
    pub group_instance_id: Option<String>,
    /// The member's metadata for the selected protocol.
    pub metadata: Bytes,
}

/// A JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JoinGroupResponse {
    /// The error.
    pub error: ErrorCode,
    /// The generation, -1 on error.
    pub generation_id: i32,
    /// The group's protocol type (v7+).
    pub protocol_type: Option<String>,
    /// The selected protocol.
    pub protocol_name: Option<String>,
    /// The leader's member id.
    pub leader: String,
    /// Whether the leader must skip the assignment (KIP-814, v9): a static leader rejoining a
    /// Stable group.
    pub skip_assignment: bool,
    /// The member's id (the new one with `MEMBER_ID_REQUIRED`).
    pub member_id: String,
    /// The members with their metadata, for the leader only.
    pub members: Vec<JoinGroupMember>,
}

impl JoinGroupResponse {
    /// A response carrying only an error and a member id.
    pub fn error(member_id: impl Into<String>, error: ErrorCode) -> Self {
        JoinGroupResponse {
            error,
            generation_id: NO_GENERATION,
            member_id: member_id.into(),
            ..Default::default()
        }
    }
}

/// One member's assignment in the leader's SyncGroup.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SyncGroupAssignment {
    /// The member id.
    pub member_id: String,
    /// The assignment.
    pub assignment: Bytes,
}

/// A SyncGroup request (all versions).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SyncGroupRequest {
    /// The group id.
    pub group_id: String,
    /// The generation.
    pub generation_id: i32,
    /// The member id.
    pub member_id: String,
    /// The static member's instance id (v3+).
    pub group_instance_id: Option<String>,
    /// The protocol type the member expects (v5+).
    pub protocol_type: Option<String>,
    /// The protocol name the member expects (v5+).
    pub protocol_name: Option<String>,
    /// The assignments (from the leader; empty from followers).
    pub assignments: Vec<SyncGroupAssignment>,
}

/// A SyncGroup response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SyncGroupResponse {
    /// The error.
    pub error: ErrorCode,
    /// The group's protocol type (v5+).
    pub protocol_type: Option<String>,
    /// The group's protocol name (v5+).
    pub protocol_name: Option<String>,
    /// The member's assignment.
    pub assignment: Bytes,
}

impl SyncGroupResponse {
    /// A response carrying only an error.
    pub fn error(error: ErrorCode) -> Self {
        SyncGroupResponse {
            error,
            ..Default::default()
        }
    }
}

/// A Heartbeat request (all versions).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HeartbeatRequest {
    /// The group id.
    pub group_id: String,
    /// The generation.
    pub generation_id: i32,
    /// The member id.
    pub member_id: String,
    /// The static member's instance id (v3+).
    pub group_instance_id: Option<String>,
}

/// A Heartbeat response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HeartbeatResponse {
    /// The error.
    pub error: ErrorCode,
}

/// One member leaving (LeaveGroup v3+ batches them; v0-2 carry one).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeavingMember {
    /// The member id; empty to remove a static member by instance id.
    pub member_id: String,
    /// The static member's instance id.
    pub group_instance_id: Option<String>,
}

/// A LeaveGroup request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeaveGroupRequest {
    /// The group id.
    pub group_id: String,
    /// The members leaving.
    pub members: Vec<LeavingMember>,
}

/// The outcome for one leaving member.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeftMember {
    /// The member id as sent.
    pub member_id: String,
    /// The instance id as sent.
    pub group_instance_id: Option<String>,
    /// The member's error.
    pub error: ErrorCode,
}

/// A LeaveGroup response. For v0-2 a shell answers the single member's error as the
/// top-level error when the top level has none.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LeaveGroupResponse {
    /// The top-level error.
    pub error: ErrorCode,
    /// One entry per member of the request (empty with a top-level error).
    pub members: Vec<LeftMember>,
}

/// One partition's commit.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OffsetCommitPartition {
    /// The partition.
    pub partition_index: i32,
    /// The offset.
    pub committed_offset: i64,
    /// The offset's leader epoch (v6+), -1 when unknown.
    pub committed_leader_epoch: i32,
    /// The metadata string; `None` is stored as the empty string.
    pub committed_metadata: Option<String>,
}

/// One topic's commits.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OffsetCommitTopic {
    /// The topic.
    pub name: String,
    /// The partitions.
    pub partitions: Vec<OffsetCommitPartition>,
}

/// An OffsetCommit request (all versions).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OffsetCommitRequest {
    /// The group id (may be empty: Kafka allows commits for the empty group id).
    pub group_id: String,
    /// The generation, -1 for a commit from outside group management.
    pub generation_id: i32,
    /// The member id, empty from outside group management.
    pub member_id: String,
    /// The static member's instance id (v7+).
    pub group_instance_id: Option<String>,
    /// An explicit retention time (v2-4), `None` for the broker's `offsets.retention.minutes`.
    pub retention_time_ms: Option<i64>,
    /// The commits.
    pub topics: Vec<OffsetCommitTopic>,
}

/// One partition's commit outcome.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OffsetCommitPartitionResult {
    /// The partition.
    pub partition_index: i32,
    /// The error.
    pub error: ErrorCode,
}

/// One topic's commit outcomes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OffsetCommitTopicResult {
    /// The topic.
    pub name: String,
    /// The partitions, in the request's order.
    pub partitions: Vec<OffsetCommitPartitionResult>,
}

/// An OffsetCommit response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OffsetCommitResponse {
    /// The topics, in the request's order.
    pub topics: Vec<OffsetCommitTopicResult>,
}

/// The partitions of one topic to fetch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OffsetFetchTopic {
    /// The topic.
    pub name: String,
    /// The partitions.
    pub partition_indexes: Vec<i32>,
}

/// An OffsetFetch request for one group (v8+ batch groups: one request per group).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OffsetFetchRequest {
    /// The group id.
    pub group_id: String,
    /// The partitions, `None` for every partition the group has an offset for (v2+).
    pub topics: Option<Vec<OffsetFetchTopic>>,
    /// Whether pending transactional offsets must fail the fetch (v7+); this coordinator has
    /// no transactional offsets, so it changes nothing.
    pub require_stable: bool,
}

/// One partition's fetched offset.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OffsetFetchPartition {
    /// The partition.
    pub partition_index: i32,
    /// The committed offset, -1 when none.
    pub committed_offset: i64,
    /// The committed leader epoch, -1 when none.
    pub committed_leader_epoch: i32,
    /// The metadata string.
    pub metadata: Option<String>,
    /// The partition's error.
    pub error: ErrorCode,
}

/// One topic's fetched offsets.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OffsetFetchTopicResult {
    /// The topic.
    pub name: String,
    /// The partitions.
    pub partitions: Vec<OffsetFetchPartition>,
}

/// An OffsetFetch response for one group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OffsetFetchResponse {
    /// The group id.
    pub group_id: String,
    /// The group-level error (v2+; before v2 a shell copies it into each partition).
    pub error: ErrorCode,
    /// The topics.
    pub topics: Vec<OffsetFetchTopicResult>,
}

/// A DescribeGroups request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DescribeGroupsRequest {
    /// The group ids.
    pub groups: Vec<String>,
}

/// A member as DescribeGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DescribedMember {
    /// The member id.
    pub member_id: String,
    /// The static member's instance id (v4+).
    pub group_instance_id: Option<String>,
    /// The client id.
    pub client_id: String,
    /// The client host.
    pub client_host: String,
    /// The member's metadata for the selected protocol (empty unless Stable).
    pub member_metadata: Bytes,
    /// The member's assignment (empty unless Stable).
    pub member_assignment: Bytes,
}

/// One described group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DescribedGroup {
    /// The error.
    pub error: ErrorCode,
    /// The group id.
    pub group_id: String,
    /// The state (`"Stable"`, `"Dead"` for an unknown group).
    pub group_state: String,
    /// The protocol type, empty for none.
    pub protocol_type: String,
    /// The selected protocol, empty unless Stable.
    pub protocol_data: String,
    /// The members.
    pub members: Vec<DescribedMember>,
}

/// A DescribeGroups response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DescribeGroupsResponse {
    /// The groups, in the request's order.
    pub groups: Vec<DescribedGroup>,
}

/// A ListGroups request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListGroupsRequest {
    /// The states to list (v4+, case-insensitive), empty for all.
    pub states_filter: Vec<String>,
    /// The group types to list (v5+, case-insensitive: `"classic"`), empty for all.
    pub types_filter: Vec<String>,
}

/// One listed group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListedGroup {
    /// The group id.
    pub group_id: String,
    /// The protocol type, empty for none.
    pub protocol_type: String,
    /// The state (v4+).
    pub group_state: String,
    /// The group type (v5+): always `"classic"` here.
    pub group_type: String,
}

/// A ListGroups response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListGroupsResponse {
    /// `COORDINATOR_LOAD_IN_PROGRESS` while a partition loads, else none.
    pub error: ErrorCode,
    /// The groups of every loaded partition.
    pub groups: Vec<ListedGroup>,
}

/// A request to the coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// JoinGroup.
    JoinGroup(JoinGroupRequest),
    /// SyncGroup.
    SyncGroup(SyncGroupRequest),
    /// Heartbeat.
    Heartbeat(HeartbeatRequest),
    /// LeaveGroup.
    LeaveGroup(LeaveGroupRequest),
    /// OffsetCommit.
    OffsetCommit(OffsetCommitRequest),
    /// OffsetFetch.
    OffsetFetch(OffsetFetchRequest),
    /// DescribeGroups.
    DescribeGroups(DescribeGroupsRequest),
    /// ListGroups.
    ListGroups(ListGroupsRequest),
}

/// A response from the coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// JoinGroup.
    JoinGroup(JoinGroupResponse),
    /// SyncGroup.
    SyncGroup(SyncGroupResponse),
    /// Heartbeat.
    Heartbeat(HeartbeatResponse),
    /// LeaveGroup.
    LeaveGroup(LeaveGroupResponse),
    /// OffsetCommit.
    OffsetCommit(OffsetCommitResponse),
    /// OffsetFetch.
    OffsetFetch(OffsetFetchResponse),
    /// DescribeGroups.
    DescribeGroups(DescribeGroupsResponse),
    /// ListGroups.
    ListGroups(ListGroupsResponse),
}
