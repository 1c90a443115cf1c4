//! Seeded runs of the group coordinator simulation: three brokers, each with a
//! `kafka-group-coordinator` core and a replica of every `__consumer_offsets` partition, under
//! broker crashes and restarts, leadership moves, zombie leaders and zombie coordinators, and a
//! lossy, duplicating, reordering network between consumers and brokers; every invariant checked
//! after every step and delivered message. `SIM_SEEDS=N` runs N seeds, `SIM_SEED=S` one seed.
//! The planted-bug tests turn on the core's `never-in-production` switches and show the checks
//! catch them.

use ha_tests::groups::sim::{run_seed, run_seeds, Invariant};
use ha_tests::groups::GroupSimConfig;
use ha_tests::runner::{expect_no_violation, seed_range_from_env};
use kafka_group_coordinator::{GroupCoordinator, PlantedBugs};

#[test]
fn committed_offsets_survive_coordinator_moves_crashes_and_zombies() {
    let s = expect_no_violation("groups", || {
        run_seeds(
            "groups",
            GroupSimConfig::default(),
            seed_range_from_env(200),
            false,
        )
    });
    let t = s.total;
    assert!(t.commits_acked > 0 && t.fetches_checked > 0 && t.syncs > 0);
    if s.seeds >= 50 {
        assert!(t.crashes > 0 && t.leader_moves > 0 && t.leaves > 0);
        assert!(t.zombie_leaders > 0 && t.zombie_coordinators > 0 && t.fenced_appends > 0);
    }
}

#[test]
fn one_seed_is_one_run() {
    let cfg = GroupSimConfig::default();
    for seed in [1, 42, 4_096] {
        assert_eq!(run_seed(seed, cfg).0, run_seed(seed, cfg).0);
    }
    assert_ne!(run_seed(1, cfg).0, run_seed(2, cfg).0);
}

fn answer_before_commit(c: &mut GroupCoordinator) {
    c.set_planted_bugs(PlantedBugs::none().with_answer_commit_before_append(true));
}

fn accept_fenced(c: &mut GroupCoordinator) {
    c.set_planted_bugs(PlantedBugs::none().with_accept_fenced_appends(true));
}

fn caught(hook: fn(&mut GroupCoordinator), name: &str) {
    let cfg = GroupSimConfig {
        coordinator_hook: Some(hook),
        ..GroupSimConfig::default()
    };
    let s = run_seeds(name, cfg, 0..200, true);
    println!("{s}");
    let f = s
        .first_failure
        .unwrap_or_else(|| panic!("{name}: no seed of {} caught the planted bug", s.seeds));
    println!("{f}");
    assert_eq!(f.violation.invariant, Invariant::CommittedOffsetLost, "{f}");
}

#[test]
fn planted_bug_answering_offset_commit_before_the_append_commits_is_caught() {
    caught(answer_before_commit, "answer before commit");
}

#[test]
fn planted_bug_taking_a_fenced_append_as_committed_is_caught() {
    caught(accept_fenced, "accept fenced appends");
}

/// The long run whose figures `docs/testing.md` reports:
/// `cargo test --release -p ha-tests --test group_coordinator_simulation -- --ignored`.
#[test]
#[ignore]
fn ten_thousand_seeds_hold_every_invariant() {
    expect_no_violation("groups 10k", || {
        run_seeds(
            "groups 10k",
            GroupSimConfig::default(),
            seed_range_from_env(10_000),
            false,
        )
    });
}
