//! Bounded fuzzing of the quorum packet decoder and of the sync / broadcast cores behind it
//! (bolero, like `election_fuzz.rs`): arbitrary bytes and mutated valid packets of every type
//! used by discovery, sync and broadcast never panic and never allocate without bound, and
//! whatever decodes, fed to the leader's and the learner's cores, never makes them panic. A
//! learner claiming an impossible epoch or zxid is refused with a typed error and dropped.

use std::alloc::System;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use zab_core::broadcast::{LeaderBroadcast, LearnerBroadcast, LearnerOptions};
use zab_core::discovery::{
    check_learner_claim, i32_payload, packet_type, DiscoveryAction, LeaderDiscovery,
    LearnerDiscovery, LearnerInfo, PacketError, QuorumPacket, Timing, LEARNER_PROTOCOL_VERSION,
    MAX_PACKET_DATA,
};
use zab_core::store::PersistedEpochs;
use zab_core::{QuorumMaj, QuorumVerifier, ServerId, Zxid};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The allocation counter is process-wide: the tests of this file run one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// No decode of a packet may allocate more than its own size plus this slack.
const ALLOC_SLACK: usize = 64 * 1024;

fn info(sid: i64) -> Bytes {
    LearnerInfo {
        sid,
        protocol_version: LEARNER_PROTOCOL_VERSION,
        config_version: 0,
    }
    .encode()
}

/// One valid packet of every type sync and broadcast use.
fn valid_packets() -> Vec<QuorumPacket> {
    use packet_type::*;
    let z = Zxid::new(2, 3).0;
    vec![
        QuorumPacket::with_data(FOLLOWERINFO, 1 << 32, info(1)),
        QuorumPacket::with_data(OBSERVERINFO, 1 << 32, info(100)),
        QuorumPacket::with_data(LEADERINFO, 2 << 32, i32_payload(LEARNER_PROTOCOL_VERSION)),
        QuorumPacket::with_data(ACKEPOCH, z, i32_payload(1)),
        QuorumPacket::new(DIFF, z),
        QuorumPacket::new(TRUNC, z),
        QuorumPacket::with_data(SNAP, z, Bytes::from_static(b"snapshot")),
        QuorumPacket::with_data(PROPOSAL, z, Bytes::from_static(b"txn")),
        QuorumPacket::new(COMMIT, z),
        QuorumPacket::with_data(NEWLEADER, 2 << 32, Bytes::from_static(b"version=0")),
        QuorumPacket::new(ACK, z),
        QuorumPacket::new(UPTODATE, -1),
        QuorumPacket::with_data(INFORM, z, Bytes::from_static(b"txn")),
        QuorumPacket::with_data(REQUEST, -1, Bytes::from_static(b"write")),
        QuorumPacket::new(SYNC, -1),
        QuorumPacket::with_data(PING, z, Bytes::new()),
    ]
}

/// Decodes every record of `bytes`, checking the allocation bound; returns what decoded.
fn decode_all(bytes: &[u8]) -> Vec<QuorumPacket> {
    let mut buf = BytesMut::from(bytes);
    let mut out = Vec::new();
    loop {
        let region = Region::new(GLOBAL);
        let r = QuorumPacket::decode(&mut buf);
        let allocated = region.change().bytes_allocated;
        assert!(
            allocated <= bytes.len() + ALLOC_SLACK,
            "decoding {} bytes allocated {allocated}",
            bytes.len()
        );
        match r {
            Ok(Some(p)) => {
                assert!(p.data.as_ref().is_none_or(|d| d.len() <= MAX_PACKET_DATA));
                out.push(p);
            }
            Ok(None) | Err(_) => return out,
        }
    }
}

/// Feeds packets to every core that reads them; none may panic.
fn feed_cores(packets: &[QuorumPacket]) {
    let qv: Arc<dyn QuorumVerifier> = Arc::new(QuorumMaj::with_ids([1, 2, 3], [100]));
    let now = Instant::now();
    let own = PersistedEpochs {
        current_epoch: 1,
        accepted_epoch: 1,
        last_zxid: Zxid::new(1, 5).0,
    };
    let timing = Timing::default();
    let mut leader = LeaderDiscovery::new(now, ServerId(3), qv.clone(), own, timing);
    let mut lb = LeaderBroadcast::new(ServerId(3), qv.clone(), 2, Zxid::new(1, 5));
    lb.add_learner(ServerId(1));
    let mut learner = LearnerDiscovery::new(now, ServerId(1), ServerId(3), false, 0, own, timing);
    learner.set_broadcast_options(LearnerOptions::default().with_follow_broadcast(true));
    let mut lone =
        LearnerBroadcast::new(ServerId(3), false, 2, Zxid::new(1, 5), Default::default());
    for (i, p) in packets.iter().enumerate() {
        let t = now + Duration::from_millis(i as u64);
        let from = ServerId([1, 2, 100][i % 3]);
        leader.handle_packet(t, from, p.clone());
        lb.handle_packet(from, p.clone());
        learner.handle_packet(t, ServerId(3), p.clone());
        lone.handle_packet(p.clone());
        leader.handle_tick(t);
        learner.handle_tick(t);
        while leader.poll_action().is_some() {}
        while lb.poll_action().is_some() {}
        while learner.poll_action().is_some() {}
        while lone.poll_action().is_some() {}
    }
}

