//! The broker's side of controller fencing: the ISR writer of a [`Broker`] learns, from each
//! LeaderAndIsr, the epoch of the controller that made it leader and stamps its ISR writes with
//! it (K4.1, KIP-380), and control requests from a broker epoch older than the broker's current
//! registration are refused with STALE_BROKER_EPOCH (KIP-380).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ha_coordination::{Coordination, CreateMode, MemoryCoordination, MemoryTree};
use kafka_broker::glue::{BrokerRegistrar, IsrChangeQueue, RegisteredBroker, ZkIsrWriter};
use kafka_broker::{Broker, BrokerConfig, KafkaConnection};
use kafka_controller::zk_data::{paths, BrokerRegistration, PartitionStateZNode};
use kafka_replication::isr::TopicPartition;
use kafka_replication::log::MemoryLog;
use kafka_replication::partition::PartitionConfig;
use kafka_wire::messages::leader_and_isr_request::{
    LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_wire::messages::stop_replica_request::{
    StopReplicaPartitionState, StopReplicaTopicState,
};
use kafka_wire::messages::update_metadata_request::{
    UpdateMetadataBroker, UpdateMetadataEndpoint, UpdateMetadataPartitionState,
    UpdateMetadataTopicState,
};
use kafka_wire::messages::{LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest};
use kafka_wire::{RequestBody, ResponseBody, Uuid};

type TestResult = Result<(), Box<dyn std::error::Error>>;

const TOPIC: &str = "fenced";

/// Kafka's paths and the partition-state znode as a controller of epoch 5 left it.
async fn create_partition(coord: &dyn Coordination) -> TestResult {
    for path in paths::PERSISTENT_PATHS {
        match coord.create(path, b"", CreateMode::Persistent).await {
            Err(e) if !e.is_node_exists() => return Err(e.into()),
            _ => {}
        }
    }
    for path in [
        paths::topic(TOPIC),
        paths::topic_partitions(TOPIC),
        paths::partition(TOPIC, 0),
    ] {
        coord.create(&path, b"", CreateMode::Persistent).await?;
    }
    let state = PartitionStateZNode::new(1, 4, 5, vec![1, 2]);
    coord
        .create(
            &paths::partition_state(TOPIC, 0),
            &state.to_json()?,
            CreateMode::Persistent,
        )
        .await?;
    Ok(())
}

/// LeaderAndIsr v4 (with a broker epoch) making broker 1 leader of the partition, replicas
/// [1, 2], from the controller of `controller_epoch`.
fn leader_and_isr(controller_epoch: i32, broker_epoch: i64) -> RequestBody {
    RequestBody::LeaderAndIsr(LeaderAndIsrRequest {
        controller_id: 100,
        controller_epoch,
        broker_epoch,
        topic_states: vec![LeaderAndIsrTopicState {
            topic_name: TOPIC.into(),
            topic_id: Uuid([3; 16]),
            partition_states: vec![LeaderAndIsrPartitionState {
                topic_name: TOPIC.into(),
                partition_index: 0,
                controller_epoch,
                leader: 1,
                leader_epoch: 4,
                isr: vec![1, 2].into_iter().collect(),
                partition_epoch: 0,
                replicas: vec![1, 2].into_iter().collect(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    })
}

async fn start_broker(
    writer: ZkIsrWriter,
) -> Result<Broker<MemoryLog, ZkIsrWriter>, Box<dyn std::error::Error>> {
    let mut config = BrokerConfig::new(1, SocketAddr::from(([127, 0, 0, 1], 0)));
    config.partition = PartitionConfig::default().with_replica_lag_time_max_ms(200);
    Ok(Broker::start(
        config,
        Box::new(|_| Ok(MemoryLog::new())),
        writer,
        Arc::new(|_| None),
    )
    .await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k4_1_broker_isr_writes_carry_the_controller_epoch_of_the_leader_and_isr() -> TestResult {
    let coord: Arc<dyn Coordination> = Arc::new(MemoryCoordination::new());
    create_partition(coord.as_ref()).await?;
    let writer = ZkIsrWriter::new(
        coord.clone(),
        IsrChangeQueue::new(tokio::time::Instant::now()),
    );
    let epochs = writer.controller_epochs();
    let broker = start_broker(writer).await?;
    let mut c = KafkaConnection::connect(broker.local_addr(), "controller").await?;
    let r = c.send(4, &leader_and_isr(7, -1)).await?;
    assert!(
        matches!(&r, ResponseBody::LeaderAndIsr(l) if l.error_code == 0),
        "{r:?}"
    );
    // The broker's ISR writer, moved into the broker, heard of the leadership.
    let tp = TopicPartition::new(TOPIC, 0);
    assert_eq!(epochs.get(&tp), Some(7));

    // Follower 2 never fetches: the leader shrinks the ISR, and its write carries epoch 7.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let state = loop {
        let (data, _) = coord
            .get_data(&paths::partition_state(TOPIC, 0), false)
            .await?;
        let state = PartitionStateZNode::from_json(&data)?;
        if state.isr == vec![1] {
            break state;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no ISR shrink: {state:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(state.controller_epoch, 7, "{state:?}");
    assert_eq!((state.leader, state.leader_epoch), (1, 4));
    broker.shutdown().await;
    Ok(())
}

/// STALE_BROKER_EPOCH.
const STALE_BROKER_EPOCH: i16 = 77;

/// A broker registered on `tree` as broker 1, following its registration's epoch.
async fn registered_broker(
    tree: &MemoryTree,
) -> Result<
    (
        Broker<MemoryLog, ZkIsrWriter>,
        RegisteredBroker,
        Arc<dyn Coordination>,
    ),
    Box<dyn std::error::Error>,
> {
    let coord: Arc<dyn Coordination> = Arc::new(tree.connect());
    create_partition(coord.as_ref()).await?;
    let writer = ZkIsrWriter::new(
        coord.clone(),
        IsrChangeQueue::new(tokio::time::Instant::now()),
    );
    let broker = start_broker(writer).await?;
    let port = broker.local_addr().port();
    let registered = BrokerRegistrar::new(
        coord.clone(),
        1,
        BrokerRegistration::plaintext("127.0.0.1", port, None, 0),
    )
    .start()
    .await?;
    broker.apis().follow_registration(registered.subscribe());
    Ok((broker, registered, coord))
}

fn has_partition(broker: &Broker<MemoryLog, ZkIsrWriter>) -> bool {
    let tp = TopicPartition::new(TOPIC, 0);
    broker
        .apis()
        .driver()
        .with_manager(|m, _| m.partition(&tp).is_some())
}

fn update_metadata(broker_epoch: i64) -> RequestBody {
    RequestBody::UpdateMetadata(UpdateMetadataRequest {
        controller_id: 100,
        controller_epoch: 7,
        broker_epoch,
        topic_states: vec![UpdateMetadataTopicState {
            topic_name: TOPIC.into(),
            topic_id: Uuid([3; 16]),
            partition_states: vec![UpdateMetadataPartitionState {
                topic_name: TOPIC.into(),
                partition_index: 0,
                controller_epoch: 7,
                leader: 1,
                leader_epoch: 4,
                isr: vec![1].into_iter().collect(),
                replicas: vec![1].into_iter().collect(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        live_brokers: vec![UpdateMetadataBroker {
            id: 1,
            endpoints: vec![UpdateMetadataEndpoint {
                port: 9092,
                host: "127.0.0.1".into(),
                listener: "PLAINTEXT".into(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    })
}

fn stop_replica(broker_epoch: i64) -> RequestBody {
    RequestBody::StopReplica(StopReplicaRequest {
        controller_id: 100,
        controller_epoch: 7,
        broker_epoch,
        topic_states: vec![StopReplicaTopicState {
            topic_name: TOPIC.into(),
            partition_states: vec![StopReplicaPartitionState {
                partition_index: 0,
                leader_epoch: 4,
                delete_partition: true,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip_380_leader_and_isr_from_a_stale_broker_epoch_is_refused_and_not_applied() -> TestResult
{
    let tree = MemoryTree::new();
    let (broker, registered, coord) = registered_broker(&tree).await?;
    let epoch = registered.broker_epoch().ok_or("registered")?;
    assert_eq!(broker.apis().broker_epoch(), epoch);
    let mut c = KafkaConnection::connect(broker.local_addr(), "controller").await?;

    // Older than the registration: refused for every partition, nothing applied (v4 and v5).
    for version in [4, 5] {
        let r = c.send(version, &leader_and_isr(7, epoch - 1)).await?;
        let ResponseBody::LeaderAndIsr(l) = r else {
            return Err(format!("{r:?}").into());
        };
        assert_eq!(l.error_code, STALE_BROKER_EPOCH, "v{version}: {l:?}");
        let codes: Vec<i16> = l
            .partition_errors
            .iter()
            .map(|p| p.error_code)
            .chain(
                l.topics
                    .iter()
                    .flat_map(|t| t.partition_errors.iter().map(|p| p.error_code)),
            )
            .collect();
        assert_eq!(codes, vec![STALE_BROKER_EPOCH], "v{version}: {l:?}");
        assert!(!has_partition(&broker));
    }

    // -1 (not set, as before KIP-380) is accepted; so is the current epoch.
    let r = c.send(4, &leader_and_isr(7, -1)).await?;
    assert!(
        matches!(&r, ResponseBody::LeaderAndIsr(l) if l.error_code == 0),
        "{r:?}"
    );
    assert!(has_partition(&broker));

    // The session expires and the broker registers again: the old epoch is now stale.
    tree.expire(coord.session_id());
    let newer = registered
        .wait_for_epoch_above(epoch, Duration::from_secs(5))
        .await
        .ok_or("re-registered")?;
    assert!(broker.apis().is_broker_epoch_stale(epoch));
    assert!(!broker.apis().is_broker_epoch_stale(newer));
    let r = c.send(4, &leader_and_isr(8, epoch)).await?;
    assert!(
        matches!(&r, ResponseBody::LeaderAndIsr(l) if l.error_code == STALE_BROKER_EPOCH),
        "{r:?}"
    );
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip_380_update_metadata_from_a_stale_broker_epoch_is_refused_and_not_applied() -> TestResult
{
    let tree = MemoryTree::new();
    let (broker, registered, _coord) = registered_broker(&tree).await?;
    let epoch = registered.broker_epoch().ok_or("registered")?;
    let mut c = KafkaConnection::connect(broker.local_addr(), "controller").await?;
    let live = |b: &Broker<MemoryLog, ZkIsrWriter>| {
        b.apis()
            .driver()
            .with_manager(|m, _| m.metadata().live_brokers().count())
    };

    let r = c.send(7, &update_metadata(epoch - 1)).await?;
    assert!(
        matches!(&r, ResponseBody::UpdateMetadata(u) if u.error_code == STALE_BROKER_EPOCH),
        "{r:?}"
    );
    assert_eq!(live(&broker), 0, "nothing applied");

    let r = c.send(7, &update_metadata(-1)).await?;
    assert!(
        matches!(&r, ResponseBody::UpdateMetadata(u) if u.error_code == 0),
        "{r:?}"
    );
    assert_eq!(live(&broker), 1);
    let r = c.send(7, &update_metadata(epoch)).await?;
    assert!(
        matches!(&r, ResponseBody::UpdateMetadata(u) if u.error_code == 0),
        "{r:?}"
    );
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip_380_stop_replica_from_a_stale_broker_epoch_is_refused_and_not_applied() -> TestResult {
    let tree = MemoryTree::new();
    let (broker, registered, _coord) = registered_broker(&tree).await?;
    let epoch = registered.broker_epoch().ok_or("registered")?;
    let mut c = KafkaConnection::connect(broker.local_addr(), "controller").await?;
    let r = c.send(4, &leader_and_isr(7, epoch)).await?;
    assert!(
        matches!(&r, ResponseBody::LeaderAndIsr(l) if l.error_code == 0),
        "{r:?}"
    );
    assert!(has_partition(&broker));

    let r = c.send(3, &stop_replica(epoch - 1)).await?;
    let ResponseBody::StopReplica(s) = r else {
        return Err(format!("{r:?}").into());
    };
    assert_eq!(s.error_code, STALE_BROKER_EPOCH, "{s:?}");
    assert_eq!(
        s.partition_errors
            .iter()
            .map(|p| (p.partition_index, p.error_code))
            .collect::<Vec<_>>(),
        vec![(0, STALE_BROKER_EPOCH)]
    );
    assert!(has_partition(&broker), "nothing applied");

    let r = c.send(3, &stop_replica(epoch)).await?;
    assert!(
        matches!(&r, ResponseBody::StopReplica(s) if s.error_code == 0),
        "{r:?}"
    );
    assert!(!has_partition(&broker), "deleted");
    broker.shutdown().await;
    Ok(())
}
