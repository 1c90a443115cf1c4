//! Property tests of the pure parts: elections never break the ISR invariants
//! (K1.2), assignments are valid and balanced (K2.2), reassignment arithmetic is resumable (K7).

use std::collections::{BTreeMap, BTreeSet};

use kafka_controller::assignment::{assign_replicas_to_brokers, AssignmentStart, BrokerRack};
use kafka_controller::context::{BrokerId, ReplicaAssignment};
use kafka_controller::election::{elect, ElectionInput, ElectionStrategy};
use proptest::prelude::*;

fn strategy() -> impl Strategy<Value = ElectionStrategy> {
    prop_oneof![
        any::<bool>().prop_map(|allow_unclean| ElectionStrategy::Offline { allow_unclean }),
        Just(ElectionStrategy::Reassign),
        Just(ElectionStrategy::Preferred),
        Just(ElectionStrategy::ControlledShutdown),
    ]
}

/// An assignment and membership flags: in ISR (per replica), live and shutting down (per
/// broker 0..8), in target (per replica).
type Scenario = (Vec<BrokerId>, Vec<bool>, Vec<bool>, Vec<bool>, Vec<bool>);

/// A shuffled assignment of distinct brokers in 0..8 and subsets of it.
fn scenario() -> impl Strategy<Value = Scenario> {
    Just((0..8).collect::<Vec<BrokerId>>())
        .prop_shuffle()
        .prop_flat_map(|all| {
            (1usize..=6).prop_flat_map(move |n| {
                let ar = all[..n].to_vec();
                (
                    Just(ar),
                    prop::collection::vec(any::<bool>(), n),
                    prop::collection::vec(any::<bool>(), 8),
                    prop::collection::vec(any::<bool>(), 8),
                    prop::collection::vec(any::<bool>(), n),
                )
            })
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn elections_keep_isr_invariants(
        (ar, in_isr, is_live, is_sd, in_target) in scenario(),
        strat in strategy(),
        unclean_topic in any::<bool>(),
    ) {
        let mut isr: Vec<BrokerId> = ar.iter().zip(&in_isr).filter(|(_, i)| **i).map(|(b, _)| *b).collect();
        if isr.is_empty() {
            isr.push(ar[0]);
        }
        let mut target: Vec<BrokerId> = ar.iter().zip(&in_target).filter(|(_, t)| **t).map(|(b, _)| *b).collect();
        if target.is_empty() {
            target.push(ar[ar.len() - 1]);
        }
        let sd: BTreeSet<BrokerId> = (0..8).filter(|b| is_sd[*b as usize] && is_live[*b as usize]).collect();
        let live: BTreeSet<BrokerId> = (0..8).filter(|b| is_live[*b as usize] && !sd.contains(b)).collect();
        let input = ElectionInput {
            assignment: &ar,
            target_replicas: &target,
            isr: &isr,
            live: &live,
            shutting_down: &sd,
            unclean_enabled: unclean_topic,
        };
        if let Some(r) = elect(strat, &input) {
            prop_assert!(!r.isr.is_empty());
            prop_assert!(r.isr.contains(&r.leader));
            prop_assert!(live.contains(&r.leader), "leader must be live and not shutting down");
            prop_assert!(ar.contains(&r.leader) || target.contains(&r.leader));
            if r.unclean {
                let allowed = matches!(strat, ElectionStrategy::Offline { allow_unclean: true }) || unclean_topic;
                prop_assert!(allowed);
                prop_assert_eq!(r.isr.clone(), vec![r.leader]);
            } else {
                prop_assert!(isr.contains(&r.leader), "clean leader comes from the ISR");
                prop_assert!(r.isr.iter().all(|b| isr.contains(b)), "ISR never grows");
            }
            if strat == ElectionStrategy::Preferred {
                prop_assert_eq!(r.leader, ar[0]);
            }
        }
    }

    #[test]
    fn rack_unaware_assignment_is_valid_and_leaders_balanced(
        n in 1usize..10,
        rf_seed in 0usize..10,
        partitions in 1i32..60,
        start_index in 0usize..10,
        replica_shift in 0usize..10,
    ) {
        let rf = 1 + rf_seed % n;
        let brokers: Vec<BrokerRack> = (0..n as BrokerId).map(|id| BrokerRack::new(id * 10, None)).collect();
        let got = assign_replicas_to_brokers(&brokers, partitions, rf as i32, AssignmentStart { start_index, replica_shift }, 0).unwrap();
        prop_assert_eq!(got.len(), partitions as usize);
        let mut leaders: BTreeMap<BrokerId, usize> = BTreeMap::new();
        for replicas in got.values() {
            prop_assert_eq!(replicas.len(), rf);
            let distinct: BTreeSet<BrokerId> = replicas.iter().copied().collect();
            prop_assert_eq!(distinct.len(), rf);
            *leaders.entry(replicas[0]).or_default() += 1;
        }
        let max = leaders.values().max().copied().unwrap_or(0);
        let min = if leaders.len() < n { 0 } else { leaders.values().min().copied().unwrap_or(0) };
        prop_assert!(max - min <= 1, "leaders spread round-robin");
    }

    #[test]
    fn rack_aware_assignment_puts_replicas_on_distinct_racks(
        racks_of in prop::collection::vec(0u8..4, 1..10),
        rf_seed in 0usize..10,
        partitions in 1i32..40,
        start_index in 0usize..10,
        replica_shift in 0usize..10,
    ) {
        let n = racks_of.len();
        let rf = 1 + rf_seed % n;
        let names = ["a", "b", "c", "d"];
        let brokers: Vec<BrokerRack> = racks_of.iter().enumerate()
            .map(|(i, r)| BrokerRack::new(i as BrokerId, Some(names[*r as usize]))).collect();
        let num_racks = racks_of.iter().collect::<BTreeSet<_>>().len();
        let got = assign_replicas_to_brokers(&brokers, partitions, rf as i32, AssignmentStart { start_index, replica_shift }, 0).unwrap();
        for replicas in got.values() {
            let distinct: BTreeSet<BrokerId> = replicas.iter().copied().collect();
            prop_assert_eq!(distinct.len(), rf);
            let racks: BTreeSet<u8> = replicas.iter().map(|b| racks_of[*b as usize]).collect();
            prop_assert_eq!(racks.len(), rf.min(num_racks));
        }
    }

    #[test]
    fn reassignment_is_recomputable_from_the_store(
        (origin, target) in (Just((0..8).collect::<Vec<BrokerId>>()).prop_shuffle(), Just((0..8).collect::<Vec<BrokerId>>()).prop_shuffle(), 1usize..5, 1usize..5)
            .prop_map(|(a, b, n, m)| (a[..n].to_vec(), b[..m].to_vec())),
    ) {
        let current = ReplicaAssignment::new(origin.clone());
        let full = current.reassign_to(&target);
        // ORS comes back as a set: RS = TRS ++ (ORS − TRS) keeps TRS's order for shared replicas.
        let set = |v: &[BrokerId]| v.iter().copied().collect::<BTreeSet<BrokerId>>();
        prop_assert_eq!(set(&full.origin_replicas()), set(&origin));
        prop_assert_eq!(full.target_replicas(), target.clone());
        prop_assert_eq!(&full.replicas[..target.len()], &target[..]);
        prop_assert_eq!(full.reassign_to(&target), full.clone(), "resuming recomputes the same");
        let done = ReplicaAssignment::new(full.target_replicas());
        prop_assert_eq!(done.reassign_to(&target), ReplicaAssignment::new(target.clone()));
    }
}
