//! K2.2: replica assignment for topic creation matches Kafka's `AdminUtils` for fixed inputs.

use std::collections::{BTreeMap, BTreeSet};

use kafka_controller::assignment::{
    assign_replicas_to_brokers, rack_alternated_broker_list, AssignmentError, AssignmentStart,
    BrokerRack,
};
use kafka_controller::context::BrokerId;

fn plain(ids: &[BrokerId]) -> Vec<BrokerRack> {
    ids.iter().map(|&id| BrokerRack::new(id, None)).collect()
}

fn racked(map: &[(BrokerId, &str)]) -> Vec<BrokerRack> {
    let mut v: Vec<BrokerRack> = map
        .iter()
        .map(|(id, r)| BrokerRack::new(*id, Some(r)))
        .collect();
    v.sort_by_key(|b| b.id);
    v
}

fn expect(rows: &[&[BrokerId]]) -> BTreeMap<i32, Vec<BrokerId>> {
    rows.iter()
        .enumerate()
        .map(|(p, r)| (p as i32, r.to_vec()))
        .collect()
}

#[test]
fn k2_2_rack_unaware_round_robin_with_shifting_followers() {
    // Kafka's AdminTest expectation: 5 brokers, 10 partitions, RF 3, fixed start index 0.
    let got = assign_replicas_to_brokers(
        &plain(&[0, 1, 2, 3, 4]),
        10,
        3,
        AssignmentStart::fixed(0),
        0,
    )
    .unwrap();
    let want = expect(&[
        &[0, 1, 2],
        &[1, 2, 3],
        &[2, 3, 4],
        &[3, 4, 0],
        &[4, 0, 1],
        &[0, 2, 3],
        &[1, 3, 4],
        &[2, 4, 0],
        &[3, 0, 1],
        &[4, 1, 2],
    ]);
    assert_eq!(got, want);
}

#[test]
fn k2_2_rack_unaware_start_index_and_shift_are_inputs() {
    let start = AssignmentStart {
        start_index: 2,
        replica_shift: 1,
    };
    let got = assign_replicas_to_brokers(&plain(&[10, 11, 12, 13]), 5, 2, start, 0).unwrap();
    // p0: first = 2 -> 12, follower 2 + 1 + (1 % 3) = 4 % 4 -> 10
    // p4: wraps, shift 2: first = 6 % 4 = 2 -> 12, follower 2 + 1 + 2 = 5 % 4 = 1 -> 11
    let want = expect(&[&[12, 10], &[13, 11], &[10, 12], &[11, 13], &[12, 11]]);
    assert_eq!(got, want);
}

#[test]
fn k2_2_rack_unaware_partitions_added_to_existing_topic() {
    // start_partition 5 continues numbering as if partitions 0..5 existed.
    let got =
        assign_replicas_to_brokers(&plain(&[0, 1, 2, 3, 4]), 2, 3, AssignmentStart::fixed(0), 5)
            .unwrap();
    let want: BTreeMap<i32, Vec<BrokerId>> = [(5, vec![0, 2, 3]), (6, vec![1, 3, 4])].into();
    assert_eq!(got, want);
}

#[test]
fn k2_2_rack_alternated_broker_list() {
    // Kafka's AdminRackAwareTest expectations.
    let racks = racked(&[
        (0, "rack1"),
        (1, "rack3"),
        (2, "rack3"),
        (3, "rack2"),
        (4, "rack2"),
        (5, "rack1"),
    ]);
    assert_eq!(rack_alternated_broker_list(&racks), vec![0, 3, 1, 5, 4, 2]);
    let without_5: Vec<BrokerRack> = racks.iter().filter(|b| b.id != 5).cloned().collect();
    assert_eq!(rack_alternated_broker_list(&without_5), vec![0, 3, 1, 4, 2]);
}

