//! The leader-epoch cache (KIP-101): for every leader epoch that wrote to a log, the offset of
//! its first record. It answers OffsetForLeaderEpoch (the end offset of an epoch, KIP-279) and
//! drives follower truncation.
//!
//! Semantics follow Kafka 2.8's `LeaderEpochFileCache`: epochs and start offsets are both
//! monotonic; assigning an entry that breaks monotonicity first removes the conflicting entries
//! from the end; a new leader assigns `(new epoch, its log end offset)` on election
//! (KAFKA-7415). Persistence is the caller's business ([`LeaderEpochCache::entries`] /
//! [`LeaderEpochCache::from_entries`]).

/// The epoch of "no epoch known" (Kafka's `UNDEFINED_EPOCH`).
pub const UNDEFINED_EPOCH: i32 = -1;
/// The end offset of "no epoch known" (Kafka's `UNDEFINED_EPOCH_OFFSET`).
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

/// One cache entry: `epoch` began writing at `start_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EpochEntry {
    /// The leader epoch.
    pub epoch: i32,
    /// Offset of the first record written in that epoch.
    pub start_offset: i64,
}

/// An answer to "where does epoch E end?": the largest known epoch ≤ E and its end offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEndOffset {
    /// The largest epoch ≤ the requested one ([`UNDEFINED_EPOCH`] if none).
    pub epoch: i32,
    /// The start offset of the next larger epoch, or the log end offset for the latest epoch
    /// ([`UNDEFINED_EPOCH_OFFSET`] if unknown).
    pub end_offset: i64,
}

impl EpochEndOffset {
    /// The "unknown" answer.
    pub const UNDEFINED: EpochEndOffset = EpochEndOffset {
        epoch: UNDEFINED_EPOCH,
        end_offset: UNDEFINED_EPOCH_OFFSET,
    };

    /// Whether this is the "unknown" answer.
    pub fn is_undefined(&self) -> bool {
        self.epoch == UNDEFINED_EPOCH || self.end_offset == UNDEFINED_EPOCH_OFFSET
    }
}

/// Errors of the cache.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum EpochCacheError {
    /// A negative epoch or start offset.
    #[error("invalid leader epoch entry: epoch {epoch}, start offset {start_offset}")]
    InvalidEntry {
        /// The epoch given.
        epoch: i32,
        /// The start offset given.
        start_offset: i64,
    },
}

