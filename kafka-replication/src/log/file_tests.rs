//! Crash and recovery tests of [`FileLog`].
use super::*;
use crate::log::test_util::batch;
use crate::log::RetentionPolicy;
use kafka_wire::records::RecordBatches;

fn small() -> FileLogConfig {
    FileLogConfig {
        segment_bytes: 1_000,
        index_interval_bytes: 200,
        flush: FlushPolicy::Manual,
    }
}

fn open(dir: &Path, config: FileLogConfig) -> FileLog {
    FileLog::open(dir, config).unwrap_or_else(|e| panic!("open: {e}"))
}

fn ok<T>(r: Result<T, LogError>) -> T {
    r.unwrap_or_else(|e| panic!("log error: {e}"))
}

fn all(log: &FileLog) -> Vec<(i64, i32)> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let bytes = ok(log.read(offset, 1 << 20, i64::MAX, true));
        if bytes.is_empty() {
            break;
        }
        for b in RecordBatches::new(bytes) {
            let b = b.unwrap_or_else(|e| panic!("bad batch read back: {e}"));
            out.push((b.base_offset(), b.partition_leader_epoch()));
            offset = b.next_offset();
        }
    }
    out
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
}

#[test]
fn segments_roll_and_reads_find_every_batch_through_the_index() {
    let dir = tempdir();
    let mut log = open(dir.path(), small());
    for i in 0..60 {
        ok(log.append_as_leader(batch(1 + i % 3), 1 + (i / 20) as i32));
    }
    assert!(log.segment_count() > 3);
    let batches = all(&log);
    assert_eq!(batches.len(), 60);
    for (base, _) in &batches {
        let got = ok(log.read(*base, 1, i64::MAX, true));
        let first = RecordBatches::new(got)
            .next()
            .and_then(Result::ok)
            .map(|b| b.base_offset());
        assert_eq!(first, Some(*base));
    }
    assert_eq!(log.epoch_cache().entries().len(), 3);
    ok(log.flush());
    drop(log);
    let log = open(dir.path(), small());
    assert_eq!(all(&log), batches, "reopened from the index files");
}

#[test]
fn restart_loses_nothing_flushed_and_keeps_epochs_and_high_watermark() {
    let dir = tempdir();
    let mut log = open(dir.path(), small());
    ok(log.append_as_leader(batch(3), 1));
    ok(log.append_as_leader(batch(2), 4));
    ok(log.flush());
    ok(log.checkpoint_high_watermark(3));
    let (leo, epochs, content) = (log.log_end_offset(), log.epoch_cache().clone(), all(&log));
    drop(log);
    let log = open(dir.path(), small());
    assert_eq!(log.log_end_offset(), leo);
    assert_eq!(log.epoch_cache(), &epochs);
    assert_eq!(log.checkpointed_high_watermark(), 3);
    assert_eq!(all(&log), content);
}

#[test]
fn drop_without_flush_reopens_to_a_consistent_log() {
    let dir = tempdir();
    let mut log = open(dir.path(), small());
    ok(log.append_as_leader(batch(2), 1));
    ok(log.flush());
    for _ in 0..10 {
        ok(log.append_as_leader(batch(2), 2));
    }
    drop(log); // no flush: what the OS kept is recovered and checked
    let mut log = open(dir.path(), small());
    assert!(log.log_end_offset() >= 2, "the flushed part survives");
    assert_eq!(all(&log).len() as i64, log.log_end_offset() / 2);
    ok(log.append_as_leader(batch(1), 3));
    assert_eq!(log.epoch_cache().latest_epoch(), Some(3));
}

fn last_segment(dir: &Path) -> PathBuf {
    let mut logs: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read_dir: {e}"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    logs.pop().unwrap_or_else(|| panic!("no segment"))
}

