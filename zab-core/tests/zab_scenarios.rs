//! Scenario tests for two ZooKeeper data-inconsistency bugs in synchronisation, driven through
//! the real learner core (`LearnerBroadcast`), the leader's sync choice (`choose_sync`,
//! `leader_sync_packets`), a `MemoryTxnLog` that survives "crashes" and a
//! `RecordingStateMachine` that does not. The log and state-machine actions are carried out as
//! the peer's replication layer does (apply only above the last applied zxid; a TRUNC below
//! it, and a restart, rebuild the state from the snapshot and the log).

use zab_core::broadcast::{
    choose_sync, leader_sync_packets, BroadcastAction, LearnerBroadcast, LearnerOptions,
};
use zab_core::discovery::packet_type;
use zab_core::state_machine::{RecordingStateMachine, StateMachine};
use zab_core::txnlog::{MemoryTxnLog, Snapshot, Txn, TxnLog};
use zab_core::{ServerId, Zxid};

fn txn(e: i64, c: u32) -> Txn {
    Txn::new(Zxid::new(e, c), format!("{e}/{c}").into_bytes())
}

/// A follower: durable log (and snapshot), volatile state machine.
#[derive(Default)]
struct Follower {
    log: MemoryTxnLog,
    sm: RecordingStateMachine,
}

impl Follower {
    /// A restart: the state is rebuilt from the newest snapshot and the whole log after it
    /// (ZooKeeper's `loadDataBase`).
    fn restart(&mut self) {
        self.sm = RecordingStateMachine::default();
        if let Some(s) = self.log.latest_snapshot().unwrap() {
            self.sm.restore(&s).unwrap();
        }
        for t in self.log.read_after(self.sm.last_applied()).unwrap() {
            self.sm.apply(&t);
        }
    }

    fn carry_out(&mut self, a: BroadcastAction) {
        match a {
            BroadcastAction::Log(t) => self.log.append(&t).unwrap(),
            BroadcastAction::Apply(t) if t.zxid > self.sm.last_applied() => self.sm.apply(&t),
            BroadcastAction::CommitLogged(z) => {
                for t in self.log.read_after(self.sm.last_applied()).unwrap() {
                    if t.zxid <= z {
                        self.sm.apply(&t);
                    }
                }
            }
            BroadcastAction::Truncate(z) => {
                self.log.truncate(z).unwrap();
                if self.sm.last_applied() > z {
                    self.restart();
                }
            }
            BroadcastAction::RestoreSnapshot(s) => {
                self.log.clear().unwrap();
                self.sm.restore(&s).unwrap();
                self.log.save_snapshot(&s).unwrap();
            }
            _ => {}
        }
    }

    /// Syncs with a leader of `epoch` whose committed history is `history` (above `base`,
    /// with `snapshot`), feeding the packets up to (not including) `stop_before` of them.
    /// Returns the actions, carried out.
    fn sync(
        &mut self,
        epoch: i64,
        base: Zxid,
        history: &[Txn],
        snapshot: Option<&Snapshot>,
        stop_before: Option<i32>,
    ) -> Vec<BroadcastAction> {
        let last = self.log.last_zxid();
        let plan = choose_sync(last, base, history, snapshot).expect("a sync plan");
        let mut l =
            LearnerBroadcast::new(ServerId(9), false, epoch, last, LearnerOptions::default());
        for p in leader_sync_packets(&plan, epoch) {
            if Some(p.kind) == stop_before {
                break;
            }
            l.handle_packet(p);
        }
        let actions: Vec<BroadcastAction> = std::iter::from_fn(|| l.poll_action()).collect();
        for a in actions.clone() {
            self.carry_out(a);
        }
        actions
    }
}

