//! The delayed-operation purgatory (K8.5): operations that wait on watch keys until a check
//! says they can complete, or until their timeout expires.
//!
//! Kafka's rules, kept exactly (Kafka's `DelayedOperationPurgatory`):
//! - [`Purgatory::try_complete_else_watch`] checks the operation, watches it on every key, checks
//!   it **again**, and only then adds it to the timer — so a state change that lands between the
//!   first check and the watch is never missed.
//! - Every operation completes **exactly once**: by a successful check
//!   ([`Purgatory::check_and_complete`]), by [`Purgatory::force_complete`], or by expiry in
//!   [`Purgatory::advance`]. Whichever comes first wins; the others see nothing.
//! - Expiry goes through a hierarchical [`TimingWheel`] (tick 1 ms, 20 buckets per level).
//! - Completed operations leave stale entries in the watch lists of their other keys; they are
//!   purged once their number exceeds the purge interval (Kafka's
//!   `purgatory.purge.interval.requests`, default 1000).
//!
//! The purgatory is sans-IO and single-threaded: time is passed in, the check is a closure the
//! caller supplies (it reads the partition state), and completed operations are handed out by
//! [`Purgatory::poll_completed`] for the caller to answer.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

use crate::timer::TimingWheel;

/// Default number of stale watch entries tolerated before a purge
/// (`fetch.purgatory.purge.interval.requests`).
pub const DEFAULT_PURGE_INTERVAL: usize = 1000;

/// Identifies a waiting operation; stays unique after the operation completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpId {
    index: u32,
    generation: u32,
}

/// How an operation left the purgatory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A check succeeded, or it was force-completed (Kafka's `onComplete`).
    Completed,
    /// Its timeout passed first (Kafka's `onExpiration` followed by `onComplete`).
    Expired,
}

/// An operation handed out by [`Purgatory::poll_completed`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished<T> {
    /// The operation's id, as returned when it was registered (`None` if it completed before
    /// it was ever watched).
    pub id: Option<OpId>,
    /// The operation itself.
    pub op: T,
    /// Why it left.
    pub outcome: Outcome,
}

/// What [`Purgatory::try_complete_else_watch`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// The first or second check succeeded (or the timeout was already over): the operation
    /// is finished and waits in [`Purgatory::poll_completed`].
    Done,
    /// The operation is watched on its keys and timed.
    Watching(OpId),
}

/// Errors of the purgatory.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum PurgatoryError {
    /// More operations than the purgatory can index (`u32::MAX - 1`).
    #[error("purgatory is full")]
    Full,
}

#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    watches: u32,
    op: Option<T>,
}

/// A purgatory of operations `T` watched on keys `K`.
#[derive(Debug)]
pub struct Purgatory<K, T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    watchers: HashMap<
        K,
        Vec<OpId>,
        std::hash::BuildHasherDefault<std::collections::hash_map::DefaultHasher>,
    >,
    timer: TimingWheel<OpId>,
    finished: VecDeque<Finished<T>>,
    waiting: usize,
    stale_watches: usize,
    purge_interval: usize,
}

impl<K: Hash + Eq + Clone, T> Purgatory<K, T> {
    /// An empty purgatory whose clock starts at `now_ms`, purging stale watch entries after
    /// [`DEFAULT_PURGE_INTERVAL`].
    pub fn new(now_ms: u64) -> Self {
        Self::with_purge_interval(now_ms, DEFAULT_PURGE_INTERVAL)
    }

    /// An empty purgatory with a chosen purge interval.
    pub fn with_purge_interval(now_ms: u64, purge_interval: usize) -> Self {
        Purgatory {
            slots: Vec::new(),
            free: Vec::new(),
            watchers: HashMap::default(),
            timer: TimingWheel::new(now_ms),
            finished: VecDeque::new(),
            waiting: 0,
            stale_watches: 0,
            purge_interval,
        }
    }

    /// Number of operations still waiting.
    pub fn waiting(&self) -> usize {
        self.waiting
    }

    /// Number of entries in all watch lists, stale ones included (Kafka's `watched`).
    pub fn watched(&self) -> usize {
        self.watchers.values().map(Vec::len).sum()
    }

    /// Number of keys that have a watch list.
    pub fn watch_keys(&self) -> usize {
        self.watchers.len()
    }

    /// When [`Purgatory::advance`] should next be called, if anything is timed.
    pub fn next_deadline(&self) -> Option<u64> {
        self.timer.next_expiration()
    }

