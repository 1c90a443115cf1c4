//! The discovery state machines driven by hand with a fake clock: epochs are fixed only with a
//! quorum (Z1, Z5), learners never go back to a lower epoch (Z1), and silence sends either side
//! back to LOOKING (Z6).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use zab_core::discovery::{
    epoch_zxid, i32_payload, packet_type, DiscoveryAction, LeaderDiscovery, LearnerDiscovery,
    LearnerInfo, QuorumPacket, Timing, LEARNER_PROTOCOL_VERSION,
};
use zab_core::store::PersistedEpochs;
use zab_core::{QuorumMaj, ServerId};

fn timing() -> Timing {
    Timing::new(Duration::from_millis(100), 10, 5)
}

fn epochs(accepted: i64, current: i64, zxid: i64) -> PersistedEpochs {
    PersistedEpochs {
        current_epoch: current,
        accepted_epoch: accepted,
        last_zxid: zxid,
    }
}

fn leader(now: Instant, own: PersistedEpochs) -> LeaderDiscovery {
    LeaderDiscovery::new(
        now,
        ServerId(3),
        Arc::new(QuorumMaj::with_ids([1, 2, 3, 4, 5], [])),
        own,
        timing(),
    )
}

fn follower_info(sid: i64, accepted: i64) -> QuorumPacket {
    let info = LearnerInfo {
        sid,
        protocol_version: LEARNER_PROTOCOL_VERSION,
        config_version: 0,
    };
    QuorumPacket::with_data(
        packet_type::FOLLOWERINFO,
        epoch_zxid(accepted),
        info.encode(),
    )
}

fn ack_epoch(current: i32, zxid: i64) -> QuorumPacket {
    QuorumPacket::with_data(packet_type::ACKEPOCH, zxid, i32_payload(current))
}

fn drain<F: FnMut() -> Option<DiscoveryAction>>(mut f: F) -> Vec<DiscoveryAction> {
    std::iter::from_fn(&mut f).collect()
}

fn sent(actions: &[DiscoveryAction], kind: i32) -> Vec<(ServerId, i64)> {
    actions
        .iter()
        .filter_map(|a| match a {
            DiscoveryAction::Send { to, packet } if packet.kind == kind => Some((*to, packet.zxid)),
            _ => None,
        })
        .collect()
}

#[test]
fn z1_leader_proposes_max_accepted_plus_one_only_once_a_quorum_answered() {
    let t = Instant::now();
    let mut l = leader(t, epochs(4, 4, 0));
    l.handle_packet(t, ServerId(1), follower_info(1, 7));
    let a = drain(|| l.poll_action());
    assert!(
        sent(&a, packet_type::LEADERINFO).is_empty(),
        "2 of 5 is no quorum"
    );
    assert_eq!(l.proposed_epoch(), None);
    l.handle_packet(t, ServerId(2), follower_info(2, 5));
    let a = drain(|| l.poll_action());
    assert_eq!(a.first(), Some(&DiscoveryAction::PersistAcceptedEpoch(8)));
    let mut to = sent(&a, packet_type::LEADERINFO);
    to.sort();
    assert_eq!(to, vec![(ServerId(1), 8 << 32), (ServerId(2), 8 << 32)]);
}

