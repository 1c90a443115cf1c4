//! [`KafkaZkClient`]: the reads and writes a ZooKeeper-mode Kafka broker and controller make on
//! the coordination service, over any [`Coordination`]: controller election with the epoch
//! bump in one transaction (K6.1), writes fenced by the controller epoch's znode version
//! (KAFKA-6082), broker registration with the broker epoch = czxid (KIP-380), and
//! compare-and-set of partition states.

use std::sync::Arc;

use futures::future::join_all;

use super::error::ZkDataError;
use super::paths;
use super::{decode_controller_epoch, encode_controller_epoch};
use super::{BrokerRegistration, ControllerZNode, PartitionStateZNode};
use ha_coordination::{Coordination, CoordinationError, CreateMode, Op, OpResult, ANY_VERSION};

/// Why a Kafka-level read or write failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum KafkaZkError {
    /// The coordination service refused or failed.
    #[error(transparent)]
    Coordination(#[from] CoordinationError),
    /// A znode held content that does not decode.
    #[error("{path}: {error}")]
    Data {
        /// The znode.
        path: String,
        /// What is wrong with its content.
        error: ZkDataError,
    },
    /// The fencing check failed: `/controller_epoch` is no longer at the version this
    /// controller wrote; another controller was elected. The caller must resign.
    #[error("controller moved: /controller_epoch is no longer at version {expected_version}")]
    ControllerMoved {
        /// The version this controller expected.
        expected_version: i32,
    },
    /// Another session holds `/brokers/ids/<id>`.
    #[error("broker id {id} is already registered by session {owner:#x}")]
    BrokerIdTaken {
        /// The broker id.
        id: i32,
        /// The session owning the registration.
        owner: i64,
    },
    /// `/brokers/ids/<id>` stayed held by another session for as long as the registering
    /// broker was willing to wait for that session to expire (a live broker with the same id,
    /// or a session timeout longer than the wait).
    #[error(
        "broker id {id} is still registered by session {owner:#x} after waiting {waited_ms} ms \
         for that session to end; is another broker running with this id?"
    )]
    BrokerIdStillTaken {
        /// The broker id.
        id: i32,
        /// The session owning the registration.
        owner: i64,
        /// How long the registration waited.
        waited_ms: u64,
    },
}

fn data_err(path: &str) -> impl FnOnce(ZkDataError) -> KafkaZkError + '_ {
    move |error| KafkaZkError::Data {
        path: path.to_string(),
        error,
    }
}

/// The controller epoch and the znode version of `/controller_epoch` that fences every write
/// of the controller of that epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControllerEpoch {
    /// The controller epoch.
    pub epoch: i32,
    /// The znode version of `/controller_epoch` (Kafka's `epochZkVersion`).
    pub zk_version: i32,
}

/// The outcome of a controller election attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Campaign {
    /// This broker is the controller of this epoch.
    Elected(ControllerEpoch),
    /// Another broker is controller (or, if `None`, the race is still settling; watch
    /// `/controller` and try again when it is deleted).
    Lost {
        /// The current controller, if one is registered.
        controller: Option<i32>,
    },
}

/// Most encoded bytes of one batch of [`KafkaZkClient::fenced_writes`] (request or response,
/// whichever is larger): half of ZooKeeper's default `jute.maxbuffer` (1 MiB, which bounds
/// every request and response packet), so a batch never comes near it.
pub const FENCED_BATCH_BYTES: usize = 512 * 1024;

/// Most ops of one batch of [`KafkaZkClient::fenced_writes`] (partition states are ~100-300
/// bytes, so the byte bound usually comes first only for long topic names or large ISRs).
pub const FENCED_BATCH_OPS: usize = 2000;

/// Fenced transactions tried for one batch of [`KafkaZkClient::fenced_writes`], each without
/// the op that failed the one before, before its remaining ops go one by one.
pub const FENCED_BATCH_ATTEMPTS: usize = 3;

/// True for an error that an op of a `multi` meets on its own, whatever the other ops
/// (a version, existence or argument failure), as opposed to a failure of the request or the
/// session, after which the outcome is unknown.
pub fn is_op_outcome(e: &CoordinationError) -> bool {
    matches!(
        e,
        CoordinationError::NoNode { .. }
            | CoordinationError::NodeExists { .. }
            | CoordinationError::BadVersion { .. }
            | CoordinationError::NotEmpty { .. }
            | CoordinationError::NoChildrenForEphemerals { .. }
            | CoordinationError::BadPath { .. }
            | CoordinationError::BadArguments(_)
    )
}

