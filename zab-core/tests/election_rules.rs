//! Z1–Z8 and ZooKeeper 3.8's election rules (ZooKeeper's `FastLeaderElection.lookForLeader`), each driven by hand through
//! the core with fabricated notifications and a fake clock.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{actions, core, decision, in_state, looking, sends, sid, Net};
use zab_core::{
    Action, DecisionPath, ElectionConfig, FastLeaderElection, LearnerType, QuorumHierarchical,
    QuorumVerifier, ServerEntry, ServerId, ServerState, VoteData, Zxid,
};

const MS: Duration = Duration::from_millis(1);

fn zk() -> ElectionConfig {
    ElectionConfig::zookeeper()
}

fn data(epoch: i64, counter: u32) -> VoteData {
    VoteData::new(Zxid::new(epoch, counter), epoch)
}

// ---------------------------------------------------------------- Z1 .. Z8

#[test]
fn z1_a_minority_partition_never_elects_a_leader() {
    let mut net = Net::new(&[1, 2, 3, 4, 5], &[], zk(), |_| data(1, 3));
    // {4, 5} are cut off from {1, 2, 3}: they only talk to each other.
    net.connect_all();
    net.start(&[1, 2, 3, 4, 5]);
    let end = net.now + Duration::from_secs(5);
    while net.now < end {
        while let Some(m) = net.queue.pop_front() {
            let minority = |s: ServerId| s == sid(4) || s == sid(5);
            if minority(m.from) != minority(m.to) {
                continue;
            }
            net.deliver(m);
        }
        net.advance(10 * MS);
    }
    assert_eq!(net.view(4).0, ServerState::Looking);
    assert_eq!(net.view(5).0, ServerState::Looking);
    // the majority side elected 3, and only one server leads
    assert_eq!(net.view(3), (ServerState::Leading, sid(3)));
    let leaders = net
        .nodes
        .values()
        .filter(|n| n.state() == ServerState::Leading)
        .count();
    assert_eq!(leaders, 1);
}

