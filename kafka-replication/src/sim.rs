//! A small deterministic cluster of one partition's replicas, for the regression scenarios and
//! the property tests: a controller (leader election from the ISR, ISR writes through a
//! [`MemoryIsrWriter`]), brokers that crash and restart with their logs, and followers that
//! truncate by leader epoch and fetch.

use std::collections::{BTreeMap, BTreeSet};

use kafka_wire::records::RecordBatch;

use crate::epoch_cache::UNDEFINED_EPOCH;
use crate::isr::{BrokerId, IsrProposal, LeaderAndIsr, MemoryIsrWriter, TopicPartition};
use crate::log::{test_util::batch, LogStorage, MemoryLog};
use crate::partition::{FetchParams, Legacy, Partition, PartitionConfig, PartitionState};

pub(crate) struct Sim {
    pub now: u64,
    pub tp: TopicPartition,
    pub config: PartitionConfig,
    pub legacy: Legacy,
    /// Followers send `LastFetchedEpoch` (Fetch v12) instead of OffsetForLeaderEpoch first.
    pub diverging_epoch_fetch: bool,
    /// Proposals are answered at once; otherwise they wait for [`Sim::deliver_isr`].
    pub auto_commit_isr: bool,
    pub replicas: Vec<BrokerId>,
    pub up: BTreeMap<BrokerId, Partition<MemoryLog>>,
    pub down: BTreeMap<BrokerId, MemoryLog>,
    pub store: MemoryIsrWriter,
    pub controller_epoch: i32,
    pub needs_truncation: BTreeSet<BrokerId>,
    pub in_flight: Option<IsrProposal>,
    /// Batches below the highest HW any leader reached: what was acknowledged to acks=all.
    pub committed: Vec<RecordBatch>,
    pub committed_offset: i64,
    last_leader_hw: Option<(BrokerId, i32, i64)>,
}

pub(crate) fn unwrap<T, E: std::fmt::Debug>(r: Result<T, E>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("unexpected error: {e:?}"),
    }
}

impl Sim {
    /// `n` brokers 1..=n, broker 1 leading epoch 0 with everyone in the ISR.
    pub fn new(n: i32, legacy: Legacy) -> Sim {
        let tp = TopicPartition::new("t", 0);
        let replicas: Vec<BrokerId> = (1..=n).collect();
        let mut store = MemoryIsrWriter::new();
        store.set(
            tp.clone(),
            LeaderAndIsr {
                leader: 1,
                leader_epoch: 0,
                isr: replicas.clone(),
                partition_epoch: 0,
            },
        );
        let config = PartitionConfig {
            replica_lag_time_max_ms: 10_000,
            min_insync_replicas: 1,
        };
        let mut sim = Sim {
            now: 0,
            tp: tp.clone(),
            config,
            legacy,
            diverging_epoch_fetch: false,
            auto_commit_isr: true,
            replicas: replicas.clone(),
            up: BTreeMap::new(),
            down: BTreeMap::new(),
            store,
            controller_epoch: 1,
            needs_truncation: BTreeSet::new(),
            in_flight: None,
            committed: Vec::new(),
            committed_offset: 0,
            last_leader_hw: None,
        };
        for id in replicas {
            let mut p = Partition::new(tp.clone(), id, MemoryLog::new(), config);
            p.legacy = legacy;
            sim.up.insert(id, p);
        }
        sim.send_leader_and_isr();
        sim
    }

    pub fn state(&self) -> LeaderAndIsr {
        match self.store.get(&self.tp) {
            Some(s) => s.clone(),
            None => panic!("no partition state"),
        }
    }

    pub fn leader(&self) -> Option<BrokerId> {
        let l = self.state().leader;
        (l >= 0 && self.up.contains_key(&l)).then_some(l)
    }

    pub fn partition(&self, id: BrokerId) -> &Partition<MemoryLog> {
        match self.up.get(&id) {
            Some(p) => p,
            None => panic!("broker {id} is down"),
        }
    }

    fn partition_state(&self) -> PartitionState {
        let s = self.state();
        PartitionState {
            controller_epoch: self.controller_epoch,
            leader: s.leader,
            leader_epoch: s.leader_epoch,
            isr: s.isr,
            partition_epoch: s.partition_epoch,
            replicas: self.replicas.clone(),
        }
    }

    /// K4: every live broker applies the current state.
    pub fn send_leader_and_isr(&mut self) {
        let ps = self.partition_state();
        let now = self.now;
        for (id, p) in self.up.iter_mut() {
            if ps.leader == *id {
                if p.leader_epoch() < ps.leader_epoch || !p.is_leader() {
                    unwrap(p.make_leader(now, &ps));
                    self.needs_truncation.remove(id);
                }
            } else if unwrap(p.make_follower(&ps)) {
                self.needs_truncation.insert(*id);
            }
        }
        self.in_flight = None;
        self.observe();
    }

