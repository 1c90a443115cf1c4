//! One broker of `KafkaApis` + `ReplicaDriver` behind the K3 server on loopback TCP, driven
//! by a raw `kafka-wire` client playing both the controller (LeaderAndIsr, UpdateMetadata sent
//! directly, no coordination store) and the clients.

mod broker_common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_broker::{EARLIEST_TIMESTAMP, LATEST_TIMESTAMP};
use kafka_replication::isr::MemoryIsrWriter;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::metadata_request::MetadataRequestTopic;
use kafka_wire::messages::{
    ControlledShutdownRequest, FindCoordinatorRequest, InitProducerIdRequest, MetadataRequest,
    OffsetForLeaderEpochRequest, StopReplicaRequest, UpdateMetadataRequest,
};
use kafka_wire::{ApiKey, RequestBody, ResponseBody, Uuid};

use broker_common::*;

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

/// KIP-320 on a follower, ListOffsets v4+ (Kafka's `Partition.fetchOffsetForTimestamp` through
/// `getLocalLog`): the current leader epoch is checked before the leadership — older is
/// FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH, equal NOT_LEADER_OR_FOLLOWER.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip_320_list_offsets_on_a_follower_checks_the_leader_epoch_before_leadership() {
    let addresses = Arc::new(Mutex::new(HashMap::new()));
    let b2 = start_broker(2, addresses, MemoryIsrWriter::new()).await;
    let mut c = connect(&b2).await;
    // Broker 2 follows broker 1 (unreachable: no address) at leader epoch 3.
    c.send(4, &leader_and_isr(1, 3, &[1, 2]))
        .await
        .expect("answered");
    let at_epoch = |epoch: i32| {
        let RequestBody::ListOffsets(mut r) = list_offsets(LATEST_TIMESTAMP) else {
            unreachable!("list_offsets builds ListOffsets");
        };
        r.topics[0].partitions[0].current_leader_epoch = epoch;
        RequestBody::ListOffsets(r)
    };
    for (epoch, expected) in [
        (2, ErrorCode::FencedLeaderEpoch),
        (4, ErrorCode::UnknownLeaderEpoch),
        (3, ErrorCode::NotLeaderOrFollower),
        (-1, ErrorCode::NotLeaderOrFollower),
    ] {
        let (code, _) = listed_offset(c.send(7, &at_epoch(epoch)).await.expect("answered"));
        assert_eq!(code, expected.code(), "current leader epoch {epoch}");
    }
    b2.server.shutdown().await;
    b2.apis.driver().shutdown().await;
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
    // A deliberate window, the thing tested: a fetch with nothing to read must not return
    // before `max_wait_ms`.
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
