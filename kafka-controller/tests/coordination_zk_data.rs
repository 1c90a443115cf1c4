//! Znode contents from a peer or an operator: arbitrary bytes never panic the decoders, and
//! every decoded value re-encodes to JSON that decodes to the same value (unknown fields kept).

use kafka_controller::zk_data::{
    decode_controller_epoch, BrokerRegistration, ClusterId, ControllerZNode, IsrChangeNotification,
    PartitionStateZNode, PreferredReplicaElection, ReassignPartitions, TopicAssignment,
    TopicConfig,
};
use proptest::prelude::*;

macro_rules! round_trips {
    ($ty:ty, $bytes:expr) => {
        if let Ok(v) = <$ty>::from_json($bytes) {
            let again = <$ty>::from_json(&v.to_json().expect("encodes")).expect("re-decodes");
            assert_eq!(again, v);
        }
    };
}

fn all_decoders(bytes: &[u8]) {
    round_trips!(ControllerZNode, bytes);
    round_trips!(BrokerRegistration, bytes);
    round_trips!(TopicAssignment, bytes);
    round_trips!(PartitionStateZNode, bytes);
    round_trips!(ReassignPartitions, bytes);
    round_trips!(PreferredReplicaElection, bytes);
    round_trips!(IsrChangeNotification, bytes);
    round_trips!(TopicConfig, bytes);
    round_trips!(ClusterId, bytes);
    let _ = decode_controller_epoch(bytes);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn malformed_znode_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        all_decoders(&bytes);
    }

    #[test]
    fn json_like_znode_text_never_panics(text in r#"[{}\[\]":,0-9a-z_ -]{0,120}"#) {
        all_decoders(text.as_bytes());
    }

    #[test]
    fn partition_state_with_unknown_fields_round_trips(
        leader in -1i32..10, epoch in 0i32..1000, isr in proptest::collection::vec(0i32..10, 0..5),
        extra in "[a-z]{1,8}",
    ) {
        let json = format!(
            r#"{{"version":1,"leader":{leader},"leader_epoch":{epoch},"controller_epoch":1,"isr":{isr:?},"x_{extra}":[1]}}"#
        );
        let s = PartitionStateZNode::from_json(json.as_bytes()).expect("decodes");
        let key = format!("x_{extra}");
        prop_assert!(s.extra.contains_key(&key));
        let out = String::from_utf8(s.to_json().expect("encodes")).expect("utf8");
        let needle = format!(r#""x_{extra}":[1]"#);
        prop_assert!(out.contains(&needle));
    }
}

#[test]
fn deeply_nested_json_is_an_error_not_a_stack_overflow() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    all_decoders(deep.as_bytes());
    assert!(PartitionStateZNode::from_json(deep.as_bytes()).is_err());
}
