//! The controller's reads and writes of the coordination store: partition states read with
//! all requests in flight at once (pipelined multi-reads) and written in batched fenced
//! transactions, each write with the outcome it would have had alone (every write fenced by
//! the controller epoch, KAFKA-6082, as Kafka's `KafkaZkClient` does); states written during
//! an event are not read again in that event; topic assignments rewritten keeping the fields
//! the controller does not own, and the conversions between znode JSON and the context's
//! types.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::context::{
    BrokerEndpoint, BrokerInfo, LeaderRecoveryState, PartitionLeadership, ReplicaAssignment,
    TopicPartition,
};
use crate::partition_map::PartitionMap;
use crate::partition_state_machine::{PartitionStateWrite, WriteKind, WriteOutcome};
use crate::reassignment::TopicAssignmentWrite;
use crate::zk_data::{
    paths, BrokerRegistration, ControllerEpoch, KafkaZkClient, KafkaZkError, PartitionStateZNode,
    TopicAssignment, LEADER_RECOVERED,
};
use ha_coordination::{CoordinationError, CreateMode, Op, OpResult, ANY_VERSION};

use super::ControllerError;

/// The leadership a state znode holds, at znode version `version`.
pub fn leadership_from_znode(z: &PartitionStateZNode, version: i32) -> PartitionLeadership {
    leadership_of(
        z.leader,
        z.leader_epoch,
        z.isr.clone(),
        z.controller_epoch,
        z.leader_recovery_state,
        version,
    )
}

/// As [`leadership_from_znode`], taking the znode (its ISR is not copied).
fn leadership_from_znode_owned(z: PartitionStateZNode, version: i32) -> PartitionLeadership {
    leadership_of(
        z.leader,
        z.leader_epoch,
        z.isr,
        z.controller_epoch,
        z.leader_recovery_state,
        version,
    )
}

fn leadership_of(
    leader: i32,
    leader_epoch: i32,
    isr: Vec<i32>,
    controller_epoch: i32,
    leader_recovery_state: Option<i32>,
    version: i32,
) -> PartitionLeadership {
    let mut l = PartitionLeadership::new(leader, leader_epoch, isr, controller_epoch, version);
    if leader_recovery_state.is_some_and(|s| s != LEADER_RECOVERED) {
        l.leader_recovery_state = LeaderRecoveryState::Recovering;
    }
    l
}

/// The state znode content of a leadership.
pub fn leadership_to_znode(l: &PartitionLeadership) -> PartitionStateZNode {
    let mut z =
        PartitionStateZNode::new(l.leader, l.leader_epoch, l.controller_epoch, l.isr.clone());
    if l.leader_recovery_state == LeaderRecoveryState::Recovering {
        z.leader_recovery_state = Some(1);
    }
    z
}

/// A broker's context entry from its registration and broker epoch (czxid).
pub fn broker_info(id: i32, reg: &BrokerRegistration, epoch: i64) -> BrokerInfo {
    let mut info = BrokerInfo::new(id, epoch);
    info.rack = reg.rack.clone();
    for ep in &reg.endpoints {
        let Some((listener, rest)) = ep.split_once("://") else {
            continue;
        };
        let Some((host, port)) = rest.rsplit_once(':') else {
            continue;
        };
        let Ok(port) = port.parse::<i32>() else {
            continue;
        };
        let protocol = reg
            .listener_security_protocol_map
            .as_ref()
            .and_then(|m| m.get(listener))
            .map_or(listener, String::as_str);
        let security_protocol = match protocol {
            "SSL" => 1,
            "SASL_PLAINTEXT" => 2,
            "SASL_SSL" => 3,
            _ => 0,
        };
        info.endpoints.push(BrokerEndpoint {
            listener: listener.to_string(),
            host: host.trim_matches(['[', ']']).to_string(),
            port,
            security_protocol,
        });
    }
    if info.endpoints.is_empty() {
        if let Some(host) = &reg.host {
            info = info.with_plaintext(host, reg.port);
        }
    }
    info
}