#[test]
fn zookeeper_2845_uncommitted_logged_txn_is_truncated_from_the_state_after_restart() {
    // Epoch 1: the follower logged (1,3) but the leader crashed before committing it; the
    // follower restarts and, like ZooKeeper, rebuilds its state from the whole log — (1,3)
    // included. The new leader of epoch 2 never had (1,3) and committed (2,1).
    let mut f = Follower::default();
    f.log.append(&[txn(1, 1), txn(1, 2), txn(1, 3)]).unwrap();
    f.restart();
    assert_eq!(f.sm.last_applied(), Zxid::new(1, 3));
    let leader = vec![txn(1, 1), txn(1, 2), txn(2, 1)];
    // The learner is past the leader's last common zxid: TRUNC to (1,2), then DIFF (2,1).
    let actions = f.sync(3, Zxid::ZERO, &leader, None, None);
    assert!(actions.contains(&BroadcastAction::Truncate(Zxid::new(1, 2))));
    // Its log and its state are both the leader's history: (1,3) is gone from both.
    assert_eq!(f.log.txns(), leader);
    assert_eq!(f.sm.applied, leader);
    // And it stays so across another restart.
    f.restart();
    assert_eq!(f.sm.applied, leader);
}

#[test]
fn zookeeper_2845_logged_txn_whose_commit_was_missed_is_applied_on_diff() {
    // The other side of the same rule: the follower logged (1,3) and acked it, but the
    // connection dropped before the COMMIT. The new leader has (1,3) in its committed
    // history, so it sends a DIFF from (1,3): nothing to send, and the follower's state must
    // still end up with (1,3) — its log up to the DIFF point is committed.
    let mut f = Follower::default();
    f.log.append(&[txn(1, 1), txn(1, 2), txn(1, 3)]).unwrap();
    for t in [txn(1, 1), txn(1, 2)] {
        f.sm.apply(&t);
    }
    let leader = vec![txn(1, 1), txn(1, 2), txn(1, 3), txn(2, 1)];
    let actions = f.sync(2, Zxid::ZERO, &leader, None, None);
    assert!(actions.contains(&BroadcastAction::CommitLogged(Zxid::new(1, 3))));
    assert_eq!(f.sm.applied, leader);
    assert_eq!(f.log.txns(), leader);
}

#[test]
fn zookeeper_3642_snapshot_from_a_snap_sync_survives_a_leader_crash_and_a_later_diff() {
    // ZOOKEEPER-3642: a follower restored a SNAP in memory only; the leader crashed before
    // NEWLEADER; the next leader sent a DIFF from the snapshot's zxid (the follower reported
    // it); a later restart reloaded the old on-disk data and the snapshot's contents were
    // lost. Here a SNAP is made durable (log cleared, snapshot saved) when it is received.
    let snap_history = vec![txn(1, 1), txn(1, 2), txn(2, 1)];
    let mut builder = RecordingStateMachine::default();
    for t in &snap_history {
        builder.apply(t);
    }
    let snapshot = builder.take_snapshot();
    let mut f = Follower::default();
    // The follower only ever saw (1,1) before; the leader's log starts after its snapshot.
    f.log.append(&[txn(1, 1)]).unwrap();
    f.restart();
    let after = vec![txn(2, 2)];
    // First leader (epoch 3): SNAP arrives, then the leader crashes before NEWLEADER.
    let actions = f.sync(
        3,
        snapshot.zxid,
        &after,
        Some(&snapshot),
        Some(packet_type::PROPOSAL),
    );
    assert!(matches!(
        actions.first(),
        Some(BroadcastAction::RestoreSnapshot(_))
    ));
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, BroadcastAction::Send { .. })),
        "nothing is acknowledged before NEWLEADER"
    );
    // The follower reports the snapshot's zxid to the next leader (epoch 4), which has the
    // same history plus (2,2): a DIFF of (2,2).
    assert_eq!(f.log.last_zxid(), snapshot.zxid);
    let full: Vec<Txn> = snap_history.iter().cloned().chain(after).collect();
    f.sync(4, Zxid::ZERO, &full, None, None);
    assert_eq!(f.sm.applied, full);
    // The follower restarts: the snapshot and the log after it rebuild the whole history.
    f.restart();
    assert_eq!(f.sm.applied, full, "the SNAP's data survived the restart");
}
