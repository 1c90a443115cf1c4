//! Running the state machines' store work: partition initialisations and elections (K1.1–K1.3:
//! read, plan, conditional write, re-read and retry on BADVERSION), ISR removals of replicas
//! going offline, and leader-epoch bumps. Each round reads and writes every pending partition
//! with all requests in flight at once.
//!
//! Elections and ISR removals start with an optimistic round: the decision is taken from the
//! leadership the context holds (what this controller last read or wrote, with its znode
//! version) and the write is conditional on that version, so it lands only if the znode
//! still holds exactly that state — the write Kafka's read-then-write (`KafkaZkClient.
//! getTopicPartitionStatesRaw`, then `updateLeaderAndIsr`) would have made. A write that gets
//! BADVERSION, and every partition whose decision from the context writes nothing (no
//! eligible leader, replica not in the ISR, no cached leadership), goes through Kafka's path:
//! read, decide again, conditional write, re-read and retry on BADVERSION. A NONODE answer is
//! the one the read would have given (the state znode is gone) and fails the partition as the
//! read path does. The round is not counted among the retries. A state znode deleted and
//! created again by someone else at the version the context holds would be overwritten
//! without being read; the controller never does that (a topic is recreated only after its
//! deletion left the context), and Kafka's brokers make the same assumption when they update
//! the ISR with their cached version.

use crate::context::{PartitionLeadership, PartitionReplica, TopicPartition};
use crate::partition_state_machine::{
    complete_election, complete_initialization, plan_election, plan_election_quietly, ElectionStep,
    PartitionPass,
};
use crate::reassignment::{complete_epoch_bump, plan_epoch_bump, EpochBumpStep};
use crate::replica_state_machine::{
    complete_isr_removal, plan_isr_removal, IsrRemoval, IsrRemovalStep, ReplicaPass,
};

use super::{Active, ControllerError};

fn log_read_error(tp: &TopicPartition, e: &crate::zk_data::KafkaZkError) {
    tracing::warn!(topic = %tp.topic, partition = tp.partition, error = %e,
        "cannot read partition state; partition skipped");
}

impl Active {
    /// Performs a partition pass's creates and elections; returns the partitions that got a
    /// leader.
    pub(crate) async fn run_partition_pass(
        &mut self,
        pass: PartitionPass,
        max_retries: usize,
    ) -> Result<Vec<TopicPartition>, ControllerError> {
        let mut done = Vec::new();
        for (tp, e) in &pass.failed {
            tracing::warn!(topic = %tp.topic, partition = tp.partition, error = %e,
                "partition state change failed");
        }
        if !pass.initializations.is_empty() {
            let writes: Vec<_> = pass.initializations.iter().collect();
            let outcomes = self.store.write_states(&writes).await?;
            for (w, o) in pass.initializations.iter().zip(outcomes) {
                match complete_initialization(&mut self.ctx, &mut self.batch, w, o) {
                    Ok(()) => done.push(w.tp.clone()),
                    Err(e) => tracing::warn!(topic = %w.tp.topic, partition = w.tp.partition,
                        error = %e, "partition initialization failed"),
                }
            }
        }
        let Some(strategy) = pass.strategy else {
            return Ok(done);
        };
        let mut pending = self
            .optimistic_elections(pass.elections, strategy, &mut done)
            .await?;
        for _round in 0..=max_retries {
            if pending.is_empty() {
                break;
            }
            let reads = self.store.read_states(&pending).await;
            let mut planned = Vec::new();
            for (tp, read) in pending.iter().zip(reads) {
                let read = match read {
                    Ok(r) => r,
                    Err(e) => {
                        log_read_error(tp, &e);
                        continue;
                    }
                };
                match plan_election(&self.ctx, tp, read.as_ref(), strategy) {
                    Ok(p) => planned.push(p),
                    Err(e) => tracing::warn!(topic = %tp.topic, partition = tp.partition,
                        error = %e, "election failed"),
                }
            }
            let writes: Vec<_> = planned.iter().map(|p| &p.write).collect();
            let outcomes = self.store.write_states(&writes).await?;
            let mut retry = Vec::new();
            for (p, o) in planned.iter().zip(outcomes) {
                match complete_election(&mut self.ctx, &mut self.batch, p, o) {
                    ElectionStep::Elected(_) => done.push(p.write.tp.clone()),
                    ElectionStep::Retry => retry.push(p.write.tp.clone()),
                    ElectionStep::Failed(e) => tracing::warn!(topic = %p.write.tp.topic,
                        partition = p.write.tp.partition, error = %e, "election failed"),
                }
            }
            pending = retry;
        }
        for tp in &pending {
            tracing::warn!(topic = %tp.topic, partition = tp.partition,
                "election gave up after repeated version conflicts");
        }
        Ok(done)
    }

