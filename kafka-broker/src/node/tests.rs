//! Tests of [`BrokerNode`] on the in-memory store: registration, campaign, session expiry
//! and a clean shutdown.

use std::sync::Arc;
use std::time::Duration;

use ha_coordination::{Coordination, MemoryTree};
use kafka_controller::zk_data::{paths, KafkaZkClient};

use super::{BrokerNode, LogPlacement, NodeConfig};

fn config(id: i32) -> NodeConfig {
    let mut c = NodeConfig::new(id, "127.0.0.1:0".parse().expect("address"));
    c.logs = LogPlacement::Memory;
    c
}

async fn eventually(what: &str, mut ok: impl FnMut() -> bool) {
    for _ in 0..500 {
        if ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip_380_node_registers_with_its_listener_and_a_broker_epoch_and_campaigns() {
    let tree = MemoryTree::new();
    let node = BrokerNode::start(config(7), Arc::new(tree.connect()))
        .await
        .expect("node starts");
    let epoch = node.broker_epoch().expect("registered");
    let zk = KafkaZkClient::new(Arc::new(tree.connect()));
    let (registration, czxid) = zk.broker(7).await.expect("read").expect("registered");
    assert_eq!(czxid, epoch);
    assert_eq!(
        registration.endpoints,
        vec![format!(
            "PLAINTEXT://127.0.0.1:{}",
            node.local_addr().port()
        )]
    );
    assert!(node
        .controller()
        .wait_active(Duration::from_secs(5))
        .await
        .is_some());
    node.shutdown().await;
}

/// Expires the node's session; returns the node, its controller epoch before and its broker
/// epoch after re-registering, which must be larger (KIP-380).
async fn expire_and_reregister(tree: &MemoryTree) -> (BrokerNode, i32) {
    let session: Arc<dyn Coordination> = Arc::new(tree.connect());
    let node = BrokerNode::start(config(1), session.clone())
        .await
        .expect("node starts");
    let first = node
        .controller()
        .wait_active(Duration::from_secs(5))
        .await
        .expect("controller");
    let epoch = node.broker_epoch().expect("registered");
    assert!(tree.expire(session.session_id()));
    let mut registrations = node.registered.subscribe();
    let renewed = tokio::time::timeout(
        Duration::from_secs(5),
        registrations.wait_for(|e| e.is_some_and(|e| e > epoch)),
    )
    .await
    .expect("registered again in time")
    .expect("registration task alive")
    .expect("an epoch");
    assert!(renewed > epoch);
    let zk = KafkaZkClient::new(Arc::new(tree.connect()));
    let (_, czxid) = zk.broker(1).await.expect("read").expect("registered");
    assert_eq!(czxid, renewed);
    (node, first)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip_380_session_expiry_re_registers_the_node_with_a_larger_broker_epoch() {
    let tree = MemoryTree::new();
    let (node, _) = expire_and_reregister(&tree).await;
    node.shutdown().await;
}

/// After the expiry the controller may win a higher epoch on the new session and then resign
/// it on the late expiry event; it must campaign again rather than stay inactive while holding
/// `/controller`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k6_after_session_expiry_the_node_campaigns_again_and_controls_with_a_higher_epoch() {
    let tree = MemoryTree::new();
    let (node, first) = expire_and_reregister(&tree).await;
    let controller = node.controller().clone();
    eventually("a controller of a higher epoch", || {
        controller.status().active_epoch.is_some_and(|e| e > first)
    })
    .await;
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_resigns_and_removes_the_registration_so_another_node_takes_over_at_once() {
    let tree = MemoryTree::new();
    let one = BrokerNode::start(config(1), Arc::new(tree.connect()))
        .await
        .expect("node 1 starts");
    one.controller()
        .wait_active(Duration::from_secs(5))
        .await
        .expect("node 1 controls");
    let two = BrokerNode::start(config(2), Arc::new(tree.connect()))
        .await
        .expect("node 2 starts");
    let store = tree.connect();
    one.shutdown().await;
    assert!(store
        .exists(&paths::broker(1), false)
        .await
        .expect("store")
        .is_none());
    assert!(two
        .controller()
        .wait_active(Duration::from_secs(5))
        .await
        .is_some());
    two.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_id_held_by_a_live_node_is_refused() {
    let tree = MemoryTree::new();
    let one = BrokerNode::start(config(1), Arc::new(tree.connect()))
        .await
        .expect("node starts");
    let again = BrokerNode::start(config(1), Arc::new(tree.connect())).await;
    assert!(matches!(again, Err(super::NodeError::Registration(_))));
    one.shutdown().await;
}

/// K6, controlled shutdown through the Kafka API: a ControlledShutdown sent to the broker whose
/// controller is active moves the leaving broker's leaderships away, and the answer lists what
/// it still leads until none is left. A broker that is not the controller answers
/// NOT_CONTROLLER; a request from an earlier registration gets STALE_BROKER_EPOCH (KIP-380).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k6_controlled_shutdown_request_moves_the_leaving_brokers_leaderships_first() {
    use kafka_controller::admin;
    use kafka_controller::assignment::AssignmentStart;
    use kafka_wire::error_code::ErrorCode;
    use kafka_wire::messages::ControlledShutdownRequest;

    let tree = MemoryTree::new();
    let mut nodes = Vec::new();
    for id in 1..=3 {
        let node = BrokerNode::start(config(id), Arc::new(tree.connect()))
            .await
            .expect("node starts");
        nodes.push(node);
    }
    let admin_session = tree.connect();
    eventually("three registered brokers", || {
        tree.dump(paths::BROKER_IDS).len() >= 4
    })
    .await;
    admin::create_topic(&admin_session, "orders", 6, 3, AssignmentStart::fixed(0))
        .await
        .expect("topic created");
    let zk = KafkaZkClient::new(Arc::new(tree.connect()));
    let wanted: Vec<(String, i32)> = (0..6).map(|p| ("orders".to_owned(), p)).collect();
    let leaders = || {
        let zk = &zk;
        let wanted = wanted.clone();
        async move {
            zk.partition_states(&wanted)
                .await
                .into_iter()
                .map(|r| r.ok().flatten().map(|(s, _)| s.leader))
                .collect::<Vec<_>>()
        }
    };
    for _ in 0..500 {
        if leaders().await.iter().all(|l| l.is_some_and(|l| l > 0)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let active = nodes
        .iter()
        .position(|n| n.controller().status().active_epoch.is_some())
        .expect("one active controller");
    let leaving = (active + 1) % 3;
    let other = (active + 2) % 3;
    let leaving_id = nodes[leaving].id();
    assert!(
        leaders().await.contains(&Some(leaving_id)),
        "the leaving broker leads something"
    );
    let request = ControlledShutdownRequest {
        broker_id: leaving_id,
        broker_epoch: nodes[leaving].broker_epoch().expect("registered"),
        ..Default::default()
    };

    // Not the controller: NOT_CONTROLLER.
    let r = nodes[other].apis().controlled_shutdown(&request).await;
    assert_eq!(r.error_code, ErrorCode::NotController.code());
    // An earlier registration: STALE_BROKER_EPOCH.
    let stale = ControlledShutdownRequest {
        broker_epoch: request.broker_epoch - 1,
        ..request.clone()
    };
    let r = nodes[active].apis().controlled_shutdown(&stale).await;
    assert_eq!(r.error_code, ErrorCode::StaleBrokerEpoch.code());
    // The controller moves the leaderships; asked again until nothing is left.
    let mut remaining = usize::MAX;
    for _ in 0..50 {
        let r = nodes[active].apis().controlled_shutdown(&request).await;
        assert_eq!(r.error_code, ErrorCode::None.code());
        remaining = r.remaining_partitions.len();
        if remaining == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(remaining, 0, "every leadership moved");
    let now = leaders().await;
    assert!(
        now.iter().all(|l| l.is_some_and(|l| l != leaving_id)),
        "{now:?}"
    );
    for node in nodes {
        node.shutdown().await;
    }
}