    /// The controller writes a new state (epoch bump) and sends it.
    pub fn controller_write(&mut self, leader: BrokerId, isr: Vec<BrokerId>) {
        let s = self.state();
        self.store.set(
            self.tp.clone(),
            LeaderAndIsr {
                leader,
                leader_epoch: s.leader_epoch + 1,
                isr,
                partition_epoch: s.partition_epoch + 1,
            },
        );
        self.send_leader_and_isr();
    }

    /// Clean election: the first live ISR member other than `exclude` leads.
    pub fn elect(&mut self, exclude: Option<BrokerId>) {
        let s = self.state();
        let mut live: Vec<BrokerId> = s
            .isr
            .iter()
            .copied()
            .filter(|id| self.up.contains_key(id) && Some(*id) != exclude)
            .collect();
        if let Some(ex) = exclude.filter(|ex| self.up.contains_key(ex) && s.isr.contains(ex)) {
            // No other candidate: the current leader stays, in a new epoch.
            live.push(ex);
        }
        match live.first() {
            Some(&leader) => {
                let isr = s
                    .isr
                    .iter()
                    .copied()
                    .filter(|id| self.up.contains_key(id))
                    .collect();
                self.controller_write(leader, isr);
            }
            // ZK mode keeps the ISR non-empty; the partition goes offline.
            None => self.controller_write(-1, s.isr),
        }
    }

    pub fn append(&mut self, records: usize, acks: i16) -> bool {
        let Some(l) = self.leader() else { return false };
        let Some(p) = self.up.get_mut(&l) else {
            return false;
        };
        let ok = p.append_as_leader(batch(records), acks).is_ok();
        self.pump_isr(l);
        self.observe();
        ok
    }

    fn pump_isr(&mut self, leader: BrokerId) {
        let Some(p) = self.up.get_mut(&leader) else {
            return;
        };
        if let Some(proposal) = p.poll_isr_proposal() {
            self.in_flight = Some(proposal);
        }
        if self.auto_commit_isr {
            self.deliver_isr();
        }
    }

    /// The store answers the proposal in flight.
    pub fn deliver_isr(&mut self) {
        let Some(proposal) = self.in_flight.take() else {
            return;
        };
        let result = self.store.propose_now(&proposal);
        if let Some(p) = self.up.get_mut(&proposal.proposed.leader) {
            p.on_isr_result(&proposal, result);
        }
        self.observe();
    }

    /// One follower fetch round: truncate by epoch if needed, fetch, apply the response
    /// (unless `lose_response`).
    pub fn fetch(&mut self, follower: BrokerId, lose_response: bool) {
        let Some(leader) = self.leader() else { return };
        if follower == leader || !self.up.contains_key(&follower) {
            return;
        }
        let now = self.now;
        let (mut lp, mut fp) = match (self.up.remove(&leader), self.up.remove(&follower)) {
            (Some(l), Some(f)) => (l, f),
            (l, f) => {
                if let Some(l) = l {
                    self.up.insert(leader, l);
                }
                if let Some(f) = f {
                    self.up.insert(follower, f);
                }
                return;
            }
        };
        if fp.leader() == Some(leader) && fp.leader_epoch() == lp.leader_epoch() {
            let legacy_08 = self.legacy.truncate_to_high_watermark;
            if self.needs_truncation.contains(&follower)
                && !self.diverging_epoch_fetch
                && !legacy_08
            {
                for _ in 0..100 {
                    let epoch = fp.latest_epoch();
                    let answer = if epoch == UNDEFINED_EPOCH {
                        crate::epoch_cache::EpochEndOffset::UNDEFINED
                    } else {
                        unwrap(lp.last_offset_for_leader_epoch(Some(fp.leader_epoch()), epoch))
                    };
                    if unwrap(fp.truncate_to_leader_epoch(answer)).complete {
                        break;
                    }
                }
            }
            self.needs_truncation.remove(&follower);
            let params = FetchParams {
                replica_id: follower,
                fetch_offset: fp.log_end_offset(),
                log_start_offset: fp.log_start_offset(),
                max_bytes: 1 << 20,
                min_one_batch: true,
                current_leader_epoch: Some(fp.leader_epoch()),
                last_fetched_epoch: self.diverging_epoch_fetch.then(|| fp.latest_epoch()),
            };
            let read = unwrap(lp.fetch_records(now, &params));
            if !lose_response {
                if let Some(d) = read.diverging_epoch {
                    unwrap(fp.truncate_to_leader_epoch(d));
                } else {
                    unwrap(fp.append_as_follower(read.records, read.high_watermark));
                }
            }
        }
        self.up.insert(leader, lp);
        self.up.insert(follower, fp);
        self.pump_isr(leader);
        self.observe();
    }

