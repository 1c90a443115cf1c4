//! The coordinator's configuration: Kafka's `group.*` and `offsets.*` broker settings.

/// The settings of a [`GroupCoordinator`](crate::GroupCoordinator), with Kafka's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupCoordinatorConfig {
    /// `offsets.topic.num.partitions` (50): how many partitions `__consumer_offsets` has; a
    /// group lives on partition `abs(hash(group_id)) % this`.
    pub offsets_topic_num_partitions: i32,
    /// `group.min.session.timeout.ms` (6000).
    pub group_min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms` (1800000).
    pub group_max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms` (3000): how long the first rebalance of an Empty
    /// group waits for more members (Kafka's `InitialDelayedJoin`).
    pub group_initial_rebalance_delay_ms: i32,
    /// `group.max.size` (`i32::MAX`): the most members a group may have.
    pub group_max_size: i32,
    /// `offsets.retention.minutes` (7 days) in milliseconds: how long the offsets of an Empty
    /// group (or of a simple consumer) are kept.
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms` (600000): how often expired offsets are removed.
    pub offsets_retention_check_interval_ms: i64,
    /// `offset.metadata.max.bytes` (4096): the longest metadata string of a commit.
    pub offset_metadata_max_bytes: usize,
    /// Mixed into the member ids this coordinator hands out, so two coordinators of the same
    /// partition and leader epoch (after a restart) do not repeat each other's ids. The core
    /// draws no randomness; the shell passes one in (a broker id and start time, or random).
    pub member_id_salt: u64,
}

/// Kafka's `GroupCoordinator.NewMemberJoinTimeoutMs`: how long a new member's JoinGroup may
/// wait in a rebalance before the member is dropped (it retries if it is still there).
pub const NEW_MEMBER_JOIN_TIMEOUT_MS: u64 = 300_000;

impl Default for GroupCoordinatorConfig {
    fn default() -> Self {
        GroupCoordinatorConfig {
            offsets_topic_num_partitions: 50,
            group_min_session_timeout_ms: 6_000,
            group_max_session_timeout_ms: 1_800_000,
            group_initial_rebalance_delay_ms: 3_000,
            group_max_size: i32::MAX,
            offsets_retention_ms: 7 * 24 * 60 * 60 * 1000,
            offsets_retention_check_interval_ms: 600_000,
            offset_metadata_max_bytes: 4096,
            member_id_salt: 0,
        }
    }
}

impl GroupCoordinatorConfig {
    /// Kafka's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// With `offsets.topic.num.partitions` set (at least 1).
    pub fn with_offsets_topic_num_partitions(mut self, n: i32) -> Self {
        self.offsets_topic_num_partitions = n.max(1);
        self
    }

    /// With `group.min.session.timeout.ms` and `group.max.session.timeout.ms` set.
    pub fn with_session_timeout_bounds(mut self, min_ms: i32, max_ms: i32) -> Self {
        self.group_min_session_timeout_ms = min_ms;
        self.group_max_session_timeout_ms = max_ms;
        self
    }

    /// With `group.initial.rebalance.delay.ms` set.
    pub fn with_initial_rebalance_delay_ms(mut self, ms: i32) -> Self {
        self.group_initial_rebalance_delay_ms = ms.max(0);
        self
    }

    /// With `group.max.size` set.
    pub fn with_group_max_size(mut self, n: i32) -> Self {
        self.group_max_size = n.max(1);
        self
    }

    /// With `offsets.retention.minutes` set, in milliseconds.
    pub fn with_offsets_retention_ms(mut self, ms: i64) -> Self {
        self.offsets_retention_ms = ms;
        self
    }

    /// With `offsets.retention.check.interval.ms` set (at least 1).
    pub fn with_offsets_retention_check_interval_ms(mut self, ms: i64) -> Self {
        self.offsets_retention_check_interval_ms = ms.max(1);
        self
    }

    /// With `offset.metadata.max.bytes` set.
    pub fn with_offset_metadata_max_bytes(mut self, n: usize) -> Self {
        self.offset_metadata_max_bytes = n;
        self
    }

    /// With the member-id salt set.
    pub fn with_member_id_salt(mut self, salt: u64) -> Self {
        self.member_id_salt = salt;
        self
    }
}
