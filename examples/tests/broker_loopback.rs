//! Brokers of `KafkaApis` + `ReplicaDriver` behind the K3 server on loopback TCP, driven by a
//! raw `kafka-wire` client playing both the controller (LeaderAndIsr, UpdateMetadata sent
//! directly, no coordination store) and the clients.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ha_examples::broker::{
    AddressBook, KafkaApis, KafkaConnection, LinkFactory, ReplicaDriver, TcpLeaderLink,
    EARLIEST_TIMESTAMP, LATEST_TIMESTAMP,
};
use ha_examples::server::{Server, ServerConfig, ServerHandle};
use kafka_replication::isr::{BrokerId, LeaderAndIsr, MemoryIsrWriter, TopicPartition};
use kafka_replication::log::{LogStorage, MemoryLog};
use kafka_replication::partition::PartitionConfig;
use kafka_replication::replica_fetcher::FetcherConfig;
use kafka_replication::replica_manager::ReplicaManager;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_wire::messages::leader_and_isr_request::{
    LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_wire::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_wire::messages::metadata_request::MetadataRequestTopic;
use kafka_wire::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_wire::messages::update_metadata_request::{
    UpdateMetadataBroker, UpdateMetadataEndpoint, UpdateMetadataPartitionState,
    UpdateMetadataTopicState,
};
use kafka_wire::messages::{
    ControlledShutdownRequest, FetchRequest, FetchResponse, FindCoordinatorRequest,
    InitProducerIdRequest, LeaderAndIsrRequest, ListOffsetsRequest, MetadataRequest,
    OffsetForLeaderEpochRequest, ProduceRequest, StopReplicaRequest, UpdateMetadataRequest,
};
use kafka_wire::records::RecordBatchBuilder;
use kafka_wire::{ApiKey, RequestBody, ResponseBody, Uuid};

type Apis = KafkaApis<MemoryLog, TcpLeaderLink, MemoryIsrWriter>;

const TOPIC: &str = "orders";
const TOPIC_ID: Uuid = Uuid([7; 16]);

struct TestBroker {
    apis: Arc<Apis>,
    server: ServerHandle,
}

/// Starts broker `id` on a free loopback port; its fetchers find leaders in `addresses`.
async fn start_broker(
    id: BrokerId,
    addresses: Arc<Mutex<HashMap<BrokerId, SocketAddr>>>,
    isr_writer: MemoryIsrWriter,
) -> TestBroker {
    start_broker_with(id, addresses, isr_writer, PartitionConfig::default()).await
}

async fn start_broker_with(
    id: BrokerId,
    addresses: Arc<Mutex<HashMap<BrokerId, SocketAddr>>>,
    isr_writer: MemoryIsrWriter,
    partition_config: PartitionConfig,
) -> TestBroker {
    let fetcher = FetcherConfig {
        max_wait_ms: 100,
        backoff_ms: 50,
        ..Default::default()
    };
    start_broker_full(id, addresses, isr_writer, partition_config, fetcher).await
}

async fn start_broker_full(
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
        ServerConfig {
            broker: id,
            ..Default::default()
        },
        apis.clone(),
    )
    .await
    .expect("server binds");
    TestBroker { apis, server }
}