#[test]
fn z2_observers_never_vote_and_learn_the_leader() {
    let mut net = Net::new(&[1, 2, 3], &[9], zk(), |_| data(0, 0));
    net.connect_all();
    net.start(&[1, 2, 3, 9]);
    assert!(net.run_until_decided(Duration::from_secs(5)));
    assert_eq!(net.view(9), (ServerState::Observing, sid(3)));
    assert_eq!(net.view(3).0, ServerState::Leading);
    // No voter counted the observer's vote.
    for i in [1, 2, 3] {
        let d = net.last_decision(i).unwrap();
        assert!(!d.supporters.contains(&sid(9)));
    }
    // The observer never proposes itself nor sends to other observers.
    let mut obs = core(9, &[1, 2, 3], &[9], zk(), data(5, 5));
    obs.start(Instant::now());
    let s = sends(&actions(&mut obs));
    assert_eq!(
        s.iter().map(|(to, _)| to.0).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert!(s.iter().all(|(_, n)| n.leader == ServerId::NONE));
}

#[test]
fn z3_states_move_from_looking_to_leading_following_and_observing() {
    let mut net = Net::new(&[1, 2, 3], &[7], zk(), |_| data(0, 0));
    for n in net.nodes.values() {
        assert_eq!(n.state(), ServerState::Looking);
    }
    net.connect_all();
    net.start(&[1, 2, 3, 7]);
    assert!(net.run_until_decided(Duration::from_secs(5)));
    assert_eq!(net.view(1).0, ServerState::Following);
    assert_eq!(net.view(2).0, ServerState::Following);
    assert_eq!(net.view(3).0, ServerState::Leading);
    assert_eq!(net.view(7).0, ServerState::Observing);
    for (i, state) in [(1, ServerState::Following), (3, ServerState::Leading)] {
        assert_eq!(net.last_decision(i).unwrap().state, state);
    }
}

#[test]
fn z4_larger_zxid_beats_larger_sid() {
    let mut net = Net::new(&[1, 2, 3], &[], zk(), |i| {
        if i == 1 {
            data(1, 9)
        } else {
            data(1, 4)
        }
    });
    net.connect_all();
    net.start(&[1, 2, 3]);
    assert!(net.run_until_decided(Duration::from_secs(2)));
    assert_eq!(net.view(1), (ServerState::Leading, sid(1)));
    assert_eq!(net.view(3), (ServerState::Following, sid(1)));
    assert_eq!(net.nodes[&sid(3)].current_vote().zxid, Zxid::new(1, 9));
}

#[test]
fn z5_leader_holds_the_largest_zxid_of_its_quorum_and_a_majority_follows() {
    let zx = [0, 7, 3, 9, 1, 5];
    let mut net = Net::new(&[1, 2, 3, 4, 5], &[], zk(), |i| data(2, zx[i as usize]));
    net.connect_all();
    net.start(&[1, 2, 3, 4, 5]);
    assert!(net.run_until_decided(Duration::from_secs(2)));
    let d = net.last_decision(3).unwrap().clone();
    assert_eq!(d.state, ServerState::Leading);
    assert!(net.qv.contains_quorum(&d.supporters));
    for s in &d.supporters {
        assert!(net.nodes[s].vote_data().last_zxid <= Zxid::new(2, 9));
    }
    let followers = (1..=5)
        .filter(|i| net.view(*i) == (ServerState::Following, sid(3)))
        .count();
    assert_eq!(followers, 4);
}

#[test]
fn z6_a_follower_that_loses_its_leader_looks_again_and_rejoins_a_live_one() {
    let mut net = Net::new(&[1, 2, 3], &[], zk(), |_| data(0, 0));
    net.connect_all();
    net.start(&[1, 2, 3]);
    assert!(net.run_until_decided(Duration::from_secs(2)));
    // The ensemble established epoch 1 (ZOOKEEPER-1732: votes carry it).
    for n in net.nodes.values_mut() {
        n.update_election_vote(1);
    }
    // Follower 1 misses pings (Z6) and goes LOOKING while 3 still leads.
    net.start(&[1]);
    assert_eq!(net.view(1).0, ServerState::Looking);
    assert!(net.run_until_decided(Duration::from_secs(2)));
    assert_eq!(net.view(1), (ServerState::Following, sid(3)));
    // its round (2) is ahead of the ensemble's (1): it joins through `outofelection`
    assert_eq!(
        net.last_decision(1).unwrap().path,
        DecisionPath::OutOfElection
    );
}

#[test]
fn z7_startup_election_elects_the_largest_sid_among_equal_zxids() {
    let mut net = Net::new(&[1, 2, 3], &[], zk(), |_| data(0, 0));
    net.connect_all();
    net.start(&[1, 2, 3]);
    assert!(net.run_until_decided(Duration::from_secs(2)));
    assert_eq!(net.view(3), (ServerState::Leading, sid(3)));
    assert_eq!(net.view(1), (ServerState::Following, sid(3)));
    assert_eq!(net.view(2), (ServerState::Following, sid(3)));
    // ZooKeeper waits finalizeWait (200 ms) after the quorum agreed.
    let d = net.last_decision(3).unwrap();
    assert_eq!(d.path, DecisionPath::FinalizeWait);
    assert!(net.ms() >= 200, "decided after {} ms", net.ms());
    assert_eq!(d.vote.election_epoch, 1);
}

#[test]
fn z8_after_the_leader_fails_the_rest_elect_the_most_recent_history() {
    let mut net = Net::new(&[1, 2, 3], &[], zk(), |_| data(0, 0));
    net.connect_all();
    net.start(&[1, 2, 3]);
    assert!(net.run_until_decided(Duration::from_secs(2)));
    // Epoch 1 ran; 1 logged more than 2 before leader 3 crashed.
    net.down.insert(sid(3));
    let t = net.now;
    for (i, counter) in [(1, 8), (2, 6)] {
        let n = net.nodes.get_mut(&sid(i)).unwrap();
        n.set_vote_data(data(1, counter));
        n.connection_down(t, sid(3));
    }
    net.start(&[1, 2]);
    assert!(net.run_until_decided(Duration::from_secs(2)));
    assert_eq!(net.view(1), (ServerState::Leading, sid(1)));
    assert_eq!(net.view(2), (ServerState::Following, sid(1)));
    assert_eq!(net.last_decision(1).unwrap().vote.election_epoch, 2);
}

// ---------------------------------------------------------------- receive rules (`WorkerReceiver`)

#[test]
fn non_voter_gets_our_current_vote_at_once_and_is_not_counted() {
    let t0 = Instant::now();
    let mut c = core(1, &[1, 2, 3], &[9], zk(), data(1, 1));
    c.start(t0);
    actions(&mut c);
    c.handle_notification(t0, sid(9), looking(9, Zxid::new(9, 9), 9, 9));
    let a = actions(&mut c);
    let s = sends(&a);
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].0, sid(9));
    // the startup current vote (self, zxid, epoch) with our round and our state
    assert_eq!(s[0].1.leader, sid(1));
    assert_eq!(s[0].1.election_epoch, 1);
    assert_eq!(s[0].1.state, ServerState::Looking);
    assert_eq!(
        c.logical_clock(),
        1,
        "the non-voter's round was not adopted"
    );
    assert!(s[0].1.config.is_some(), "replies carry our config");
}

