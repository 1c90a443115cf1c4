//! Kafka's error codes: the `int16` `error_code` fields of responses, as one enum.
//!
//! The table covers every code Apache Kafka 3.9 defines, from `-1` (`UNKNOWN_SERVER_ERROR`)
//! through `127` (`VOTER_NOT_FOUND`); code `99` is unassigned. A code this table does not know
//! decodes to [`ErrorCode::Unknown`], which keeps the number so it can be re-encoded unchanged.
//! "Retriable" marks the codes Kafka maps to subclasses of its `RetriableException`.

use std::fmt;

macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident = $code:literal, $name:literal, $retriable:literal;)*) => {
        /// A Kafka error code.
        ///
        /// `ErrorCode::from_code(c).code() == c` holds for every `i16`: codes outside the table
        /// are kept in [`ErrorCode::Unknown`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $(
                $(#[$doc])*
                $variant,
            )*
            /// A code that is not in this table (kept as read).
            Unknown(i16),
        }

        impl ErrorCode {
            /// Every known error code, in numeric order (`-1` first).
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant),*];

            /// The error code for a number; unknown numbers become [`ErrorCode::Unknown`].
            pub const fn from_code(code: i16) -> ErrorCode {
                match code {
                    $($code => ErrorCode::$variant,)*
                    other => ErrorCode::Unknown(other),
                }
            }

            /// The numeric value sent on the wire.
            pub const fn code(self) -> i16 {
                match self {
                    $(ErrorCode::$variant => $code,)*
                    ErrorCode::Unknown(code) => code,
                }
            }

            /// The name Kafka gives the code (`"NOT_LEADER_OR_FOLLOWER"`); `"UNKNOWN"` for a
            /// code outside the table.
            pub const fn name(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $name,)*
                    ErrorCode::Unknown(_) => "UNKNOWN",
                }
            }

            /// Whether a client may retry the request that got this error unchanged.
            pub const fn is_retriable(self) -> bool {
                match self {
                    $(ErrorCode::$variant => $retriable,)*
                    ErrorCode::Unknown(_) => false,
                }
            }
        }
    };
}

