//! Table-driven tests of the four leader-election strategies (Kafka's `PartitionLeaderElectionAlgorithms`, K1.2, K7 step 7).

use std::collections::BTreeSet;

use kafka_controller::context::{BrokerId, PartitionLeadership};
use kafka_controller::election::{elect, ElectionInput, ElectionResult, ElectionStrategy};

const CLEAN: ElectionStrategy = ElectionStrategy::Offline {
    allow_unclean: false,
};
const ADMIN_UNCLEAN: ElectionStrategy = ElectionStrategy::Offline {
    allow_unclean: true,
};

struct Case {
    name: &'static str,
    strategy: ElectionStrategy,
    ar: &'static [BrokerId],
    target: &'static [BrokerId],
    isr: &'static [BrokerId],
    live: &'static [BrokerId],
    shutting_down: &'static [BrokerId],
    unclean_topic: bool,
    /// (leader, new ISR, recipients, unclean) or None for "no leader".
    want: Option<(BrokerId, &'static [BrokerId], &'static [BrokerId], bool)>,
}

const CASES: &[Case] = &[
    // ---- offline (K1.2) ----
    Case {
        name: "k1_2_first_live_isr_replica_in_ar_order_leads",
        strategy: CLEAN,
        ar: &[1, 2, 3],
        target: &[1, 2, 3],
        isr: &[1, 2, 3],
        live: &[2, 3],
        shutting_down: &[],
        unclean_topic: false,
        want: Some((2, &[2, 3], &[2, 3], false)),
    },
    Case {
        name: "k1_2_ar_order_not_isr_order",
        strategy: CLEAN,
        ar: &[3, 1, 2],
        target: &[3, 1, 2],
        isr: &[2, 1],
        live: &[1, 2, 3],
        shutting_down: &[],
        unclean_topic: false,
        want: Some((1, &[2, 1], &[3, 1, 2], false)),
    },
    Case {
        name: "k1_2_new_isr_is_live_part_of_old_isr",
        strategy: CLEAN,
        ar: &[1, 2, 3, 4],
        target: &[1, 2, 3, 4],
        isr: &[1, 2, 4],
        live: &[2, 3],
        shutting_down: &[],
        unclean_topic: false,
        want: Some((2, &[2], &[2, 3], false)),
    },
    Case {
        name: "k1_2_no_live_isr_replica_and_unclean_disabled_elects_nobody",
        strategy: CLEAN,
        ar: &[1, 2, 3],
        target: &[1, 2, 3],
        isr: &[1],
        live: &[2, 3],
        shutting_down: &[],
        unclean_topic: false,
        want: None,
    },
    Case {
        name: "k1_2_unclean_topic_config_elects_first_live_replica_alone",
        strategy: CLEAN,
        ar: &[1, 2, 3],
        target: &[1, 2, 3],
        isr: &[1],
        live: &[3, 2],
        shutting_down: &[],
        unclean_topic: true,
        want: Some((2, &[2], &[2, 3], true)),
    },
    Case {
        name: "k1_2_admin_forced_unclean_ignores_topic_config",
        strategy: ADMIN_UNCLEAN,
        ar: &[1, 2, 3],
        target: &[1, 2, 3],
        isr: &[1],
        live: &[3],
        shutting_down: &[],
        unclean_topic: false,
        want: Some((3, &[3], &[3], true)),
    },
    Case {
        name: "k1_2_clean_choice_preferred_over_unclean",
        strategy: ADMIN_UNCLEAN,
        ar: &[1, 2, 3],
        target: &[1, 2, 3],
        isr: &[1, 3],
        live: &[2, 3],
        shutting_down: &[],
        unclean_topic: true,
        want: Some((3, &[3], &[2, 3], false)),
    },
    Case {
        name: "k1_2_no_live_replica_elects_nobody_even_unclean",
        strategy: ADMIN_UNCLEAN,
        ar: &[1, 2, 3],
        target: &[1, 2, 3],
        isr: &[1, 2, 3],
        live: &[4],
        shutting_down: &[],
        unclean_topic: true,
        want: None,
    },
    // ---- reassign (K7 step 7) ----
    Case {
        name: "k7_step_7_reassign_picks_first_target_in_isr",
        strategy: ElectionStrategy::Reassign,
        ar: &[4, 5, 6],
        target: &[4, 5, 6],
        isr: &[1, 2, 3, 4, 5, 6],
        live: &[1, 2, 3, 4, 5, 6],
        shutting_down: &[],
        unclean_topic: false,
        want: Some((4, &[1, 2, 3, 4, 5, 6], &[4, 5, 6], false)),
    },
    Case {
        name: "k7_step_7_reassign_skips_dead_target",
        strategy: ElectionStrategy::Reassign,
        ar: &[4, 5, 6],
        target: &[4, 5, 6],
        isr: &[1, 4, 5, 6],
        live: &[1, 5, 6],
        shutting_down: &[],
        unclean_topic: false,
        want: Some((5, &[1, 4, 5, 6], &[4, 5, 6], false)),
    },
    Case {
        name: "k7_step_7_reassign_needs_target_in_isr",
        strategy: ElectionStrategy::Reassign,
        ar: &[4, 5, 6],
        target: &[4, 5, 6],
        isr: &[1, 2, 3],
        live: &[1, 2, 3, 4, 5, 6],
        shutting_down: &[],
        unclean_topic: true,
        want: None,
    },
    // ---- preferred ----
    Case {
        name: "preferred_head_of_ar_leads_when_live_and_in_isr",
        strategy: ElectionStrategy::Preferred,
        ar: &[1, 2, 3],
        target: &[1, 2, 3],
        isr: &[2, 3, 1],
        live: &[1, 2, 3],
        shutting_down: &[],
        unclean_topic: false,
        want: Some((1, &[2, 3, 1], &[1, 2, 3], false)),
    },
    Case {
        name: "preferred_head_not_in_isr_elects_nobody",
        strategy: ElectionStrategy::Preferred,
        ar: &[1, 2, 3],
        target: &[1, 2, 3],
        isr: &[2, 3],
        live: &[1, 2, 3],
        shutting_down: &[],
        unclean_topic: true,
        want: None,
    },
    Case {
        name: "preferred_head_dead_elects_nobody",
        strategy: ElectionStrategy::Preferred,
        ar: &[1, 2, 3],
        target: &[1, 2, 3],
        isr: &[1, 2, 3],
        live: &[2, 3],
        shutting_down: &[],
        unclean_topic: false,
        want: None,
    },
    // ---- controlled shutdown ----
    Case {
        name: "controlled_shutdown_moves_leader_and_drops_leaving_broker_from_isr",
        strategy: ElectionStrategy::ControlledShutdown,
        ar: &[1, 2, 3],
        target: &[1, 2, 3],
        isr: &[1, 2, 3],
        live: &[2, 3],
        shutting_down: &[1],
        unclean_topic: false,
        want: Some((2, &[2, 3], &[1, 2, 3], false)),
    },
    Case {
        name: "controlled_shutdown_skips_replicas_outside_isr",
        strategy: ElectionStrategy::ControlledShutdown,
        ar: &[1, 2, 3],
        target: &[1, 2, 3],
        isr: &[1, 3],
        live: &[2, 3],
        shutting_down: &[1],
        unclean_topic: false,
        want: Some((3, &[3], &[1, 2, 3], false)),
    },
    Case {
        name: "controlled_shutdown_last_isr_member_keeps_leadership",
        strategy: ElectionStrategy::ControlledShutdown,
        ar: &[1, 2, 3],
        target: &[1, 2, 3],
        isr: &[1],
        live: &[2, 3],
        shutting_down: &[1],
        unclean_topic: true,
        want: None,
    },
    Case {
        name: "controlled_shutdown_recipients_exclude_dead_replicas",
        strategy: ElectionStrategy::ControlledShutdown,
        ar: &[1, 2, 3],
        target: &[1, 2, 3],
        isr: &[1, 2],
        live: &[2],
        shutting_down: &[1],
        unclean_topic: false,
        want: Some((2, &[2], &[1, 2], false)),
    },
];

