//! The data path's benchmark: produce with acks=all → committed (the high watermark covers the
//! records) → consumed, on three brokers over loopback TCP, beside the floor the hardware sets,
//! measured in the same run, with the ratios against the targets of the reference broker.
//!
//! ```text
//! cargo run --release -p ha-examples --example produce_bench [-- --records <n>] [--producers <n>]
//!     [--in-flight <n>] [--batch <records>] [--latency-samples <n>] [--ping-samples <n>]
//! ```
//!
//! The cluster: brokers 1, 2, 3 (`Broker` with `MemoryLog` and a `MemoryIsrWriter` each, no
//! controller: the benchmark sends LeaderAndIsr and UpdateMetadata itself, as the tests do);
//! topic `bench` with 3 partitions, replication factor 3, partition p led by broker p + 1,
//! `min.insync.replicas=2`; followers fetch with Kafka's defaults (`replica.fetch.wait.max.ms`
//! 500, `min.bytes` 1).
//!
//! The producer shape: `--producers` connections (default 3, one per partition, each to its
//! partition's leader), each keeping up to `--in-flight` requests outstanding (default 5,
//! Kafka's `max.in.flight.requests.per.connection`), every request one batch of `--batch`
//! records (default 16 × 1 KiB = 16 KiB, Kafka's `batch.size`), acks=all.
//! Commit latency is one request's send → acks=all answer. Before that load, an unloaded run
//! has one producer sending one 1 KiB record at a time.
//! Then one consumer per partition reads everything back from the leaders (Fetch, 1 MiB per
//! request) and checks every batch's CRC and the record count.
//!
//! The peers, same process, same run:
//! - a tokio TCP ping-pong of 64 bytes with `TCP_NODELAY` (round trip p50 / p99);
//! - the floor: with replication factor 3 every produced byte crosses loopback three times
//!   (producer → leader, leader → each follower), so three concurrent raw loopback streams
//!   each carry the bytes the produce phase committed (64 KiB writes, `TCP_NODELAY`); their
//!   wall time and the process CPU seconds they cost (from `/proc/self/stat`), measured three
//!   times and summed.
//!
//! During the produce phase it also reads `kafka_replication::data_path`'s counters: the
//! record bytes copied in user space per produced byte on a leader and on a follower, and the
//! hand-offs between tasks per produce request.
//!
//! Percentiles are read from HDR histograms of nanoseconds (three significant digits).

use std::collections::HashMap;
use std::error::Error;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use clap::Parser;
use hdrhistogram::Histogram;
use kafka_broker::{AddressBook, Broker, BrokerConfig, KafkaConnection};
use kafka_replication::data_path::{self, CopyStep, DataPathCounts, Hop};
use kafka_replication::isr::{LeaderAndIsr, MemoryIsrWriter, TopicPartition};
use kafka_replication::log::MemoryLog;
use kafka_replication::partition::PartitionConfig;
use kafka_wire::frame::{decode_frame, encode_frame, DEFAULT_MAX_FRAME_SIZE};
use kafka_wire::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_wire::messages::leader_and_isr_request::{
    LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_wire::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_wire::messages::update_metadata_request::{
    UpdateMetadataBroker, UpdateMetadataEndpoint, UpdateMetadataPartitionState,
    UpdateMetadataTopicState,
};
use kafka_wire::messages::{
    FetchRequest, LeaderAndIsrRequest, ProduceRequest, UpdateMetadataRequest,
};
use kafka_wire::records::{RecordBatchBuilder, RecordBatches};
use kafka_wire::{ApiKey, RequestBody, RequestHeader, ResponseBody, ResponseHeader, Uuid};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};

type BenchResult<T> = Result<T, Box<dyn Error + Send + Sync>>;
type BenchBroker = Broker<MemoryLog, MemoryIsrWriter>;

