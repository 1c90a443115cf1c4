//! [`ReplicaFetcher`]: one fetch session from this broker to one leader, carrying every
//! partition this broker follows from it (Kafka's `ReplicaFetcherThread`), sans-IO.
//!
//! A partition added to the fetcher first truncates by leader epoch — with an
//! OffsetForLeaderEpoch round trip (iterated, KIP-279), or, with
//! [`FetcherConfig::truncate_via_fetch`], through the diverging epoch of Fetch v12+ — and only
//! then fetches from its log end offset. Errors back the partition (or the whole link) off for
//! `replica.fetch.backoff.ms`. The driver sends the requests [`ReplicaFetcher::poll_request`]
//! yields over a [`LeaderLink`] and hands the answers back.

use std::collections::BTreeMap;

use async_trait::async_trait;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_wire::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_wire::messages::{
    FetchRequest, FetchResponse, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse,
};

use crate::epoch_cache::{EpochEndOffset, UNDEFINED_EPOCH};
use crate::isr::{BrokerId, TopicPartition};
use crate::log::LogStorage;
use crate::replica_manager::ReplicaManager;

/// Follower → leader requests, as the fetcher's driver sends them.
#[async_trait]
pub trait LeaderLink: Send {
    /// The error of a failed round trip.
    type Error: std::error::Error + Send;
    /// Sends a Fetch and waits for its answer.
    async fn fetch(&mut self, request: FetchRequest) -> Result<FetchResponse, Self::Error>;
    /// Sends an OffsetForLeaderEpoch and waits for its answer.
    async fn offset_for_leader_epoch(
        &mut self,
        request: OffsetForLeaderEpochRequest,
    ) -> Result<OffsetForLeaderEpochResponse, Self::Error>;
}

/// Settings of a fetcher (Kafka's `replica.fetch.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FetcherConfig {
    /// `replica.fetch.wait.max.ms` (500).
    pub max_wait_ms: i32,
    /// `replica.fetch.min.bytes` (1).
    pub min_bytes: i32,
    /// `replica.fetch.response.max.bytes` (10 MiB).
    pub max_bytes: i32,
    /// `replica.fetch.max.bytes` per partition (1 MiB).
    pub partition_max_bytes: i32,
    /// `replica.fetch.backoff.ms` (1000).
    pub backoff_ms: u64,
    /// Truncate through Fetch v12+ diverging epochs instead of OffsetForLeaderEpoch.
    pub truncate_via_fetch: bool,
}

impl FetcherConfig {
    /// Sets [`max_wait_ms`](Self::max_wait_ms).
    #[must_use]
    pub fn with_max_wait_ms(mut self, max_wait_ms: i32) -> Self {
        self.max_wait_ms = max_wait_ms;
        self
    }

    /// Sets [`min_bytes`](Self::min_bytes).
    #[must_use]
    pub fn with_min_bytes(mut self, min_bytes: i32) -> Self {
        self.min_bytes = min_bytes;
        self
    }

    /// Sets [`max_bytes`](Self::max_bytes).
    #[must_use]
    pub fn with_max_bytes(mut self, max_bytes: i32) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// Sets [`partition_max_bytes`](Self::partition_max_bytes).
    #[must_use]
    pub fn with_partition_max_bytes(mut self, partition_max_bytes: i32) -> Self {
        self.partition_max_bytes = partition_max_bytes;
        self
    }

    /// Sets [`backoff_ms`](Self::backoff_ms).
    #[must_use]
    pub fn with_backoff_ms(mut self, backoff_ms: u64) -> Self {
        self.backoff_ms = backoff_ms;
        self
    }

    /// Sets [`truncate_via_fetch`](Self::truncate_via_fetch).
    #[must_use]
    pub fn with_truncate_via_fetch(mut self, truncate_via_fetch: bool) -> Self {
        self.truncate_via_fetch = truncate_via_fetch;
        self
    }
}

impl Default for FetcherConfig {
    fn default() -> Self {
        FetcherConfig {
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: 10 << 20,
            partition_max_bytes: 1 << 20,
            backoff_ms: 1_000,
            truncate_via_fetch: false,
        }
    }
}

/// Where a partition is in the fetcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionFetchState {
    /// Must truncate by leader epoch before fetching.
    Truncating,
    /// Fetching from its log end offset.
    Fetching,
    /// Waiting after an error; truncates again afterwards.
    Backoff {
        /// When it may go on.
        until_ms: u64,
    },
}

