//! `/brokers/topics/<t>` (the replica assignment) and
//! `/brokers/topics/<t>/partitions/<p>/state` (leader, ISR and epochs).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::ZkDataError;

/// A topic's assignment, versions 1 to 3:
/// `{"version":1,"partitions":{"0":[1,2,3]}}`; v2 (KIP-455) adds `adding_replicas` and
/// `removing_replicas`; v3 (KIP-516) adds `topic_id`. During a reassignment `partitions` holds
/// RS = TRS ++ (ORS − TRS). Unknown fields are kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopicAssignment {
    /// Format version.
    pub version: i32,
    /// Partition → replicas (the first is the preferred leader).
    pub partitions: BTreeMap<i32, Vec<i32>>,
    /// v2+: partition → replicas being added by a reassignment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adding_replicas: Option<BTreeMap<i32, Vec<i32>>>,
    /// v2+: partition → replicas being removed by a reassignment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub removing_replicas: Option<BTreeMap<i32, Vec<i32>>>,
    /// v3: the topic id (base64 UUID).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_id: Option<String>,
    /// Fields this version does not know, written back unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl TopicAssignment {
    /// A version-2 assignment without a reassignment in progress (what Kafka 2.4–2.7 writes).
    pub fn new(partitions: BTreeMap<i32, Vec<i32>>) -> TopicAssignment {
        TopicAssignment {
            version: 2,
            partitions,
            adding_replicas: Some(BTreeMap::new()),
            removing_replicas: Some(BTreeMap::new()),
            topic_id: None,
            extra: Map::new(),
        }
    }

    /// Decodes the znode's JSON.
    pub fn from_json(bytes: &[u8]) -> Result<TopicAssignment, ZkDataError> {
        super::error::decode("/brokers/topics/<t>", bytes)
    }

    /// Encodes the znode's JSON.
    pub fn to_json(&self) -> Result<Vec<u8>, ZkDataError> {
        super::error::encode("/brokers/topics/<t>", self)
    }

    /// KIP-516: the topic id, if the znode has one (v3).
    pub fn id(&self) -> Result<Option<kafka_wire::Uuid>, ZkDataError> {
        self.topic_id
            .as_deref()
            .map(super::topic_id::decode_topic_id)
            .transpose()
    }

    /// KIP-516: sets the topic id, making this a version-3 znode (which always carries the
    /// reassignment fields).
    pub fn set_id(&mut self, id: kafka_wire::Uuid) {
        self.version = self.version.max(3);
        self.topic_id = Some(super::topic_id::encode_topic_id(id));
        self.adding_replicas.get_or_insert_with(BTreeMap::new);
        self.removing_replicas.get_or_insert_with(BTreeMap::new);
    }
}

/// `leader_recovery_state` when the leader is recovered (the default, not written).
pub const LEADER_RECOVERED: i32 = 0;

/// A partition's state: `{"version":1,"leader":1,"leader_epoch":3,"controller_epoch":7,
/// "isr":[1,2,3]}`, plus `"leader_recovery_state":1` only when recovering (KIP-704). The
/// znode's version is the partition epoch. Unknown fields are kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartitionStateZNode {
    /// Format version (1).
    pub version: i32,
    /// Leader broker id, or -1 for none.
    pub leader: i32,
    /// Leader epoch.
    pub leader_epoch: i32,
    /// Epoch of the controller that made the leadership decision.
    pub controller_epoch: i32,
    /// In-sync replicas.
    pub isr: Vec<i32>,
    /// Present only when not recovered (1 = recovering).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_recovery_state: Option<i32>,
    /// Fields this version does not know, written back unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl PartitionStateZNode {
    /// A version-1 state.
    pub fn new(leader: i32, leader_epoch: i32, controller_epoch: i32, isr: Vec<i32>) -> Self {
        PartitionStateZNode {
            version: 1,
            leader,
            leader_epoch,
            controller_epoch,
            isr,
            leader_recovery_state: None,
            extra: Map::new(),
        }
    }

    /// Decodes the znode's JSON.
    pub fn from_json(bytes: &[u8]) -> Result<PartitionStateZNode, ZkDataError> {
        match super::partition_state_json::decode(bytes) {
            Some(z) => Ok(z),
            None => super::error::decode("partition state", bytes),
        }
    }

    /// Encodes the znode's JSON.
    pub fn to_json(&self) -> Result<Vec<u8>, ZkDataError> {
        match super::partition_state_json::encode(self) {
            Some(json) => Ok(json),
            None => super::error::encode("partition state", self),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_assignment_v1_v2_v3_decode() {
        let v1 =
            TopicAssignment::from_json(br#"{"version":1,"partitions":{"0":[1,2,3],"1":[2,3,1]}}"#)
                .expect("v1");
        assert_eq!(v1.partitions.get(&1), Some(&vec![2, 3, 1]));
        assert_eq!(v1.adding_replicas, None);
        assert_eq!(
            v1.to_json().expect("encode"),
            br#"{"version":1,"partitions":{"0":[1,2,3],"1":[2,3,1]}}"#.to_vec()
        );
        let v2 = TopicAssignment::from_json(
            br#"{"version":2,"partitions":{"0":[4,5,6,1,2,3]},"adding_replicas":{"0":[4,5,6]},"removing_replicas":{"0":[1,2,3]}}"#,
        )
        .expect("v2");
        assert_eq!(
            v2.adding_replicas.as_ref().and_then(|a| a.get(&0)),
            Some(&vec![4, 5, 6])
        );
        let v3 = TopicAssignment::from_json(
            br#"{"version":3,"topic_id":"AAAAAAAAAAAAAAAAAAAAAQ","partitions":{"0":[1]},"adding_replicas":{},"removing_replicas":{}}"#,
        )
        .expect("v3");
        assert_eq!(v3.topic_id.as_deref(), Some("AAAAAAAAAAAAAAAAAAAAAQ"));
    }

    #[test]
    fn partition_numbers_that_are_not_integers_are_a_typed_error() {
        let bad = TopicAssignment::from_json(br#"{"version":1,"partitions":{"zero":[1]}}"#);
        assert!(matches!(bad, Err(ZkDataError::Json { .. })));
    }

    #[test]
    fn partition_state_round_trips_and_keeps_unknown_fields() {
        let json = br#"{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":3,"isr":[1,2,3],"zz_future":true}"#;
        let s = PartitionStateZNode::from_json(json).expect("decodes");
        assert_eq!(s.leader, 1);
        assert_eq!(s.isr, vec![1, 2, 3]);
        assert_eq!(s.leader_recovery_state, None);
        let out = String::from_utf8(s.to_json().expect("encode")).expect("utf8");
        assert_eq!(
            out,
            r#"{"version":1,"leader":1,"leader_epoch":3,"controller_epoch":7,"isr":[1,2,3],"zz_future":true}"#
        );
        let recovering = PartitionStateZNode::from_json(
            br#"{"version":1,"leader":2,"leader_epoch":4,"controller_epoch":7,"isr":[2],"leader_recovery_state":1}"#,
        )
        .expect("decodes");
        assert_eq!(recovering.leader_recovery_state, Some(1));
    }
}
