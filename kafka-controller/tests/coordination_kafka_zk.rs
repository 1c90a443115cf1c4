//! Controller election, fencing, broker registration and partition-state CAS through
//! `KafkaZkClient` on the in-memory coordination service.

use std::sync::Arc;

use ha_coordination::{Coordination, CoordinationError, CreateMode, MemoryTree, Op, ANY_VERSION};
use kafka_controller::zk_data::{
    paths, BrokerRegistration, Campaign, ControllerEpoch, ControllerZNode, KafkaZkClient,
    KafkaZkError, PartitionStateZNode,
};

fn client(tree: &MemoryTree) -> KafkaZkClient {
    KafkaZkClient::new(Arc::new(tree.connect()))
}

fn elected(c: Campaign) -> ControllerEpoch {
    match c {
        Campaign::Elected(e) => e,
        Campaign::Lost { controller } => panic!("lost to {controller:?}"),
    }
}

#[tokio::test]
async fn k6_1_first_controller_creates_the_epoch_and_wins_epoch_1() -> Result<(), KafkaZkError> {
    let tree = MemoryTree::new();
    let b1 = client(&tree);
    b1.create_persistent_paths().await?;
    let won = elected(b1.campaign(1, 1_700_000_000_000).await?);
    assert_eq!(won.epoch, 1);
    let (record, owner) = b1.controller(false).await?.expect("registered");
    assert_eq!(record, ControllerZNode::new(1, 1_700_000_000_000));
    assert_eq!(owner, b1.coordination().session_id());
    let (data, stat) = b1
        .coordination()
        .get_data(paths::CONTROLLER_EPOCH, false)
        .await?;
    assert_eq!(data, b"1");
    assert_eq!(stat.version, won.zk_version);
    let (_, controller_stat) = b1.coordination().get_data(paths::CONTROLLER, false).await?;
    assert_eq!(
        controller_stat.czxid, stat.mzxid,
        "/controller and the epoch bump are one transaction"
    );
    Ok(())
}

#[tokio::test]
async fn k6_second_broker_loses_while_a_controller_lives() -> Result<(), KafkaZkError> {
    let tree = MemoryTree::new();
    let (b1, b2) = (client(&tree), client(&tree));
    elected(b1.campaign(1, 0).await?);
    assert_eq!(
        b2.campaign(2, 0).await?,
        Campaign::Lost {
            controller: Some(1)
        }
    );
    assert_eq!(b2.controller_epoch().await?.map(|e| e.epoch), Some(1));
    Ok(())
}

#[tokio::test]
async fn k6_1_successor_after_controller_session_expiry_gets_a_higher_epoch(
) -> Result<(), KafkaZkError> {
    let tree = MemoryTree::new();
    let (b1, b2) = (client(&tree), client(&tree));
    let first = elected(b1.campaign(1, 0).await?);
    assert!(b2.controller(true).await?.is_some());
    tree.expire(b1.coordination().session_id());
    assert!(
        b2.controller(false).await?.is_none(),
        "/controller is ephemeral"
    );
    let second = elected(b2.campaign(2, 0).await?);
    assert_eq!(second.epoch, first.epoch + 1);
    assert!(second.zk_version > first.zk_version);
    Ok(())
}

