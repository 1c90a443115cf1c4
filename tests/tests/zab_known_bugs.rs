//! ZooKeeper's election bugs as cluster-level scenarios on the ensemble simulator: the real
//! zab-core cores must show the fixed behaviour, and — where zab-core keeps the old behaviour
//! behind a test-only switch — the simulator must catch the old one.

use bytes::Bytes;
use ha_tests::runner::run_zab_seeds;
use ha_tests::zab::ensemble::Ensemble;
use ha_tests::zab::node::Durable;
use ha_tests::zab::{ZabConfig, ZabFaultRates};
use zab_core::txnlog::Txn;
use zab_core::{FastLeaderElection, Notification, ServerId, ServerState, Zxid};

/// Five voters with the same five transactions of epoch 1; server 1 then synced with a
/// leader of epoch 2 that wrote nothing, so it alone has `currentEpoch` 2 (ZOOKEEPER-1419).
fn epoch_tie(id: i64) -> Durable {
    let log = (1..=5)
        .map(|c| Txn::new(Zxid::new(1, c), Bytes::from(format!("past/{c}"))))
        .collect();
    Durable {
        current_epoch: if id == 1 { 2 } else { 1 },
        accepted_epoch: 2,
        log,
    }
}

/// Vote order of a ZOOKEEPER-1419 scenario.
#[derive(Clone, Copy)]
enum Order {
    /// ZooKeeper's fixed order.
    Fixed,
    /// The order before the fix (zab-core's `never-in-production` feature).
    PreFix,
}

fn zookeeper_1419_config(order: Order) -> ZabConfig {
    let mut c = ZabConfig::new(5, 0);
    c.faults = ZabFaultRates::none();
    c.chaos_ms = 1_500;
    c.initial = Some(epoch_tie);
    if let Order::PreFix = order {
        c.election = c.election.clone().with_broken_pre_1419_order();
    }
    c.election.fast_decide = false;
    c
}

#[test]
fn zookeeper_1419_fixed_vote_order_elects_the_newest_epoch_on_every_seed() {
    let s = run_zab_seeds(
        "ZOOKEEPER-1419 fixed order",
        |_| zookeeper_1419_config(Order::Fixed),
        0..60,
        false,
    );
    println!("{s}");
    if let Some(f) = &s.first_failure {
        panic!("{f}");
    }
    // And the leader is the one with the newest epoch.
    let mut e = Ensemble::new(1, zookeeper_1419_config(Order::Fixed), 0);
    if let Err(f) = e.run() {
        panic!("{f}");
    }
    assert!(e.server(1).is_some_and(|s| s.is_established_leader()));
}

#[test]
fn zookeeper_1419_pre_fix_vote_order_is_caught_within_20_seeds() {
    let s = run_zab_seeds(
        "ZOOKEEPER-1419 pre-fix order",
        |_| zookeeper_1419_config(Order::PreFix),
        0..20,
        true,
    );
    println!("{s}");
    let Some(f) = &s.first_failure else {
        panic!("the non-transitive order went unnoticed in 20 seeds");
    };
    println!("caught at seed {}: {}", f.seed, f.violation);
    // The seed replays the same violation.
    let (_, again) =
        ha_tests::zab::ensemble::run_seed(f.seed, &zookeeper_1419_config(Order::PreFix));
    assert_eq!(again.map(|g| g.violation), Some(f.violation.clone()));
}

/// Every server with the same history: the largest id wins every election.
fn same_history(_id: i64) -> Durable {
    Durable {
        current_epoch: 1,
        accepted_epoch: 1,
        log: vec![Txn::new(Zxid::new(1, 1), Bytes::from_static(b"past"))],
    }
}

fn scripted(voters: usize) -> ZabConfig {
    let mut c = ZabConfig::new(voters, 0);
    c.faults = ZabFaultRates::none();
    c.chaos_ms = 0;
    c.initial = Some(same_history);
    c
}