    /// The waiting operation `id`, if it has not finished.
    pub fn get(&self, id: OpId) -> Option<&T> {
        let slot = self.slots.get(id.index as usize)?;
        if slot.generation != id.generation {
            return None;
        }
        slot.op.as_ref()
    }

    /// K8.5: checks `op`; if it cannot complete, watches it on every key of `keys`, checks it
    /// once more, and only if still incomplete adds it to the timer with deadline
    /// `now_ms + timeout_ms`. A timeout that is already over finishes it as expired.
    pub fn try_complete_else_watch(
        &mut self,
        now_ms: u64,
        timeout_ms: u64,
        mut op: T,
        keys: impl IntoIterator<Item = K>,
        mut check: impl FnMut(&mut T) -> bool,
    ) -> Result<Admission, PurgatoryError> {
        if check(&mut op) {
            self.finished.push_back(Finished {
                id: None,
                op,
                outcome: Outcome::Completed,
            });
            return Ok(Admission::Done);
        }
        let id = self.allocate(op)?;
        let mut watches = 0u32;
        for key in keys {
            self.watchers.entry(key).or_default().push(id);
            watches = watches.saturating_add(1);
        }
        self.slots[id.index as usize].watches = watches;
        self.waiting += 1;
        // Check again: what changed between the first check and the watch is seen now.
        let done = match self.slots[id.index as usize].op.as_mut() {
            Some(op) => check(op),
            None => false,
        };
        if done {
            self.finish(id.index, Outcome::Completed, 0);
            return Ok(Admission::Done);
        }
        let deadline = now_ms.saturating_add(timeout_ms);
        match self.timer.insert(deadline, id) {
            Ok(()) => Ok(Admission::Watching(id)),
            Err(_) => {
                // Already due: it expires now.
                self.finish(id.index, Outcome::Expired, 0);
                Ok(Admission::Done)
            }
        }
    }

    /// Checks every operation watched on `key` and completes those whose check succeeds;
    /// drops stale entries on the way. Returns how many completed.
    pub fn check_and_complete(&mut self, key: &K, mut check: impl FnMut(&mut T) -> bool) -> usize {
        let Some(mut list) = self.watchers.remove(key) else {
            return 0;
        };
        let mut completed = 0;
        list.retain(|id| {
            let Some(slot) = self.slots.get_mut(id.index as usize) else {
                return false;
            };
            if slot.generation != id.generation {
                self.stale_watches = self.stale_watches.saturating_sub(1);
                return false;
            }
            let done = match slot.op.as_mut() {
                Some(op) => check(op),
                None => false,
            };
            if done {
                completed += 1;
                // This list's entry goes away here; the op's other entries become stale.
                Self::finish_slot(
                    &mut self.slots,
                    &mut self.free,
                    &mut self.finished,
                    &mut self.waiting,
                    &mut self.stale_watches,
                    id.index,
                    Outcome::Completed,
                    1,
                );
                false
            } else {
                true
            }
        });
        if !list.is_empty() {
            self.watchers.insert(key.clone(), list);
        }
        self.maybe_purge();
        completed
    }

    /// Runs [`Purgatory::check_and_complete`] on every key (Kafka's `checkAndCompleteAll`).
    pub fn check_and_complete_all(&mut self, mut check: impl FnMut(&mut T) -> bool) -> usize {
        let keys: Vec<K> = self.watchers.keys().cloned().collect();
        keys.iter()
            .map(|k| self.check_and_complete(k, &mut check))
            .sum()
    }

    /// Completes `id` now whatever its state (Kafka's `forceComplete`); false if it had
    /// already finished.
    pub fn force_complete(&mut self, id: OpId) -> bool {
        if self.get(id).is_none() {
            return false;
        }
        self.finish(id.index, Outcome::Completed, 0);
        self.maybe_purge();
        true
    }

    /// Advances time to `now_ms`: every waiting operation whose deadline is at or before it
    /// finishes as [`Outcome::Expired`].
    pub fn advance(&mut self, now_ms: u64) {
        let Purgatory {
            slots,
            free,
            timer,
            finished,
            waiting,
            stale_watches,
            ..
        } = self;
        timer.advance(now_ms, |id| {
            // Entries of ops that finished otherwise are dead: skip them.
            if slots
                .get(id.index as usize)
                .is_some_and(|s| s.generation == id.generation && s.op.is_some())
            {
                Self::finish_slot(
                    slots,
                    free,
                    finished,
                    waiting,
                    stale_watches,
                    id.index,
                    Outcome::Expired,
                    0,
                );
            }
        });
        self.maybe_purge();
    }