const TOPIC: &str = "bench";
const TOPIC_ID: Uuid = Uuid([0xbe; 16]);
const PARTITIONS: i32 = 3;
const BROKERS: [i32; 3] = [1, 2, 3];
const RECORD_SIZE: usize = 1024;
const PRODUCE_VERSION: i16 = 9;
const FETCH_VERSION: i16 = 12;
const LEADER_AND_ISR_VERSION: i16 = 4;
const UPDATE_METADATA_VERSION: i16 = 7;
const CONTROLLER_EPOCH: i32 = 1;
/// Throughput target: at least this share of the floor's.
const THROUGHPUT_TARGET: f64 = 0.5;
/// CPU target: at most this many times the floor's CPU per produced MiB.
const CPU_TARGET: f64 = 2.0;
/// Latency target: unloaded p50 commit latency at most this many raw round trips (p50).
const LATENCY_TARGET: f64 = 5.0;
/// Latency target under the throughput load: p99 at most this many raw round trips (p50).
const LOADED_P99_TARGET: f64 = 20.0;
/// Write size of the floor's raw streams.
const FLOOR_CHUNK: usize = 64 * 1024;
/// Times the floor is measured (its wall time and CPU are summed).
const FLOOR_REPEATS: usize = 3;
const MIB: f64 = 1024.0 * 1024.0;

/// The data path's benchmark: produce with acks=all → committed → consumed on three brokers
/// over loopback TCP, beside the floor of raw loopback streams measured in the same run.
#[derive(Debug, Clone, Copy, Parser)]
#[command(name = "produce_bench")]
struct Settings {
    /// Records to produce in the throughput phase (over all producers).
    #[arg(long, value_name = "N", default_value_t = 96_000, value_parser = positive::<usize>)]
    records: usize,
    /// Producer connections; producer i writes to partition i mod 3, on its leader.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = positive::<usize>)]
    producers: usize,
    /// Requests each producer keeps outstanding
    /// (`max.in.flight.requests.per.connection`).
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = positive::<usize>)]
    in_flight: usize,
    /// Records (of 1 KiB) per produce request, one batch each.
    #[arg(long, value_name = "RECORDS", default_value_t = 16, value_parser = positive::<usize>)]
    batch: usize,
    /// Requests of the unloaded commit latency run (one producer, one record per request).
    #[arg(long, value_name = "N", default_value_t = 2_000, value_parser = positive::<usize>)]
    latency_samples: usize,
    /// Round trips of the raw TCP ping-pong baseline.
    #[arg(long, value_name = "N", default_value_t = 20_000, value_parser = positive::<usize>)]
    ping_samples: usize,
}

/// Parses a whole number of at least 1.
fn positive<T: std::str::FromStr + Default + PartialEq>(s: &str) -> Result<T, String> {
    match s.parse::<T>() {
        Ok(n) if n != T::default() => Ok(n),
        _ => Err("expected a whole number of at least 1".to_string()),
    }
}

/// A latency histogram in nanoseconds, three significant digits, growing to fit any value.
fn latency_histogram() -> Histogram<u64> {
    Histogram::new(3).expect("3 significant digits are supported")
}

/// Records `d` in `h` (nanoseconds), growing `h` to fit (only a value beyond what a resize can
/// hold is clamped to the largest one it holds).
fn record(h: &mut Histogram<u64>, d: Duration) {
    let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    if h.record(ns).is_err() {
        h.saturating_record(ns);
    }
}

/// The `q` quantile of `h`.
fn quantile(h: &Histogram<u64>, q: f64) -> Duration {
    Duration::from_nanos(h.value_at_quantile(q))
}

/// User + system CPU seconds of this process so far (Linux; 0 elsewhere).
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) start at the state, field 3;
    // utime and stime are fields 14 and 15, in clock ticks (100 per second on Linux).
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn mib_per_s(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / MIB / d.as_secs_f64().max(1e-9)
}

// ---------------------------------------------------------------------------------------
// Raw baseline
// ---------------------------------------------------------------------------------------

