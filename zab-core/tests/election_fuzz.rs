//! Bounded fuzzing of the election core with bolero: arbitrary notifications from arbitrary
//! senders (voters, observers, unknown ids, ourselves), ticks and connection events never make
//! it panic or hang, and every decision it takes rests on a quorum.

use std::sync::Arc;
use std::time::{Duration, Instant};

use zab_core::{
    Action, Candidate, ElectionConfig, FastLeaderElection, LearnerType, Notification, QuorumMaj,
    QuorumVerifier, ServerId, ServerState, VoteData, Zxid,
};

/// One input: (kind, sender, state, leader, zxid, round, peer epoch, milliseconds to wait).
type Step = (u8, u8, u8, i8, i8, i8, i8, u8);

fn run(me: i64, fast: bool, steps: &[Step]) {
    let qv: Arc<dyn QuorumVerifier> = Arc::new(QuorumMaj::with_ids([1, 2, 3, 4, 5], [6]));
    let lt = if me == 6 {
        LearnerType::Observer
    } else {
        LearnerType::Participant
    };
    let config = ElectionConfig::zookeeper().with_fast_decide(fast);
    let mut fle = FastLeaderElection::new(
        config,
        ServerId(me),
        lt,
        qv.clone(),
        VoteData::new(Zxid::new(1, 3), 1),
    );
    let mut now = Instant::now();
    fle.start(now);
    let mut last: Option<(i64, Candidate)> = None;
    for &(kind, from, state, leader, zxid, round, epoch, wait) in steps {
        now += Duration::from_millis(u64::from(wait));
        let from = ServerId(i64::from(from % 8));
        match kind % 8 {
            0 => fle.handle_tick(now),
            1 => fle.connection_up(now, from),
            2 => fle.connection_down(now, from),
            3 if fle.state() != ServerState::Looking => fle.start(now),
            _ => {
                let n = Notification {
                    state: ServerState::from_wire(i32::from(state % 4))
                        .unwrap_or(ServerState::Looking),
                    leader: ServerId(i64::from(leader % 8)),
                    zxid: Zxid(i64::from(zxid)),
                    election_epoch: i64::from(round % 6),
                    peer_epoch: i64::from(epoch % 4),
                    version: 2,
                    config: None,
                };
                fle.handle_notification(now, from, n);
            }
        }
        // within a round, a LOOKING server's proposal never goes down (ZooKeeper's order)
        if fle.is_electing() {
            let cur = (fle.logical_clock(), fle.proposal().candidate());
            if let Some((round, prev)) = last {
                if round == cur.0 {
                    assert!(
                        cur.1 >= prev,
                        "proposal went down in round {round}: {prev:?} -> {:?}",
                        cur.1
                    );
                }
            }
            last = Some(cur);
        } else {
            last = None;
        }
        while let Some(a) = fle.poll_action() {
            match a {
                Action::Decided(d) => {
                    assert!(
                        qv.contains_quorum(&d.supporters),
                        "decided without quorum: {d:?}"
                    );
                    assert!(qv.is_voter(d.vote.leader));
                    if me == 6 {
                        assert_eq!(d.state, ServerState::Observing);
                    }
                }
                Action::Send { to, .. } => assert_ne!(to, ServerId(me), "sends to itself"),
                Action::ConnectAll => {}
            }
        }
    }
}

#[test]
fn fuzz_election_inputs_never_panic_and_decisions_rest_on_a_quorum() {
    bolero::check!()
        .with_type::<(bool, u8, Vec<Step>)>()
        .for_each(|(fast, who, steps)| {
            let me = [1, 3, 5, 6][usize::from(*who % 4)];
            run(me, *fast, steps);
        });
}