#[test]
fn lagging_looking_voter_gets_our_proposal_of_the_current_round() {
    let t0 = Instant::now();
    let mut c = core(1, &[1, 2, 3], &[], zk(), data(1, 1));
    c.start(t0);
    c.handle_notification(t0, sid(3), looking(3, Zxid::new(1, 1), 4, 1));
    actions(&mut c);
    assert_eq!(c.logical_clock(), 4);
    c.handle_notification(t0, sid(2), looking(2, Zxid::new(1, 1), 2, 1));
    let s = sends(&actions(&mut c));
    assert_eq!(s.len(), 1);
    assert_eq!(
        (s[0].0, s[0].1.leader, s[0].1.election_epoch),
        (sid(2), sid(3), 4)
    );
    assert_eq!(s[0].1.state, ServerState::Looking);
}

/// ZooKeeper 3.8 lets a LOOKING observer answer a lagging LOOKING voter; the voter answers
/// that as a non-voter's message, and the two bounce messages while the voter lags. The
/// observer's reply is useless (a voter never queues it), so ours does not send it.
#[test]
fn observer_does_not_answer_a_lagging_voter() {
    let t0 = Instant::now();
    let mut obs = core(9, &[1, 2, 3], &[9], zk(), data(0, 0));
    obs.start(t0);
    obs.handle_notification(t0, sid(3), looking(3, Zxid::ZERO, 4, 0));
    actions(&mut obs);
    assert_eq!(obs.logical_clock(), 4);
    obs.handle_notification(t0, sid(1), looking(1, Zxid::ZERO, 2, 0));
    assert!(sends(&actions(&mut obs)).is_empty());
    // a voter does answer (the rule itself is tested above)
    let mut voter = core(2, &[1, 2, 3], &[9], zk(), data(0, 0));
    voter.start(t0);
    voter.handle_notification(t0, sid(3), looking(3, Zxid::ZERO, 4, 0));
    actions(&mut voter);
    voter.handle_notification(t0, sid(1), looking(1, Zxid::ZERO, 2, 0));
    assert_eq!(sends(&actions(&mut voter)).len(), 1);
}

#[test]
fn higher_round_clears_votes_and_compares_with_the_initial_vote() {
    let t0 = Instant::now();
    let mut c = core(2, &[1, 2, 3, 4, 5], &[], zk(), data(1, 5));
    c.start(t0);
    // round 1: 3 proposes a better vote, we adopt it ({2, 3} is no quorum of 5)
    c.handle_notification(t0, sid(3), looking(3, Zxid::new(1, 9), 1, 1));
    assert_eq!(c.proposal().leader, sid(3));
    // round 2 from 1 proposing 1 (zxid 6): compared with our INITIAL vote (2, zxid 5), it wins
    c.handle_notification(t0, sid(1), looking(1, Zxid::new(1, 6), 2, 1));
    assert_eq!(c.logical_clock(), 2);
    assert_eq!(c.proposal().leader, sid(1));
    // the round-1 vote of 3 was cleared; 1, 4 and we vote 1 in round 2: quorum {1, 2, 4}
    c.handle_notification(t0, sid(4), looking(1, Zxid::new(1, 6), 2, 1));
    assert_eq!(
        c.next_deadline(),
        Some(t0 + 200 * MS),
        "not yet: {{1, 2, 4}} then wait"
    );
    let a = actions(&mut c);
    assert!(decision(&a).is_none());
    // round 2 with a worse vote than our initial one: we keep our own
    let mut d = core(2, &[1, 2, 3], &[], zk(), data(1, 5));
    d.start(t0);
    d.handle_notification(t0, sid(1), looking(1, Zxid::new(1, 2), 3, 1));
    assert_eq!((d.logical_clock(), d.proposal().leader), (3, sid(2)));
}

