//! Client session liveness as ZooKeeper's leader tracks it: [`SessionTracker`], the leader's
//! sans-IO table of session deadlines, and the session-touch table a learner sends in its PING
//! replies ([`encode_touches`] / [`decode_touches`]: repeated `i64 sessionId, i32 timeout`, big
//! endian, as ZooKeeper's `LearnerHandler` reads it).
//!
//! Sessions are the embedder's: Zab only carries their liveness. A server touches a session
//! whenever one of its clients shows a sign of life; a learner collects the touches and reports
//! them to the leader with its next PING reply; the leader's tracker expires a session that was
//! not touched within its timeout, and the embedder commits its close through a transaction.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};

/// A client session's id, as the embedder assigns it.
pub type SessionId = i64;

/// Bytes of one entry of a session-touch table.
pub const TOUCH_ENTRY_BYTES: usize = 12;
const TOUCH_ENTRY: usize = TOUCH_ENTRY_BYTES;

/// At most this many sessions are tracked (or kept as pending touches); further new sessions
/// are ignored until some expire. Bounds memory whatever clients do.
pub const MAX_TRACKED_SESSIONS: usize = 1 << 20;

/// The leader's table of session deadlines (ZooKeeper's `SessionTrackerImpl`, without its
/// tick buckets: each session expires `timeout` after its last touch). Pure: time comes in.
#[derive(Debug, Default, Clone)]
pub struct SessionTracker {
    /// session → (timeout, deadline)
    sessions: BTreeMap<SessionId, (Duration, Instant)>,
}

impl SessionTracker {
    /// An empty tracker.
    pub fn new() -> Self {
        Self::default()
    }

    /// A sign of life of `session` at `now`; its deadline becomes `now + timeout`. Unknown
    /// sessions are added (the embedder knows which sessions exist). A non-positive timeout is
    /// ignored.
    pub fn touch(&mut self, session: SessionId, timeout: Duration, now: Instant) {
        if timeout.is_zero() {
            return;
        }
        if self.sessions.len() >= MAX_TRACKED_SESSIONS && !self.sessions.contains_key(&session) {
            return;
        }
        self.sessions.insert(session, (timeout, now + timeout));
    }

    /// Forgets `session` (it was closed).
    pub fn remove(&mut self, session: SessionId) {
        self.sessions.remove(&session);
    }

    /// Forgets every session (the leader left its epoch).
    pub fn clear(&mut self) {
        self.sessions.clear();
    }

    /// Whether `session` is tracked.
    pub fn contains(&self, session: SessionId) -> bool {
        self.sessions.contains_key(&session)
    }

    /// The number of tracked sessions.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether no session is tracked.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Removes and returns the sessions whose deadline passed at `now`, in id order.
    pub fn expire(&mut self, now: Instant) -> Vec<SessionId> {
        let gone: Vec<SessionId> = self
            .sessions
            .iter()
            .filter(|(_, (_, deadline))| *deadline <= now)
            .map(|(s, _)| *s)
            .collect();
        for s in &gone {
            self.sessions.remove(s);
        }
        gone
    }

    /// The earliest deadline, when [`expire`](Self::expire) must next be called.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.sessions.values().map(|(_, d)| *d).min()
    }
}

/// Encodes a session-touch table for a PING reply: `(i64 session, i32 timeout ms)` each.
pub fn encode_touches(touches: &BTreeMap<SessionId, Duration>) -> Bytes {
    let mut out = BytesMut::with_capacity(touches.len() * TOUCH_ENTRY);
    for (session, timeout) in touches {
        out.put_i64(*session);
        out.put_i32(i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX));
    }
    out.freeze()
}

/// Why a session-touch table could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("session-touch table of {len} bytes is not a whole number of 12-byte entries")]
pub struct TouchTableError {
    /// The table's length.
    pub len: usize,
}

/// Decodes a PING reply's session-touch table. Entries with a non-positive timeout are
/// skipped (a well-behaved learner never sends them).
pub fn decode_touches(data: &[u8]) -> Result<Vec<(SessionId, Duration)>, TouchTableError> {
    if !data.len().is_multiple_of(TOUCH_ENTRY) {
        return Err(TouchTableError { len: data.len() });
    }
    let mut out = Vec::with_capacity(data.len() / TOUCH_ENTRY);
    for entry in data.chunks_exact(TOUCH_ENTRY) {
        let mut s = [0u8; 8];
        s.copy_from_slice(&entry[..8]);
        let mut t = [0u8; 4];
        t.copy_from_slice(&entry[8..]);
        let timeout = i32::from_be_bytes(t);
        if timeout > 0 {
            out.push((
                i64::from_be_bytes(s),
                Duration::from_millis(timeout.unsigned_abs().into()),
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_expires_its_timeout_after_the_last_touch() {
        let t0 = Instant::now();
        let mut tr = SessionTracker::new();
        tr.touch(7, Duration::from_secs(2), t0);
        tr.touch(7, Duration::from_secs(2), t0 + Duration::from_secs(1));
        assert!(tr.expire(t0 + Duration::from_secs(2)).is_empty());
        assert_eq!(tr.next_deadline(), Some(t0 + Duration::from_secs(3)));
        assert_eq!(tr.expire(t0 + Duration::from_secs(3)), vec![7]);
        assert!(tr.is_empty());
    }

    #[test]
    fn touch_tables_round_trip_and_reject_torn_entries() {
        assert_eq!(
            encode_touches(&BTreeMap::from([(1, Duration::from_secs(1))])).len(),
            TOUCH_ENTRY_BYTES
        );
        let mut m = BTreeMap::new();
        m.insert(-5, Duration::from_millis(4000));
        m.insert(9, Duration::from_millis(1));
        let b = encode_touches(&m);
        assert_eq!(
            decode_touches(&b),
            Ok(vec![
                (-5, Duration::from_millis(4000)),
                (9, Duration::from_millis(1))
            ])
        );
        assert_eq!(decode_touches(&b[..13]), Err(TouchTableError { len: 13 }));
    }
}
