//! Discovery handing over to synchronisation: a `LeaderDiscovery` given its committed history
//! syncs each learner by DIFF / TRUNC with NEWLEADER last (ZOOKEEPER-3104), and a
//! `LearnerDiscovery` persists the synced transactions, then `currentEpoch`, then acks
//! (ZOOKEEPER-3911); after UPTODATE it follows the broadcast only when asked to.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zab_core::broadcast::{BroadcastAction, LearnerOptions};
use zab_core::discovery::{
    epoch_zxid, packet_type, DiscoveryAction, LeaderDiscovery, LearnerDiscovery, QuorumPacket,
    Timing,
};
use zab_core::store::PersistedEpochs;
use zab_core::txnlog::Txn;
use zab_core::{QuorumMaj, ServerId, Zxid};

fn timing() -> Timing {
    Timing::new(Duration::from_millis(100), 10, 5)
}

fn txn(e: i64, c: u32) -> Txn {
    Txn::new(Zxid::new(e, c), format!("{e}/{c}").into_bytes())
}

fn epochs(current: i64, last: Zxid) -> PersistedEpochs {
    PersistedEpochs {
        current_epoch: current,
        accepted_epoch: current,
        last_zxid: last.0,
    }
}

/// Delivers packets between the leader (3) and its learners until quiet; returns each
/// learner's actions and the packets each learner received, in order.
fn pump(
    t: Instant,
    leader: &mut LeaderDiscovery,
    learners: &mut BTreeMap<i64, LearnerDiscovery>,
) -> (
    BTreeMap<i64, Vec<DiscoveryAction>>,
    BTreeMap<i64, Vec<QuorumPacket>>,
) {
    let mut actions: BTreeMap<i64, Vec<DiscoveryAction>> = BTreeMap::new();
    let mut received: BTreeMap<i64, Vec<QuorumPacket>> = BTreeMap::new();
    loop {
        let mut progressed = false;
        while let Some(a) = leader.poll_action() {
            progressed = true;
            if let DiscoveryAction::Send { to, packet } = a {
                received.entry(to.0).or_default().push(packet.clone());
                if let Some(l) = learners.get_mut(&to.0) {
                    l.handle_packet(t, ServerId(3), packet);
                }
            }
        }
        for (sid, l) in learners.iter_mut() {
            while let Some(a) = l.poll_action() {
                progressed = true;
                if let DiscoveryAction::Send { packet, .. } = &a {
                    leader.handle_packet(t, ServerId(*sid), packet.clone());
                }
                actions.entry(*sid).or_default().push(a);
            }
        }
        if !progressed {
            return (actions, received);
        }
    }
}

#[test]
fn zookeeper_3104_and_3911_discovery_syncs_learners_from_the_leaders_history() {
    let t = Instant::now();
    let qv = Arc::new(QuorumMaj::with_ids([1, 2, 3], []));
    let history = vec![txn(1, 1), txn(1, 2), txn(1, 3)];
    let mut leader = LeaderDiscovery::new(t, ServerId(3), qv, epochs(1, Zxid::new(1, 3)), timing());
    leader.set_history(Zxid::ZERO, history);
    let mut learners = BTreeMap::new();
    // 1 has a prefix of the history; 2 has nothing.
    for (sid, last) in [(1, Zxid::new(1, 1)), (2, Zxid::ZERO)] {
        let current = if last == Zxid::ZERO { 0 } else { 1 };
        let mut l = LearnerDiscovery::new(
            t,
            ServerId(sid),
            ServerId(3),
            false,
            0,
            epochs(current, last),
            timing(),
        );
        l.set_broadcast_options(LearnerOptions::default().with_follow_broadcast(sid == 1));
        learners.insert(sid, l);
    }
    let (actions, received) = pump(t, &mut leader, &mut learners);
    assert!(leader.is_established());

    use packet_type::*;
    let kinds = |sid: i64| -> Vec<i32> {
        received[&sid]
            .iter()
            .map(|p| p.kind)
            .filter(|k| *k != PING)
            .collect()
    };
    assert_eq!(
        kinds(1),
        [LEADERINFO, DIFF, PROPOSAL, COMMIT, PROPOSAL, COMMIT, NEWLEADER, UPTODATE]
    );
    assert_eq!(
        kinds(2)[1..8],
        [DIFF, PROPOSAL, COMMIT, PROPOSAL, COMMIT, PROPOSAL, COMMIT]
    );
    assert_eq!(kinds(2)[8], NEWLEADER);

    // Learner 1: the two missing transactions are logged, then currentEpoch, then the ACK.
    let a = &actions[&1];
    let logged = a
        .iter()
        .position(|x| matches!(x, DiscoveryAction::Zab(BroadcastAction::Log(t)) if t == &vec![txn(1, 2), txn(1, 3)]))
        .expect("synced transactions logged");
    let epoch = a
        .iter()
        .position(|x| *x == DiscoveryAction::PersistCurrentEpoch(2))
        .expect("currentEpoch persisted");
    let ack = a
        .iter()
        .position(|x| matches!(x, DiscoveryAction::Send { packet, .. } if packet.kind == ACK && packet.zxid == epoch_zxid(2)))
        .expect("NEWLEADER acknowledged");
    assert!(logged < epoch && epoch < ack);
    assert!(a.contains(&DiscoveryAction::Established { epoch: 2 }));
    assert!(learners.values().all(LearnerDiscovery::is_established));

    // Broadcast after UPTODATE: 1 follows it (log, ACK), 2 was not asked to and ignores it.
    let z = Zxid::new(2, 1);
    for sid in [1, 2] {
        let l = learners.get_mut(&sid).unwrap();
        l.handle_packet(
            t,
            ServerId(3),
            QuorumPacket::with_data(PROPOSAL, z.0, "w".into()),
        );
    }
    let a1: Vec<_> = std::iter::from_fn(|| learners.get_mut(&1).unwrap().poll_action()).collect();
    assert_eq!(
        a1[0],
        DiscoveryAction::Zab(BroadcastAction::Log(vec![Txn::new(z, "w")]))
    );
    assert!(
        matches!(&a1[1], DiscoveryAction::Send { packet, .. } if packet.kind == ACK && packet.zxid == z.0)
    );
    assert!(learners.get_mut(&2).unwrap().poll_action().is_none());
}

#[test]
fn discovery_truncates_a_learner_ahead_of_the_leaders_history() {
    let t = Instant::now();
    let qv = Arc::new(QuorumMaj::with_ids([1, 2, 3], []));
    // The leader's epoch-2 history; learner 1 still holds (1, 3) from epoch 1, never committed.
    let history = vec![txn(1, 1), txn(1, 2), txn(2, 1)];
    let mut leader = LeaderDiscovery::new(t, ServerId(3), qv, epochs(2, Zxid::new(2, 1)), timing());
    leader.set_history(Zxid::ZERO, history);
    let mut learners = BTreeMap::new();
    learners.insert(
        1,
        LearnerDiscovery::new(
            t,
            ServerId(1),
            ServerId(3),
            false,
            0,
            epochs(1, Zxid::new(1, 3)),
            timing(),
        ),
    );
    let (actions, _) = pump(t, &mut leader, &mut learners);
    let a = &actions[&1];
    assert!(
        a.contains(&DiscoveryAction::Zab(BroadcastAction::Truncate(Zxid::new(
            1, 2
        ))))
    );
    assert!(a.contains(&DiscoveryAction::Zab(BroadcastAction::Log(vec![txn(2, 1)]))));
    assert!(leader.is_established());
}