error_codes! {
    /// `UNKNOWN_SERVER_ERROR` (-1).
    UnknownServerError = -1, "UNKNOWN_SERVER_ERROR", false;
    /// `NONE` (0).
    None = 0, "NONE", false;
    /// `OFFSET_OUT_OF_RANGE` (1).
    OffsetOutOfRange = 1, "OFFSET_OUT_OF_RANGE", false;
    /// `CORRUPT_MESSAGE` (2); retriable.
    CorruptMessage = 2, "CORRUPT_MESSAGE", true;
    /// `UNKNOWN_TOPIC_OR_PARTITION` (3); retriable.
    UnknownTopicOrPartition = 3, "UNKNOWN_TOPIC_OR_PARTITION", true;
    /// `INVALID_FETCH_SIZE` (4).
    InvalidFetchSize = 4, "INVALID_FETCH_SIZE", false;
    /// `LEADER_NOT_AVAILABLE` (5); retriable.
    LeaderNotAvailable = 5, "LEADER_NOT_AVAILABLE", true;
    /// `NOT_LEADER_OR_FOLLOWER` (6); retriable.
    NotLeaderOrFollower = 6, "NOT_LEADER_OR_FOLLOWER", true;
    /// `REQUEST_TIMED_OUT` (7); retriable.
    RequestTimedOut = 7, "REQUEST_TIMED_OUT", true;
    /// `BROKER_NOT_AVAILABLE` (8).
    BrokerNotAvailable = 8, "BROKER_NOT_AVAILABLE", false;
    /// `REPLICA_NOT_AVAILABLE` (9); retriable.
    ReplicaNotAvailable = 9, "REPLICA_NOT_AVAILABLE", true;
    /// `MESSAGE_TOO_LARGE` (10).
    MessageTooLarge = 10, "MESSAGE_TOO_LARGE", false;
    /// `STALE_CONTROLLER_EPOCH` (11).
    StaleControllerEpoch = 11, "STALE_CONTROLLER_EPOCH", false;
    /// `OFFSET_METADATA_TOO_LARGE` (12).
    OffsetMetadataTooLarge = 12, "OFFSET_METADATA_TOO_LARGE", false;
    /// `NETWORK_EXCEPTION` (13); retriable.
    NetworkException = 13, "NETWORK_EXCEPTION", true;
    /// `COORDINATOR_LOAD_IN_PROGRESS` (14); retriable.
    CoordinatorLoadInProgress = 14, "COORDINATOR_LOAD_IN_PROGRESS", true;
    /// `COORDINATOR_NOT_AVAILABLE` (15); retriable.
    CoordinatorNotAvailable = 15, "COORDINATOR_NOT_AVAILABLE", true;
    /// `NOT_COORDINATOR` (16); retriable.
    NotCoordinator = 16, "NOT_COORDINATOR", true;
    /// `INVALID_TOPIC_EXCEPTION` (17).
    InvalidTopicException = 17, "INVALID_TOPIC_EXCEPTION", false;
    /// `RECORD_LIST_TOO_LARGE` (18).
    RecordListTooLarge = 18, "RECORD_LIST_TOO_LARGE", false;
    /// `NOT_ENOUGH_REPLICAS` (19); retriable.
    NotEnoughReplicas = 19, "NOT_ENOUGH_REPLICAS", true;
    /// `NOT_ENOUGH_REPLICAS_AFTER_APPEND` (20); retriable.
    NotEnoughReplicasAfterAppend = 20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", true;
    /// `INVALID_REQUIRED_ACKS` (21).
    InvalidRequiredAcks = 21, "INVALID_REQUIRED_ACKS", false;
    /// `ILLEGAL_GENERATION` (22).
    IllegalGeneration = 22, "ILLEGAL_GENERATION", false;
    /// `INCONSISTENT_GROUP_PROTOCOL` (23).
    InconsistentGroupProtocol = 23, "INCONSISTENT_GROUP_PROTOCOL", false;
    /// `INVALID_GROUP_ID` (24).
    InvalidGroupId = 24, "INVALID_GROUP_ID", false;
    /// `UNKNOWN_MEMBER_ID` (25).
    UnknownMemberId = 25, "UNKNOWN_MEMBER_ID", false;
    /// `INVALID_SESSION_TIMEOUT` (26).
    InvalidSessionTimeout = 26, "INVALID_SESSION_TIMEOUT", false;
    /// `REBALANCE_IN_PROGRESS` (27).
    RebalanceInProgress = 27, "REBALANCE_IN_PROGRESS", false;
    /// `INVALID_COMMIT_OFFSET_SIZE` (28).
    InvalidCommitOffsetSize = 28, "INVALID_COMMIT_OFFSET_SIZE", false;
    /// `TOPIC_AUTHORIZATION_FAILED` (29).
    TopicAuthorizationFailed = 29, "TOPIC_AUTHORIZATION_FAILED", false;
    /// `GROUP_AUTHORIZATION_FAILED` (30).
    GroupAuthorizationFailed = 30, "GROUP_AUTHORIZATION_FAILED", false;
    /// `CLUSTER_AUTHORIZATION_FAILED` (31).
    ClusterAuthorizationFailed = 31, "CLUSTER_AUTHORIZATION_FAILED", false;
    /// `INVALID_TIMESTAMP` (32).
    InvalidTimestamp = 32, "INVALID_TIMESTAMP", false;
    /// `UNSUPPORTED_SASL_MECHANISM` (33).
    UnsupportedSaslMechanism = 33, "UNSUPPORTED_SASL_MECHANISM", false;
    /// `ILLEGAL_SASL_STATE` (34).
    IllegalSaslState = 34, "ILLEGAL_SASL_STATE", false;
    /// `UNSUPPORTED_VERSION` (35).
    UnsupportedVersion = 35, "UNSUPPORTED_VERSION", false;
    /// `TOPIC_ALREADY_EXISTS` (36).
    TopicAlreadyExists = 36, "TOPIC_ALREADY_EXISTS", false;
    /// `INVALID_PARTITIONS` (37).
    InvalidPartitions = 37, "INVALID_PARTITIONS", false;
    /// `INVALID_REPLICATION_FACTOR` (38).
    InvalidReplicationFactor = 38, "INVALID_REPLICATION_FACTOR", false;
    /// `INVALID_REPLICA_ASSIGNMENT` (39).
    InvalidReplicaAssignment = 39, "INVALID_REPLICA_ASSIGNMENT", false;
    /// `INVALID_CONFIG` (40).
    InvalidConfig = 40, "INVALID_CONFIG", false;
    /// `NOT_CONTROLLER` (41); retriable.
    NotController = 41, "NOT_CONTROLLER", true;
    /// `INVALID_REQUEST` (42).
    InvalidRequest = 42, "INVALID_REQUEST", false;
    /// `UNSUPPORTED_FOR_MESSAGE_FORMAT` (43).
    UnsupportedForMessageFormat = 43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", false;
    /// `POLICY_VIOLATION` (44).
    PolicyViolation = 44, "POLICY_VIOLATION", false;
    /// `OUT_OF_ORDER_SEQUENCE_NUMBER` (45).
    OutOfOrderSequenceNumber = 45, "OUT_OF_ORDER_SEQUENCE_NUMBER", false;
    /// `DUPLICATE_SEQUENCE_NUMBER` (46).
    DuplicateSequenceNumber = 46, "DUPLICATE_SEQUENCE_NUMBER", false;
    /// `INVALID_PRODUCER_EPOCH` (47).
    InvalidProducerEpoch = 47, "INVALID_PRODUCER_EPOCH", false;
    /// `INVALID_TXN_STATE` (48).
    InvalidTxnState = 48, "INVALID_TXN_STATE", false;
    /// `INVALID_PRODUCER_ID_MAPPING` (49).
    InvalidProducerIdMapping = 49, "INVALID_PRODUCER_ID_MAPPING", false;
    /// `INVALID_TRANSACTION_TIMEOUT` (50).
    InvalidTransactionTimeout = 50, "INVALID_TRANSACTION_TIMEOUT", false;
    /// `CONCURRENT_TRANSACTIONS` (51); retriable.
    ConcurrentTransactions = 51, "CONCURRENT_TRANSACTIONS", true;
    /// `TRANSACTION_COORDINATOR_FENCED` (52).
    TransactionCoordinatorFenced = 52, "TRANSACTION_COORDINATOR_FENCED", false;
    /// `TRANSACTIONAL_ID_AUTHORIZATION_FAILED` (53).
    TransactionalIdAuthorizationFailed = 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", false;
    /// `SECURITY_DISABLED` (54).
    SecurityDisabled = 54, "SECURITY_DISABLED", false;
    /// `OPERATION_NOT_ATTEMPTED` (55).
    OperationNotAttempted = 55, "OPERATION_NOT_ATTEMPTED", false;
    /// `KAFKA_STORAGE_ERROR` (56); retriable.
    KafkaStorageError = 56, "KAFKA_STORAGE_ERROR", true;
    /// `LOG_DIR_NOT_FOUND` (57).
    LogDirNotFound = 57, "LOG_DIR_NOT_FOUND", false;
    /// `SASL_AUTHENTICATION_FAILED` (58).
    SaslAuthenticationFailed = 58, "SASL_AUTHENTICATION_FAILED", false;
    /// `UNKNOWN_PRODUCER_ID` (59).
    UnknownProducerId = 59, "UNKNOWN_PRODUCER_ID", false;
    /// `REASSIGNMENT_IN_PROGRESS` (60).
    ReassignmentInProgress = 60, "REASSIGNMENT_IN_PROGRESS", false;
    /// `DELEGATION_TOKEN_AUTH_DISABLED` (61).
    DelegationTokenAuthDisabled = 61, "DELEGATION_TOKEN_AUTH_DISABLED", false;
    /// `DELEGATION_TOKEN_NOT_FOUND` (62).
    DelegationTokenNotFound = 62, "DELEGATION_TOKEN_NOT_FOUND", false;
    /// `DELEGATION_TOKEN_OWNER_MISMATCH` (63).
    DelegationTokenOwnerMismatch = 63, "DELEGATION_TOKEN_OWNER_MISMATCH", false;
    /// `DELEGATION_TOKEN_REQUEST_NOT_ALLOWED` (64).
    DelegationTokenRequestNotAllowed = 64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", false;
    /// `DELEGATION_TOKEN_AUTHORIZATION_FAILED` (65).
    DelegationTokenAuthorizationFailed = 65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED", false;
    /// `DELEGATION_TOKEN_EXPIRED` (66).
    DelegationTokenExpired = 66, "DELEGATION_TOKEN_EXPIRED", false;
    /// `INVALID_PRINCIPAL_TYPE` (67).
    InvalidPrincipalType = 67, "INVALID_PRINCIPAL_TYPE", false;
    /// `NON_EMPTY_GROUP` (68).
    NonEmptyGroup = 68, "NON_EMPTY_GROUP", false;
    /// `GROUP_ID_NOT_FOUND` (69).
    GroupIdNotFound = 69, "GROUP_ID_NOT_FOUND", false;
    /// `FETCH_SESSION_ID_NOT_FOUND` (70); retriable.
    FetchSessionIdNotFound = 70, "FETCH_SESSION_ID_NOT_FOUND", true;
    /// `INVALID_FETCH_SESSION_EPOCH` (71); retriable.
    InvalidFetchSessionEpoch = 71, "INVALID_FETCH_SESSION_EPOCH", true;
    /// `LISTENER_NOT_FOUND` (72); retriable.
    ListenerNotFound = 72, "LISTENER_NOT_FOUND", true;
    /// `TOPIC_DELETION_DISABLED` (73).
    TopicDeletionDisabled = 73, "TOPIC_DELETION_DISABLED", false;
    /// `FENCED_LEADER_EPOCH` (74); retriable.
    FencedLeaderEpoch = 74, "FENCED_LEADER_EPOCH", true;
    /// `UNKNOWN_LEADER_EPOCH` (75); retriable.
    UnknownLeaderEpoch = 75, "UNKNOWN_LEADER_EPOCH", true;
    /// `UNSUPPORTED_COMPRESSION_TYPE` (76).
    UnsupportedCompressionType = 76, "UNSUPPORTED_COMPRESSION_TYPE", false;
    /// `STALE_BROKER_EPOCH` (77).
    StaleBrokerEpoch = 77, "STALE_BROKER_EPOCH", false;
    /// `OFFSET_NOT_AVAILABLE` (78); retriable.
    OffsetNotAvailable = 78, "OFFSET_NOT_AVAILABLE", true;
    /// `MEMBER_ID_REQUIRED` (79).
    MemberIdRequired = 79, "MEMBER_ID_REQUIRED", false;
    /// `PREFERRED_LEADER_NOT_AVAILABLE` (80); retriable.
    PreferredLeaderNotAvailable = 80, "PREFERRED_LEADER_NOT_AVAILABLE", true;
    /// `GROUP_MAX_SIZE_REACHED` (81).
    GroupMaxSizeReached = 81, "GROUP_MAX_SIZE_REACHED", false;
    /// `FENCED_INSTANCE_ID` (82).
    FencedInstanceId = 82, "FENCED_INSTANCE_ID", false;
    /// `ELIGIBLE_LEADERS_NOT_AVAILABLE` (83); retriable.
    EligibleLeadersNotAvailable = 83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", true;
    /// `ELECTION_NOT_NEEDED` (84); retriable.
    ElectionNotNeeded = 84, "ELECTION_NOT_NEEDED", true;
    /// `NO_REASSIGNMENT_IN_PROGRESS` (85).
    NoReassignmentInProgress = 85, "NO_REASSIGNMENT_IN_PROGRESS", false;
    /// `GROUP_SUBSCRIBED_TO_TOPIC` (86).
    GroupSubscribedToTopic = 86, "GROUP_SUBSCRIBED_TO_TOPIC", false;
    /// `INVALID_RECORD` (87).
    InvalidRecord = 87, "INVALID_RECORD", false;
    /// `UNSTABLE_OFFSET_COMMIT` (88); retriable.
    UnstableOffsetCommit = 88, "UNSTABLE_OFFSET_COMMIT", true;
    /// `THROTTLING_QUOTA_EXCEEDED` (89); retriable.
    ThrottlingQuotaExceeded = 89, "THROTTLING_QUOTA_EXCEEDED", true;
    /// `PRODUCER_FENCED` (90).
    ProducerFenced = 90, "PRODUCER_FENCED", false;
    /// `RESOURCE_NOT_FOUND` (91).
    ResourceNotFound = 91, "RESOURCE_NOT_FOUND", false;
    /// `DUPLICATE_RESOURCE` (92).
    DuplicateResource = 92, "DUPLICATE_RESOURCE", false;
    /// `UNACCEPTABLE_CREDENTIAL` (93).
    UnacceptableCredential = 93, "UNACCEPTABLE_CREDENTIAL", false;
    /// `INCONSISTENT_VOTER_SET` (94).
    InconsistentVoterSet = 94, "INCONSISTENT_VOTER_SET", false;
    /// `INVALID_UPDATE_VERSION` (95).
    InvalidUpdateVersion = 95, "INVALID_UPDATE_VERSION", false;
    /// `FEATURE_UPDATE_FAILED` (96).
    FeatureUpdateFailed = 96, "FEATURE_UPDATE_FAILED", false;
    /// `PRINCIPAL_DESERIALIZATION_FAILURE` (97).
    PrincipalDeserializationFailure = 97, "PRINCIPAL_DESERIALIZATION_FAILURE", false;
    /// `SNAPSHOT_NOT_FOUND` (98).
    SnapshotNotFound = 98, "SNAPSHOT_NOT_FOUND", false;
    /// `UNKNOWN_TOPIC_ID` (100); retriable.
    UnknownTopicId = 100, "UNKNOWN_TOPIC_ID", true;
    /// `DUPLICATE_BROKER_REGISTRATION` (101).
    DuplicateBrokerRegistration = 101, "DUPLICATE_BROKER_REGISTRATION", false;
    /// `BROKER_ID_NOT_REGISTERED` (102).
    BrokerIdNotRegistered = 102, "BROKER_ID_NOT_REGISTERED", false;
    /// `INCONSISTENT_TOPIC_ID` (103); retriable.
    InconsistentTopicId = 103, "INCONSISTENT_TOPIC_ID", true;
    /// `INCONSISTENT_CLUSTER_ID` (104).
    InconsistentClusterId = 104, "INCONSISTENT_CLUSTER_ID", false;
    /// `TRANSACTIONAL_ID_NOT_FOUND` (105).
    TransactionalIdNotFound = 105, "TRANSACTIONAL_ID_NOT_FOUND", false;
    /// `FETCH_SESSION_TOPIC_ID_ERROR` (106); retriable.
    FetchSessionTopicIdError = 106, "FETCH_SESSION_TOPIC_ID_ERROR", true;
    /// `INELIGIBLE_REPLICA` (107).
    IneligibleReplica = 107, "INELIGIBLE_REPLICA", false;
    /// `NEW_LEADER_ELECTED` (108).
    NewLeaderElected = 108, "NEW_LEADER_ELECTED", false;
    /// `OFFSET_MOVED_TO_TIERED_STORAGE` (109).
    OffsetMovedToTieredStorage = 109, "OFFSET_MOVED_TO_TIERED_STORAGE", false;
    /// `FENCED_MEMBER_EPOCH` (110).
    FencedMemberEpoch = 110, "FENCED_MEMBER_EPOCH", false;
    /// `UNRELEASED_INSTANCE_ID` (111).
    UnreleasedInstanceId = 111, "UNRELEASED_INSTANCE_ID", false;
    /// `UNSUPPORTED_ASSIGNOR` (112).
    UnsupportedAssignor = 112, "UNSUPPORTED_ASSIGNOR", false;
    /// `STALE_MEMBER_EPOCH` (113).
    StaleMemberEpoch = 113, "STALE_MEMBER_EPOCH", false;
    /// `MISMATCHED_ENDPOINT_TYPE` (114).
    MismatchedEndpointType = 114, "MISMATCHED_ENDPOINT_TYPE", false;
    /// `UNSUPPORTED_ENDPOINT_TYPE` (115).
    UnsupportedEndpointType = 115, "UNSUPPORTED_ENDPOINT_TYPE", false;
    /// `UNKNOWN_CONTROLLER_ID` (116).
    UnknownControllerId = 116, "UNKNOWN_CONTROLLER_ID", false;
    /// `UNKNOWN_SUBSCRIPTION_ID` (117).
    UnknownSubscriptionId = 117, "UNKNOWN_SUBSCRIPTION_ID", false;
    /// `TELEMETRY_TOO_LARGE` (118).
    TelemetryTooLarge = 118, "TELEMETRY_TOO_LARGE", false;
    /// `INVALID_REGISTRATION` (119).
    InvalidRegistration = 119, "INVALID_REGISTRATION", false;
    /// `TRANSACTION_ABORTABLE` (120).
    TransactionAbortable = 120, "TRANSACTION_ABORTABLE", false;
    /// `INVALID_RECORD_STATE` (121).
    InvalidRecordState = 121, "INVALID_RECORD_STATE", false;
    /// `SHARE_SESSION_NOT_FOUND` (122); retriable.
    ShareSessionNotFound = 122, "SHARE_SESSION_NOT_FOUND", true;
    /// `INVALID_SHARE_SESSION_EPOCH` (123); retriable.
    InvalidShareSessionEpoch = 123, "INVALID_SHARE_SESSION_EPOCH", true;
    /// `FENCED_STATE_EPOCH` (124).
    FencedStateEpoch = 124, "FENCED_STATE_EPOCH", false;
    /// `INVALID_VOTER_KEY` (125).
    InvalidVoterKey = 125, "INVALID_VOTER_KEY", false;
    /// `DUPLICATE_VOTER` (126).
    DuplicateVoter = 126, "DUPLICATE_VOTER", false;
    /// `VOTER_NOT_FOUND` (127).
    VoterNotFound = 127, "VOTER_NOT_FOUND", false;
}

