//! Synchronisation (Zab's phase 2, ZooKeeper's `LearnerHandler.syncFollower`): the leader's DIFF / TRUNC / SNAP choice, the
//! packet order with NEWLEADER after the sync data (ZOOKEEPER-3104), and the learner's
//! persist-then-epoch-then-ack order (ZOOKEEPER-3911).

use bytes::Bytes;
use zab_core::broadcast::{
    choose_sync, leader_sync_packets, snap_packets, BroadcastAction, LearnerBroadcast,
    LearnerOptions, SyncPlan, SNAP_CHUNK,
};
use zab_core::discovery::{epoch_zxid, packet_type, QuorumPacket};
use zab_core::txnlog::{Snapshot, Txn};
use zab_core::{ServerId, Zxid};

fn txn(e: i64, c: u32) -> Txn {
    Txn::new(Zxid::new(e, c), format!("{e}/{c}").into_bytes())
}

fn history() -> Vec<Txn> {
    vec![txn(1, 1), txn(1, 2), txn(2, 1), txn(2, 2)]
}

#[test]
fn sync_choice_is_an_empty_diff_for_a_peer_in_sync() {
    let plan = choose_sync(Zxid::new(2, 2), Zxid::ZERO, &history(), None).unwrap();
    assert_eq!(
        plan,
        SyncPlan::Diff {
            after: Zxid::new(2, 2),
            txns: vec![]
        }
    );
}

#[test]
fn sync_choice_is_a_diff_of_the_missing_suffix() {
    let plan = choose_sync(Zxid::new(1, 2), Zxid::ZERO, &history(), None).unwrap();
    assert_eq!(
        plan,
        SyncPlan::Diff {
            after: Zxid::new(1, 2),
            txns: vec![txn(2, 1), txn(2, 2)]
        }
    );
    let plan = choose_sync(Zxid::ZERO, Zxid::ZERO, &history(), None).unwrap();
    assert!(matches!(plan, SyncPlan::Diff { txns, .. } if txns.len() == 4));
}

#[test]
fn sync_choice_truncates_a_peer_ahead_of_the_leader() {
    let plan = choose_sync(Zxid::new(2, 7), Zxid::ZERO, &history(), None).unwrap();
    assert_eq!(
        plan,
        SyncPlan::Trunc {
            to: Zxid::new(2, 2),
            txns: vec![]
        }
    );
}

#[test]
fn sync_choice_truncates_an_abandoned_epoch_then_diffs() {
    // The peer logged (1, 3) in epoch 1; the leader of epoch 2 never had it.
    let plan = choose_sync(Zxid::new(1, 3), Zxid::ZERO, &history(), None).unwrap();
    assert_eq!(
        plan,
        SyncPlan::Trunc {
            to: Zxid::new(1, 2),
            txns: vec![txn(2, 1), txn(2, 2)]
        }
    );
}

#[test]
fn sync_choice_sends_a_snapshot_to_a_peer_older_than_the_log() {
    // The log only holds what follows the snapshot at (2, 1).
    let snap = Snapshot {
        zxid: Zxid::new(2, 1),
        data: "state".into(),
    };
    let log = vec![txn(2, 2)];
    let plan = choose_sync(Zxid::new(1, 1), Zxid::new(2, 1), &log, Some(&snap)).unwrap();
    assert_eq!(
        plan,
        SyncPlan::Snap {
            snapshot: snap,
            txns: vec![txn(2, 2)]
        }
    );
    // Without a snapshot covering the log's base there is no way to sync that peer.
    assert_eq!(
        choose_sync(Zxid::new(1, 1), Zxid::new(2, 1), &log, None),
        None
    );
}

