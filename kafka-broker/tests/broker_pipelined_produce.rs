//! More acks=all produces in flight than the broker has handler workers: each parks in the
//! delayed-produce purgatory without holding a worker, so the follower's fetches are still
//! served, the high watermark advances and every produce commits.

mod broker_common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use kafka_broker::server::ServerConfig;
use kafka_replication::isr::{LeaderAndIsr, MemoryIsrWriter, TopicPartition};
use kafka_wire::frame::{decode_frame, encode_frame, DEFAULT_MAX_FRAME_SIZE};
use kafka_wire::{ApiKey, RequestHeader, ResponseBody, ResponseHeader};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use broker_common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k3_acks_all_produces_beyond_the_handler_count_all_commit() {
    let handlers = ServerConfig::default().num_handlers;
    let in_flight = ServerConfig::default().max_in_flight_per_connection;
    assert!(
        in_flight > handlers,
        "the test needs more in flight than workers"
    );

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
    if let Ok(mut a) = addresses.lock() {
        a.insert(1, b1.server.local_addr());
        a.insert(2, b2.server.local_addr());
    }
    for b in [&b1, &b2] {
        connect(b)
            .await
            .send(4, &leader_and_isr(1, 0, &[1, 2]))
            .await
            .expect("answered");
    }

    // One connection, `in_flight` acks=all produces written back to back.
    let mut s = TcpStream::connect(b1.server.local_addr())
        .await
        .expect("connects");
    let mut out = BytesMut::new();
    for id in 0..in_flight {
        let body = produce(-1, &[b"pipelined"]);
        let header = RequestHeader {
            request_api_key: ApiKey::Produce.as_i16(),
            request_api_version: 9,
            correlation_id: id as i32,
            client_id: Some("test".into()),
            ..Default::default()
        };
        let mut payload = BytesMut::new();
        header
            .encode(&mut payload, ApiKey::Produce.request_header_version(9))
            .expect("header");
        body.encode(&mut payload, 9).expect("body");
        encode_frame(&payload, &mut out, DEFAULT_MAX_FRAME_SIZE).expect("frame");
    }
    s.write_all(&out).await.expect("written");

    let mut buf = BytesMut::new();
    let answers = tokio::time::timeout(Duration::from_secs(4), async {
        let mut answers = Vec::new();
        while answers.len() < in_flight {
            match decode_frame(&mut buf, DEFAULT_MAX_FRAME_SIZE).expect("frame") {
                Some(mut f) => {
                    let h =
                        ResponseHeader::decode(&mut f, ApiKey::Produce.response_header_version(9))
                            .expect("header");
                    let ResponseBody::Produce(r) =
                        ResponseBody::decode(ApiKey::Produce, 9, &mut f).expect("body")
                    else {
                        panic!("not a produce response");
                    };
                    answers.push((
                        h.correlation_id,
                        r.responses[0].partition_responses[0].error_code,
                    ));
                }
                None => {
                    assert!(s.read_buf(&mut buf).await.expect("read") > 0, "closed");
                }
            }
        }
        answers
    })
    .await
    .expect("every produce commits well before its 5 s timeout");
    let expected: Vec<(i32, i16)> = (0..in_flight as i32).map(|id| (id, 0)).collect();
    assert_eq!(answers, expected, "in order, all committed");

    for b in [b1, b2] {
        b.server.shutdown().await;
        b.apis.driver().shutdown().await;
    }
}
