//! Unit tests of [`Partition`] per behaviour (K4, K8), the regression scenarios that the 0.8 design
//! fails (KIP-101, KIP-279, KAFKA-7128), and property tests over random interleavings.

use super::*;
use crate::epoch_cache::EpochEndOffset;
use crate::isr::MemoryIsrWriter;
use crate::log::{test_util::batch, MemoryLog};
use crate::sim::{unwrap, Sim};

fn tp() -> TopicPartition {
    TopicPartition::new("t", 0)
}

fn state(leader: BrokerId, epoch: i32, isr: &[BrokerId]) -> PartitionState {
    PartitionState {
        controller_epoch: 1,
        leader,
        leader_epoch: epoch,
        isr: isr.to_vec(),
        partition_epoch: epoch,
        replicas: vec![1, 2, 3],
    }
}

fn leader(config: PartitionConfig) -> Partition<MemoryLog> {
    let mut p = Partition::new(tp(), 1, MemoryLog::new(), config);
    unwrap(p.make_leader(0, &state(1, 0, &[1, 2, 3])));
    p
}

fn follower_fetch(p: &mut Partition<MemoryLog>, now: u64, id: BrokerId, offset: i64) -> FetchRead {
    unwrap(p.fetch_records(
        now,
        &FetchParams {
            replica_id: id,
            fetch_offset: offset,
            log_start_offset: 0,
            max_bytes: 1 << 20,
            min_one_batch: true,
            current_leader_epoch: Some(p.leader_epoch()),
            last_fetched_epoch: None,
        },
    ))
}

fn commit_isr(p: &mut Partition<MemoryLog>, store: &mut MemoryIsrWriter) -> bool {
    match p.poll_isr_proposal() {
        Some(proposal) => {
            let r = store.propose_now(&proposal);
            p.on_isr_result(&proposal, r);
            true
        }
        None => false,
    }
}

#[test]
fn k8_2_follower_fetch_updates_leo_and_high_watermark() {
    let mut p = leader(PartitionConfig::default());
    unwrap(p.append_as_leader(batch(3), 1));
    assert_eq!(p.high_watermark(), 0, "followers' LEOs are unknown");
    follower_fetch(&mut p, 10, 2, 3);
    assert_eq!(p.high_watermark(), 0, "follower 3 still unknown");
    let r = follower_fetch(&mut p, 10, 3, 2);
    assert_eq!(p.high_watermark(), 2);
    assert!(r.high_watermark_advanced);
    assert_eq!(r.high_watermark, 2);
    follower_fetch(&mut p, 11, 3, 3);
    assert_eq!(p.high_watermark(), 3);
    assert_eq!(p.replica_state(3).map(|r| r.log_end_offset), Some(3));
}

#[test]
fn k8_1_consumers_read_to_the_high_watermark_followers_to_the_leo() {
    let mut p = leader(PartitionConfig::default());
    unwrap(p.append_as_leader(batch(2), 1));
    let consumer = FetchParams {
        replica_id: CONSUMER_REPLICA_ID,
        fetch_offset: 0,
        log_start_offset: -1,
        max_bytes: 1 << 20,
        min_one_batch: true,
        current_leader_epoch: None,
        last_fetched_epoch: None,
    };
    assert!(unwrap(p.fetch_records(0, &consumer)).records.is_empty());
    assert!(!follower_fetch(&mut p, 0, 2, 0).records.is_empty());
    follower_fetch(&mut p, 0, 2, 2);
    follower_fetch(&mut p, 0, 3, 2);
    assert_eq!(p.high_watermark(), 2);
    assert!(!unwrap(p.fetch_records(0, &consumer)).records.is_empty());
}