#[test]
fn election_strategies_table() {
    for c in CASES {
        let live: BTreeSet<BrokerId> = c.live.iter().copied().collect();
        let sd: BTreeSet<BrokerId> = c.shutting_down.iter().copied().collect();
        let input = ElectionInput {
            assignment: c.ar,
            target_replicas: c.target,
            isr: c.isr,
            live: &live,
            shutting_down: &sd,
            unclean_enabled: c.unclean_topic,
        };
        let got = elect(c.strategy, &input);
        let want = c
            .want
            .map(|(leader, isr, recipients, unclean)| ElectionResult {
                leader,
                isr: isr.to_vec(),
                recipients: recipients.to_vec(),
                unclean,
            });
        assert_eq!(got, want, "case {}", c.name);
        if let Some(r) = &got {
            assert!(
                !r.isr.is_empty(),
                "case {}: ISR must never be empty",
                c.name
            );
            assert!(r.isr.contains(&r.leader), "case {}: leader in ISR", c.name);
        }
    }
}

#[test]
fn every_new_leader_bumps_the_leader_epoch() {
    let current = PartitionLeadership::new(1, 7, vec![1, 2, 3], 4, 11);
    let moved = current.new_leader_and_isr(2, vec![2, 3], 9);
    assert_eq!(moved.leader_epoch, 8);
    assert_eq!(moved.controller_epoch, 9);
    assert_eq!(
        moved.partition_epoch, 11,
        "the expected version is the one read"
    );
    let same = current.new_epoch(9);
    assert_eq!(
        (same.leader, same.leader_epoch, same.isr),
        (1, 8, vec![1, 2, 3])
    );
}
