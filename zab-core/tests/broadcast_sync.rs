//! Synchronisation (Zab's phase 2, ZooKeeper's `LearnerHandler.syncFollower`): the leader's DIFF / TRUNC / SNAP choice, the
//! packet order with NEWLEADER after the sync data (ZOOKEEPER-3104), and the learner's
//! persist-then-epoch-then-ack order (ZOOKEEPER-3911).

use zab_core::broadcast::{
    choose_sync, leader_sync_packets, BroadcastAction, LearnerBroadcast, LearnerOptions, SyncPlan,
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
    l.handle_packet(QuorumPacket::with_data(
        packet_type::SNAP,
        snap.zxid.0,
        snap.data.clone(),
    ));
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
