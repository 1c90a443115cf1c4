//! Purgatory throughput and memory, side by side with `tokio_util::time::DelayQueue`.
//!
//! Workload (both sides identical): 1,000,000 delayed fetches spread over 1,000 partitions with
//! timeouts of 1–500 ms are registered; then every partition's log end offset moves, which
//! completes the half of the operations that were waiting for it; then time passes until the
//! other half has expired. DelayQueue runs on a current-thread tokio runtime with a paused
//! clock, so neither side waits on a real clock.
//!
//! Besides criterion's figures the bench prints the throughput ratio and the memory held per
//! waiting operation, measured with a counting global allocator.

use std::alloc::System;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion};
use futures::StreamExt;
use kafka_replication::purgatory::Purgatory;
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};
use tokio_util::time::{delay_queue, DelayQueue};

#[global_allocator]
static ALLOC: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Bytes currently held on the heap.
fn allocated() -> usize {
    let s = ALLOC.stats();
    // Growth and shrinkage by `realloc` are already folded into these two counters.
    s.bytes_allocated.saturating_sub(s.bytes_deallocated)
}

const OPS: u32 = 1_000_000;
const PARTITIONS: u32 = 1_000;

/// What a delayed fetch waits for: the partition's end offset reaching `required`.
#[derive(Debug, Clone, Copy)]
struct Op {
    partition: u32,
    required: u64,
}

fn op(i: u32) -> (Op, u64) {
    let required = if i.is_multiple_of(2) { 1 } else { u64::MAX };
    let timeout = 1 + u64::from(i.wrapping_mul(7919) % 500);
    (
        Op {
            partition: i % PARTITIONS,
            required,
        },
        timeout,
    )
}

/// Registers every op; returns the purgatory with all ops waiting.
fn purgatory_register() -> Purgatory<u32, Op> {
    let mut p = Purgatory::new(0);
    for i in 0..OPS {
        let (op, timeout) = op(i);
        let _ = p.try_complete_else_watch(0, timeout, op, [op.partition], |o| o.required == 0);
    }
    p
}

fn purgatory_workload() -> (usize, usize) {
    let mut p = purgatory_register();
    let leo = 1u64;
    let mut completed = 0;
    let mut finished = 0;
    // Completed operations are answered as they complete, as a broker does (and as the
    // DelayQueue side consumes what it removes).
    for partition in 0..PARTITIONS {
        completed += p.check_and_complete(&partition, |o| o.required <= leo);
        while let Some(f) = p.poll_completed() {
            black_box(f);
            finished += 1;
        }
    }
    p.advance(600);
    while let Some(f) = p.poll_completed() {
        black_box(f);
        finished += 1;
    }
    (completed, finished)
}

fn delay_queue_workload(rt: &tokio::runtime::Runtime) -> (usize, usize) {
    rt.block_on(async {
        let mut dq: DelayQueue<Op> = DelayQueue::new();
        let mut watchers: Vec<Vec<(u64, delay_queue::Key)>> = vec![Vec::new(); PARTITIONS as usize];
        for i in 0..OPS {
            let (op, timeout) = op(i);
            let key = dq.insert(op, Duration::from_millis(timeout));
            watchers[op.partition as usize].push((op.required, key));
        }
        let leo = 1u64;
        let mut completed = 0;
        let mut finished = 0;
        for list in &mut watchers {
            list.retain(|(required, key)| {
                if *required <= leo {
                    black_box(dq.remove(key));
                    completed += 1;
                    finished += 1;
                    false
                } else {
                    true
                }
            });
        }
        while let Some(expired) = dq.next().await {
            black_box(expired);
            finished += 1;
        }
        (completed, finished)
    })
}

fn paused_runtime() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("cannot build a tokio runtime: {e}"),
    }
}

fn bench(c: &mut Criterion) {
    let rt = paused_runtime();
    let mut group = c.benchmark_group("purgatory_1m_ops");
    group.sample_size(10);
    group.bench_function("ha_blocks_purgatory", |b| b.iter(purgatory_workload));
    group.bench_function("tokio_util_delay_queue", |b| {
        b.iter(|| delay_queue_workload(&rt))
    });
    group.finish();
}

fn timed(f: impl FnOnce() -> (usize, usize)) -> Duration {
    let start = Instant::now();
    let (completed, finished) = f();
    let elapsed = start.elapsed();
    assert_eq!(completed, OPS as usize / 2);
    assert_eq!(finished, OPS as usize);
    elapsed
}

fn summary() {
    let rt = paused_runtime();
    // Interleaved, so that both sides see the same machine load; best of 5 each.
    let mut ours = Duration::MAX;
    let mut peer = Duration::MAX;
    for _ in 0..5 {
        ours = ours.min(timed(purgatory_workload));
        peer = peer.min(timed(|| delay_queue_workload(&rt)));
    }
    println!(
        "purgatory 1M ops: ha-blocks {:?}, DelayQueue {:?}, ratio {:.2}x (target >= 2x)",
        ours,
        peer,
        peer.as_secs_f64() / ours.as_secs_f64()
    );

    let before = allocated();
    let p = purgatory_register();
    let held = allocated().saturating_sub(before);
    println!(
        "purgatory memory: {} bytes for {} waiting ops = {:.1} bytes/op (target <= 128)",
        held,
        p.waiting(),
        held as f64 / f64::from(OPS)
    );
    drop(p);

    let before = allocated();
    let held = rt.block_on(async {
        let mut dq: DelayQueue<Op> = DelayQueue::new();
        let mut watchers: Vec<Vec<delay_queue::Key>> = vec![Vec::new(); PARTITIONS as usize];
        for i in 0..OPS {
            let (op, timeout) = op(i);
            watchers[op.partition as usize].push(dq.insert(op, Duration::from_millis(timeout)));
        }
        let held = allocated().saturating_sub(before);
        drop((dq, watchers));
        held
    });
    println!(
        "DelayQueue memory: {:.1} bytes/op",
        held as f64 / f64::from(OPS)
    );
}

criterion_group!(benches, bench);

fn main() {
    summary();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
