//! A hierarchical timing wheel (Varghese & Lauck), the timer behind the purgatory.
//!
//! Same shape as Kafka's `SystemTimer`: the innermost wheel has a tick of 1 ms and 20 buckets,
//! so the levels cover 20 ms, 400 ms, 8 s, 160 s, …; overflow wheels are created lazily when an
//! entry lies beyond the outermost one. Only buckets whose expiration changes are queued in a
//! small priority queue, so advancing over idle time costs nothing per tick.
//!
//! Buckets are flat vectors of `(deadline, value)` rather than linked lists: adding is an O(1)
//! push, and cancelling is O(1) by invalidation — the owner marks its entry dead (the purgatory
//! bumps the operation's generation) and the wheel drops it when its bucket comes due, or
//! earlier in [`TimingWheel::retain`]. Flushing a bucket walks contiguous memory instead of
//! chasing pointers, which is what makes the purgatory fast.
//!
//! The wheel is sans-IO: time is a number of milliseconds passed in by the caller
//! ([`TimingWheel::advance`]); it never reads a clock.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Tick of the innermost wheel, in milliseconds.
pub const TICK_MS: u64 = 1;
/// Number of buckets of every wheel level.
pub const WHEEL_SIZE: u64 = 20;

const NO_EXPIRATION: u64 = u64::MAX;

#[derive(Debug)]
struct Bucket<T> {
    expiration: u64,
    entries: Vec<(u64, T)>,
}

#[derive(Debug, Clone, Copy)]
struct Level {
    tick: u64,
    current: u64,
}

/// A hierarchical timing wheel holding values of type `T` until their deadline.
#[derive(Debug)]
pub struct TimingWheel<T> {
    levels: Vec<Level>,
    buckets: Vec<Bucket<T>>,
    queue: BinaryHeap<Reverse<(u64, u32)>>,
    len: usize,
}

impl<T> TimingWheel<T> {
    /// A wheel whose current time is `start_ms`.
    pub fn new(start_ms: u64) -> Self {
        let mut wheel = TimingWheel {
            levels: Vec::new(),
            buckets: Vec::new(),
            queue: BinaryHeap::new(),
            len: 0,
        };
        wheel.push_level(TICK_MS, start_ms);
        wheel
    }

    /// Number of entries held, dead ones not yet dropped included.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of wheel levels created so far (overflow wheels are created lazily).
    pub fn levels(&self) -> usize {
        self.levels.len()
    }

    /// The wheel's current time (the innermost level's, a multiple of [`TICK_MS`]).
    pub fn current_ms(&self) -> u64 {
        self.levels.first().map_or(0, |l| l.current)
    }

    /// The earliest time at which [`TimingWheel::advance`] has something to do, if any.
    ///
    /// This is the expiration of the earliest non-empty bucket: entries of an outer level are
    /// cascaded inward then, so it can be earlier than the earliest deadline.
    pub fn next_expiration(&self) -> Option<u64> {
        self.queue.peek().map(|Reverse((exp, _))| *exp)
    }

    fn push_level(&mut self, tick: u64, start_ms: u64) {
        self.levels.push(Level {
            tick,
            current: start_ms - start_ms % tick,
        });
        self.buckets.extend((0..WHEEL_SIZE).map(|_| Bucket {
            expiration: NO_EXPIRATION,
            entries: Vec::new(),
        }));
    }

    /// Adds `value` due at `deadline_ms`. O(1) (amortised over lazily created levels).
    ///
    /// A deadline that is not after the wheel's current time hands the value straight back as
    /// `Err(value)`, so the caller can run it now (Kafka's `add` returning false).
    pub fn insert(&mut self, deadline_ms: u64, value: T) -> Result<(), T> {
        let deadline_ms = deadline_ms.min(u64::MAX - 1);
        self.place(deadline_ms, value)?;
        self.len += 1;
        Ok(())
    }