    /// The optimistic round of elections (module docs): plans from the context's leadership,
    /// writes conditional on its version, completes what was written or is gone, and returns
    /// the partitions to read and decide again, in their original order.
    async fn optimistic_elections(
        &mut self,
        elections: Vec<TopicPartition>,
        strategy: crate::election::ElectionStrategy,
        done: &mut Vec<TopicPartition>,
    ) -> Result<Vec<TopicPartition>, ControllerError> {
        let mut planned = Vec::new();
        let mut plan_of = Vec::with_capacity(elections.len());
        for tp in &elections {
            let cached = self.ctx.leadership(tp);
            match cached.map(|l| plan_election_quietly(&self.ctx, tp, Some(l), strategy)) {
                Some(Ok(p)) => {
                    plan_of.push(Some(planned.len()));
                    planned.push(p);
                }
                _ => plan_of.push(None),
            }
        }
        if planned.is_empty() {
            return Ok(elections);
        }
        let writes: Vec<_> = planned.iter().map(|p| &p.write).collect();
        let outcomes = self.store.write_states(&writes).await?;
        let mut again = vec![false; planned.len()];
        for ((i, p), o) in planned.iter().enumerate().zip(outcomes) {
            match complete_election(&mut self.ctx, &mut self.batch, p, o) {
                ElectionStep::Elected(_) => done.push(p.write.tp.clone()),
                ElectionStep::Retry => again[i] = true,
                ElectionStep::Failed(e) => tracing::warn!(topic = %p.write.tp.topic,
                    partition = p.write.tp.partition, error = %e, "election failed"),
            }
        }
        Ok(elections
            .into_iter()
            .zip(plan_of)
            .filter(|(_, i)| i.is_none_or(|i| again[i]))
            .map(|(tp, _)| tp)
            .collect())
    }

    /// The optimistic round of ISR removals (module docs), for the first removal of each
    /// partition: plans from the context's leadership, writes conditional on its version,
    /// completes what was written or is gone, and returns the removals to read and decide
    /// again, in their original order.
    async fn optimistic_isr_removals(
        &mut self,
        removals: Vec<PartitionReplica>,
    ) -> Result<Vec<PartitionReplica>, ControllerError> {
        let mut seen = crate::partition_map::PartitionMap::default();
        let mut planned = Vec::new();
        let mut plan_of = Vec::with_capacity(removals.len());
        for r in &removals {
            if seen.insert(r.tp.clone(), ()).is_some() {
                plan_of.push(None);
                continue;
            }
            let cached = self.ctx.leadership(&r.tp);
            match cached.map(|l| plan_isr_removal(&self.ctx, r, Some(l))) {
                Some(Ok(w @ IsrRemoval::Write(_))) => {
                    plan_of.push(Some(planned.len()));
                    planned.push((r, w));
                }
                _ => plan_of.push(None),
            }
        }
        if planned.is_empty() {
            return Ok(removals);
        }
        let writes: Vec<_> = planned
            .iter()
            .filter_map(|(_, p)| match p {
                IsrRemoval::Write(w) => Some(w),
                IsrRemoval::Unchanged(_) => None,
            })
            .collect();
        let outcomes = self.store.write_states(&writes).await?;
        let mut again = vec![false; planned.len()];
        for ((i, (r, p)), o) in planned.iter().enumerate().zip(outcomes) {
            match complete_isr_removal(&mut self.ctx, &mut self.batch, r, p, o) {
                IsrRemovalStep::Done(_) => {}
                IsrRemovalStep::Retry => again[i] = true,
                IsrRemovalStep::Failed(e) => tracing::warn!(topic = %r.tp.topic,
                    partition = r.tp.partition, broker = r.replica, error = %e,
                    "ISR removal failed"),
            }
        }
        Ok(removals
            .into_iter()
            .zip(plan_of)
            .filter(|(_, i)| i.is_none_or(|i| again[i]))
            .map(|(r, _)| r)
            .collect())
    }