/// The leader-epoch cache of one log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderEpochCache {
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// A cache rebuilt from persisted entries, applying the same rules as
    /// [`LeaderEpochCache::assign`] to each in order (so a damaged file cannot yield a
    /// non-monotonic cache).
    pub fn from_entries(
        entries: impl IntoIterator<Item = EpochEntry>,
    ) -> Result<Self, EpochCacheError> {
        let mut cache = Self::new();
        for e in entries {
            cache.assign(e.epoch, e.start_offset)?;
        }
        Ok(cache)
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    /// Whether no epoch is known.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The latest entry.
    pub fn latest_entry(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// The latest epoch.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.epoch)
    }

    /// The earliest entry.
    pub fn earliest_entry(&self) -> Option<EpochEntry> {
        self.entries.first().copied()
    }

    /// Start offset of exactly `epoch`, if it is known.
    pub fn start_offset_of(&self, epoch: i32) -> Option<i64> {
        self.entries
            .binary_search_by_key(&epoch, |e| e.epoch)
            .ok()
            .map(|i| self.entries[i].start_offset)
    }

    /// The epoch that wrote `offset` (the latest entry starting at or before it).
    pub fn epoch_for_offset(&self, offset: i64) -> Option<i32> {
        let i = self.entries.partition_point(|e| e.start_offset <= offset);
        i.checked_sub(1).map(|i| self.entries[i].epoch)
    }

    /// Records that `epoch` starts at `start_offset`. Returns whether the cache changed (so
    /// the caller persists it). Entries with an epoch ≥ `epoch` or a start offset ≥
    /// `start_offset` are removed first, keeping both columns monotonic.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> Result<bool, EpochCacheError> {
        if epoch < 0 || start_offset < 0 {
            return Err(EpochCacheError::InvalidEntry {
                epoch,
                start_offset,
            });
        }
        if let Some(last) = self.entries.last() {
            if last.epoch == epoch && last.start_offset <= start_offset {
                return Ok(false);
            }
        }
        let mut removed = Vec::new();
        while let Some(last) = self.entries.last() {
            if last.epoch >= epoch || last.start_offset >= start_offset {
                removed.extend(self.entries.pop());
            } else {
                break;
            }
        }
        if removed.len() > 1
            || removed
                .first()
                .is_some_and(|r| r.start_offset != start_offset)
        {
            tracing::warn!(
                leader_epoch = epoch,
                start_offset,
                ?removed,
                "new leader epoch entry truncated conflicting entries"
            );
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        Ok(true)
    }

    /// KIP-279: the largest epoch ≤ `requested` and its end offset — the start offset of the
    /// next larger epoch, or `log_end_offset` when `requested` is the latest epoch.
    ///
    /// A requested epoch below every known epoch answers `(requested, first start offset)`;
    /// an unknown epoch above the latest one, or an empty cache, answers
    /// [`EpochEndOffset::UNDEFINED`].
    pub fn end_offset_for(&self, requested: i32, log_end_offset: i64) -> EpochEndOffset {
        if requested == UNDEFINED_EPOCH {
            return EpochEndOffset::UNDEFINED;
        }
        let Some(latest) = self.latest_epoch() else {
            return EpochEndOffset::UNDEFINED;
        };
        if latest == requested {
            return EpochEndOffset {
                epoch: requested,
                end_offset: log_end_offset,
            };
        }
        // First entry with epoch > requested.
        let higher = self.entries.partition_point(|e| e.epoch <= requested);
        let Some(next) = self.entries.get(higher) else {
            return EpochEndOffset::UNDEFINED;
        };
        match higher.checked_sub(1).and_then(|i| self.entries.get(i)) {
            Some(floor) => EpochEndOffset {
                epoch: floor.epoch,
                end_offset: next.start_offset,
            },
            None => EpochEndOffset {
                epoch: requested,
                end_offset: next.start_offset,
            },
        }
    }

    /// Removes every entry starting at or after `end_offset` (the log was truncated to it).
    /// Returns whether the cache changed.
    pub fn truncate_from_end(&mut self, end_offset: i64) -> bool {
        if end_offset < 0 {
            return false;
        }
        let keep = self
            .entries
            .partition_point(|e| e.start_offset < end_offset);
        let changed = keep < self.entries.len();
        self.entries.truncate(keep);
        changed
    }

    /// Removes entries wholly before `start_offset` (the log start moved up to it); the
    /// latest entry starting at or before it is kept, rewritten to start at `start_offset`.
    /// Returns whether the cache changed.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> bool {
        let removed = self
            .entries
            .partition_point(|e| e.start_offset <= start_offset);
        if removed == 0 {
            return false;
        }
        let epoch = self.entries[removed - 1].epoch;
        self.entries.drain(..removed);
        self.entries.insert(
            0,
            EpochEntry {
                epoch,
                start_offset,
            },
        );
        true
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, i64)]) -> LeaderEpochCache {
        let mut c = LeaderEpochCache::new();
        for &(e, o) in entries {
            assert_eq!(c.assign(e, o), Ok(true));
        }
        c
    }

    #[test]
    fn kip_101_assign_keeps_epochs_and_offsets_monotonic() {
        let mut c = cache(&[(0, 0), (1, 5), (2, 10)]);
        // Same epoch, later offset: nothing to do.
        assert_eq!(c.assign(2, 12), Ok(false));
        // A smaller epoch at a later offset wipes the conflicting tail.
        assert_eq!(c.assign(1, 11), Ok(true));
        assert_eq!(
            c.entries(),
            &[
                EpochEntry {
                    epoch: 0,
                    start_offset: 0
                },
                EpochEntry {
                    epoch: 1,
                    start_offset: 11
                }
            ]
        );
        assert!(c.assign(-1, 3).is_err());
        assert!(c.assign(3, -3).is_err());
    }

    #[test]
    fn kip_279_end_offset_is_for_the_largest_epoch_not_above_the_request() {
        let c = cache(&[(1, 0), (3, 10), (6, 20)]);
        let leo = 25;
        assert_eq!(
            c.end_offset_for(6, leo),
            EpochEndOffset {
                epoch: 6,
                end_offset: 25
            }
        );
        assert_eq!(
            c.end_offset_for(3, leo),
            EpochEndOffset {
                epoch: 3,
                end_offset: 20
            }
        );
        // Epochs 4 and 5 never wrote here: the answer is epoch 3, ending where 6 starts.
        assert_eq!(
            c.end_offset_for(5, leo),
            EpochEndOffset {
                epoch: 3,
                end_offset: 20
            }
        );
        assert_eq!(
            c.end_offset_for(2, leo),
            EpochEndOffset {
                epoch: 1,
                end_offset: 10
            }
        );
        assert_eq!(
            c.end_offset_for(0, leo),
            EpochEndOffset {
                epoch: 0,
                end_offset: 0
            }
        );
        assert_eq!(c.end_offset_for(7, leo), EpochEndOffset::UNDEFINED);
        assert_eq!(
            c.end_offset_for(UNDEFINED_EPOCH, leo),
            EpochEndOffset::UNDEFINED
        );
        assert_eq!(
            LeaderEpochCache::new().end_offset_for(1, 0),
            EpochEndOffset::UNDEFINED
        );
    }

    #[test]
    fn kafka_7415_new_leader_assigns_its_epoch_at_its_log_end() {
        // A leader elected at epoch 4 with LEO 30 and no write yet must answer epoch 3's end
        // as 30, not as its own LEO at some later time.
        let mut c = cache(&[(1, 0), (3, 10)]);
        assert_eq!(c.assign(4, 30), Ok(true));
        assert_eq!(
            c.end_offset_for(3, 45),
            EpochEndOffset {
                epoch: 3,
                end_offset: 30
            }
        );
    }

    #[test]
    fn truncate_from_end_and_start() {
        let mut c = cache(&[(1, 0), (3, 10), (6, 20)]);
        assert!(c.truncate_from_end(15));
        assert_eq!(
            c.latest_entry(),
            Some(EpochEntry {
                epoch: 3,
                start_offset: 10
            })
        );
        assert!(!c.truncate_from_end(15));
        assert!(c.truncate_from_start(12));
        assert_eq!(
            c.entries(),
            &[EpochEntry {
                epoch: 3,
                start_offset: 12
            }]
        );
        assert!(!c.truncate_from_start(5));
        assert_eq!(c.epoch_for_offset(13), Some(3));
        assert_eq!(c.epoch_for_offset(11), None);
        assert_eq!(c.start_offset_of(3), Some(12));
    }

    #[test]
    fn from_entries_repairs_a_non_monotonic_file() {
        let entries = [
            EpochEntry {
                epoch: 1,
                start_offset: 0,
            },
            EpochEntry {
                epoch: 4,
                start_offset: 10,
            },
            EpochEntry {
                epoch: 2,
                start_offset: 20,
            },
        ];
        let c = LeaderEpochCache::from_entries(entries).unwrap_or_default();
        assert_eq!(c.latest_epoch(), Some(2));
        assert_eq!(c.entries().len(), 2);
    }
}