#[test]
fn zookeeper_3104_newleader_is_queued_after_the_diff_proposals() {
    let plan = choose_sync(Zxid::new(1, 1), Zxid::ZERO, &history(), None).unwrap();
    let packets = leader_sync_packets(&plan, 3);
    let kinds: Vec<i32> = packets.iter().map(|p| p.kind).collect();
    use packet_type::*;
    assert_eq!(
        kinds,
        [DIFF, PROPOSAL, COMMIT, PROPOSAL, COMMIT, PROPOSAL, COMMIT, NEWLEADER]
    );
    assert_eq!(packets[7].zxid, epoch_zxid(3));
    // A learner fed this sequence has the whole history logged before it acks NEWLEADER.
    let mut l = LearnerBroadcast::new(ServerId(3), false, 3, Zxid::new(1, 1), Default::default());
    for p in packets {
        l.handle_packet(p);
    }
    let actions: Vec<_> = std::iter::from_fn(|| l.poll_action()).collect();
    let logged_at = actions
        .iter()
        .position(|a| matches!(a, BroadcastAction::Log(t) if t.len() == 3))
        .expect("the diff is logged");
    let ack_at = actions
        .iter()
        .position(|a| matches!(a, BroadcastAction::Send { packet, .. } if packet.kind == ACK))
        .expect("NEWLEADER is acked");
    assert!(logged_at < ack_at);
}

#[test]
fn zookeeper_3104_a_newleader_before_the_diff_is_refused() {
    // The pre-fix order: NEWLEADER, then the diff. The learner must not ack an epoch before it
    // has the data: it sees NEWLEADER before any sync plan and leaves.
    let mut l = LearnerBroadcast::new(ServerId(3), false, 3, Zxid::ZERO, Default::default());
    l.handle_packet(QuorumPacket::new(packet_type::NEWLEADER, epoch_zxid(3)));
    let actions: Vec<_> = std::iter::from_fn(|| l.poll_action()).collect();
    assert!(matches!(actions[..], [BroadcastAction::Abandon { .. }]));
}

#[test]
fn zookeeper_3911_learner_persists_synced_txns_then_current_epoch_then_acks() {
    let mut l = LearnerBroadcast::new(ServerId(3), false, 2, Zxid::ZERO, LearnerOptions::default());
    let plan = choose_sync(Zxid::ZERO, Zxid::ZERO, &[txn(1, 1), txn(1, 2)], None).unwrap();
    for p in leader_sync_packets(&plan, 2) {
        l.handle_packet(p);
    }
    let actions: Vec<_> = std::iter::from_fn(|| l.poll_action()).collect();
    assert_eq!(
        actions,
        vec![
            BroadcastAction::Log(vec![txn(1, 1), txn(1, 2)]),
            BroadcastAction::Apply(txn(1, 1)),
            BroadcastAction::Apply(txn(1, 2)),
            BroadcastAction::PersistCurrentEpoch(2),
            BroadcastAction::Send {
                to: ServerId(3),
                packet: QuorumPacket::new(packet_type::ACK, epoch_zxid(2))
            },
        ]
    );
    l.handle_packet(QuorumPacket::new(packet_type::UPTODATE, -1));
    let actions: Vec<_> = std::iter::from_fn(|| l.poll_action()).collect();
    assert_eq!(actions[1], BroadcastAction::Established { epoch: 2 });
    assert!(l.is_established());
}

#[test]
fn sync_trunc_and_snap_reach_the_learner_as_actions() {
    let mut l = LearnerBroadcast::new(ServerId(3), false, 2, Zxid::new(1, 9), Default::default());
    l.handle_packet(QuorumPacket::new(packet_type::TRUNC, Zxid::new(1, 2).0));
    assert_eq!(
        l.poll_action(),
        Some(BroadcastAction::Truncate(Zxid::new(1, 2)))
    );
    assert_eq!(l.last_logged(), Zxid::new(1, 2));

    let mut l = LearnerBroadcast::new(ServerId(3), false, 2, Zxid::ZERO, Default::default());
    let snap = Snapshot {
        zxid: Zxid::new(1, 5),
        data: "s".into(),
    };
    for p in snap_packets(&snap) {
        l.handle_packet(p);
    }
    assert_eq!(
        l.poll_action(),
        Some(BroadcastAction::RestoreSnapshot(snap))
    );
    // A proposal at or below the snapshot is out of order: the learner leaves.
    l.handle_packet(QuorumPacket::with_data(
        packet_type::PROPOSAL,
        Zxid::new(1, 5).0,
        "x".into(),
    ));
    assert!(matches!(
        l.poll_action(),
        Some(BroadcastAction::Abandon { .. })
    ));
}