#[test]
fn z5_leader_establishes_only_with_a_quorum_of_newleader_acks_and_refuses_a_learner_ahead() {
    let t = Instant::now();
    let mut l = leader(t, epochs(1, 1, (1 << 32) | 5));
    for sid in [1, 2, 4] {
        l.handle_packet(t, ServerId(sid), follower_info(sid, 1));
    }
    drain(|| l.poll_action());
    // Learner 4 is ahead of the leader: refused and closed.
    l.handle_packet(t, ServerId(4), ack_epoch(1, (1 << 32) | 9));
    let a = drain(|| l.poll_action());
    assert!(a.contains(&DiscoveryAction::Close(ServerId(4))));
    l.handle_packet(t, ServerId(1), ack_epoch(1, 1 << 32));
    assert!(drain(|| l.poll_action())
        .iter()
        .all(|a| !matches!(a, DiscoveryAction::PersistCurrentEpoch(_))));
    l.handle_packet(t, ServerId(2), ack_epoch(0, 0));
    let a = drain(|| l.poll_action());
    assert!(a.contains(&DiscoveryAction::PersistCurrentEpoch(2)));
    assert_eq!(sent(&a, packet_type::NEWLEADER).len(), 2);
    l.handle_packet(t, ServerId(1), QuorumPacket::new(packet_type::ACK, 2 << 32));
    assert!(!l.is_established());
    l.handle_packet(t, ServerId(2), QuorumPacket::new(packet_type::ACK, 2 << 32));
    let a = drain(|| l.poll_action());
    assert!(l.is_established());
    assert!(a.contains(&DiscoveryAction::Established { epoch: 2 }));
    assert_eq!(sent(&a, packet_type::UPTODATE).len(), 2);
}

#[test]
fn z1_leader_without_a_quorum_within_init_limit_gives_up() {
    let t = Instant::now();
    let mut l = leader(t, epochs(0, 0, 0));
    l.handle_packet(t, ServerId(1), follower_info(1, 0));
    drain(|| l.poll_action());
    let deadline = l.next_deadline().expect("deadline");
    assert_eq!(deadline, t + Duration::from_secs(1));
    l.handle_tick(deadline);
    let a = drain(|| l.poll_action());
    assert!(matches!(a.last(), Some(DiscoveryAction::Abandon { .. })));
}

#[test]
fn z6_leader_steps_down_when_its_followers_fall_silent() {
    let t = Instant::now();
    let mut l = LeaderDiscovery::new(
        t,
        ServerId(3),
        Arc::new(QuorumMaj::with_ids([1, 2, 3], [])),
        epochs(0, 0, 0),
        timing(),
    );
    l.handle_packet(t, ServerId(1), follower_info(1, 0));
    l.handle_packet(t, ServerId(1), ack_epoch(0, 0));
    l.handle_packet(t, ServerId(1), QuorumPacket::new(packet_type::ACK, 1 << 32));
    assert!(l.is_established());
    drain(|| l.poll_action());
    // Pings go out every half tick; without answers for syncLimit ticks the leader leaves.
    let mut now = t;
    let mut abandoned = false;
    for _ in 0..20 {
        now = l.next_deadline().expect("deadline");
        l.handle_tick(now);
        if drain(|| l.poll_action())
            .iter()
            .any(|a| matches!(a, DiscoveryAction::Abandon { .. }))
        {
            abandoned = true;
            break;
        }
    }
    assert!(abandoned);
    let silent = now - t;
    assert!(silent > Duration::from_millis(500) && silent <= Duration::from_millis(600));
}

fn learner(now: Instant, own: PersistedEpochs) -> LearnerDiscovery {
    LearnerDiscovery::new(now, ServerId(1), ServerId(3), false, 0, own, timing())
}

#[test]
fn z1_learner_sends_followerinfo_and_refuses_an_epoch_below_its_accepted_epoch() {
    let t = Instant::now();
    let mut f = learner(t, epochs(5, 4, 0));
    let a = drain(|| f.poll_action());
    assert_eq!(
        sent(&a, packet_type::FOLLOWERINFO),
        vec![(ServerId(3), 5 << 32)]
    );
    f.handle_packet(
        t,
        ServerId(3),
        QuorumPacket::with_data(packet_type::LEADERINFO, 4 << 32, i32_payload(0x10000)),
    );
    let a = drain(|| f.poll_action());
    assert!(matches!(a.last(), Some(DiscoveryAction::Abandon { .. })));
    assert!(sent(&a, packet_type::ACKEPOCH).is_empty());
}

