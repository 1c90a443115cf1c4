//! A leader keeps only the newest `commitLogCount` committed transactions in memory
//! (ZooKeeper's `committedLog`); a learner further behind is synced from the transaction log,
//! read in bounded chunks through `DiscoveryAction::ReadLog` (ZooKeeper's
//! `LearnerHandler.syncFollower` and `ZKDatabase.getProposalsFromTxnLog`), or by a SNAP of the
//! snapshot read through `DiscoveryAction::ReadSnapshot` when the log no longer reaches or the
//! DIFF would outweigh `snapshotSizeFactor` of the snapshot.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zab_core::broadcast::{LearnerOptions, COMMIT_LOG_COUNT, SNAP_CHUNK};
use zab_core::discovery::{
    packet_type, DiscoveryAction, LeaderDiscovery, LearnerDiscovery, QuorumPacket, Timing,
    LOG_READ_CHUNK_TXNS, SNAP_PACKETS_PER_BATCH,
};
use zab_core::store::PersistedEpochs;
use zab_core::txnlog::{read_committed_window, read_for_sync, MemoryTxnLog, Snapshot, Txn, TxnLog};
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

/// The leader's reads: each `ReadLog` request, in order.
#[derive(Default)]
struct Reads {
    probes: usize,
    chunks: Vec<(usize, u64)>,
    snapshots: usize,
    drains: usize,
}

/// Delivers packets between the leader (3) and its learners until quiet, carrying out the
/// leader's log reads against `log`; returns the packets each learner received, in order.
fn pump(
    t: Instant,
    leader: &mut LeaderDiscovery,
    log: &MemoryTxnLog,
    learners: &mut BTreeMap<i64, LearnerDiscovery>,
    reads: &mut Reads,
) -> BTreeMap<i64, Vec<QuorumPacket>> {
    let mut received: BTreeMap<i64, Vec<QuorumPacket>> = BTreeMap::new();
    loop {
        let mut progressed = false;
        while let Some(a) = leader.poll_action() {
            progressed = true;
            match a {
                DiscoveryAction::Send { to, packet } => {
                    received.entry(to.0).or_default().push(packet.clone());
                    if let Some(l) = learners.get_mut(&to.0) {
                        l.handle_packet(t, ServerId(3), packet);
                    }
                }
                DiscoveryAction::ReadLog {
                    learner,
                    after,
                    upto,
                    max_bytes,
                    max_txns,
                } => {
                    let read = read_for_sync(log, after, upto, max_bytes, max_txns).unwrap();
                    if max_bytes == 0 {
                        reads.probes += 1;
                    } else {
                        reads.chunks.push((read.txns.len(), read.weight));
                    }
                    leader.log_read(t, learner, read);
                }
                DiscoveryAction::ReadSnapshot(learner) => {
                    reads.snapshots += 1;
                    leader.snapshot_read(learner, log.latest_snapshot().unwrap());
                }
                DiscoveryAction::AwaitDrain(learner) => {
                    reads.drains += 1;
                    leader.drained(t, learner);
                }
                _ => {}
            }
        }
        for (sid, l) in learners.iter_mut() {
            while let Some(a) = l.poll_action() {
                progressed = true;
                if let DiscoveryAction::Send { packet, .. } = &a {
                    leader.handle_packet(t, ServerId(*sid), packet.clone());
                }
            }
        }
        if !progressed {
            return received;
        }
    }
}

/// A leader (3) of a 3-voter ensemble over `log`, with learners 1 and 2 at the given epochs.
fn ensemble(
    t: Instant,
    log: &MemoryTxnLog,
    leader_epochs: PersistedEpochs,
    learner_epochs: [PersistedEpochs; 2],
) -> (LeaderDiscovery, BTreeMap<i64, LearnerDiscovery>) {
    let qv = Arc::new(QuorumMaj::with_ids([1, 2, 3], []));
    let mut leader = LeaderDiscovery::new(t, ServerId(3), qv, leader_epochs, timing());
    let (base, committed) = read_committed_window(log, COMMIT_LOG_COUNT).unwrap();
    leader.set_history(base, committed);
    let mut learners = BTreeMap::new();
    for (sid, e) in [1, 2].into_iter().zip(learner_epochs) {
        let mut l = LearnerDiscovery::new(t, ServerId(sid), ServerId(3), false, 0, e, timing());
        l.set_broadcast_options(LearnerOptions::default().with_follow_broadcast(true));
        learners.insert(sid, l);
    }
    (leader, learners)
}

