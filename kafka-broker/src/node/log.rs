//! [`NodeLog`]: the log a [`BrokerNode`](super::BrokerNode) keeps per partition, chosen at
//! start-up — a [`FileLog`] under the data directory (the default) or a [`MemoryLog`] — and
//! the [`LogFactory`] that opens one per partition.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use kafka_replication::epoch_cache::LeaderEpochCache;
use kafka_replication::isr::TopicPartition;
use kafka_replication::log::{
    FileLog, FileLogConfig, LogAppendInfo, LogError, LogStorage, MemoryLog, RetentionOutcome,
    RetentionPolicy,
};
use kafka_replication::replica_manager::LogFactory;

/// Where a node keeps its partitions' logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogPlacement {
    /// One [`FileLog`] per partition in `<dir>/<topic>-<partition>`, as Kafka's `log.dirs`,
    /// with Kafka's default segment size.
    Files(PathBuf),
    /// As [`Files`](Self::Files), with these log settings (`log.segment.bytes`, …).
    FilesWith(PathBuf, FileLogConfig),
    /// In memory: gone when the process ends.
    Memory,
}

/// A partition's log: on disk or in memory.
#[derive(Debug)]
pub enum NodeLog {
    /// A segmented log in a directory.
    File(FileLog),
    /// An in-memory log.
    Memory(MemoryLog),
}

/// The directory of `tp`'s log under `dir` (Kafka's `<topic>-<partition>`).
pub fn partition_dir(dir: &Path, tp: &TopicPartition) -> PathBuf {
    dir.join(format!("{}-{}", tp.topic, tp.partition))
}

impl LogPlacement {
    /// The factory the replica manager opens each partition's log with.
    pub fn factory(&self) -> LogFactory<NodeLog> {
        match self {
            LogPlacement::Files(dir) => {
                LogPlacement::FilesWith(dir.clone(), FileLogConfig::default()).factory()
            }
            LogPlacement::FilesWith(dir, config) => {
                let (dir, config) = (dir.clone(), *config);
                Box::new(move |tp| {
                    FileLog::open(partition_dir(&dir, tp), config).map(NodeLog::File)
                })
            }
            LogPlacement::Memory => Box::new(|_| Ok(NodeLog::Memory(MemoryLog::new()))),
        }
    }
}

/// Calls `$method` on whichever log `$self` holds.
macro_rules! either {
    ($self:expr, $log:ident => $call:expr) => {
        match $self {
            NodeLog::File($log) => $call,
            NodeLog::Memory($log) => $call,
        }
    };
}

impl LogStorage for NodeLog {
    fn log_start_offset(&self) -> i64 {
        either!(self, l => l.log_start_offset())
    }

    fn log_end_offset(&self) -> i64 {
        either!(self, l => l.log_end_offset())
    }

    fn append_as_leader(
        &mut self,
        records: Bytes,
        leader_epoch: i32,
    ) -> Result<LogAppendInfo, LogError> {
        either!(self, l => l.append_as_leader(records, leader_epoch))
    }

    fn append_as_follower(&mut self, records: Bytes) -> Result<LogAppendInfo, LogError> {
        either!(self, l => l.append_as_follower(records))
    }

    fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<Bytes, LogError> {
        either!(self, l => l.read(offset, max_bytes, max_offset, min_one_batch))
    }

    fn truncate_to(&mut self, offset: i64) -> Result<(), LogError> {
        either!(self, l => l.truncate_to(offset))
    }

    fn epoch_cache(&self) -> &LeaderEpochCache {
        either!(self, l => l.epoch_cache())
    }

    fn assign_epoch_start(&mut self, epoch: i32, start_offset: i64) -> Result<(), LogError> {
        either!(self, l => l.assign_epoch_start(epoch, start_offset))
    }

    fn flush(&mut self) -> Result<(), LogError> {
        either!(self, l => l.flush())
    }

    fn checkpoint_high_watermark(&mut self, high_watermark: i64) -> Result<(), LogError> {
        either!(self, l => l.checkpoint_high_watermark(high_watermark))
    }

    fn checkpointed_high_watermark(&self) -> i64 {
        either!(self, l => l.checkpointed_high_watermark())
    }

    fn apply_retention(
        &mut self,
        now_ms: i64,
        high_watermark: i64,
        policy: &RetentionPolicy,
    ) -> Result<RetentionOutcome, LogError> {
        either!(self, l => l.apply_retention(now_ms, high_watermark, policy))
    }

    fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), LogError> {
        either!(self, l => l.truncate_fully_and_start_at(offset))
    }

    fn increment_log_start_offset(&mut self, offset: i64) -> Result<bool, LogError> {
        either!(self, l => l.increment_log_start_offset(offset))
    }
}

impl LogPlacement {
    /// The data directory, when the logs are files.
    pub fn dir(&self) -> Option<&Path> {
        match self {
            LogPlacement::Files(dir) | LogPlacement::FilesWith(dir, _) => Some(dir),
            LogPlacement::Memory => None,
        }
    }
}