fn damaged_log(damage: impl FnOnce(&Path)) -> (FileLog, i64, tempfile::TempDir) {
    let dir = tempdir();
    let mut log = open(dir.path(), FileLogConfig::default());
    ok(log.append_as_leader(batch(3), 1));
    ok(log.append_as_leader(batch(3), 2));
    let good_end = log.log_end_offset();
    ok(log.append_as_leader(batch(3), 5));
    ok(log.flush());
    ok(log.assign_epoch_start(5, 6));
    drop(log);
    // Pretend the flush of the last batch never happened, then damage it.
    ok(write_offset(&dir.path().join(RECOVERY_CHECKPOINT), good_end).map_err(LogError::from));
    damage(&last_segment(dir.path()));
    let log = open(dir.path(), FileLogConfig::default());
    (log, good_end, dir)
}

#[test]
fn torn_last_write_is_truncated_on_recovery() {
    let (mut log, good_end, _dir) = damaged_log(|p| {
        let len = fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let f = OpenOptions::new()
            .write(true)
            .open(p)
            .unwrap_or_else(|e| panic!("{e}"));
        f.set_len(len - 7).unwrap_or_else(|e| panic!("{e}"));
    });
    assert_eq!(log.log_end_offset(), good_end);
    assert_eq!(
        log.epoch_cache().latest_epoch(),
        Some(2),
        "epoch 5 had no surviving data"
    );
    ok(log.append_as_leader(batch(1), 6));
    assert_eq!(all(&log).last().copied(), Some((good_end, 6)));
}

#[test]
fn corrupt_tail_batch_fails_its_crc_and_is_truncated() {
    let (log, good_end, _dir) = damaged_log(|p| {
        let mut bytes = fs::read(p).unwrap_or_else(|e| panic!("{e}"));
        let n = bytes.len();
        bytes[n - 3] ^= 0x55;
        fs::write(p, bytes).unwrap_or_else(|e| panic!("{e}"));
    });
    assert_eq!(log.log_end_offset(), good_end);
}

#[test]
fn garbage_after_the_last_batch_is_truncated() {
    let (log, good_end, _dir) = damaged_log(|p| {
        let mut f = OpenOptions::new()
            .append(true)
            .open(p)
            .unwrap_or_else(|e| panic!("{e}"));
        f.write_all(&[0xff; 40]).unwrap_or_else(|e| panic!("{e}"));
    });
    assert_eq!(log.log_end_offset(), good_end + 3);
}

