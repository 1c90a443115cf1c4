//! Helpers shared by the broker tests: brokers on loopback ports and the requests a
//! controller and a client send them.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_broker::server::{Server, ServerConfig, ServerHandle};
use kafka_broker::{
    AddressBook, KafkaApis, KafkaConnection, LinkFactory, ReplicaDriver, TcpLeaderLink,
};
use kafka_replication::isr::{BrokerId, MemoryIsrWriter};
use kafka_replication::log::MemoryLog;
use kafka_replication::partition::PartitionConfig;
use kafka_replication::replica_fetcher::FetcherConfig;
use kafka_replication::replica_manager::ReplicaManager;
use kafka_wire::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_wire::messages::leader_and_isr_request::{
    LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_wire::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_wire::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_wire::messages::update_metadata_request::{
    UpdateMetadataBroker, UpdateMetadataEndpoint, UpdateMetadataPartitionState,
    UpdateMetadataTopicState,
};
use kafka_wire::messages::{
    FetchRequest, FetchResponse, LeaderAndIsrRequest, ListOffsetsRequest, ProduceRequest,
    UpdateMetadataRequest,
};
use kafka_wire::records::RecordBatchBuilder;
use kafka_wire::{RequestBody, ResponseBody, Uuid};

pub type Apis = KafkaApis<MemoryLog, TcpLeaderLink, MemoryIsrWriter>;

pub const TOPIC: &str = "orders";
pub const TOPIC_ID: Uuid = Uuid([7; 16]);

pub struct TestBroker {
    pub apis: Arc<Apis>,
    pub server: ServerHandle,
}

/// Starts broker `id` on a free loopback port; its fetchers find leaders in `addresses`.
pub async fn start_broker(
    id: BrokerId,
    addresses: Arc<Mutex<HashMap<BrokerId, SocketAddr>>>,
    isr_writer: MemoryIsrWriter,
) -> TestBroker {
    start_broker_with(id, addresses, isr_writer, PartitionConfig::default()).await
}

pub async fn start_broker_with(
    id: BrokerId,
    addresses: Arc<Mutex<HashMap<BrokerId, SocketAddr>>>,
    isr_writer: MemoryIsrWriter,
    partition_config: PartitionConfig,
) -> TestBroker {
    let fetcher = FetcherConfig::default()
        .with_max_wait_ms(100)
        .with_backoff_ms(50);
    start_broker_full(id, addresses, isr_writer, partition_config, fetcher).await
}

pub async fn start_broker_full(
    id: BrokerId,
    addresses: Arc<Mutex<HashMap<BrokerId, SocketAddr>>>,
    isr_writer: MemoryIsrWriter,
    partition_config: PartitionConfig,
    config: FetcherConfig,
) -> TestBroker {
    if let Ok(filter) = std::env::var("RUST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
    }
    let manager = ReplicaManager::new(id, partition_config, 0, Box::new(|_| Ok(MemoryLog::new())));
    let book: AddressBook = Arc::new(move |b| addresses.lock().ok()?.get(&b).copied());
    let links: LinkFactory<TcpLeaderLink> = Box::new(move |leader| {
        TcpLeaderLink::new(id, leader, book.clone(), Duration::from_secs(5))
    });
    let driver = ReplicaDriver::start(manager, links, isr_writer, config);
    let apis = Arc::new(KafkaApis::new(id, "test-cluster", driver));
    let server = Server::bind(
        "127.0.0.1:0",
        ServerConfig::default().with_broker(id),
        apis.clone(),
    )
    .await
    .expect("server binds");
    TestBroker { apis, server }
}

pub fn leader_and_isr(leader: BrokerId, leader_epoch: i32, replicas: &[BrokerId]) -> RequestBody {
    RequestBody::LeaderAndIsr(LeaderAndIsrRequest {
        controller_id: 100,
        controller_epoch: 1,
        topic_states: vec![LeaderAndIsrTopicState {
            topic_name: TOPIC.into(),
            topic_id: TOPIC_ID,
            partition_states: vec![LeaderAndIsrPartitionState {
                topic_name: TOPIC.into(),
                partition_index: 0,
                controller_epoch: 1,
                leader,
                leader_epoch,
                isr: replicas.iter().copied().collect(),
                partition_epoch: 0,
                replicas: replicas.iter().copied().collect(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    })
}

pub fn update_metadata(
    leader: BrokerId,
    leader_epoch: i32,
    replicas: &[BrokerId],
    brokers: &[(BrokerId, SocketAddr)],
) -> RequestBody {
    RequestBody::UpdateMetadata(UpdateMetadataRequest {
        controller_id: 100,
        controller_epoch: 1,
        topic_states: vec![UpdateMetadataTopicState {
            topic_name: TOPIC.into(),
            topic_id: TOPIC_ID,
            partition_states: vec![UpdateMetadataPartitionState {
                topic_name: TOPIC.into(),
                partition_index: 0,
                controller_epoch: 1,
                leader,
                leader_epoch,
                isr: replicas.iter().copied().collect(),
                replicas: replicas.iter().copied().collect(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        live_brokers: brokers
            .iter()
            .map(|(id, addr)| UpdateMetadataBroker {
                id: *id,
                endpoints: vec![UpdateMetadataEndpoint {
                    port: i32::from(addr.port()),
                    host: addr.ip().to_string().as_str().into(),
                    listener: "PLAINTEXT".into(),
                    ..Default::default()
                }],
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    })
}

pub fn records(values: &[&[u8]]) -> bytes::Bytes {
    let mut b = RecordBatchBuilder::new(0);
    for (i, v) in values.iter().enumerate() {
        b.append(1_000 + i as i64, Some(b"key"), Some(v), &[])
            .expect("record appends");
    }
    b.build().expect("batch builds")
}

pub fn produce(acks: i16, values: &[&[u8]]) -> RequestBody {
    RequestBody::Produce(ProduceRequest {
        acks,
        timeout_ms: 5_000,
        topic_data: vec![TopicProduceData {
            name: TOPIC.into(),
            partition_data: vec![PartitionProduceData {
                index: 0,
                records: Some(records(values)),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    })
}

pub fn fetch(replica_id: BrokerId, offset: i64, current_leader_epoch: i32) -> RequestBody {
    RequestBody::Fetch(FetchRequest {
        replica_id,
        max_wait_ms: 0,
        min_bytes: 1,
        max_bytes: 1 << 20,
        topics: vec![FetchTopic {
            topic: TOPIC.into(),
            topic_id: TOPIC_ID,
            partitions: vec![FetchPartition {
                partition: 0,
                current_leader_epoch,
                fetch_offset: offset,
                last_fetched_epoch: -1,
                log_start_offset: -1,
                partition_max_bytes: 1 << 20,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    })
}

pub fn list_offsets(timestamp: i64) -> RequestBody {
    RequestBody::ListOffsets(ListOffsetsRequest {
        replica_id: -1,
        topics: vec![ListOffsetsTopic {
            name: TOPIC.into(),
            partitions: vec![ListOffsetsPartition {
                partition_index: 0,
                current_leader_epoch: -1,
                timestamp,
                max_num_offsets: 1,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    })
}

pub async fn connect(broker: &TestBroker) -> KafkaConnection {
    KafkaConnection::connect(broker.server.local_addr(), "test-client")
        .await
        .expect("connects")
}

pub fn fetched_partition(r: ResponseBody) -> kafka_wire::messages::fetch_response::PartitionData {
    let ResponseBody::Fetch(FetchResponse { mut responses, .. }) = r else {
        panic!("not a fetch response: {r:?}");
    };
    let mut t = responses.pop().expect("one topic");
    t.partitions.pop().expect("one partition")
}

pub fn listed_offset(r: ResponseBody) -> (i16, i64) {
    let ResponseBody::ListOffsets(mut r) = r else {
        panic!("not a list offsets response: {r:?}");
    };
    let p = r.topics.pop().and_then(|mut t| t.partitions.pop());
    let p = p.expect("one partition");
    (p.error_code, p.offset)
}
