//! `/config/topics/<t>`, `/config/changes/config_change_<seq>` and `/cluster/id`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::ZkDataError;

/// `/config/topics/<t>`: `{"version":1,"config":{"min.insync.replicas":"2"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicConfig {
    /// Format version (1).
    pub version: i32,
    /// Topic-level overrides (all values are strings).
    pub config: BTreeMap<String, String>,
    /// Fields this version does not know, written back unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl TopicConfig {
    /// A version-1 config.
    pub fn new(config: BTreeMap<String, String>) -> TopicConfig {
        TopicConfig {
            version: 1,
            config,
            extra: Map::new(),
        }
    }

    /// Decodes the znode's JSON.
    pub fn from_json(bytes: &[u8]) -> Result<TopicConfig, ZkDataError> {
        super::error::decode("/config/topics/<t>", bytes)
    }

    /// Encodes the znode's JSON.
    pub fn to_json(&self) -> Result<Vec<u8>, ZkDataError> {
        super::error::encode("/config/topics/<t>", self)
    }

    /// `unclean.leader.election.enable` for this topic, if overridden (K1: unclean election
    /// only when true).
    pub fn unclean_leader_election(&self) -> Option<bool> {
        self.config
            .get("unclean.leader.election.enable")
            .map(|v| v.trim().eq_ignore_ascii_case("true"))
    }
}

/// `/config/changes/config_change_<seq>`: `{"version":2,"entity_path":"topics/t"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigChangeNotification {
    /// Format version (2).
    pub version: i32,
    /// The changed entity, e.g. `topics/t`.
    pub entity_path: String,
    /// Fields this version does not know, written back unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ConfigChangeNotification {
    /// Decodes the znode's JSON.
    pub fn from_json(bytes: &[u8]) -> Result<ConfigChangeNotification, ZkDataError> {
        super::error::decode("/config/changes/config_change_<seq>", bytes)
    }

    /// Encodes the znode's JSON.
    pub fn to_json(&self) -> Result<Vec<u8>, ZkDataError> {
        super::error::encode("/config/changes/config_change_<seq>", self)
    }
}

/// `/cluster/id`: `{"version":"1","id":"<22-char base64>"}` — the version is a *string*.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterId {
    /// Format version, a string (`"1"`).
    pub version: String,
    /// The cluster id.
    pub id: String,
    /// Fields this version does not know, written back unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ClusterId {
    /// A version-"1" record.
    pub fn new(id: &str) -> ClusterId {
        ClusterId {
            version: "1".to_string(),
            id: id.to_string(),
            extra: Map::new(),
        }
    }

    /// Decodes the znode's JSON.
    pub fn from_json(bytes: &[u8]) -> Result<ClusterId, ZkDataError> {
        super::error::decode("/cluster/id", bytes)
    }

    /// Encodes the znode's JSON.
    pub fn to_json(&self) -> Result<Vec<u8>, ZkDataError> {
        super::error::encode("/cluster/id", self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_config_reads_unclean_leader_election() {
        let c = TopicConfig::from_json(
            br#"{"version":1,"config":{"unclean.leader.election.enable":"true","min.insync.replicas":"2"}}"#,
        )
        .expect("decodes");
        assert_eq!(c.unclean_leader_election(), Some(true));
        assert_eq!(
            TopicConfig::new(BTreeMap::new()).unclean_leader_election(),
            None
        );
    }

    #[test]
    fn cluster_id_version_is_a_string() {
        let c = ClusterId::from_json(br#"{"version":"1","id":"q1Sh-9_ISia_zwGINzRvyQ"}"#)
            .expect("decodes");
        assert_eq!(c, ClusterId::new("q1Sh-9_ISia_zwGINzRvyQ"));
        assert!(ClusterId::from_json(br#"{"version":1,"id":"x"}"#).is_err());
        let n = ConfigChangeNotification::from_json(br#"{"version":2,"entity_path":"topics/t"}"#)
            .expect("decodes");
        assert_eq!(n.entity_path, "topics/t");
    }
}
