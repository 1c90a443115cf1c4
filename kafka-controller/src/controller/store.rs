//! The controller's reads and writes of the coordination store: partition states read and
//! written with all requests in flight at once (pipelined), every write fenced by the
//! controller epoch (KAFKA-6082, as Kafka's `KafkaZkClient` does), topic assignments rewritten keeping the fields the
//! controller does not own, and the conversions between znode JSON and the context's types.

use std::collections::BTreeMap;

use futures::future::join_all;

use crate::context::{
    BrokerEndpoint, BrokerInfo, LeaderRecoveryState, PartitionLeadership, ReplicaAssignment,
    TopicPartition,
};
use crate::partition_state_machine::{PartitionStateWrite, WriteKind, WriteOutcome};
use crate::reassignment::TopicAssignmentWrite;
use crate::zk_data::{
    paths, BrokerRegistration, ControllerEpoch, KafkaZkClient, KafkaZkError, PartitionStateZNode,
    TopicAssignment, LEADER_RECOVERED,
};
use ha_coordination::{CoordinationError, CreateMode, Op, ANY_VERSION};

use super::ControllerError;

/// The leadership a state znode holds, at znode version `version`.
pub fn leadership_from_znode(z: &PartitionStateZNode, version: i32) -> PartitionLeadership {
    let mut l = PartitionLeadership::new(
        z.leader,
        z.leader_epoch,
        z.isr.clone(),
        z.controller_epoch,
        version,
    );
    if z.leader_recovery_state
        .is_some_and(|s| s != LEADER_RECOVERED)
    {
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

/// Partition-state writes per fenced transaction.
const WRITE_BATCH: usize = 500;

fn written(r: &ha_coordination::OpResult) -> WriteOutcome {
    match r {
        ha_coordination::OpResult::SetData { stat } => WriteOutcome::Written {
            version: stat.version,
        },
        _ => WriteOutcome::Written { version: 0 },
    }
}

fn outcome_of(e: &CoordinationError) -> Option<WriteOutcome> {
    match e.root() {
        CoordinationError::BadVersion { .. } => Some(WriteOutcome::BadVersion),
        CoordinationError::NoNode { .. } => Some(WriteOutcome::NoNode),
        CoordinationError::NodeExists { .. } => Some(WriteOutcome::NodeExists),
        _ => None,
    }
}

/// The store as one controller epoch sees it.
#[derive(Debug, Clone)]
pub struct Store {
    /// The Kafka-level client.
    pub zk: KafkaZkClient,
    /// The epoch fencing every write.
    pub epoch: ControllerEpoch,
}

impl Store {
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
    /// znode is an `Err` for that partition only.
    pub async fn read_states(
        &self,
        tps: &[TopicPartition],
    ) -> Vec<Result<Option<PartitionLeadership>, KafkaZkError>> {
        let state_paths: Vec<String> = tps
            .iter()
            .map(|tp| paths::partition_state(&tp.topic, tp.partition))
            .collect();
        self.zk
            .partition_states_at(&state_paths)
            .await
            .into_iter()
            .map(|r| r.map(|o| o.map(|(z, v)| leadership_from_znode(&z, v))))
            .collect()
    }

    /// K1.3: performs partition-state writes, pipelined, each fenced by the controller epoch
    /// (creates make the parent znodes first). A failed fence on any write is an error for
    /// the whole call: the controller must resign.
    pub async fn write_states(
        &self,
        writes: &[&PartitionStateWrite],
    ) -> Result<Vec<WriteOutcome>, ControllerError> {
        // Parents of new state znodes first (fenced; existing ones are fine), once each.
        let mut parents: Vec<String> = Vec::new();
        for w in writes.iter().filter(|w| w.kind == WriteKind::Create) {
            let topic_path = paths::topic_partitions(&w.tp.topic);
            if parents.last() != Some(&topic_path) && !parents.contains(&topic_path) {
                parents.push(topic_path);
            }
        }
        for r in join_all(
            parents
                .iter()
                .map(|p| self.zk.ensure_persistent(self.epoch, p)),
        )
        .await
        {
            r?;
        }
        let partition_paths: Vec<String> = writes
            .iter()
            .filter(|w| w.kind == WriteKind::Create)
            .map(|w| paths::partition(&w.tp.topic, w.tp.partition))
            .collect();
        for r in join_all(
            partition_paths
                .iter()
                .map(|p| self.zk.ensure_persistent(self.epoch, p)),
        )
        .await
        {
            r?;
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
                WriteKind::Create => Op::create(&path, data, CreateMode::Persistent),
                WriteKind::Update { expected_version } => {
                    Op::set_data(&path, data, expected_version)
                }
            });
        }
        // Multi-batching: up to WRITE_BATCH writes per fenced transaction, all transactions in
        // flight at once. A transaction failing on one write (a version race) is retried write
        // by write, so each partition gets its own outcome.
        let chunks = ops.chunks(WRITE_BATCH).map(|chunk| async move {
            match self.zk.fenced_multi(self.epoch, chunk.to_vec()).await {
                Ok(results) => Ok(results.iter().map(written).collect::<Vec<_>>()),
                Err(KafkaZkError::Coordination(CoordinationError::MultiOpFailed { .. }))
                    if chunk.len() > 1 =>
                {
                    let singles = chunk.iter().map(|op| async move {
                        match self.zk.fenced_multi(self.epoch, vec![op.clone()]).await {
                            Ok(results) => Ok(results
                                .first()
                                .map_or(WriteOutcome::Written { version: 0 }, written)),
                            Err(KafkaZkError::Coordination(e)) => match outcome_of(&e) {
                                Some(o) => Ok(o),
                                None => Err(KafkaZkError::Coordination(e)),
                            },
                            Err(e) => Err(e),
                        }
                    });
                    join_all(singles).await.into_iter().collect()
                }
                Err(KafkaZkError::Coordination(e)) => match outcome_of(&e) {
                    Some(o) => Ok(vec![o]),
                    None => Err(KafkaZkError::Coordination(e)),
                },
                Err(e) => Err(e),
            }
        });
        let mut out = Vec::with_capacity(writes.len());
        let mut error = None;
        for r in join_all(chunks).await {
            match r {
                Ok(o) => out.extend(o),
                Err(e) => {
                    // Keep the most serious error: a moved controller wins.
                    let moved = matches!(e, KafkaZkError::ControllerMoved { .. });
                    if moved || error.is_none() {
                        error = Some(e);
                    }
                }
            }
        }
        match error {
            Some(e) => Err(e.into()),
            None => Ok(out),
        }
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