#[test]
fn lower_round_looking_votes_are_not_counted() {
    let t0 = Instant::now();
    let mut c = core(1, &[1, 2, 3], &[], zk(), data(0, 0));
    c.start(t0);
    c.handle_notification(t0, sid(3), looking(3, Zxid::ZERO, 5, 0));
    actions(&mut c);
    // 2 votes 3 in round 4: ignored (and answered), so no quorum yet beyond {1, 3}
    c.handle_notification(t0, sid(2), looking(3, Zxid::ZERO, 4, 0));
    let a = actions(&mut c);
    assert_eq!(sends(&a).len(), 1);
    assert!(decision(&a).is_none());
}

#[test]
fn not_looking_server_answers_looking_voters_and_drops_the_rest() {
    let mut net = Net::new(&[1, 2, 3], &[], zk(), |_| data(0, 0));
    net.connect_all();
    net.start(&[1, 2, 3]);
    assert!(net.run_until_decided(Duration::from_secs(2)));
    let t = net.now;
    let leader = net.nodes.get_mut(&sid(3)).unwrap();
    leader.update_election_vote(1);
    leader.handle_notification(t, sid(1), looking(1, Zxid::ZERO, 7, 0));
    let s = sends(&actions(leader));
    assert_eq!(s.len(), 1);
    let (to, n) = &s[0];
    assert_eq!(*to, sid(1));
    assert_eq!(n.state, ServerState::Leading);
    assert_eq!((n.leader, n.election_epoch, n.peer_epoch), (sid(3), 1, 1));
    assert_eq!(leader.logical_clock(), 1);
    // a FOLLOWING notification to a non-LOOKING voter is dropped
    leader.handle_notification(
        t,
        sid(2),
        in_state(ServerState::Following, 3, Zxid::ZERO, 1, 1),
    );
    assert!(actions(leader).is_empty());
}

#[test]
fn votes_for_a_non_voter_leader_and_minus_one_zxids_are_ignored() {
    let t0 = Instant::now();
    let mut c = core(1, &[1, 2, 3], &[9], zk(), data(0, 0));
    c.start(t0);
    c.handle_notification(t0, sid(2), looking(9, Zxid::new(9, 9), 1, 9));
    assert_eq!(c.proposal().leader, sid(1));
    c.handle_notification(t0, sid(2), looking(3, Zxid::INVALID, 1, 9));
    assert_eq!(c.proposal().leader, sid(1));
    c.handle_notification(
        t0,
        sid(2),
        in_state(ServerState::Observing, 3, Zxid::ZERO, 1, 0),
    );
    assert_eq!(c.proposal().leader, sid(1));
    assert!(decision(&actions(&mut c)).is_none());
}

// ---------------------------------------------------------------- timing

