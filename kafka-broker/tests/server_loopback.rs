//! The K3 network server over loopback TCP, driven by raw sockets: request order, ApiVersions,
//! hostile and slow clients, many connections, timeouts and shutdown.

use std::io::ErrorKind;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_broker::server::{
    RequestContext, RequestHandler, Server, ServerConfig, ServerHandle, SupportedApis,
};
use kafka_wire::api::{decode_api_versions_response, UNSUPPORTED_VERSION};
use kafka_wire::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_wire::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_wire::messages::{
    ApiVersionsRequest, FetchRequest, FetchResponse, MetadataRequest, MetadataResponse,
    ProduceRequest, ProduceResponse,
};
use kafka_wire::{ApiKey, RequestBody, RequestHeader, ResponseBody};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

/// How long any single step of a test may take before it counts as stalled.
const STEP: Duration = Duration::from_secs(10);

/// The handler under test: ApiVersions 0–3 only (so v4 is outside the advertised range),
/// Metadata after a random delay, Produce (nothing back for acks=0), Fetch with a large record
/// set.
struct TestHandler {
    max_delay_ms: u64,
    records: Bytes,
    /// Correlation ids of Metadata requests in the order the handler finished them.
    finished: Mutex<Vec<i32>>,
}

impl TestHandler {
    fn new(max_delay_ms: u64) -> Arc<Self> {
        Arc::new(TestHandler {
            max_delay_ms,
            records: Bytes::from(vec![7u8; 1 << 20]),
            finished: Mutex::new(Vec::new()),
        })
    }
}

#[async_trait]
impl RequestHandler for TestHandler {
    fn supported_apis(&self) -> SupportedApis {
        SupportedApis::new()
            .with(ApiKey::ApiVersions, 0, 3)
            .with(ApiKey::Metadata, 0, i16::MAX)
            .with(ApiKey::Produce, 0, i16::MAX)
            .with(ApiKey::Fetch, 0, i16::MAX)
    }

