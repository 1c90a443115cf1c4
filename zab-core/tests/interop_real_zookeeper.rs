//! Our peer (TCP transport) in one ensemble with two real ZooKeeper 3.8 servers started by the
//! test harness.
//!
//! With our peer as sid 1 (real servers 2 and 3):
//! - ZooKeeper's election notifications decode here and ours are accepted there: our peer
//!   decides FOLLOWING the leader the real servers report with `srvr`, and the real leader's log
//!   names our sid as a notification sender;
//! - our learner speaks discovery with a real leader (FOLLOWERINFO → LEADERINFO → ACKEPOCH →
//!   DIFF or SNAP (the snapshot body is skipped) / NEWLEADER → ACK → UPTODATE → ACK, PING
//!   echoes) and the epoch is established;
//! - after the real leader is killed, our vote goes where ZooKeeper's rules send it (the
//!   surviving real server: epoch and zxid at least ours, larger sid) and that server leads
//!   with our acknowledgement, since it needs us for a quorum.
//!
//! With our peer as sid 3 (real servers 1 and 2): every vote goes to us, and both real servers
//! complete discovery and synchronisation with our leader and serve as its followers.
//!
//! Fails (not skips) when `CI` is set and ZooKeeper is missing.

#![cfg(feature = "tokio")]

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ha_testkit::{ExternalServer, ServerMode, ZkEnsemble};
use tokio::net::TcpListener;
use zab_core::discovery::Timing;
use zab_core::peer::{PeerConfig, PeerHandle, QuorumPeer};
use zab_core::store::MemoryElectionStore;
use zab_core::transport::{PeerAddrs, TcpConfig, TcpTransport};
use zab_core::{ElectionConfig, LearnerType, QuorumMaj, ServerEntry, ServerId, ServerState};

const TICK: Duration = Duration::from_millis(200);

/// The tests of this file start JVMs: run them one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// Waits until `f` returns `Some`, polling every 50 ms, for at most `timeout`.
async fn eventually<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn mode(zk: &ZkEnsemble, sid: u64) -> Option<ServerMode> {
    zk.srvr(sid).ok().map(|s| s.mode)
}