#[test]
fn kip_320_fetch_with_old_or_new_leader_epoch_is_fenced() {
    let mut p = leader(PartitionConfig::default());
    unwrap(p.make_leader(0, &state(1, 5, &[1, 2, 3])));
    let mut params = FetchParams {
        replica_id: 2,
        fetch_offset: 0,
        log_start_offset: 0,
        max_bytes: 100,
        min_one_batch: true,
        current_leader_epoch: Some(4),
        last_fetched_epoch: None,
    };
    let e = p.fetch_records(0, &params).err().map(|e| e.error_code());
    assert_eq!(e, Some(ErrorCode::FencedLeaderEpoch));
    params.current_leader_epoch = Some(6);
    let e = p.fetch_records(0, &params).err().map(|e| e.error_code());
    assert_eq!(e, Some(ErrorCode::UnknownLeaderEpoch));
    params.current_leader_epoch = Some(5);
    assert!(p.fetch_records(0, &params).is_ok());
    params.fetch_offset = 9;
    let e = p.fetch_records(0, &params).err().map(|e| e.error_code());
    assert_eq!(e, Some(ErrorCode::OffsetOutOfRange));
    params.replica_id = 7;
    let e = p.fetch_records(0, &params).err().map(|e| e.error_code());
    assert_eq!(
        e,
        Some(ErrorCode::NotLeaderOrFollower),
        "not an assigned replica"
    );
}

#[test]
fn k8_2_isr_shrinks_when_a_follower_is_not_caught_up_within_the_lag_time() {
    let config = PartitionConfig {
        replica_lag_time_max_ms: 30_000,
        min_insync_replicas: 1,
    };
    assert_eq!(config.isr_check_interval_ms(), 15_000);
    let mut store = MemoryIsrWriter::new();
    store.set(
        tp(),
        LeaderAndIsr {
            leader: 1,
            leader_epoch: 0,
            isr: vec![1, 2, 3],
            partition_epoch: 0,
        },
    );
    let mut p = leader(config);
    unwrap(p.append_as_leader(batch(1), 1));
    follower_fetch(&mut p, 1_000, 2, 1);
    follower_fetch(&mut p, 1_000, 3, 1);
    unwrap(p.append_as_leader(batch(1), 1));
    // Follower 2 keeps fetching to the end; follower 3 stops.
    follower_fetch(&mut p, 20_000, 2, 2);
    assert!(
        !p.maybe_shrink_isr(31_000),
        "3 was caught up at 1000 and the LEO moved at 1000"
    );
    assert!(p.maybe_shrink_isr(31_001));
    assert_eq!(p.pending_isr(), Some(&[1, 2][..]));
    // Pessimistic shrink: until committed, the maximal ISR still holds 3.
    assert_eq!(p.maximal_isr(), vec![1, 2, 3]);
    assert_eq!(p.high_watermark(), 1);
    assert!(commit_isr(&mut p, &mut store));
    assert_eq!(p.isr(), &[1, 2]);
    assert_eq!(p.partition_epoch(), 1);
    assert_eq!(p.high_watermark(), 2, "HW advances once 3 left the ISR");
}

#[test]
fn k8_2_isr_expansion_counts_at_once_and_needs_the_epoch_start_offset() {
    let mut store = MemoryIsrWriter::new();
    store.set(
        tp(),
        LeaderAndIsr {
            leader: 1,
            leader_epoch: 0,
            isr: vec![1],
            partition_epoch: 0,
        },
    );
    let mut p = Partition::new(tp(), 1, MemoryLog::new(), PartitionConfig::default());
    let mut s = state(1, 0, &[1]);
    s.partition_epoch = 0;
    unwrap(p.make_leader(0, &s));
    unwrap(p.append_as_leader(batch(2), -1));
    assert_eq!(p.high_watermark(), 2, "an ISR of one commits at once");
    follower_fetch(&mut p, 5, 2, 0);
    assert_eq!(p.pending_isr(), None, "LEO 0 is below the HW");
    follower_fetch(&mut p, 6, 2, 2);
    assert_eq!(p.pending_isr(), Some(&[1, 2][..]));
    // Optimistic expansion: the maximal ISR holds 2 before the store answers.
    assert_eq!(p.maximal_isr(), vec![1, 2]);
    unwrap(p.append_as_leader(batch(1), -1));
    assert_eq!(
        p.high_watermark(),
        2,
        "2 must replicate before the HW moves"
    );
    assert!(commit_isr(&mut p, &mut store));
    assert_eq!(p.isr(), &[1, 2]);
}