    async fn handle(
        &self,
        _ctx: &RequestContext,
        header: &RequestHeader,
        body: RequestBody,
    ) -> Option<ResponseBody> {
        match body {
            RequestBody::ApiVersions(r) => Some(ResponseBody::ApiVersions(
                self.supported_apis()
                    .answer_api_versions(header.request_api_version, &r),
            )),
            RequestBody::Metadata(_) => {
                if self.max_delay_ms > 0 {
                    let ms = rand::random_range(0..=self.max_delay_ms);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
                if let Ok(mut finished) = self.finished.lock() {
                    finished.push(header.correlation_id);
                }
                Some(ResponseBody::Metadata(MetadataResponse {
                    throttle_time_ms: header.correlation_id,
                    ..Default::default()
                }))
            }
            RequestBody::Produce(p) if p.acks == -7 => panic!("a handler bug"),
            RequestBody::Produce(p) if p.acks == 0 => None,
            RequestBody::Produce(_) => Some(ResponseBody::Produce(ProduceResponse::default())),
            RequestBody::Fetch(_) => Some(ResponseBody::Fetch(FetchResponse {
                responses: vec![FetchableTopicResponse {
                    topic: "t".into(),
                    partitions: vec![PartitionData {
                        records: Some(self.records.clone()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            })),
            _ => None,
        }
    }
}

fn config() -> ServerConfig {
    ServerConfig::default()
        .with_broker(1)
        .with_num_processors(2)
        .with_num_handlers(4)
        .with_request_queue_size(16)
        .with_read_timeout(Duration::from_millis(500))
}

async fn start(config: ServerConfig, handler: Arc<TestHandler>) -> ServerHandle {
    Server::bind("127.0.0.1:0", config, handler)
        .await
        .expect("server binds a loopback port")
}

fn frame(api_key: ApiKey, version: i16, correlation_id: i32, body: &RequestBody) -> Bytes {
    let header = RequestHeader {
        request_api_key: api_key.as_i16(),
        request_api_version: version,
        correlation_id,
        client_id: Some("test".into()),
        unknown_tagged_fields: Default::default(),
    };
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    header
        .encode(&mut buf, api_key.request_header_version(version))
        .expect("header encodes");
    body.encode(&mut buf, version).expect("body encodes");
    let len = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    buf.freeze()
}

fn metadata(correlation_id: i32) -> Bytes {
    let body = RequestBody::Metadata(MetadataRequest {
        topics: Some(Vec::new()),
        ..Default::default()
    });
    frame(ApiKey::Metadata, 3, correlation_id, &body)
}

fn api_versions(version: i16, correlation_id: i32) -> Bytes {
    let body = RequestBody::ApiVersions(ApiVersionsRequest {
        client_software_name: "raw".into(),
        client_software_version: "1".into(),
        ..Default::default()
    });
    frame(ApiKey::ApiVersions, version, correlation_id, &body)
}

fn fetch(correlation_id: i32) -> Bytes {
    let body = RequestBody::Fetch(FetchRequest {
        replica_id: -1,
        max_wait_ms: 0,
        max_bytes: i32::MAX,
        topics: vec![FetchTopic {
            topic: "t".into(),
            partitions: vec![FetchPartition {
                partition_max_bytes: i32::MAX,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    });
    frame(ApiKey::Fetch, 4, correlation_id, &body)
}

/// Reads one response frame's payload; `None` when the server closed the connection.
async fn read_frame(s: &mut TcpStream) -> Option<Bytes> {
    let mut size = [0u8; 4];
    s.read_exact(&mut size).await.ok()?;
    let mut payload = vec![0u8; i32::from_be_bytes(size) as usize];
    s.read_exact(&mut payload).await.ok()?;
    Some(Bytes::from(payload))
}

fn correlation_id(payload: &[u8]) -> i32 {
    i32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])
}

/// One Metadata round trip on `s`, checking the answer carries `id`.
async fn round_trip(s: &mut TcpStream, id: i32) {
    s.write_all(&metadata(id)).await.expect("request written");
    let payload = timeout(STEP, read_frame(s))
        .await
        .expect("response within the step time")
        .expect("connection stays open");
    assert_eq!(correlation_id(&payload), id);
}

/// True once the server has closed `s` (EOF or reset), reading and discarding any data.
async fn closed_by_server(s: &mut TcpStream) -> bool {
    let mut buf = vec![0u8; 64 * 1024];
    let result = timeout(STEP, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == ErrorKind::ConnectionReset => return true,
                Err(_) => return true,
            }
        }
    })
    .await;
    result.unwrap_or(false)
}

async fn connect(server: &ServerHandle) -> TcpStream {
    TcpStream::connect(server.local_addr())
        .await
        .expect("connects")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k3_responses_keep_request_order_when_handlers_finish_out_of_order() {
    let handler = TestHandler::new(5);
    let server = start(config(), handler.clone()).await;
    let mut clients = Vec::new();
    for c in 0..4 {
        let s = connect(&server).await;
        clients.push(tokio::spawn(async move {
            let (mut r, mut w) = s.into_split();
            let n = 100;
            let writer = tokio::spawn(async move {
                for i in 0..n {
                    w.write_all(&metadata(c * 1000 + i)).await.expect("written");
                }
                w
            });
            for i in 0..n {
                let mut size = [0u8; 4];
                timeout(STEP, r.read_exact(&mut size))
                    .await
                    .expect("in time")
                    .expect("read");
                let mut payload = vec![0u8; i32::from_be_bytes(size) as usize];
                r.read_exact(&mut payload).await.expect("read");
                assert_eq!(correlation_id(&payload), c * 1000 + i, "response order");
                let body = MetadataResponse::decode_body(&payload[4..]);
                assert_eq!(body.throttle_time_ms, c * 1000 + i);
            }
            drop(writer.await);
        }));
    }
    for c in clients {
        c.await.expect("client in order");
    }
    server.shutdown().await;
    // The handlers really did finish requests of one connection out of order.
    let finished = handler.finished.lock().expect("not poisoned").clone();
    let of_client_0: Vec<i32> = finished.into_iter().filter(|id| *id < 1000).collect();
    assert_eq!(of_client_0.len(), 100);
    assert!(of_client_0.windows(2).any(|w| w[0] > w[1]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k3_one_in_flight_per_connection_as_kafka_mutes_keeps_order_too() {
    let server = start(
        config().with_max_in_flight_per_connection(1),
        TestHandler::new(3),
    )
    .await;
    let mut s = connect(&server).await;
    let mut pipelined = BytesMut::new();
    for i in 0..50 {
        pipelined.extend_from_slice(&metadata(i));
    }
    s.write_all(&pipelined).await.expect("written");
    for i in 0..50 {
        let payload = timeout(STEP, read_frame(&mut s)).await.expect("in time");
        assert_eq!(correlation_id(&payload.expect("open")), i);
    }
    server.shutdown().await;
}

#[tokio::test]
async fn acks_zero_produce_gets_no_response_and_the_next_request_is_answered() {
    let server = start(config(), TestHandler::new(0)).await;
    let mut s = connect(&server).await;
    let produce = |acks, id| {
        let body = RequestBody::Produce(ProduceRequest {
            acks,
            timeout_ms: 1000,
            ..Default::default()
        });
        frame(ApiKey::Produce, 3, id, &body)
    };
    s.write_all(&produce(0, 1)).await.expect("written");
    s.write_all(&produce(1, 2)).await.expect("written");
    s.write_all(&metadata(3)).await.expect("written");
    let first = timeout(STEP, read_frame(&mut s)).await.expect("in time");
    assert_eq!(correlation_id(&first.expect("open")), 2);
    let second = timeout(STEP, read_frame(&mut s)).await.expect("in time");
    assert_eq!(correlation_id(&second.expect("open")), 3);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_closes_only_its_connection_and_the_workers_go_on() {
    let server = start(config().with_num_handlers(1), TestHandler::new(0)).await;
    let mut good = connect(&server).await;
    round_trip(&mut good, 1).await;
    let mut bad = connect(&server).await;
    let body = RequestBody::Produce(ProduceRequest {
        acks: -7,
        ..Default::default()
    });
    bad.write_all(&frame(ApiKey::Produce, 3, 1, &body))
        .await
        .expect("written");
    assert!(closed_by_server(&mut bad).await);
    // The only worker survived the panic.
    for i in 2..10 {
        round_trip(&mut good, i).await;
    }
    server.shutdown().await;
}

#[tokio::test]
async fn api_versions_v0_and_v3_from_a_raw_socket_advertise_exactly_the_declared_ranges() {
    let handler = TestHandler::new(0);
    let declared = handler.supported_apis();
    let server = start(config(), handler).await;
    let mut s = connect(&server).await;
    for (version, id) in [(0i16, 10), (1, 11), (2, 12), (3, 13)] {
        s.write_all(&api_versions(version, id))
            .await
            .expect("written");
        let payload = timeout(STEP, read_frame(&mut s))
            .await
            .expect("in time")
            .expect("open");
        // Response header v0 for every version: the correlation id, then the body.
        assert_eq!(correlation_id(&payload), id);
        let body = decode_api_versions_response(payload.slice(4..), version).expect("decodes");
        assert_eq!(
            body.error_code, 0,
            "v{version} is inside the advertised range"
        );
        let got: Vec<_> = body
            .api_keys
            .iter()
            .map(|a| (a.api_key, a.min_version, a.max_version))
            .collect();
        let want: Vec<_> = declared
            .iter()
            .map(|(k, lo, hi)| (k.as_i16(), lo, hi))
            .collect();
        assert_eq!(got, want);
        assert!(got.contains(&(18, 0, 3)));
    }
    server.shutdown().await;
}

#[tokio::test]
async fn api_versions_v3_with_an_invalid_client_software_name_gets_invalid_request() {
    let server = start(config(), TestHandler::new(0)).await;
    let mut s = connect(&server).await;
    let body = RequestBody::ApiVersions(ApiVersionsRequest {
        client_software_name: "bad name!".into(),
        client_software_version: "1".into(),
        ..Default::default()
    });
    s.write_all(&frame(ApiKey::ApiVersions, 3, 5, &body))
        .await
        .expect("written");
    let payload = timeout(STEP, read_frame(&mut s))
        .await
        .expect("in time")
        .expect("open");
    assert_eq!(correlation_id(&payload), 5);
    let answer = decode_api_versions_response(payload.slice(4..), 3).expect("decodes");
    assert_eq!(answer.error_code, 42, "INVALID_REQUEST");
    server.shutdown().await;
}

#[tokio::test]
async fn api_versions_above_the_advertised_range_gets_unsupported_version_as_v0() {
    let server = start(config(), TestHandler::new(0)).await;
    let mut s = connect(&server).await;
    // v4 is known to the codec but not declared by the handler; v9 is known to nobody.
    for (version, id) in [(4i16, 40), (9, 90)] {
        let mut request = BytesMut::from(&api_versions(3, id)[..]);
        request[6..8].copy_from_slice(&version.to_be_bytes());
        s.write_all(&request).await.expect("written");
        let payload = timeout(STEP, read_frame(&mut s))
            .await
            .expect("in time")
            .expect("open");
        assert_eq!(correlation_id(&payload), id);
        let body = decode_api_versions_response(payload.slice(4..), version).expect("decodes");
        assert_eq!(body.error_code, UNSUPPORTED_VERSION);
        assert!(body
            .api_keys
            .iter()
            .any(|a| a.api_key == 18 && a.max_version == 3));
    }
    // The connection is still usable.
    round_trip(&mut s, 41).await;
    server.shutdown().await;
}

/// Every kind of bad client, each on its own connection, while a good client keeps going.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_clients_are_closed_and_do_not_disturb_a_concurrent_good_client() {
    let server = start(config().with_max_frame_size(64 * 1024), TestHandler::new(0)).await;
    let mut good = connect(&server).await;
    round_trip(&mut good, 0).await;

    let mut unknown_key = BytesMut::from(&metadata(1)[..]);
    unknown_key[4..6].copy_from_slice(&999i16.to_be_bytes());
    let mut undeclared_key = BytesMut::from(&metadata(1)[..]);
    undeclared_key[4..6].copy_from_slice(&ApiKey::LeaderAndIsr.as_i16().to_be_bytes());
    let mut bad_version = BytesMut::from(&metadata(1)[..]);
    bad_version[6..8].copy_from_slice(&500i16.to_be_bytes());
    let mut truncated_body = BytesMut::from(&metadata(1)[..]);
    let short = (truncated_body.len() - 4 - 3) as i32;
    truncated_body.truncate(truncated_body.len() - 3);
    truncated_body[..4].copy_from_slice(&short.to_be_bytes());
    let mut oversized = BytesMut::new();
    oversized.put_i32(1 << 30);
    oversized.put_slice(&[0; 16]);
    let mut negative = BytesMut::new();
    negative.put_i32(-5);
    let mut stalled = BytesMut::new();
    stalled.put_i32(100);
    stalled.put_slice(&[1; 10]);
    let garbage: Vec<u8> = (0..4096).map(|_| rand::random::<u8>()).collect();

    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("unknown api key", unknown_key.to_vec()),
        (
            "api key the handler does not declare",
            undeclared_key.to_vec(),
        ),
        ("unsupported metadata version", bad_version.to_vec()),
        ("body shorter than its frame", truncated_body.to_vec()),
        ("oversized frame", oversized.to_vec()),
        ("negative frame size", negative.to_vec()),
        ("frame that never completes", stalled.to_vec()),
        ("random garbage", garbage),
    ];
    let mut hostile = Vec::new();
    for (what, bytes) in cases {
        let mut s = connect(&server).await;
        hostile.push(tokio::spawn(async move {
            // The server may close before everything is written.
            let _ = s.write_all(&bytes).await;
            assert!(closed_by_server(&mut s).await, "{what}: connection closed");
        }));
    }
    for i in 1..50 {
        round_trip(&mut good, i).await;
    }
    for h in hostile {
        h.await.expect("hostile client closed");
    }
    for i in 50..60 {
        round_trip(&mut good, i).await;
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_does_not_block_other_connections_of_its_processor() {
    let server = start(
        config()
            .with_num_processors(1)
            .with_write_timeout(Duration::from_secs(4)),
        TestHandler::new(0),
    )
    .await;
    // 32 responses of 1 MiB each: far more than the socket buffers hold.
    let mut slow = connect(&server).await;
    let mut requests = BytesMut::new();
    for i in 0..32 {
        requests.extend_from_slice(&fetch(i));
    }
    slow.write_all(&requests).await.expect("written");
    // Part of the scenario, not a wait for a condition: the server gets time to fill the
    // slow client's socket buffers before the good client's round trips are timed.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let mut good = connect(&server).await;
    let started = tokio::time::Instant::now();
    for i in 0..100 {
        round_trip(&mut good, i).await;
    }
    // Well before the slow connection's write timeout closes it.
    assert!(started.elapsed() < Duration::from_secs(3));

    // After the write timeout the slow client is closed: reading now ends before 32 MiB.
    // The write timeout elapses on purpose: that is what is tested.
    tokio::time::sleep(Duration::from_millis(4500)).await;
    let mut total = 0usize;
    let mut buf = vec![0u8; 1 << 20];
    let ended = timeout(STEP, async {
        loop {
            match slow.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the slow client's connection was closed");
    assert!(total < 32 << 20, "not every response was written: {total}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_connections_are_all_served() {
    let server = start(config(), TestHandler::new(1)).await;
    let addr = server.local_addr();
    let mut clients = Vec::new();
    for c in 0..200 {
        clients.push(tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.expect("connects");
            for i in 0..5 {
                round_trip(&mut s, c * 10 + i).await;
            }
        }));
    }
    for c in clients {
        c.await.expect("client served");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_full_request_channel_slows_clients_down_without_losing_requests() {
    let server = start(
        config().with_num_handlers(1).with_request_queue_size(1),
        TestHandler::new(2),
    )
    .await;
    let addr = server.local_addr();
    let mut clients = Vec::new();
    for c in 0..8 {
        clients.push(tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.expect("connects");
            let mut pipelined = BytesMut::new();
            for i in 0..10 {
                pipelined.extend_from_slice(&metadata(c * 100 + i));
            }
            s.write_all(&pipelined).await.expect("written");
            for i in 0..10 {
                let payload = timeout(STEP, read_frame(&mut s)).await.expect("in time");
                assert_eq!(correlation_id(&payload.expect("open")), c * 100 + i);
            }
        }));
    }
    for c in clients {
        c.await.expect("client served");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn an_idle_connection_is_closed_after_the_idle_timeout() {
    let server = start(
        config().with_idle_timeout(Duration::from_millis(300)),
        TestHandler::new(0),
    )
    .await;
    let mut s = connect(&server).await;
    round_trip(&mut s, 1).await;
    assert!(closed_by_server(&mut s).await);
    server.shutdown().await;
}

#[tokio::test]
async fn shutdown_closes_connections_and_stops_accepting() {
    let server = start(config(), TestHandler::new(0)).await;
    let addr = server.local_addr();
    let mut s = connect(&server).await;
    round_trip(&mut s, 1).await;
    timeout(STEP, server.shutdown())
        .await
        .expect("shutdown completes");
    assert!(closed_by_server(&mut s).await);
    assert!(TcpStream::connect(addr).await.is_err(), "listener closed");
}

/// Decoding helper for Metadata v3 bodies in the tests.
trait DecodeBody {
    fn decode_body(bytes: &[u8]) -> Self;
}

impl DecodeBody for MetadataResponse {
    fn decode_body(bytes: &[u8]) -> Self {
        use kafka_wire::Decode;
        MetadataResponse::decode(&mut Bytes::copy_from_slice(bytes), 3).expect("decodes")
    }
}