/// A topic's assignment from its znode.
pub fn assignment_from_znode(t: &TopicAssignment) -> BTreeMap<i32, ReplicaAssignment> {
    let empty = BTreeMap::new();
    let adding = t.adding_replicas.as_ref().unwrap_or(&empty);
    let removing = t.removing_replicas.as_ref().unwrap_or(&empty);
    t.partitions
        .iter()
        .map(|(p, replicas)| {
            (
                *p,
                ReplicaAssignment {
                    replicas: replicas.clone(),
                    adding_replicas: adding.get(p).cloned().unwrap_or_default(),
                    removing_replicas: removing.get(p).cloned().unwrap_or_default(),
                },
            )
        })
        .collect()
}

/// `w`'s partitions (and reassignment fields, v2+) written into a topic znode.
fn apply_topic_write(znode: &mut TopicAssignment, w: &TopicAssignmentWrite) {
    znode.partitions = w
        .partitions
        .iter()
        .map(|(p, a)| (*p, a.replicas.clone()))
        .collect();
    let adding: BTreeMap<i32, Vec<i32>> = w
        .partitions
        .iter()
        .filter(|(_, a)| !a.adding_replicas.is_empty())
        .map(|(p, a)| (*p, a.adding_replicas.clone()))
        .collect();
    let removing: BTreeMap<i32, Vec<i32>> = w
        .partitions
        .iter()
        .filter(|(_, a)| !a.removing_replicas.is_empty())
        .map(|(p, a)| (*p, a.removing_replicas.clone()))
        .collect();
    if znode.version >= 2 || !adding.is_empty() || !removing.is_empty() {
        znode.version = znode.version.max(2);
        znode.adding_replicas = Some(adding);
        znode.removing_replicas = Some(removing);
    }
}

/// Partition-state reads per multi-read request on ZooKeeper (informational: the
/// coordination client batches).
pub const READ_BATCH: usize = 1000;

fn outcome_of(result: Result<OpResult, CoordinationError>) -> Result<WriteOutcome, KafkaZkError> {
    match result {
        Ok(OpResult::SetData { stat }) => Ok(WriteOutcome::Written {
            version: stat.version,
        }),
        Ok(_) => Ok(WriteOutcome::Written { version: 0 }),
        Err(e) => match e.root() {
            CoordinationError::BadVersion { .. } => Ok(WriteOutcome::BadVersion),
            CoordinationError::NoNode { .. } => Ok(WriteOutcome::NoNode),
            CoordinationError::NodeExists { .. } => Ok(WriteOutcome::NodeExists),
            _ => Err(KafkaZkError::Coordination(e)),
        },
    }
}

/// The store as one controller epoch sees it.
#[derive(Debug, Clone)]
pub struct Store {
    /// The Kafka-level client.
    pub zk: KafkaZkClient,
    /// The epoch fencing every write.
    pub epoch: ControllerEpoch,
    /// The partition states this controller wrote during the current event, as written (the
    /// version is the one the write produced): a read of one of them in the same event is
    /// answered from here, as a read right after the write would have been.
    own_writes: Arc<Mutex<PartitionMap<PartitionLeadership>>>,
}

impl Store {
    /// The store of the controller of `epoch`.
    pub fn new(zk: KafkaZkClient, epoch: ControllerEpoch) -> Store {
        Store {
            zk,
            epoch,
            own_writes: Arc::default(),
        }
    }

    fn own_writes(&self) -> MutexGuard<'_, PartitionMap<PartitionLeadership>> {
        self.own_writes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a new controller event: forgets the partition states written during the last
    /// one, so that every event reads the store afresh before its first write of a partition
    /// (others, e.g. partition leaders changing the ISR, write between events).
    pub fn begin_event(&self) {
        let mut own = self.own_writes();
        if !own.is_empty() {
            *own = PartitionMap::default();
        }
    }

    /// A fenced transaction; a failed fence is [`ControllerError::ControllerMoved`].
    pub async fn fenced(&self, ops: Vec<Op>) -> Result<(), ControllerError> {
        self.zk
            .fenced_multi(self.epoch, ops)
            .await
            .map(|_| ())
            .map_err(ControllerError::from)
    }