#[test]
fn k4_3_make_leader_records_the_epoch_start_offset_in_the_cache() {
    let mut p = leader(PartitionConfig::default());
    unwrap(p.append_as_leader(batch(4), 1));
    unwrap(p.make_leader(100, &state(1, 3, &[1, 2, 3])));
    assert_eq!(p.leader_epoch_start_offset(), Some(4));
    assert_eq!(p.log().epoch_cache().start_offset_of(3), Some(4));
    assert_eq!(
        unwrap(p.last_offset_for_leader_epoch(Some(3), 0)),
        EpochEndOffset {
            epoch: 0,
            end_offset: 4
        }
    );
    // A stale state is refused.
    assert!(matches!(
        p.make_leader(100, &state(1, 2, &[1])),
        Err(PartitionError::StaleLeaderEpoch { .. })
    ));
    assert!(matches!(
        p.make_follower(&state(2, 2, &[2])),
        Err(PartitionError::StaleLeaderEpoch { .. })
    ));
}

#[test]
fn min_insync_replicas_before_and_after_append() {
    let config = PartitionConfig {
        replica_lag_time_max_ms: 30_000,
        min_insync_replicas: 2,
    };
    let mut p = Partition::new(tp(), 1, MemoryLog::new(), config);
    unwrap(p.make_leader(0, &state(1, 0, &[1])));
    assert!(matches!(
        p.append_as_leader(batch(1), -1),
        Err(PartitionError::NotEnoughReplicas {
            isr: 1,
            required: 2
        })
    ));
    let (info, _) = unwrap(p.append_as_leader(batch(1), 1));
    assert_eq!(
        unwrap(p.check_enough_replicas_reach_offset(info.last_offset + 1)),
        AckCheck::Done(ErrorCode::NotEnoughReplicasAfterAppend)
    );
    unwrap(p.make_leader(0, &state(1, 1, &[1, 2])));
    let (info, _) = unwrap(p.append_as_leader(batch(1), -1));
    assert_eq!(
        unwrap(p.check_enough_replicas_reach_offset(info.last_offset + 1)),
        AckCheck::Pending
    );
    follower_fetch(&mut p, 0, 2, 2);
    assert_eq!(
        unwrap(p.check_enough_replicas_reach_offset(info.last_offset + 1)),
        AckCheck::Done(ErrorCode::None)
    );
}

#[test]
fn follower_high_watermark_is_min_of_leader_hw_and_own_leo() {
    let mut p = Partition::new(tp(), 2, MemoryLog::new(), PartitionConfig::default());
    assert!(unwrap(p.make_follower(&state(1, 0, &[1, 2]))));
    let mut records = bytes::BytesMut::from(&batch(3)[..]);
    unwrap(kafka_wire::records::rewrite_record_set(&mut records, 0, 0));
    unwrap(p.append_as_follower(records.freeze(), 10));
    assert_eq!(p.high_watermark(), 3);
    p.update_follower_high_watermark(1);
    assert_eq!(p.high_watermark(), 1);
    assert!(
        !unwrap(p.make_follower(&state(1, 0, &[1, 2]))),
        "same leader and epoch"
    );
}

#[test]
fn fetch_v12_diverging_epoch_truncates_the_follower() {
    let mut sim = Sim::new(2, Legacy::default());
    sim.diverging_epoch_fetch = true;
    sim.append(1, 1);
    sim.settle();
    // Leader 1 writes in epoch 1 without replicating, then 2 takes over (bounce).
    sim.controller_write(1, vec![1, 2]);
    sim.append(1, 1);
    sim.controller_write(2, vec![1, 2]);
    sim.append(2, 1);
    sim.settle();
    assert!(!sim.diverged(1, 2));
    assert_eq!(sim.leo(1), sim.leo(2));
}

