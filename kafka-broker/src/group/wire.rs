//! The group APIs' wire messages, at every version, to the coordinator's requests and back.
//!
//! Each response field a version lacks is left at its default (the codec refuses a set field
//! a version cannot carry), and older versions get what Kafka's `KafkaApis` gives them:
//! JoinGroup before v7 a non-null protocol name, LeaveGroup before v3 the single member's error
//! at the top level, OffsetFetch before v2 the group's error in every partition, and
//! OffsetFetch v8+ one coordinator request per group.

use kafka_group_coordinator as gc;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_wire::messages::join_group_response::JoinGroupResponseMember;
use kafka_wire::messages::leave_group_response::MemberResponse;
use kafka_wire::messages::list_groups_response::ListedGroup;
use kafka_wire::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_wire::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_wire::messages::{
    DescribeGroupsResponse, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest,
    JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest,
    ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
    OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse,
};
use kafka_wire::{RequestBody, RequestHeader, ResponseBody};

use super::GroupService;
use crate::server::RequestContext;

/// Whether `body` is one of the group APIs this module maps.
pub fn is_group_request(body: &RequestBody) -> bool {
    matches!(
        body,
        RequestBody::JoinGroup(_)
            | RequestBody::SyncGroup(_)
            | RequestBody::Heartbeat(_)
            | RequestBody::LeaveGroup(_)
            | RequestBody::OffsetCommit(_)
            | RequestBody::OffsetFetch(_)
            | RequestBody::DescribeGroups(_)
            | RequestBody::ListGroups(_)
    )
}

fn s(b: &impl std::ops::Deref<Target = str>) -> String {
    (**b).to_owned()
}

/// Answers a group request through `service`; `None` if the service stopped or `body` is
/// not a group request. `known(topic, partition)` tells whether a partition exists: an
/// OffsetCommit for one that does not gets UNKNOWN_TOPIC_OR_PARTITION, as in Kafka's
/// `KafkaApis.handleOffsetCommitRequest`.
pub async fn handle(
    service: &GroupService,
    ctx: &RequestContext,
    header: &RequestHeader,
    body: RequestBody,
    known: impl Fn(&str, i32) -> bool,
) -> Option<ResponseBody> {
    let version = header.request_api_version;
    let client_id = header.client_id.as_deref().unwrap_or("").to_owned();
    let client_host = format!("/{}", ctx.peer.ip());
    Some(match body {
        RequestBody::JoinGroup(r) => {
            let request = join_request(version, &r, client_id, client_host);
            match service.request(gc::Request::JoinGroup(request)).await? {
                gc::Response::JoinGroup(j) => ResponseBody::JoinGroup(join_response(version, j)),
                _ => return None,
            }
        }
        RequestBody::SyncGroup(r) => {
            match service
                .request(gc::Request::SyncGroup(sync_request(&r)))
                .await?
            {
                gc::Response::SyncGroup(j) => ResponseBody::SyncGroup(sync_response(version, j)),
                _ => return None,
            }
        }
        RequestBody::Heartbeat(r) => {
            match service
                .request(gc::Request::Heartbeat(heartbeat_request(&r)))
                .await?
            {
                gc::Response::Heartbeat(h) => ResponseBody::Heartbeat(HeartbeatResponse {
                    error_code: h.error.code(),
                    ..Default::default()
                }),
                _ => return None,
            }
        }
        RequestBody::LeaveGroup(r) => {
            match service
                .request(gc::Request::LeaveGroup(leave_request(version, &r)))
                .await?
            {
                gc::Response::LeaveGroup(l) => ResponseBody::LeaveGroup(leave_response(version, l)),
                _ => return None,
            }
        }
        RequestBody::OffsetCommit(r) => {
            let request = commit_request(version, &r);
            let (request, unknown) = split_unknown(request, &known);
            let answered = if request.topics.is_empty() {
                gc::OffsetCommitResponse::default()
            } else {
                match service.request(gc::Request::OffsetCommit(request)).await? {
                    gc::Response::OffsetCommit(c) => c,
                    _ => return None,
                }
            };
            ResponseBody::OffsetCommit(commit_response(merge_unknown(&r, answered, &unknown)))
        }
        RequestBody::OffsetFetch(r) => {
            let mut answers = Vec::new();
            for request in fetch_requests(version, &r) {
                match service.request(gc::Request::OffsetFetch(request)).await? {
                    gc::Response::OffsetFetch(f) => answers.push(f),
                    _ => return None,
                }
            }
            ResponseBody::OffsetFetch(fetch_response(version, answers))
        }
        RequestBody::DescribeGroups(r) => {
            let request = gc::DescribeGroupsRequest {
                groups: r.groups.iter().map(s).collect(),
            };
            match service
                .request(gc::Request::DescribeGroups(request))
                .await?
            {
                gc::Response::DescribeGroups(d) => {
                    ResponseBody::DescribeGroups(describe_response(version, d))
                }
                _ => return None,
            }
        }
        RequestBody::ListGroups(r) => {
            match service
                .request(gc::Request::ListGroups(list_request(version, &r)))
                .await?
            {
                gc::Response::ListGroups(l) => ResponseBody::ListGroups(list_response(version, l)),
                _ => return None,
            }
        }
        _ => return None,
    })
}

