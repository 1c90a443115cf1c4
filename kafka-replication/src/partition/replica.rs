//! What a leader knows about one follower (Kafka's `Replica`): its log end offset and the
//! fetch times that decide whether it is caught up (K8.2).

/// Log end offset of a follower the leader has not heard from in this leadership.
pub const UNKNOWN_OFFSET: i64 = -1;

/// A leader's view of one follower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaState {
    /// The follower's log end offset (its last fetch offset), or [`UNKNOWN_OFFSET`].
    pub log_end_offset: i64,
    /// The follower's log start offset.
    pub log_start_offset: i64,
    /// The leader's log end offset when the follower last fetched.
    pub last_fetch_leader_log_end_offset: i64,
    /// When the follower last fetched.
    pub last_fetch_time_ms: u64,
    /// The last time the follower was known to have everything the leader had.
    pub last_caught_up_time_ms: u64,
}

impl ReplicaState {
    /// The state of a follower at the start of a leadership: LEO unknown, and caught up `now`
    /// if it is in the ISR (so it gets a full lag period to fetch), else never.
    pub fn at_leadership_start(leader_epoch_start_offset: i64, now_ms: u64, in_isr: bool) -> Self {
        ReplicaState {
            log_end_offset: UNKNOWN_OFFSET,
            log_start_offset: UNKNOWN_OFFSET,
            last_fetch_leader_log_end_offset: leader_epoch_start_offset,
            last_fetch_time_ms: now_ms,
            last_caught_up_time_ms: if in_isr { now_ms } else { 0 },
        }
    }

    /// K8.2: records a fetch at `fetch_offset` made at `fetch_time_ms` while the leader's log
    /// ended at `leader_end_offset`.
    ///
    /// - fetch offset ≥ the leader's LEO now: caught up now;
    /// - else fetch offset ≥ the leader's LEO at the previous fetch: caught up at the previous
    ///   fetch time;
    /// - else the last caught-up time is unchanged.
    pub fn update_fetch_state(
        &mut self,
        fetch_offset: i64,
        follower_log_start_offset: i64,
        fetch_time_ms: u64,
        leader_end_offset: i64,
    ) {
        if fetch_offset >= leader_end_offset {
            self.last_caught_up_time_ms = self.last_caught_up_time_ms.max(fetch_time_ms);
        } else if fetch_offset >= self.last_fetch_leader_log_end_offset {
            self.last_caught_up_time_ms = self.last_caught_up_time_ms.max(self.last_fetch_time_ms);
        }
        self.log_start_offset = follower_log_start_offset;
        self.log_end_offset = fetch_offset;
        self.last_fetch_leader_log_end_offset = leader_end_offset;
        self.last_fetch_time_ms = fetch_time_ms;
    }

    /// Whether the follower counts as in sync: it has the leader's whole log, or it was caught
    /// up within the last `max_lag_ms`.
    pub fn is_caught_up(&self, leader_end_offset: i64, now_ms: u64, max_lag_ms: u64) -> bool {
        self.log_end_offset == leader_end_offset
            || now_ms.saturating_sub(self.last_caught_up_time_ms) <= max_lag_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn k8_2_caught_up_time_follows_kafka_rules() {
        let mut r = ReplicaState::at_leadership_start(10, 1_000, true);
        assert_eq!(r.last_caught_up_time_ms, 1_000);
        // Fetch at the leader's LEO: caught up now.
        r.update_fetch_state(10, 0, 2_000, 10);
        assert_eq!(r.last_caught_up_time_ms, 2_000);
        // The leader moved to 15; the follower fetches 10 at 3000 (behind now, but it had
        // everything at its previous fetch): caught up as of the previous fetch (2000).
        r.update_fetch_state(10, 0, 3_000, 15);
        assert_eq!(r.last_caught_up_time_ms, 2_000);
        // Fetch 15 while the leader is at 20: it reached the LEO of the previous fetch (15),
        // so it was caught up at 3000.
        r.update_fetch_state(15, 0, 4_000, 20);
        assert_eq!(r.last_caught_up_time_ms, 3_000);
        // Fetch 16 with the leader at 30: it did not reach 20, unchanged.
        r.update_fetch_state(16, 0, 5_000, 30);
        assert_eq!(r.last_caught_up_time_ms, 3_000);
        assert_eq!(r.log_end_offset, 16);
        assert!(r.is_caught_up(30, 3_000 + 30_000, 30_000));
        assert!(!r.is_caught_up(30, 3_000 + 30_001, 30_000));
        assert!(
            r.is_caught_up(16, 1 << 40, 30_000),
            "at the leader's LEO it is in sync"
        );
    }

    #[test]
    fn k8_2_out_of_isr_replica_starts_never_caught_up() {
        let r = ReplicaState::at_leadership_start(10, 50_000, false);
        assert_eq!(r.log_end_offset, UNKNOWN_OFFSET);
        assert!(!r.is_caught_up(10, 50_000, 30_000));
    }
}
