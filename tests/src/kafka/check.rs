//! The invariants of the Kafka model, checked after every step, every delivered message and every store write (the invariants of Kafka's TLA+ replication specification, `KafkaReplication.tla`):
//!
//! - **one leader per epoch**: no two brokers ever lead the same leader epoch;
//! - **epochs only grow**: the stored leader and partition epochs, and the leader epoch a
//!   running broker applied, never go back;
//! - **HW never goes back on a leader** within its leader epoch;
//! - **StrongIsr**: every record below the true leader's HW is identical, at the same offset,
//!   on every member of the stored ISR (up or down: its disk);
//! - **acked writes survive**: every record acknowledged with acks=all is in the true
//!   leader's log at its offset (clean elections);
//! - **consumed records survive**: every record a consumer read is there too;
//! - **replica logs do not diverge**: every running replica's log below its own HW matches
//!   the true leader's;
//! - **stale controllers never write**: no write of a deposed controller epoch lands.
//!
//! The "true leader" is the broker the store names, when it runs and applied that epoch.
//! Logs only change by appending or truncating a suffix, so each comparison is incremental.

use std::collections::BTreeMap;

use kafka_replication::isr::{BrokerId, LeaderAndIsr};
use kafka_replication::log::MemoryLog;
use kafka_wire::records::RecordBatch;

use super::controller::StoreWrite;
use kafka_replication::partition::Partition;

/// Which invariant a violation breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Invariant {
    /// Two leaders in one leader epoch.
    OneLeaderPerEpoch,
    /// An epoch went back.
    EpochsOnlyGrow,
    /// A leader's HW went back.
    HighWatermarkMonotonic,
    /// A record below the HW differs or is missing on an ISR member.
    StrongIsr,
    /// An acks=all record is gone from its offset.
    AckedWriteLost,
    /// A consumed record is gone from its offset.
    ConsumedRecordLost,
    /// A replica's log below its HW differs from the leader's.
    LogsDiverge,
    /// A deposed controller's write landed.
    StaleControllerWrite,
    /// Two brokers were active controllers of one controller epoch.
    OneControllerPerEpoch,
    /// The cluster made no progress once the faults stopped.
    Liveness,
    /// Not an invariant of the cluster: the traced replay of a failed seed did not fail, so
    /// the simulation is not deterministic.
    ReplayDiverged,
}

/// A broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Which one.
    pub invariant: Invariant,
    /// What exactly.
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Strong,
    Matching,
}

/// The checker's memory between steps.
#[derive(Debug, Default)]
pub struct Checker {
    leaders_by_epoch: BTreeMap<i32, BrokerId>,
    applied_epoch: BTreeMap<(BrokerId, u64), i32>,
    leader_hw: BTreeMap<(BrokerId, u64, i32), i64>,
    store: Option<LeaderAndIsr>,
    acked: Vec<(i64, i64)>,
    consumed: Vec<(i64, i64)>,
    verified_records: BTreeMap<(BrokerId, u64, i32, bool), usize>,
    verified_prefix: BTreeMap<(BrokerId, u64, i32, BrokerId, u64, Kind), usize>,
}

/// The record (by its producer sequence number) at `offset` in `log`.
pub fn record_at(log: &MemoryLog, offset: i64) -> Option<i64> {
    record_in(&log.batches(), offset)
}

/// The record (by its producer sequence number) at `offset` in `batches`.
fn record_in(batches: &[RecordBatch], offset: i64) -> Option<i64> {
    let i = batches.partition_point(|b| b.next_offset() <= offset);
    let b = batches.get(i)?;
    (b.base_offset() == offset).then(|| b.base_timestamp())
}

/// Batches of `log` entirely below `offset`.
fn batches_below(log: &MemoryLog, offset: i64) -> Vec<RecordBatch> {
    let mut batches = log.batches();
    batches.truncate(batches.partition_point(|b| b.next_offset() <= offset));
    batches
}

/// A broker's view for the checks.
pub struct BrokerView<'a> {
    /// The broker.
    pub id: BrokerId,
    /// Its incarnation (restarts so far).
    pub incarnation: u64,
    /// Its partition core, while it runs.
    pub partition: Option<&'a Partition<MemoryLog>>,
    /// Its log, up or down (what is on disk).
    pub log: Option<&'a MemoryLog>,
}

impl Checker {
    /// An acks=all record was acknowledged at `offset`.
    pub fn acked(&mut self, offset: i64, seq: i64) {
        self.acked.push((offset, seq));
    }

    /// A consumer read the record `seq` at `offset`.
    pub fn consumed(&mut self, offset: i64, seq: i64) {
        self.consumed.push((offset, seq));
    }

    /// Acknowledged records so far.
    pub fn acked_count(&self) -> usize {
        self.acked.len()
    }

    /// Consumed records so far.
    pub fn consumed_count(&self) -> usize {
        self.consumed.len()
    }

