//! Atomic broadcast (Z2, Zab's phase 3) driven by hand: zxid assignment, log
//! before ACK, commit in zxid order on a quorum that counts the leader's own write, INFORM to
//! observers, forwarded writes, `sync` barriers and the zxid rollover (ZOOKEEPER-1277).

use std::collections::BTreeMap;
use std::sync::Arc;

use zab_core::broadcast::{
    choose_sync, leader_sync_packets, BroadcastAction, BroadcastError, LeaderBroadcast,
    LearnerBroadcast,
};
use zab_core::discovery::{epoch_zxid, packet_type, QuorumPacket};
use zab_core::state_machine::{RecordingStateMachine, StateMachine};
use zab_core::txnlog::{MemoryTxnLog, Txn, TxnLog};
use zab_core::{QuorumMaj, ServerId, Zxid};

fn quorum() -> Arc<QuorumMaj> {
    Arc::new(QuorumMaj::with_ids([1, 2, 3], [4]))
}

fn drain_leader(l: &mut LeaderBroadcast) -> Vec<BroadcastAction> {
    std::iter::from_fn(|| l.poll_action()).collect()
}

fn drain_learner(l: &mut LearnerBroadcast) -> Vec<BroadcastAction> {
    std::iter::from_fn(|| l.poll_action()).collect()
}

fn ack(z: Zxid) -> QuorumPacket {
    QuorumPacket::new(packet_type::ACK, z.0)
}

fn applied(actions: &[BroadcastAction]) -> Vec<Zxid> {
    actions
        .iter()
        .filter_map(|a| match a {
            BroadcastAction::Apply(t) => Some(t.zxid),
            _ => None,
        })
        .collect()
}

/// A learner past sync and UPTODATE in `epoch`.
fn synced_learner(observer: bool, epoch: i64) -> LearnerBroadcast {
    let mut l = LearnerBroadcast::new(ServerId(3), observer, epoch, Zxid::ZERO, Default::default());
    l.handle_packet(QuorumPacket::new(packet_type::DIFF, 0));
    l.handle_packet(QuorumPacket::new(packet_type::NEWLEADER, epoch_zxid(epoch)));
    l.handle_packet(QuorumPacket::new(packet_type::UPTODATE, -1));
    drain_learner(&mut l);
    l
}

