//! `/brokers/ids/<id>`: a broker's ephemeral registration.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::ZkDataError;

/// The supported version range of one feature (registration version 5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureRange {
    /// Lowest supported version.
    pub min_version: i16,
    /// Highest supported version.
    pub max_version: i16,
    /// Fields this version does not know, written back unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A broker's registration (versions 1 to 5):
/// `{"version":4,"host":"h","port":9092,"endpoints":["PLAINTEXT://h:9092"],
/// "listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"jmx_port":-1,
/// "timestamp":"…","rack":"r1"}`. The broker epoch (KIP-380) is not in the JSON: it is the
/// znode's `czxid`. Unknown fields are kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    /// Format version.
    pub version: i32,
    /// Host of the first PLAINTEXT listener, or null when there is none (v2+).
    #[serde(default)]
    pub host: Option<String>,
    /// Port of that listener, or -1.
    #[serde(default = "minus_one")]
    pub port: i32,
    /// Listener endpoints as `LISTENER://host:port` (v2+).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<String>,
    /// Listener name → security protocol (v4+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listener_security_protocol_map: Option<BTreeMap<String, String>>,
    /// JMX port or -1.
    #[serde(default = "minus_one")]
    pub jmx_port: i32,
    /// Registration time in ms since the epoch, as a string.
    #[serde(default)]
    pub timestamp: String,
    /// The broker's rack (v3+), absent when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack: Option<String>,
    /// Supported features (v5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<BTreeMap<String, FeatureRange>>,
    /// Fields this version does not know, written back unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn minus_one() -> i32 {
    -1
}

impl BrokerRegistration {
    /// A version-4 registration with one PLAINTEXT listener.
    pub fn plaintext(host: &str, port: u16, rack: Option<&str>, timestamp_ms: i64) -> Self {
        BrokerRegistration {
            version: 4,
            host: Some(host.to_string()),
            port: i32::from(port),
            endpoints: vec![format!("PLAINTEXT://{host}:{port}")],
            listener_security_protocol_map: Some(BTreeMap::from([(
                "PLAINTEXT".to_string(),
                "PLAINTEXT".to_string(),
            )])),
            jmx_port: -1,
            timestamp: timestamp_ms.to_string(),
            rack: rack.map(str::to_string),
            features: None,
            extra: Map::new(),
        }
    }

    /// Decodes the znode's JSON.
    pub fn from_json(bytes: &[u8]) -> Result<BrokerRegistration, ZkDataError> {
        super::error::decode("/brokers/ids/<id>", bytes)
    }

    /// Encodes the znode's JSON.
    pub fn to_json(&self) -> Result<Vec<u8>, ZkDataError> {
        super::error::encode("/brokers/ids/<id>", self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_registration_v4_decodes_and_keeps_unknown_fields() {
        let json = br#"{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://h:9092"],"jmx_port":-1,"features":{},"host":"h","timestamp":"1700000000000","port":9092,"version":4,"rack":"r1","future_field":{"x":1}}"#;
        let b = BrokerRegistration::from_json(json).expect("decodes");
        assert_eq!(b.host.as_deref(), Some("h"));
        assert_eq!(b.port, 9092);
        assert_eq!(b.rack.as_deref(), Some("r1"));
        assert_eq!(b.endpoints, vec!["PLAINTEXT://h:9092".to_string()]);
        assert_eq!(
            b.extra.get("future_field"),
            Some(&serde_json::json!({"x":1}))
        );
        let again =
            BrokerRegistration::from_json(&b.to_json().expect("encode")).expect("re-decode");
        assert_eq!(again, b);
    }

    #[test]
    fn broker_registration_v1_has_only_host_and_port() {
        let json = br#"{"jmx_port":-1,"timestamp":"1","host":"a","version":1,"port":9092}"#;
        let b = BrokerRegistration::from_json(json).expect("decodes");
        assert!(b.endpoints.is_empty() && b.rack.is_none());
        let plain = BrokerRegistration::plaintext("h", 9092, None, 5);
        assert_eq!(plain.endpoints, vec!["PLAINTEXT://h:9092".to_string()]);
    }
}