    /// Checks everything; the first violation found.
    pub fn check(
        &mut self,
        brokers: &[BrokerView<'_>],
        store: &LeaderAndIsr,
        writes: &[StoreWrite],
    ) -> Result<(), Violation> {
        let fail = |invariant, detail: String| Err(Violation { invariant, detail });
        for w in writes {
            if let Some(e) = w
                .controller_epoch
                .filter(|e| *e < w.current_controller_epoch)
            {
                return fail(
                    Invariant::StaleControllerWrite,
                    format!(
                        "controller epoch {e} wrote {:?} while the epoch was {}",
                        w.state, w.current_controller_epoch
                    ),
                );
            }
        }
        if let Some(prev) = &self.store {
            if store.leader_epoch < prev.leader_epoch
                || store.partition_epoch < prev.partition_epoch
            {
                return fail(
                    Invariant::EpochsOnlyGrow,
                    format!("stored state went from {prev:?} to {store:?}"),
                );
            }
        }
        self.store = Some(store.clone());

        let mut true_leader = None;
        for v in brokers {
            let Some(p) = v.partition else {
                continue;
            };
            let id = v.id;
            let epoch = p.leader_epoch();
            let applied = self
                .applied_epoch
                .entry((id, v.incarnation))
                .or_insert(epoch);
            if epoch < *applied {
                return fail(
                    Invariant::EpochsOnlyGrow,
                    format!("broker {id} went from leader epoch {applied} back to {epoch}"),
                );
            }
            *applied = epoch;
            if !p.is_leader() {
                continue;
            }
            let first = *self.leaders_by_epoch.entry(epoch).or_insert(id);
            if first != id {
                return fail(
                    Invariant::OneLeaderPerEpoch,
                    format!("brokers {first} and {id} both led leader epoch {epoch}"),
                );
            }
            let hw = p.high_watermark();
            let prev = self
                .leader_hw
                .entry((id, v.incarnation, epoch))
                .or_insert(hw);
            if hw < *prev {
                return fail(
                    Invariant::HighWatermarkMonotonic,
                    format!("leader {id} epoch {epoch}: HW {prev} -> {hw}"),
                );
            }
            *prev = hw;
            if store.leader == id && store.leader_epoch == epoch {
                true_leader = Some(v);
            }
        }
        let Some(lv) = true_leader else { return Ok(()) };
        let Some(lp) = lv.partition else {
            return Ok(());
        };
        let (lid, linc, lepoch) = (lv.id, lv.incarnation, lp.leader_epoch());
        let llog = lp.log();
        let leader_batches = llog.batches();

        for (list, is_acked) in [(&self.acked, true), (&self.consumed, false)] {
            let done = self
                .verified_records
                .entry((lid, linc, lepoch, is_acked))
                .or_insert(0);
            for &(offset, seq) in &list[*done..] {
                if record_in(&leader_batches, offset) != Some(seq) {
                    let (inv, what) = if is_acked {
                        (Invariant::AckedWriteLost, "acknowledged")
                    } else {
                        (Invariant::ConsumedRecordLost, "consumed")
                    };
                    return fail(
                        inv,
                        format!(
                            "record {seq} {what} at offset {offset} is not there on leader {lid} \
                             epoch {lepoch} (found {:?})",
                            record_in(&leader_batches, offset)
                        ),
                    );
                }
            }
            *done = list.len();
        }

        let leader_committed = &leader_batches
            [..leader_batches.partition_point(|b| b.next_offset() <= lp.high_watermark())];
        for v in brokers {
            let id = v.id;
            if id == lid {
                continue;
            }
            let Some(mlog) = v.log else { continue };
            if store.isr.contains(&id) {
                let key = (lid, linc, lepoch, id, v.incarnation, Kind::Strong);
                let done = self.verified_prefix.entry(key).or_insert(0);
                let m = mlog.batches();
                if m.len() < leader_committed.len() {
                    return fail(
                        Invariant::StrongIsr,
                        format!(
                            "ISR member {id} has {} batches, leader {lid} has {} below its HW {} \
                             (leader ISR {:?}, pending {:?}, follower states {:?}; stored {:?})",
                            m.len(),
                            leader_committed.len(),
                            lp.high_watermark(),
                            lp.isr(),
                            lp.pending_isr(),
                            store
                                .isr
                                .iter()
                                .map(|r| (*r, lp.replica_state(*r).map(|s| s.log_end_offset)))
                                .collect::<Vec<_>>(),
                            store
                        ),
                    );
                }
                let from = done.saturating_sub(1);
                if let Some(i) =
                    (from..leader_committed.len()).find(|i| m[*i] != leader_committed[*i])
                {
                    return fail(
                        Invariant::StrongIsr,
                        format!(
                            "offset {} differs between leader {lid} and ISR member {id} below the HW",
                            leader_committed[i].base_offset()
                        ),
                    );
                }
                *done = leader_committed.len();
            }
            let Some(mp) = v.partition else {
                continue;
            };
            let own = batches_below(mlog, mp.high_watermark());
            let key = (lid, linc, lepoch, id, v.incarnation, Kind::Matching);
            let done = self.verified_prefix.entry(key).or_insert(0);
            let from = (*done).min(own.len()).saturating_sub(1);
            let l = &leader_batches;
            if let Some(i) = (from..own.len()).find(|i| l.get(*i) != Some(&own[*i])) {
                return fail(
                    Invariant::LogsDiverge,
                    format!(
                        "replica {id} (HW {}) and leader {lid} differ at offset {}",
                        mp.high_watermark(),
                        own[i].base_offset()
                    ),
                );
            }
            *done = own.len();
        }
        Ok(())
    }
}
