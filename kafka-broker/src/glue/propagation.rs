//! ISR change propagation (Kafka's `ReplicaManager.maybePropagateIsrChanges`): after a leader changes a partition's ISR in the
//! store it records the partition here; a periodic task writes all pending partitions as one
//! sequential `/isr_change_notification/isr_change_<seq>` node once the changes have settled
//! (no new change for `linger`) or when the last notification is older than `max_delay`.
//!
//! The decision ([`should_propagate`]) and the batch ([`PendingIsrChanges`]) are pure: the time
//! comes in as an argument. [`IsrChangePropagator`] is the tokio task on top.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ha_coordination::Coordination;
use kafka_controller::zk_data::{KafkaZkClient, TopicPartitionEntry};
use kafka_replication::isr::TopicPartition;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The timings of ISR change propagation (Kafka's `IsrChangeNotificationConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct IsrPropagationConfig {
    /// How often the task checks for pending changes (2.5 s).
    pub check_interval: Duration,
    /// Propagate once no new change was recorded for longer than this (5 s).
    pub linger: Duration,
    /// Propagate anyway once the last propagation is older than this (60 s).
    pub max_delay: Duration,
}

impl IsrPropagationConfig {
    /// Sets [`check_interval`](Self::check_interval).
    #[must_use]
    pub fn with_check_interval(mut self, check_interval: Duration) -> Self {
        self.check_interval = check_interval;
        self
    }

    /// Sets [`linger`](Self::linger).
    #[must_use]
    pub fn with_linger(mut self, linger: Duration) -> Self {
        self.linger = linger;
        self
    }

    /// Sets [`max_delay`](Self::max_delay).
    #[must_use]
    pub fn with_max_delay(mut self, max_delay: Duration) -> Self {
        self.max_delay = max_delay;
        self
    }
}

impl Default for IsrPropagationConfig {
    fn default() -> Self {
        IsrPropagationConfig {
            check_interval: Duration::from_millis(2_500),
            linger: Duration::from_secs(5),
            max_delay: Duration::from_secs(60),
        }
    }
}

/// Whether pending ISR changes are written now: there are some, and either the last change is
/// older than `linger` or the last propagation is older than `max_delay` (both strictly).
pub fn should_propagate(
    config: &IsrPropagationConfig,
    has_pending: bool,
    last_change: Instant,
    last_propagation: Instant,
    now: Instant,
) -> bool {
    has_pending
        && (now.saturating_duration_since(last_change) > config.linger
            || now.saturating_duration_since(last_propagation) > config.max_delay)
}

/// The partitions whose ISR changed since the last notification, with the times the
/// propagation rule needs.
#[derive(Debug, Clone)]
pub struct PendingIsrChanges {
    pending: BTreeSet<TopicPartition>,
    last_change: Instant,
    last_propagation: Instant,
}

impl PendingIsrChanges {
    /// No pending changes; `now` counts as the last propagation (as at broker start-up).
    pub fn new(now: Instant) -> Self {
        PendingIsrChanges {
            pending: BTreeSet::new(),
            last_change: now,
            last_propagation: now,
        }
    }

    /// Records that `tp`'s ISR changed at `now`.
    pub fn record(&mut self, tp: TopicPartition, now: Instant) {
        self.pending.insert(tp);
        self.last_change = now;
    }

    /// The pending partitions, sorted.
    pub fn pending(&self) -> impl Iterator<Item = &TopicPartition> {
        self.pending.iter()
    }

    /// The number of pending partitions.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// True when nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// If [`should_propagate`] at `now`, takes every pending partition as one batch and counts
    /// `now` as the last propagation. A batch whose write fails goes back with
    /// [`restore`](Self::restore).
    #[must_use = "the taken changes are no longer pending: dropping them loses the ISR change notification"]
    pub fn take_due(
        &mut self,
        config: &IsrPropagationConfig,
        now: Instant,
    ) -> Option<Vec<TopicPartition>> {
        if !should_propagate(
            config,
            !self.pending.is_empty(),
            self.last_change,
            self.last_propagation,
            now,
        ) {
            return None;
        }
        self.last_propagation = now;
        Some(std::mem::take(&mut self.pending).into_iter().collect())
    }

    /// Puts back a batch that could not be written; it goes out at a later check.
    pub fn restore(&mut self, batch: Vec<TopicPartition>) {
        self.pending.extend(batch);
    }
}

/// A shared handle on the pending ISR changes: the ISR writer records into it, the
/// propagation task drains it.
#[derive(Debug, Clone)]
pub struct IsrChangeQueue {
    inner: Arc<Mutex<PendingIsrChanges>>,
}

impl IsrChangeQueue {
    /// An empty queue whose last propagation is `now`.
    pub fn new(now: Instant) -> Self {
        IsrChangeQueue {
            inner: Arc::new(Mutex::new(PendingIsrChanges::new(now))),
        }
    }

    /// Locks the pending changes (a poisoned lock is recovered: the set stays consistent).
    pub fn lock(&self) -> MutexGuard<'_, PendingIsrChanges> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that `tp`'s ISR changed at `now`.
    pub fn record(&self, tp: TopicPartition, now: Instant) {
        self.lock().record(tp, now);
    }

    /// A snapshot of the pending partitions.
    pub fn pending(&self) -> Vec<TopicPartition> {
        self.lock().pending().cloned().collect()
    }
}

/// Writes one ISR change notification for `batch`; returns its path.
pub async fn write_notification(
    zk: &KafkaZkClient,
    batch: &[TopicPartition],
) -> Result<String, kafka_controller::zk_data::KafkaZkError> {
    let entries = batch
        .iter()
        .map(|tp| TopicPartitionEntry::new(&tp.topic, tp.partition))
        .collect();
    zk.create_isr_change_notification(entries).await
}

/// Runs one check at `now`: writes the due batch, if any, and returns the notification path.
/// On a failed write the batch is put back for the next check.
pub async fn propagate_once(
    zk: &KafkaZkClient,
    queue: &IsrChangeQueue,
    config: &IsrPropagationConfig,
    now: Instant,
) -> Option<String> {
    let batch = queue.lock().take_due(config, now)?;
    match write_notification(zk, &batch).await {
        Ok(path) => {
            tracing::debug!(partitions = batch.len(), path, "propagated ISR changes");
            Some(path)
        }
        Err(error) => {
            tracing::warn!(%error, partitions = batch.len(), "ISR change notification failed");
            queue.lock().restore(batch);
            None
        }
    }
}

/// The periodic task writing ISR change notifications; stops when dropped.
#[derive(Debug)]
pub struct IsrChangePropagator {
    task: JoinHandle<()>,
}

impl IsrChangePropagator {
    /// Spawns the task on the current tokio runtime: every `config.check_interval` it runs
    /// [`propagate_once`].
    pub fn spawn(
        coord: Arc<dyn Coordination>,
        queue: IsrChangeQueue,
        config: IsrPropagationConfig,
    ) -> Self {
        let zk = KafkaZkClient::new(coord);
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(config.check_interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                propagate_once(&zk, &queue, &config, Instant::now()).await;
            }
        });
        IsrChangePropagator { task }
    }

    /// Stops the task.
    pub fn stop(self) {
        self.task.abort();
    }
}

impl Drop for IsrChangePropagator {
    fn drop(&mut self) {
        self.task.abort();
    }
}
