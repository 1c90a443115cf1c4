//! What the demo watches while a partition is reassigned (K7): every write of the controller
//! and the brokers to the coordination store and every control request the controller sends,
//! recorded in order by thin wrappers ([`ObservedCoordination`], [`ObservedChannel`]) around the
//! real session and channel. Recording is off except while [`Recorder::watch`] is on, and
//! only the watched partition's nodes and requests are kept, so a fast controller in a release
//! build cannot slip a step past the narration (a poll of the store could).

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use ha_coordination::{
    Coordination, CoordinationError, CoordinationLayer, CreateMode, Op, OpResult, Stat,
};
use kafka_controller::broker_channel::{BrokerChannel, ChannelError};
use kafka_controller::context::BrokerInfo;
use kafka_controller::zk_data::{paths, PartitionStateZNode, TopicAssignment};
use kafka_wire::RequestBody;

/// One thing that happened to the watched partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// The topic's assignment was written: AR, adding and removing replicas of the partition.
    Assignment {
        /// All replicas (AR).
        replicas: Vec<i32>,
        /// Replicas being added.
        adding: Vec<i32>,
        /// Replicas being removed.
        removing: Vec<i32>,
    },
    /// The partition state was written (by the controller, or by the leader's ISR writer).
    State {
        /// The leader.
        leader: i32,
        /// The leader epoch.
        leader_epoch: i32,
        /// The ISR.
        isr: Vec<i32>,
    },
    /// The reassignment request node was deleted.
    RequestDeleted,
    /// The controller sent LeaderAndIsr for the partition to `broker`.
    LeaderAndIsr {
        /// The receiving broker.
        broker: i32,
        /// The leader in the request.
        leader: i32,
        /// The leader epoch in the request.
        leader_epoch: i32,
        /// The ISR in the request.
        isr: Vec<i32>,
    },
    /// The controller sent StopReplica for the partition to `broker`.
    StopReplica {
        /// The receiving broker.
        broker: i32,
        /// Whether the replica is deleted.
        delete: bool,
    },
}

#[derive(Default)]
struct State {
    watched: Option<(String, i32)>,
    seen: Vec<Observed>,
}

/// The shared record of [`Observed`] events; cheap to clone.
#[derive(Clone, Default)]
pub struct Recorder {
    inner: Arc<Mutex<State>>,
}

impl Recorder {
    /// A recorder watching nothing.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts recording what happens to `topic`-`partition` (dropping anything earlier).
    pub fn watch(&self, topic: &str, partition: i32) {
        let mut s = self.lock();
        s.watched = Some((topic.to_owned(), partition));
        s.seen.clear();
    }

    /// Stops recording.
    pub fn stop(&self) {
        self.lock().watched = None;
    }

    /// Takes what was recorded since the last call.
    pub fn take(&self) -> Vec<Observed> {
        std::mem::take(&mut self.lock().seen)
    }

    fn on_write(&self, path: &str, data: Option<&[u8]>) {
        let mut s = self.lock();
        let Some((topic, partition)) = s.watched.clone() else {
            return;
        };
        let event = if path == paths::topic(&topic) {
            data.and_then(|d| TopicAssignment::from_json(d).ok())
                .map(|a| {
                    let of = |m: Option<&std::collections::BTreeMap<i32, Vec<i32>>>| {
                        m.and_then(|m| m.get(&partition).cloned())
                            .unwrap_or_default()
                    };
                    Observed::Assignment {
                        replicas: of(Some(&a.partitions)),
                        adding: of(a.adding_replicas.as_ref()),
                        removing: of(a.removing_replicas.as_ref()),
                    }
                })
        } else if path == paths::partition_state(&topic, partition) {
            data.and_then(|d| PartitionStateZNode::from_json(d).ok())
                .map(|p| Observed::State {
                    leader: p.leader,
                    leader_epoch: p.leader_epoch,
                    isr: p.isr,
                })
        } else if path == paths::REASSIGN_PARTITIONS && data.is_none() {
            Some(Observed::RequestDeleted)
        } else {
            None
        };
        s.seen.extend(event);
    }