/// The sync a learner received: the kind of its first packet after LEADERINFO, the zxids of
/// the PROPOSALs each followed by its COMMIT, and whether NEWLEADER came last.
fn sync_of(packets: &[QuorumPacket]) -> (i32, i64, Vec<Zxid>, bool) {
    use packet_type::*;
    let p: Vec<&QuorumPacket> = packets.iter().filter(|p| p.kind != PING).collect();
    assert_eq!(p[0].kind, LEADERINFO);
    let mut i = 1;
    let head = (p[i].kind, p[i].zxid);
    while p[i].kind == SNAP {
        i += 1;
    }
    if head.0 != SNAP {
        i += 1;
    }
    let mut proposals = Vec::new();
    while p[i].kind == PROPOSAL {
        assert_eq!((p[i + 1].kind, p[i + 1].zxid), (COMMIT, p[i].zxid));
        proposals.push(Zxid(p[i].zxid));
        i += 2;
    }
    (head.0, head.1, proposals, p[i].kind == NEWLEADER)
}

fn zxids(e: i64, counters: std::ops::RangeInclusive<u32>) -> Vec<Zxid> {
    counters.map(|c| Zxid::new(e, c)).collect()
}

#[test]
fn z_diff_beyond_the_in_memory_window_is_served_from_the_log() {
    let t = Instant::now();
    let mut log = MemoryTxnLog::new();
    log.append(&(1..=3000).map(|c| txn(1, c)).collect::<Vec<_>>())
        .unwrap();
    let last = Zxid::new(1, 3000);
    let (mut leader, mut learners) = ensemble(
        t,
        &log,
        epochs(1, last),
        [epochs(1, Zxid::new(1, 100)), epochs(1, Zxid::new(1, 2900))],
    );
    // Only the newest 500 are in memory.
    assert_eq!(
        leader.committed_window(),
        Some((Zxid::new(1, 2500), COMMIT_LOG_COUNT))
    );
    let mut reads = Reads::default();
    let received = pump(t, &mut leader, &log, &mut learners, &mut reads);
    assert!(leader.is_established());

    // Learner 1, 2,900 behind: a DIFF read from the log in chunks, then the window.
    let (kind, after, proposals, newleader_last) = sync_of(&received[&1]);
    assert_eq!((kind, after), (packet_type::DIFF, Zxid::new(1, 100).0));
    assert_eq!(proposals, zxids(1, 101..=3000));
    assert!(newleader_last);
    // Learner 2, 100 behind, from memory.
    let (kind, _, proposals, _) = sync_of(&received[&2]);
    assert_eq!(kind, packet_type::DIFF);
    assert_eq!(proposals, zxids(1, 2901..=3000));

    // One probe, then 2,400 transactions in chunks of at most LOG_READ_CHUNK_TXNS.
    assert_eq!(reads.probes, 1);
    assert_eq!(reads.chunks.iter().map(|c| c.0).sum::<usize>(), 2400);
    assert!(reads.chunks.iter().all(|c| c.0 <= LOG_READ_CHUNK_TXNS));
    assert_eq!(reads.snapshots, 0);
}

#[test]
fn z_learner_with_an_abandoned_transaction_older_than_the_window_is_truncated_from_the_log() {
    let t = Instant::now();
    let mut log = MemoryTxnLog::new();
    log.append(&(1..=10).map(|c| txn(1, c)).collect::<Vec<_>>())
        .unwrap();
    log.append(&(1..=1000).map(|c| txn(3, c)).collect::<Vec<_>>())
        .unwrap();
    let (mut leader, mut learners) = ensemble(
        t,
        &log,
        epochs(3, Zxid::new(3, 1000)),
        // Learner 1 logged a proposal of epoch 2 that no quorum took.
        [epochs(2, Zxid::new(2, 5)), epochs(3, Zxid::new(3, 1000))],
    );
    let mut reads = Reads::default();
    let received = pump(t, &mut leader, &log, &mut learners, &mut reads);
    assert!(leader.is_established());
    let (kind, to, proposals, newleader_last) = sync_of(&received[&1]);
    assert_eq!((kind, to), (packet_type::TRUNC, Zxid::new(1, 10).0));
    assert_eq!(proposals, zxids(3, 1..=1000));
    assert!(newleader_last);
    assert_eq!(reads.probes, 1);
}

