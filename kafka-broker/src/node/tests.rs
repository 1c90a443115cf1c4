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
async fn a_broker_id_held_by_a_live_node_keeps_the_second_one_waiting_until_it_goes() {
    let tree = MemoryTree::new();
    let one = BrokerNode::start(config(1), Arc::new(tree.connect()))
        .await
        .expect("node starts");
    let mut second = config(1);
    second.registration_wait = Duration::from_millis(100);
    let session = Arc::new(tree.connect());
    let again = tokio::spawn(BrokerNode::start(second, session));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !again.is_finished(),
        "the second node waits, it does not exit"
    );
    one.shutdown().await;
    let two = tokio::time::timeout(Duration::from_secs(20), again)
        .await
        .expect("registers once the first node deregistered")
        .expect("the task ends")
        .expect("the second node starts");
    assert!(two.broker_epoch().is_some());
    two.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wildcard_listen_address_without_an_advertised_host_is_refused() {
    let tree = MemoryTree::new();
    for listen in ["0.0.0.0:0", "[::]:0"] {
        let mut c = config(1);
        c.broker.listen = listen.parse().expect("address");
        let r = BrokerNode::start(c, Arc::new(tree.connect())).await;
        assert!(
            matches!(r, Err(super::NodeError::WildcardWithoutAdvertised { .. })),
            "{listen}: {r:?}"
        );
    }
    assert!(
        tree.dump(paths::BROKER_IDS).len() <= 1,
        "nothing registered"
    );
    let mut c = config(1);
    c.broker.listen = "0.0.0.0:0".parse().expect("address");
    c.advertised_host = Some("broker1.example".into());
    let node = BrokerNode::start(c, Arc::new(tree.connect()))
        .await
        .expect("an advertised host makes it fine");
    let zk = KafkaZkClient::new(Arc::new(tree.connect()));
    let (registration, _) = zk.broker(1).await.expect("read").expect("registered");
    assert_eq!(
        registration.endpoints,
        vec![format!(
            "PLAINTEXT://broker1.example:{}",
            node.local_addr().port()
        )]
    );
    node.shutdown().await;
}

/// `log.dirs` guards (Kafka's `lockLogDirs` and `meta.properties`): the directory is locked
/// while a node runs on it, records the broker and cluster it belongs to, and refuses another
/// broker id or another cluster's store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_dir_is_locked_and_belongs_to_one_broker_of_one_cluster() {
    use super::data_dir::META_PROPERTIES;
    use super::NodeError;
    use kafka_controller::zk_data::ClusterId;

    let dir = tempfile::tempdir().expect("tempdir");
    let files = |id: i32| {
        let mut c = config(id);
        c.logs = LogPlacement::Files(dir.path().to_path_buf());
        c
    };
    let tree = MemoryTree::new();
    let node = BrokerNode::start(files(1), Arc::new(tree.connect()))
        .await
        .expect("node starts");
    // The cluster id was created in the store in Kafka's form and recorded in the directory.
    let (data, _) = tree
        .connect()
        .get_data(paths::CLUSTER_ID, false)
        .await
        .expect("/cluster/id");
    let cluster = ClusterId::from_json(&data).expect("decodes");
    assert_eq!((cluster.version.as_str(), cluster.id.len()), ("1", 22));
    assert_eq!(node.cluster_id(), cluster.id);
    let meta = std::fs::read_to_string(dir.path().join(META_PROPERTIES)).expect("meta");
    assert!(
        meta.contains(&format!("cluster.id={}", cluster.id)),
        "{meta}"
    );
    assert!(
        meta.contains("broker.id=1") && meta.contains("version=0"),
        "{meta}"
    );

    // A second process on the same directory is refused while the first holds it.
    let other = MemoryTree::new();
    let r = BrokerNode::start(files(1), Arc::new(other.connect())).await;
    assert!(matches!(r, Err(NodeError::DataDirInUse { .. })), "{r:?}");
    node.shutdown().await;

    // Another broker id on this directory is refused.
    let r = BrokerNode::start(files(2), Arc::new(tree.connect())).await;
    assert!(
        matches!(
            r,
            Err(NodeError::InconsistentBrokerId {
                configured: 2,
                stored: 1,
                ..
            })
        ),
        "{r:?}"
    );
    // So is another cluster (another store with its own /cluster/id).
    let r = BrokerNode::start(files(1), Arc::new(other.connect())).await;
    assert!(
        matches!(r, Err(NodeError::InconsistentClusterId { .. })),
        "{r:?}"
    );
    // The same broker on its own cluster starts again.
    let again = BrokerNode::start(files(1), Arc::new(tree.connect()))
        .await
        .expect("restarts on its own directory");
    again.shutdown().await;
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

