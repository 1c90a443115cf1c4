//! Helpers shared by the peer tests: configurations and waiting for a settled ensemble.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use zab_core::discovery::Timing;
use zab_core::peer::{PeerConfig, PeerHandle, PeerStatus};
use zab_core::{ElectionConfig, LearnerType, QuorumMaj, ServerId, ServerState};

/// Fast timing for tests: tick 100 ms, initLimit 10, syncLimit 5.
pub fn timing() -> Timing {
    Timing::new(Duration::from_millis(100), 10, 5)
}

/// A peer configuration for `sid` in an ensemble of `voters` and `observers`.
pub fn config(sid: i64, voters: &[i64], observers: &[i64]) -> PeerConfig {
    let learner_type = if observers.contains(&sid) {
        LearnerType::Observer
    } else {
        LearnerType::Participant
    };
    PeerConfig::new(
        ServerId(sid),
        learner_type,
        Arc::new(QuorumMaj::with_ids(
            voters.iter().copied(),
            observers.iter().copied(),
        )),
    )
    .with_election(ElectionConfig::default())
    .with_timing(timing())
    .with_connect_grace(Duration::from_millis(100))
}

/// Waits until exactly one of `peers` is an established leader and every other one follows
/// (or observes) it in the same established epoch. Returns (leader, epoch).
pub async fn settled(peers: &[&PeerHandle], timeout: Duration) -> (ServerId, i64) {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let st: Vec<PeerStatus> = peers.iter().map(|p| p.current()).collect();
        let leaders: Vec<&PeerStatus> = st
            .iter()
            .filter(|s| s.state == ServerState::Leading)
            .collect();
        if let [l] = leaders.as_slice() {
            if let (Some(leader), Some(epoch)) = (l.leader, l.epoch) {
                let all = st
                    .iter()
                    .all(|s| s.leader == Some(leader) && s.epoch == Some(epoch));
                if all {
                    return (leader, epoch);
                }
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "ensemble did not settle: {st:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until the task of the killed `peer` has ended (its transport and store dropped with
/// it), for at most `timeout`.
pub async fn gone(peer: &PeerHandle, timeout: Duration) {
    let deadline = tokio::time::Instant::now() + timeout;
    while !peer.is_finished() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "a killed peer still runs {timeout:?} later"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Asserts `check` holds at every poll (every 20 ms) for the whole of `period`: for the tests
/// whose subject is that something does *not* happen for a while.
pub async fn holds_for(period: Duration, mut check: impl FnMut()) {
    let end = tokio::time::Instant::now() + period;
    loop {
        check();
        if tokio::time::Instant::now() >= end {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
