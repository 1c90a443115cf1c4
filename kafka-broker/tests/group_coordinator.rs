//! The group coordinator of two in-process `BrokerNode`s on the in-memory store, over the wire:
//! FindCoordinator creates `__consumer_offsets` and points at the leader of the group's
//! partition; a member joins (KIP-394), syncs, commits and fetches; then the coordinator's
//! broker shuts down, the other broker loads the partition and answers for the group with the
//! committed offset and the same generation.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ha_coordination::MemoryTree;
use kafka_broker::group::GroupConfig;
use kafka_broker::node::{BrokerNode, LogPlacement, NodeConfig};
use kafka_broker::KafkaConnection;
use kafka_group_coordinator::GroupCoordinatorConfig;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_wire::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_wire::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_wire::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_wire::messages::{
    FindCoordinatorRequest, HeartbeatRequest, JoinGroupRequest, OffsetCommitRequest,
    OffsetFetchRequest, SyncGroupRequest,
};
use kafka_wire::{RequestBody, ResponseBody};

const GROUP: &str = "orders-app";

fn config(id: i32) -> NodeConfig {
    let mut c = NodeConfig::new(id, "127.0.0.1:0".parse().expect("address"));
    c.logs = LogPlacement::Memory;
    c.groups = GroupConfig::new()
        .with_coordinator(
            GroupCoordinatorConfig::new()
                .with_offsets_topic_num_partitions(3)
                .with_initial_rebalance_delay_ms(0),
        )
        .with_offsets_topic_replication_factor(2);
    c
}

async fn send(conn: &mut KafkaConnection, version: i16, body: RequestBody) -> ResponseBody {
    conn.send(version, &body).await.expect("answered")
}

