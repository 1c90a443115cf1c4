//! A bounded trace of the last events of a run, printed when a check fails.

use std::collections::VecDeque;
use std::fmt::Debug;

/// The last `capacity` events, each with its simulated time.
#[derive(Debug)]
pub struct Trace<E> {
    events: VecDeque<(u64, E)>,
    capacity: usize,
}

impl<E: Debug> Trace<E> {
    /// An empty trace keeping `capacity` events.
    pub fn new(capacity: usize) -> Self {
        Trace {
            events: VecDeque::with_capacity(capacity),
            capacity,
        }
    }

    /// Whether events are kept at all.
    pub fn is_on(&self) -> bool {
        self.capacity > 0
    }

    /// Records `event` at `now`, forgetting the oldest if full.
    pub fn push(&mut self, now: u64, event: E) {
        if self.capacity == 0 {
            return;
        }
        if self.events.len() == self.capacity {
            self.events.pop_front();
        }
        self.events.push_back((now, event));
    }

    /// One line per event, oldest first.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (t, e) in &self.events {
            out.push_str(&format!("  t={t:>6}ms {e:?}\n"));
        }
        out
    }
}