#[test]
fn k2_2_rack_aware_assignment_matches_kafka() {
    let racks = racked(&[
        (0, "rack1"),
        (1, "rack3"),
        (2, "rack3"),
        (3, "rack2"),
        (4, "rack2"),
        (5, "rack1"),
    ]);
    let got = assign_replicas_to_brokers(&racks, 7, 3, AssignmentStart::fixed(0), 0).unwrap();
    let want = expect(&[
        &[0, 3, 1],
        &[3, 1, 5],
        &[1, 5, 4],
        &[5, 4, 2],
        &[4, 2, 0],
        &[2, 0, 3],
        &[0, 4, 2],
    ]);
    assert_eq!(got, want);
}

#[test]
fn k2_2_rack_aware_spreads_replicas_over_racks_for_every_start() {
    let rack_of: BTreeMap<BrokerId, &str> =
        [(0, "a"), (1, "b"), (2, "b"), (3, "c"), (4, "c"), (5, "a")].into();
    let brokers: Vec<BrokerRack> = rack_of
        .iter()
        .map(|(id, r)| BrokerRack::new(*id, Some(r)))
        .collect();
    for start_index in 0..6 {
        for replica_shift in 0..6 {
            let start = AssignmentStart {
                start_index,
                replica_shift,
            };
            let got = assign_replicas_to_brokers(&brokers, 12, 3, start, 0).unwrap();
            for (p, replicas) in &got {
                let distinct: BTreeSet<BrokerId> = replicas.iter().copied().collect();
                assert_eq!(distinct.len(), 3, "partition {p}: distinct brokers");
                let racks: BTreeSet<&str> = replicas.iter().map(|b| rack_of[b]).collect();
                assert_eq!(racks.len(), 3, "partition {p}: one replica per rack");
            }
        }
    }
    // More replicas than racks: every rack still gets one and brokers stay distinct.
    let got = assign_replicas_to_brokers(&brokers, 6, 5, AssignmentStart::fixed(1), 0).unwrap();
    for replicas in got.values() {
        let distinct: BTreeSet<BrokerId> = replicas.iter().copied().collect();
        assert_eq!(distinct.len(), 5);
        let racks: BTreeSet<&str> = replicas.iter().map(|b| rack_of[b]).collect();
        assert_eq!(racks.len(), 3);
    }
}

#[test]
fn k2_2_invalid_inputs_are_refused() {
    let three = plain(&[1, 2, 3]);
    let s = AssignmentStart::fixed(0);
    assert_eq!(
        assign_replicas_to_brokers(&three, 0, 1, s, 0),
        Err(AssignmentError::InvalidPartitions)
    );
    assert!(matches!(
        assign_replicas_to_brokers(&three, 1, 0, s, 0),
        Err(AssignmentError::InvalidReplicationFactor { .. })
    ));
    assert!(matches!(
        assign_replicas_to_brokers(&three, 1, 4, s, 0),
        Err(AssignmentError::InvalidReplicationFactor { .. })
    ));
    let mixed = vec![BrokerRack::new(1, Some("r1")), BrokerRack::new(2, None)];
    assert_eq!(
        assign_replicas_to_brokers(&mixed, 1, 1, s, 0),
        Err(AssignmentError::IncompleteRackInfo)
    );
    assert_eq!(
        assign_replicas_to_brokers(&plain(&[1, 1]), 1, 1, s, 0),
        Err(AssignmentError::DuplicateBroker(1))
    );
    // Huge start values do not overflow or panic.
    let big = AssignmentStart {
        start_index: usize::MAX,
        replica_shift: usize::MAX,
    };
    assert_eq!(
        assign_replicas_to_brokers(&three, 3, 3, big, 0)
            .unwrap()
            .len(),
        3
    );
    let racks = racked(&[(1, "a"), (2, "b"), (3, "a")]);
    assert_eq!(
        assign_replicas_to_brokers(&racks, 9, 3, big, i32::MAX - 3)
            .unwrap()
            .len(),
        3
    );
}
