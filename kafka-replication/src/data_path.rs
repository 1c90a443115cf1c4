//! Counters of the data path's work: the record bytes copied in user space at each step
//! between a socket and a log, and the hand-offs (task wake-ups) a request goes through.
//!
//! They exist so a benchmark can say how many times each produced byte is copied on a leader
//! and on a follower, and how many times a request changes task on its way, instead of
//! guessing it from a profile. Each is one relaxed atomic addition per batch or per request,
//! never per byte, so they stay on in every build. The counts are process-wide: with several
//! brokers in one process they add up, and each [`CopyStep`] belongs to one role (leader or
//! follower), so a benchmark divides by the bytes that role received.
//!
//! The network server (`kafka-broker`) and the replica driver count here too, so that one
//! [`snapshot`] holds the whole path.

use std::sync::atomic::{AtomicU64, Ordering};

/// A step at which record bytes are copied in user space (the kernel's own copies between
/// socket buffers and user memory are not counted: every design pays them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CopyStep {
    /// Leader: bytes of a partly read request moved when a connection's read buffer grows
    /// (socket read buffer → request).
    RequestReadBuffer,
    /// Leader: produced records copied into the log so the leader can stamp offsets and its
    /// epoch (request → log).
    LeaderAppend,
    /// Leader: batches lying in several of a log's chunks joined into one buffer for a fetch
    /// answer (log → fetch response); a read within one chunk is a slice and counts nothing.
    LogRead,
    /// Follower: bytes of a partly read fetch answer moved when the fetcher's read buffer
    /// grows (socket read buffer → fetch response).
    FetchReadBuffer,
    /// Follower: fetched records copied into the log (fetch response → follower log).
    FollowerAppend,
}

/// A hand-off of a request from one task to another (each may wake a thread).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Hop {
    /// A processor queued a request for the handler workers (processor → handler).
    RequestQueued,
    /// A handler's answer was not ready at once (a purgatory wait): its worker set it aside,
    /// and the answer wakes the worker later.
    HandlerParked,
    /// A handler put an encoded answer on its connection's response queue (handler →
    /// connection; wakes the processor task driving the connection).
    ResponseQueued,
    /// A delayed produce was answered out of the purgatory (wakes its parked handler).
    DelayedProduceAnswered,
    /// A delayed fetch was answered out of the purgatory (wakes its parked handler).
    DelayedFetchAnswered,
}

const COPIES: usize = 5;
const HOPS: usize = 5;

static COPIED_BYTES: [AtomicU64; COPIES] = [const { AtomicU64::new(0) }; COPIES];
static COPY_EVENTS: [AtomicU64; COPIES] = [const { AtomicU64::new(0) }; COPIES];
static HOP_COUNTS: [AtomicU64; HOPS] = [const { AtomicU64::new(0) }; HOPS];

fn copy_index(c: CopyStep) -> usize {
    match c {
        CopyStep::RequestReadBuffer => 0,
        CopyStep::LeaderAppend => 1,
        CopyStep::LogRead => 2,
        CopyStep::FetchReadBuffer => 3,
        CopyStep::FollowerAppend => 4,
    }
}

fn hop_index(h: Hop) -> usize {
    match h {
        Hop::RequestQueued => 0,
        Hop::HandlerParked => 1,
        Hop::ResponseQueued => 2,
        Hop::DelayedProduceAnswered => 3,
        Hop::DelayedFetchAnswered => 4,
    }
}

/// Counts `bytes` copied at step `step` (one copy event).
#[inline]
pub fn count_copy(step: CopyStep, bytes: usize) {
    if bytes == 0 {
        return;
    }
    let i = copy_index(step);
    COPIED_BYTES[i].fetch_add(bytes as u64, Ordering::Relaxed);
    COPY_EVENTS[i].fetch_add(1, Ordering::Relaxed);
}

/// Counts one hand-off `hop`.
#[inline]
pub fn count_hop(hop: Hop) {
    HOP_COUNTS[hop_index(hop)].fetch_add(1, Ordering::Relaxed);
}

/// The counters at one moment; subtract two with [`DataPathCounts::since`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DataPathCounts {
    copied_bytes: [u64; COPIES],
    copy_events: [u64; COPIES],
    hops: [u64; HOPS],
}

impl DataPathCounts {
    /// Bytes copied at `step`.
    pub fn copied_bytes(&self, step: CopyStep) -> u64 {
        self.copied_bytes[copy_index(step)]
    }

    /// Number of copies made at `step`.
    pub fn copy_events(&self, step: CopyStep) -> u64 {
        self.copy_events[copy_index(step)]
    }

    /// Number of hand-offs `hop`.
    pub fn hops(&self, hop: Hop) -> u64 {
        self.hops[hop_index(hop)]
    }

    /// What was counted between `earlier` and `self`.
    pub fn since(&self, earlier: &DataPathCounts) -> DataPathCounts {
        let sub = |a: &[u64], b: &[u64], out: &mut [u64]| {
            for ((o, a), b) in out.iter_mut().zip(a).zip(b) {
                *o = a.saturating_sub(*b);
            }
        };
        let mut d = DataPathCounts::default();
        sub(
            &self.copied_bytes,
            &earlier.copied_bytes,
            &mut d.copied_bytes,
        );
        sub(&self.copy_events, &earlier.copy_events, &mut d.copy_events);
        sub(&self.hops, &earlier.hops, &mut d.hops);
        d
    }
}

/// The process-wide counters now.
pub fn snapshot() -> DataPathCounts {
    let load = |a: &[AtomicU64], out: &mut [u64]| {
        for (o, a) in out.iter_mut().zip(a) {
            *o = a.load(Ordering::Relaxed);
        }
    };
    let mut s = DataPathCounts::default();
    load(&COPIED_BYTES, &mut s.copied_bytes);
    load(&COPY_EVENTS, &mut s.copy_events);
    load(&HOP_COUNTS, &mut s.hops);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_and_subtract() {
        let before = snapshot();
        count_copy(CopyStep::LogRead, 100);
        count_copy(CopyStep::LogRead, 0);
        count_hop(Hop::HandlerParked);
        let d = snapshot().since(&before);
        // Other tests of this process may count too, but never subtract.
        assert!(d.copied_bytes(CopyStep::LogRead) >= 100);
        assert!(d.copy_events(CopyStep::LogRead) >= 1);
        assert!(d.hops(Hop::HandlerParked) >= 1);
    }
}