#[test]
fn corrupt_index_and_epoch_checkpoint_are_rebuilt() {
    let dir = tempdir();
    let mut log = open(dir.path(), small());
    for i in 0..30 {
        ok(log.append_as_leader(batch(2), 1 + i / 10));
    }
    ok(log.flush());
    let (content, epochs) = (all(&log), log.epoch_cache().clone());
    drop(log);
    for e in fs::read_dir(dir.path())
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(|e| e.ok())
    {
        if e.path().extension().is_some_and(|x| x == "index") {
            fs::write(e.path(), [1, 2, 3]).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    fs::write(dir.path().join(EPOCH_CHECKPOINT), "garbage").unwrap_or_else(|e| panic!("{e}"));
    let log = open(dir.path(), small());
    assert_eq!(all(&log), content);
    assert_eq!(log.epoch_cache(), &epochs);
}

#[test]
fn truncation_across_segments_survives_a_restart() {
    let dir = tempdir();
    let mut log = open(dir.path(), small());
    for _ in 0..40 {
        ok(log.append_as_leader(batch(2), 1));
    }
    ok(log.append_as_leader(batch(2), 2));
    let segments = log.segment_count();
    ok(log.truncate_to(21));
    assert_eq!(log.log_end_offset(), 20);
    assert!(log.segment_count() < segments);
    assert_eq!(log.epoch_cache().latest_epoch(), Some(1));
    ok(log.append_as_leader(batch(2), 3));
    ok(log.flush());
    drop(log);
    let log = open(dir.path(), small());
    assert_eq!(log.log_end_offset(), 22);
    assert_eq!(all(&log).len(), 11);
    assert_eq!(log.epoch_cache().latest_epoch(), Some(3));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 48, ..Default::default() })]

    /// Whatever happens to the unflushed tail of a segment — bytes flipped, cut, or garbage
    /// appended — reopening never panics and yields a prefix of the batches written, which
    /// accepts new appends.
    #[test]
    fn any_damage_to_the_tail_recovers_to_a_prefix(
        flips in proptest::collection::vec((0usize..4096, 1u8..=255), 0..4),
        cut in 0usize..600,
        garbage in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
    ) {
        let dir = tempdir();
        let mut log = open(dir.path(), small());
        ok(log.append_as_leader(batch(2), 1));
        ok(log.flush());
        for i in 0..6 {
            ok(log.append_as_leader(batch(1 + i % 3), 2));
        }
        let original = all(&log);
        drop(log);
        let seg = last_segment(dir.path());
        let mut bytes = fs::read(&seg).unwrap_or_default();
        for (at, x) in &flips {
            if !bytes.is_empty() {
                let i = at % bytes.len();
                bytes[i] ^= x;
            }
        }
        let keep = bytes.len().saturating_sub(cut);
        bytes.truncate(keep);
        bytes.extend_from_slice(&garbage);
        fs::write(&seg, &bytes).unwrap_or_else(|e| panic!("{e}"));
        let mut log = open(dir.path(), small());
        let recovered = all(&log);
        proptest::prop_assert!(recovered.len() <= original.len());
        // Base offsets and CRC-covered contents survive exactly; the leader epoch field lies
        // outside the CRC (as in Kafka's format), so a flip there can only be caught when it
        // breaks the epochs' order.
        let offsets = |v: &[(i64, i32)]| v.iter().map(|(o, _)| *o).collect::<Vec<_>>();
        proptest::prop_assert_eq!(offsets(&original[..recovered.len()]), offsets(&recovered));
        ok(log.append_as_leader(batch(1), 3));
    }
}

/// A batch of `n` records all stamped `timestamp`.
fn batch_at(n: usize, timestamp: i64) -> Bytes {
    let mut b = kafka_wire::records::RecordBatchBuilder::new(0);
    for i in 0..n {
        b.append(timestamp, None, Some(format!("v{i}").as_bytes()), &[])
            .unwrap_or_else(|e| panic!("test batch: {e}"));
    }
    b.build().unwrap_or_else(|e| panic!("test batch: {e}"))
}

