//! The admin and notification znodes: `/admin/reassign_partitions`,
//! `/admin/preferred_replica_election`, `/isr_change_notification/isr_change_<seq>`,
//! `/log_dir_event_notification/log_dir_event_<seq>`. (`/admin/delete_topics/<t>` has empty
//! data.)

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::ZkDataError;

/// One partition named in an admin request or notification: `{"topic":"t","partition":0}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicPartitionEntry {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Fields this version does not know, written back unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl TopicPartitionEntry {
    /// `{"topic":topic,"partition":partition}`.
    pub fn new(topic: &str, partition: i32) -> TopicPartitionEntry {
        TopicPartitionEntry {
            topic: topic.to_string(),
            partition,
            extra: Map::new(),
        }
    }
}

/// One target of a reassignment: `{"topic":"t","partition":0,"replicas":[4,5,6]}` (Kafka's
/// tools may add `log_dirs`, kept in `extra`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReassignmentEntry {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// Target replicas (TRS).
    pub replicas: Vec<i32>,
    /// Fields this version does not know, written back unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

macro_rules! json_znode {
    ($ty:ident, $what:literal) => {
        impl $ty {
            /// Decodes the znode's JSON.
            pub fn from_json(bytes: &[u8]) -> Result<$ty, ZkDataError> {
                super::error::decode($what, bytes)
            }

            /// Encodes the znode's JSON.
            pub fn to_json(&self) -> Result<Vec<u8>, ZkDataError> {
                super::error::encode($what, self)
            }
        }
    };
}

/// `/admin/reassign_partitions`: `{"version":1,"partitions":[{"topic":"t","partition":0,
/// "replicas":[4,5,6]}]}`. The controller removes entries as they complete and deletes the
/// node when it is empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReassignPartitions {
    /// Format version (1).
    pub version: i32,
    /// The requested reassignments.
    pub partitions: Vec<ReassignmentEntry>,
    /// Fields this version does not know, written back unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
json_znode!(ReassignPartitions, "/admin/reassign_partitions");

/// `/admin/preferred_replica_election`: `{"version":1,"partitions":[{"topic":"t","partition":0}]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreferredReplicaElection {
    /// Format version (1).
    pub version: i32,
    /// Partitions whose preferred replica should lead.
    pub partitions: Vec<TopicPartitionEntry>,
    /// Fields this version does not know, written back unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
json_znode!(
    PreferredReplicaElection,
    "/admin/preferred_replica_election"
);

/// `/isr_change_notification/isr_change_<seq10>`: `{"version":1,"partitions":[…]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IsrChangeNotification {
    /// Format version (1).
    pub version: i32,
    /// Partitions whose ISR changed.
    pub partitions: Vec<TopicPartitionEntry>,
    /// Fields this version does not know, written back unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
json_znode!(
    IsrChangeNotification,
    "/isr_change_notification/isr_change_<seq>"
);

impl IsrChangeNotification {
    /// A version-1 notification for `partitions`.
    pub fn new(partitions: Vec<TopicPartitionEntry>) -> IsrChangeNotification {
        IsrChangeNotification {
            version: 1,
            partitions,
            extra: Map::new(),
        }
    }
}

/// `/log_dir_event_notification/log_dir_event_<seq10>`: `{"version":1,"broker":3,"event":1}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogDirEventNotification {
    /// Format version (1).
    pub version: i32,
    /// The broker whose log directory failed.
    pub broker: i32,
    /// Event kind (1 = log dir failure).
    pub event: i32,
    /// Fields this version does not know, written back unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}
impl LogDirEventNotification {
    /// The event a broker writes when one of its log directories fails (`event` 1).
    pub fn failure(broker: i32) -> LogDirEventNotification {
        LogDirEventNotification {
            version: 1,
            broker,
            event: 1,
            extra: Map::new(),
        }
    }
}

json_znode!(
    LogDirEventNotification,
    "/log_dir_event_notification/log_dir_event_<seq>"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reassignment_keeps_log_dirs_on_rewrite() {
        let json = br#"{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[4,5,6],"log_dirs":["any","any","any"]}]}"#;
        let mut r = ReassignPartitions::from_json(json).expect("decodes");
        assert_eq!(r.partitions[0].replicas, vec![4, 5, 6]);
        r.partitions[0].replicas = vec![4, 5];
        let out = String::from_utf8(r.to_json().expect("encode")).expect("utf8");
        assert!(out.contains(r#""log_dirs":["any","any","any"]"#), "{out}");
        assert!(out.contains(r#""replicas":[4,5]"#), "{out}");
    }

    #[test]
    fn isr_change_and_preferred_election_decode() {
        let n = IsrChangeNotification::new(vec![TopicPartitionEntry::new("t", 0)]);
        assert_eq!(
            n.to_json().expect("encode"),
            br#"{"version":1,"partitions":[{"topic":"t","partition":0}]}"#.to_vec()
        );
        let p = PreferredReplicaElection::from_json(
            br#"{"version":1,"partitions":[{"topic":"a","partition":3}]}"#,
        )
        .expect("decodes");
        assert_eq!(p.partitions, vec![TopicPartitionEntry::new("a", 3)]);
        let l = LogDirEventNotification::from_json(br#"{"version":1,"broker":3,"event":1}"#)
            .expect("decodes");
        assert_eq!((l.broker, l.event), (3, 1));
    }

    #[test]
    fn wrong_shapes_are_typed_errors() {
        for bad in [
            &br#"{"version":1,"partitions":{"t":0}}"#[..],
            br#"{"version":1}"#,
            br#"{"version":1,"partitions":[{"topic":1,"partition":0}]}"#,
            b"",
            b"\xff",
        ] {
            assert!(matches!(
                PreferredReplicaElection::from_json(bad),
                Err(ZkDataError::Json { .. })
            ));
        }
    }
}
