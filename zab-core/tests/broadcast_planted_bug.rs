//! ZOOKEEPER-3911 as a crash schedule. Leader 3 of epoch 2 holds a transaction T that no one
//! else has; follower 1 syncs it by DIFF. Once 3 and 1 (a quorum of {1, 2, 3}) acknowledged
//! NEWLEADER, T is committed and the leader applies it. We crash follower 1 after every prefix
//! of its actions, and the leader right after it counted the acknowledgement; followers 1 and
//! 2 then elect the one with the newest history (Z5). T must survive in that history
//! whenever it was committed.
//!
//! With the correct order (persist, then `currentEpoch`, then ACK) it always does. With the
//! test-only switch that acks NEWLEADER before persisting, the schedule finds a crash point
//! that loses T.

use zab_core::broadcast::{
    choose_sync, leader_sync_packets, BroadcastAction, LearnerBroadcast, LearnerOptions,
};
use zab_core::discovery::{epoch_zxid, packet_type};
use zab_core::txnlog::{MemoryTxnLog, Txn, TxnLog};
use zab_core::{QuorumMaj, QuorumVerifier, ServerId, Zxid};

/// Durable state of a follower after a crash.
#[derive(Default)]
struct Durable {
    log: MemoryTxnLog,
    current_epoch: i64,
}

/// Outcome of one crash point: (T committed by the leader, T in the new leader's history).
fn run(options: LearnerOptions, crash_after: usize) -> (bool, bool) {
    let t = Txn::new(Zxid::new(1, 1), "T");
    let leader_log = vec![t.clone()];
    let epoch = 2;

    let mut f1 = Durable::default();
    let f2 = Durable::default();
    let mut learner = LearnerBroadcast::new(ServerId(3), false, epoch, Zxid::ZERO, options);
    let plan = choose_sync(Zxid::ZERO, Zxid::ZERO, &leader_log, None).expect("diff");
    for p in leader_sync_packets(&plan, epoch) {
        learner.handle_packet(p);
    }
    let actions: Vec<BroadcastAction> = std::iter::from_fn(|| learner.poll_action()).collect();
    let mut newleader_acks = std::collections::BTreeSet::from([ServerId(3)]);
    for a in actions.into_iter().take(crash_after) {
        match a {
            BroadcastAction::Log(txns) => f1.log.append(&txns).expect("append"),
            BroadcastAction::PersistCurrentEpoch(e) => f1.current_epoch = e,
            BroadcastAction::Send { packet, .. }
                if packet.kind == packet_type::ACK && packet.zxid == epoch_zxid(epoch) =>
            {
                newleader_acks.insert(ServerId(1));
            }
            _ => {}
        }
    }
    // The leader establishes epoch 2 (its whole history committed) iff a quorum acked.
    let q = QuorumMaj::with_ids([1, 2, 3], []);
    let committed = q.contains_quorum(&newleader_acks);
    // Leader and follower 1 crash; 1 restarts from its durable state. The new leader is the
    // survivor with the newest (currentEpoch, last zxid).
    let survivors = [&f1, &f2];
    let Some(new_leader) = survivors
        .iter()
        .max_by_key(|d| (d.current_epoch, d.log.last_zxid()))
    else {
        return (committed, false);
    };
    let kept = new_leader.log.txns().contains(&t);
    (committed, kept)
}

fn lost_at(options: LearnerOptions) -> Vec<usize> {
    (0..=8)
        .filter(|k| {
            let (committed, kept) = run(options, *k);
            committed && !kept
        })
        .collect()
}

#[test]
fn zookeeper_3911_no_crash_point_loses_a_committed_transaction() {
    assert!(
        run(LearnerOptions::default(), 8).0,
        "the schedule commits T"
    );
    assert_eq!(lost_at(LearnerOptions::default()), Vec::<usize>::new());
}

#[cfg(feature = "never-in-production")]
#[test]
fn zookeeper_3911_planted_bug_ack_before_persist_loses_a_committed_transaction() {
    let broken = LearnerOptions::default().with_broken_ack_newleader_before_persist();
    let lost = lost_at(broken);
    assert!(
        !lost.is_empty(),
        "the crash schedule must catch the planted bug"
    );
    // The crash right after the premature ACK, before the log write.
    assert_eq!(lost[0], 1);
}