/// Carries out a plan on a learner's log the way `LearnerBroadcast` asks its driver to.
fn apply_plan(peer: &[Txn], plan: SyncPlan) -> Vec<Txn> {
    match plan {
        SyncPlan::Diff { txns, .. } => peer.iter().cloned().chain(txns).collect(),
        SyncPlan::Trunc { to, txns } => peer
            .iter()
            .filter(|t| t.zxid <= to)
            .cloned()
            .chain(txns)
            .collect(),
        SyncPlan::Snap { txns, .. } => txns,
    }
}

proptest::proptest! {
    /// Whatever a learner may hold (a prefix of the leader's history, or that history's old
    /// epoch followed by transactions of an epoch the leader never saw, or more of an old
    /// epoch), after the chosen sync its log is exactly the leader's committed history.
    #[test]
    fn sync_choice_always_leaves_the_learner_with_the_leaders_history(
        a in 0u32..6, b in 0u32..6, k in 0u32..6, extra_old in 0u32..3, abandoned in 0u32..3,
    ) {
        // Zab's invariants restrict what a learner can hold: transactions of an epoch the
        // leader never saw (epoch 2 here) come after the whole epoch-1 history the leader has,
        // because the leader of that epoch synced everyone it led to it; and a learner can
        // hold more of an old epoch than the leader only past the leader's last one.
        let k = if abandoned > 0 { a } else { k.min(a) };
        let leader: Vec<Txn> = (1..=a).map(|c| txn(1, c))
            .chain((1..=b).map(|c| txn(3, c)))
            .collect();
        let extra_old = if k == a && abandoned == 0 { extra_old } else { 0 };
        let peer: Vec<Txn> = (1..=k + extra_old).map(|c| txn(1, c))
            .chain((1..=abandoned).map(|c| txn(2, c)))
            .collect();
        let peer_last = peer.last().map(|t| t.zxid).unwrap_or(Zxid::ZERO);
        let plan = choose_sync(peer_last, Zxid::ZERO, &leader, None).unwrap();
        proptest::prop_assert_eq!(apply_plan(&peer, plan), leader);
    }
}

/// A snapshot of three and a half chunks, with distinct bytes.
fn big_snapshot() -> Snapshot {
    let data: Vec<u8> = (0..SNAP_CHUNK * 7 / 2).map(|i| (i % 251) as u8).collect();
    Snapshot {
        zxid: Zxid::new(1, 9),
        data: data.into(),
    }
}

#[test]
fn a_snap_larger_than_one_packet_goes_in_chunks_and_is_restored_only_after_the_last() {
    let snap = big_snapshot();
    let packets: Vec<QuorumPacket> = snap_packets(&snap).collect();
    // A header with the size, then four chunks, none above one packet's data limit.
    assert_eq!(packets.len(), 5);
    assert_eq!(
        packets[0].data.as_deref(),
        Some(&(snap.data.len() as i64).to_be_bytes()[..])
    );
    assert!(packets
        .iter()
        .all(|p| p.kind == packet_type::SNAP && p.data.as_ref().unwrap().len() <= SNAP_CHUNK));
    let mut l = LearnerBroadcast::new(ServerId(3), false, 2, Zxid::ZERO, Default::default());
    for p in &packets[..4] {
        l.handle_packet(p.clone());
        assert_eq!(l.poll_action(), None, "restored before the last chunk");
    }
    l.handle_packet(packets[4].clone());
    assert_eq!(
        l.poll_action(),
        Some(BroadcastAction::RestoreSnapshot(snap.clone()))
    );
    assert_eq!(l.last_logged(), snap.zxid);
}