// ---- regression scenarios: the 0.8 design fails them, ours passes ----

/// KIP-101 scenario 1: the follower truncates to its (lagging) HW on restart, then is
/// elected before it fetched again: a committed record is gone.
fn kip_101_scenario(legacy: Legacy) -> Sim {
    let mut sim = Sim::new(2, legacy);
    sim.append(1, -1);
    sim.fetch(2, false);
    sim.fetch(2, false);
    sim.append(1, -1);
    sim.fetch(2, false);
    // The leader learns 2 has offset 1 and commits it; 2 never sees the new HW.
    sim.fetch(2, true);
    assert_eq!(sim.committed_offset, 2);
    assert_eq!(sim.partition(2).high_watermark(), 1);
    sim.bounce_down(2);
    sim.restart(2);
    sim.crash(1);
    assert_eq!(sim.leader(), Some(2));
    sim
}

#[test]
fn kip_101_truncating_to_the_high_watermark_loses_a_committed_record() {
    let legacy = kip_101_scenario(Legacy {
        truncate_to_high_watermark: true,
        ..Legacy::default()
    });
    assert!(
        !legacy.has_committed(2),
        "0.8 design: the new leader lost offset 1"
    );
    let ours = kip_101_scenario(Legacy::default());
    assert!(ours.has_committed(2), "epoch-based truncation keeps it");
    ours.check_invariants();
}

/// KIP-279: fast leader changes; the leader does not know the follower's latest epoch.
fn kip_279_scenario(legacy: Legacy) -> Sim {
    let mut sim = Sim::new(2, legacy);
    sim.append(1, -1);
    sim.settle();
    // Epoch 1, leader 1: offset 1 written, not replicated.
    sim.controller_write(1, vec![1, 2]);
    sim.append(1, 1);
    // Epoch 2, leader 2 (1 bounced away without truncating yet): a different offset 1.
    sim.controller_write(2, vec![1, 2]);
    sim.append(1, 1);
    // 2 fails at once; epoch 3, leader 1 again; 2 comes back and follows.
    sim.bounce_down(2);
    sim.controller_write(1, vec![1]);
    sim.restart(2);
    sim.settle();
    sim
}

#[test]
fn kip_279_fast_leader_changes_leave_logs_diverged_without_epoch_iteration() {
    let legacy = kip_279_scenario(Legacy {
        offset_for_leader_epoch_v0: true,
        ..Legacy::default()
    });
    assert!(
        legacy.diverged(1, 2),
        "OffsetForLeaderEpoch v0: offset 1 differs forever"
    );
    let ours = kip_279_scenario(Legacy::default());
    assert!(!ours.diverged(1, 2), "iterating by epoch converges");
    assert_eq!(ours.leo(1), ours.leo(2));
}

/// KAFKA-7128: a follower rejoins the ISR at the new leader's stale HW, then is elected.
fn kafka_7128_scenario(legacy: Legacy) -> Sim {
    let mut sim = Sim::new(4, legacy);
    sim.append(1, -1);
    sim.settle();
    // 3 stops fetching; 2 and 4 go on, and 3 drops out of the ISR.
    sim.append(2, 1);
    sim.tick(5_000);
    sim.fetch(2, false);
    sim.fetch(4, false);
    sim.fetch(2, true); // 2 is at the leader's end; the response with the new HW is lost
    sim.fetch(4, true);
    sim.tick(5_001);
    assert_eq!(sim.state().isr, vec![1, 2, 4]);
    // With 3 gone the leader commits offsets 1..2; 2 keeps a stale HW of 1.
    assert_eq!(sim.committed_offset, 3);
    assert_eq!(sim.partition(2).high_watermark(), 1);
    sim.crash(1);
    assert_eq!(sim.leader(), Some(2));
    assert_eq!(
        sim.partition(2).high_watermark(),
        1,
        "4's LEO is not known yet"
    );
    // 3 truncates by epoch and fetches from offset 1; the response is lost.
    sim.fetch(3, true);
    sim.crash(4);
    sim.crash(2);
    sim
}

