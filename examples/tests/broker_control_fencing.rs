//! The broker's side of controller fencing: the ISR writer of a [`Broker`] learns, from each
//! LeaderAndIsr, the epoch of the controller that made it leader and stamps its ISR writes with
//! it (K4.1, KIP-380), and control requests from a broker epoch older than the broker's current
//! registration are refused with STALE_BROKER_EPOCH (KIP-380).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ha_examples::broker::{Broker, BrokerConfig, KafkaConnection};
use ha_examples::glue::{IsrChangeQueue, ZkIsrWriter};
use kafka_controller::coordination::{Coordination, CreateMode, MemoryCoordination};
use kafka_controller::zk_data::{paths, PartitionStateZNode};
use kafka_replication::isr::TopicPartition;
use kafka_replication::log::MemoryLog;
use kafka_replication::partition::PartitionConfig;
use kafka_wire::messages::leader_and_isr_request::{
    LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_wire::messages::LeaderAndIsrRequest;
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
    config.partition = PartitionConfig {
        replica_lag_time_max_ms: 200,
        ..PartitionConfig::default()
    };
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