/// A request for the driver to send to the leader.
#[derive(Debug, Clone, PartialEq)]
pub enum FetcherRequest {
    /// Ask where the partitions' latest epochs end.
    OffsetForLeaderEpoch(OffsetForLeaderEpochRequest),
    /// Fetch.
    Fetch(FetchRequest),
}

/// The fetch session of one follower with one leader.
#[derive(Debug)]
pub struct ReplicaFetcher {
    broker: BrokerId,
    leader: BrokerId,
    config: FetcherConfig,
    partitions: BTreeMap<TopicPartition, PartitionFetchState>,
    in_flight: bool,
    link_backoff_until_ms: u64,
}

impl ReplicaFetcher {
    /// A fetcher on broker `broker` fetching from `leader`.
    pub fn new(broker: BrokerId, leader: BrokerId, config: FetcherConfig) -> Self {
        ReplicaFetcher {
            broker,
            leader,
            config,
            partitions: BTreeMap::new(),
            in_flight: false,
            link_backoff_until_ms: 0,
        }
    }

    /// The leader this fetcher fetches from.
    pub fn leader(&self) -> BrokerId {
        self.leader
    }

    /// Adds partitions (K4.3 makeFollowers): each truncates first.
    pub fn add_partitions(&mut self, partitions: impl IntoIterator<Item = TopicPartition>) {
        let initial = if self.config.truncate_via_fetch {
            PartitionFetchState::Fetching
        } else {
            PartitionFetchState::Truncating
        };
        for tp in partitions {
            self.partitions.insert(tp, initial);
        }
    }

