//! `/controller` (who is the controller) and `/controller_epoch` (the controller epoch).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::ZkDataError;

/// The content of the ephemeral `/controller`:
/// `{"version":1,"brokerid":1,"timestamp":"1700000000000"}`; version 2 (Kafka 3.4+) adds
/// `"kraftControllerEpoch":-1`. Unknown fields are kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControllerZNode {
    /// Format version (1, or 2 with `kraftControllerEpoch`).
    pub version: i32,
    /// The controller's broker id.
    pub brokerid: i32,
    /// Election time in ms since the epoch, as a string.
    pub timestamp: String,
    /// Version 2 only: the KRaft controller epoch during a migration (-1 otherwise).
    #[serde(
        rename = "kraftControllerEpoch",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub kraft_controller_epoch: Option<i32>,
    /// Fields this version does not know, written back unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ControllerZNode {
    /// A version-1 record for `broker_id` elected at `timestamp_ms`.
    pub fn new(broker_id: i32, timestamp_ms: i64) -> ControllerZNode {
        ControllerZNode {
            version: 1,
            brokerid: broker_id,
            timestamp: timestamp_ms.to_string(),
            kraft_controller_epoch: None,
            extra: Map::new(),
        }
    }

    /// Decodes the znode's JSON.
    pub fn from_json(bytes: &[u8]) -> Result<ControllerZNode, ZkDataError> {
        super::error::decode("/controller", bytes)
    }

    /// Encodes the znode's JSON.
    pub fn to_json(&self) -> Result<Vec<u8>, ZkDataError> {
        super::error::encode("/controller", self)
    }
}

/// Decodes `/controller_epoch`: an ASCII decimal integer such as `5` (surrounding whitespace
/// tolerated).
pub fn decode_controller_epoch(bytes: &[u8]) -> Result<i32, ZkDataError> {
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
        .ok_or_else(|| ZkDataError::NotAnInteger {
            what: "/controller_epoch",
            content: String::from_utf8_lossy(&bytes[..bytes.len().min(64)]).into_owned(),
        })
}

/// Encodes `/controller_epoch`.
pub fn encode_controller_epoch(epoch: i32) -> Vec<u8> {
    epoch.to_string().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_znode_v1_and_v2_round_trip() {
        let v1 = br#"{"version":1,"brokerid":1,"timestamp":"1700000000000"}"#;
        let c = ControllerZNode::from_json(v1).expect("v1");
        assert_eq!(c, ControllerZNode::new(1, 1_700_000_000_000));
        assert_eq!(c.to_json().expect("encode"), v1.to_vec());
        let v2 = br#"{"version":2,"brokerid":3,"timestamp":"1","kraftControllerEpoch":-1}"#;
        let c = ControllerZNode::from_json(v2).expect("v2");
        assert_eq!(c.kraft_controller_epoch, Some(-1));
        assert_eq!(c.to_json().expect("encode"), v2.to_vec());
    }

    #[test]
    fn controller_epoch_is_an_ascii_integer() {
        assert_eq!(decode_controller_epoch(b"5"), Ok(5));
        assert_eq!(decode_controller_epoch(b" 12\n"), Ok(12));
        assert_eq!(encode_controller_epoch(7), b"7".to_vec());
        assert!(matches!(
            decode_controller_epoch(b"{\"epoch\":1}"),
            Err(ZkDataError::NotAnInteger { .. })
        ));
        assert!(decode_controller_epoch(&[0xff, 0xfe]).is_err());
    }
}