    /// K1.1: reads the states of `tps` in bulk (multi-reads of [`READ_BATCH`] paths on
    /// ZooKeeper, every batch in flight at once). `Ok(None)`: no state znode. A malformed
    /// znode is an `Err` for that partition only. A state this controller wrote during the
    /// current event (since [`begin_event`](Self::begin_event)) is not read again: it is
    /// what that write left (Kafka re-reads it; the answer is the one a read right after the
    /// write gets, and a later conditional write on it still fails if anyone wrote since).
    pub async fn read_states(
        &self,
        tps: &[TopicPartition],
    ) -> Vec<Result<Option<PartitionLeadership>, KafkaZkError>> {
        let mut out: Vec<Option<Result<Option<PartitionLeadership>, KafkaZkError>>> =
            Vec::with_capacity(tps.len());
        let mut state_paths = Vec::new();
        {
            let own = self.own_writes();
            for tp in tps {
                match own.get(tp) {
                    Some(l) => out.push(Some(Ok(Some(l.clone())))),
                    None => {
                        out.push(None);
                        state_paths.push(paths::partition_state(&tp.topic, tp.partition));
                    }
                }
            }
        }
        if state_paths.is_empty() {
            return out.into_iter().flatten().collect();
        }
        let mut reads = self
            .zk
            .partition_states_at(&state_paths)
            .await
            .into_iter()
            .map(|r| r.map(|o| o.map(|(z, v)| leadership_from_znode_owned(z, v))));
        out.into_iter()
            .map(|cached| match cached {
                Some(r) => r,
                None => reads.next().unwrap_or_else(|| {
                    Err(CoordinationError::Backend("missing bulk read result".into()).into())
                }),
            })
            .collect()
    }

    /// K1.3: performs partition-state writes, each fenced by the controller epoch and
    /// conditional on its expected version (creates make the parent znodes first), batched
    /// into few fenced transactions ([`KafkaZkClient::fenced_writes`]): each write gets the
    /// outcome it would have had alone (written, or BADVERSION / NONODE / NODEEXISTS for that
    /// partition only). A failed fence on any write is [`ControllerError::ControllerMoved`]
    /// for the whole call: the controller must resign.
    pub async fn write_states(
        &self,
        writes: &[&PartitionStateWrite],
    ) -> Result<Vec<WriteOutcome>, ControllerError> {
        // Parents of new state znodes first (fenced; existing ones are fine), once each, in
        // batched fenced transactions: the topics' `partitions`, then each `partitions/<p>`.
        let mut parents: Vec<String> = Vec::new();
        for w in writes.iter().filter(|w| w.kind == WriteKind::Create) {
            let topic_path = paths::topic_partitions(&w.tp.topic);
            if parents.last() != Some(&topic_path) && !parents.contains(&topic_path) {
                parents.push(topic_path);
            }
        }
        let partition_paths: Vec<String> = writes
            .iter()
            .filter(|w| w.kind == WriteKind::Create)
            .map(|w| paths::partition(&w.tp.topic, w.tp.partition))
            .collect();
        for level in [parents, partition_paths] {
            self.ensure_persistent_all(level).await?;
        }
        let mut ops = Vec::with_capacity(writes.len());
        for w in writes {
            let path = paths::partition_state(&w.tp.topic, w.tp.partition);
            let data = leadership_to_znode(&w.leadership)
                .to_json()
                .map_err(|error| KafkaZkError::Data {
                    path: path.clone(),
                    error,
                })?;
            ops.push(match w.kind {
                WriteKind::Create => Op::create(path, data, CreateMode::Persistent),
                WriteKind::Update { expected_version } => {
                    Op::set_data(path, data, expected_version)
                }
            });
        }
        let results = match self.zk.fenced_writes(self.epoch, ops).await {
            Ok(results) => results,
            Err(e) => {
                // Some writes may have applied: nothing written in this event is known any more.
                self.begin_event();
                return Err(e.into());
            }
        };
        let mut out = Vec::with_capacity(writes.len());
        let mut error = None;
        let mut own = self.own_writes();
        for (w, r) in writes.iter().zip(results) {
            match outcome_of(r) {
                Ok(o) => {
                    match o {
                        WriteOutcome::Written { version } => {
                            let mut l = w.leadership.clone();
                            l.partition_epoch = version;
                            own.insert(w.tp.clone(), l);
                        }
                        _ => {
                            own.remove(&w.tp);
                        }
                    }
                    out.push(o);
                }
                Err(e) => {
                    own.remove(&w.tp);
                    error.get_or_insert(e);
                }
            }
        }
        match error {
            Some(e) => Err(e.into()),
            None => Ok(out),
        }
    }

