//! Log retention (Kafka's `LogManager` cleanup with `cleanup.policy=delete`): which whole
//! segments of a log may go, by age (`log.retention.ms`), by size (`log.retention.bytes`) or
//! because they lie wholly below the log start offset, and the log start offset that follows.
//!
//! Retention never removes the active segment, nor a segment holding an offset at or above the
//! high watermark (Kafka's `deletableSegments` stops at the high watermark): what consumers may
//! not read yet is never deleted. The log start offset only moves forward and is checkpointed
//! (`log-start-offset-checkpoint` in a [`FileLog`](super::FileLog) directory); reads below it are
//! `OFFSET_OUT_OF_RANGE`, ListOffsets for the earliest offset answers it, and followers learn
//! it from the leader's Fetch answers.

/// How long and how much of a log is kept; `None` keeps everything (Kafka's `-1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RetentionPolicy {
    /// Segments whose newest record is older than this many milliseconds go
    /// (`log.retention.ms`; Kafka's default is 7 days).
    pub retention_ms: Option<i64>,
    /// Oldest segments go while the log, without them, would still hold at least this many
    /// bytes (`log.retention.bytes`; Kafka's default is unlimited).
    pub retention_bytes: Option<u64>,
}

impl RetentionPolicy {
    /// Keeps everything.
    pub fn keep_all() -> Self {
        RetentionPolicy::default()
    }

    /// Kafka's broker defaults: 7 days, no size limit.
    pub fn kafka_defaults() -> Self {
        RetentionPolicy {
            retention_ms: Some(7 * 24 * 3_600_000),
            retention_bytes: None,
        }
    }

    /// With `log.retention.ms` (a negative value keeps records for ever, as in Kafka).
    pub fn with_retention_ms(mut self, ms: i64) -> Self {
        self.retention_ms = (ms >= 0).then_some(ms);
        self
    }

    /// With `log.retention.bytes` (a negative value sets no limit, as in Kafka).
    pub fn with_retention_bytes(mut self, bytes: i64) -> Self {
        self.retention_bytes = u64::try_from(bytes).ok();
        self
    }
}

/// What one retention pass removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RetentionOutcome {
    /// Segments deleted.
    pub segments_deleted: usize,
    /// Bytes deleted.
    pub bytes_deleted: u64,
    /// The log start offset after the pass.
    pub log_start_offset: i64,
}

/// One segment as retention sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegmentInfo {
    /// The offset after its last record.
    pub next_offset: i64,
    /// Its size in bytes.
    pub size: u64,
    /// The newest record timestamp in it (`-1` when unknown).
    pub max_timestamp: i64,
}

/// How many of the oldest segments `segments` (oldest first, the active one last) retention
/// removes at `now_ms`, given the high watermark and the current log start offset.
pub(crate) fn deletable_prefix(
    segments: &[SegmentInfo],
    now_ms: i64,
    high_watermark: i64,
    log_start_offset: i64,
    policy: &RetentionPolicy,
) -> usize {
    let mut remaining: u64 = segments.iter().map(|s| s.size).sum();
    let mut n = 0;
    // Never the active (last) segment.
    for s in segments.iter().take(segments.len().saturating_sub(1)) {
        if s.next_offset > high_watermark {
            break;
        }
        let below_start = s.next_offset <= log_start_offset;
        let too_old = policy
            .retention_ms
            .is_some_and(|ms| s.max_timestamp >= 0 && now_ms.saturating_sub(s.max_timestamp) > ms);
        let too_big = policy
            .retention_bytes
            .is_some_and(|limit| remaining.saturating_sub(s.size) >= limit);
        if !(below_start || too_old || too_big) {
            break;
        }
        remaining -= s.size;
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(next_offset: i64, size: u64, max_timestamp: i64) -> SegmentInfo {
        SegmentInfo {
            next_offset,
            size,
            max_timestamp,
        }
    }

    #[test]
    fn retention_by_age_stops_at_the_first_young_segment_and_never_takes_the_active_one() {
        let segs = [
            seg(10, 100, 1_000),
            seg(20, 100, 5_000),
            seg(30, 100, 1_000),
        ];
        let p = RetentionPolicy::keep_all().with_retention_ms(2_000);
        assert_eq!(deletable_prefix(&segs, 6_000, 30, 0, &p), 1);
        assert_eq!(
            deletable_prefix(&segs, 100_000, 30, 0, &p),
            2,
            "the active one stays"
        );
    }

    #[test]
    fn retention_by_size_keeps_at_least_the_limit() {
        let segs = [
            seg(10, 100, 0),
            seg(20, 100, 0),
            seg(30, 100, 0),
            seg(40, 10, 0),
        ];
        let p = RetentionPolicy::keep_all().with_retention_bytes(200);
        // 310 bytes: dropping the first leaves 210 ≥ 200; dropping the second would leave 110.
        assert_eq!(deletable_prefix(&segs, 0, 40, 0, &p), 1);
    }

    #[test]
    fn retention_never_deletes_at_or_above_the_high_watermark() {
        let segs = [seg(10, 100, 0), seg(20, 100, 0), seg(30, 100, 0)];
        let p = RetentionPolicy::keep_all().with_retention_ms(0);
        assert_eq!(deletable_prefix(&segs, 1_000, 15, 0, &p), 1);
        assert_eq!(deletable_prefix(&segs, 1_000, 9, 0, &p), 0);
    }

    #[test]
    fn segments_wholly_below_the_log_start_offset_go_whatever_the_policy() {
        let segs = [seg(10, 100, 0), seg(20, 100, 0), seg(30, 100, 0)];
        let p = RetentionPolicy::keep_all();
        assert_eq!(deletable_prefix(&segs, 0, 30, 15, &p), 1);
        assert_eq!(deletable_prefix(&segs, 0, 30, 20, &p), 2);
    }

    #[test]
    fn negative_settings_keep_everything_as_in_kafka() {
        let p = RetentionPolicy::keep_all()
            .with_retention_ms(-1)
            .with_retention_bytes(-1);
        assert_eq!(p, RetentionPolicy::keep_all());
    }
}
