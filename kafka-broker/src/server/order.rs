//! [`ResponseOrder`]: the per-connection sequencing that keeps responses in request order
//! (K3) while handler workers finish requests in any order. Pure: no I/O, no clock.

use std::collections::BTreeMap;

/// Sequence numbers for one connection's requests and the reorder buffer of their results.
///
/// Each request takes the next sequence number ([`ResponseOrder::start`]); results come back
/// in any order ([`ResponseOrder::finish`]) and leave, through [`ResponseOrder::pop_next`],
/// only in sequence order. At most `limit` requests are started and not yet popped, which
/// bounds the buffer.
#[derive(Debug)]
pub(crate) struct ResponseOrder<T> {
    limit: u64,
    next_seq: u64,
    next_out: u64,
    ready: BTreeMap<u64, T>,
}

impl<T> ResponseOrder<T> {
    /// An empty sequence allowing `limit` requests in flight (at least 1).
    pub fn new(limit: usize) -> Self {
        ResponseOrder {
            limit: (limit as u64).max(1),
            next_seq: 0,
            next_out: 0,
            ready: BTreeMap::new(),
        }
    }

    /// Requests started whose results have not left yet.
    pub fn in_flight(&self) -> u64 {
        self.next_seq - self.next_out
    }

    /// Whether another request may start.
    pub fn has_room(&self) -> bool {
        self.in_flight() < self.limit
    }

    /// Gives the next request its sequence number, or `None` at the in-flight limit.
    pub fn start(&mut self) -> Option<u64> {
        if !self.has_room() {
            return None;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        Some(seq)
    }

    /// Records the result of request `seq`. A number never handed out, already popped or
    /// already finished is ignored (returns `false`).
    pub fn finish(&mut self, seq: u64, result: T) -> bool {
        if seq < self.next_out || seq >= self.next_seq || self.ready.contains_key(&seq) {
            return false;
        }
        self.ready.insert(seq, result);
        true
    }

    /// The result of the oldest unanswered request, once it is there.
    #[must_use = "dropping it loses a response"]
    pub fn pop_next(&mut self) -> Option<T> {
        let result = self.ready.remove(&self.next_out)?;
        self.next_out += 1;
        Some(result)
    }

    /// Whether [`ResponseOrder::pop_next`] would return a result.
    pub fn next_is_ready(&self) -> bool {
        self.ready.contains_key(&self.next_out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn k3_a_late_first_response_holds_back_the_ones_after_it() {
        let mut order = ResponseOrder::new(4);
        let (a, b, c) = (order.start(), order.start(), order.start());
        assert_eq!((a, b, c), (Some(0), Some(1), Some(2)));
        assert!(order.finish(2, "c"));
        assert!(order.finish(1, "b"));
        assert_eq!(order.pop_next(), None);
        assert!(order.finish(0, "a"));
        assert_eq!(order.pop_next(), Some("a"));
        assert_eq!(order.pop_next(), Some("b"));
        assert_eq!(order.pop_next(), Some("c"));
        assert_eq!(order.in_flight(), 0);
    }

    #[test]
    fn the_in_flight_limit_stops_new_requests_until_the_oldest_leaves() {
        let mut order = ResponseOrder::new(2);
        assert_eq!(order.start(), Some(0));
        assert_eq!(order.start(), Some(1));
        assert_eq!(order.start(), None);
        order.finish(1, ());
        assert_eq!(order.start(), None, "a later result does not free a slot");
        order.finish(0, ());
        assert_eq!(order.pop_next(), Some(()));
        assert_eq!(order.start(), Some(2));
    }

    #[test]
    fn unknown_duplicate_and_popped_sequence_numbers_are_ignored() {
        let mut order = ResponseOrder::new(3);
        order.start();
        assert!(!order.finish(5, 'x'), "never handed out");
        assert!(order.finish(0, 'a'));
        assert!(!order.finish(0, 'b'), "duplicate");
        assert_eq!(order.pop_next(), Some('a'));
        assert!(!order.finish(0, 'c'), "already popped");
        assert_eq!(order.pop_next(), None);
    }

    proptest! {
        /// K3: whatever order results arrive in, they leave in request order.
        #[test]
        fn k3_results_leave_in_request_order_for_any_completion_order(
            (n, perm) in (1usize..40).prop_flat_map(|n| (Just(n), Just((0..n as u64).collect::<Vec<_>>()).prop_shuffle())),
            limit in 1usize..50,
        ) {
            let mut order = ResponseOrder::new(limit);
            let mut pending: Vec<u64> = perm;
            let mut started = Vec::new();
            let mut out = Vec::new();
            while out.len() < n {
                while started.len() < n {
                    match order.start() {
                        Some(seq) => started.push(seq),
                        None => break,
                    }
                }
                // Finish the first pending sequence number that has been started.
                if let Some(i) = pending.iter().position(|s| started.contains(s)) {
                    let seq = pending.remove(i);
                    prop_assert!(order.finish(seq, seq));
                }
                while let Some(r) = order.pop_next() {
                    out.push(r);
                }
                prop_assert!(order.in_flight() <= limit as u64);
            }
            prop_assert_eq!(out, (0..n as u64).collect::<Vec<_>>());
        }
    }
}