#[test]
fn kafka_7128_isr_expansion_before_reaching_the_epoch_start_loses_committed_data() {
    let legacy = kafka_7128_scenario(Legacy {
        expand_isr_at_high_watermark: true,
        ..Legacy::default()
    });
    assert_eq!(
        legacy.leader(),
        Some(3),
        "3 had rejoined the ISR and was elected"
    );
    assert!(
        !legacy.has_committed(3),
        "offsets 1..2 were acknowledged and are gone"
    );
    let ours = kafka_7128_scenario(Legacy::default());
    assert_eq!(
        ours.leader(),
        None,
        "3 never rejoined: no unsafe clean election"
    );
    assert_eq!(ours.state().isr, vec![2]);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Step {
        Append(usize),
        Fetch(BrokerId),
        FetchLost(BrokerId),
        Tick(u64),
        DeliverIsr,
        Crash(BrokerId),
        Bounce(BrokerId),
        Restart(BrokerId),
        Elect,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (1usize..4).prop_map(Step::Append),
            6 => (1..=3).prop_map(Step::Fetch),
            1 => (1..=3).prop_map(Step::FetchLost),
            2 => (1u64..8_000).prop_map(Step::Tick),
            2 => Just(Step::DeliverIsr),
            1 => (1..=3).prop_map(Step::Crash),
            1 => (1..=3).prop_map(Step::Bounce),
            2 => (1..=3).prop_map(Step::Restart),
            1 => Just(Step::Elect),
        ]
    }

    fn run(steps: &[Step], diverging_epoch_fetch: bool) {
        let mut sim = Sim::new(3, Legacy::default());
        sim.auto_commit_isr = false;
        sim.diverging_epoch_fetch = diverging_epoch_fetch;
        for s in steps {
            match s {
                Step::Append(n) => {
                    sim.append(*n, 1);
                }
                Step::Fetch(id) => sim.fetch(*id, false),
                Step::FetchLost(id) => sim.fetch(*id, true),
                Step::Tick(ms) => sim.tick(*ms),
                Step::DeliverIsr => sim.deliver_isr(),
                Step::Crash(id) => sim.crash(*id),
                Step::Bounce(id) => {
                    // A bounce keeps the broker in the ISR; only do it to followers so the
                    // controller's view stays true enough for clean elections.
                    if sim.leader() != Some(*id) {
                        sim.bounce_down(*id);
                    }
                }
                Step::Restart(id) => sim.restart(*id),
                Step::Elect => {
                    let current = sim.leader();
                    sim.elect(current);
                }
            }
            sim.check_invariants();
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// HW ≤ every ISR member's LEO, HW never moves back on a leader (checked on every
        /// step), nothing below the HW is lost from an ISR member — with OffsetForLeaderEpoch.
        #[test]
        fn isr_hw_invariants_hold_under_random_interleavings(
            steps in proptest::collection::vec(step(), 1..120)
        ) {
            run(&steps, false);
        }

        /// The same with Fetch v12 diverging epochs instead of OffsetForLeaderEpoch.
        #[test]
        fn isr_hw_invariants_hold_with_diverging_epoch_fetches(
            steps in proptest::collection::vec(step(), 1..120)
        ) {
            run(&steps, true);
        }
    }
}

/// A leader whose follower 3 lags proposes the shrink to [1, 2].
fn leader_proposing_shrink() -> (Partition<MemoryLog>, IsrProposal) {
    let config = PartitionConfig {
        replica_lag_time_max_ms: 30_000,
        min_insync_replicas: 1,
    };
    let mut p = leader(config);
    unwrap(p.append_as_leader(batch(1), 1));
    follower_fetch(&mut p, 1_000, 2, 1);
    follower_fetch(&mut p, 1_000, 3, 1);
    unwrap(p.append_as_leader(batch(1), 1));
    follower_fetch(&mut p, 20_000, 2, 2);
    assert!(p.maybe_shrink_isr(31_001));
    let Some(proposal) = p.poll_isr_proposal() else {
        panic!("no proposal")
    };
    assert_eq!(proposal.proposed.isr, vec![1, 2]);
    (p, proposal)
}

