//! [`ZkIsrWriter`]: a ZooKeeper-mode leader writing its partition's ISR itself, with a
//! compare-and-set on `/brokers/topics/<t>/partitions/<p>/state` (Kafka's `ReplicationUtils.updateLeaderAndIsr`), over any
//! [`Coordination`] store.
//!
//! The expected znode version is the partition epoch the proposal is based on. The leader keeps
//! the leader, leader epoch and the `controller_epoch` of the controller that made the
//! leadership decision (learnt from LeaderAndIsr), and every JSON field it does not know. On
//! `BADVERSION` it re-reads: content equal to what it tried to write means an earlier attempt
//! of the same write applied (Kafka's `checkLeaderAndIsrZkData`) and counts as success;
//! anything else is a conflict, and the leader waits for the controller's next LeaderAndIsr.
//! Every successful change is recorded for ISR change propagation ([`IsrChangeQueue`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use ha_coordination::{Coordination, CoordinationError, SessionId};
use kafka_controller::zk_data::{paths, PartitionStateZNode, ZkDataError};
use kafka_replication::isr::{IsrProposal, IsrResult, IsrWriter, LeaderAndIsr, TopicPartition};
use tokio::time::Instant;

use super::propagation::IsrChangeQueue;
use crate::{BrokerIsrWriter, LeadershipListener};

/// K4.1 / KIP-380: for each partition this broker leads, the epoch of the controller whose
/// LeaderAndIsr made it leader — shared between the [`ZkIsrWriter`] (whose ISR writes carry
/// it) and the broker's request handler (which learns it from each LeaderAndIsr). Cheap to
/// clone.
#[derive(Debug, Clone, Default)]
pub struct ControllerEpochs {
    inner: Arc<Mutex<HashMap<TopicPartition, i32>>>,
}

impl ControllerEpochs {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TopicPartition, i32>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Remembers `controller_epoch` for `tp`.
    pub fn set(&self, tp: TopicPartition, controller_epoch: i32) {
        self.lock().insert(tp, controller_epoch);
    }

    /// Forgets `tp`.
    pub fn forget(&self, tp: &TopicPartition) {
        self.lock().remove(tp);
    }

    /// The controller epoch remembered for `tp`.
    pub fn get(&self, tp: &TopicPartition) -> Option<i32> {
        self.lock().get(tp).copied()
    }
}

impl LeadershipListener for ControllerEpochs {
    fn leading(&self, tp: &TopicPartition, controller_epoch: i32) {
        self.set(tp.clone(), controller_epoch);
    }

    fn not_leading(&self, tp: &TopicPartition) {
        self.forget(tp);
    }
}

/// Why an ISR write could not be attempted or its outcome is unknown.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum IsrWriteError {
    /// The store failed (session or connection lost past the retries, or another error).
    #[error("coordination store: {0}")]
    Coordination(#[from] CoordinationError),
    /// The partition-state znode holds content that does not decode.
    #[error("{path}: {error}")]
    Data {
        /// The znode.
        path: String,
        /// What is wrong with it.
        error: ZkDataError,
    },
}

/// K1.3, Kafka's `ReplicationUtils.updateLeaderAndIsr`: the [`IsrWriter`] of a ZooKeeper-mode leader.
///
/// Runs on a tokio runtime (the pause between retries of a write lost with the connection is
/// a tokio timer). It learns the controller epoch of each partition it leads through its
/// [`ControllerEpochs`]: a broker started with it ([`Broker::start`](crate::Broker::start))
/// fills them from every LeaderAndIsr; without a broker, call
/// [`set_controller_epoch`](Self::set_controller_epoch).
pub struct ZkIsrWriter {
    coord: Arc<dyn Coordination>,
    controller_epochs: ControllerEpochs,
    changes: IsrChangeQueue,
    /// `None`: retry until the session ends.
    connection_retries: Option<u32>,
    retry_backoff: Duration,
}

impl std::fmt::Debug for ZkIsrWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkIsrWriter")
            .field("controller_epochs", &self.controller_epochs)
            .finish_non_exhaustive()
    }
}

fn to_leader_and_isr(state: &PartitionStateZNode, version: i32) -> LeaderAndIsr {
    LeaderAndIsr {
        leader: state.leader,
        leader_epoch: state.leader_epoch,
        isr: state.isr.clone(),
        partition_epoch: version,
    }
}

impl ZkIsrWriter {
    /// A writer on `coord` recording successful changes into `changes`. A read or write lost
    /// with the connection is retried every 200 ms for as long as the session lives, as
    /// Kafka's `ZooKeeperClient` resends requests until it is connected again: a leader whose
    /// ISR change merely waited out a disconnection must not stay stuck with it. Once the
    /// session has expired the outcome is reported unknown; the broker registers again, and
    /// the controller's LeaderAndIsr for the bounced broker resets the partition.
    pub fn new(coord: Arc<dyn Coordination>, changes: IsrChangeQueue) -> Self {
        ZkIsrWriter {
            coord,
            controller_epochs: ControllerEpochs::new(),
            changes,
            connection_retries: None,
            retry_backoff: Duration::from_millis(200),
        }
    }

    /// Bounds the retries of a read or write lost with the connection to `retries`, `backoff`
    /// apart (still never past the end of the session).
    pub fn with_retries(mut self, retries: u32, backoff: Duration) -> Self {
        self.connection_retries = Some(retries);
        self.retry_backoff = backoff;
        self
    }

    /// K4.3: remembers the epoch of the controller that made `tp`'s current leadership
    /// decision (from the LeaderAndIsr that made this broker leader); ISR writes carry it.
    /// Without it a write keeps the `controller_epoch` stored in the znode.
    pub fn set_controller_epoch(&self, tp: TopicPartition, controller_epoch: i32) {
        self.controller_epochs.set(tp, controller_epoch);
    }