    /// The next finished operation, in the order they finished.
    #[must_use = "dropping it loses the operation's answer"]
    pub fn poll_completed(&mut self) -> Option<Finished<T>> {
        self.finished.pop_front()
    }

    /// Removes finished operations from every watch list and from the timer now.
    pub fn purge(&mut self) {
        self.purge_watchers();
        self.purge_timer();
    }

    fn is_live(slots: &[Slot<T>], id: &OpId) -> bool {
        slots
            .get(id.index as usize)
            .is_some_and(|s| s.generation == id.generation && s.op.is_some())
    }

    fn purge_timer(&mut self) {
        let slots = &self.slots;
        self.timer.retain(|id| Self::is_live(slots, id));
    }

    fn purge_watchers(&mut self) {
        let slots = &self.slots;
        self.watchers.retain(|_, list| {
            list.retain(|id| Self::is_live(slots, id));
            !list.is_empty()
        });
        self.stale_watches = 0;
    }

    fn maybe_purge(&mut self) {
        if self.stale_watches > self.purge_interval {
            self.purge_watchers();
        }
        // Every waiting op has one timer entry; the rest belong to finished ops. Dropping them
        // once they outnumber the waiting ops keeps memory bounded at amortised O(1) per op.
        let dead_timers = self.timer.len().saturating_sub(self.waiting);
        if dead_timers > self.purge_interval.max(self.waiting) {
            self.purge_timer();
        }
    }

    fn allocate(&mut self, op: T) -> Result<OpId, PurgatoryError> {
        if let Some(index) = self.free.pop() {
            let slot = &mut self.slots[index as usize];
            slot.op = Some(op);
            slot.watches = 0;
            return Ok(OpId {
                index,
                generation: slot.generation,
            });
        }
        let index = u32::try_from(self.slots.len()).map_err(|_| PurgatoryError::Full)?;
        if index == u32::MAX {
            return Err(PurgatoryError::Full);
        }
        self.slots.push(Slot {
            generation: 0,
            watches: 0,
            op: Some(op),
        });
        Ok(OpId {
            index,
            generation: 0,
        })
    }

    fn finish(&mut self, index: u32, outcome: Outcome, removed_watches: u32) {
        Self::finish_slot(
            &mut self.slots,
            &mut self.free,
            &mut self.finished,
            &mut self.waiting,
            &mut self.stale_watches,
            index,
            outcome,
            removed_watches,
        );
    }

