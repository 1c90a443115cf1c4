//! Record batch validation against the cost of the CRC alone: a batch of 16 records of
//! 1000 bytes, parsed with its header and CRC-32C checked, side by side with `crc32c` over
//! the same bytes. Prints the ratio (target: within 1.2×).

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use kafka_wire::records::{RecordBatch, RecordBatchBuilder, RECORD_BATCH_OVERHEAD};

fn batch() -> bytes::Bytes {
    let mut b = RecordBatchBuilder::new(1000).producer(7, 0, 0);
    let value = vec![0xabu8; 1000];
    for i in 0..16i64 {
        b.append(1_700_000_000_000 + i, Some(b"key"), Some(&value), &[])
            .expect("append");
    }
    b.build().expect("build")
}

fn time_per_iter(mut f: impl FnMut(), iters: u32) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        f();
    }
    start.elapsed() / iters
}

fn bench(c: &mut Criterion) {
    let bytes = batch();
    let mut g = c.benchmark_group("record_batch_16x1000");
    g.bench_function("kafka_wire_parse_header_and_crc", |b| {
        b.iter(|| RecordBatch::parse(black_box(bytes.clone())).expect("valid"))
    });
    g.bench_function("crc32c_alone", |b| {
        b.iter(|| crc32c::crc32c(black_box(&bytes[21..])))
    });
    g.finish();

    // Side-by-side figure for the README: median of several interleaved rounds.
    let iters = 20_000;
    let mut ratios = Vec::new();
    for _ in 0..9 {
        let ours = time_per_iter(
            || {
                black_box(RecordBatch::parse(black_box(bytes.clone())).is_ok());
            },
            iters,
        );
        let crc = time_per_iter(
            || {
                black_box(crc32c::crc32c(black_box(&bytes[21..])));
            },
            iters,
        );
        ratios.push(ours.as_secs_f64() / crc.as_secs_f64());
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "record batch of {} bytes ({} B header): parse+CRC / crc32c alone = {:.3}x (target <= 1.2x)",
        bytes.len(),
        RECORD_BATCH_OVERHEAD,
        ratios[ratios.len() / 2]
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