#[test]
fn finalize_wait_restarts_on_a_worse_vote_and_ends_on_a_better_one() {
    let t0 = Instant::now();
    let mut c = core(3, &[1, 2, 3], &[], zk(), data(0, 0));
    c.start(t0);
    c.handle_notification(t0, sid(1), looking(3, Zxid::ZERO, 1, 0));
    assert_eq!(
        c.next_deadline(),
        Some(t0 + 200 * MS),
        "quorum {{1, 3}}: finalizeWait"
    );
    // a worse vote at +150 ms is discarded and restarts the window
    c.handle_notification(t0 + 150 * MS, sid(2), looking(2, Zxid::ZERO, 1, 0));
    assert_eq!(c.next_deadline(), Some(t0 + 350 * MS));
    c.handle_tick(t0 + 349 * MS);
    assert!(decision(&actions(&mut c)).is_none());
    c.handle_tick(t0 + 350 * MS);
    let d = decision(&actions(&mut c)).unwrap();
    assert_eq!(
        (d.state, d.path),
        (ServerState::Leading, DecisionPath::FinalizeWait)
    );

    // a better vote during the wait ends it and is processed
    let mut c = core(2, &[1, 2, 3], &[], zk(), data(0, 0));
    c.start(t0);
    c.handle_notification(t0, sid(1), looking(2, Zxid::ZERO, 1, 0));
    assert!(c.next_deadline() == Some(t0 + 200 * MS));
    c.handle_notification(t0 + 100 * MS, sid(3), looking(3, Zxid::ZERO, 1, 0));
    assert_eq!(c.proposal().leader, sid(3));
    let a = actions(&mut c);
    assert!(decision(&a).is_none());
    // the resent proposal is looped back: {2, 3} agree on 3 → a new quorum wait
    assert_eq!(c.next_deadline(), Some(t0 + 300 * MS));
}

#[test]
fn notification_timeout_doubles_up_to_the_cap_and_asks_to_connect() {
    let t0 = Instant::now();
    let config = zk().with_max_notification_interval(1000 * MS);
    let mut c = core(1, &[1, 2, 3], &[], config, data(0, 0));
    c.start(t0);
    actions(&mut c);
    let mut t = t0;
    let mut waits = Vec::new();
    for _ in 0..5 {
        let next = c.next_deadline().unwrap();
        waits.push((next - t).as_millis());
        t = next;
        c.handle_tick(t);
        // nobody connected: connectAll
        assert_eq!(actions(&mut c), vec![Action::ConnectAll]);
    }
    assert_eq!(waits, vec![200, 400, 800, 1000, 1000]);
    // with a peer connected the timeout re-sends the proposal instead
    c.connection_up(t, sid(2));
    t = c.next_deadline().unwrap();
    c.handle_tick(t);
    let s = sends(&actions(&mut c));
    assert_eq!(s.iter().map(|(to, _)| to.0).collect::<Vec<_>>(), vec![2, 3]);
}

#[test]
fn fast_decide_skips_finalize_wait_when_every_connected_voter_agrees() {
    let mut net = Net::new(&[1, 2, 3], &[], ElectionConfig::default(), |_| data(0, 0));
    net.connect_all();
    net.start(&[1, 2, 3]);
    net.deliver_all(10_000);
    assert!(net.all_decided(), "decided without any time passing");
    assert_eq!(net.ms(), 0);
    assert_eq!(net.view(3).0, ServerState::Leading);
    assert_eq!(
        net.last_decision(3).unwrap().path,
        DecisionPath::AllConnectedAgreed
    );
}

#[test]
fn fast_decide_waits_while_a_connected_voter_has_not_agreed() {
    let t0 = Instant::now();
    let mut c = core(3, &[1, 2, 3], &[], ElectionConfig::default(), data(0, 0));
    c.connection_up(t0, sid(1));
    c.connection_up(t0, sid(2));
    c.start(t0);
    c.handle_notification(t0, sid(1), looking(3, Zxid::ZERO, 1, 0));
    // {1, 3} is a quorum but 2 is connected and silent: ZooKeeper's wait applies
    assert!(decision(&actions(&mut c)).is_none());
    assert_eq!(c.next_deadline(), Some(t0 + 200 * MS));
    // 2 disconnects: every connected voter now agrees
    c.connection_down(t0 + MS, sid(2));
    let d = decision(&actions(&mut c)).unwrap();
    assert_eq!(d.path, DecisionPath::AllConnectedAgreed);
}