#[test]
fn a_snap_cut_short_by_another_packet_is_never_restored() {
    let snap = big_snapshot();
    let mut l = LearnerBroadcast::new(ServerId(3), false, 2, Zxid::ZERO, Default::default());
    for p in snap_packets(&snap).take(3) {
        l.handle_packet(p);
    }
    l.handle_packet(QuorumPacket::new(packet_type::NEWLEADER, 2 << 32));
    let actions: Vec<BroadcastAction> = std::iter::from_fn(|| l.poll_action()).collect();
    assert!(
        matches!(actions[..], [BroadcastAction::Abandon { .. }]),
        "{actions:?}"
    );
}

#[test]
fn snap_chunks_beyond_the_announced_size_are_refused() {
    let mut l = LearnerBroadcast::new(ServerId(3), false, 2, Zxid::ZERO, Default::default());
    let z = Zxid::new(1, 9).0;
    l.handle_packet(QuorumPacket::with_data(
        packet_type::SNAP,
        z,
        Bytes::copy_from_slice(&4i64.to_be_bytes()),
    ));
    l.handle_packet(QuorumPacket::with_data(
        packet_type::SNAP,
        z,
        "12345".into(),
    ));
    let actions: Vec<BroadcastAction> = std::iter::from_fn(|| l.poll_action()).collect();
    assert!(
        matches!(actions[..], [BroadcastAction::Abandon { .. }]),
        "{actions:?}"
    );
}

#[test]
fn a_snap_header_that_is_not_a_size_is_refused() {
    let mut l = LearnerBroadcast::new(ServerId(3), false, 2, Zxid::ZERO, Default::default());
    l.handle_packet(QuorumPacket::with_data(packet_type::SNAP, 9, "s".into()));
    assert!(matches!(
        l.poll_action(),
        Some(BroadcastAction::Abandon { .. })
    ));
}

fn log_of(n: u32, size: usize) -> Vec<Txn> {
    (1..=n)
        .map(|c| Txn::new(Zxid::new(1, c), vec![7u8; size]))
        .collect()
}

#[test]
fn a_learner_behind_more_than_the_commit_log_gets_a_snap_when_the_diff_outweighs_a_third_of_it() {
    // 1,000 transactions of 100 bytes behind, a snapshot (at 1/900) of 100 KiB: the DIFF
    // (about 130 KB) is above 0.33 of the snapshot, so a SNAP and the 100 after it.
    let log = log_of(1000, 100);
    let snap = Snapshot {
        zxid: Zxid::new(1, 900),
        data: vec![1u8; 100 << 10].into(),
    };
    let plan = choose_sync(Zxid::ZERO, Zxid::ZERO, &log, Some(&snap)).unwrap();
    let SyncPlan::Snap { snapshot, txns } = plan else {
        panic!("expected a SNAP, got {plan:?}");
    };
    assert_eq!(snapshot, snap);
    assert_eq!(txns, log[900..].to_vec());
}

#[test]
fn a_diff_below_a_third_of_the_snapshot_or_within_the_commit_log_stays_a_diff() {
    let log = log_of(1000, 100);
    // Against a 1 MiB snapshot the 130 KB DIFF is small enough.
    let big = Snapshot {
        zxid: Zxid::new(1, 900),
        data: vec![1u8; 1 << 20].into(),
    };
    let plan = choose_sync(Zxid::ZERO, Zxid::ZERO, &log, Some(&big)).unwrap();
    assert!(matches!(plan, SyncPlan::Diff { ref txns, .. } if txns.len() == 1000));
    // 500 behind (ZooKeeper's commitLogCount) is a DIFF whatever the snapshot.
    let tiny = Snapshot {
        zxid: Zxid::new(1, 900),
        data: vec![1u8; 10].into(),
    };
    let plan = choose_sync(Zxid::new(1, 500), Zxid::ZERO, &log, Some(&tiny)).unwrap();
    assert!(matches!(plan, SyncPlan::Diff { ref txns, .. } if txns.len() == 500));
    // A snapshot older than the learner never replaces its DIFF.
    let old = Snapshot {
        zxid: Zxid::new(1, 100),
        data: vec![1u8; 10].into(),
    };
    let plan = choose_sync(Zxid::new(1, 200), Zxid::ZERO, &log, Some(&old)).unwrap();
    assert!(matches!(plan, SyncPlan::Diff { ref txns, .. } if txns.len() == 800));
}