    /// Removes partitions (they moved to another leader, or this broker leads them).
    pub fn remove_partitions<'a>(
        &mut self,
        partitions: impl IntoIterator<Item = &'a TopicPartition>,
    ) {
        for tp in partitions {
            self.partitions.remove(tp);
        }
    }

    /// Whether no partition is left (K4.5: the fetcher can be shut down).
    pub fn is_idle(&self) -> bool {
        self.partitions.is_empty()
    }

    /// The state of `tp` in this fetcher.
    pub fn state(&self, tp: &TopicPartition) -> Option<PartitionFetchState> {
        self.partitions.get(tp).copied()
    }

    /// The link failed (or timed out): nothing is in flight; wait `backoff_ms`.
    pub fn on_link_error(&mut self, now_ms: u64) {
        self.in_flight = false;
        self.link_backoff_until_ms = now_ms + self.config.backoff_ms;
    }

    fn back_off(&mut self, tp: &TopicPartition, now_ms: u64) {
        if let Some(s) = self.partitions.get_mut(tp) {
            *s = PartitionFetchState::Backoff {
                until_ms: now_ms + self.config.backoff_ms,
            };
        }
    }

    /// The next request to send, if any: truncation first, then a fetch of every partition
    /// that is ready. One request is in flight at a time.
    #[must_use = "the request is in flight once polled: dropping it stalls the partitions"]
    pub fn poll_request<L: LogStorage>(
        &mut self,
        now_ms: u64,
        replicas: &mut ReplicaManager<L>,
    ) -> Option<FetcherRequest> {
        if self.in_flight || now_ms < self.link_backoff_until_ms {
            return None;
        }
        let resume = if self.config.truncate_via_fetch {
            PartitionFetchState::Fetching
        } else {
            PartitionFetchState::Truncating
        };
        for s in self.partitions.values_mut() {
            if matches!(s, PartitionFetchState::Backoff { until_ms } if *until_ms <= now_ms) {
                *s = resume;
            }
        }
        // Ask about every truncating partition whose leader and epoch we know.
        let mut epochs: BTreeMap<String, Vec<OffsetForLeaderPartition>> = BTreeMap::new();
        let truncating: Vec<TopicPartition> = self
            .partitions
            .iter()
            .filter(|(_, s)| **s == PartitionFetchState::Truncating)
            .map(|(tp, _)| tp.clone())
            .collect();
        for tp in truncating {
            let Some(p) = replicas
                .partition_mut(&tp)
                .filter(|p| p.leader() == Some(self.leader))
            else {
                self.back_off(&tp, now_ms);
                continue;
            };
            let latest = p.latest_epoch();
            if latest == UNDEFINED_EPOCH {
                // No epochs in the log: the only safe point is the high watermark.
                if p.truncate_to_leader_epoch(EpochEndOffset::UNDEFINED)
                    .is_ok()
                {
                    self.partitions.insert(tp, PartitionFetchState::Fetching);
                } else {
                    self.back_off(&tp, now_ms);
                }
                continue;
            }
            epochs
                .entry(tp.topic.clone())
                .or_default()
                .push(OffsetForLeaderPartition {
                    partition: tp.partition,
                    current_leader_epoch: p.leader_epoch(),
                    leader_epoch: latest,
                    ..Default::default()
                });
        }
        if !epochs.is_empty() {
            self.in_flight = true;
            return Some(FetcherRequest::OffsetForLeaderEpoch(
                OffsetForLeaderEpochRequest {
                    replica_id: self.broker,
                    topics: epochs
                        .into_iter()
                        .map(|(topic, partitions)| OffsetForLeaderTopic {
                            topic: topic.into(),
                            partitions,
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                },
            ));
        }
        let mut topics: BTreeMap<String, Vec<FetchPartition>> = BTreeMap::new();
        let fetching: Vec<TopicPartition> = self
            .partitions
            .iter()
            .filter(|(_, s)| **s == PartitionFetchState::Fetching)
            .map(|(tp, _)| tp.clone())
            .collect();
        for tp in fetching {
            let Some(p) = replicas
                .partition_mut(&tp)
                .filter(|p| p.leader() == Some(self.leader))
            else {
                self.back_off(&tp, now_ms);
                continue;
            };
            topics
                .entry(tp.topic.clone())
                .or_default()
                .push(FetchPartition {
                    partition: tp.partition,
                    current_leader_epoch: p.leader_epoch(),
                    fetch_offset: p.log_end_offset(),
                    last_fetched_epoch: if self.config.truncate_via_fetch {
                        p.latest_epoch()
                    } else {
                        UNDEFINED_EPOCH
                    },
                    log_start_offset: p.log_start_offset(),
                    partition_max_bytes: self.config.partition_max_bytes,
                    ..Default::default()
                });
        }
        if topics.is_empty() {
            return None;
        }
        self.in_flight = true;
        Some(FetcherRequest::Fetch(FetchRequest {
            replica_id: self.broker,
            max_wait_ms: self.config.max_wait_ms,
            min_bytes: self.config.min_bytes,
            max_bytes: self.config.max_bytes,
            topics: topics
                .into_iter()
                .map(|(topic, partitions)| FetchTopic {
                    topic: topic.into(),
                    partitions,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }))
    }

    /// Applies the leader's OffsetForLeaderEpoch answer: truncates each partition; those that
    /// must ask again (KIP-279) stay truncating.
    pub fn on_offset_for_leader_epoch_response<L: LogStorage>(
        &mut self,
        now_ms: u64,
        response: &OffsetForLeaderEpochResponse,
        replicas: &mut ReplicaManager<L>,
    ) {
        self.in_flight = false;
        for t in &response.topics {
            for r in &t.partitions {
                let tp = TopicPartition::new(t.topic.to_string(), r.partition);
                if self.partitions.get(&tp) != Some(&PartitionFetchState::Truncating) {
                    continue;
                }
                if r.error_code != ErrorCode::None.code() {
                    self.back_off(&tp, now_ms);
                    continue;
                }
                let answer = EpochEndOffset {
                    epoch: r.leader_epoch,
                    end_offset: r.end_offset,
                };
                match replicas
                    .partition_mut(&tp)
                    .map(|p| p.truncate_to_leader_epoch(answer))
                {
                    Some(Ok(step)) if step.complete => {
                        self.partitions.insert(tp, PartitionFetchState::Fetching);
                    }
                    Some(Ok(_)) => {}
                    _ => self.back_off(&tp, now_ms),
                }
            }
        }
    }

    /// Applies a fetch answer: appends the data and the leader's HW, truncates on a diverging
    /// epoch, backs a partition off on an error (a fenced or unknown epoch waits for the next
    /// LeaderAndIsr; an out-of-range offset truncates again).
    pub fn on_fetch_response<L: LogStorage>(
        &mut self,
        now_ms: u64,
        response: &FetchResponse,
        replicas: &mut ReplicaManager<L>,
    ) {
        self.in_flight = false;
        if response.error_code != ErrorCode::None.code() {
            self.on_link_error(now_ms);
            return;
        }
        for t in &response.responses {
            for d in &t.partitions {
                let tp = TopicPartition::new(t.topic.to_string(), d.partition_index);
                if self.partitions.get(&tp) != Some(&PartitionFetchState::Fetching) {
                    continue;
                }
                if d.error_code == ErrorCode::OffsetOutOfRange.code() {
                    // Below the leader's log start (retention ran while we were away): start
                    // again at the leader's log start, as Kafka's `handleOutOfRangeError`.
                    let reset = replicas
                        .partition_mut(&tp)
                        .map(|p| p.reset_below_leader_log_start(d.log_start_offset));
                    if let Some(Ok(true)) = reset {
                        tracing::info!(
                            topic = %tp.topic,
                            partition = tp.partition,
                            broker = self.leader,
                            log_start_offset = d.log_start_offset,
                            "behind the leader's log start; starting again there"
                        );
                        continue;
                    }
                }
                if d.error_code != ErrorCode::None.code() {
                    tracing::info!(
                        topic = %tp.topic,
                        partition = tp.partition,
                        broker = self.leader,
                        error = d.error_code,
                        "fetch error; backing off"
                    );
                    self.back_off(&tp, now_ms);
                    continue;
                }
                let Some(p) = replicas.partition_mut(&tp) else {
                    self.partitions.remove(&tp);
                    continue;
                };
                let ok = if d.diverging_epoch.epoch >= 0 && d.diverging_epoch.end_offset >= 0 {
                    p.truncate_to_leader_epoch(EpochEndOffset {
                        epoch: d.diverging_epoch.epoch,
                        end_offset: d.diverging_epoch.end_offset,
                    })
                    .is_ok()
                } else {
                    let records = d.records.clone().unwrap_or_default();
                    p.append_as_follower(records, d.high_watermark).is_ok()
                        && p.update_follower_log_start_offset(d.log_start_offset)
                            .is_ok()
                };
                if !ok {
                    self.back_off(&tp, now_ms);
                }
            }
        }
    }
}

/// A [`LeaderLink`] to a leader's [`ReplicaManager`] in the same process, for tests and
/// simulations. Fetches are answered at once (as with `max_wait_ms = 0`): a waiting fetch
/// would need the leader's clock to move, which this link does not own.
pub struct MemoryLeaderLink<L> {
    leader: std::sync::Arc<std::sync::Mutex<ReplicaManager<L>>>,
    clock: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl<L> MemoryLeaderLink<L> {
    /// A link to `leader`, reading the time from `clock` (milliseconds).
    pub fn new(
        leader: std::sync::Arc<std::sync::Mutex<ReplicaManager<L>>>,
        clock: std::sync::Arc<std::sync::atomic::AtomicU64>,
    ) -> Self {
        MemoryLeaderLink { leader, clock }
    }
}

/// Why a [`MemoryLeaderLink`] round trip failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryLinkError {
    /// The leader's lock was poisoned by a panic.
    #[error("the leader's replica manager is unavailable")]
    Poisoned,
}

#[async_trait]
impl<L: LogStorage + Send> LeaderLink for MemoryLeaderLink<L> {
    type Error = MemoryLinkError;

    async fn fetch(&mut self, mut request: FetchRequest) -> Result<FetchResponse, Self::Error> {
        request.max_wait_ms = 0;
        let now = self.clock.load(std::sync::atomic::Ordering::Relaxed);
        let mut leader = self.leader.lock().map_err(|_| MemoryLinkError::Poisoned)?;
        match leader.fetch(now, &request) {
            crate::replica_manager::FetchOutcome::Respond(r) => Ok(r),
            // max_wait_ms = 0 always answers at once.
            crate::replica_manager::FetchOutcome::Delayed { .. } => Ok(FetchResponse::default()),
        }
    }

    async fn offset_for_leader_epoch(
        &mut self,
        request: OffsetForLeaderEpochRequest,
    ) -> Result<OffsetForLeaderEpochResponse, Self::Error> {
        let leader = self.leader.lock().map_err(|_| MemoryLinkError::Poisoned)?;
        Ok(leader.offset_for_leader_epoch(&request))
    }
}

#[cfg(test)]
#[path = "replica_fetcher_tests.rs"]
mod tests;