/// Steps until `done` holds, at most `bound_ms` of simulated time.
fn step_until(e: &mut Ensemble, bound_ms: u64, done: impl Fn(&Ensemble) -> bool) {
    let end = e.now() + bound_ms;
    while !done(e) {
        assert!(e.now() < end, "not reached within {bound_ms} ms");
        if let Err(f) = e.step() {
            panic!("{f}");
        }
    }
}

fn frame(state: ServerState, leader: i64, zxid: Zxid, round: i64, peer_epoch: i64) -> Bytes {
    let n = Notification {
        state,
        leader: ServerId(leader),
        zxid,
        election_epoch: round,
        peer_epoch,
        version: 2,
        config: None,
    };
    Bytes::from(n.encode())
}

/// The ZOOKEEPER-1514 schedule on 3 voters (server 3 leads): both followers crash, the leader
/// goes LOOKING in a new round, and their FOLLOWING votes for it from the old round arrive from
/// a quorum while they are down. `Err` says when server 3 left LOOKING before they were back;
/// otherwise the ensemble settles once they are.
fn zookeeper_1514_schedule(
    old_rules: Option<fn(&mut FastLeaderElection)>,
) -> Result<ha_tests::zab::ensemble::ZabStats, String> {
    let mut c = scripted(3);
    c.old_election_rules = old_rules;
    let mut e = Ensemble::new(1, c, 200);
    e.start()
        .and_then(|()| e.calm())
        .unwrap_or_else(|f| panic!("{f}"));
    step_until(&mut e, 5_000, |e| e.settled());
    assert!(e.server(3).is_some_and(|s| s.is_established_leader()));
    let epoch = e.server(3).and_then(|s| s.established()).unwrap_or(0);
    let zxid = e.durable(3).map(|d| d.last_zxid()).unwrap_or(Zxid::ZERO);

    // Both followers crash: the leader loses its quorum and looks for a new one.
    let crashed_at = e.now();
    e.crash(1, 3_000);
    e.crash(2, 3_000);
    step_until(&mut e, 2_000, |e| {
        e.server(3)
            .is_some_and(|s| s.core().state() == ServerState::Looking)
    });
    let round = e.server(3).map_or(0, |s| s.core().logical_clock());
    assert!(round >= 2, "server 3 is in a new round");

    // Their FOLLOWING votes for server 3 from the old round arrive late, from a quorum.
    for from in [1, 2] {
        e.inject_vote(
            from,
            3,
            frame(ServerState::Following, 3, zxid, round - 1, epoch),
        );
    }
    // Server 3 must stay LOOKING while it has no quorum.
    while e.now() < crashed_at + 2_900 {
        if let Err(f) = e.step() {
            panic!("{f}");
        }
        let state = e.server(3).map(|s| s.core().state());
        if state != Some(ServerState::Looking) {
            return Err(format!(
                "at {} ms, with its followers down, server 3 is {state:?} in round {}",
                e.now(),
                e.server(3).map_or(0, |s| s.core().logical_clock())
            ));
        }
    }
    // Once the followers are back, the ensemble elects again.
    step_until(&mut e, 5_000, |e| e.settled());
    Ok(e.stats())
}

#[test]
fn zookeeper_1514_stale_following_votes_for_us_from_an_old_round_do_not_make_us_lead() {
    match zookeeper_1514_schedule(None) {
        Ok(stats) => println!("[ZOOKEEPER-1514] {stats:?}"),
        Err(e) => panic!("{e}"),
    }
}

/// The same schedule with `checkLeader` as it was before ZOOKEEPER-1514: server 3 counts the
/// old-round votes and goes LEADING alone.
#[test]
fn zookeeper_1514_pre_fix_check_leader_fails_the_schedule() {
    let e = zookeeper_1514_schedule(Some(
        FastLeaderElection::use_pre_1514_check_leader_for_tests,
    ))
    .expect_err("the pre-fix checkLeader passed the ZOOKEEPER-1514 schedule");
    println!("[ZOOKEEPER-1514 pre-fix] caught: {e}");
    assert!(e.contains("Some(Leading)"), "{e}");
}

