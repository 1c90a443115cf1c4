//! The election notification codec (ZooKeeper's `FastLeaderElection.buildMsg` layout): layouts, bad input, and a bounded fuzz run.

use proptest::prelude::*;
use zab_core::notification::{parse_config_version, DecodeError, HEADER_LEN, LEGACY_LEN};
use zab_core::{Notification, ServerId, ServerState, Zxid};

const CONFIG: &str = "server.1=127.0.0.1:28881:38881:participant\n\
                      server.2=127.0.0.1:28882:38882:participant\n\
                      server.3=127.0.0.1:28883:38883:participant\nversion=0";

fn sample() -> Notification {
    Notification {
        state: ServerState::Following,
        leader: ServerId(3),
        zxid: Zxid::new(1, 5),
        election_epoch: 7,
        peer_epoch: 2,
        version: 2,
        config: Some(CONFIG.to_owned()),
    }
}

fn header(state: i32, leader: i64, zxid: i64, round: i64) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&state.to_be_bytes());
    b.extend_from_slice(&leader.to_be_bytes());
    b.extend_from_slice(&zxid.to_be_bytes());
    b.extend_from_slice(&round.to_be_bytes());
    b
}

#[test]
fn version_2_round_trips_with_its_config() {
    let n = sample();
    let bytes = n.encode();
    assert_eq!(bytes.len(), HEADER_LEN + CONFIG.len());
    assert_eq!(&bytes[0..4], &1i32.to_be_bytes());
    assert_eq!(&bytes[36..40], &2i32.to_be_bytes());
    assert_eq!(Notification::decode(&bytes), Ok(n.clone()));
    assert_eq!(n.config_version(), Some(0));
}

#[test]
fn three_node_loopback_frame_is_182_bytes_like_zookeeper() {
    // In ZooKeeper's `buildMsg` layout a 3-node loopback config is 138 bytes, the payload 182.
    assert_eq!(CONFIG.len(), 138);
    assert_eq!(sample().encode().len(), 182);
}

#[test]
fn layout_28_bytes_derives_peer_epoch_from_zxid() {
    let b = header(0, 2, Zxid::new(5, 9).get(), 3);
    let n = Notification::decode(&b).unwrap();
    assert_eq!(n.peer_epoch, 5);
    assert_eq!(n.version, 0);
    assert_eq!(n.config, None);
    assert_eq!(n.state, ServerState::Looking);
}

#[test]
fn layout_40_bytes_is_version_0_without_config() {
    let mut b = header(2, 2, 0x100000001, 3);
    b.extend_from_slice(&4i64.to_be_bytes());
    b.extend_from_slice(&1i32.to_be_bytes());
    assert_eq!(b.len(), LEGACY_LEN);
    let n = Notification::decode(&b).unwrap();
    assert_eq!(
        (n.peer_epoch, n.version, n.state),
        (4, 0, ServerState::Leading)
    );
}

#[test]
fn no_config_encodes_the_40_byte_layout() {
    let n = Notification {
        config: None,
        ..sample()
    };
    let b = n.encode();
    assert_eq!(b.len(), LEGACY_LEN);
    let d = Notification::decode(&b).unwrap();
    assert_eq!((d.leader, d.peer_epoch, d.version), (n.leader, 2, 0));
}

#[test]
fn short_and_36_byte_messages_are_dropped() {
    assert_eq!(
        Notification::decode(&[0; 27]),
        Err(DecodeError::TooShort { len: 27 })
    );
    // 36 bytes: not a known layout, the version read underflows (as in ZooKeeper).
    assert!(matches!(
        Notification::decode(&[0; 36]),
        Err(DecodeError::Truncated { .. })
    ));
    // version 2 but no config length
    let mut b = header(0, 1, 0, 1);
    b.extend_from_slice(&0i64.to_be_bytes());
    b.extend_from_slice(&2i32.to_be_bytes());
    b.push(0);
    assert!(matches!(
        Notification::decode(&b),
        Err(DecodeError::Truncated { .. })
    ));
}

#[test]
fn bad_state_value_is_a_typed_error() {
    let mut b = sample().encode();
    b[0..4].copy_from_slice(&7i32.to_be_bytes());
    assert_eq!(
        Notification::decode(&b),
        Err(DecodeError::BadState { value: 7 })
    );
}

#[test]
fn negative_or_oversized_config_length_is_an_error() {
    let mut b = sample().encode();
    b[40..44].copy_from_slice(&(-1i32).to_be_bytes());
    assert!(matches!(
        Notification::decode(&b),
        Err(DecodeError::InvalidConfigLength { config_len: -1, .. })
    ));
    let len = b.len() as i32;
    b[40..44].copy_from_slice(&(len + 1).to_be_bytes());
    assert!(matches!(
        Notification::decode(&b),
        Err(DecodeError::InvalidConfigLength { .. })
    ));
    // within the frame size but past its end: truncated
    b[40..44].copy_from_slice(&len.to_be_bytes());
    assert!(matches!(
        Notification::decode(&b),
        Err(DecodeError::Truncated { .. })
    ));
}

#[test]
fn config_length_0_notification_decodes_as_no_config() {
    // ZooKeeper 3.8.0's WorkerReceiver dies on this message; ours reads it with no config.
    let mut b = header(0, 3, 0, 1);
    b.extend_from_slice(&0i64.to_be_bytes());
    b.extend_from_slice(&2i32.to_be_bytes());
    b.extend_from_slice(&0i32.to_be_bytes());
    let n = Notification::decode(&b).unwrap();
    assert_eq!(
        (n.leader, n.version, n.config.as_deref()),
        (ServerId(3), 2, None)
    );
}

#[test]
fn garbage_config_decodes_as_no_config() {
    for garbage in [
        &b"\xff\xfe\x00"[..],
        b"hello",
        b"server.x=1\nversion=0",
        b"version=zz",
    ] {
        let mut b = header(1, 3, 0, 1);
        b.extend_from_slice(&0i64.to_be_bytes());
        b.extend_from_slice(&2i32.to_be_bytes());
        b.extend_from_slice(&(garbage.len() as i32).to_be_bytes());
        b.extend_from_slice(garbage);
        let n = Notification::decode(&b).unwrap();
        assert_eq!(n.config, None, "{garbage:?}");
    }
    assert_eq!(parse_config_version(CONFIG), Some(0));
    assert_eq!(
        parse_config_version("server.1=a:1:2:participant\nversion=1a"),
        Some(0x1a)
    );
}

#[test]
fn fuzz_decode_never_panics_and_reencodes() {
    bolero::check!().for_each(|input: &[u8]| {
        if let Ok(n) = Notification::decode(input) {
            if n.config.is_some() {
                assert_eq!(Notification::decode(&n.encode()), Ok(n));
            }
        }
    });
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_field_round_trips(state in 0i32..4, leader: i64, zxid: i64, round: i64, pe: i64, v in 0i64..1000) {
        let n = Notification {
            state: ServerState::from_wire(state).unwrap(),
            leader: ServerId(leader),
            zxid: Zxid(zxid),
            election_epoch: round,
            peer_epoch: pe,
            version: 2,
            config: Some(format!("server.1=h:1:2:participant\nversion={v:x}")),
        };
        prop_assert_eq!(Notification::decode(&n.encode()), Ok(n));
    }
}
