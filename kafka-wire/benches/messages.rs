//! Message decode/encode benches, side by side with `kafka-protocol` 0.15.1 on the same bytes.
//!
//! Cases: LeaderAndIsrRequest v6 with 10,000 partitions × 3 replicas (decode, encode), and
//! FetchResponse v12 and v16 with 100 partitions × 16 KiB of records (decode; encode, ours into
//! a [`ChunkedWriter`] that keeps record data as its own chunks, the peer into one buffer).
//!
//! Run with `cargo bench -p ha-kafka-wire --bench messages`. After criterion's report, a short
//! table prints both crates' time per operation and the ratio (peer time / our time); each time
//! is the best of ten rounds of about 100 ms, the two crates' rounds alternating so that on a
//! shared machine both see the same changes of load.
//!
//! For instruction counts, `KAFKA_WIRE_BENCH_ONE=<case>:<ours|peer>:<n>` runs only case number
//! `<case>` (0-5, in the order of the table) `<n>` times for one crate and exits; the count per
//! operation is the difference of two runs under `valgrind --tool=callgrind` (or
//! `perf stat -e instructions`) with different `<n>`, divided by the difference of the `<n>`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use criterion::Criterion;
use kafka_protocol::protocol::{Decodable, Encodable};
use kafka_wire::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_wire::messages::leader_and_isr_request::{
    LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_wire::messages::{FetchResponse, LeaderAndIsrRequest};
use kafka_wire::{ChunkedWriter, Decode, Encode, Uuid};

type PeerLeaderAndIsr = kafka_protocol::messages::LeaderAndIsrRequest;
type PeerFetchResponse = kafka_protocol::messages::FetchResponse;

/// 100 topics × 100 partitions, 3 replicas each, all in the ISR.
fn leader_and_isr() -> LeaderAndIsrRequest {
    LeaderAndIsrRequest {
        controller_id: 1,
        controller_epoch: 12,
        broker_epoch: 4242,
        type_: 0,
        topic_states: (0..100)
            .map(|t| LeaderAndIsrTopicState {
                topic_name: format!("topic-{t:04}").into(),
                topic_id: Uuid::from_u128(0x1234_5678_9abc_def0_u128 + t as u128),
                partition_states: (0..100)
                    .map(|p| LeaderAndIsrPartitionState {
                        partition_index: p,
                        controller_epoch: 12,
                        leader: p % 3,
                        leader_epoch: 7,
                        isr: vec![p % 3, (p + 1) % 3, (p + 2) % 3].into(),
                        partition_epoch: 3,
                        replicas: vec![p % 3, (p + 1) % 3, (p + 2) % 3].into(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        live_leaders: Vec::new(),
        ..Default::default()
    }
}

/// 10 topics × 10 partitions, each with 16 KiB of record data.
fn fetch_response() -> FetchResponse {
    FetchResponse {
        session_id: 0,
        responses: (0..10)
            .map(|t| FetchableTopicResponse {
                topic: format!("topic-{t:02}").into(),
                topic_id: Uuid::from_u128(0xfeed_0000_u128 + t as u128),
                partitions: (0..10)
                    .map(|p| PartitionData {
                        partition_index: p,
                        high_watermark: 100_000,
                        last_stable_offset: 100_000,
                        log_start_offset: 0,
                        aborted_transactions: None,
                        preferred_read_replica: -1,
                        records: Some(Bytes::from(vec![(p as u8) ^ 0x5a; 16 * 1024])),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// Time per call of `f` in one round of about 100 ms.
fn round(f: &mut dyn FnMut()) -> Duration {
    let start = Instant::now();
    let mut n = 0u32;
    while start.elapsed() < Duration::from_millis(100) {
        f();
        n += 1;
    }
    start.elapsed() / n
}

/// Time per call of `ours` and of `peer`, each the best of ten rounds of about 100 ms, the
/// rounds of the two alternating so that both see the same changes of load on a shared machine.
fn time_per_op_pair(ours: &mut dyn FnMut(), peer: &mut dyn FnMut()) -> (Duration, Duration) {
    let (mut best_ours, mut best_peer) = (Duration::MAX, Duration::MAX);
    for _ in 0..10 {
        best_ours = best_ours.min(round(ours));
        best_peer = best_peer.min(round(peer));
    }
    (best_ours, best_peer)
}

struct Case {
    name: String,
    ours: Box<dyn FnMut()>,
    peer: Box<dyn FnMut()>,
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();

    let lai = leader_and_isr();
    let lai_bytes = lai.encode_to_bytes(6).expect("encode");
    let peer_lai = PeerLeaderAndIsr::decode(&mut lai_bytes.clone(), 6).expect("peer decodes");
    {
        let b1 = lai_bytes.clone();
        let b2 = lai_bytes.clone();
        cases.push(Case {
            name: "LeaderAndIsrRequest v6 10k partitions decode".into(),
            ours: Box::new(move || {
                black_box(LeaderAndIsrRequest::decode(&mut b1.clone(), 6).expect("decode"));
            }),
            peer: Box::new(move || {
                black_box(PeerLeaderAndIsr::decode(&mut b2.clone(), 6).expect("decode"));
            }),
        });
    }
    {
        let ours = lai.clone();
        let peer = peer_lai.clone();
        let mut out1 = BytesMut::with_capacity(lai_bytes.len());
        let mut out2 = BytesMut::with_capacity(lai_bytes.len());
        cases.push(Case {
            name: "LeaderAndIsrRequest v6 10k partitions encode".into(),
            ours: Box::new(move || {
                out1.clear();
                ours.encode(&mut out1, 6).expect("encode");
                black_box(&out1);
            }),
            peer: Box::new(move || {
                out2.clear();
                peer.encode(&mut out2, 6).expect("encode");
                black_box(&out2);
            }),
        });
    }

    let fr = fetch_response();
    for version in [12i16, 16] {
        let bytes = fr.encode_to_bytes(version).expect("encode");
        let peer_fr = PeerFetchResponse::decode(&mut bytes.clone(), version).expect("peer decodes");
        let (b1, b2) = (bytes.clone(), bytes.clone());
        cases.push(Case {
            name: format!("FetchResponse v{version} 100 x 16 KiB decode"),
            ours: Box::new(move || {
                black_box(FetchResponse::decode(&mut b1.clone(), version).expect("decode"));
            }),
            peer: Box::new(move || {
                black_box(PeerFetchResponse::decode(&mut b2.clone(), version).expect("decode"));
            }),
        });
        let ours = fr.clone();
        let mut out2 = BytesMut::with_capacity(bytes.len());
        cases.push(Case {
            name: format!("FetchResponse v{version} 100 x 16 KiB encode"),
            ours: Box::new(move || {
                let mut w = ChunkedWriter::with_capacity(4096);
                ours.encode(&mut w, version).expect("encode");
                black_box(w.into_chunks());
            }),
            peer: Box::new(move || {
                out2.clear();
                peer_fr.encode(&mut out2, version).expect("encode");
                black_box(&out2);
            }),
        });
    }
    cases
}

/// The `KAFKA_WIRE_BENCH_ONE` mode: runs one case `n` times for one crate.
fn run_one(spec: &str) {
    let parts: Vec<&str> = spec.split(':').collect();
    let [case, side, n] = parts[..] else {
        panic!("KAFKA_WIRE_BENCH_ONE is <case>:<ours|peer>:<n>, not {spec:?}");
    };
    let case: usize = case.parse().expect("case number");
    let n: u32 = n.parse().expect("repetitions");
    let mut case = cases().into_iter().nth(case).expect("no such case");
    let f = match side {
        "ours" => &mut case.ours,
        "peer" => &mut case.peer,
        other => panic!("side is ours or peer, not {other:?}"),
    };
    for _ in 0..n {
        f();
    }
}

fn main() {
    if let Ok(spec) = std::env::var("KAFKA_WIRE_BENCH_ONE") {
        run_one(&spec);
        return;
    }
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
        .configure_from_args();
    for mut case in cases() {
        let mut group = c.benchmark_group(case.name.clone());
        group.bench_function("kafka-wire", |b| b.iter(&mut case.ours));
        group.bench_function("kafka-protocol", |b| b.iter(&mut case.peer));
        group.finish();
    }
    c.final_summary();

    // The ratio table; skipped when criterion runs the benches as tests (`cargo test --benches`).
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return;
    }
    println!();
    println!(
        "{:<48} {:>14} {:>14} {:>8}",
        "case", "kafka-wire", "kafka-protocol", "ratio"
    );
    for mut case in cases() {
        let (ours, peer) = time_per_op_pair(&mut case.ours, &mut case.peer);
        println!(
            "{:<48} {:>14.1?} {:>14.1?} {:>7.2}x",
            case.name,
            ours,
            peer,
            peer.as_secs_f64() / ours.as_secs_f64()
        );
    }
}