    /// Time passes; the leader runs its ISR shrink check.
    pub fn tick(&mut self, ms: u64) {
        self.now += ms;
        let Some(l) = self.leader() else { return };
        let now = self.now;
        if let Some(p) = self.up.get_mut(&l) {
            p.maybe_shrink_isr(now);
        }
        self.pump_isr(l);
    }

    /// A hard failure noticed by the controller: out of the ISR, new leader if it led.
    pub fn crash(&mut self, id: BrokerId) {
        self.bounce_down(id);
        let s = self.state();
        if s.leader == id || s.isr.contains(&id) {
            if s.leader == id {
                self.elect(Some(id));
            } else {
                let isr = s.isr.into_iter().filter(|x| *x != id).collect();
                self.controller_write(s.leader, isr);
            }
        }
    }

    /// The broker process stops (its log and HW checkpoint survive); the controller is not
    /// told (a bounce within the session timeout).
    pub fn bounce_down(&mut self, id: BrokerId) {
        if let Some(mut p) = self.up.remove(&id) {
            unwrap(p.checkpoint_high_watermark());
            self.down.insert(id, p.into_log());
        }
        self.needs_truncation.remove(&id);
    }

    /// The broker starts again from its log and applies the current state.
    pub fn restart(&mut self, id: BrokerId) {
        let Some(log) = self.down.remove(&id) else {
            return;
        };
        let mut p = Partition::new(self.tp.clone(), id, log, self.config);
        p.legacy = self.legacy;
        self.up.insert(id, p);
        let s = self.state();
        if s.leader == -1 && s.isr.contains(&id) {
            // The controller's online transition for an offline partition.
            self.controller_write(id, vec![id]);
        } else {
            self.send_leader_and_isr();
        }
    }

    /// Records what the leader has committed and checks the leader's HW never goes back.
    fn observe(&mut self) {
        let Some(l) = self.leader() else { return };
        let (epoch, hw) = {
            let p = self.partition(l);
            (p.leader_epoch(), p.high_watermark())
        };
        if let Some((pl, pe, phw)) = self.last_leader_hw {
            if pl == l && pe == epoch {
                assert!(
                    hw >= phw,
                    "HW moved back on leader {l} epoch {epoch}: {phw} -> {hw}"
                );
            }
        }
        self.last_leader_hw = Some((l, epoch, hw));
        if hw > self.committed_offset {
            let batches: Vec<RecordBatch> = self
                .partition(l)
                .log()
                .batches()
                .iter()
                .take_while(|b| b.next_offset() <= hw)
                .cloned()
                .collect();
            self.committed_offset = hw;
            self.committed = batches;
        }
    }

    /// Whether broker `id`'s log holds every committed batch, byte for byte.
    pub fn has_committed(&self, id: BrokerId) -> bool {
        let log = match (self.up.get(&id), self.down.get(&id)) {
            (Some(p), _) => p.log(),
            (None, Some(l)) => l,
            (None, None) => return false,
        };
        let batches = log.batches();
        batches.len() >= self.committed.len()
            && batches[..self.committed.len()] == self.committed[..]
    }

    /// Whether two brokers' logs disagree on an offset both hold.
    pub fn diverged(&self, a: BrokerId, b: BrokerId) -> bool {
        let (la, lb) = (self.partition(a).log(), self.partition(b).log());
        la.batches().iter().zip(&lb.batches()).any(|(x, y)| x != y)
    }

    /// The invariants of the property tests.
    pub fn check_invariants(&self) {
        let s = self.state();
        if let Some(l) = self.leader() {
            let hw = self.partition(l).high_watermark();
            for id in &s.isr {
                if let Some(p) = self.up.get(id) {
                    assert!(
                        p.log_end_offset() >= hw,
                        "ISR member {id} has LEO {} below the HW {hw}",
                        p.log_end_offset()
                    );
                }
            }
            assert!(self.has_committed(l), "leader {l} lost committed data");
        }
        for id in &s.isr {
            if self.up.contains_key(id) {
                assert!(
                    self.has_committed(*id),
                    "ISR member {id} lost committed data"
                );
            }
        }
    }

    /// Every follower fetches until nothing changes (bounded).
    pub fn settle(&mut self) {
        for _ in 0..10 {
            let ids: Vec<BrokerId> = self.up.keys().copied().collect();
            for id in ids {
                self.fetch(id, false);
            }
        }
    }

    pub fn leo(&self, id: BrokerId) -> i64 {
        self.partition(id).log().log_end_offset()
    }
}