#[test]
fn z_learner_older_than_the_log_gets_the_snapshot_read_on_demand() {
    let t = Instant::now();
    let mut log = MemoryTxnLog::new();
    log.append(&(1..=2000).map(|c| txn(1, c)).collect::<Vec<_>>())
        .unwrap();
    log.save_snapshot(&Snapshot {
        zxid: Zxid::new(1, 1000),
        data: vec![7u8; 1 << 20].into(),
    })
    .unwrap();
    log.purge(Zxid::new(1, 1000)).unwrap();
    let (mut leader, mut learners) = ensemble(
        t,
        &log,
        epochs(1, Zxid::new(1, 2000)),
        [epochs(1, Zxid::new(1, 10)), epochs(1, Zxid::new(1, 2000))],
    );
    let mut reads = Reads::default();
    let received = pump(t, &mut leader, &log, &mut learners, &mut reads);
    assert!(leader.is_established());
    let (kind, zxid, proposals, newleader_last) = sync_of(&received[&1]);
    assert_eq!((kind, zxid), (packet_type::SNAP, Zxid::new(1, 1000).0));
    assert_eq!(proposals, zxids(1, 1001..=2000));
    assert!(newleader_last);
    assert_eq!((reads.probes, reads.snapshots), (1, 1));
}

#[test]
fn z2_a_snapshot_larger_than_one_batch_goes_out_a_batch_at_a_time_after_each_drain() {
    // 133 chunks of 1 MiB and the header: batches of 64, 64 and 6 packets, two drains asked.
    let t = Instant::now();
    let mut log = MemoryTxnLog::new();
    log.append(&(1..=2000).map(|c| txn(1, c)).collect::<Vec<_>>())
        .unwrap();
    let chunks = 2 * SNAP_PACKETS_PER_BATCH + 5;
    log.save_snapshot(&Snapshot {
        zxid: Zxid::new(1, 1000),
        data: vec![7u8; chunks * SNAP_CHUNK].into(),
    })
    .unwrap();
    log.purge(Zxid::new(1, 1000)).unwrap();
    let (mut leader, mut learners) = ensemble(
        t,
        &log,
        epochs(1, Zxid::new(1, 2000)),
        [epochs(1, Zxid::new(1, 10)), epochs(1, Zxid::new(1, 2000))],
    );
    let mut reads = Reads::default();
    let received = pump(t, &mut leader, &log, &mut learners, &mut reads);
    assert!(leader.is_established());
    let snaps = received[&1]
        .iter()
        .filter(|p| p.kind == packet_type::SNAP)
        .count();
    assert_eq!(snaps, chunks + 1);
    let (kind, zxid, proposals, newleader_last) = sync_of(&received[&1]);
    assert_eq!((kind, zxid), (packet_type::SNAP, Zxid::new(1, 1000).0));
    assert_eq!(proposals, zxids(1, 1001..=2000));
    assert!(newleader_last);
    assert_eq!((reads.probes, reads.snapshots, reads.drains), (1, 1, 2));
}

#[test]
fn z_snapshot_size_factor_picks_a_snap_over_a_diff_from_the_log_that_outweighs_it() {
    let t = Instant::now();
    let mut log = MemoryTxnLog::new();
    log.append(&(1..=2000).map(|c| txn(1, c)).collect::<Vec<_>>())
        .unwrap();
    // A tiny snapshot; the log still reaches back to the learner.
    log.save_snapshot(&Snapshot {
        zxid: Zxid::new(1, 1500),
        data: vec![1u8; 64].into(),
    })
    .unwrap();
    let (mut leader, mut learners) = ensemble(
        t,
        &log,
        epochs(1, Zxid::new(1, 2000)),
        [epochs(1, Zxid::new(1, 100)), epochs(1, Zxid::new(1, 2000))],
    );
    let mut reads = Reads::default();
    let received = pump(t, &mut leader, &log, &mut learners, &mut reads);
    let (kind, zxid, proposals, _) = sync_of(&received[&1]);
    assert_eq!((kind, zxid), (packet_type::SNAP, Zxid::new(1, 1500).0));
    assert_eq!(proposals, zxids(1, 1501..=2000));
    assert!(reads.chunks.is_empty(), "the DIFF was never read");
}