/// Starts real ZooKeeper servers `real` (consecutive sids) and our peer `ours` in one ensemble.
async fn mixed_ensemble(
    ours: u64,
    real: [u64; 2],
) -> (ZkEnsemble, PeerHandle, MemoryElectionStore) {
    // Logs of our peer, shown for a failing run (RUST_LOG=zab_core=debug for more).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "zab_core=info".into()),
        )
        .with_test_writer()
        .try_init();
    let election = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let quorum = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (e_port, q_port) = (
        election.local_addr().unwrap().port(),
        quorum.local_addr().unwrap().port(),
    );
    let zk = tokio::task::spawn_blocking(move || {
        ZkEnsemble::builder()
            .servers(2)
            .first_sid(real[0])
            .tick_time(TICK)
            .external(ExternalServer::new(ours, "127.0.0.1", q_port, e_port))
            .wait_for_quorum(false)
            .start()
    })
    .await
    .unwrap()
    .expect("start two real ZooKeeper servers");

    // The same ensemble table as the real servers' zoo.cfg, so our config string parses there.
    let mut members = BTreeMap::new();
    let mut peers = HashMap::new();
    members.insert(
        ServerId(ours as i64),
        ServerEntry::participant(format!("127.0.0.1:{q_port}:{e_port}")),
    );
    for sid in real {
        let p = zk.ports(sid).unwrap();
        members.insert(
            ServerId(sid as i64),
            ServerEntry::participant(format!("127.0.0.1:{}:{}", p.quorum, p.election)),
        );
        peers.insert(
            ServerId(sid as i64),
            PeerAddrs {
                election: addr(p.election),
                quorum: addr(p.quorum),
            },
        );
    }
    let me = ServerId(ours as i64);
    let tcp =
        TcpTransport::start(TcpConfig::new(me, addr(e_port), peers), election, quorum).unwrap();
    let cfg = PeerConfig::new(
        me,
        LearnerType::Participant,
        Arc::new(QuorumMaj::new(members, 0)),
    )
    .with_election(ElectionConfig::default())
    .with_timing(Timing::new(TICK, 10, 5))
    .with_connect_grace(Duration::from_millis(100));
    let store = MemoryElectionStore::default();
    let peer = QuorumPeer::new(cfg, tcp, store.clone())
        .await
        .unwrap()
        .spawn();
    (zk, peer, store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_3_8_interop_our_peer_follows_the_real_leader_and_reelects_by_zookeeper_rules() {
    if !ha_testkit::require_zookeeper("interop_real_zookeeper")
        .expect("ZooKeeper is required when CI is set")
    {
        return;
    }
    let _serial = SERIAL.lock().await;
    let (mut zk, peer, store) = mixed_ensemble(1, [2, 3]).await;

    // 1-3. Our peer follows the leader the real servers report, with the epoch established
    // through discovery with it. (Which real server leads depends on which JVM came up first:
    // with only one of them up, that one and our peer form the quorum, so our first decision
    // may be replaced once both are up.)
    let (real_leader, est) = eventually(Duration::from_secs(60), || {
        let st = peer.current();
        let leader = [2u64, 3]
            .into_iter()
            .find(|s| mode(&zk, *s) == Some(ServerMode::Leader))?;
        let ours = st.state == ServerState::Following
            && st.leader == Some(ServerId(leader as i64))
            && st.epoch.is_some();
        ours.then_some((leader, st))
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "our peer does not follow a real leader: {:?}",
            peer.current()
        )
    });
    let other = if real_leader == 3 { 2 } else { 3 };
    eventually(Duration::from_secs(60), || {
        (mode(&zk, other) == Some(ServerMode::Follower)).then_some(())
    })
    .await
    .expect("the other real server follows");
    let epoch = est.epoch.unwrap_or_default();
    assert_eq!(store.snapshot().current_epoch, epoch);
    // The real leader logged our notifications: it decoded them and named our sid.
    assert!(
        zk.log(real_leader).contains("n.sid:1"),
        "the real leader never logged a notification from sid 1"
    );

    // 4. Kill the real leader. ZooKeeper's order (peerEpoch, zxid, sid) sends every vote to the
    // other real server: its epoch and zxid are at least ours and its sid is larger.
    zk.kill(real_leader).expect("kill the real leader");
    let after = peer
        .wait_for(Duration::from_secs(60), |s| {
            s.leader == Some(ServerId(other as i64)) && s.epoch.is_some()
        })
        .await;
    let Some(after) = after else {
        panic!(
            "our peer does not follow server {other} in a new epoch: {:?}\n--- server {other} log ---\n{}",
            peer.current(),
            zk.log(other)
        );
    };
    assert_eq!(after.state, ServerState::Following);
    assert!(after.epoch.unwrap() > epoch);
    // The surviving real server can only lead with our acknowledgement (2 of 3 voters).
    let m = eventually(Duration::from_secs(30), || {
        (mode(&zk, other) == Some(ServerMode::Leader)).then_some(())
    })
    .await;
    assert!(
        m.is_some(),
        "the surviving real server leads with our peer in its quorum"
    );
    drop(peer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_3_8_interop_real_servers_follow_our_leader() {
    if !ha_testkit::require_zookeeper("interop_real_zookeeper")
        .expect("ZooKeeper is required when CI is set")
    {
        return;
    }
    let _serial = SERIAL.lock().await;
    // Our peer has the largest sid: with equal epochs and zxids every vote goes to it, and the
    // real servers run discovery and synchronisation with our leader (FOLLOWERINFO, LEADERINFO,
    // ACKEPOCH, DIFF, NEWLEADER, ACK, UPTODATE, PINGs) before they serve as followers.
    let (zk, peer, store) = mixed_ensemble(3, [1, 2]).await;
    let led = peer
        .wait_for(Duration::from_secs(60), |s| s.is_established_leader())
        .await
        .expect("our peer leads an established epoch");
    assert_eq!(led.leader, Some(ServerId(3)));
    let epoch = led.epoch.unwrap();
    assert_eq!(store.snapshot().current_epoch, epoch);
    for sid in [1u64, 2] {
        let m = eventually(Duration::from_secs(30), || {
            (mode(&zk, sid) == Some(ServerMode::Follower)).then_some(())
        })
        .await;
        assert!(
            m.is_some(),
            "real server {sid} does not serve as our follower:\n{}",
            zk.log(sid)
        );
    }
    // They stay with us across several heartbeat periods (syncLimit * tickTime = 1 s).
    tokio::time::sleep(TICK * 8).await;
    assert_eq!(peer.current().epoch, Some(epoch));
    for sid in [1u64, 2] {
        assert_eq!(mode(&zk, sid), Some(ServerMode::Follower));
    }
}
