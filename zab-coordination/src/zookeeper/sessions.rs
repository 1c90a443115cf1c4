//! Session bookkeeping of one server that does not need the replicated state: new session ids
//! (ZooKeeper's `SessionTrackerImpl.initializeNextSessionId`), passwords, and the negotiation
//! of a client's session timeout (`ZooKeeperServer.processConnectRequest`).
//!
//! Whether a session is open, and its password, are replicated (`machine::ZkDatabase`), so a
//! client can move to any server of the ensemble with its session id and password. Liveness is
//! tracked by the ZAB leader (`zab_core::peer::PeerHandle::touch_session`): learners report
//! the touches of their clients in their PING replies, and an expired session is closed by a
//! committed `closeSession` transaction.

use std::time::Duration;

use rand::RngCore;

/// Length of a session password (ZooKeeper's 16 bytes).
pub const PASSWORD_LEN: usize = 16;

/// Allocates session ids unique across the ensemble: the top byte is the server's id, bits
/// 16–55 the low 40 bits of the milliseconds when the server started, the low 16 bits a
/// counter that carries into the time bits (ZooKeeper's `(time << 24) >>> 8 | sid << 56`,
/// then + 1 per session). ZooKeeper uses its monotonic clock; the wall clock is used here, so that a
/// restarted server does not reuse the ids of its previous life.
#[derive(Debug, Clone)]
pub struct SessionIds {
    next: i64,
}

impl SessionIds {
    /// The generator of server `sid` started at `now_ms` (ms since the Unix epoch).
    pub fn new(sid: i64, now_ms: i64) -> SessionIds {
        let time_part = ((now_ms as u64) << 24) >> 8;
        let mut next = (time_part as i64) | (sid << 56);
        // ZooKeeper's container nodes use ephemeralOwner 0x8000000000000000: never a session.
        if next == i64::MIN {
            next += 1;
        }
        SessionIds { next }
    }

    /// The next session id.
    pub fn next_id(&mut self) -> i64 {
        let id = self.next;
        self.next = self.next.wrapping_add(1);
        if self.next == i64::MIN || self.next == 0 {
            self.next = self.next.wrapping_add(1);
        }
        id
    }
}

/// 16 random bytes: the password a client must present to reattach to its session.
pub fn new_password() -> Vec<u8> {
    let mut p = vec![0u8; PASSWORD_LEN];
    rand::rng().fill_bytes(&mut p);
    p
}

/// The session timeout limits of a server (`minSessionTimeout`, `maxSessionTimeout`; 2 and 20
/// ticks by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeoutLimits {
    /// Shortest timeout granted.
    pub min: Duration,
    /// Longest timeout granted.
    pub max: Duration,
}

impl TimeoutLimits {
    /// The timeout granted to a client asking for `requested_ms`: clamped into `[min, max]`, as
    /// `ZooKeeperServer.processConnectRequest` does.
    pub fn negotiate(&self, requested_ms: i32) -> i32 {
        let min = self.min.as_millis().min(i32::MAX as u128) as i32;
        let max = self.max.as_millis().min(i32::MAX as u128) as i32;
        requested_ms.max(min).min(max.max(min))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_carry_the_server_id_in_the_top_byte_and_increase() {
        let mut ids = SessionIds::new(3, 1_764_000_000_000);
        let a = ids.next_id();
        let b = ids.next_id();
        assert_eq!(a >> 56, 3);
        assert_eq!(b, a + 1);
        let mut other = SessionIds::new(2, 1_764_000_000_000);
        assert_ne!(other.next_id() >> 56, a >> 56);
    }

    #[test]
    fn session_timeout_is_clamped_into_two_to_twenty_ticks() {
        let tick = Duration::from_millis(2000);
        let limits = TimeoutLimits {
            min: tick * 2,
            max: tick * 20,
        };
        assert_eq!(limits.negotiate(100), 4000);
        assert_eq!(limits.negotiate(30_000), 30_000);
        assert_eq!(limits.negotiate(1_000_000), 40_000);
        assert_eq!(limits.negotiate(-5), 4000);
    }

    #[test]
    fn passwords_are_sixteen_random_bytes() {
        let a = new_password();
        let b = new_password();
        assert_eq!(a.len(), PASSWORD_LEN);
        assert_ne!(a, b);
    }
}