#[test]
fn z2_leader_commits_in_zxid_order_on_a_quorum_counting_its_own_ack() {
    let mut l = LeaderBroadcast::new(ServerId(3), quorum(), 2, Zxid::new(1, 4));
    for s in [1, 2, 4] {
        l.add_learner(ServerId(s));
    }
    let a = l.propose("a".into()).unwrap();
    let b = l.propose("b".into()).unwrap();
    assert_eq!((a, b), (Zxid::new(2, 1), Zxid::new(2, 2)));
    let first = drain_leader(&mut l);
    // Logged locally, proposed to the two followers, not to the observer.
    assert_eq!(first[0], BroadcastAction::Log(vec![Txn::new(a, "a")]));
    let proposed_to: Vec<ServerId> = first
        .iter()
        .filter_map(|x| match x {
            BroadcastAction::Send { to, packet } if packet.kind == packet_type::PROPOSAL => {
                Some(*to)
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        proposed_to,
        [ServerId(1), ServerId(2), ServerId(1), ServerId(2)]
    );

    // b has a quorum {1, 3} before a has one: nothing commits out of order.
    l.handle_packet(ServerId(1), ack(b));
    l.local_logged(b);
    assert!(applied(&drain_leader(&mut l)).is_empty());
    assert_eq!(l.outstanding(), [a, b]);
    // An observer's or a NEWLEADER-style ack does not count.
    l.handle_packet(ServerId(4), ack(a));
    l.handle_packet(ServerId(2), ack(Zxid::new(2, 0)));
    assert!(applied(&drain_leader(&mut l)).is_empty());
    // {2, 3} on a: a commits, then b.
    l.handle_packet(ServerId(2), ack(a));
    let out = drain_leader(&mut l);
    assert_eq!(applied(&out), [a, b]);
    assert_eq!(l.last_committed(), b);
    let informed: Vec<(ServerId, i64)> = out
        .iter()
        .filter_map(|x| match x {
            BroadcastAction::Send { to, packet } if packet.kind == packet_type::INFORM => {
                Some((*to, packet.zxid))
            }
            _ => None,
        })
        .collect();
    assert_eq!(informed, [(ServerId(4), a.0), (ServerId(4), b.0)]);
    let commits = out
        .iter()
        .filter(|x| matches!(x, BroadcastAction::Send { packet, .. } if packet.kind == packet_type::COMMIT))
        .count();
    assert_eq!(commits, 4);
}

#[test]
fn z2_follower_logs_a_proposal_before_acking_and_applies_commits_in_order() {
    let mut f = synced_learner(false, 2);
    let z1 = Zxid::new(2, 1);
    f.handle_packet(QuorumPacket::with_data(
        packet_type::PROPOSAL,
        z1.0,
        "x".into(),
    ));
    assert_eq!(
        drain_learner(&mut f),
        [
            BroadcastAction::Log(vec![Txn::new(z1, "x")]),
            BroadcastAction::Send {
                to: ServerId(3),
                packet: ack(z1)
            }
        ]
    );
    f.handle_packet(QuorumPacket::with_data(
        packet_type::PROPOSAL,
        Zxid::new(2, 2).0,
        "y".into(),
    ));
    drain_learner(&mut f);
    f.handle_packet(QuorumPacket::new(packet_type::COMMIT, z1.0));
    assert_eq!(applied(&drain_learner(&mut f)), [z1]);
    // A commit that skips a proposal breaks total order: the follower leaves the epoch.
    f.handle_packet(QuorumPacket::new(packet_type::COMMIT, Zxid::new(2, 3).0));
    assert!(matches!(
        drain_learner(&mut f)[..],
        [BroadcastAction::Abandon { .. }]
    ));
}

#[test]
fn z2_observer_applies_informs_and_never_acks() {
    let mut o = synced_learner(true, 2);
    let z = Zxid::new(2, 1);
    o.handle_packet(QuorumPacket::with_data(
        packet_type::INFORM,
        z.0,
        "x".into(),
    ));
    let out = drain_learner(&mut o);
    assert_eq!(
        out,
        [
            BroadcastAction::Log(vec![Txn::new(z, "x")]),
            BroadcastAction::Apply(Txn::new(z, "x"))
        ]
    );
}

#[test]
fn z2_followers_forward_writes_to_the_leader() {
    let mut f = synced_learner(false, 2);
    f.submit("w".into());
    let [BroadcastAction::Send { to, packet }] = &drain_learner(&mut f)[..] else {
        panic!("one REQUEST expected");
    };
    assert_eq!((*to, packet.kind), (ServerId(3), packet_type::REQUEST));
    let mut l = LeaderBroadcast::new(ServerId(3), quorum(), 2, Zxid::ZERO);
    l.add_learner(ServerId(1));
    l.handle_packet(ServerId(1), packet.clone());
    assert_eq!(
        drain_leader(&mut l)[0],
        BroadcastAction::Log(vec![Txn::new(Zxid::new(2, 1), "w")])
    );
}

fn refuse_bad(data: &[u8]) -> Result<(), String> {
    if data.starts_with(b"bad") {
        Err("starts with bad".into())
    } else {
        Ok(())
    }
}

#[test]
fn z2_leader_drops_a_forwarded_write_its_request_validator_refuses() {
    let mut l = LeaderBroadcast::new(ServerId(3), quorum(), 2, Zxid::ZERO);
    l.set_request_validator(Some(refuse_bad));
    l.add_learner(ServerId(1));
    let forwarded = |d: &'static str| QuorumPacket::with_data(packet_type::REQUEST, -1, d.into());
    l.handle_packet(ServerId(1), forwarded("bad write"));
    assert!(
        drain_leader(&mut l).is_empty(),
        "nothing proposed, nothing logged"
    );
    l.handle_packet(ServerId(1), forwarded("good write"));
    assert_eq!(
        drain_leader(&mut l)[0],
        BroadcastAction::Log(vec![Txn::new(Zxid::new(2, 1), "good write")])
    );
    assert!(!l.accepts(b"bad too"));
    assert!(l.accepts(b"fine"));
}

#[test]
fn z2_sync_barrier_waits_for_the_writes_outstanding_when_asked() {
    let mut l = LeaderBroadcast::new(ServerId(3), quorum(), 2, Zxid::ZERO);
    l.add_learner(ServerId(1));
    // Nothing outstanding: answered at once.
    l.handle_packet(ServerId(1), QuorumPacket::new(packet_type::SYNC, -1));
    let out = drain_leader(&mut l);
    assert!(
        matches!(&out[..], [BroadcastAction::Send { packet, .. }] if packet.kind == packet_type::SYNC)
    );
    let z = l.propose("a".into()).unwrap();
    drain_leader(&mut l);
    l.handle_packet(ServerId(1), QuorumPacket::new(packet_type::SYNC, -1));
    assert!(drain_leader(&mut l).is_empty());
    l.local_logged(z);
    l.handle_packet(ServerId(1), ack(z));
    let out = drain_leader(&mut l);
    let sync_at = out
        .iter()
        .position(|a| matches!(a, BroadcastAction::Send { packet, .. } if packet.kind == packet_type::SYNC && packet.zxid == z.0))
        .expect("barrier released");
    let commit_at = out
        .iter()
        .position(|a| matches!(a, BroadcastAction::Send { packet, .. } if packet.kind == packet_type::COMMIT))
        .expect("committed");
    assert!(commit_at < sync_at);
    // The follower sees the barrier after applying the commit.
    let mut f = synced_learner(false, 2);
    f.handle_packet(QuorumPacket::with_data(
        packet_type::PROPOSAL,
        z.0,
        "a".into(),
    ));
    f.handle_packet(QuorumPacket::new(packet_type::COMMIT, z.0));
    f.handle_packet(QuorumPacket::new(packet_type::SYNC, z.0));
    let out = drain_learner(&mut f);
    assert_eq!(out.last(), Some(&BroadcastAction::SyncDone { zxid: z }));
}

#[test]
fn zookeeper_1277_zxid_counter_rollover_forces_a_new_epoch() {
    let start = Zxid::new(5, u32::MAX - 2);
    let mut l = LeaderBroadcast::starting_at(ServerId(3), quorum(), 5, start, start);
    assert_eq!(l.propose("last".into()), Ok(Zxid::new(5, u32::MAX - 1)));
    drain_leader(&mut l);
    assert_eq!(
        l.propose("one too many".into()),
        Err(BroadcastError::Rollover { epoch: 5 })
    );
    assert!(matches!(
        drain_leader(&mut l)[..],
        [BroadcastAction::Abandon { .. }]
    ));
    assert_eq!(l.propose("x".into()), Err(BroadcastError::NotLeading));
}

/// One server of the hand-driven ensemble: its log and state machine.
#[derive(Default)]
struct Node {
    log: MemoryTxnLog,
    sm: RecordingStateMachine,
}

impl Node {
    /// Carries out one action; returns the packet to deliver, if any.
    fn exec(&mut self, a: BroadcastAction) -> Option<(ServerId, QuorumPacket)> {
        match a {
            BroadcastAction::Send { to, packet } => return Some((to, packet)),
            BroadcastAction::Log(t) => self.log.append(&t).unwrap(),
            BroadcastAction::Apply(t) => self.sm.apply(&t),
            BroadcastAction::Truncate(z) => self.log.truncate(z).unwrap(),
            BroadcastAction::RestoreSnapshot(s) => self.sm.restore(&s).unwrap(),
            other @ BroadcastAction::Abandon { .. } => panic!("unexpected {other:?}"),
            _ => {}
        }
        None
    }
}

#[test]
fn z2_three_servers_apply_the_same_writes_in_the_same_order() {
    // Leader 3 with history [(1,1)]; follower 1 in sync; follower 2 empty (DIFF).
    let history = vec![Txn::new(Zxid::new(1, 1), "h")];
    let mut nodes: BTreeMap<i64, Node> = (1..=3).map(|s| (s, Node::default())).collect();
    for s in [1, 3] {
        let n = nodes.get_mut(&s).unwrap();
        n.log.append(&history).unwrap();
        n.sm.apply(&history[0]);
    }
    let mut leader = LeaderBroadcast::new(ServerId(3), quorum(), 2, Zxid::new(1, 1));
    let mut learners: BTreeMap<i64, LearnerBroadcast> = BTreeMap::new();
    for s in [1, 2] {
        let last = nodes[&s].log.last_zxid();
        let mut l = LearnerBroadcast::new(ServerId(3), false, 2, last, Default::default());
        let plan = choose_sync(last, Zxid::ZERO, &history, None).unwrap();
        for p in leader_sync_packets(&plan, 2) {
            l.handle_packet(p);
        }
        l.handle_packet(QuorumPacket::new(packet_type::UPTODATE, -1));
        for a in drain_learner(&mut l) {
            nodes.get_mut(&s).unwrap().exec(a);
        }
        leader.add_learner(ServerId(s));
        learners.insert(s, l);
    }
    // Writes from the leader and forwarded by follower 1, delivered in FIFO order per link.
    for i in 0..50 {
        if i % 2 == 0 {
            leader.propose(format!("w{i}").into()).unwrap();
        } else {
            learners.get_mut(&1).unwrap().submit(format!("w{i}").into());
        }
        loop {
            let mut progressed = false;
            while let Some(a) = leader.poll_action() {
                progressed = true;
                if let BroadcastAction::Log(t) = &a {
                    let last = t.last().map(|t| t.zxid);
                    nodes.get_mut(&3).unwrap().exec(a.clone());
                    if let Some(z) = last {
                        leader.local_logged(z);
                    }
                    continue;
                }
                if let Some((to, p)) = nodes.get_mut(&3).unwrap().exec(a) {
                    learners.get_mut(&to.0).unwrap().handle_packet(p);
                }
            }
            for (s, l) in learners.iter_mut() {
                while let Some(a) = l.poll_action() {
                    progressed = true;
                    if let Some((_, p)) = nodes.get_mut(s).unwrap().exec(a) {
                        leader.handle_packet(ServerId(*s), p);
                    }
                }
            }
            if !progressed {
                break;
            }
        }
    }
    let reference = &nodes[&3].sm.applied;
    assert_eq!(reference.len(), 51);
    for s in [1, 2] {
        assert_eq!(&nodes[&s].sm.applied, reference, "server {s} diverged");
        assert_eq!(nodes[&s].log.txns(), nodes[&3].log.txns());
    }
}