    /// Forgets `tp` (this broker is no longer its leader).
    pub fn forget(&self, tp: &TopicPartition) {
        self.controller_epochs.forget(tp);
    }

    /// The shared table of controller epochs this writer's ISR writes carry.
    pub fn controller_epochs(&self) -> ControllerEpochs {
        self.controller_epochs.clone()
    }

    /// The queue successful changes are recorded into.
    pub fn changes(&self) -> &IsrChangeQueue {
        &self.changes
    }

    /// Whether an operation lost with the connection for the `attempt`-th time, in a try
    /// begun on `session`, is sent again (after the backoff).
    async fn retry_connection(&self, attempt: u32, session: SessionId) -> bool {
        if self.coord.session_id() != session
            || self.connection_retries.is_some_and(|n| attempt >= n)
        {
            return false;
        }
        tokio::time::sleep(self.retry_backoff).await;
        self.coord.session_id() == session
    }

    async fn read(
        &self,
        path: &str,
        session: SessionId,
    ) -> Result<Option<(PartitionStateZNode, i32)>, IsrWriteError> {
        let mut attempt = 0;
        let result = loop {
            match self.coord.get_data(path, false).await {
                Err(CoordinationError::ConnectionLoss)
                    if self.retry_connection(attempt, session).await =>
                {
                    attempt += 1;
                }
                other => break other,
            }
        };
        match result {
            Ok((data, stat)) => {
                let state =
                    PartitionStateZNode::from_json(&data).map_err(|error| IsrWriteError::Data {
                        path: path.to_string(),
                        error,
                    })?;
                Ok(Some((state, stat.version)))
            }
            Err(e) if e.is_no_node() => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// K1.3: the proposal as a compare-and-set, with the detail of a failure. `Ok` is the
    /// store's answer; `Err` means the outcome is unknown or the stored state is unreadable.
    pub async fn try_propose(&self, proposal: &IsrProposal) -> Result<IsrResult, IsrWriteError> {
        let tp = &proposal.topic_partition;
        let p = &proposal.proposed;
        let path = paths::partition_state(&tp.topic, tp.partition);
        let session = self.coord.session_id();
        let Some((stored, version)) = self.read(&path, session).await? else {
            return Ok(IsrResult::Conflict { current: None });
        };
        if version != p.partition_epoch
            || stored.leader != p.leader
            || stored.leader_epoch != p.leader_epoch
        {
            return Ok(IsrResult::Conflict {
                current: Some(to_leader_and_isr(&stored, version)),
            });
        }
        let mut wanted = stored;
        wanted.isr = p.isr.clone();
        if let Some(epoch) = self.controller_epochs.get(tp) {
            wanted.controller_epoch = epoch;
        }
        let data = wanted.to_json().map_err(|error| IsrWriteError::Data {
            path: path.clone(),
            error,
        })?;
        let mut attempt = 0;
        let result = loop {
            match self.coord.set_data(&path, &data, p.partition_epoch).await {
                Ok(stat) => {
                    break IsrResult::Committed {
                        partition_epoch: stat.version,
                    }
                }
                Err(e) if e.is_bad_version() => {
                    break self.after_bad_version(&path, &wanted, session).await?;
                }
                Err(CoordinationError::ConnectionLoss)
                    if self.retry_connection(attempt, session).await =>
                {
                    attempt += 1;
                }
                Err(e) => return Err(e.into()),
            }
        };
        if let IsrResult::Committed { partition_epoch } = &result {
            tracing::info!(
                topic = %tp.topic,
                partition = tp.partition,
                leader_epoch = p.leader_epoch,
                controller_epoch = wanted.controller_epoch,
                partition_epoch,
                isr = ?p.isr,
                "ISR updated in the store"
            );
            self.changes.record(tp.clone(), Instant::now());
        }
        Ok(result)
    }

    /// Kafka's `ReplicationUtils.checkLeaderAndIsrZkData`: after `BADVERSION`, content equal to
    /// what we wrote means our write applied (a retried write); else the state moved on.
    async fn after_bad_version(
        &self,
        path: &str,
        wanted: &PartitionStateZNode,
        session: SessionId,
    ) -> Result<IsrResult, IsrWriteError> {
        match self.read(path, session).await? {
            Some((now, version)) if &now == wanted => Ok(IsrResult::Committed {
                partition_epoch: version,
            }),
            Some((now, version)) => Ok(IsrResult::Conflict {
                current: Some(to_leader_and_isr(&now, version)),
            }),
            None => Ok(IsrResult::Conflict { current: None }),
        }
    }
}

impl BrokerIsrWriter for ZkIsrWriter {
    /// The writer's [`ControllerEpochs`]: the broker tells them every leadership it gains or
    /// loses.
    fn leadership(&self) -> Option<Arc<dyn LeadershipListener>> {
        Some(Arc::new(self.controller_epochs()))
    }
}

#[async_trait]
impl IsrWriter for ZkIsrWriter {
    /// [`try_propose`](ZkIsrWriter::try_propose); an unknown outcome or unreadable state is
    /// reported as a conflict without a current state, so the leader keeps its state and
    /// waits for the controller.
    async fn propose(&mut self, proposal: &IsrProposal) -> IsrResult {
        match self.try_propose(proposal).await {
            Ok(result) => result,
            Err(error) => {
                tracing::warn!(
                    topic = %proposal.topic_partition.topic,
                    partition = proposal.topic_partition.partition,
                    %error,
                    "ISR write failed"
                );
                IsrResult::Conflict { current: None }
            }
        }
    }
}