/// The ZOOKEEPER-975 schedule (ZooKeeper's `FLETest.testJoin`) on 3 voters: server 3 (the
/// largest id) leads, crashes, 1 and 2 elect one of them, and 3 restarts into the running ensemble. The
/// LOOKING votes of that election that 1 and 2 had queued for 3 while it was down reach it
/// first, before their FOLLOWING/LEADING answers. `Err` says when a server other than the
/// running leader went LEADING, or the leader lost its epoch, before the ensemble settled.
fn zookeeper_975_join_schedule(
    seed: u64,
    old_rules: Option<fn(&mut FastLeaderElection)>,
) -> Result<(), String> {
    let mut c = scripted(3);
    c.old_election_rules = old_rules;
    let mut e = Ensemble::new(seed, c, 200);
    e.start()
        .and_then(|()| e.calm())
        .unwrap_or_else(|f| panic!("{f}"));
    step_until(&mut e, 5_000, |e| e.settled());
    assert!(e.server(3).is_some_and(|s| s.is_established_leader()));
    e.crash(3, 1_000);
    // 1 and 2 elect one of them; keep the LOOKING vote they decided on (what each last sent
    // to 3).
    let leading = |e: &Ensemble| {
        [1, 2].into_iter().find(|i| {
            e.server(*i)
                .is_some_and(|s| s.core().state() == ServerState::Leading)
        })
    };
    step_until(&mut e, 5_000, |e| leading(e).is_some());
    let l = leading(&e).unwrap_or(2);
    let v = e.server(l).map(|s| s.core().current_vote()).expect("runs");
    step_until(&mut e, 5_000, |e| {
        e.server(l).is_some_and(|s| s.is_established_leader())
    });
    let epoch = e.server(l).and_then(|s| s.established());
    step_until(&mut e, 5_000, |e| e.server(3).is_some());
    for from in [1, 2] {
        e.inject_vote(
            from,
            3,
            frame(
                ServerState::Looking,
                l,
                v.zxid,
                v.election_epoch,
                v.peer_epoch,
            ),
        );
    }
    let end = e.now() + 5_000;
    while !e.settled() {
        assert!(
            e.now() < end,
            "seed {seed}: the ensemble did not settle again"
        );
        if let Err(f) = e.step() {
            panic!("{f}");
        }
        for i in [1, 2, 3].into_iter().filter(|i| *i != l) {
            let s = e.server(i).map(|s| s.core().state());
            if s == Some(ServerState::Leading) {
                return Err(format!(
                    "seed {seed}: at {} ms server {i} is LEADING while {l} leads",
                    e.now()
                ));
            }
        }
        let ls = e.server(l);
        if !ls.is_some_and(|s| s.is_established_leader() && s.established() == epoch) {
            return Err(format!(
                "seed {seed}: at {} ms server {l} lost epoch {epoch:?}",
                e.now()
            ));
        }
    }
    Ok(())
}

#[test]
fn zookeeper_975_restarted_largest_id_with_stale_queued_votes_follows_the_running_leader() {
    for seed in 0..20 {
        if let Err(e) = zookeeper_975_join_schedule(seed, None) {
            panic!("{e}");
        }
    }
}

/// The same schedule with the termination rule before ZOOKEEPER-975 (a vote from every voter
/// ends the election with our own proposal): the restarted server goes LEADING.
#[test]
fn zookeeper_975_pre_fix_termination_fails_the_join_schedule() {
    let old: fn(&mut FastLeaderElection) = FastLeaderElection::use_pre_975_termination_for_tests;
    let caught: Vec<String> = (0..20)
        .filter_map(|seed| zookeeper_975_join_schedule(seed, Some(old)).err())
        .collect();
    println!(
        "[ZOOKEEPER-975 pre-fix] caught on {} of 20 seeds",
        caught.len()
    );
    assert_eq!(caught.len(), 20, "not caught on every seed: {caught:?}");
    assert!(caught[0].contains("server 3 is LEADING"), "{}", caught[0]);
}