#[tokio::test]
async fn kafka_6082_stale_controller_write_is_fenced_and_nothing_lands() -> Result<(), KafkaZkError>
{
    let tree = MemoryTree::new();
    let (b1, b2) = (client(&tree), client(&tree));
    b1.create_persistent_paths().await?;
    let stale = elected(b1.campaign(1, 0).await?);
    tree.expire(b1.coordination().session_id());
    let fresh = elected(b2.campaign(2, 0).await?);
    let zombie = b1
        .fenced_multi(
            stale,
            vec![Op::create(
                paths::topic("t"),
                b"{}".to_vec(),
                CreateMode::Persistent,
            )],
        )
        .await;
    assert_eq!(
        zombie,
        Err(KafkaZkError::ControllerMoved {
            expected_version: stale.zk_version
        })
    );
    assert!(b2
        .coordination()
        .exists(&paths::topic("t"), false)
        .await?
        .is_none());
    // The live controller's fenced writes pass, and report op indexes of its own ops.
    let ok = b2
        .fenced_multi(
            fresh,
            vec![Op::create(
                paths::topic("t"),
                b"{}".to_vec(),
                CreateMode::Persistent,
            )],
        )
        .await?;
    assert_eq!(ok.len(), 1);
    let failed = b2
        .fenced_multi(
            fresh,
            vec![
                Op::create(paths::topic("u"), Vec::new(), CreateMode::Persistent),
                Op::delete(paths::topic("missing"), ANY_VERSION),
            ],
        )
        .await;
    assert!(matches!(
        failed,
        Err(KafkaZkError::Coordination(
            CoordinationError::MultiOpFailed { index: 1, .. }
        ))
    ));
    // A stale controller cannot delete its successor's /controller either.
    assert!(b1.resign(stale).await.is_err());
    assert!(b2.controller(false).await?.is_some());
    b2.resign(fresh).await?;
    assert!(b2.controller(false).await?.is_none());
    Ok(())
}

#[tokio::test]
async fn kip_380_broker_epoch_is_the_registration_czxid_and_grows_on_reregistration(
) -> Result<(), KafkaZkError> {
    let tree = MemoryTree::new();
    let broker = client(&tree);
    let other = client(&tree);
    broker.create_persistent_paths().await?;
    let reg = BrokerRegistration::plaintext("h1", 9092, Some("r1"), 0);
    let epoch1 = broker.register_broker(1, &reg).await?;
    assert_eq!(
        broker.register_broker(1, &reg).await?,
        epoch1,
        "idempotent for the same session"
    );
    assert!(matches!(
        other.register_broker(1, &reg).await,
        Err(KafkaZkError::BrokerIdTaken { id: 1, .. })
    ));
    let (read, read_epoch) = other.broker(1).await?.expect("registered");
    assert_eq!((read, read_epoch), (reg.clone(), epoch1));
    tree.expire(broker.coordination().session_id());
    assert_eq!(other.live_broker_ids(false).await?, Vec::<i32>::new());
    let epoch2 = broker.register_broker(1, &reg).await?;
    assert!(epoch2 > epoch1, "a bounced broker has a larger epoch");
    other.register_broker(2, &reg).await?;
    assert_eq!(other.live_broker_ids(false).await?, vec![1, 2]);
    Ok(())
}

#[tokio::test]
async fn k1_partition_state_cas_detects_a_concurrent_isr_change() -> Result<(), KafkaZkError> {
    let tree = MemoryTree::new();
    let controller = client(&tree);
    let leader = client(&tree);
    controller.create_persistent_paths().await?;
    let epoch = elected(controller.campaign(1, 0).await?);
    let state = PartitionStateZNode::new(1, 0, epoch.epoch, vec![1, 2, 3]);
    let c = controller.coordination();
    c.create(&paths::topic("t"), b"{}", CreateMode::Persistent)
        .await?;
    c.create(&paths::topic_partitions("t"), b"", CreateMode::Persistent)
        .await?;
    c.create(&paths::partition("t", 0), b"", CreateMode::Persistent)
        .await?;
    c.create(
        &paths::partition_state("t", 0),
        &state.to_json().map_err(|e| KafkaZkError::Data {
            path: String::new(),
            error: e,
        })?,
        CreateMode::Persistent,
    )
    .await?;
    let read = controller
        .partition_states(&[("t".into(), 0), ("t".into(), 1)])
        .await;
    assert_eq!(read.len(), 2);
    assert_eq!(read[0], Ok(Some((state.clone(), 0))));
    assert_eq!(read[1], Ok(None));
    // The leader shrinks the ISR (its own CAS at version 0).
    let shrunk = PartitionStateZNode::new(1, 0, epoch.epoch, vec![1, 2]);
    leader
        .coordination()
        .set_data(
            &paths::partition_state("t", 0),
            &shrunk.to_json().map_err(|e| KafkaZkError::Data {
                path: String::new(),
                error: e,
            })?,
            0,
        )
        .await?;
    // The controller's write based on version 0 fails; after a re-read it succeeds.
    let new_leader = PartitionStateZNode::new(2, 1, epoch.epoch, vec![2, 3]);
    let stale = controller
        .set_partition_state(epoch, "t", 0, &new_leader, 0)
        .await;
    assert!(matches!(&stale, Err(KafkaZkError::Coordination(e)) if e.is_bad_version()));
    let reread = controller.partition_states(&[("t".into(), 0)]).await;
    assert_eq!(reread[0], Ok(Some((shrunk, 1))));
    let v = controller
        .set_partition_state(epoch, "t", 0, &new_leader, 1)
        .await?;
    assert_eq!(v, 2, "the znode version is the partition epoch");
    Ok(())
}