    /// Keeps only the entries for which `keep` returns true (drops cancelled entries early).
    pub fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        let mut len = 0;
        for bucket in &mut self.buckets {
            bucket.entries.retain(|(_, v)| keep(v));
            len += bucket.entries.len();
        }
        self.len = len;
    }

    /// Advances the wheel to `now_ms` and calls `expired` once for every entry whose deadline
    /// is at or before `now_ms`, in bucket order (earlier buckets first).
    pub fn advance(&mut self, now_ms: u64, mut expired: impl FnMut(T)) {
        while let Some(&Reverse((expiration, bucket))) = self.queue.peek() {
            if expiration > now_ms {
                break;
            }
            self.queue.pop();
            let Some(b) = self.buckets.get_mut(bucket as usize) else {
                continue;
            };
            if b.expiration != expiration {
                continue; // a stale queue entry: the bucket was flushed since
            }
            b.expiration = NO_EXPIRATION;
            let entries = std::mem::take(&mut b.entries);
            self.set_time(expiration);
            // Flush: an entry already due by `now_ms` expires here (no need to cascade it
            // through the inner levels first); the others are re-placed on an inner level.
            for (deadline, value) in entries {
                let value = if deadline <= now_ms {
                    Err(value)
                } else {
                    self.place(deadline, value)
                };
                if let Err(value) = value {
                    self.len -= 1;
                    expired(value);
                }
            }
        }
        self.set_time(now_ms);
    }

    /// Moves the current time of every level forward to `time_ms` (rounded down to its tick).
    fn set_time(&mut self, time_ms: u64) {
        for level in &mut self.levels {
            if time_ms >= level.current + level.tick {
                level.current = time_ms - time_ms % level.tick;
            }
        }
    }

    /// Puts an entry into the bucket its deadline belongs to; `Err` if it is due.
    fn place(&mut self, deadline: u64, value: T) -> Result<(), T> {
        if deadline < self.current_ms() + TICK_MS {
            return Err(value);
        }
        let mut level = 0;
        loop {
            if level == self.levels.len() {
                let inner = self.levels[level - 1];
                self.push_level(inner.tick.saturating_mul(WHEEL_SIZE), inner.current);
            }
            let Level { tick, current } = self.levels[level];
            if deadline < current.saturating_add(tick.saturating_mul(WHEEL_SIZE))
                || tick == u64::MAX
            {
                let virtual_id = deadline / tick;
                let bucket = (level as u64 * WHEEL_SIZE + virtual_id % WHEEL_SIZE) as u32;
                let expiration = virtual_id * tick;
                let b = &mut self.buckets[bucket as usize];
                b.entries.push((deadline, value));
                if b.expiration != expiration {
                    b.expiration = expiration;
                    self.queue.push(Reverse((expiration, bucket)));
                }
                return Ok(());
            }
            level += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(wheel: &mut TimingWheel<u32>, now: u64) -> Vec<u32> {
        let mut out = Vec::new();
        wheel.advance(now, |v| out.push(v));
        out
    }

    #[test]
    fn entries_fire_at_their_deadline_not_before() {
        let mut w = TimingWheel::new(0);
        for d in [1u64, 5, 19, 20, 21, 399, 400, 401, 8_000, 8_001] {
            assert_eq!(w.insert(d, d as u32), Ok(()));
        }
        let mut fired = Vec::new();
        for now in 0..=8_001u64 {
            for v in drain(&mut w, now) {
                assert_eq!(u64::from(v), now, "entry {v} fired at {now}");
                fired.push(v);
            }
        }
        assert_eq!(fired.len(), 10);
        assert!(w.is_empty());
    }

    #[test]
    fn overflow_wheels_are_created_lazily_and_cascade() {
        let mut w = TimingWheel::new(0);
        assert_eq!(w.levels(), 1);
        let _ = w.insert(10, 1u32);
        assert_eq!(w.levels(), 1);
        let _ = w.insert(25, 2);
        assert_eq!(w.levels(), 2);
        let _ = w.insert(500, 3);
        assert_eq!(w.levels(), 3);
        let _ = w.insert(10_000, 4);
        assert_eq!(w.levels(), 4);
        // Jumping far ahead cascades every level in one call, in deadline order.
        assert_eq!(drain(&mut w, 20_000), vec![1, 2, 3, 4]);
        assert!(w.is_empty());
    }

    #[test]
    fn cascading_keeps_precision_across_levels() {
        // An entry that starts on level 2 is moved to level 1 then level 0 and fires exactly
        // at its deadline even when the clock is advanced in irregular steps.
        let mut w = TimingWheel::new(3);
        let _ = w.insert(3 + 777, 7u32);
        assert_eq!(w.levels(), 3);
        assert!(drain(&mut w, 700).is_empty());
        assert!(drain(&mut w, 779).is_empty());
        assert_eq!(drain(&mut w, 780), vec![7]);
    }

    #[test]
    fn retain_drops_cancelled_entries() {
        let mut w = TimingWheel::new(0);
        for v in 0..100u32 {
            let _ = w.insert(1 + u64::from(v) * 13, v);
        }
        w.retain(|v| v % 2 == 0);
        assert_eq!(w.len(), 50);
        let fired = drain(&mut w, 10_000);
        assert_eq!(fired, (0..100).filter(|v| v % 2 == 0).collect::<Vec<_>>());
    }

    #[test]
    fn past_deadlines_are_handed_back() {
        let mut w = TimingWheel::new(100);
        assert_eq!(w.insert(100, 1u32), Err(1));
        assert_eq!(w.insert(5, 2u32), Err(2));
        assert_eq!(w.insert(101, 3u32), Ok(()));
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn idle_time_is_skipped_and_next_expiration_reported() {
        let mut w = TimingWheel::new(0);
        assert_eq!(w.next_expiration(), None);
        let _ = w.insert(1_000_000, 1u32);
        let first = w.next_expiration().unwrap_or(0);
        assert!(first <= 1_000_000);
        assert_eq!(drain(&mut w, 999_999), Vec::<u32>::new());
        assert_eq!(drain(&mut w, 1_000_000), vec![1]);
        assert_eq!(w.next_expiration(), None);
    }

    #[test]
    fn huge_deadlines_do_not_overflow() {
        let mut w = TimingWheel::new(0);
        assert_eq!(w.insert(u64::MAX, 1u32), Ok(()));
        assert!(drain(&mut w, 1 << 40).is_empty());
        assert_eq!(w.len(), 1);
    }

    proptest::proptest! {
        /// Against a naive model: whatever the deadlines and the advance steps, every entry
        /// fires exactly once, at the first advance whose time reaches its deadline.
        #[test]
        fn wheel_matches_a_sorted_model(
            start in 0u64..10_000,
            deadlines in proptest::collection::vec(0u64..20_000, 0..200),
            steps in proptest::collection::vec(0u64..3_000, 1..40),
        ) {
            let mut w = TimingWheel::new(start);
            let mut pending = Vec::new();
            for (i, d) in deadlines.iter().enumerate() {
                let deadline = start + d;
                match w.insert(deadline, i as u32) {
                    Ok(()) => pending.push((deadline, i as u32)),
                    Err(_) => proptest::prop_assert!(deadline <= start),
                }
            }
            let mut now = start;
            for step in steps {
                now += step;
                let mut fired = drain(&mut w, now);
                fired.sort_unstable();
                let mut due: Vec<u32> =
                    pending.iter().filter(|(d, _)| *d <= now).map(|(_, v)| *v).collect();
                due.sort_unstable();
                pending.retain(|(d, _)| *d > now);
                proptest::prop_assert_eq!(fired, due);
            }
            proptest::prop_assert_eq!(w.len(), pending.len());
        }
    }
}