    /// Creates the persistent, empty znodes `paths` that are missing, fenced, in batched
    /// transactions ([`KafkaZkClient::fenced_writes`]); existing ones are fine.
    async fn ensure_persistent_all(&self, paths: Vec<String>) -> Result<(), ControllerError> {
        if paths.is_empty() {
            return Ok(());
        }
        let ops = paths
            .into_iter()
            .map(|p| Op::create(p, Vec::new(), CreateMode::Persistent))
            .collect();
        for r in self.zk.fenced_writes(self.epoch, ops).await? {
            match r {
                Ok(_) => {}
                Err(e) if e.is_node_exists() => {}
                Err(e) => return Err(KafkaZkError::Coordination(e).into()),
            }
        }
        Ok(())
    }

    /// Rewrites `/brokers/topics/<t>` with `w`'s partitions, keeping the topic id and unknown
    /// fields of the current znode: read, change, write conditional on the version read
    /// (fenced), again from the read if the znode changed meanwhile. A malformed znode is
    /// replaced whatever its version.
    pub async fn write_topic(&self, w: &TopicAssignmentWrite) -> Result<(), ControllerError> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let (mut znode, version) = match self.zk.topic_assignment(&w.topic, false).await {
                Ok(Some(read)) => read,
                Ok(None) => (TopicAssignment::new(BTreeMap::new()), ANY_VERSION),
                Err(KafkaZkError::Data { error, .. }) => {
                    tracing::warn!(topic = %w.topic, error = %error, "malformed topic znode; rewriting");
                    (TopicAssignment::new(BTreeMap::new()), ANY_VERSION)
                }
                Err(e) => return Err(e.into()),
            };
            apply_topic_write(&mut znode, w);
            match self
                .zk
                .set_topic_assignment(self.epoch, &w.topic, &znode, version)
                .await
            {
                Ok(_) => return Ok(()),
                Err(KafkaZkError::Coordination(e)) if e.is_bad_version() && attempts < 10 => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Fenced deletes of `paths` (leaves first), skipping the ones already gone.
    pub async fn delete_all(&self, paths_in_order: &[String]) -> Result<(), ControllerError> {
        let coord = self.zk.coordination();
        let mut ops = Vec::new();
        for p in paths_in_order {
            if coord
                .exists(p, false)
                .await
                .map_err(KafkaZkError::from)?
                .is_some()
            {
                ops.push(Op::delete(p, ANY_VERSION));
            }
        }
        if ops.is_empty() {
            return Ok(());
        }
        // A deleted state znode is no longer what this event wrote.
        self.begin_event();
        self.fenced(ops).await
    }

    /// Every path under `root` (included), deepest first, for a recursive delete.
    pub async fn subtree(&self, root: &str) -> Result<Vec<String>, ControllerError> {
        let coord = self.zk.coordination();
        let mut out = Vec::new();
        let mut stack = vec![root.to_string()];
        while let Some(p) = stack.pop() {
            match coord.children(&p, false).await {
                Ok(children) => {
                    for c in children {
                        stack.push(ha_coordination::path::join(&p, &c));
                    }
                    out.push(p);
                }
                Err(e) if e.is_no_node() => {}
                Err(e) => return Err(KafkaZkError::from(e).into()),
            }
        }
        out.reverse();
        Ok(out)
    }
}