/// Asks `via` for the coordinator of GROUP until one other than `not` is named (the metadata
/// of a broker that just went away can lag): its id and address.
async fn find_coordinator(via: &BrokerNode, not: Option<i32>) -> (i32, std::net::SocketAddr) {
    let mut conn = KafkaConnection::connect(via.local_addr(), "test")
        .await
        .expect("connect");
    let started = Instant::now();
    loop {
        let body = RequestBody::FindCoordinator(FindCoordinatorRequest {
            key: GROUP.into(),
            key_type: 0,
            ..Default::default()
        });
        let ResponseBody::FindCoordinator(r) = send(&mut conn, 3, body).await else {
            panic!("not a FindCoordinator response");
        };
        if r.error_code == ErrorCode::None.code() && Some(r.node_id) != not {
            let addr = format!("{}:{}", r.host, r.port).parse().expect("address");
            return (r.node_id, addr);
        }
        assert!(
            r.error_code == ErrorCode::CoordinatorNotAvailable.code() || Some(r.node_id) == not,
            "unexpected FindCoordinator error {}",
            r.error_code
        );
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no coordinator (other than {not:?}) after 30 s: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn join(member_id: &str) -> RequestBody {
    RequestBody::JoinGroup(JoinGroupRequest {
        group_id: GROUP.into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        member_id: member_id.into(),
        protocol_type: "consumer".into(),
        protocols: vec![JoinGroupRequestProtocol {
            name: "range".into(),
            metadata: bytes::Bytes::from_static(b"subscription"),
            ..Default::default()
        }],
        ..Default::default()
    })
}

fn fetch_offset() -> RequestBody {
    RequestBody::OffsetFetch(OffsetFetchRequest {
        group_id: GROUP.into(),
        topics: Some(vec![OffsetFetchRequestTopic {
            name: "orders".into(),
            partition_indexes: vec![0].into(),
            ..Default::default()
        }]),
        ..Default::default()
    })
}

/// OffsetFetch v5 until the group's partition is loaded: the committed offset of orders-0.
async fn fetched_offset(conn: &mut KafkaConnection) -> i64 {
    let started = Instant::now();
    loop {
        let ResponseBody::OffsetFetch(r) = send(conn, 5, fetch_offset()).await else {
            panic!("not an OffsetFetch response");
        };
        if r.error_code == ErrorCode::None.code() {
            return r.topics[0].partitions[0].committed_offset;
        }
        assert!(
            [
                ErrorCode::CoordinatorLoadInProgress.code(),
                ErrorCode::NotCoordinator.code()
            ]
            .contains(&r.error_code),
            "unexpected {}",
            r.error_code
        );
        assert!(started.elapsed() < Duration::from_secs(30), "never loaded");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_offsets_and_generation_survive_a_coordinator_failover() {
    if let Ok(filter) = std::env::var("RUST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
    }
    let tree = MemoryTree::new();
    let mut nodes = Vec::new();
    for id in [1, 2] {
        nodes.push(
            BrokerNode::start(config(id), Arc::new(tree.connect()))
                .await
                .expect("node starts"),
        );
    }
    kafka_controller::admin::create_topic(
        &tree.connect(),
        "orders",
        1,
        2,
        kafka_controller::assignment::AssignmentStart::fixed(0),
    )
    .await
    .expect("topic created");
    let (coordinator, addr) = find_coordinator(&nodes[0], None).await;
    let mut conn = KafkaConnection::connect(addr, "consumer-1")
        .await
        .expect("connect");

    // v4+ batch keys; transactional ids have no coordinator here, share groups are refused.
    for (key_type, expected) in [
        (0, ErrorCode::None),
        (1, ErrorCode::CoordinatorNotAvailable),
        (2, ErrorCode::InvalidRequest),
    ] {
        let body = RequestBody::FindCoordinator(FindCoordinatorRequest {
            key_type,
            coordinator_keys: vec![GROUP.into(), "another-group".into()],
            ..Default::default()
        });
        let ResponseBody::FindCoordinator(r) = send(&mut conn, 4, body).await else {
            panic!("not a FindCoordinator response");
        };
        assert_eq!(r.coordinators.len(), 2);
        assert_eq!(r.coordinators[0].key.to_string(), GROUP);
        assert_eq!(
            r.coordinators[0].error_code,
            expected.code(),
            "key type {key_type}"
        );
        if key_type == 0 {
            assert_eq!(r.coordinators[0].node_id, coordinator);
        }
    }

    // KIP-394: the first JoinGroup (v5) is told its member id (once the coordinator has
    // loaded its partition).
    let started = Instant::now();
    let member_id = loop {
        let ResponseBody::JoinGroup(r) = send(&mut conn, 5, join("")).await else {
            panic!("not a JoinGroup response");
        };
        if r.error_code == ErrorCode::CoordinatorLoadInProgress.code() {
            assert!(started.elapsed() < Duration::from_secs(30), "never loaded");
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        assert_eq!(r.error_code, ErrorCode::MemberIdRequired.code());
        break r.member_id.to_string();
    };
    assert!(member_id.starts_with("consumer-1-"), "{member_id}");
    let ResponseBody::JoinGroup(j) = send(&mut conn, 5, join(&member_id)).await else {
        panic!("not a JoinGroup response");
    };
    assert_eq!(j.error_code, 0);
    assert_eq!(j.generation_id, 1);
    assert_eq!(j.leader.to_string(), member_id);
    assert_eq!(j.members.len(), 1);

    let sync = RequestBody::SyncGroup(SyncGroupRequest {
        group_id: GROUP.into(),
        generation_id: 1,
        member_id: member_id.as_str().into(),
        assignments: vec![SyncGroupRequestAssignment {
            member_id: member_id.as_str().into(),
            assignment: bytes::Bytes::from_static(b"orders-0"),
            ..Default::default()
        }],
        ..Default::default()
    });
    let ResponseBody::SyncGroup(s) = send(&mut conn, 3, sync).await else {
        panic!("not a SyncGroup response");
    };
    assert_eq!(s.error_code, 0);
    assert_eq!(&s.assignment[..], b"orders-0");

    // A commit names a partition that exists and one that does not (Kafka answers
    // UNKNOWN_TOPIC_OR_PARTITION for it); the topic's metadata may still be on its way.
    let commit = RequestBody::OffsetCommit(OffsetCommitRequest {
        group_id: GROUP.into(),
        generation_id_or_member_epoch: 1,
        member_id: member_id.as_str().into(),
        topics: vec![
            OffsetCommitRequestTopic {
                name: "orders".into(),
                partitions: vec![OffsetCommitRequestPartition {
                    partition_index: 0,
                    committed_offset: 1234,
                    committed_metadata: Some("".into()),
                    ..Default::default()
                }],
                ..Default::default()
            },
            OffsetCommitRequestTopic {
                name: "no-such-topic".into(),
                partitions: vec![OffsetCommitRequestPartition {
                    partition_index: 0,
                    committed_offset: 1,
                    ..Default::default()
                }],
                ..Default::default()
            },
        ],
        ..Default::default()
    });
    let started = Instant::now();
    loop {
        let ResponseBody::OffsetCommit(c) = send(&mut conn, 7, commit.clone()).await else {
            panic!("not an OffsetCommit response");
        };
        assert_eq!(
            c.topics[1].partitions[0].error_code,
            ErrorCode::UnknownTopicOrPartition.code()
        );
        let code = c.topics[0].partitions[0].error_code;
        if code == 0 {
            break;
        }
        assert_eq!(code, ErrorCode::UnknownTopicOrPartition.code());
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "orders never known"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(fetched_offset(&mut conn).await, 1234);

    // The coordinator's broker goes away (a clean shutdown: the controller moves its
    // leaderships at once).
    let index = nodes
        .iter()
        .position(|n| n.id() == coordinator)
        .expect("a node");
    let gone = nodes.remove(index);
    gone.shutdown().await;
    let (next, addr) = find_coordinator(&nodes[0], Some(coordinator)).await;
    assert_ne!(next, coordinator, "the other broker coordinates now");
    let mut conn = KafkaConnection::connect(addr, "consumer-1")
        .await
        .expect("connect");
    assert_eq!(
        fetched_offset(&mut conn).await,
        1234,
        "the committed offset survived"
    );
    // The group came back Stable at generation 1 with its member.
    let heartbeat = RequestBody::Heartbeat(HeartbeatRequest {
        group_id: GROUP.into(),
        generation_id: 1,
        member_id: member_id.as_str().into(),
        ..Default::default()
    });
    let ResponseBody::Heartbeat(h) = send(&mut conn, 3, heartbeat).await else {
        panic!("not a Heartbeat response");
    };
    assert_eq!(h.error_code, 0);
    for n in nodes {
        n.shutdown().await;
    }
}
