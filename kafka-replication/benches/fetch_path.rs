//! The leader's follower-fetch path: 1,000 partitions × 2 followers. Each round appends one
//! batch to every partition, then both followers fetch every partition (LEO update, HW
//! recompute, ISR checks) and every HW change wakes the delayed fetches watching that
//! partition in the purgatory. Prints ns per partition-fetch. The HW recompute looks only at
//! the partition's own ISR, never at other partitions or at records.

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, BatchSize, Criterion};
use kafka_replication::isr::TopicPartition;
use kafka_replication::log::MemoryLog;
use kafka_replication::partition::{FetchParams, Partition, PartitionConfig, PartitionState};
use kafka_replication::purgatory::Purgatory;
use kafka_wire::records::RecordBatchBuilder;

const PARTITIONS: usize = 1_000;

struct Cluster {
    leaders: Vec<Partition<MemoryLog>>,
    follower_leo: Vec<[i64; 2]>,
    purgatory: Purgatory<usize, i64>,
    batch: bytes::Bytes,
    now: u64,
}

fn setup() -> Cluster {
    let state = PartitionState {
        controller_epoch: 1,
        leader: 1,
        leader_epoch: 0,
        isr: vec![1, 2, 3],
        partition_epoch: 0,
        replicas: vec![1, 2, 3],
    };
    let leaders = (0..PARTITIONS)
        .map(|i| {
            let mut p = Partition::new(
                TopicPartition::new("bench", i as i32),
                1,
                MemoryLog::new(),
                PartitionConfig::default(),
            );
            if let Err(e) = p.make_leader(0, &state) {
                panic!("make_leader: {e}");
            }
            p
        })
        .collect();
    let mut b = RecordBatchBuilder::new(0);
    for i in 0..4 {
        if let Err(e) = b.append(i, None, Some(&[1u8; 100]), &[]) {
            panic!("batch: {e}");
        }
    }
    let batch = match b.build() {
        Ok(b) => b,
        Err(e) => panic!("batch: {e}"),
    };
    Cluster {
        leaders,
        follower_leo: vec![[0, 0]; PARTITIONS],
        purgatory: Purgatory::new(0),
        batch,
        now: 0,
    }
}

/// One round; returns the number of partition-fetches served.
fn round(c: &mut Cluster) -> usize {
    c.now += 1;
    let mut fetches = 0;
    for (i, p) in c.leaders.iter_mut().enumerate() {
        if let Err(e) = p.append_as_leader(c.batch.clone(), -1) {
            panic!("append: {e}");
        }
        // A consumer waits for the new data to be committed.
        let want = p.log_end_offset();
        let hw = p.high_watermark();
        let _ = c
            .purgatory
            .try_complete_else_watch(c.now, 500, want, [i], |w| *w <= hw);
    }
    for (i, p) in c.leaders.iter_mut().enumerate() {
        for (f, id) in [2, 3].into_iter().enumerate() {
            let params = FetchParams {
                replica_id: id,
                fetch_offset: c.follower_leo[i][f],
                log_start_offset: 0,
                max_bytes: 1 << 20,
                min_one_batch: true,
                current_leader_epoch: Some(0),
                last_fetched_epoch: None,
            };
            let read = match p.fetch_records(c.now, &params) {
                Ok(r) => r,
                Err(e) => panic!("fetch: {e}"),
            };
            c.follower_leo[i][f] = read.log_end_offset;
            if read.high_watermark_advanced {
                let hw = read.high_watermark;
                c.purgatory.check_and_complete(&i, |w| *w <= hw);
            }
            black_box(read.records);
            fetches += 1;
        }
    }
    while let Some(done) = c.purgatory.poll_completed() {
        black_box(done);
    }
    fetches
}

fn bench(crit: &mut Criterion) {
    let mut group = crit.benchmark_group("leader_fetch_path");
    group.sample_size(20);
    group.bench_function("1000_partitions_x_2_followers_round", |b| {
        b.iter_batched_ref(
            || {
                let mut c = setup();
                round(&mut c);
                round(&mut c);
                c
            },
            round,
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

fn summary() {
    let mut c = setup();
    for _ in 0..20 {
        round(&mut c);
    }
    let rounds = 200;
    let t = Instant::now();
    let mut fetches = 0;
    for _ in 0..rounds {
        fetches += round(&mut c);
    }
    let per = t.elapsed().as_nanos() as f64 / fetches as f64;
    println!(
        "leader fetch path: {fetches} partition-fetches over {PARTITIONS} partitions x 2 followers: {per:.0} ns per partition-fetch (append and delayed-fetch wake-ups included)"
    );
}

criterion_group!(benches, bench);

fn main() {
    summary();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