/// Bytes of a jute string or buffer: length prefix and content.
fn jute_len(bytes: usize) -> usize {
    4 + bytes
}

/// ZooKeeper's encoded size of `op` inside a `multi` request (multi header, then the op's
/// record) or of its result in the response (header, then a stat, a path or nothing),
/// whichever is larger. The ACL of a create is `world:anyone`.
pub fn op_encoded_len(op: &Op) -> usize {
    // MultiHeader: type, done, err.
    const HEADER: usize = 4 + 1 + 4;
    // Stat: czxid, mzxid, ctime, mtime, version, cversion, aversion, ephemeralOwner,
    // dataLength, numChildren, pzxid.
    const STAT: usize = 8 * 4 + 4 * 3 + 8 + 4 * 2 + 8;
    // One ACL: perms, scheme "world", id "anyone"; vector length first.
    const ACLS: usize = 4 + 4 + (4 + 5) + (4 + 6);
    let path = jute_len(op.path().len());
    let (request, response) = match op {
        Op::Check { .. } | Op::Delete { .. } => (path + 4, 0),
        Op::Create { data, .. } => (path + jute_len(data.len()) + ACLS + 4, path + 10),
        Op::SetData { data, .. } => (path + jute_len(data.len()) + 4, STAT),
    };
    HEADER + request.max(response)
}

/// Consecutive ranges of `ops` within [`FENCED_BATCH_OPS`] and [`FENCED_BATCH_BYTES`]
/// (the fencing check counted), none empty; an op larger than the byte bound goes alone.
fn batch_ranges(ops: &[Op]) -> Vec<std::ops::Range<usize>> {
    // Request header, multi's end marker and the fencing check.
    let fixed = 4 + 4 + 4 + (4 + 1 + 4) + (4 + 1 + 4) + jute_len(paths::CONTROLLER_EPOCH.len()) + 4;
    let mut ranges = Vec::new();
    let mut start = 0;
    let mut bytes = fixed;
    for (i, op) in ops.iter().enumerate() {
        let len = op_encoded_len(op);
        if i > start && (i - start >= FENCED_BATCH_OPS || bytes + len > FENCED_BATCH_BYTES) {
            ranges.push(start..i);
            start = i;
            bytes = fixed;
        }
        bytes += len;
    }
    if start < ops.len() {
        ranges.push(start..ops.len());
    }
    ranges
}

/// Keeps the most serious of two errors of one call: a moved controller wins.
fn keep_worst(kept: &mut Option<KafkaZkError>, e: KafkaZkError) {
    let moved = matches!(e, KafkaZkError::ControllerMoved { .. });
    if moved || kept.is_none() {
        *kept = Some(e);
    }
}

/// Kafka's znode reads and writes over a [`Coordination`] client.
#[derive(Clone)]
pub struct KafkaZkClient {
    coord: Arc<dyn Coordination>,
}

impl std::fmt::Debug for KafkaZkClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaZkClient")
            .field("session_id", &self.coord.session_id())
            .finish()
    }
}

impl KafkaZkClient {
    /// Wraps a coordination client.
    pub fn new(coord: Arc<dyn Coordination>) -> KafkaZkClient {
        KafkaZkClient { coord }
    }

    /// The underlying coordination client.
    pub fn coordination(&self) -> &Arc<dyn Coordination> {
        &self.coord
    }