impl ErrorCode {
    /// Whether this is [`ErrorCode::None`] (no error).
    pub const fn is_none(self) -> bool {
        matches!(self, ErrorCode::None)
    }

    /// The code for a name as [`ErrorCode::name`] gives it.
    pub fn from_name(name: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.iter().copied().find(|e| e.name() == name)
    }
}

impl Default for ErrorCode {
    /// [`ErrorCode::None`].
    fn default() -> Self {
        ErrorCode::None
    }
}

impl From<i16> for ErrorCode {
    fn from(code: i16) -> Self {
        ErrorCode::from_code(code)
    }
}

impl From<ErrorCode> for i16 {
    fn from(e: ErrorCode) -> Self {
        e.code()
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorCode::Unknown(code) => write!(f, "UNKNOWN({code})"),
            known => write!(f, "{}({})", known.name(), known.code()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_i16_round_trips_through_from_code() {
        for c in i16::MIN..=i16::MAX {
            assert_eq!(ErrorCode::from_code(c).code(), c);
        }
    }

    #[test]
    fn table_is_dense_from_minus_one_to_127_except_99() {
        let codes: Vec<i16> = ErrorCode::ALL.iter().map(|e| e.code()).collect();
        let expected: Vec<i16> = (-1..=127).filter(|c| *c != 99).collect();
        assert_eq!(codes, expected);
        assert_eq!(ErrorCode::from_code(99), ErrorCode::Unknown(99));
    }

    #[test]
    fn names_codes_and_retriability_of_well_known_errors() {
        assert_eq!(ErrorCode::from_code(6).name(), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(ErrorCode::NotController.code(), 41);
        assert_eq!(ErrorCode::StaleControllerEpoch.code(), 11);
        assert_eq!(ErrorCode::FencedLeaderEpoch.code(), 74);
        assert_eq!(ErrorCode::UnknownServerError.code(), -1);
        assert_eq!(ErrorCode::VoterNotFound.code(), 127);
        assert_eq!(
            ErrorCode::from_name("OFFSET_OUT_OF_RANGE"),
            Some(ErrorCode::OffsetOutOfRange)
        );
        assert!(ErrorCode::NotLeaderOrFollower.is_retriable());
        assert!(ErrorCode::CorruptMessage.is_retriable());
        assert!(!ErrorCode::StaleControllerEpoch.is_retriable());
        assert!(!ErrorCode::Unknown(-7).is_retriable());
        assert!(ErrorCode::default().is_none());
        assert_eq!(ErrorCode::Unknown(-7).to_string(), "UNKNOWN(-7)");
        assert_eq!(ErrorCode::NotController.to_string(), "NOT_CONTROLLER(41)");
    }
}