#[test]
fn zero_weight_voter_is_never_elected() {
    let members: BTreeMap<ServerId, ServerEntry> = (1..=3)
        .map(|i| (sid(i), ServerEntry::participant("")))
        .collect();
    let groups = BTreeMap::from([(1, vec![sid(1), sid(2), sid(3)])]);
    let weights = BTreeMap::from([(sid(3), 0)]);
    let qv: Arc<dyn QuorumVerifier> =
        Arc::new(QuorumHierarchical::new(members, groups, weights, 0).unwrap());
    // 3 has the best data but weight 0
    let mut net = Net::with_verifier(qv, &[1, 2, 3], &[], zk(), |i| {
        if i == 3 {
            data(5, 5)
        } else {
            data(1, 1)
        }
    });
    net.connect_all();
    net.start(&[1, 2, 3]);
    assert!(net.run_until_decided(Duration::from_secs(2)));
    assert_eq!(net.view(2), (ServerState::Leading, sid(2)));
    assert_eq!(net.view(3), (ServerState::Following, sid(2)));
}

// ---------------------------------------------------------------- regressions

/// The ZOOKEEPER-1514 schedule (ZooKeeper's `FLEBackwardElectionRoundTest`): server 3 is
/// LOOKING in round 5 and receives FOLLOWING votes for itself of round 4 from a quorum. Returns
/// what those old-round votes made it decide, if anything; `old_rule` is applied to the core
/// first.
fn zookeeper_1514_old_round_votes(
    old_rule: impl FnOnce(&mut FastLeaderElection),
) -> (FastLeaderElection, Option<zab_core::Decision>) {
    let t0 = Instant::now();
    let mut c = core(3, &[1, 2, 3], &[], zk(), data(1, 0));
    old_rule(&mut c);
    // we are in round 5 (four earlier elections of ours)
    for _ in 0..5 {
        c.start(t0);
    }
    actions(&mut c);
    assert_eq!(c.logical_clock(), 5);
    for from in [1, 2] {
        c.handle_notification(
            t0,
            sid(from),
            in_state(ServerState::Following, 3, Zxid::ZERO, 4, 1),
        );
    }
    let d = decision(&actions(&mut c));
    (c, d)
}

/// ZOOKEEPER-1514: a would-be leader must not accept FOLLOWING votes for itself from an old
/// round (`checkLeader` requires `logicalclock == round` when the leader is us).
#[test]
fn zookeeper_1514_old_round_following_votes_for_us_do_not_make_us_lead() {
    let (mut c, d) = zookeeper_1514_old_round_votes(|_| {});
    assert_eq!(d, None, "old-round FOLLOWING votes decided the election");
    assert_eq!(c.state(), ServerState::Looking);
    assert_eq!(c.logical_clock(), 5);
    // the same votes of our round do elect us
    let t0 = Instant::now();
    for from in [1, 2] {
        c.handle_notification(
            t0,
            sid(from),
            in_state(ServerState::Following, 3, Zxid::ZERO, 5, 1),
        );
    }
    let d = decision(&actions(&mut c)).unwrap();
    assert_eq!(d.state, ServerState::Leading);
}

/// The same schedule under `checkLeader` as it was before ZOOKEEPER-1514: the old-round votes
/// make server 3 lead and set its round back from 5 to 4 (the followers that elect it again
/// are in round 5, so leader and followers disagree on the round).
#[cfg(feature = "never-in-production")]
#[test]
fn zookeeper_1514_pre_fix_check_leader_leads_on_old_round_votes() {
    let (c, d) =
        zookeeper_1514_old_round_votes(FastLeaderElection::use_pre_1514_check_leader_for_tests);
    let d = d.expect("the pre-fix checkLeader did not lead on the old-round votes");
    assert_eq!(
        (d.state, d.vote.leader, d.path),
        (ServerState::Leading, sid(3), DecisionPath::OutOfElection)
    );
    assert_eq!(c.logical_clock(), 4, "round set back to the votes' round");
}