/// The leader of each partition of `topic` in the store (`None` while it has none).
async fn store_leaders(tree: &MemoryTree, topic: &str, partitions: i32) -> Vec<Option<i32>> {
    let zk = KafkaZkClient::new(Arc::new(tree.connect()));
    let wanted: Vec<(String, i32)> = (0..partitions).map(|p| (topic.to_owned(), p)).collect();
    zk.partition_states(&wanted)
        .await
        .into_iter()
        .map(|r| r.ok().flatten().map(|(s, _)| s.leader).filter(|l| *l >= 0))
        .collect()
}

/// One acks=all produce of one record to `partition` of `orders` at `addr`: the error code,
/// or why no answer came.
async fn produce_acks_all(addr: std::net::SocketAddr, partition: i32) -> Result<i16, String> {
    use kafka_wire::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_wire::messages::ProduceRequest;
    use kafka_wire::records::RecordBatchBuilder;
    use kafka_wire::{RequestBody, ResponseBody};

    let mut batch = RecordBatchBuilder::new(0);
    batch
        .append(0, Some(b"k"), Some(b"v"), &[])
        .map_err(|e| e.to_string())?;
    let request = RequestBody::Produce(ProduceRequest {
        acks: -1,
        timeout_ms: 10_000,
        topic_data: vec![TopicProduceData {
            name: "orders".into(),
            partition_data: vec![PartitionProduceData {
                index: partition,
                records: Some(batch.build().map_err(|e| e.to_string())?),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    });
    let mut c = crate::KafkaConnection::connect(addr, "acks-all-producer")
        .await
        .map_err(|e| e.to_string())?;
    match c.send(9, &request).await.map_err(|e| e.to_string())? {
        ResponseBody::Produce(r) => Ok(r.responses[0].partition_responses[0].error_code),
        other => Err(format!("not a produce answer: {other:?}")),
    }
}

/// Kafka's `KafkaServer.controlledShutdown` on a leader of partitions: every leadership moves
/// to another in-sync replica while the broker is still registered and serving, and a
/// producer writing with acks=all meanwhile sees only the retriable NOT_LEADER_OR_FOLLOWER
/// before it finds the new leader. Only then does the broker deregister.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controlled_shutdown_moves_every_leadership_before_deregistering() {
    controlled_shutdown_of_a_leader(false).await;
}

/// The same when the leaving broker is the active controller: it answers its own request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controlled_shutdown_of_the_controller_moves_its_leaderships_before_deregistering() {
    controlled_shutdown_of_a_leader(true).await;
}

/// Three nodes, `orders` with 3 partitions of 3 replicas; a leader (the active controller
/// when `controller_leaves`, another broker otherwise) shuts down in a controlled way while an
/// acks=all producer writes to a partition it leads.
async fn controlled_shutdown_of_a_leader(controller_leaves: bool) {
    use std::sync::atomic::{AtomicBool, Ordering};

    use kafka_controller::admin;
    use kafka_controller::assignment::AssignmentStart;
    use kafka_wire::error_code::ErrorCode;

    use super::{ControlledShutdownConfig, ControlledShutdownOutcome};

    let tree = MemoryTree::new();
    let mut nodes = Vec::new();
    for id in 1..=3 {
        let mut c = config(id);
        c.broker.partition.min_insync_replicas = 2;
        c.controller.auto_leader_rebalance_enable = false;
        c.controlled_shutdown = ControlledShutdownConfig::new(3, Duration::from_millis(200));
        nodes.push(
            BrokerNode::start(c, Arc::new(tree.connect()))
                .await
                .expect("node starts"),
        );
    }
    eventually("three registered brokers", || {
        tree.dump(paths::BROKER_IDS).len() >= 4
    })
    .await;
    admin::create_topic(&tree.connect(), "orders", 3, 3, AssignmentStart::fixed(0))
        .await
        .expect("topic created");
    let mut leaders = Vec::new();
    for _ in 0..1000 {
        leaders = store_leaders(&tree, "orders", 3).await;
        if leaders.iter().all(Option::is_some) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let active = nodes
        .iter()
        .position(|n| n.controller().status().active_epoch.is_some())
        .expect("one active controller");
    let leaving = (0..3)
        .find(|i| (*i == active) == controller_leaves && leaders.contains(&Some(nodes[*i].id())))
        .expect("a leader to stop");
    let leaving_id = nodes[leaving].id();
    let partition = leaders
        .iter()
        .position(|l| *l == Some(leaving_id))
        .expect("led partition") as i32;
    let addresses: std::collections::BTreeMap<i32, std::net::SocketAddr> =
        nodes.iter().map(|n| (n.id(), n.local_addr())).collect();

    // Before: acks=all produces to the leaving leader succeed.
    let first = produce_acks_all(addresses[&leaving_id], partition).await;
    assert_eq!(first, Ok(0), "the leader takes acks=all writes");

    // A producer keeps writing with acks=all, following the leader named in the store
    // whenever it is told it asked the wrong broker.
    let stop = Arc::new(AtomicBool::new(false));
    let answers = Arc::new(std::sync::Mutex::new(Vec::new()));
    let producer = tokio::spawn({
        let stop = stop.clone();
        let answers = answers.clone();
        let addresses = addresses.clone();
        let tree = tree.clone();
        async move {
            let mut leader = leaving_id;
            while !stop.load(Ordering::SeqCst) {
                let answer = produce_acks_all(addresses[&leader], partition).await;
                answers
                    .lock()
                    .expect("answers")
                    .push((leader, answer.clone()));
                if answer != Ok(0) {
                    if let Some(Some(l)) = store_leaders(&tree, "orders", 3)
                        .await
                        .get(partition as usize)
                    {
                        leader = *l;
                    }
                }
                tokio::task::yield_now().await;
            }
        }
    });

    let outcome = nodes[leaving].controlled_shutdown().await;
    assert!(
        matches!(outcome, ControlledShutdownOutcome::Succeeded { .. }),
        "{outcome:?}"
    );
    // The leaderships moved while the broker is still registered.
    let after = store_leaders(&tree, "orders", 3).await;
    assert!(
        after.iter().all(|l| l.is_some_and(|l| l != leaving_id)),
        "{after:?}"
    );
    let store = tree.connect();
    assert!(
        store
            .exists(&paths::broker(leaving_id), false)
            .await
            .expect("store")
            .is_some(),
        "still registered after the controlled shutdown"
    );
    // The producer reaches the new leader.
    let new_leader = after[partition as usize].expect("a new leader");
    let wrote_to_new_leader = || {
        answers
            .lock()
            .expect("answers")
            .iter()
            .any(|(l, a)| *l == new_leader && *a == Ok(0))
    };
    eventually("an acks=all write on the new leader", wrote_to_new_leader).await;
    stop.store(true, Ordering::SeqCst);
    producer.await.expect("producer task");
    let answers = answers.lock().expect("answers").clone();
    let leaving_node = nodes.remove(leaving);
    leaving_node.shutdown().await;
    assert!(store
        .exists(&paths::broker(leaving_id), false)
        .await
        .expect("store")
        .is_none());

    let errors: Vec<_> = answers.iter().filter(|(_, a)| *a != Ok(0)).collect();
    assert!(
        errors
            .iter()
            .all(|(_, a)| *a == Ok(ErrorCode::NotLeaderOrFollower.code())),
        "only retriable NOT_LEADER_OR_FOLLOWER errors: {errors:?}"
    );
    for node in nodes {
        node.shutdown().await;
    }
}

/// With `controlled.shutdown.enable=false` nothing is asked of the controller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controlled_shutdown_can_be_disabled() {
    let tree = MemoryTree::new();
    let mut c = config(1);
    c.controlled_shutdown.enable = false;
    let node = BrokerNode::start(c, Arc::new(tree.connect()))
        .await
        .expect("node starts");
    assert_eq!(
        node.controlled_shutdown().await,
        super::ControlledShutdownOutcome::Disabled
    );
    node.shutdown().await;
}