#[test]
fn z1_learner_persists_the_new_epoch_before_acknowledging_it_then_syncs() {
    let t = Instant::now();
    let mut f = learner(t, epochs(2, 2, (2 << 32) | 3));
    drain(|| f.poll_action());
    f.handle_packet(
        t,
        ServerId(3),
        QuorumPacket::with_data(packet_type::LEADERINFO, 3 << 32, i32_payload(0x10000)),
    );
    let a = drain(|| f.poll_action());
    assert_eq!(a[0], DiscoveryAction::PersistAcceptedEpoch(3));
    match &a[1] {
        DiscoveryAction::Send { packet, .. } => {
            assert_eq!(packet.kind, packet_type::ACKEPOCH);
            assert_eq!(packet.zxid, (2 << 32) | 3);
            assert_eq!(packet.data, Some(i32_payload(2)));
        }
        other => panic!("expected ACKEPOCH, got {other:?}"),
    }
    f.handle_packet(t, ServerId(3), QuorumPacket::new(packet_type::DIFF, 0));
    f.handle_packet(
        t,
        ServerId(3),
        QuorumPacket::with_data(packet_type::NEWLEADER, 3 << 32, Bytes::new()),
    );
    let a = drain(|| f.poll_action());
    assert_eq!(a[0], DiscoveryAction::PersistCurrentEpoch(3));
    assert_eq!(sent(&a, packet_type::ACK), vec![(ServerId(3), 3 << 32)]);
    f.handle_packet(t, ServerId(3), QuorumPacket::new(packet_type::UPTODATE, -1));
    let a = drain(|| f.poll_action());
    assert!(a.contains(&DiscoveryAction::Established { epoch: 3 }));
    // PINGs are echoed.
    f.handle_packet(t, ServerId(3), QuorumPacket::new(packet_type::PING, 77));
    assert_eq!(
        sent(&drain(|| f.poll_action()), packet_type::PING),
        vec![(ServerId(3), 77)]
    );
}

#[test]
fn z6_learner_leaves_a_leader_silent_for_sync_limit_ticks() {
    let t = Instant::now();
    let mut f = learner(t, epochs(0, 0, 0));
    for p in [
        QuorumPacket::with_data(packet_type::LEADERINFO, 1 << 32, i32_payload(0x10000)),
        QuorumPacket::new(packet_type::DIFF, 0),
        QuorumPacket::new(packet_type::NEWLEADER, 1 << 32),
        QuorumPacket::new(packet_type::UPTODATE, -1),
    ] {
        f.handle_packet(t, ServerId(3), p);
    }
    assert!(f.is_established());
    drain(|| f.poll_action());
    let d = f.next_deadline().expect("deadline");
    assert_eq!(d, t + Duration::from_millis(500));
    f.handle_tick(d);
    let a = drain(|| f.poll_action());
    assert!(a.contains(&DiscoveryAction::Close(ServerId(3))));
    assert!(matches!(a.last(), Some(DiscoveryAction::Abandon { .. })));
}

#[test]
fn a_connection_lost_mid_snapshot_leaves_the_learner_as_it_was() {
    let t = Instant::now();
    let mut f = learner(t, epochs(2, 2, 2 << 32));
    drain(|| f.poll_action());
    f.handle_packet(
        t,
        ServerId(3),
        QuorumPacket::with_data(packet_type::LEADERINFO, 3 << 32, i32_payload(0x10000)),
    );
    drain(|| f.poll_action());
    // Three of the five packets of a 3.5 MiB SNAP, then the connection goes.
    let snap = zab_core::txnlog::Snapshot {
        zxid: zab_core::Zxid::new(3, 9),
        data: vec![5u8; zab_core::broadcast::SNAP_CHUNK * 7 / 2].into(),
    };
    for p in zab_core::broadcast::snap_packets(&snap).take(3) {
        f.handle_packet(t, ServerId(3), p);
    }
    f.connection_lost(t);
    let a = drain(|| f.poll_action());
    assert!(
        a.iter().all(|a| matches!(
            a,
            DiscoveryAction::Close(_) | DiscoveryAction::Abandon { .. }
        )),
        "{a:?}"
    );
    assert!(matches!(a.last(), Some(DiscoveryAction::Abandon { .. })));
}