#[tokio::test]
async fn malformed_controller_epoch_is_a_typed_error() -> Result<(), CoordinationError> {
    let tree = MemoryTree::new();
    let b1 = client(&tree);
    b1.coordination()
        .create(
            paths::CONTROLLER_EPOCH,
            b"not-a-number",
            CreateMode::Persistent,
        )
        .await?;
    assert!(matches!(
        b1.campaign(1, 0).await,
        Err(KafkaZkError::Data { .. })
    ));
    b1.coordination()
        .create(paths::CONTROLLER, b"{broken", CreateMode::Ephemeral)
        .await?;
    assert!(matches!(
        b1.controller(false).await,
        Err(KafkaZkError::Data { .. })
    ));
    Ok(())
}

#[tokio::test]
async fn k2_2_topic_creation_writes_assignment_then_partition_states_fenced(
) -> Result<(), KafkaZkError> {
    use kafka_controller::zk_data::TopicAssignment;
    use std::collections::BTreeMap;

    let tree = MemoryTree::new();
    let controller = client(&tree);
    controller.create_persistent_paths().await?;
    let epoch = elected(controller.campaign(1, 0).await?);
    let assignment = TopicAssignment::new(BTreeMap::from([(0, vec![1, 2]), (1, vec![2, 1])]));
    controller
        .create_topic_assignment(epoch, "t", &assignment)
        .await?;
    assert_eq!(controller.topics(false).await?, vec!["t".to_string()]);
    assert_eq!(
        controller.topic_assignment("t", false).await?,
        Some((assignment.clone(), 0))
    );
    let states = vec![
        (
            "t".to_string(),
            0,
            PartitionStateZNode::new(1, 0, epoch.epoch, vec![1, 2]),
        ),
        (
            "t".to_string(),
            1,
            PartitionStateZNode::new(2, 0, epoch.epoch, vec![2, 1]),
        ),
    ];
    let created = controller.create_partition_states(epoch, &states).await;
    assert_eq!(created, vec![Ok(0), Ok(0)]);
    let again = controller
        .create_partition_states(epoch, &states[..1])
        .await;
    assert!(matches!(&again[0], Err(KafkaZkError::Coordination(e)) if e.is_node_exists()));
    let updates = vec![
        (
            "t".to_string(),
            0,
            PartitionStateZNode::new(2, 1, epoch.epoch, vec![2]),
            0,
        ),
        (
            "t".to_string(),
            1,
            PartitionStateZNode::new(1, 1, epoch.epoch, vec![1]),
            7,
        ),
    ];
    let written = controller.set_partition_states(epoch, &updates).await;
    assert_eq!(written[0], Ok(1));
    assert!(matches!(&written[1], Err(KafkaZkError::Coordination(e)) if e.is_bad_version()));
    Ok(())
}