#[test]
fn zookeeper_975_a_restarted_server_joins_the_established_leader_and_never_leads() {
    let mut restarts = 0;
    for seed in 0..30 {
        // The lossy, duplicating, reordering network stays on; no other faults.
        let mut c = scripted(5);
        c.chaos_ms = u64::MAX;
        let mut e = Ensemble::new(seed, c, 200);
        e.start().unwrap_or_else(|f| panic!("{f}"));
        step_until(&mut e, 10_000, |e| e.settled());
        let leader = (1..=5)
            .find(|i| e.server(*i).is_some_and(|s| s.is_established_leader()))
            .unwrap_or(0);
        let epoch = e.server(leader).and_then(|s| s.established());
        for k in 0..3 {
            let f = [1, 2, 3, 4, 5]
                .into_iter()
                .filter(|i| *i != leader)
                .nth(((seed + k) % 4) as usize)
                .unwrap_or(1);
            e.crash(f, 300);
            restarts += 1;
            let end = e.now() + 5_000;
            loop {
                if let Err(fl) = e.step() {
                    panic!("{fl}");
                }
                assert!(e.now() < end, "seed {seed}: {f} did not rejoin");
                for i in (1..=5).filter(|i| *i != leader) {
                    let s = e.server(i).map(|s| s.core().state());
                    assert_ne!(s, Some(ServerState::Leading), "seed {seed}: {i} leads");
                }
                let l = e.server(leader);
                assert!(l.is_some_and(|s| s.is_established_leader() && s.established() == epoch));
                if e.settled() {
                    break;
                }
            }
        }
    }
    println!("ZOOKEEPER-975: {restarts} restarts into an established ensemble, none led");
}

#[test]
fn config_length_0_notification_does_not_silence_the_receiver() {
    let mut e = Ensemble::new(3, scripted(3), 200);
    // A well-framed version-2 vote with configLength 0 (it killed ZooKeeper 3.8.0's receiver
    // thread), a frame too short to decode, and one whose config length overruns the frame,
    // to every server from every other, before the election and during it.
    let mut bad = frame(ServerState::Looking, 1, Zxid::ZERO, 1, 0).to_vec();
    bad.truncate(36);
    let mut zero = bad.clone();
    zero.extend_from_slice(&2i32.to_be_bytes());
    zero.extend_from_slice(&0i32.to_be_bytes());
    let mut overrun = bad.clone();
    overrun.extend_from_slice(&2i32.to_be_bytes());
    overrun.extend_from_slice(&1000i32.to_be_bytes());
    let short = Bytes::from(bad[..20].to_vec());
    let inject = |e: &mut Ensemble| {
        for from in 1..=3 {
            for to in (1..=3).filter(|t| *t != from) {
                e.inject_vote(from, to, Bytes::from(zero.clone()));
                e.inject_vote(from, to, short.clone());
                e.inject_vote(from, to, Bytes::from(overrun.clone()));
            }
        }
    };
    inject(&mut e);
    e.start()
        .and_then(|()| e.calm())
        .unwrap_or_else(|f| panic!("{f}"));
    for _ in 0..5 {
        inject(&mut e);
        if let Err(f) = e.run_until(e.now() + 50) {
            panic!("{f}");
        }
    }
    step_until(&mut e, 5_000, |e| e.settled());
    // The short and overrunning frames were dropped, the zero-length config was read as no
    // config, and every server went on to elect.
    println!("[config length 0] {:?}", e.stats());
    assert!(e.stats().undecodable >= 2 * 6 * 6);
    assert!(e.server(3).is_some_and(|s| s.is_established_leader()));
}