/// JoinGroup: v0 has no rebalance timeout (the session timeout serves), v4+ require a known
/// member id (KIP-394).
pub fn join_request(
    version: i16,
    r: &JoinGroupRequest,
    client_id: String,
    client_host: String,
) -> gc::JoinGroupRequest {
    gc::JoinGroupRequest {
        group_id: s(&r.group_id),
        session_timeout_ms: r.session_timeout_ms,
        rebalance_timeout_ms: if version == 0 {
            r.session_timeout_ms
        } else {
            r.rebalance_timeout_ms
        },
        member_id: s(&r.member_id),
        group_instance_id: r.group_instance_id.as_ref().map(s),
        protocol_type: s(&r.protocol_type),
        protocols: r
            .protocols
            .iter()
            .map(|p| gc::JoinGroupProtocol {
                name: s(&p.name),
                metadata: p.metadata.clone(),
            })
            .collect(),
        require_known_member_id: version >= 4,
        client_id,
        client_host,
    }
}

/// A JoinGroup response at `version`.
pub fn join_response(version: i16, j: gc::JoinGroupResponse) -> JoinGroupResponse {
    // Before v9 there is no skip_assignment: the leader id it gets is not its own, so it does
    // not assign; the member list is not needed then.
    let members = if j.skip_assignment && version < 9 {
        Vec::new()
    } else {
        j.members
    };
    JoinGroupResponse {
        error_code: j.error.code(),
        generation_id: j.generation_id,
        protocol_type: if version >= 7 {
            j.protocol_type.map(Into::into)
        } else {
            None
        },
        protocol_name: if version >= 7 {
            j.protocol_name.map(Into::into)
        } else {
            Some(j.protocol_name.unwrap_or_default().into())
        },
        leader: j.leader.into(),
        skip_assignment: version >= 9 && j.skip_assignment,
        member_id: j.member_id.into(),
        members: members
            .into_iter()
            .map(|m| JoinGroupResponseMember {
                member_id: m.member_id.into(),
                group_instance_id: if version >= 5 {
                    m.group_instance_id.map(Into::into)
                } else {
                    None
                },
                metadata: m.metadata,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// SyncGroup (the v5 protocol fields are `None` before v5).
pub fn sync_request(r: &SyncGroupRequest) -> gc::SyncGroupRequest {
    gc::SyncGroupRequest {
        group_id: s(&r.group_id),
        generation_id: r.generation_id,
        member_id: s(&r.member_id),
        group_instance_id: r.group_instance_id.as_ref().map(s),
        protocol_type: r.protocol_type.as_ref().map(s),
        protocol_name: r.protocol_name.as_ref().map(s),
        assignments: r
            .assignments
            .iter()
            .map(|a| gc::SyncGroupAssignment {
                member_id: s(&a.member_id),
                assignment: a.assignment.clone(),
            })
            .collect(),
    }
}

/// A SyncGroup response at `version`.
pub fn sync_response(version: i16, j: gc::SyncGroupResponse) -> SyncGroupResponse {
    SyncGroupResponse {
        error_code: j.error.code(),
        protocol_type: if version >= 5 {
            j.protocol_type.map(Into::into)
        } else {
            None
        },
        protocol_name: if version >= 5 {
            j.protocol_name.map(Into::into)
        } else {
            None
        },
        assignment: j.assignment,
        ..Default::default()
    }
}

/// Heartbeat.
pub fn heartbeat_request(r: &HeartbeatRequest) -> gc::HeartbeatRequest {
    gc::HeartbeatRequest {
        group_id: s(&r.group_id),
        generation_id: r.generation_id,
        member_id: s(&r.member_id),
        group_instance_id: r.group_instance_id.as_ref().map(s),
    }
}

/// LeaveGroup: one member before v3, a batch from v3.
pub fn leave_request(version: i16, r: &LeaveGroupRequest) -> gc::LeaveGroupRequest {
    let members = if version < 3 {
        vec![gc::LeavingMember {
            member_id: s(&r.member_id),
            group_instance_id: None,
        }]
    } else {
        r.members
            .iter()
            .map(|m| gc::LeavingMember {
                member_id: s(&m.member_id),
                group_instance_id: m.group_instance_id.as_ref().map(s),
            })
            .collect()
    };
    gc::LeaveGroupRequest {
        group_id: s(&r.group_id),
        members,
    }
}

/// A LeaveGroup response at `version`.
pub fn leave_response(version: i16, l: gc::LeaveGroupResponse) -> LeaveGroupResponse {
    if version < 3 {
        let error = match l.error {
            ErrorCode::None => l.members.first().map_or(ErrorCode::None, |m| m.error),
            e => e,
        };
        return LeaveGroupResponse {
            error_code: error.code(),
            ..Default::default()
        };
    }
    LeaveGroupResponse {
        error_code: l.error.code(),
        members: l
            .members
            .into_iter()
            .map(|m| MemberResponse {
                member_id: m.member_id.into(),
                group_instance_id: m.group_instance_id.map(Into::into),
                error_code: m.error.code(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// OffsetCommit: an explicit retention time only in v2-4 (-1: the broker's).
pub fn commit_request(version: i16, r: &OffsetCommitRequest) -> gc::OffsetCommitRequest {
    gc::OffsetCommitRequest {
        group_id: s(&r.group_id),
        generation_id: r.generation_id_or_member_epoch,
        member_id: s(&r.member_id),
        group_instance_id: r.group_instance_id.as_ref().map(s),
        retention_time_ms: ((2..=4).contains(&version) && r.retention_time_ms >= 0)
            .then_some(r.retention_time_ms),
        topics: r
            .topics
            .iter()
            .map(|t| gc::OffsetCommitTopic {
                name: s(&t.name),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| gc::OffsetCommitPartition {
                        partition_index: p.partition_index,
                        committed_offset: p.committed_offset,
                        committed_leader_epoch: p.committed_leader_epoch,
                        committed_metadata: p.committed_metadata.as_ref().map(s),
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// The commit without the partitions `known` does not know, and those partitions.
fn split_unknown(
    mut request: gc::OffsetCommitRequest,
    known: &impl Fn(&str, i32) -> bool,
) -> (gc::OffsetCommitRequest, Vec<(String, i32)>) {
    let mut unknown = Vec::new();
    for t in &mut request.topics {
        t.partitions.retain(|p| {
            let ok = known(&t.name, p.partition_index);
            if !ok {
                unknown.push((t.name.clone(), p.partition_index));
            }
            ok
        });
    }
    request.topics.retain(|t| !t.partitions.is_empty());
    (request, unknown)
}

/// Every partition of `original`, in its order: UNKNOWN_TOPIC_OR_PARTITION for the unknown
/// ones, the coordinator's answer for the others.
fn merge_unknown(
    original: &OffsetCommitRequest,
    answered: gc::OffsetCommitResponse,
    unknown: &[(String, i32)],
) -> gc::OffsetCommitResponse {
    if unknown.is_empty() {
        return answered;
    }
    let error_of = |topic: &str, partition: i32| {
        if unknown.iter().any(|(t, p)| t == topic && *p == partition) {
            return ErrorCode::UnknownTopicOrPartition;
        }
        answered
            .topics
            .iter()
            .filter(|t| t.name == topic)
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == partition)
            .map_or(ErrorCode::UnknownServerError, |p| p.error)
    };
    gc::OffsetCommitResponse {
        topics: original
            .topics
            .iter()
            .map(|t| gc::OffsetCommitTopicResult {
                name: s(&t.name),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| gc::OffsetCommitPartitionResult {
                        partition_index: p.partition_index,
                        error: error_of(&t.name, p.partition_index),
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// An OffsetCommit response.
pub fn commit_response(c: gc::OffsetCommitResponse) -> OffsetCommitResponse {
    OffsetCommitResponse {
        topics: c
            .topics
            .into_iter()
            .map(|t| OffsetCommitResponseTopic {
                name: t.name.into(),
                partitions: t
                    .partitions
                    .into_iter()
                    .map(|p| OffsetCommitResponsePartition {
                        partition_index: p.partition_index,
                        error_code: p.error.code(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// OffsetFetch: one request per group (v8+ batch groups); null topics (v2+) ask for all.
pub fn fetch_requests(version: i16, r: &OffsetFetchRequest) -> Vec<gc::OffsetFetchRequest> {
    if version >= 8 {
        return r
            .groups
            .iter()
            .map(|g| gc::OffsetFetchRequest {
                group_id: s(&g.group_id),
                topics: g.topics.as_ref().map(|ts| {
                    ts.iter()
                        .map(|t| gc::OffsetFetchTopic {
                            name: s(&t.name),
                            partition_indexes: t.partition_indexes.to_vec(),
                        })
                        .collect()
                }),
                require_stable: r.require_stable,
            })
            .collect();
    }
    vec![gc::OffsetFetchRequest {
        group_id: s(&r.group_id),
        topics: r.topics.as_ref().map(|ts| {
            ts.iter()
                .map(|t| gc::OffsetFetchTopic {
                    name: s(&t.name),
                    partition_indexes: t.partition_indexes.to_vec(),
                })
                .collect()
        }),
        require_stable: r.require_stable,
    }]
}

/// An OffsetFetch response at `version` from the answers of [`fetch_requests`].
pub fn fetch_response(version: i16, answers: Vec<gc::OffsetFetchResponse>) -> OffsetFetchResponse {
    let epoch = |e: i32| if version >= 5 { e } else { -1 };
    if version >= 8 {
        return OffsetFetchResponse {
            groups: answers
                .into_iter()
                .map(|g| OffsetFetchResponseGroup {
                    group_id: g.group_id.into(),
                    error_code: g.error.code(),
                    topics: g
                        .topics
                        .into_iter()
                        .map(|t| OffsetFetchResponseTopics {
                            name: t.name.into(),
                            partitions: t
                                .partitions
                                .into_iter()
                                .map(|p| OffsetFetchResponsePartitions {
                                    partition_index: p.partition_index,
                                    committed_offset: p.committed_offset,
                                    committed_leader_epoch: p.committed_leader_epoch,
                                    metadata: p.metadata.map(Into::into),
                                    error_code: p.error.code(),
                                    ..Default::default()
                                })
                                .collect(),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
    }
    let Some(g) = answers.into_iter().next() else {
        return OffsetFetchResponse::default();
    };
    OffsetFetchResponse {
        error_code: if version >= 2 { g.error.code() } else { 0 },
        topics: g
            .topics
            .into_iter()
            .map(|t| OffsetFetchResponseTopic {
                name: t.name.into(),
                partitions: t
                    .partitions
                    .into_iter()
                    .map(|p| OffsetFetchResponsePartition {
                        partition_index: p.partition_index,
                        committed_offset: p.committed_offset,
                        committed_leader_epoch: epoch(p.committed_leader_epoch),
                        metadata: p.metadata.map(Into::into),
                        error_code: p.error.code(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// A DescribeGroups response at `version`.
pub fn describe_response(version: i16, d: gc::DescribeGroupsResponse) -> DescribeGroupsResponse {
    DescribeGroupsResponse {
        groups: d
            .groups
            .into_iter()
            .map(|g| DescribedGroup {
                error_code: g.error.code(),
                group_id: g.group_id.into(),
                group_state: g.group_state.into(),
                protocol_type: g.protocol_type.into(),
                protocol_data: g.protocol_data.into(),
                members: g
                    .members
                    .into_iter()
                    .map(|m| DescribedGroupMember {
                        member_id: m.member_id.into(),
                        group_instance_id: if version >= 4 {
                            m.group_instance_id.map(Into::into)
                        } else {
                            None
                        },
                        client_id: m.client_id.into(),
                        client_host: m.client_host.into(),
                        member_metadata: m.member_metadata,
                        member_assignment: m.member_assignment,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// ListGroups: the states filter from v4, the types filter from v5.
pub fn list_request(version: i16, r: &ListGroupsRequest) -> gc::ListGroupsRequest {
    gc::ListGroupsRequest {
        states_filter: if version >= 4 {
            r.states_filter.iter().map(s).collect()
        } else {
            Vec::new()
        },
        types_filter: if version >= 5 {
            r.types_filter.iter().map(s).collect()
        } else {
            Vec::new()
        },
    }
}

/// A ListGroups response at `version`.
pub fn list_response(version: i16, l: gc::ListGroupsResponse) -> ListGroupsResponse {
    ListGroupsResponse {
        error_code: l.error.code(),
        groups: l
            .groups
            .into_iter()
            .map(|g| ListedGroup {
                group_id: g.group_id.into(),
                protocol_type: g.protocol_type.into(),
                group_state: if version >= 4 {
                    g.group_state.into()
                } else {
                    Default::default()
                },
                group_type: if version >= 5 {
                    g.group_type.into()
                } else {
                    Default::default()
                },
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use kafka_wire::{ApiKey, Encode};

    #[test]
    fn requests_map_as_kafka_reads_each_version() {
        let join = JoinGroupRequest {
            group_id: "g".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 60_000,
            ..Default::default()
        };
        let v0 = join_request(0, &join, "c".into(), "/h".into());
        assert_eq!(
            v0.rebalance_timeout_ms, 10_000,
            "v0: the session timeout serves"
        );
        assert!(!v0.require_known_member_id);
        let v4 = join_request(4, &join, "c".into(), "/h".into());
        assert_eq!(v4.rebalance_timeout_ms, 60_000);
        assert!(v4.require_known_member_id, "KIP-394 from v4");

        let leave = LeaveGroupRequest {
            group_id: "g".into(),
            member_id: "m".into(),
            ..Default::default()
        };
        let l = leave_request(2, &leave);
        assert_eq!(l.members.len(), 1);
        assert_eq!(l.members[0].member_id, "m");
        assert!(leave_request(3, &leave).members.is_empty(), "v3+ batch");

        let commit = OffsetCommitRequest {
            group_id: "g".into(),
            retention_time_ms: 5_000,
            ..Default::default()
        };
        assert_eq!(commit_request(2, &commit).retention_time_ms, Some(5_000));
        assert_eq!(commit_request(5, &commit).retention_time_ms, None);
        let v1 = OffsetCommitRequest {
            retention_time_ms: -1,
            ..commit
        };
        assert_eq!(commit_request(3, &v1).retention_time_ms, None);

        use kafka_wire::messages::offset_fetch_request::OffsetFetchRequestGroup;
        let fetch = OffsetFetchRequest {
            groups: vec![
                OffsetFetchRequestGroup {
                    group_id: "a".into(),
                    topics: None,
                    ..Default::default()
                },
                OffsetFetchRequestGroup {
                    group_id: "b".into(),
                    topics: None,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let per_group = fetch_requests(8, &fetch);
        assert_eq!(
            per_group
                .iter()
                .map(|r| r.group_id.as_str())
                .collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert!(
            per_group.iter().all(|r| r.topics.is_none()),
            "null topics: all"
        );
    }

    /// Responses with every field set encode at every version (nothing a version lacks is
    /// left set).
    #[test]
    fn group_responses_encode_at_every_version() {
        let join = gc::JoinGroupResponse {
            error: ErrorCode::None,
            generation_id: 3,
            protocol_type: Some("consumer".into()),
            protocol_name: Some("range".into()),
            leader: "m-1".into(),
            skip_assignment: true,
            member_id: "m-1".into(),
            members: vec![gc::JoinGroupMember {
                member_id: "m-1".into(),
                group_instance_id: Some("i".into()),
                metadata: Bytes::from_static(b"x"),
            }],
        };
        let (lo, hi) = ApiKey::JoinGroup.versions();
        for v in lo..=hi {
            join_response(v, join.clone()).encode_to_bytes(v).unwrap();
            join_response(
                v,
                gc::JoinGroupResponse::error("", ErrorCode::MemberIdRequired),
            )
            .encode_to_bytes(v)
            .unwrap();
        }
        let sync = gc::SyncGroupResponse {
            error: ErrorCode::None,
            protocol_type: Some("consumer".into()),
            protocol_name: Some("range".into()),
            assignment: Bytes::from_static(b"a"),
        };
        let (lo, hi) = ApiKey::SyncGroup.versions();
        for v in lo..=hi {
            sync_response(v, sync.clone()).encode_to_bytes(v).unwrap();
        }
        let leave = gc::LeaveGroupResponse {
            error: ErrorCode::None,
            members: vec![gc::LeftMember {
                member_id: "m".into(),
                group_instance_id: Some("i".into()),
                error: ErrorCode::UnknownMemberId,
            }],
        };
        let (lo, hi) = ApiKey::LeaveGroup.versions();
        for v in lo..=hi {
            let r = leave_response(v, leave.clone());
            r.encode_to_bytes(v).unwrap();
            if v < 3 {
                assert_eq!(r.error_code, ErrorCode::UnknownMemberId.code());
            }
        }
        let fetched = gc::OffsetFetchResponse {
            group_id: "g".into(),
            error: ErrorCode::None,
            topics: vec![gc::OffsetFetchTopicResult {
                name: "t".into(),
                partitions: vec![gc::OffsetFetchPartition {
                    partition_index: 0,
                    committed_offset: 5,
                    committed_leader_epoch: 2,
                    metadata: Some(String::new()),
                    error: ErrorCode::None,
                }],
            }],
        };
        let (lo, hi) = ApiKey::OffsetFetch.versions();
        for v in lo..=hi {
            fetch_response(v, vec![fetched.clone()])
                .encode_to_bytes(v)
                .unwrap();
        }
        let described = gc::DescribeGroupsResponse {
            groups: vec![gc::DescribedGroup {
                error: ErrorCode::None,
                group_id: "g".into(),
                group_state: "Stable".into(),
                protocol_type: "consumer".into(),
                protocol_data: "range".into(),
                members: vec![gc::DescribedMember {
                    member_id: "m".into(),
                    group_instance_id: Some("i".into()),
                    client_id: "c".into(),
                    client_host: "/h".into(),
                    member_metadata: Bytes::new(),
                    member_assignment: Bytes::new(),
                }],
            }],
        };
        let (lo, hi) = ApiKey::DescribeGroups.versions();
        for v in lo..=hi {
            describe_response(v, described.clone())
                .encode_to_bytes(v)
                .unwrap();
        }
        let listed = gc::ListGroupsResponse {
            error: ErrorCode::None,
            groups: vec![gc::ListedGroup {
                group_id: "g".into(),
                protocol_type: "consumer".into(),
                group_state: "Stable".into(),
                group_type: "classic".into(),
            }],
        };
        let (lo, hi) = ApiKey::ListGroups.versions();
        for v in lo..=hi {
            list_response(v, listed.clone()).encode_to_bytes(v).unwrap();
        }
        let committed = gc::OffsetCommitResponse {
            topics: vec![gc::OffsetCommitTopicResult {
                name: "t".into(),
                partitions: vec![gc::OffsetCommitPartitionResult {
                    partition_index: 0,
                    error: ErrorCode::None,
                }],
            }],
        };
        let (lo, hi) = ApiKey::OffsetCommit.versions();
        for v in lo..=hi {
            commit_response(committed.clone())
                .encode_to_bytes(v)
                .unwrap();
        }
        let (lo, hi) = ApiKey::Heartbeat.versions();
        for v in lo..=hi {
            HeartbeatResponse::default().encode_to_bytes(v).unwrap();
        }
    }
}
