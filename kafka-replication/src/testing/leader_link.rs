//! The conformance suite of [`LeaderLink`] (feature `tokio` too): a follower's link to its
//! leader must be transparent — each Fetch and OffsetForLeaderEpoch gets the leader's own
//! answer (records, high watermark, diverging epoch, error codes: K8.1, KIP-101, KIP-279,
//! KIP-320), round trips answer in order, and a link to a leader that died fails with an
//! error rather than hanging.
//!
//! The builder starts a leader broker on a [`ReplicaManager`] with in-memory logs and opens a
//! link to it; the suite makes it leader of two partitions through LeaderAndIsr, appends
//! through it and compares what the link returns with what the manager answers to the same
//! request directly. Requests are sent with `max_wait_ms` 0, so that no answer is delayed.
//!
//! ```
//! use std::sync::atomic::AtomicU64;
//! use std::sync::{Arc, Mutex};
//! use async_trait::async_trait;
//! use kafka_replication::isr::BrokerId;
//! use kafka_replication::log::MemoryLog;
//! use kafka_replication::partition::PartitionConfig;
//! use kafka_replication::replica_fetcher::MemoryLeaderLink;
//! use kafka_replication::replica_manager::ReplicaManager;
//! use kafka_replication::testing::{leader_link::{self, LeaderLinkBuilder}, BuilderError};
//!
//! type Manager = Arc<Mutex<ReplicaManager<MemoryLog>>>;
//! struct Memory;
//! #[async_trait]
//! impl LeaderLinkBuilder for Memory {
//!     type Link = MemoryLeaderLink<MemoryLog>;
//!     type Leader = Manager;
//!     async fn build(&self, leader: BrokerId, _follower: BrokerId)
//!         -> Result<(Manager, Self::Link), BuilderError> {
//!         let m = Arc::new(Mutex::new(ReplicaManager::new(
//!             leader, PartitionConfig::default(), 0, Box::new(|_| Ok(MemoryLog::new())))));
//!         let link = MemoryLeaderLink::new(m.clone(), Arc::new(AtomicU64::new(0)));
//!         Ok((m, link))
//!     }
//!     fn with_manager(&self, leader: &Manager,
//!                     f: &mut (dyn FnMut(&mut ReplicaManager<MemoryLog>, u64) + Send)) {
//!         if let Ok(mut m) = leader.lock() { f(&mut m, 0) }
//!     }
//! }
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! leader_link::test_all(&Memory).await?;
//! # Ok::<(), kafka_replication::testing::ConformanceError>(())
//! # }).unwrap();
//! ```

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_wire::messages::leader_and_isr_request::{
    LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_wire::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_wire::messages::{
    FetchRequest, FetchResponse, LeaderAndIsrRequest, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
};
use kafka_wire::records::RecordBatchBuilder;

use super::{BuilderError, Case, ConformanceError};
use crate::isr::{BrokerId, TopicPartition};
use crate::log::MemoryLog;
use crate::replica_fetcher::LeaderLink;
use crate::replica_manager::{FetchOutcome, ReplicaManager};

/// How long a case waits for a round trip to a stopped leader to fail.
const FAILURE_TIMEOUT: Duration = Duration::from_secs(30);

const LEADER: BrokerId = 1;
const FOLLOWER: BrokerId = 2;

/// What the suite needs from a [`LeaderLink`] implementation.
#[async_trait]
pub trait LeaderLinkBuilder: Sync {
    /// The link under test.
    type Link: LeaderLink;
    /// What keeps the leader running (a server, a shared manager).
    type Leader: Send + Sync;

    /// Starts broker `leader` on a new `ReplicaManager<MemoryLog>` (default partition
    /// settings, no partitions) and opens a link from broker `follower` to it. Called inside
    /// a tokio runtime.
    async fn build(
        &self,
        leader: BrokerId,
        follower: BrokerId,
    ) -> Result<(Self::Leader, Self::Link), BuilderError>;

    /// Runs `f` on the leader's replica manager with the leader's current time (ms).
    fn with_manager(
        &self,
        leader: &Self::Leader,
        f: &mut (dyn FnMut(&mut ReplicaManager<MemoryLog>, u64) + Send),
    );

    /// Stops the leader as when its process dies. `None` when the leader cannot stop (an
    /// in-process link that never fails): [`a_link_to_a_stopped_leader_fails`] then passes
    /// without checking. The default is `None`.
    async fn stop(&self, leader: Self::Leader) -> Option<Result<(), BuilderError>> {
        drop(leader);
        None
    }
}

/// Runs every case in order and stops at the first failure.
pub async fn test_all<B: LeaderLinkBuilder>(builder: &B) -> Result<(), ConformanceError> {
    offset_for_leader_epoch_is_the_leaders_answer(builder).await?;
    fetch_returns_the_leaders_batches_and_high_watermark(builder).await?;
    fetch_errors_are_the_leaders_error_codes(builder).await?;
    a_diverging_epoch_comes_back_to_the_follower(builder).await?;
    round_trips_answer_in_order(builder).await?;
    a_link_to_a_stopped_leader_fails(builder).await?;
    Ok(())
}

fn leader_and_isr(topic: &str, leader_epoch: i32) -> LeaderAndIsrRequest {
    LeaderAndIsrRequest {
        controller_id: 100,
        controller_epoch: 1,
        topic_states: vec![LeaderAndIsrTopicState {
            topic_name: topic.into(),
            partition_states: (0..2)
                .map(|partition| LeaderAndIsrPartitionState {
                    topic_name: topic.into(),
                    partition_index: partition,
                    controller_epoch: 1,
                    leader: LEADER,
                    leader_epoch,
                    isr: vec![LEADER, FOLLOWER].into(),
                    partition_epoch: leader_epoch,
                    replicas: vec![LEADER, FOLLOWER].into(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn records(c: Case, n: usize) -> Result<Bytes, ConformanceError> {
    let mut b = RecordBatchBuilder::new(0);
    for i in 0..n {
        let value = format!("record {i}");
        c.op(
            "build a batch",
            b.append(i as i64, None, Some(value.as_bytes()), &[]),
        )?;
    }
    c.op("build a batch", b.build())
}

/// A leader of `topic`-0 and -1 whose partition 0 holds batches of epoch 3 (offsets 0..5) and
/// of epoch 5 (offsets 5..9); the leader epoch is now 5.
async fn leader_with_history<B: LeaderLinkBuilder>(
    c: Case,
    builder: &B,
) -> Result<(B::Leader, B::Link), ConformanceError> {
    let (leader, link) = c.setup("build", builder.build(LEADER, FOLLOWER).await)?;
    let mut failure: Option<String> = None;
    let topic = c.0;
    let mut batches = Vec::new();
    for n in [2, 3, 4] {
        batches.push(records(c, n)?);
    }
    builder.with_manager(&leader, &mut |m, now| {
        let mut step = |what: &str, ok: bool| {
            if !ok && failure.is_none() {
                failure = Some(what.to_string());
            }
        };
        let r = m.become_leader_or_follower(now, &leader_and_isr(topic, 3), 4);
        step(
            "become leader at epoch 3",
            r.partition_errors.iter().all(|e| e.error_code == 0),
        );
        let tp = TopicPartition::new(topic, 0);
        step(
            "append at epoch 3",
            m.append_records(&tp, batches[0].clone(), 1).is_ok()
                && m.append_records(&tp, batches[1].clone(), 1).is_ok(),
        );
        let r = m.become_leader_or_follower(now, &leader_and_isr(topic, 5), 4);
        step(
            "become leader at epoch 5",
            r.partition_errors.iter().all(|e| e.error_code == 0),
        );
        step(
            "append at epoch 5",
            m.append_records(&tp, batches[2].clone(), 1).is_ok(),
        );
    });
    match failure {
        Some(what) => Err(c.fail(format!("setting up the leader: {what} failed"))),
        None => Ok((leader, link)),
    }
}

fn fetch(topic: &str, partitions: &[(i32, i64, i32, i32)]) -> FetchRequest {
    FetchRequest {
        replica_id: FOLLOWER,
        max_wait_ms: 0,
        min_bytes: 1,
        max_bytes: 1 << 20,
        topics: vec![FetchTopic {
            topic: topic.into(),
            partitions: partitions
                .iter()
                .map(
                    |&(partition, fetch_offset, current_leader_epoch, last_fetched_epoch)| {
                        FetchPartition {
                            partition,
                            fetch_offset,
                            current_leader_epoch,
                            last_fetched_epoch,
                            log_start_offset: 0,
                            partition_max_bytes: 1 << 20,
                            ..Default::default()
                        }
                    },
                )
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// What a fetch answer says per partition: (topic, partition, error, high watermark, log start
/// offset, diverging epoch and its end offset, records).
type FetchView = Vec<(String, i32, i16, i64, i64, i32, i64, Bytes)>;

fn fetch_view(r: &FetchResponse) -> FetchView {
    r.responses
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                (
                    t.topic.to_string(),
                    p.partition_index,
                    p.error_code,
                    p.high_watermark,
                    p.log_start_offset,
                    p.diverging_epoch.epoch,
                    p.diverging_epoch.end_offset,
                    p.records.clone().unwrap_or_default(),
                )
            })
        })
        .collect()
}

/// (topic, partition, error, leader epoch, end offset) per partition.
type EpochView = Vec<(String, i32, i16, i32, i64)>;

fn epoch_view(r: &OffsetForLeaderEpochResponse) -> EpochView {
    r.topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                (
                    t.topic.to_string(),
                    p.partition,
                    p.error_code,
                    p.leader_epoch,
                    p.end_offset,
                )
            })
        })
        .collect()
}

/// The manager's own answer to `request`, as a follower fetch.
fn direct_fetch<B: LeaderLinkBuilder>(
    c: Case,
    builder: &B,
    leader: &B::Leader,
    request: &FetchRequest,
) -> Result<FetchView, ConformanceError> {
    let mut out = None;
    builder.with_manager(leader, &mut |m, now| {
        out = Some(match m.fetch(now, request) {
            FetchOutcome::Respond(r) => Ok(fetch_view(&r)),
            FetchOutcome::Delayed { .. } => {
                Err(c.fail("a fetch with max_wait_ms 0 was delayed".into()))
            }
        });
    });
    out.unwrap_or_else(|| Err(c.fail("with_manager did not run".into())))
}

async fn link_fetch<B: LeaderLinkBuilder>(
    c: Case,
    link: &mut B::Link,
    request: &FetchRequest,
) -> Result<FetchView, ConformanceError> {
    let r = c.op_msg("fetch over the link", link.fetch(request.clone()).await)?;
    Ok(fetch_view(&r))
}

/// OffsetForLeaderEpoch over the link is the leader's own answer: the end offset of the
/// largest epoch at most the requested one (KIP-279), errors for a fenced or unknown
/// current epoch (KIP-320) and an unknown partition.
pub async fn offset_for_leader_epoch_is_the_leaders_answer<B: LeaderLinkBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("offset_for_leader_epoch_is_the_leaders_answer");
    let (leader, mut link) = leader_with_history(c, builder).await?;
    let part = |partition, current_leader_epoch, leader_epoch| OffsetForLeaderPartition {
        partition,
        current_leader_epoch,
        leader_epoch,
        ..Default::default()
    };
    let request = OffsetForLeaderEpochRequest {
        replica_id: FOLLOWER,
        topics: vec![OffsetForLeaderTopic {
            topic: c.0.into(),
            partitions: vec![
                part(0, 5, 3),
                part(0, 5, 4),
                part(0, 5, 5),
                part(0, 4, 3),
                part(0, 9, 3),
                part(1, 5, 5),
                part(7, 5, 5),
            ],
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut direct = None;
    builder.with_manager(&leader, &mut |m, _| {
        direct = Some(epoch_view(&m.offset_for_leader_epoch(&request)));
    });
    let direct = direct.ok_or_else(|| c.fail("with_manager did not run".into()))?;
    let got = epoch_view(&c.op_msg(
        "OffsetForLeaderEpoch over the link",
        link.offset_for_leader_epoch(request).await,
    )?);
    c.eq("answer over the link", got.clone(), direct)?;
    // The leader's answer itself, so that a link echoing anything cannot pass.
    let ok = ErrorCode::None.code();
    let want = [(ok, 3, 5), (ok, 3, 5), (ok, 5, 9)];
    for (i, w) in want.iter().enumerate() {
        let g = got.get(i).map(|(_, _, e, epoch, end)| (*e, *epoch, *end));
        c.eq(&format!("answer {i}"), g, Some(*w))?;
    }
    c.eq(
        "fenced current epoch",
        got.get(3).map(|p| p.2),
        Some(ErrorCode::FencedLeaderEpoch.code()),
    )?;
    c.eq(
        "unknown current epoch",
        got.get(4).map(|p| p.2),
        Some(ErrorCode::UnknownLeaderEpoch.code()),
    )?;
    c.eq(
        "unknown partition",
        got.get(6).map(|p| p.2),
        Some(ErrorCode::UnknownTopicOrPartition.code()),
    )
}

/// A follower fetch over the link returns the leader's batches from the fetch offset and its
/// high watermark, which moves once the follower fetched at the log end (K8.1, K8.2).
pub async fn fetch_returns_the_leaders_batches_and_high_watermark<B: LeaderLinkBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("fetch_returns_the_leaders_batches_and_high_watermark");
    let (leader, mut link) = leader_with_history(c, builder).await?;
    for offset in [0, 2, 5] {
        let request = fetch(c.0, &[(0, offset, 5, -1)]);
        let got = link_fetch::<B>(c, &mut link, &request).await?;
        let direct = direct_fetch(c, builder, &leader, &request)?;
        c.eq(&format!("fetch at {offset}"), got.clone(), direct)?;
        let bases: Vec<i64> = got
            .first()
            .map(|p| {
                kafka_wire::records::RecordBatches::new(p.7.clone())
                    .filter_map(|b| b.ok().map(|b| b.base_offset()))
                    .collect()
            })
            .unwrap_or_default();
        let want: Vec<i64> = [0, 2, 5].into_iter().filter(|b| *b >= offset).collect();
        c.eq(&format!("batches fetched at {offset}"), bases, want)?;
    }
    // The follower has everything: its next fetch at the log end moves the high watermark.
    let request = fetch(c.0, &[(0, 9, 5, 5)]);
    link_fetch::<B>(c, &mut link, &request).await?;
    let got = link_fetch::<B>(c, &mut link, &request).await?;
    c.eq(
        "high watermark after the follower caught up",
        got.first().map(|p| (p.2, p.3, p.7.len())),
        Some((ErrorCode::None.code(), 9, 0)),
    )
}

/// Fetch errors come back as the leader's error codes: a fenced or unknown leader epoch
/// (KIP-320), an offset past the log end, an unknown partition.
pub async fn fetch_errors_are_the_leaders_error_codes<B: LeaderLinkBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("fetch_errors_are_the_leaders_error_codes");
    let (leader, mut link) = leader_with_history(c, builder).await?;
    for (what, part, code) in [
        (
            "a fenced leader epoch",
            (0, 0, 4, -1),
            ErrorCode::FencedLeaderEpoch,
        ),
        (
            "an unknown leader epoch",
            (0, 0, 9, -1),
            ErrorCode::UnknownLeaderEpoch,
        ),
        (
            "an offset past the log end",
            (0, 20, 5, -1),
            ErrorCode::OffsetOutOfRange,
        ),
        (
            "an unknown partition",
            (7, 0, 5, -1),
            ErrorCode::UnknownTopicOrPartition,
        ),
    ] {
        let request = fetch(c.0, &[part]);
        let got = link_fetch::<B>(c, &mut link, &request).await?;
        let direct = direct_fetch(c, builder, &leader, &request)?;
        c.eq(what, got.clone(), direct)?;
        c.eq(what, got.first().map(|p| p.2), Some(code.code()))?;
    }
    Ok(())
}

/// A follower whose last fetched epoch the leader ended earlier gets the diverging epoch and
/// its end offset (Fetch v12, KIP-320), and no records.
pub async fn a_diverging_epoch_comes_back_to_the_follower<B: LeaderLinkBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("a_diverging_epoch_comes_back_to_the_follower");
    let (leader, mut link) = leader_with_history(c, builder).await?;
    // The follower has offsets 0..7 and believes they are all of epoch 4, which the leader
    // never had: its epoch 3 ended at 5.
    let request = fetch(c.0, &[(0, 7, 5, 4)]);
    let got = link_fetch::<B>(c, &mut link, &request).await?;
    let direct = direct_fetch(c, builder, &leader, &request)?;
    c.eq("answer over the link", got.clone(), direct)?;
    c.eq(
        "diverging epoch",
        got.first().map(|p| (p.2, p.5, p.6, p.7.len())),
        Some((ErrorCode::None.code(), 3, 5, 0)),
    )
}

/// Many round trips of both kinds, one after the other, each get their own answer.
pub async fn round_trips_answer_in_order<B: LeaderLinkBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("round_trips_answer_in_order");
    let (_leader, mut link) = leader_with_history(c, builder).await?;
    for i in 0..30i64 {
        let offset = i % 10;
        let got = link_fetch::<B>(
            c,
            &mut link,
            &fetch(c.0, &[(1, 0, 5, -1), (0, offset, 5, -1)]),
        )
        .await?;
        let parts: Vec<(i32, i16)> = got.iter().map(|p| (p.1, p.2)).collect();
        let want_code = if offset > 9 {
            ErrorCode::OffsetOutOfRange.code()
        } else {
            ErrorCode::None.code()
        };
        c.eq(
            &format!("fetch {i}"),
            parts,
            vec![(1, ErrorCode::None.code()), (0, want_code)],
        )?;
        let epoch = 3 + (i % 3) as i32;
        let request = OffsetForLeaderEpochRequest {
            replica_id: FOLLOWER,
            topics: vec![OffsetForLeaderTopic {
                topic: c.0.into(),
                partitions: vec![OffsetForLeaderPartition {
                    partition: 0,
                    current_leader_epoch: 5,
                    leader_epoch: epoch,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let got = epoch_view(&c.op_msg(
            "OffsetForLeaderEpoch over the link",
            link.offset_for_leader_epoch(request).await,
        )?);
        let want_end = if epoch == 5 { 9 } else { 5 };
        c.eq(
            &format!("OffsetForLeaderEpoch {i} for epoch {epoch}"),
            got.first().map(|p| p.4),
            Some(want_end),
        )?;
    }
    Ok(())
}

/// Once the leader died, round trips fail with an error (not a hang, not an empty answer).
/// Passes without checking when the builder's leader cannot stop.
pub async fn a_link_to_a_stopped_leader_fails<B: LeaderLinkBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("a_link_to_a_stopped_leader_fails");
    let (leader, mut link) = leader_with_history(c, builder).await?;
    link_fetch::<B>(c, &mut link, &fetch(c.0, &[(0, 0, 5, -1)])).await?;
    let Some(stopped) = builder.stop(leader).await else {
        return Ok(());
    };
    c.setup("stop the leader", stopped)?;
    match tokio::time::timeout(FAILURE_TIMEOUT, link.fetch(fetch(c.0, &[(0, 0, 5, -1)]))).await {
        Ok(Err(_)) => {}
        Ok(Ok(r)) => return Err(c.fail(format!("a fetch from a stopped leader answered {r:?}"))),
        Err(_) => {
            return Err(c.fail(format!(
                "a fetch from a stopped leader hung for {FAILURE_TIMEOUT:?}"
            )))
        }
    }
    let request = OffsetForLeaderEpochRequest {
        replica_id: FOLLOWER,
        ..Default::default()
    };
    match tokio::time::timeout(FAILURE_TIMEOUT, link.offset_for_leader_epoch(request)).await {
        Ok(Err(_)) => Ok(()),
        Ok(Ok(r)) => Err(c.fail(format!(
            "an OffsetForLeaderEpoch to a stopped leader answered {r:?}"
        ))),
        Err(_) => Err(c.fail(format!(
            "an OffsetForLeaderEpoch to a stopped leader hung for {FAILURE_TIMEOUT:?}"
        ))),
    }
}