#[test]
fn a_file_log_read_in_chunks_gives_every_transaction_once_across_segments_appends_and_truncation() {
    use zab_core::txnlog::{FileTxnLog, FileTxnLogOptions, FsyncPolicy};
    let dir = tempfile::tempdir().unwrap();
    let opts = FileTxnLogOptions::new()
        .with_fsync(FsyncPolicy::OnSync)
        .with_segment_size(4096);
    let mut log = FileTxnLog::open_with(dir.path(), opts).unwrap();
    let all: Vec<Txn> = (1..=3000).map(|c| txn(1, c)).collect();
    // (a log rolls between appends)
    for batch in all[..2000].chunks(10) {
        log.append(batch).unwrap();
    }
    assert!(log.segment_paths().len() > 10);
    let chunked = |log: &FileTxnLog, after: Zxid, upto: Zxid| {
        let mut out = Vec::new();
        let mut cursor = after;
        loop {
            let r = read_for_sync(log, cursor, upto, 1 << 20, 97).unwrap();
            cursor = r.txns.last().map_or(cursor, |t| t.zxid);
            out.extend(r.txns);
            if r.complete {
                return out;
            }
        }
    };
    assert_eq!(
        chunked(&log, Zxid::new(1, 5), Zxid::new(1, 2000)),
        all[5..2000]
    );
    // The probe counts without keeping.
    let probe = read_for_sync(&log, Zxid::new(1, 5), Zxid::new(1, 2000), 0, 0).unwrap();
    assert_eq!((probe.count, probe.txns.len()), (1995, 0));
    assert_eq!(probe.prev, Some(Zxid::new(1, 5)));
    // A read that ended at the log's end resumes with what was appended since.
    for batch in all[2000..].chunks(10) {
        log.append(batch).unwrap();
    }
    assert_eq!(
        chunked(&log, Zxid::new(1, 2000), Zxid::new(1, 3000)),
        all[2000..]
    );
    // After a truncation the same position reads the new records.
    let r = read_for_sync(&log, Zxid::new(1, 1000), Zxid::new(1, 3000), 1 << 20, 10).unwrap();
    assert_eq!(r.txns, all[1000..1010]);
    log.truncate(Zxid::new(1, 1005)).unwrap();
    let again: Vec<Txn> = (1006..=1010).map(|c| txn(2, c)).collect();
    log.append(&again).unwrap();
    let r = read_for_sync(&log, Zxid::new(1, 1005), Zxid::new(3, 0), 1 << 20, 10).unwrap();
    assert_eq!(r.txns, again);
    assert!(r.complete);
}

#[test]
fn z_learner_whose_transactions_all_lie_below_a_log_never_compacted_is_truncated_to_zero() {
    // The leader's log holds its whole history (no snapshot), which starts in epoch 2: the
    // learner's epoch-1 proposals were never committed.
    let t = Instant::now();
    let mut log = MemoryTxnLog::new();
    log.append(&(1..=1000).map(|c| txn(2, c)).collect::<Vec<_>>())
        .unwrap();
    let (mut leader, mut learners) = ensemble(
        t,
        &log,
        epochs(2, Zxid::new(2, 1000)),
        [epochs(1, Zxid::new(1, 6)), epochs(2, Zxid::new(2, 1000))],
    );
    let mut reads = Reads::default();
    let received = pump(t, &mut leader, &log, &mut learners, &mut reads);
    assert!(leader.is_established());
    let (kind, to, proposals, newleader_last) = sync_of(&received[&1]);
    assert_eq!((kind, to), (packet_type::TRUNC, 0));
    assert_eq!(proposals, zxids(2, 1..=1000));
    assert!(newleader_last);
    assert_eq!(reads.snapshots, 0);
}

#[test]
fn z_learner_with_an_abandoned_epoch_between_the_snapshot_and_the_log_is_truncated_to_the_snapshot()
{
    // Snapshot at 2:100 (the log compacted up to it), then epoch 4; the learner logged
    // proposals of epoch 3 that no quorum took.
    let t = Instant::now();
    let mut log = MemoryTxnLog::new();
    log.append(&(1..=100).map(|c| txn(2, c)).collect::<Vec<_>>())
        .unwrap();
    log.save_snapshot(&Snapshot {
        zxid: Zxid::new(2, 100),
        data: vec![3u8; 1 << 20].into(),
    })
    .unwrap();
    log.purge(Zxid::new(2, 100)).unwrap();
    log.append(&(1..=1000).map(|c| txn(4, c)).collect::<Vec<_>>())
        .unwrap();
    let (mut leader, mut learners) = ensemble(
        t,
        &log,
        epochs(4, Zxid::new(4, 1000)),
        [epochs(3, Zxid::new(3, 5)), epochs(4, Zxid::new(4, 1000))],
    );
    let mut reads = Reads::default();
    let received = pump(t, &mut leader, &log, &mut learners, &mut reads);
    assert!(leader.is_established());
    let (kind, to, proposals, _) = sync_of(&received[&1]);
    assert_eq!((kind, to), (packet_type::TRUNC, Zxid::new(2, 100).0));
    assert_eq!(proposals, zxids(4, 1..=1000));
    assert_eq!(reads.snapshots, 0);
}
