//! Our peer (sid 1, TCP transport) in one ensemble with two real ZooKeeper 3.8 servers (sids 2
//! and 3) started by the test harness.
//!
//! What this proves:
//! - ZooKeeper's election notifications decode here and ours are accepted there: our peer
//!   decides FOLLOWING the leader the real servers report with `srvr`, and their logs name our
//!   sid as a notification sender;
//! - our learner speaks discovery with a real leader (FOLLOWERINFO → LEADERINFO → ACKEPOCH →
//!   DIFF/NEWLEADER → ACK → UPTODATE → ACK, PING echoes) and the epoch is established;
//! - after the real leader is killed, our vote goes where ZooKeeper's rules send it (the
//!   surviving real server: epoch and zxid at least ours, larger sid) and that server leads with our
//!   acknowledgement, since it needs us for a quorum.
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
use zab_core::peer::{PeerConfig, QuorumPeer};
use zab_core::store::MemoryElectionStore;
use zab_core::transport::{PeerAddrs, TcpConfig, TcpTransport};
use zab_core::{ElectionConfig, LearnerType, QuorumMaj, ServerEntry, ServerId, ServerState};

const TICK: Duration = Duration::from_millis(200);

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_3_8_interop_our_peer_follows_the_real_leader_and_reelects_by_zookeeper_rules() {
    if !ha_testkit::require_zookeeper("interop_real_zookeeper")
        .expect("ZooKeeper is required when CI is set")
    {
        return;
    }
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
    let mut zk = tokio::task::spawn_blocking(move || {
        ZkEnsemble::builder()
            .servers(2)
            .first_sid(2)
            .tick_time(TICK)
            .external(ExternalServer {
                sid: 1,
                host: "127.0.0.1".into(),
                quorum_port: q_port,
                election_port: e_port,
            })
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
        ServerId(1),
        ServerEntry::participant(format!("127.0.0.1:{q_port}:{e_port}")),
    );
    for sid in [2u64, 3] {
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
    let tcp = TcpTransport::start(
        TcpConfig::new(ServerId(1), addr(e_port), peers),
        election,
        quorum,
    )
    .unwrap();
    let cfg = PeerConfig {
        my_id: ServerId(1),
        learner_type: LearnerType::Participant,
        quorum: Arc::new(QuorumMaj::new(members, 0)),
        election: ElectionConfig::default(),
        timing: Timing {
            tick_time: TICK,
            init_limit: 10,
            sync_limit: 5,
        },
    };
    let store = MemoryElectionStore::default();
    let peer = QuorumPeer::new(cfg, tcp, store.clone())
        .await
        .unwrap()
        .spawn();

    // 1. Our peer decides FOLLOWING the real leader.
    let ours = peer
        .wait_for(Duration::from_secs(60), |s| {
            s.state == ServerState::Following
        })
        .await
        .expect("our peer decides FOLLOWING");
    let real_leader = eventually(Duration::from_secs(60), || {
        [2u64, 3]
            .into_iter()
            .find(|s| mode(&zk, *s) == Some(ServerMode::Leader))
    })
    .await
    .expect("a real server leads");
    assert_eq!(ours.leader, Some(ServerId(real_leader as i64)));
    // Which real server leads depends on which JVM came up first (with only one of them up,
    // that one and our peer form the quorum); both real servers must end up serving.
    let other = if real_leader == 3 { 2 } else { 3 };
    eventually(Duration::from_secs(60), || {
        (mode(&zk, other) == Some(ServerMode::Follower)).then_some(())
    })
    .await
    .expect("the other real server follows");

    // 2. Their logs show our notifications were received and decoded.
    let log = zk.log(3);
    assert!(
        log.contains("n.sid:1"),
        "server 3 never logged a notification from sid 1"
    );

    // 3. Our learner completes discovery with the real leader.
    let est = peer
        .wait_for(Duration::from_secs(30), |s| s.epoch.is_some())
        .await
        .expect("our follower establishes the real leader's epoch");
    assert_eq!(est.leader, Some(ServerId(real_leader as i64)));
    let epoch = est.epoch.unwrap();
    assert_eq!(store.snapshot().current_epoch, epoch);

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