#[test]
fn fuzz_arbitrary_bytes_never_panic_nor_allocate_without_bound() {
    let _serial = serial();
    bolero::check!().for_each(|bytes: &[u8]| {
        let packets = decode_all(bytes);
        feed_cores(&packets);
    });
}

#[test]
fn fuzz_mutated_valid_packets_never_panic_nor_allocate_without_bound() {
    let _serial = serial();
    let valid = valid_packets();
    bolero::check!()
        .with_type::<(Vec<u8>, Vec<(u16, u8)>, u16)>()
        .for_each(|(order, flips, cut)| {
            let mut bytes = BytesMut::new();
            for i in order.iter().take(32) {
                valid[usize::from(*i) % valid.len()].encode(&mut bytes);
            }
            let mut bytes = bytes.to_vec();
            for (at, x) in flips.iter().take(16) {
                if !bytes.is_empty() {
                    let at = usize::from(*at) % bytes.len();
                    bytes[at] ^= *x;
                }
            }
            if !bytes.is_empty() {
                let keep = bytes.len() - usize::from(*cut) % bytes.len();
                bytes.truncate(keep);
            }
            let packets = decode_all(&bytes);
            feed_cores(&packets);
        });
}

#[test]
fn every_valid_packet_round_trips() {
    let _serial = serial();
    for p in valid_packets() {
        let mut b = BytesMut::new();
        p.encode(&mut b);
        assert_eq!(QuorumPacket::decode(&mut b), Ok(Some(p)));
        assert!(b.is_empty());
    }
}

fn impossible(r: Result<(), PacketError>) -> bool {
    matches!(r, Err(PacketError::Impossible { .. }))
}

#[test]
fn a_learner_claiming_an_impossible_epoch_or_zxid_is_refused_with_a_typed_error() {
    let _serial = serial();
    use packet_type::*;
    // An accepted epoch that leaves no room for the next one, a negative one, a counter.
    for zxid in [0x7fff_ffffi64 << 32, -1i64 << 32, (1 << 32) | 7] {
        let p = QuorumPacket::with_data(FOLLOWERINFO, zxid, info(1));
        assert!(impossible(check_learner_claim(&p, 1, None)), "{zxid:#x}");
    }
    // A LearnerInfo naming another server.
    let p = QuorumPacket::with_data(FOLLOWERINFO, 1 << 32, info(2));
    assert!(impossible(check_learner_claim(&p, 1, None)));
    // ACKEPOCH: a current epoch or a last zxid beyond the epoch being established.
    let p = QuorumPacket::with_data(ACKEPOCH, Zxid::new(9, 1).0, i32_payload(1));
    assert!(impossible(check_learner_claim(&p, 1, Some(2))));
    let p = QuorumPacket::with_data(ACKEPOCH, Zxid::new(1, 1).0, i32_payload(7));
    assert!(impossible(check_learner_claim(&p, 1, Some(2))));
    let p = QuorumPacket::with_data(ACKEPOCH, -5, i32_payload(1));
    assert!(impossible(check_learner_claim(&p, 1, Some(2))));
    // The ordinary claims pass.
    let p = QuorumPacket::with_data(FOLLOWERINFO, 1 << 32, info(1));
    assert_eq!(check_learner_claim(&p, 1, None), Ok(()));
    let p = QuorumPacket::with_data(ACKEPOCH, Zxid::new(1, 1).0, i32_payload(-1));
    assert_eq!(check_learner_claim(&p, 1, Some(2)), Ok(()));

    // The leader drops such a learner and carries on with the others (Z1): the huge
    // epoch never becomes the proposed one.
    let qv: Arc<dyn QuorumVerifier> = Arc::new(QuorumMaj::with_ids([1, 2, 3], []));
    let now = Instant::now();
    let own = PersistedEpochs {
        current_epoch: 1,
        accepted_epoch: 1,
        last_zxid: Zxid::new(1, 5).0,
    };
    let mut leader = LeaderDiscovery::new(now, ServerId(3), qv, own, Timing::default());
    let evil = QuorumPacket::with_data(FOLLOWERINFO, 0x7fff_ffffi64 << 32, info(1));
    leader.handle_packet(now, ServerId(1), evil);
    let actions: Vec<_> = std::iter::from_fn(|| leader.poll_action()).collect();
    assert_eq!(actions, [DiscoveryAction::Close(ServerId(1))]);
    assert_eq!(leader.proposed_epoch(), None);
    let good = QuorumPacket::with_data(FOLLOWERINFO, 1 << 32, info(2));
    leader.handle_packet(now, ServerId(2), good);
    assert_eq!(leader.proposed_epoch(), Some(2));
}