/// Found by the real-core simulation (`ha-tests`, `StrongIsr`): a shrink's write was slow; a
/// LeaderAndIsr of a newer epoch replaced the leadership, and the leader proposed an
/// expansion; the old write's answer — the state it read — arrived first and was taken as
/// the expansion's outcome, so when the expansion landed the leader no longer counted the new
/// member and its HW passed it. An answer now only settles the proposal it answers.
#[test]
fn k8_2_answer_to_an_earlier_isr_proposal_is_ignored() {
    let (mut p, old) = leader_proposing_shrink();
    // The controller moves the leadership on: epoch 1, ISR [1, 2], partition epoch 3.
    let mut s = state(1, 1, &[1, 2]);
    s.partition_epoch = 3;
    unwrap(p.make_leader(31_002, &s));
    assert_eq!(p.pending_isr(), None);
    // Follower 3 catches up from the new epoch's start: expansion to [1, 2, 3].
    follower_fetch(&mut p, 31_003, 3, 2);
    let Some(expansion) = p.poll_isr_proposal() else {
        panic!("no expansion")
    };
    assert_eq!(expansion.proposed.isr, vec![1, 2, 3]);
    // The old shrink's answer: a conflict with the state the store holds now.
    let stale = IsrResult::Conflict {
        current: Some(LeaderAndIsr {
            leader: 1,
            leader_epoch: 1,
            isr: vec![1, 2],
            partition_epoch: 3,
        }),
    };
    assert!(!p.on_isr_result(&old, stale));
    assert_eq!(
        p.pending_isr(),
        Some(&[1, 2, 3][..]),
        "the expansion is still pending"
    );
    assert_eq!(p.maximal_isr(), vec![1, 2, 3]);
    // The expansion's own answer settles it.
    p.on_isr_result(&expansion, IsrResult::Committed { partition_epoch: 4 });
    assert_eq!(p.isr(), &[1, 2, 3]);
    assert_eq!(p.partition_epoch(), 4);
}

/// Found by the real-core simulation (`Liveness`): a proposal whose outcome the writer could
/// not tell (`Conflict` without a state: the store was unreachable until the session ended)
/// used to stay pending until a LeaderAndIsr of a newer leader epoch, which a leader that
/// keeps its leadership never gets; its ISR then never changed again. It is now sent again
/// at the next ISR check, and the store's answer settles it.
#[test]
fn k8_2_isr_proposal_with_an_unknown_outcome_is_sent_again() {
    let mut store = MemoryIsrWriter::new();
    store.set(
        tp(),
        LeaderAndIsr {
            leader: 1,
            leader_epoch: 0,
            isr: vec![1, 2, 3],
            partition_epoch: 0,
        },
    );
    let (mut p, proposal) = leader_proposing_shrink();
    assert!(!p.on_isr_result(&proposal, IsrResult::Conflict { current: None }));
    assert_eq!(p.pending_isr(), Some(&[1, 2][..]));
    assert!(p.poll_isr_proposal().is_none(), "not at once");
    p.retry_unknown_isr_proposal();
    let Some(again) = p.poll_isr_proposal() else {
        panic!("the proposal is not sent again")
    };
    assert_eq!(again, proposal);
    p.retry_unknown_isr_proposal();
    assert!(p.poll_isr_proposal().is_none(), "once per unknown outcome");
    let answer = store.propose_now(&again);
    p.on_isr_result(&again, answer);
    assert_eq!(p.isr(), &[1, 2]);
    assert_eq!(p.partition_epoch(), 1);
}
