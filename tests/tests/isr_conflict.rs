//! A regression found by the simulator (seeds of `five_brokers_hold_every_invariant_under_every_fault`
//! before the fix): a leader's ISR expansion is applied by the store but its answer is lost; the
//! retry conflicts with a newer controller write; the leader dropped its pending expansion and
//! advanced the HW past the new member — which the store, and the next LeaderAndIsr, count in
//! the ISR (StrongIsr broken). The leader must keep its maximal ISR until the next LeaderAndIsr.

use kafka_replication::isr::{IsrResult, LeaderAndIsr, MemoryIsrWriter, TopicPartition};
use kafka_replication::log::MemoryLog;
use kafka_replication::partition::{FetchParams, Partition, PartitionConfig, PartitionState};
use kafka_wire::records::RecordBatchBuilder;

fn record(ts: i64) -> bytes::Bytes {
    let mut b = RecordBatchBuilder::new(0);
    match b.append(ts, None, Some(b"v"), &[]).and_then(|_| b.build()) {
        Ok(bytes) => bytes,
        Err(e) => panic!("{e}"),
    }
}

fn fetch(p: &mut Partition<MemoryLog>, now: u64, replica_id: i32, offset: i64) {
    let params = FetchParams {
        replica_id,
        fetch_offset: offset,
        log_start_offset: 0,
        max_bytes: 1 << 16,
        min_one_batch: true,
        current_leader_epoch: Some(0),
        last_fetched_epoch: None,
    };
    if let Err(e) = p.fetch_records(now, &params) {
        panic!("{e}");
    }
}

#[test]
fn lost_isr_answer_then_conflict_keeps_the_pending_expansion_out_of_the_high_watermark() {
    let tp = TopicPartition::new("t", 0);
    let mut store = MemoryIsrWriter::new();
    let start = LeaderAndIsr {
        leader: 1,
        leader_epoch: 0,
        isr: vec![1, 2],
        partition_epoch: 0,
    };
    store.set(tp.clone(), start.clone());
    let cfg = PartitionConfig::default()
        .with_replica_lag_time_max_ms(10_000)
        .with_min_insync_replicas(1);
    let mut p = Partition::new(tp.clone(), 1, MemoryLog::new(), cfg);
    let state = PartitionState {
        controller_epoch: 1,
        leader: 1,
        leader_epoch: 0,
        isr: vec![1, 2],
        partition_epoch: 0,
        replicas: vec![1, 2, 3],
    };
    if let Err(e) = p.make_leader(0, &state) {
        panic!("{e}");
    }
    for ts in 0..2 {
        if let Err(e) = p.append_as_leader(record(ts), -1) {
            panic!("{e}");
        }
    }
    fetch(&mut p, 1, 2, 2);
    assert_eq!(p.high_watermark(), 2);
    // Replica 3 reaches the HW: the leader proposes {1, 2, 3}.
    fetch(&mut p, 2, 3, 2);
    let Some(proposal) = p.poll_isr_proposal() else {
        panic!("no expansion proposed");
    };
    assert!(proposal.proposed.isr.contains(&3));
    // The store applies it; the answer is lost.
    assert!(matches!(
        store.propose_now(&proposal),
        IsrResult::Committed { .. }
    ));
    // The controller then bumps the leader epoch, keeping 3 in the ISR.
    store.set(
        tp.clone(),
        LeaderAndIsr {
            leader: 1,
            leader_epoch: 1,
            isr: vec![1, 2, 3],
            partition_epoch: 2,
        },
    );
    // The retried proposal conflicts.
    let answer = store.propose_now(&proposal);
    assert!(matches!(answer, IsrResult::Conflict { .. }));
    p.on_isr_result(&proposal, answer);
    // More data; replica 2 catches up, replica 3 does not.
    if let Err(e) = p.append_as_leader(record(2), -1) {
        panic!("{e}");
    }
    fetch(&mut p, 3, 2, 3);
    assert!(p.maximal_isr().contains(&3));
    assert_eq!(
        p.high_watermark(),
        2,
        "the HW passed replica 3, which the store counts in the ISR"
    );
}