/// `checkLeader`: a server never follows a leader that did not itself say LEADING (the
/// followers of a crashed leader keep voting for it).
#[test]
fn check_leader_needs_the_leaders_own_leading_vote() {
    let t0 = Instant::now();
    let mut c = core(1, &[1, 2, 3, 4, 5], &[], zk(), data(1, 0));
    c.start(t0);
    for from in [2, 4] {
        c.handle_notification(
            t0,
            sid(from),
            in_state(ServerState::Following, 3, Zxid::ZERO, 1, 1),
        );
    }
    assert!(decision(&actions(&mut c)).is_none());
    c.handle_notification(
        t0,
        sid(3),
        in_state(ServerState::Leading, 3, Zxid::ZERO, 1, 1),
    );
    let d = decision(&actions(&mut c)).unwrap();
    assert_eq!((d.state, d.vote.leader), (ServerState::Following, sid(3)));
}

/// ZOOKEEPER-975: a restarted server must join the running leader; stale LOOKING votes
/// replayed by the transport and votes from non-voters must not make it lead. (The stale vote
/// ZooKeeper replays is the sender's last message, capacity-1 queues drop older ones.)
#[test]
fn zookeeper_975_restarted_peer_joins_the_running_leader_despite_stale_votes() {
    let mut net = Net::new(&[1, 2, 3], &[9], zk(), |_| data(0, 0));
    net.connect_all();
    net.start(&[1, 2, 3, 9]);
    assert!(net.run_until_decided(Duration::from_secs(2)));
    for i in [1, 2, 3, 9] {
        net.nodes.get_mut(&sid(i)).unwrap().update_election_vote(1);
    }
    // Epoch 1 logged transactions; 2 restarts (new process: round 0 again).
    let qv = net.qv.clone();
    net.nodes.insert(
        sid(2),
        FastLeaderElection::new(zk(), sid(2), LearnerType::Participant, qv, data(1, 5)),
    );
    net.connect_all();
    let t = net.now;
    let restarted = net.nodes.get_mut(&sid(2)).unwrap();
    restarted.start(t);
    // replayed stale round-1 LOOKING vote of 1, and a non-voter's vote for 2
    restarted.handle_notification(t, sid(1), looking(3, Zxid::ZERO, 1, 0));
    restarted.handle_notification(t, sid(9), looking(2, Zxid::new(1, 5), 1, 1));
    net.pump();
    assert!(net.run_until_decided(Duration::from_secs(2)));
    assert_eq!(net.view(2), (ServerState::Following, sid(3)));
    assert_eq!(net.view(3).0, ServerState::Leading);
}

/// The ZOOKEEPER-975 schedule (ZooKeeper's `FLETest.testJoin`): servers 1 and 2 elect 2 while
/// 3 is down; then 3, the largest id with the same history, starts and first receives the
/// LOOKING votes of round 1 that 1 and 2 had queued for it (the last vote each sent: for 2),
/// before their FOLLOWING/LEADING answers. `old_rule` is applied to 3's core. Returns the net
/// after 3 decided.
fn zookeeper_975_join(old_rule: impl FnOnce(&mut FastLeaderElection)) -> Net {
    let mut net = Net::new(&[1, 2, 3], &[], zk(), |_| data(1, 5));
    net.down.insert(sid(3));
    net.connect_all();
    net.start(&[1, 2]);
    assert!(net.run_until_decided(Duration::from_secs(2)));
    assert_eq!(net.view(2), (ServerState::Leading, sid(2)));
    for i in [1, 2] {
        net.nodes.get_mut(&sid(i)).unwrap().update_election_vote(2);
    }
    // 3 starts: a new process, round 1.
    net.down.remove(&sid(3));
    let qv = net.qv.clone();
    let mut joining =
        FastLeaderElection::new(zk(), sid(3), LearnerType::Participant, qv, data(1, 5));
    old_rule(&mut joining);
    net.nodes.insert(sid(3), joining);
    net.connect_all();
    let t = net.now;
    let joining = net.nodes.get_mut(&sid(3)).unwrap();
    joining.start(t);
    for from in [1, 2] {
        joining.handle_notification(t, sid(from), looking(2, Zxid::new(1, 5), 1, 1));
    }
    net.pump();
    assert!(net.run_until_decided(Duration::from_secs(2)));
    net
}