/// Round trips of a 64-byte message to an echo server.
async fn raw_ping_pong(samples: usize) -> BenchResult<Histogram<u64>> {
    const MSG: usize = 64;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await?;
        s.set_nodelay(true)?;
        let mut buf = [0u8; MSG];
        loop {
            if s.read_exact(&mut buf).await.is_err() {
                return Ok::<_, std::io::Error>(());
            }
            s.write_all(&buf).await?;
        }
    });
    let mut c = TcpStream::connect(addr).await?;
    c.set_nodelay(true)?;
    let msg = [7u8; MSG];
    let mut back = [0u8; MSG];
    let warmup = samples / 10;
    let mut rtts = latency_histogram();
    for i in 0..samples + warmup {
        let t = Instant::now();
        c.write_all(&msg).await?;
        c.read_exact(&mut back).await?;
        if i >= warmup {
            record(&mut rtts, t.elapsed());
        }
    }
    drop(c);
    server.await??;
    Ok(rtts)
}

/// The floor of the produce phase: three concurrent loopback streams (producer → leader,
/// leader → each follower, as with replication factor 3) each carrying `per_stream` bytes in
/// `chunk`-byte writes, with `TCP_NODELAY`; the clock stops when every receiver has read its
/// last byte. Returns the wall time and the process CPU seconds it took.
async fn raw_floor(per_stream: usize, chunk: usize) -> BenchResult<(Duration, f64)> {
    let mut servers = Vec::new();
    let mut clients = Vec::new();
    for _ in 0..3 {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        servers.push(tokio::spawn(async move {
            let (mut s, _) = listener.accept().await?;
            s.set_nodelay(true)?;
            let mut buf = vec![0u8; chunk.max(64 * 1024)];
            let mut got = 0;
            while got < per_stream {
                let n = s.read(&mut buf).await?;
                if n == 0 {
                    break;
                }
                got += n;
            }
            s.write_all(&[1]).await?;
            Ok::<_, std::io::Error>(())
        }));
        let c = TcpStream::connect(addr).await?;
        c.set_nodelay(true)?;
        clients.push(c);
    }
    let cpu_before = cpu_seconds();
    let t = Instant::now();
    let senders: Vec<_> = clients
        .into_iter()
        .map(|mut c| {
            tokio::spawn(async move {
                let data = vec![0x5au8; chunk];
                let mut sent = 0;
                while sent < per_stream {
                    let n = chunk.min(per_stream - sent);
                    c.write_all(&data[..n]).await?;
                    sent += n;
                }
                let mut done = [0u8; 1];
                c.read_exact(&mut done).await?;
                Ok::<_, std::io::Error>(())
            })
        })
        .collect();
    for s in senders {
        s.await??;
    }
    let elapsed = t.elapsed();
    let cpu = cpu_seconds() - cpu_before;
    for s in servers {
        s.await??;
    }
    Ok((elapsed, cpu))
}

// ---------------------------------------------------------------------------------------
// The cluster
// ---------------------------------------------------------------------------------------

fn leader_of(partition: i32) -> i32 {
    BROKERS[partition as usize % BROKERS.len()]
}