#[test]
fn log_retention_bytes_deletes_whole_oldest_segments_and_checkpoints_the_log_start_offset() {
    let dir = tempdir();
    let mut log = open(dir.path(), small());
    for _ in 0..30 {
        ok(log.append_as_leader(batch(3), 0));
    }
    let segments = log.segment_count();
    assert!(segments >= 4, "small segments roll: {segments}");
    let leo = log.log_end_offset();
    let policy = RetentionPolicy::keep_all().with_retention_bytes(2_000);
    let out = ok(log.apply_retention(0, leo, &policy));
    assert!(out.segments_deleted > 0);
    assert_eq!(log.segment_count(), segments - out.segments_deleted);
    let start = log.log_start_offset();
    assert!(start > 0 && start == out.log_start_offset);
    assert_eq!(
        all(&log).first().map(|(o, _)| *o),
        Some(start),
        "reads begin at the new start"
    );
    assert!(matches!(
        log.read(start - 1, 1 << 20, i64::MAX, true),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    drop(log);
    let log = open(dir.path(), small());
    assert_eq!(
        log.log_start_offset(),
        start,
        "the log start offset survives a restart"
    );
    assert_eq!(log.log_end_offset(), leo);
}

#[test]
fn log_retention_ms_uses_each_segments_newest_record_timestamp() {
    let dir = tempdir();
    let mut log = open(dir.path(), small());
    // Old records first, then new ones, each set filling whole segments.
    for _ in 0..12 {
        ok(log.append_as_leader(batch_at(3, 1_000), 0));
    }
    for _ in 0..12 {
        ok(log.append_as_leader(batch_at(3, 100_000), 0));
    }
    let leo = log.log_end_offset();
    let policy = RetentionPolicy::keep_all().with_retention_ms(10_000);
    let out = ok(log.apply_retention(100_500, leo, &policy));
    assert!(out.segments_deleted > 0, "the old segments go");
    // What is left is new, but for the old batches sharing a segment with new ones.
    let bytes = ok(log.read(log.log_start_offset(), 1 << 20, i64::MAX, true));
    let old_left = RecordBatches::new(bytes)
        .flatten()
        .filter(|b| b.max_timestamp() == 1_000)
        .count();
    assert!(old_left < 12, "most old batches went ({old_left} left)");
    let first = ok(log.read(log.log_start_offset(), 1 << 20, i64::MAX, true));
    let first_segment_is_young = RecordBatches::new(first)
        .flatten()
        .last()
        .is_some_and(|b| b.max_timestamp() == 100_000);
    assert!(
        first_segment_is_young,
        "the first segment left holds new records"
    );
    // Reopened, the timestamps are read back from the batch headers and nothing more goes.
    drop(log);
    let mut log = open(dir.path(), small());
    let again = ok(log.apply_retention(100_500, leo, &policy));
    assert_eq!(again.segments_deleted, 0);
}

#[test]
fn log_retention_never_deletes_a_segment_reaching_the_high_watermark() {
    let dir = tempdir();
    let mut log = open(dir.path(), small());
    for _ in 0..30 {
        ok(log.append_as_leader(batch(3), 0));
    }
    let policy = RetentionPolicy::keep_all().with_retention_ms(0);
    let out = ok(log.apply_retention(i64::MAX / 2, 0, &policy));
    assert_eq!(out.segments_deleted, 0, "nothing is committed");
    let out = ok(log.apply_retention(i64::MAX / 2, log.log_end_offset(), &policy));
    assert_eq!(log.segment_count(), 1, "all but the active segment go");
    assert!(out.segments_deleted > 0);
}

#[test]
fn follower_log_start_offset_moves_forward_only_and_drops_segments_below_it() {
    let dir = tempdir();
    let mut log = open(dir.path(), small());
    for _ in 0..30 {
        ok(log.append_as_leader(batch(3), 0));
    }
    let segments = log.segment_count();
    assert!(ok(log.increment_log_start_offset(40)));
    assert_eq!(log.log_start_offset(), 40);
    assert!(log.segment_count() < segments);
    assert!(!ok(log.increment_log_start_offset(10)), "never backwards");
    assert!(matches!(
        log.read(39, 1 << 20, i64::MAX, true),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    drop(log);
    assert_eq!(open(dir.path(), small()).log_start_offset(), 40);
}

#[test]
fn truncate_fully_and_start_at_empties_the_log_and_survives_a_restart() {
    let dir = tempdir();
    let mut log = open(dir.path(), small());
    for _ in 0..10 {
        ok(log.append_as_leader(batch(3), 0));
    }
    ok(log.truncate_fully_and_start_at(100));
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (100, 100));
    assert_eq!(
        (log.segment_count(), log.epoch_cache().latest_epoch()),
        (1, None)
    );
    drop(log);
    let mut log = open(dir.path(), small());
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (100, 100));
    let mut b = kafka_wire::records::RecordBatchBuilder::new(100);
    b.append(0, None, Some(b"v"), &[])
        .unwrap_or_else(|e| panic!("test batch: {e}"));
    let records = b.build().unwrap_or_else(|e| panic!("test batch: {e}"));
    ok(log.append_as_follower(records));
    assert_eq!(
        log.log_end_offset(),
        101,
        "a follower's appends continue at the new start"
    );
}