/// ZOOKEEPER-975: a server joining a running ensemble must follow its leader, although it has
/// the largest id and a LOOKING vote of its round from every voter (the stale ones).
#[test]
fn zookeeper_975_joining_server_with_stale_votes_from_every_voter_follows() {
    let net = zookeeper_975_join(|_| {});
    assert_eq!(net.view(3), (ServerState::Following, sid(2)));
    assert_eq!(net.view(2), (ServerState::Leading, sid(2)));
    let d = net.last_decision(3).unwrap();
    assert_ne!(d.path, DecisionPath::Pre975AllVotersHeard);
}

/// The same schedule under the termination rule ZooKeeper had before ZOOKEEPER-975 (a vote
/// from every voter ends the election with our own proposal): server 3 goes LEADING although
/// 2 leads a quorum.
#[cfg(feature = "never-in-production")]
#[test]
fn zookeeper_975_pre_fix_termination_makes_the_joining_server_lead() {
    let net = zookeeper_975_join(FastLeaderElection::use_pre_975_termination_for_tests);
    assert_eq!(net.view(3), (ServerState::Leading, sid(3)));
    assert_eq!(net.view(2), (ServerState::Leading, sid(2)));
    let d = net.last_decision(3).unwrap();
    assert_eq!(d.path, DecisionPath::Pre975AllVotersHeard);
}

/// ZOOKEEPER-1732/1805/1818: a restarted server joins an established ensemble from FOLLOWING
/// and LEADING votes of another round, compared on (leader, peer epoch) only; the votes carry
/// the epoch set by `update_election_vote`.
#[test]
fn zookeeper_1732_restarted_server_joins_from_out_of_election_votes() {
    let mut net = Net::new(&[1, 2, 3], &[], zk(), |_| data(0, 0));
    net.connect_all();
    net.start(&[1, 2, 3]);
    assert!(net.run_until_decided(Duration::from_secs(2)));
    for i in [1, 3] {
        net.nodes.get_mut(&sid(i)).unwrap().update_election_vote(1);
    }
    let qv = net.qv.clone();
    let mut fresh = FastLeaderElection::new(zk(), sid(2), LearnerType::Participant, qv, data(1, 2));
    let t = net.now;
    // the restarted server runs a few failed elections alone first: round 3
    for _ in 0..3 {
        fresh.start(t);
    }
    net.nodes.insert(sid(2), fresh);
    net.connect_all();
    net.pump();
    assert!(net.run_until_decided(Duration::from_secs(5)));
    assert_eq!(net.view(2), (ServerState::Following, sid(3)));
    let d = net.last_decision(2).unwrap();
    assert_eq!(d.path, DecisionPath::OutOfElection);
    assert_eq!(
        d.vote.election_epoch, 1,
        "logicalclock set to the ensemble's round"
    );
    assert_eq!(net.nodes[&sid(2)].logical_clock(), 1);
}

/// A well-framed version-2 notification with config length 0 kills ZooKeeper 3.8.0's
/// receiver; here it is a normal vote and the election goes on.
#[test]
fn config_length_0_notification_keeps_the_election_running() {
    let t0 = Instant::now();
    let mut c = core(1, &[1, 2, 3], &[], zk(), data(0, 0));
    c.start(t0);
    actions(&mut c);
    let mut frame = Vec::new();
    frame.extend_from_slice(&0i32.to_be_bytes());
    frame.extend_from_slice(&3i64.to_be_bytes());
    frame.extend_from_slice(&0i64.to_be_bytes());
    frame.extend_from_slice(&1i64.to_be_bytes());
    frame.extend_from_slice(&0i64.to_be_bytes());
    frame.extend_from_slice(&2i32.to_be_bytes());
    frame.extend_from_slice(&0i32.to_be_bytes());
    let n = zab_core::Notification::decode(&frame).unwrap();
    assert_eq!(n.config, None);
    c.handle_notification(t0, sid(3), n);
    assert_eq!(c.proposal().leader, sid(3));
    // and the next well-formed vote still counts
    c.handle_notification(t0, sid(2), looking(3, Zxid::ZERO, 1, 0));
    c.handle_tick(t0 + 200 * MS);
    let d = decision(&actions(&mut c)).unwrap();
    assert_eq!((d.state, d.vote.leader), (ServerState::Following, sid(3)));
}