fn leader_and_isr() -> RequestBody {
    RequestBody::LeaderAndIsr(LeaderAndIsrRequest {
        controller_id: 100,
        controller_epoch: CONTROLLER_EPOCH,
        topic_states: vec![LeaderAndIsrTopicState {
            topic_name: TOPIC.into(),
            topic_id: TOPIC_ID,
            partition_states: (0..PARTITIONS)
                .map(|p| LeaderAndIsrPartitionState {
                    topic_name: TOPIC.into(),
                    partition_index: p,
                    controller_epoch: CONTROLLER_EPOCH,
                    leader: leader_of(p),
                    leader_epoch: 0,
                    isr: BROKERS.iter().copied().collect(),
                    partition_epoch: 0,
                    replicas: BROKERS.iter().copied().collect(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    })
}

fn update_metadata(brokers: &[(i32, SocketAddr)]) -> RequestBody {
    RequestBody::UpdateMetadata(UpdateMetadataRequest {
        controller_id: 100,
        controller_epoch: CONTROLLER_EPOCH,
        topic_states: vec![UpdateMetadataTopicState {
            topic_name: TOPIC.into(),
            topic_id: TOPIC_ID,
            partition_states: (0..PARTITIONS)
                .map(|p| UpdateMetadataPartitionState {
                    topic_name: TOPIC.into(),
                    partition_index: p,
                    controller_epoch: CONTROLLER_EPOCH,
                    leader: leader_of(p),
                    leader_epoch: 0,
                    isr: BROKERS.iter().copied().collect(),
                    replicas: BROKERS.iter().copied().collect(),
                    ..Default::default()
                })
                .collect(),
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

struct Cluster {
    brokers: Vec<BenchBroker>,
    addrs: HashMap<i32, SocketAddr>,
}

/// Starts brokers 1..=3 and makes them leaders and followers of the topic's partitions.
async fn start_cluster() -> BenchResult<Cluster> {
    let book: Arc<Mutex<HashMap<i32, SocketAddr>>> = Arc::default();
    let mut brokers = Vec::new();
    for id in BROKERS {
        let mut isr = MemoryIsrWriter::new();
        for p in 0..PARTITIONS {
            isr.set(
                TopicPartition::new(TOPIC, p),
                LeaderAndIsr {
                    leader: leader_of(p),
                    leader_epoch: 0,
                    isr: BROKERS.to_vec(),
                    partition_epoch: 0,
                },
            );
        }
        let mut config = BrokerConfig::new(id, SocketAddr::from(([127, 0, 0, 1], 0)));
        config.partition = PartitionConfig::default().with_min_insync_replicas(2);
        let lookup = book.clone();
        let addresses: AddressBook = Arc::new(move |b| {
            lookup
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&b)
                .copied()
        });
        let broker =
            Broker::start(config, Box::new(|_| Ok(MemoryLog::new())), isr, addresses).await?;
        book.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, broker.local_addr());
        brokers.push(broker);
    }
    let addrs = book.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let mut live: Vec<(i32, SocketAddr)> = addrs.iter().map(|(k, v)| (*k, *v)).collect();
    live.sort();
    for (_, addr) in &live {
        let mut c = KafkaConnection::connect(*addr, "bench-controller").await?;
        for (version, body) in [
            (LEADER_AND_ISR_VERSION, leader_and_isr()),
            (UPDATE_METADATA_VERSION, update_metadata(&live)),
        ] {
            let r = c.send(version, &body).await?;
            let code = match &r {
                ResponseBody::LeaderAndIsr(r) => r.error_code,
                ResponseBody::UpdateMetadata(r) => r.error_code,
                _ => -1,
            };
            if code != 0 {
                return Err(format!("controller request refused: {r:?}").into());
            }
        }
    }
    Ok(Cluster { brokers, addrs })
}

impl Cluster {
    fn leader_addr(&self, partition: i32) -> BenchResult<SocketAddr> {
        self.addrs
            .get(&leader_of(partition))
            .copied()
            .ok_or_else(|| "no leader address".into())
    }

    async fn shutdown(self) {
        for b in self.brokers {
            b.shutdown().await;
        }
    }
}

fn batch(records: usize, value: &[u8]) -> BenchResult<Bytes> {
    let mut b = RecordBatchBuilder::new(0);
    for i in 0..records {
        b.append(i as i64, None, Some(value), &[])?;
    }
    Ok(b.build()?)
}

fn produce_request(partition: i32, records: Bytes) -> RequestBody {
    RequestBody::Produce(ProduceRequest {
        acks: -1,
        timeout_ms: 30_000,
        topic_data: vec![TopicProduceData {
            name: TOPIC.into(),
            partition_data: vec![PartitionProduceData {
                index: partition,
                records: Some(records),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    })
}

/// One acks=all produce; its latency.
async fn produce_one(c: &mut KafkaConnection, body: &RequestBody) -> BenchResult<Duration> {
    let t = Instant::now();
    let r = c.send(PRODUCE_VERSION, body).await?;
    let elapsed = t.elapsed();
    let ResponseBody::Produce(r) = r else {
        return Err("not a produce response".into());
    };
    let code = r
        .responses
        .iter()
        .flat_map(|t| t.partition_responses.iter())
        .map(|p| p.error_code)
        .find(|c| *c != 0);
    match code {
        None => Ok(elapsed),
        Some(code) => Err(format!("produce failed with error code {code}").into()),
    }
}

/// Bytes of a request frame up to and including its correlation id: size prefix, API key,
/// API version, correlation id.
const FRAME_START: usize = 12;

/// Encodes one request frame (size prefix, header v1/v2, body).
fn request_frame(correlation_id: i32, version: i16, body: &RequestBody) -> BenchResult<Bytes> {
    let api_key = body.api_key();
    let header = RequestHeader {
        request_api_key: api_key.as_i16(),
        request_api_version: version,
        correlation_id,
        client_id: Some("bench-producer".into()),
        ..Default::default()
    };
    let mut payload = BytesMut::new();
    header.encode(&mut payload, api_key.request_header_version(version))?;
    body.encode(&mut payload, version)?;
    let mut frame = BytesMut::with_capacity(payload.len() + 4);
    encode_frame(&payload, &mut frame, DEFAULT_MAX_FRAME_SIZE)?;
    Ok(frame.freeze())
}

/// One producer connection keeping up to `in_flight` acks=all requests outstanding, as a Kafka
/// producer does (`max.in.flight.requests.per.connection`); the latency of every request.
async fn pipelined_producer(
    addr: SocketAddr,
    partition: i32,
    records: Bytes,
    requests: usize,
    in_flight: usize,
) -> BenchResult<Histogram<u64>> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (mut rd, mut wr) = stream.into_split();
    let body = produce_request(partition, records);
    // Every request is the same but for its correlation id: encode it once and write each
    // one as its own 12-byte start (size, API key, version, correlation id) followed by the
    // shared rest, vectored, so the producer copies no records (as the floor's senders).
    let frame = request_frame(0, PRODUCE_VERSION, &body)?;
    let rest = frame.slice(FRAME_START..);
    let permits = Arc::new(Semaphore::new(in_flight));
    let (sent_tx, mut sent_rx) = mpsc::unbounded_channel::<(i32, Instant)>();
    let writer = {
        let permits = permits.clone();
        tokio::spawn(async move {
            for id in 0..requests {
                let correlation_id = i32::try_from(id)?;
                let mut start = [0u8; FRAME_START];
                start.copy_from_slice(&frame[..FRAME_START]);
                start[8..].copy_from_slice(&correlation_id.to_be_bytes());
                permits.acquire().await?.forget();
                sent_tx
                    .send((correlation_id, Instant::now()))
                    .map_err(|_| "the producer's reader stopped")?;
                wr.write_all_buf(&mut Buf::chain(&start[..], rest.clone()))
                    .await?;
            }
            Ok::<_, Box<dyn Error + Send + Sync>>(wr)
        })
    };
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut latencies = latency_histogram();
    let mut answered = 0;
    while answered < requests {
        let mut frame = loop {
            if let Some(f) = decode_frame(&mut buf, DEFAULT_MAX_FRAME_SIZE)? {
                break f;
            }
            if rd.read_buf(&mut buf).await? == 0 {
                return Err("producer connection closed".into());
            }
        };
        let now = Instant::now();
        let (expected, sent_at) = sent_rx.recv().await.ok_or("answer without a request")?;
        let h = ResponseHeader::decode(
            &mut frame,
            ApiKey::Produce.response_header_version(PRODUCE_VERSION),
        )?;
        if h.correlation_id != expected {
            return Err("answers out of order".into());
        }
        let ResponseBody::Produce(r) =
            ResponseBody::decode(ApiKey::Produce, PRODUCE_VERSION, &mut frame)?
        else {
            return Err("not a produce response".into());
        };
        if let Some(code) = r
            .responses
            .iter()
            .flat_map(|t| t.partition_responses.iter())
            .map(|p| p.error_code)
            .find(|c| *c != 0)
        {
            return Err(format!("produce failed with error code {code}").into());
        }
        record(&mut latencies, now - sent_at);
        answered += 1;
        permits.add_permits(1);
    }
    drop(writer.await??);
    Ok(latencies)
}

/// `producers` connections, producer i to partition i mod 3, each sending `requests` batches
/// of `batch` records with up to `in_flight` outstanding; every request's latency and the
/// wall time.
async fn produce_phase(
    cluster: &Cluster,
    producers: usize,
    in_flight: usize,
    requests: usize,
    batch_records: usize,
) -> BenchResult<(Histogram<u64>, Duration)> {
    let value = vec![0x42u8; RECORD_SIZE];
    let records = batch(batch_records, &value)?;
    let t = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..producers {
        let partition = (i % PARTITIONS as usize) as i32;
        tasks.push(tokio::spawn(pipelined_producer(
            cluster.leader_addr(partition)?,
            partition,
            records.clone(),
            requests,
            in_flight,
        )));
    }
    let mut all = latency_histogram();
    for task in tasks {
        all.add(task.await??)?;
    }
    let wall = t.elapsed();
    Ok((all, wall))
}

/// Reads partition `partition` from its leader up to the high watermark; (records, bytes).
async fn consume_partition(addr: SocketAddr, partition: i32) -> BenchResult<(usize, usize)> {
    let mut c = KafkaConnection::connect(addr, "bench-consumer").await?;
    let (mut offset, mut records, mut bytes) = (0i64, 0usize, 0usize);
    loop {
        let body = RequestBody::Fetch(FetchRequest {
            replica_id: -1,
            max_wait_ms: 0,
            min_bytes: 1,
            max_bytes: 1 << 20,
            topics: vec![FetchTopic {
                topic: TOPIC.into(),
                topic_id: TOPIC_ID,
                partitions: vec![FetchPartition {
                    partition,
                    current_leader_epoch: 0,
                    fetch_offset: offset,
                    last_fetched_epoch: -1,
                    log_start_offset: -1,
                    partition_max_bytes: 1 << 20,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        });
        let ResponseBody::Fetch(r) = c.send(FETCH_VERSION, &body).await? else {
            return Err("not a fetch response".into());
        };
        let p = r
            .responses
            .into_iter()
            .flat_map(|t| t.partitions)
            .next()
            .ok_or("empty fetch response")?;
        if p.error_code != 0 {
            return Err(format!("fetch failed with error code {}", p.error_code).into());
        }
        let before = offset;
        for b in RecordBatches::new(p.records.unwrap_or_default()) {
            let b = b?;
            b.verify_crc()?;
            if b.last_offset() < offset {
                continue;
            }
            records += usize::try_from(b.last_offset() + 1 - offset.max(b.base_offset()))?;
            bytes += b.size();
            offset = b.next_offset();
        }
        if offset >= p.high_watermark {
            return Ok((records, bytes));
        }
        if offset == before {
            return Err("fetch made no progress below the high watermark".into());
        }
    }
}

// ---------------------------------------------------------------------------------------

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "NOT met"
    }
}

#[tokio::main]
async fn main() -> BenchResult<()> {
    let s = Settings::parse();
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "machine: {} cpus, loadavg at start {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        loadavg.trim()
    );

    // Raw round trip.
    let rtts = raw_ping_pong(s.ping_samples).await?;
    let (ping_p50, ping_p99) = (quantile(&rtts, 0.5), quantile(&rtts, 0.99));
    println!(
        "raw tokio TCP ping-pong 64 B over loopback: p50 {:>8.1} µs   p99 {:>8.1} µs   ({} round trips)",
        us(ping_p50),
        us(ping_p99),
        rtts.len()
    );

    let cluster = start_cluster().await?;
    println!(
        "cluster: 3 brokers on loopback (MemoryLog, MemoryIsrWriter, no controller), topic {TOPIC}: \
         {PARTITIONS} partitions, RF 3, min.insync.replicas=2, acks=all, {RECORD_SIZE} B records"
    );

    // Warm-up: every partition's followers fetching, first commits done.
    for p in 0..PARTITIONS {
        let mut c = KafkaConnection::connect(cluster.leader_addr(p)?, "bench-warmup").await?;
        let body = produce_request(p, batch(1, &[0u8; RECORD_SIZE])?);
        for _ in 0..50 {
            produce_one(&mut c, &body).await?;
        }
    }

    // Unloaded commit latency: one producer, one record per request.
    let (lat1, _) = produce_phase(&cluster, 1, 1, s.latency_samples, 1).await?;
    let (l1_p50, l1_p99) = (quantile(&lat1, 0.5), quantile(&lat1, 0.99));
    println!(
        "commit latency, 1 producer, 1 record per request:   p50 {:>8.1} µs   p99 {:>8.1} µs   ({} requests)",
        us(l1_p50),
        us(l1_p99),
        lat1.len()
    );

    // Throughput.
    let requests = s.records.div_ceil(s.producers * s.batch);
    let counts_before = data_path::snapshot();
    let cpu_before = cpu_seconds();
    let (lat, wall) = produce_phase(&cluster, s.producers, s.in_flight, requests, s.batch).await?;
    let cpu = cpu_seconds() - cpu_before;
    let counts = data_path::snapshot().since(&counts_before);
    let produce_requests = lat.len();
    let produced = usize::try_from(produce_requests)? * s.batch;
    let produced_bytes = produced * RECORD_SIZE;
    let produced_mib = produced_bytes as f64 / MIB;
    let produce_mib = mib_per_s(produced_bytes, wall);
    let (lp50, lp99) = (quantile(&lat, 0.5), quantile(&lat, 0.99));
    println!(
        "produce → committed: {} producers × {} in flight, batches of {} × {RECORD_SIZE} B, acks=all",
        s.producers, s.in_flight, s.batch
    );
    println!(
        "  {produced} records in {:.3} s: {:>9.0} records/s {:>8.1} MiB/s   commit latency p50 {:>8.1} µs   p99 {:>8.1} µs",
        wall.as_secs_f64(),
        produced as f64 / wall.as_secs_f64(),
        produce_mib,
        us(lp50),
        us(lp99)
    );
    let cpu_per_mib = cpu * 1e3 / produced_mib.max(1e-9);
    println!(
        "  CPU of this process meanwhile: {cpu:.2} s ({:.2} cores busy), {cpu_per_mib:.2} ms per MiB committed",
        cpu / wall.as_secs_f64(),
    );
    print_counts(&counts, produced_bytes, produce_requests);

    // The floor, same bytes: each produced byte crosses loopback three times.
    // Repeated, so that the CPU clock's 10 ms ticks weigh less.
    let (mut floor_wall, mut floor_cpu) = (Duration::ZERO, 0.0);
    for _ in 0..FLOOR_REPEATS {
        let (wall, cpu) = raw_floor(produced_bytes, FLOOR_CHUNK).await?;
        floor_wall += wall;
        floor_cpu += cpu;
    }
    let floor_mib = mib_per_s(produced_bytes * FLOOR_REPEATS, floor_wall);
    let floor_cpu_per_mib = floor_cpu * 1e3 / (produced_mib * FLOOR_REPEATS as f64).max(1e-9);
    println!(
        "floor: 3 concurrent raw loopback streams of {produced_mib:.1} MiB each ({} KiB writes), {FLOOR_REPEATS} times: \
         {:.3} s, {floor_mib:.1} MiB/s of produced data, CPU {floor_cpu:.2} s = {floor_cpu_per_mib:.2} ms per produced MiB",
        FLOOR_CHUNK / 1024,
        floor_wall.as_secs_f64()
    );

    // Consume everything back.
    let t = Instant::now();
    let mut consumers = Vec::new();
    for p in 0..PARTITIONS {
        let addr = cluster.leader_addr(p)?;
        consumers.push(tokio::spawn(consume_partition(addr, p)));
    }
    let (mut read, mut read_bytes) = (0, 0);
    for c in consumers {
        let (r, b) = c.await??;
        read += r;
        read_bytes += b;
    }
    let consume = t.elapsed();
    let expected = produced + usize::try_from(lat1.len())? + 50 * PARTITIONS as usize;
    println!(
        "consume: {read} records ({} expected) in {:.3} s: {:>9.0} records/s {:>8.1} MiB/s",
        expected,
        consume.as_secs_f64(),
        read as f64 / consume.as_secs_f64(),
        mib_per_s(read_bytes, consume)
    );
    cluster.shutdown().await;

    let ping = ping_p50.as_secs_f64().max(1e-9);
    let tput_ratio = produce_mib / floor_mib.max(1e-9);
    let cpu_ratio = cpu_per_mib / floor_cpu_per_mib.max(1e-9);
    let lat_ratio = l1_p50.as_secs_f64() / ping;
    let loaded_p99_ratio = lp99.as_secs_f64() / ping;
    println!("targets (ratios to peers of this run):");
    println!(
        "  throughput / floor's              = {tput_ratio:.3}   (target ≥ {THROUGHPUT_TARGET}): {}",
        verdict(tput_ratio >= THROUGHPUT_TARGET)
    );
    println!(
        "  CPU per MiB / floor's             = {cpu_ratio:.2}×   (target ≤ {CPU_TARGET}×): {}",
        verdict(cpu_ratio <= CPU_TARGET)
    );
    println!(
        "  unloaded commit p50 / ping p50    = {lat_ratio:.1}×   (target ≤ {LATENCY_TARGET}×): {}",
        verdict(lat_ratio <= LATENCY_TARGET)
    );
    println!(
        "  loaded commit p99 / ping p50      = {loaded_p99_ratio:.1}×   (target ≤ {LOADED_P99_TARGET}×): {}",
        verdict(loaded_p99_ratio <= LOADED_P99_TARGET)
    );
    if read != expected {
        return Err(format!("read back {read} records, expected {expected}").into());
    }
    Ok(())
}

/// Prints the copies per produced byte (leader, follower) and the hand-offs per produce
/// request counted during the produce phase.
fn print_counts(c: &DataPathCounts, produced_bytes: usize, requests: u64) {
    let per_byte = |steps: &[CopyStep], received: usize| {
        let copied: u64 = steps.iter().map(|s| c.copied_bytes(*s)).sum();
        copied as f64 / (received as f64).max(1.0)
    };
    let leader = [
        CopyStep::RequestReadBuffer,
        CopyStep::LeaderAppend,
        CopyStep::LogRead,
    ];
    let follower = [CopyStep::FetchReadBuffer, CopyStep::FollowerAppend];
    // Each produced byte reaches one leader and two followers.
    println!(
        "  user-space copies per produced byte: leader {:.3} (read buffer {:.3}, into the log {:.3}, \
         log → fetch answers {:.3}); follower {:.3} (read buffer {:.3}, into the log {:.3})",
        per_byte(&leader, produced_bytes),
        per_byte(&[CopyStep::RequestReadBuffer], produced_bytes),
        per_byte(&[CopyStep::LeaderAppend], produced_bytes),
        per_byte(&[CopyStep::LogRead], produced_bytes),
        per_byte(&follower, 2 * produced_bytes),
        per_byte(&[CopyStep::FetchReadBuffer], 2 * produced_bytes),
        per_byte(&[CopyStep::FollowerAppend], 2 * produced_bytes),
    );
    let per = |h: Hop| c.hops(h) as f64 / (requests as f64).max(1.0);
    let all = [
        Hop::RequestQueued,
        Hop::HandlerParked,
        Hop::ResponseQueued,
        Hop::DelayedProduceAnswered,
        Hop::DelayedFetchAnswered,
    ];
    println!(
        "  hand-offs per produce request (all requests of the phase, follower fetches included): {:.2} = \
         processor → handler {:.2}, parked with its worker {:.2}, handler → connection {:.2}, \
         delayed produce answered {:.2}, delayed fetch answered {:.2}",
        all.iter().map(|h| per(*h)).sum::<f64>(),
        per(Hop::RequestQueued),
        per(Hop::HandlerParked),
        per(Hop::ResponseQueued),
        per(Hop::DelayedProduceAnswered),
        per(Hop::DelayedFetchAnswered),
    );
}