fn leader_and_isr(leader: BrokerId, leader_epoch: i32, replicas: &[BrokerId]) -> RequestBody {
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

fn update_metadata(
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

fn records(values: &[&[u8]]) -> bytes::Bytes {
    let mut b = RecordBatchBuilder::new(0);
    for (i, v) in values.iter().enumerate() {
        b.append(1_000 + i as i64, Some(b"key"), Some(v), &[])
            .expect("record appends");
    }
    b.build().expect("batch builds")
}

fn produce(acks: i16, values: &[&[u8]]) -> RequestBody {
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

fn fetch(replica_id: BrokerId, offset: i64, current_leader_epoch: i32) -> RequestBody {
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

fn list_offsets(timestamp: i64) -> RequestBody {
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

async fn connect(broker: &TestBroker) -> KafkaConnection {
    KafkaConnection::connect(broker.server.local_addr(), "test-client")
        .await
        .expect("connects")
}

fn fetched_partition(r: ResponseBody) -> kafka_wire::messages::fetch_response::PartitionData {
    let ResponseBody::Fetch(FetchResponse { mut responses, .. }) = r else {
        panic!("not a fetch response: {r:?}");
    };
    let mut t = responses.pop().expect("one topic");
    t.partitions.pop().expect("one partition")
}

fn listed_offset(r: ResponseBody) -> (i16, i64) {
    let ResponseBody::ListOffsets(mut r) = r else {
        panic!("not a list offsets response: {r:?}");
    };
    let p = r.topics.pop().and_then(|mut t| t.partitions.pop());
    let p = p.expect("one partition");
    (p.error_code, p.offset)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k8_single_broker_answers_produce_fetch_list_offsets_and_metadata_over_tcp() {
    let addresses = Arc::new(Mutex::new(HashMap::new()));
    let b1 = start_broker(1, addresses.clone(), MemoryIsrWriter::new()).await;
    let addr = b1.server.local_addr();
    let mut c = connect(&b1).await;

    // The controller's part, played by hand.
    let r = c
        .send(4, &leader_and_isr(1, 0, &[1]))
        .await
        .expect("answered");
    let ResponseBody::LeaderAndIsr(r) = r else {
        panic!("{r:?}")
    };
    assert_eq!(r.error_code, 0);
    let r = c
        .send(7, &update_metadata(1, 0, &[1], &[(1, addr)]))
        .await
        .expect("answered");
    assert!(
        matches!(r, ResponseBody::UpdateMetadata(ref u) if u.error_code == 0),
        "{r:?}"
    );

    // acks=all with a single-replica ISR is committed at once.
    let r = c
        .send(9, &produce(-1, &[b"a", b"b", b"c"]))
        .await
        .expect("answered");
    let ResponseBody::Produce(r) = r else {
        panic!("{r:?}")
    };
    let p = &r.responses[0].partition_responses[0];
    assert_eq!((p.error_code, p.base_offset), (0, 0));

    let r = c.send(9, &produce(2, &[b"x"])).await.expect("answered");
    assert!(
        matches!(r, ResponseBody::Produce(ref r) if r.responses[0].partition_responses[0].error_code == ErrorCode::InvalidRequiredAcks.code()),
        "{r:?}"
    );

    // Bytes that are no record batch are refused; the connection and the log go on.
    let RequestBody::Produce(mut garbage) = produce(1, &[b"x"]) else {
        unreachable!()
    };
    garbage.topic_data[0].partition_data[0].records = Some(bytes::Bytes::from_static(&[
        0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 9, 1, 2, 3,
    ]));
    let r = c
        .send(9, &RequestBody::Produce(garbage))
        .await
        .expect("answered");
    let ResponseBody::Produce(r) = r else {
        panic!("{r:?}")
    };
    assert_ne!(r.responses[0].partition_responses[0].error_code, 0);

    // A consumer reads the three records up to the high watermark.
    let p = fetched_partition(c.send(12, &fetch(-1, 0, 0)).await.expect("answered"));
    assert_eq!(p.error_code, 0);
    assert_eq!(p.high_watermark, 3);
    let data = p.records.expect("records");
    let mut values: Vec<Vec<u8>> = Vec::new();
    for batch in kafka_wire::records::RecordBatches::new(data) {
        for record in batch.expect("batch decodes").records().expect("records") {
            if let Some(v) = record.expect("record decodes").value {
                values.push(v.to_vec());
            }
        }
    }
    assert_eq!(values, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);

    let earliest = listed_offset(
        c.send(7, &list_offsets(EARLIEST_TIMESTAMP))
            .await
            .expect("ok"),
    );
    let latest = listed_offset(
        c.send(7, &list_offsets(LATEST_TIMESTAMP))
            .await
            .expect("ok"),
    );
    assert_eq!((earliest, latest), ((0, 0), (0, 3)));

    let r = c
        .send(
            12,
            &RequestBody::Metadata(MetadataRequest {
                topics: None,
                ..Default::default()
            }),
        )
        .await
        .expect("answered");
    let ResponseBody::Metadata(m) = r else {
        panic!("{r:?}")
    };
    assert_eq!(m.brokers.len(), 1);
    assert_eq!(m.brokers[0].port, i32::from(addr.port()));
    assert_eq!(m.controller_id, 100);
    assert_eq!(m.topics.len(), 1);
    assert_eq!(m.topics[0].topic_id, TOPIC_ID);
    let p = &m.topics[0].partitions[0];
    assert_eq!((p.leader_id, p.isr_nodes.to_vec()), (1, vec![1]));

    // By id (v10+), and topics nobody created: never created on demand.
    let by_id = |name: Option<&str>, topic_id: Uuid| MetadataRequestTopic {
        name: name.map(Into::into),
        topic_id,
        ..Default::default()
    };
    let r = c
        .send(
            12,
            &RequestBody::Metadata(MetadataRequest {
                topics: Some(vec![
                    by_id(None, TOPIC_ID),
                    by_id(Some("nope"), Uuid::default()),
                    by_id(None, Uuid([9; 16])),
                ]),
                ..Default::default()
            }),
        )
        .await
        .expect("answered");
    let ResponseBody::Metadata(m) = r else {
        panic!("{r:?}")
    };
    let codes: Vec<i16> = m.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(
        codes,
        vec![
            0,
            ErrorCode::UnknownTopicOrPartition.code(),
            ErrorCode::UnknownTopicId.code()
        ]
    );
    assert_eq!(m.topics[0].name.as_deref(), Some(TOPIC));

    b1.server.shutdown().await;
    b1.apis.driver().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k8_2_follower_replicates_over_tcp_leader_link_and_acks_all_completes_when_hw_advances() {
    let addresses = Arc::new(Mutex::new(HashMap::new()));
    let mut isr = MemoryIsrWriter::new();
    isr.set(
        TopicPartition::new(TOPIC, 0),
        LeaderAndIsr {
            leader: 1,
            leader_epoch: 0,
            isr: vec![1, 2],
            partition_epoch: 0,
        },
    );
    let b1 = start_broker(1, addresses.clone(), isr.clone()).await;
    let b2 = start_broker(2, addresses.clone(), isr).await;
    let brokers = [(1, b1.server.local_addr()), (2, b2.server.local_addr())];
    if let Ok(mut a) = addresses.lock() {
        a.extend(brokers);
    }
    let mut c1 = connect(&b1).await;
    let mut c2 = connect(&b2).await;
    for c in [&mut c1, &mut c2] {
        c.send(4, &leader_and_isr(1, 0, &[1, 2]))
            .await
            .expect("answered");
        c.send(7, &update_metadata(1, 0, &[1, 2], &brokers))
            .await
            .expect("answered");
    }

    // acks=all waits in the purgatory until broker 2 has fetched the records and the HW
    // covers them.
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        c1.send(9, &produce(-1, &[b"x", b"y"])),
    )
    .await
    .expect("the produce completes")
    .expect("answered");
    let ResponseBody::Produce(r) = r else {
        panic!("{r:?}")
    };
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
    let latest = listed_offset(
        c1.send(7, &list_offsets(LATEST_TIMESTAMP))
            .await
            .expect("ok"),
    );
    assert_eq!(
        latest,
        (0, 2),
        "the leader's high watermark covers both records"
    );

    let tp = TopicPartition::new(TOPIC, 0);
    let follower_leo = b2
        .apis
        .driver()
        .with_manager(|m, _| m.partition(&tp).map(|p| p.log_end_offset()));
    assert_eq!(follower_leo, Some(2));

    for b in [b1, b2] {
        b.server.shutdown().await;
        b.apis.driver().shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip_320_follower_fetch_with_a_stale_leader_epoch_is_fenced() {
    let addresses = Arc::new(Mutex::new(HashMap::new()));
    let b1 = start_broker(1, addresses, MemoryIsrWriter::new()).await;
    let mut c = connect(&b1).await;
    c.send(4, &leader_and_isr(1, 3, &[1, 2]))
        .await
        .expect("answered");

    let p = fetched_partition(c.send(12, &fetch(2, 0, 2)).await.expect("answered"));
    assert_eq!(p.error_code, ErrorCode::FencedLeaderEpoch.code());
    let p = fetched_partition(c.send(12, &fetch(2, 0, 4)).await.expect("answered"));
    assert_eq!(p.error_code, ErrorCode::UnknownLeaderEpoch.code());
    let p = fetched_partition(c.send(12, &fetch(2, 0, 3)).await.expect("answered"));
    assert_eq!(p.error_code, 0);

    b1.server.shutdown().await;
    b1.apis.driver().shutdown().await;
}

/// A request of `key` that is valid at every version, asking about `orders`-0.
fn request_at(key: ApiKey, version: i16) -> Option<RequestBody> {
    Some(match key {
        ApiKey::Metadata => RequestBody::Metadata(MetadataRequest {
            topics: Some(vec![MetadataRequestTopic {
                name: Some(TOPIC.into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ApiKey::ListOffsets => list_offsets(LATEST_TIMESTAMP),
        ApiKey::Produce => produce(1, &[b"v"]),
        ApiKey::StopReplica => RequestBody::StopReplica(StopReplicaRequest {
            controller_id: 100,
            controller_epoch: 1,
            ..Default::default()
        }),
        ApiKey::UpdateMetadata => RequestBody::UpdateMetadata(UpdateMetadataRequest {
            controller_id: 100,
            controller_epoch: 1,
            ..Default::default()
        }),
        ApiKey::Fetch => {
            let RequestBody::Fetch(mut f) = fetch(-1, 0, -1) else {
                return None;
            };
            if version >= 13 {
                f.topics[0].topic = Default::default();
            } else {
                f.topics[0].topic_id = Uuid::default();
            }
            RequestBody::Fetch(f)
        }
        ApiKey::FindCoordinator => RequestBody::FindCoordinator(FindCoordinatorRequest {
            key: if version < 4 {
                "group".into()
            } else {
                "".into()
            },
            coordinator_keys: if version >= 4 {
                vec!["group".into()]
            } else {
                Vec::new()
            },
            ..Default::default()
        }),
        ApiKey::InitProducerId => RequestBody::InitProducerId(InitProducerIdRequest {
            transactional_id: None,
            transaction_timeout_ms: 60_000,
            ..Default::default()
        }),
        ApiKey::OffsetForLeaderEpoch => {
            RequestBody::OffsetForLeaderEpoch(OffsetForLeaderEpochRequest::default())
        }
        _ => return None,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_advertised_version_is_answered_never_unsupported_version() {
    let b1 = start_broker(
        1,
        Arc::new(Mutex::new(HashMap::new())),
        MemoryIsrWriter::new(),
    )
    .await;
    let addr = b1.server.local_addr();
    let mut c = connect(&b1).await;
    c.send(4, &leader_and_isr(1, 0, &[1]))
        .await
        .expect("answered");
    c.send(7, &update_metadata(1, 0, &[1], &[(1, addr)]))
        .await
        .expect("answered");
    c.send(9, &produce(1, &[b"a"])).await.expect("answered");

    let supported = Apis::supported();
    for (key, lo, hi) in supported.iter() {
        for version in lo..=hi {
            let Some(body) = request_at(key, version) else {
                continue;
            };
            let r = c.send(version, &body).await;
            assert!(r.is_ok(), "{key:?} v{version}: {r:?}");
            if let Ok(ResponseBody::InitProducerId(r)) = &r {
                assert_eq!(r.error_code, 0, "idempotent producers get an id");
                assert!(r.producer_id >= 0);
            }
            if let Ok(ResponseBody::FindCoordinator(r)) = &r {
                let code = if version >= 4 {
                    r.coordinators[0].error_code
                } else {
                    r.error_code
                };
                assert_eq!(code, ErrorCode::CoordinatorNotAvailable.code());
            }
        }
    }
    let r = c
        .send(
            3,
            &RequestBody::ControlledShutdown(ControlledShutdownRequest {
                broker_id: 1,
                ..Default::default()
            }),
        )
        .await
        .expect("answered");
    assert!(
        matches!(r, ResponseBody::ControlledShutdown(ref r) if r.error_code == ErrorCode::NotController.code()),
        "{r:?}"
    );

    b1.server.shutdown().await;
    b1.apis.driver().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k8_5_a_consumer_fetch_waits_in_the_purgatory_and_is_answered_by_the_next_produce() {
    let b1 = start_broker(
        1,
        Arc::new(Mutex::new(HashMap::new())),
        MemoryIsrWriter::new(),
    )
    .await;
    let mut consumer = connect(&b1).await;
    let mut producer = connect(&b1).await;
    producer
        .send(4, &leader_and_isr(1, 0, &[1]))
        .await
        .expect("answered");

    let RequestBody::Fetch(mut waiting) = fetch(-1, 0, 0) else {
        unreachable!()
    };
    waiting.max_wait_ms = 5_000;
    let started = std::time::Instant::now();
    let fetch = tokio::spawn(async move {
        consumer
            .send(12, &RequestBody::Fetch(waiting))
            .await
            .expect("answered")
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!fetch.is_finished(), "nothing to read yet: the fetch waits");
    producer
        .send(9, &produce(1, &[b"late"]))
        .await
        .expect("answered");
    let p = fetched_partition(fetch.await.expect("fetch task"));
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "answered by the append, not by the timeout"
    );
    assert_eq!((p.error_code, p.high_watermark), (0, 1));
    assert!(p.records.is_some_and(|r| !r.is_empty()));

    b1.server.shutdown().await;
    b1.apis.driver().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_leader_link_reconnects_once_the_leader_becomes_reachable() {
    let addresses = Arc::new(Mutex::new(HashMap::new()));
    let b1 = start_broker(1, addresses.clone(), MemoryIsrWriter::new()).await;
    let b2 = start_broker(2, addresses.clone(), MemoryIsrWriter::new()).await;
    let mut c1 = connect(&b1).await;
    let mut c2 = connect(&b2).await;
    c1.send(4, &leader_and_isr(1, 0, &[1, 2]))
        .await
        .expect("answered");
    c1.send(9, &produce(1, &[b"a", b"b", b"c"]))
        .await
        .expect("answered");
    // The follower starts fetching while the leader's address is unknown: its link fails
    // and backs off.
    c2.send(4, &leader_and_isr(1, 0, &[1, 2]))
        .await
        .expect("answered");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let tp = TopicPartition::new(TOPIC, 0);
    let leo = |b: &TestBroker| {
        b.apis
            .driver()
            .with_manager(|m, _| m.partition(&tp).map(|p| p.log_end_offset()))
    };
    assert_eq!(leo(&b2), Some(0));

    if let Ok(mut a) = addresses.lock() {
        a.insert(1, b1.server.local_addr());
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while leo(&b2) != Some(3) {
        assert!(
            std::time::Instant::now() < deadline,
            "the follower caught up"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for b in [b1, b2] {
        b.server.shutdown().await;
        b.apis.driver().shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_lag_time_max_a_silent_follower_falling_behind_leaves_the_isr_and_acks_all_completes(
) {
    let addresses = Arc::new(Mutex::new(HashMap::new()));
    let tp = TopicPartition::new(TOPIC, 0);
    let mut store = MemoryIsrWriter::new();
    store.set(
        tp.clone(),
        LeaderAndIsr {
            leader: 1,
            leader_epoch: 0,
            isr: vec![1, 2],
            partition_epoch: 0,
        },
    );
    let config = PartitionConfig {
        replica_lag_time_max_ms: 400,
        min_insync_replicas: 1,
    };
    let b1 = start_broker_with(1, addresses.clone(), store.clone(), config).await;
    let b2 = start_broker_with(2, addresses.clone(), store, config).await;
    if let Ok(mut a) = addresses.lock() {
        a.insert(1, b1.server.local_addr());
    }
    let mut c1 = connect(&b1).await;
    let mut c2 = connect(&b2).await;
    c1.send(4, &leader_and_isr(1, 0, &[1, 2]))
        .await
        .expect("answered");
    c2.send(4, &leader_and_isr(1, 0, &[1, 2]))
        .await
        .expect("answered");
    c1.send(9, &produce(-1, &[b"both"]))
        .await
        .expect("answered");

    // The follower goes away.
    b2.server.shutdown().await;
    b2.apis.driver().shutdown().await;

    // A follower whose log end equals the leader's stays in sync however long it is
    // silent; a new append leaves it behind, and replica.lag.time.max.ms later the leader
    // proposes the ISR without it. The waiting acks=all produce completes then.
    let r = tokio::time::timeout(
        Duration::from_secs(5),
        c1.send(9, &produce(-1, &[b"alone"])),
    )
    .await
    .expect("acks=all completes once the ISR shrinks to the leader")
    .expect("answered");
    let ResponseBody::Produce(r) = r else {
        panic!("{r:?}")
    };
    let p = &r.responses[0].partition_responses[0];
    assert_eq!((p.error_code, p.base_offset), (0, 1));
    let (isr, partition_epoch) = b1
        .apis
        .driver()
        .with_manager(|m, _| {
            m.partition(&tp)
                .map(|p| (p.isr().to_vec(), p.partition_epoch()))
        })
        .expect("partition");
    assert_eq!(
        (isr, partition_epoch),
        (vec![1], 1),
        "written through the IsrWriter"
    );

    b1.server.shutdown().await;
    b1.apis.driver().shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip_101_an_old_leader_becoming_follower_truncates_its_unreplicated_tail_over_tcp() {
    old_leader_truncates_its_tail(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_10554_truncation_through_fetch_v12_diverging_epochs_over_tcp() {
    old_leader_truncates_its_tail(true).await;
}

/// Broker 1 leads epoch 0, loses leadership to broker 2 (epoch 1) without knowing, takes an
/// unreplicated write, then follows broker 2: it must drop that write by leader epoch —
/// through OffsetForLeaderEpoch, or through the diverging epoch of a Fetch v12 answer.
async fn old_leader_truncates_its_tail(truncate_via_fetch: bool) {
    let addresses = Arc::new(Mutex::new(HashMap::new()));
    let fetcher = FetcherConfig {
        max_wait_ms: 100,
        backoff_ms: 50,
        truncate_via_fetch,
        ..Default::default()
    };
    let start = |id| {
        start_broker_full(
            id,
            addresses.clone(),
            MemoryIsrWriter::new(),
            PartitionConfig::default(),
            fetcher,
        )
    };
    let b1 = start(1).await;
    let b2 = start(2).await;
    if let Ok(mut a) = addresses.lock() {
        a.insert(1, b1.server.local_addr());
        a.insert(2, b2.server.local_addr());
    }
    let mut c1 = connect(&b1).await;
    let mut c2 = connect(&b2).await;
    c1.send(4, &leader_and_isr(1, 0, &[1, 2]))
        .await
        .expect("answered");
    c2.send(4, &leader_and_isr(1, 0, &[1, 2]))
        .await
        .expect("answered");
    c1.send(9, &produce(-1, &[b"committed"]))
        .await
        .expect("answered");

    // Broker 2 takes over at epoch 1 while broker 1 still thinks it leads and accepts an
    // acks=1 write nobody replicates.
    c2.send(4, &leader_and_isr(2, 1, &[2, 1]))
        .await
        .expect("answered");
    c1.send(9, &produce(1, &[b"stale"]))
        .await
        .expect("answered");
    c2.send(9, &produce(1, &[b"new"])).await.expect("answered");

    // Broker 1 learns it follows broker 2: it asks where epoch 0 ends (offset 1) over TCP,
    // truncates "stale" and fetches "new".
    c1.send(4, &leader_and_isr(2, 1, &[2, 1]))
        .await
        .expect("answered");
    let tp = TopicPartition::new(TOPIC, 0);
    let state = |b: &TestBroker| {
        b.apis.driver().with_manager(|m, _| {
            m.partition(&tp).map(|p| {
                (
                    p.log_end_offset(),
                    p.log().epoch_cache().latest_epoch(),
                    p.high_watermark(),
                )
            })
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while state(&b1).map(|s| (s.0, s.1)) != Some((2, Some(1))) || state(&b2).map(|s| s.2) != Some(2)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the old leader truncated and caught up: {:?} / {:?}",
            state(&b1),
            state(&b2)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for b in [b1, b2] {
        b.server.shutdown().await;
        b.apis.driver().shutdown().await;
    }
}
