//! Tests of [`BrokerNode`] on the in-memory store: registration, campaign, session expiry
//! and a clean shutdown.

use std::sync::Arc;
use std::time::Duration;

use kafka_controller::coordination::{Coordination, MemoryTree};
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