#[tokio::test]
async fn isr_change_notifications_are_sequential_read_in_order_and_deleted_fenced(
) -> Result<(), KafkaZkError> {
    use kafka_controller::zk_data::TopicPartitionEntry;

    let tree = MemoryTree::new();
    let controller = client(&tree);
    let broker = client(&tree);
    controller.create_persistent_paths().await?;
    let epoch = elected(controller.campaign(1, 0).await?);
    let first = broker
        .create_isr_change_notification(vec![TopicPartitionEntry::new("t", 0)])
        .await?;
    let second = broker
        .create_isr_change_notification(vec![TopicPartitionEntry::new("t", 1)])
        .await?;
    assert!(first.starts_with(paths::ISR_CHANGE_PREFIX) && first < second);
    let names = controller.isr_change_notifications(true).await?;
    assert_eq!(names.len(), 2);
    let read = controller.read_isr_change_notifications(&names).await;
    let partitions: Vec<i32> = read
        .into_iter()
        .map(|r| r.map(|n| n.map(|n| n.partitions[0].partition)))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(partitions, vec![0, 1], "oldest first");
    controller
        .delete_isr_change_notifications(epoch, &names)
        .await?;
    assert!(controller.isr_change_notifications(false).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn k6_2_k6_3_admin_requests_are_watched_even_before_they_exist() -> Result<(), KafkaZkError> {
    use futures::StreamExt;
    use ha_coordination::{CoordinationEvent, WatchEvent, WatchEventKind};

    let tree = MemoryTree::new();
    let controller = client(&tree);
    let admin = client(&tree);
    controller.create_persistent_paths().await?;
    let epoch = elected(controller.campaign(1, 0).await?);
    let mut events = controller.coordination().events();
    assert!(controller.reassignment_request(true).await?.is_none());
    assert!(controller
        .preferred_replica_election_request(true)
        .await?
        .is_none());
    admin
        .coordination()
        .create(
            paths::REASSIGN_PARTITIONS,
            br#"{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[4,5,6]}]}"#,
            CreateMode::Persistent,
        )
        .await?;
    assert_eq!(
        events.next().await,
        Some(CoordinationEvent::Watch(WatchEvent {
            kind: WatchEventKind::NodeCreated,
            path: paths::REASSIGN_PARTITIONS.into()
        }))
    );
    let (request, version) = controller
        .reassignment_request(true)
        .await?
        .expect("present");
    assert_eq!(request.partitions[0].replicas, vec![4, 5, 6]);
    controller
        .delete_admin_request(epoch, paths::REASSIGN_PARTITIONS, version)
        .await?;
    assert!(controller.reassignment_request(false).await?.is_none());
    // Malformed admin JSON is a typed error, not a panic.
    admin
        .coordination()
        .create(
            paths::PREFERRED_REPLICA_ELECTION,
            b"[1,2",
            CreateMode::Persistent,
        )
        .await?;
    assert!(matches!(
        controller.preferred_replica_election_request(false).await,
        Err(KafkaZkError::Data { .. })
    ));
    Ok(())
}

/// Lets the registration's create meet the older session's node, then expires that session
/// before the answer comes back: the node is gone by the time the owner is read.
struct HolderExpiresAfterCreate {
    inner: ha_coordination::MemoryCoordination,
    tree: MemoryTree,
    holder: ha_coordination::SessionId,
    fired: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl ha_coordination::CoordinationLayer for HolderExpiresAfterCreate {
    fn inner(&self) -> &dyn ha_coordination::Coordination {
        &self.inner
    }

    async fn create(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> Result<(String, ha_coordination::Stat), CoordinationError> {
        let r = self.inner.create(path, data, mode).await;
        if r.is_err() && !self.fired.swap(true, std::sync::atomic::Ordering::SeqCst) {
            self.tree.expire(self.holder);
        }
        r
    }
}

/// Found by the real-process fault test under load: a restarted broker's create met its
/// previous process's registration, whose session expired before the owner was read; the
/// read's NoNode ended the broker. As Kafka's `CheckedEphemeral`, the create is tried again.
#[tokio::test]
async fn kip_380_registration_that_vanishes_between_create_and_owner_read_is_created_again(
) -> Result<(), KafkaZkError> {
    let tree = MemoryTree::new();
    let old = client(&tree);
    old.create_persistent_paths().await?;
    let reg = BrokerRegistration::plaintext("h1", 9092, None, 0);
    let old_epoch = old.register_broker(1, &reg).await?;
    let restarted = KafkaZkClient::new(Arc::new(HolderExpiresAfterCreate {
        inner: tree.connect(),
        tree: tree.clone(),
        holder: old.coordination().session_id(),
        fired: std::sync::atomic::AtomicBool::new(false),
    }));
    let epoch = restarted.register_broker(1, &reg).await?;
    assert!(
        epoch > old_epoch,
        "registered anew after the holder expired"
    );
    let (_, read_epoch) = restarted.broker(1).await?.expect("registered");
    assert_eq!(read_epoch, epoch);
    Ok(())
}
