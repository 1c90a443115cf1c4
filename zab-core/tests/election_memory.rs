//! Issue target: "a peer's election state for 7 voters stays under 1 MiB". Seven election cores
//! run full elections against each other, again and again, under a counting global allocator;
//! the heap they hold (plus the cores themselves) is measured after every election.

use std::alloc::System;
use std::sync::Arc;
use std::time::{Duration, Instant};

use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use zab_core::{
    Action, ElectionConfig, FastLeaderElection, LearnerType, QuorumMaj, ServerId, ServerState,
    VoteData, Zxid,
};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const VOTERS: i64 = 7;
const ONE_MIB: usize = 1 << 20;

/// Runs one election among `cores` to completion (every core decided) with instant delivery.
fn elect(cores: &mut [FastLeaderElection], now: &mut Instant) -> usize {
    let mut decided = vec![false; cores.len()];
    let mut inflight: Vec<(usize, ServerId, zab_core::Notification)> = Vec::new();
    for step in 0..100_000 {
        for (i, core) in cores.iter_mut().enumerate() {
            while let Some(action) = core.poll_action() {
                match action {
                    Action::Send { to, notification } => {
                        inflight.push(((to.0 - 1) as usize, ServerId(i as i64 + 1), notification))
                    }
                    Action::Decided(_) => decided[i] = true,
                    _ => {}
                }
            }
        }
        if decided.iter().all(|d| *d) {
            return step;
        }
        if inflight.is_empty() {
            *now += Duration::from_millis(200);
            for core in cores.iter_mut() {
                core.handle_tick(*now);
            }
        }
        for (to, from, n) in inflight.drain(..) {
            cores[to].handle_notification(*now, from, n);
        }
    }
    panic!("election did not finish");
}

#[test]
fn election_state_of_a_peer_among_7_voters_stays_under_1_mib() {
    let mut now = Instant::now();
    let region = Region::new(GLOBAL);
    let mut cores: Vec<FastLeaderElection> = (1..=VOTERS)
        .map(|id| {
            let qv = Arc::new(QuorumMaj::with_ids(1..=VOTERS, []));
            FastLeaderElection::new(
                ElectionConfig::default(),
                ServerId(id),
                LearnerType::Participant,
                qv,
                VoteData::new(Zxid::new(1, id as u32), 1),
            )
        })
        .collect();
    for core in &mut cores {
        for peer in 1..=VOTERS {
            if peer != core.my_id().0 {
                core.connection_up(now, ServerId(peer));
            }
        }
    }
    let mut worst = 0usize;
    for round in 0..200 {
        for core in &mut cores {
            core.start(now);
        }
        elect(&mut cores, &mut now);
        let leaders = cores
            .iter()
            .filter(|c| c.state() == ServerState::Leading)
            .count();
        assert_eq!(leaders, 1, "round {round}: one leader");
        let stats = region.change();
        let live_heap = stats
            .bytes_allocated
            .saturating_sub(stats.bytes_deallocated);
        let per_peer = live_heap / VOTERS as usize + std::mem::size_of::<FastLeaderElection>();
        worst = worst.max(per_peer);
    }
    println!(
        "election state per peer (7 voters, 200 elections): at most {worst} bytes ({:.1} KiB)",
        worst as f64 / 1024.0
    );
    assert!(worst < ONE_MIB, "{worst} bytes per peer");
}