    fn on_request(&self, broker: i32, request: &RequestBody) {
        let mut s = self.lock();
        let Some((topic, partition)) = s.watched.clone() else {
            return;
        };
        match request {
            RequestBody::LeaderAndIsr(r) => {
                let grouped = r.topic_states.iter().flat_map(|t| {
                    t.partition_states
                        .iter()
                        .map(move |p| (t.topic_name.to_string(), p))
                });
                let ungrouped = r
                    .ungrouped_partition_states
                    .iter()
                    .map(|p| (p.topic_name.to_string(), p));
                for (t, p) in grouped.chain(ungrouped) {
                    if t == topic && p.partition_index == partition {
                        s.seen.push(Observed::LeaderAndIsr {
                            broker,
                            leader: p.leader,
                            leader_epoch: p.leader_epoch,
                            isr: p.isr.to_vec(),
                        });
                    }
                }
            }
            RequestBody::StopReplica(r) => {
                let mut deletes = Vec::new();
                for p in &r.ungrouped_partitions {
                    if &*p.topic_name == topic.as_str() && p.partition_index == partition {
                        deletes.push(r.delete_partitions);
                    }
                }
                for t in &r.topics {
                    if &*t.name == topic.as_str() && t.partition_indexes.contains(&partition) {
                        deletes.push(r.delete_partitions);
                    }
                }
                for t in &r.topic_states {
                    if &*t.topic_name == topic.as_str() {
                        for p in &t.partition_states {
                            if p.partition_index == partition {
                                deletes.push(p.delete_partition);
                            }
                        }
                    }
                }
                for delete in deletes {
                    s.seen.push(Observed::StopReplica { broker, delete });
                }
            }
            _ => {}
        }
    }
}

/// A [`Coordination`] that records its successful writes into a [`Recorder`].
pub struct ObservedCoordination {
    inner: Arc<dyn Coordination>,
    recorder: Recorder,
}

impl ObservedCoordination {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Coordination>, recorder: Recorder) -> Self {
        ObservedCoordination { inner, recorder }
    }
}

#[async_trait]
impl CoordinationLayer for ObservedCoordination {
    fn inner(&self) -> &dyn Coordination {
        self.inner.as_ref()
    }

    async fn create(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> Result<(String, Stat), CoordinationError> {
        let r = self.inner.create(path, data, mode).await?;
        self.recorder.on_write(&r.0, Some(data));
        Ok(r)
    }

    async fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: i32,
    ) -> Result<Stat, CoordinationError> {
        let r = self.inner.set_data(path, data, version).await?;
        self.recorder.on_write(path, Some(data));
        Ok(r)
    }

    async fn delete(&self, path: &str, version: i32) -> Result<(), CoordinationError> {
        self.inner.delete(path, version).await?;
        self.recorder.on_write(path, None);
        Ok(())
    }

    async fn multi(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, CoordinationError> {
        let results = self.inner.multi(ops.clone()).await?;
        for op in &ops {
            match op {
                Op::Create { path, data, .. } | Op::SetData { path, data, .. } => {
                    self.recorder.on_write(path, Some(data))
                }
                Op::Delete { path, .. } => self.recorder.on_write(path, None),
                Op::Check { .. } => {}
            }
        }
        Ok(results)
    }
}

/// A [`BrokerChannel`] that records the control requests it sends into a [`Recorder`].
pub struct ObservedChannel<C> {
    inner: C,
    recorder: Recorder,
}

impl<C> ObservedChannel<C> {
    /// Wraps `inner`.
    pub fn new(inner: C, recorder: Recorder) -> Self {
        ObservedChannel { inner, recorder }
    }
}

#[async_trait]
impl<C: BrokerChannel> BrokerChannel for ObservedChannel<C> {
    async fn send(
        &self,
        broker: &BrokerInfo,
        version: i16,
        request: &RequestBody,
    ) -> Result<kafka_wire::ResponseBody, ChannelError> {
        // Recorded as sent, in the order the controller sends.
        self.recorder.on_request(broker.id, request);
        self.inner.send(broker, version, request).await
    }
}
