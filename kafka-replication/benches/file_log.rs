//! `FileLog` append and read throughput, side by side with plain sequential `write` / `read`
//! of the same bytes in the same directory: 1 KiB records in 16 KiB batches, 32 MiB per run.
//! Prints the throughput ratio (target ≥ 0.8×).

use std::fs::{File, OpenOptions};
use std::hint::black_box;
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, Criterion, Throughput};
use kafka_replication::log::{FileLog, FileLogConfig, LogStorage};
use kafka_wire::records::RecordBatchBuilder;

const RECORD: usize = 1024;
const PER_BATCH: usize = 16;
const BATCHES: usize = 2048; // 32 MiB of record values

fn batch() -> Bytes {
    let mut b = RecordBatchBuilder::new(0);
    let value = vec![7u8; RECORD];
    for i in 0..PER_BATCH {
        if let Err(e) = b.append(i as i64, None, Some(&value), &[]) {
            panic!("building a batch: {e}");
        }
    }
    match b.build() {
        Ok(b) => b,
        Err(e) => panic!("building a batch: {e}"),
    }
}

fn tempdir() -> tempfile::TempDir {
    match tempfile::tempdir_in(std::env::temp_dir()) {
        Ok(d) => d,
        Err(e) => panic!("tempdir: {e}"),
    }
}

/// Appends every batch, then reads the whole log back in 1 MiB fetches.
fn file_log_run(dir: &Path, batch: &Bytes) -> usize {
    let mut log = match FileLog::open(dir, FileLogConfig::default()) {
        Ok(l) => l,
        Err(e) => panic!("open: {e}"),
    };
    for _ in 0..BATCHES {
        if let Err(e) = log.append_as_leader(batch.clone(), 0) {
            panic!("append: {e}");
        }
    }
    let mut offset = 0;
    let mut read = 0;
    let end = log.log_end_offset();
    while offset < end {
        let bytes = match log.read(offset, 1 << 20, end, true) {
            Ok(b) => b,
            Err(e) => panic!("read: {e}"),
        };
        read += bytes.len();
        offset += (bytes.len() / batch.len() * PER_BATCH) as i64;
        black_box(bytes);
    }
    read
}

/// Writes the same bytes with plain `write` calls, then reads them back in 1 MiB reads.
fn plain_run(dir: &Path, batch: &Bytes) -> usize {
    let path = dir.join("plain.bin");
    let mut f = match OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) => panic!("open: {e}"),
    };
    for _ in 0..BATCHES {
        if let Err(e) = f.write_all(batch) {
            panic!("write: {e}");
        }
    }
    let mut r = match File::open(&path) {
        Ok(f) => f,
        Err(e) => panic!("open: {e}"),
    };
    let mut buf = vec![0u8; 1 << 20];
    let mut read = 0;
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(e) => panic!("read: {e}"),
        }
    }
    black_box(&buf);
    read
}

fn best_of(runs: usize, mut f: impl FnMut() -> usize) -> Duration {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            black_box(f());
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn summary() {
    let b = batch();
    let ours = best_of(5, || {
        let d = tempdir();
        file_log_run(d.path(), &b)
    });
    let peer = best_of(5, || {
        let d = tempdir();
        plain_run(d.path(), &b)
    });
    let mib = (BATCHES * b.len()) as f64 / (1 << 20) as f64;
    println!(
        "FileLog append+read {mib:.0} MiB: {:?} ({:.0} MiB/s), plain write+read {:?} ({:.0} MiB/s), ratio {:.2}x (target >= 0.8x)",
        ours,
        2.0 * mib / ours.as_secs_f64(),
        peer,
        2.0 * mib / peer.as_secs_f64(),
        peer.as_secs_f64() / ours.as_secs_f64()
    );
}

fn bench(c: &mut Criterion) {
    let b = batch();
    let mut group = c.benchmark_group("file_log_32mib");
    group.sample_size(10);
    group.throughput(Throughput::Bytes((2 * BATCHES * b.len()) as u64));
    group.bench_function("ha_blocks_file_log", |bench| {
        bench.iter(|| {
            let d = tempdir();
            file_log_run(d.path(), &b)
        })
    });
    group.bench_function("plain_write_read", |bench| {
        bench.iter(|| {
            let d = tempdir();
            plain_run(d.path(), &b)
        })
    });
    group.finish();
}

criterion_group!(benches, bench);

fn main() {
    summary();
    benches();
    Criterion::default().configure_from_args().final_summary();
}