    /// Creates Kafka's persistent top-level paths that are missing (what a broker does at
    /// start-up).
    pub async fn create_persistent_paths(&self) -> Result<(), KafkaZkError> {
        for path in paths::PERSISTENT_PATHS {
            match self.coord.create(path, b"", CreateMode::Persistent).await {
                Ok(_) => {}
                Err(e) if e.is_node_exists() => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Kafka's `KafkaZkClient.createOrGetClusterId`: the cluster id in `/cluster/id`, which is
    /// created with `proposed` (in Kafka's `{"version":"1","id":…}` form, `/cluster` made
    /// first if missing) when absent; a creation lost to another broker reads the winner's.
    pub async fn get_or_create_cluster_id(&self, proposed: &str) -> Result<String, KafkaZkError> {
        let read = |data: Vec<u8>| {
            super::ClusterId::from_json(&data)
                .map(|c| c.id)
                .map_err(data_err(paths::CLUSTER_ID))
        };
        match self.coord.get_data(paths::CLUSTER_ID, false).await {
            Ok((data, _)) => return read(data),
            Err(e) if e.is_no_node() => {}
            Err(e) => return Err(e.into()),
        }
        match self
            .coord
            .create(paths::CLUSTER, b"", CreateMode::Persistent)
            .await
        {
            Ok(_) => {}
            Err(e) if e.is_node_exists() => {}
            Err(e) => return Err(e.into()),
        }
        let data = super::ClusterId::new(proposed)
            .to_json()
            .map_err(data_err(paths::CLUSTER_ID))?;
        match self
            .coord
            .create(paths::CLUSTER_ID, &data, CreateMode::Persistent)
            .await
        {
            Ok(_) => Ok(proposed.to_owned()),
            Err(e) if e.is_node_exists() => {
                read(self.coord.get_data(paths::CLUSTER_ID, false).await?.0)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The controller epoch and its znode version, if `/controller_epoch` exists.
    pub async fn controller_epoch(&self) -> Result<Option<ControllerEpoch>, KafkaZkError> {
        match self.coord.get_data(paths::CONTROLLER_EPOCH, false).await {
            Ok((data, stat)) => Ok(Some(ControllerEpoch {
                epoch: decode_controller_epoch(&data).map_err(data_err(paths::CONTROLLER_EPOCH))?,
                zk_version: stat.version,
            })),
            Err(e) if e.is_no_node() => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The current controller's record and the session owning it, if `/controller` exists;
    /// with `watch`, watches `/controller` (creation, change or deletion).
    pub async fn controller(
        &self,
        watch: bool,
    ) -> Result<Option<(ControllerZNode, i64)>, KafkaZkError> {
        if watch {
            // An exists watch also fires on creation, which a data watch would miss.
            if self.coord.exists(paths::CONTROLLER, true).await?.is_none() {
                return Ok(None);
            }
        }
        match self.coord.get_data(paths::CONTROLLER, false).await {
            Ok((data, stat)) => Ok(Some((
                ControllerZNode::from_json(&data).map_err(data_err(paths::CONTROLLER))?,
                stat.ephemeral_owner,
            ))),
            Err(e) if e.is_no_node() => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// K6.1: campaigns for controller. Reads (creating it with `0` when absent)
    /// `/controller_epoch`, then in one transaction creates the ephemeral `/controller` for
    /// `broker_id` and sets `/controller_epoch` to epoch + 1 expecting the version just read.
    /// On a lost race (`NodeExists` / `BadVersion`) re-reads both: a write of ours that did
    /// apply (e.g. retried after a connection loss) still counts as elected.
    pub async fn campaign(
        &self,
        broker_id: i32,
        timestamp_ms: i64,
    ) -> Result<Campaign, KafkaZkError> {
        if let Some((current, _)) = self.controller(false).await? {
            return Ok(Campaign::Lost {
                controller: Some(current.brokerid),
            });
        }
        let current = match self.controller_epoch().await? {
            Some(e) => e,
            None => {
                match self
                    .coord
                    .create(
                        paths::CONTROLLER_EPOCH,
                        &encode_controller_epoch(0),
                        CreateMode::Persistent,
                    )
                    .await
                {
                    Ok(_) => {}
                    Err(e) if e.is_node_exists() => {}
                    Err(e) => return Err(e.into()),
                }
                self.controller_epoch()
                    .await?
                    .ok_or(CoordinationError::NoNode {
                        path: paths::CONTROLLER_EPOCH.to_string(),
                    })?
            }
        };
        let new_epoch = current.epoch.saturating_add(1);
        let record = ControllerZNode::new(broker_id, timestamp_ms)
            .to_json()
            .map_err(data_err(paths::CONTROLLER))?;
        let attempt = self
            .coord
            .multi(vec![
                Op::create(paths::CONTROLLER, record, CreateMode::Ephemeral),
                Op::set_data(
                    paths::CONTROLLER_EPOCH,
                    encode_controller_epoch(new_epoch),
                    current.zk_version,
                ),
            ])
            .await;
        match attempt {
            Ok(results) => {
                let zk_version = match results.get(1) {
                    Some(OpResult::SetData { stat }) => stat.version,
                    _ => current.zk_version.saturating_add(1),
                };
                let won = ControllerEpoch {
                    epoch: new_epoch,
                    zk_version,
                };
                tracing::info!(
                    broker = broker_id,
                    controller_epoch = new_epoch,
                    "elected controller"
                );
                Ok(Campaign::Elected(won))
            }
            Err(e) if e.is_node_exists() || e.is_bad_version() => {
                let holder = self.controller(false).await?;
                let epoch = self.controller_epoch().await?;
                match (holder, epoch) {
                    (Some((c, owner)), Some(epoch))
                        if c.brokerid == broker_id
                            && owner == self.coord.session_id()
                            && epoch.epoch == new_epoch =>
                    {
                        Ok(Campaign::Elected(epoch))
                    }
                    (holder, _) => Ok(Campaign::Lost {
                        controller: holder.map(|(c, _)| c.brokerid),
                    }),
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    /// KAFKA-6082, as Kafka's `KafkaZkClient` does: applies `ops` only if `/controller_epoch` is still at
    /// `epoch.zk_version`, as one transaction. Results are those of `ops` (the check's is
    /// dropped); a failing op of `ops` is reported with its index in `ops`. A failed check is
    /// [`KafkaZkError::ControllerMoved`]: nothing was written and the controller must resign.
    pub async fn fenced_multi(
        &self,
        epoch: ControllerEpoch,
        ops: Vec<Op>,
    ) -> Result<Vec<OpResult>, KafkaZkError> {
        let mut all = Vec::with_capacity(ops.len() + 1);
        all.push(Op::check(paths::CONTROLLER_EPOCH, epoch.zk_version));
        all.extend(ops);
        match self.coord.multi(all).await {
            Ok(mut results) => {
                if !results.is_empty() {
                    results.remove(0);
                }
                Ok(results)
            }
            Err(CoordinationError::MultiOpFailed { index: 0, error })
                if matches!(
                    *error,
                    CoordinationError::BadVersion { .. } | CoordinationError::NoNode { .. }
                ) =>
            {
                tracing::warn!(
                    controller_epoch = epoch.epoch,
                    "controller write fenced: controller moved"
                );
                Err(KafkaZkError::ControllerMoved {
                    expected_version: epoch.zk_version,
                })
            }
            Err(CoordinationError::MultiOpFailed { index, error }) if index > 0 => {
                Err(CoordinationError::MultiOpFailed {
                    index: index - 1,
                    error,
                }
                .into())
            }
            // The check failed otherwise: not the failure of any op of `ops`.
            Err(CoordinationError::MultiOpFailed { error, .. }) => Err((*error).into()),
            Err(e) => Err(e.into()),
        }
    }

    /// Many independent writes, each with the outcome it would have had as its own fenced
    /// transaction ([`fenced_multi`](Self::fenced_multi) of one op), in far fewer requests:
    /// the ops go in consecutive batches of at most [`FENCED_BATCH_OPS`] ops and
    /// [`FENCED_BATCH_BYTES`] encoded bytes, each one fenced `multi` (one `/controller_epoch`
    /// check, then the ops: one request, one ZooKeeper transaction), every batch in flight at
    /// once.
    ///
    /// A `multi` is atomic: one op failing on its own (`BadVersion`, `NoNode`, `NodeExists`,
    /// ... — see [`is_op_outcome`]) fails the whole batch and applies nothing. That op's
    /// outcome is then that error (the same a lone write would have met at that point of the
    /// server's order) and the batch is sent again without it; after
    /// [`FENCED_BATCH_ATTEMPTS`] failed attempts the rest go as one fenced transaction each.
    /// So each op is applied, or fails with its own error, exactly as it would alone.
    ///
    /// Returns one result per op, in order. A failed fence is [`KafkaZkError::ControllerMoved`]
    /// for the whole call (never a per-op result), and wins over other errors; any other
    /// failure of a request (connection loss, session expiry) is an error for the whole call:
    /// the outcome of some writes is then unknown.
    pub async fn fenced_writes(
        &self,
        epoch: ControllerEpoch,
        ops: Vec<Op>,
    ) -> Result<Vec<Result<OpResult, CoordinationError>>, KafkaZkError> {
        let batches = batch_ranges(&ops);
        let ops = &ops;
        let attempts = join_all(
            batches
                .into_iter()
                .map(|range| self.fenced_batch(epoch, &ops[range])),
        )
        .await;
        let mut out = Vec::with_capacity(ops.len());
        let mut error: Option<KafkaZkError> = None;
        for attempt in attempts {
            match attempt {
                Ok(results) => out.extend(results),
                Err(e) => keep_worst(&mut error, e),
            }
        }
        match error {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// One batch of [`fenced_writes`](Self::fenced_writes).
    async fn fenced_batch(
        &self,
        epoch: ControllerEpoch,
        ops: &[Op],
    ) -> Result<Vec<Result<OpResult, CoordinationError>>, KafkaZkError> {
        let mut results: Vec<Option<Result<OpResult, CoordinationError>>> = vec![None; ops.len()];
        // Indices into `ops` of the ops still to send, in order.
        let mut pending: Vec<usize> = (0..ops.len()).collect();
        let mut attempts = 0;
        while !pending.is_empty() && attempts < FENCED_BATCH_ATTEMPTS {
            attempts += 1;
            let batch: Vec<Op> = pending
                .iter()
                .filter_map(|&i| ops.get(i).cloned())
                .collect();
            match self.fenced_multi(epoch, batch).await {
                Ok(applied) if applied.len() == pending.len() => {
                    for (i, r) in pending.drain(..).zip(applied) {
                        if let Some(slot) = results.get_mut(i) {
                            *slot = Some(Ok(r));
                        }
                    }
                }
                Ok(applied) => {
                    return Err(CoordinationError::Backend(format!(
                        "multi returned {} results for {} ops",
                        applied.len(),
                        pending.len()
                    ))
                    .into())
                }
                Err(KafkaZkError::Coordination(CoordinationError::MultiOpFailed {
                    index,
                    error,
                })) if index < pending.len() && is_op_outcome(&error) => {
                    let i = pending.remove(index);
                    tracing::debug!(
                        controller_epoch = epoch.epoch,
                        error = %error,
                        remaining = pending.len(),
                        "a write of a batched transaction failed on its own; the others go again"
                    );
                    if let Some(slot) = results.get_mut(i) {
                        *slot = Some(Err(*error));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        if !pending.is_empty() {
            // Repeated failures: one fenced transaction per op, all in flight at once.
            let singles = join_all(pending.iter().map(|&i| async move {
                let op = ops.get(i).cloned().ok_or_else(|| {
                    KafkaZkError::from(CoordinationError::Backend("op index".into()))
                })?;
                match self.fenced_multi(epoch, vec![op]).await {
                    Ok(mut applied) if applied.len() == 1 => Ok(Ok(applied.remove(0))),
                    Ok(applied) => Err(CoordinationError::Backend(format!(
                        "multi returned {} results for 1 op",
                        applied.len()
                    ))
                    .into()),
                    Err(KafkaZkError::Coordination(CoordinationError::MultiOpFailed {
                        index: 0,
                        error,
                    })) if is_op_outcome(&error) => Ok(Err(*error)),
                    Err(e) => Err(e),
                }
            }))
            .await;
            let mut error: Option<KafkaZkError> = None;
            for (&i, single) in pending.iter().zip(singles) {
                match single {
                    Ok(r) => {
                        if let Some(slot) = results.get_mut(i) {
                            *slot = Some(r);
                        }
                    }
                    Err(e) => keep_worst(&mut error, e),
                }
            }
            if let Some(e) = error {
                return Err(e);
            }
        }
        Ok(results
            .into_iter()
            .map(|r| r.unwrap_or(Err(CoordinationError::ConnectionLoss)))
            .collect())
    }

    /// Resigns: deletes `/controller`, fenced by `epoch` (a stale controller cannot delete its
    /// successor's registration).
    pub async fn resign(&self, epoch: ControllerEpoch) -> Result<(), KafkaZkError> {
        match self
            .fenced_multi(epoch, vec![Op::delete(paths::CONTROLLER, ANY_VERSION)])
            .await
        {
            Ok(_) => Ok(()),
            Err(KafkaZkError::Coordination(e)) if e.is_no_node() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// KIP-380: registers this broker with the ephemeral `/brokers/ids/<id>` and returns its
    /// broker epoch, the znode's czxid. A registration already held by this same session
    /// (a retried create) is returned as is; one held by another session is
    /// [`KafkaZkError::BrokerIdTaken`]. A registration that vanishes between the failed create
    /// and the read of its owner (the older session expired just then) is created again, as
    /// Kafka's `CheckedEphemeral` does.
    pub async fn register_broker(
        &self,
        id: i32,
        registration: &BrokerRegistration,
    ) -> Result<i64, KafkaZkError> {
        let path = paths::broker(id);
        let data = registration.to_json().map_err(data_err(&path))?;
        loop {
            match self.coord.create(&path, &data, CreateMode::Ephemeral).await {
                Ok((_, stat)) if stat.czxid > 0 => {
                    tracing::info!(broker = id, broker_epoch = stat.czxid, "registered broker");
                    return Ok(stat.czxid);
                }
                Ok(_) => return Ok(self.coord.get_data(&path, false).await?.1.czxid),
                Err(e) if e.is_node_exists() => match self.coord.get_data(&path, false).await {
                    Ok((_, stat)) if stat.ephemeral_owner == self.coord.session_id() => {
                        return Ok(stat.czxid)
                    }
                    Ok((_, stat)) => {
                        return Err(KafkaZkError::BrokerIdTaken {
                            id,
                            owner: stat.ephemeral_owner,
                        })
                    }
                    Err(e) if e.is_no_node() => {
                        tracing::info!(
                            broker = id,
                            "the registration held by another session vanished; creating it again"
                        );
                    }
                    Err(e) => return Err(e.into()),
                },
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The registration and broker epoch (czxid) of broker `id`, if registered.
    pub async fn broker(&self, id: i32) -> Result<Option<(BrokerRegistration, i64)>, KafkaZkError> {
        self.broker_watched(id, false).await
    }

    /// [`broker`](Self::broker); with `watch`, also watches the registration's data (Kafka's
    /// `BrokerModificationsHandler`: a broker rewriting its endpoints or features).
    pub async fn broker_watched(
        &self,
        id: i32,
        watch: bool,
    ) -> Result<Option<(BrokerRegistration, i64)>, KafkaZkError> {
        let path = paths::broker(id);
        match self.coord.get_data(&path, watch).await {
            Ok((data, stat)) => Ok(Some((
                BrokerRegistration::from_json(&data).map_err(data_err(&path))?,
                stat.czxid,
            ))),
            Err(e) if e.is_no_node() => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The ids of the registered brokers, ascending (children of `/brokers/ids` that are not
    /// integers are skipped); with `watch`, watches the set.
    pub async fn live_broker_ids(&self, watch: bool) -> Result<Vec<i32>, KafkaZkError> {
        let mut ids: Vec<i32> = self
            .coord
            .children(paths::BROKER_IDS, watch)
            .await?
            .iter()
            .filter_map(|c| paths::parse_broker_id(c))
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }

    /// Reads the states of `partitions` in bulk (ZooKeeper's multi-read, all batches in
    /// flight at once): per partition, the state and its znode version (the partition epoch),
    /// `None` if absent.
    pub async fn partition_states(
        &self,
        partitions: &[(String, i32)],
    ) -> Vec<Result<Option<(PartitionStateZNode, i32)>, KafkaZkError>> {
        let paths: Vec<String> = partitions
            .iter()
            .map(|(topic, partition)| paths::partition_state(topic, *partition))
            .collect();
        self.partition_states_at(&paths).await
    }

    /// [`partition_states`](Self::partition_states) for state znode paths built by the caller
    /// ([`paths::partition_state`]).
    pub async fn partition_states_at(
        &self,
        state_paths: &[String],
    ) -> Vec<Result<Option<(PartitionStateZNode, i32)>, KafkaZkError>> {
        let reads = self.coord.get_data_many(state_paths).await;
        state_paths
            .iter()
            .zip(reads)
            .map(|(path, read)| match read {
                Ok((data, stat)) => Ok(Some((
                    PartitionStateZNode::from_json(&data).map_err(data_err(path))?,
                    stat.version,
                ))),
                Err(e) if e.is_no_node() => Ok(None),
                Err(e) => Err(e.into()),
            })
            .collect()
    }

    /// K1.3, Kafka's `KafkaZkClient.updateLeaderAndIsr`: writes a partition state with compare-and-set on its znode
    /// version, fenced by the controller epoch; returns the new version (partition epoch).
    /// `BadVersion` (a leader changed the ISR meanwhile) comes back as
    /// `Coordination(MultiOpFailed { index: 0, BadVersion })`: re-read and retry.
    pub async fn set_partition_state(
        &self,
        epoch: ControllerEpoch,
        topic: &str,
        partition: i32,
        state: &PartitionStateZNode,
        expected_version: i32,
    ) -> Result<i32, KafkaZkError> {
        let path = paths::partition_state(topic, partition);
        let data = state.to_json().map_err(data_err(&path))?;
        let results = self
            .fenced_multi(epoch, vec![Op::set_data(&path, data, expected_version)])
            .await?;
        match results.first() {
            Some(OpResult::SetData { stat }) => Ok(stat.version),
            _ => Err(CoordinationError::Backend("unexpected set_data result".into()).into()),
        }
    }
}