    /// Performs a replica pass's ISR removals (replicas going offline).
    pub(crate) async fn run_replica_pass(
        &mut self,
        pass: ReplicaPass,
        max_retries: usize,
    ) -> Result<(), ControllerError> {
        for (r, e) in &pass.failed {
            tracing::warn!(topic = %r.tp.topic, partition = r.tp.partition, broker = r.replica,
                error = %e, "replica state change failed");
        }
        let mut pending = self.optimistic_isr_removals(pass.isr_removals).await?;
        for _round in 0..=max_retries {
            if pending.is_empty() {
                break;
            }
            // One removal per partition per round: two replicas of one partition would race
            // on the same znode version.
            let mut seen = crate::partition_map::PartitionMap::default();
            let (now, later): (Vec<_>, Vec<_>) = pending
                .into_iter()
                .partition(|r| seen.insert(r.tp.clone(), ()).is_none());
            let tps: Vec<TopicPartition> = now.iter().map(|r| r.tp.clone()).collect();
            let reads = self.store.read_states(&tps).await;
            let mut planned = Vec::new();
            for (r, read) in now.iter().zip(reads) {
                let read = match read {
                    Ok(x) => x,
                    Err(e) => {
                        log_read_error(&r.tp, &e);
                        continue;
                    }
                };
                match plan_isr_removal(&self.ctx, r, read.as_ref()) {
                    Ok(p) => planned.push((r, p)),
                    Err(e) => tracing::warn!(topic = %r.tp.topic, partition = r.tp.partition,
                        broker = r.replica, error = %e, "ISR removal failed"),
                }
            }
            let writes: Vec<_> = planned
                .iter()
                .filter_map(|(_, p)| match p {
                    IsrRemoval::Write(w) => Some(w),
                    IsrRemoval::Unchanged(_) => None,
                })
                .collect();
            let mut outcomes = self.store.write_states(&writes).await?.into_iter();
            let mut retry = later;
            for (r, p) in &planned {
                let outcome = match p {
                    IsrRemoval::Write(_) => match outcomes.next() {
                        Some(o) => o,
                        None => continue,
                    },
                    IsrRemoval::Unchanged(_) => {
                        crate::partition_state_machine::WriteOutcome::Written { version: 0 }
                    }
                };
                match complete_isr_removal(&mut self.ctx, &mut self.batch, r, p, outcome) {
                    IsrRemovalStep::Done(_) => {}
                    IsrRemovalStep::Retry => retry.push((*r).clone()),
                    IsrRemovalStep::Failed(e) => tracing::warn!(topic = %r.tp.topic,
                        partition = r.tp.partition, broker = r.replica, error = %e,
                        "ISR removal failed"),
                }
            }
            pending = retry;
        }
        Ok(())
    }

    /// K7 steps 2 and 7: bumps the leader epoch of `tp` (re-read and retry on conflict).
    pub(crate) async fn bump_leader_epoch(
        &mut self,
        tp: &TopicPartition,
        max_retries: usize,
    ) -> Result<Option<PartitionLeadership>, ControllerError> {
        for _ in 0..=max_retries {
            let read = match self.store.read_states(std::slice::from_ref(tp)).await.pop() {
                Some(Ok(r)) => r,
                Some(Err(e)) => {
                    log_read_error(tp, &e);
                    return Ok(None);
                }
                None => return Ok(None),
            };
            let write = match plan_epoch_bump(&self.ctx, tp, read.as_ref()) {
                Ok(w) => w,
                Err(e) => {
                    tracing::warn!(topic = %tp.topic, partition = tp.partition, error = %e,
                        "leader epoch bump failed");
                    return Ok(None);
                }
            };
            let outcome = self.store.write_states(&[&write]).await?;
            let Some(o) = outcome.first() else {
                return Ok(None);
            };
            match complete_epoch_bump(&mut self.ctx, &mut self.batch, &write, *o) {
                EpochBumpStep::Done(l) => return Ok(Some(l)),
                EpochBumpStep::Retry => continue,
                EpochBumpStep::Failed => return Ok(None),
            }
        }
        Ok(None)
    }
}