    /// The one place an operation finishes: takes it out of its slot (so it can never finish
    /// twice), which also cancels its timer entry (the entry is dead from now on), and queues
    /// it for [`Purgatory::poll_completed`].
    #[allow(clippy::too_many_arguments)]
    fn finish_slot(
        slots: &mut [Slot<T>],
        free: &mut Vec<u32>,
        finished: &mut VecDeque<Finished<T>>,
        waiting: &mut usize,
        stale_watches: &mut usize,
        index: u32,
        outcome: Outcome,
        removed_watches: u32,
    ) {
        let Some(slot) = slots.get_mut(index as usize) else {
            return;
        };
        let Some(op) = slot.op.take() else {
            return;
        };
        let id = OpId {
            index,
            generation: slot.generation,
        };
        *stale_watches += slot.watches.saturating_sub(removed_watches) as usize;
        slot.watches = 0;
        slot.generation = slot.generation.wrapping_add(1);
        free.push(index);
        *waiting -= 1;
        finished.push_back(Finished {
            id: Some(id),
            op,
            outcome,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn drain<K: Hash + Eq + Clone, T>(p: &mut Purgatory<K, T>) -> Vec<Finished<T>> {
        std::iter::from_fn(|| p.poll_completed()).collect()
    }

    #[test]
    fn k8_5_completes_at_once_when_first_check_succeeds() {
        let mut p: Purgatory<u32, &str> = Purgatory::new(0);
        let a = p.try_complete_else_watch(0, 100, "op", [1, 2], |_| true);
        assert_eq!(a, Ok(Admission::Done));
        assert_eq!(p.waiting(), 0);
        assert_eq!(
            p.watched(),
            0,
            "an op that completed at once is never watched"
        );
        assert_eq!(drain(&mut p).len(), 1);
    }

    #[test]
    fn k8_5_check_watch_check_sees_a_change_between_check_and_watch() {
        // The state changes after the first check but before the watch is in place: a
        // `check_and_complete` fired in that window would have found no watcher. The second
        // check must catch it, and the op must not be left on the timer.
        let mut p: Purgatory<u32, u32> = Purgatory::new(0);
        let calls = Cell::new(0);
        let a = p.try_complete_else_watch(0, 100, 7, [1], |_| {
            calls.set(calls.get() + 1);
            calls.get() == 2
        });
        assert_eq!(a, Ok(Admission::Done));
        assert_eq!(calls.get(), 2);
        assert_eq!(p.next_deadline(), None, "never added to the timer");
        let done = drain(&mut p);
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].outcome, Outcome::Completed);
        p.advance(1_000);
        assert!(drain(&mut p).is_empty(), "no second completion by expiry");
    }

    #[test]
    fn k8_5_watched_op_completes_exactly_once_across_keys_and_expiry() {
        let mut p: Purgatory<u32, u32> = Purgatory::new(0);
        let Ok(Admission::Watching(id)) = p.try_complete_else_watch(0, 50, 9, [1, 2, 3], |_| false)
        else {
            panic!("should wait")
        };
        assert_eq!(p.watched(), 3);
        assert_eq!(p.check_and_complete(&2, |_| true), 1);
        assert_eq!(p.check_and_complete(&1, |_| true), 0);
        assert_eq!(p.check_and_complete(&3, |_| true), 0);
        assert!(!p.force_complete(id));
        p.advance(100);
        let done = drain(&mut p);
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].id, Some(id));
        assert_eq!(done[0].outcome, Outcome::Completed);
        assert_eq!(p.waiting(), 0);
        assert_eq!(p.watched(), 0, "stale entries were dropped while walking");
    }

    #[test]
    fn k8_5_expired_op_is_not_completed_by_a_later_check() {
        let mut p: Purgatory<u32, u32> = Purgatory::new(10);
        let _ = p.try_complete_else_watch(10, 25, 1, [1], |_| false);
        p.advance(34);
        assert!(drain(&mut p).is_empty());
        p.advance(35);
        let done = drain(&mut p);
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].outcome, Outcome::Expired);
        assert_eq!(p.check_and_complete(&1, |_| true), 0);
        assert!(drain(&mut p).is_empty());
    }

    #[test]
    fn k8_5_only_ops_whose_check_passes_complete() {
        let mut p: Purgatory<&str, u64> = Purgatory::new(0);
        for need in [5u64, 10, 15] {
            let _ = p.try_complete_else_watch(0, 1000, need, ["tp-0"], |_| false);
        }
        let leo = 10;
        assert_eq!(p.check_and_complete(&"tp-0", |need| *need <= leo), 2);
        assert_eq!(p.waiting(), 1);
        let ops: Vec<u64> = drain(&mut p).into_iter().map(|f| f.op).collect();
        assert_eq!(ops, vec![5, 10]);
    }

    #[test]
    fn zero_timeout_expires_at_once() {
        let mut p: Purgatory<u32, u32> = Purgatory::new(0);
        assert_eq!(
            p.try_complete_else_watch(0, 0, 1, [1], |_| false),
            Ok(Admission::Done)
        );
        assert_eq!(drain(&mut p)[0].outcome, Outcome::Expired);
        assert_eq!(p.waiting(), 0);
    }

    #[test]
    fn stale_watchers_are_purged_after_the_interval() {
        let mut p: Purgatory<u32, u32> = Purgatory::with_purge_interval(0, 10);
        for i in 0..20 {
            let _ = p.try_complete_else_watch(0, 1000, i, [0, 1000 + i], |_| false);
        }
        assert_eq!(p.watched(), 40);
        // Completing through key 0 leaves one stale entry per op under its own key.
        for i in 0..11 {
            assert_eq!(p.check_and_complete(&0, |op| *op == i), 1);
        }
        assert_eq!(
            p.watched(),
            9 + 9,
            "11 > 10 stale entries triggered a purge"
        );
        assert_eq!(p.watch_keys(), 10);
    }

    #[test]
    fn force_complete_cancels_the_timer() {
        let mut p: Purgatory<u32, u32> = Purgatory::new(0);
        let Ok(Admission::Watching(id)) = p.try_complete_else_watch(0, 10, 1, [1], |_| false)
        else {
            panic!("should wait")
        };
        assert!(p.force_complete(id));
        assert_eq!(p.get(id), None);
        p.advance(100);
        assert_eq!(drain(&mut p).len(), 1);
    }
}
