//! Our peer (TCP transport) in one ensemble with two real ZooKeeper 3.8 servers started by the
//! test harness.
//!
//! With our peer as sid 1 (real servers 2 and 3):
//! - ZooKeeper's election notifications decode here and ours are accepted there: our peer
//!   decides FOLLOWING the leader the real servers report with `srvr`, and every notification
//!   the real leader logged from our sid (`Notification: my state:…; n.sid:…, n.state:…,
//!   n.leader:…, n.round:0x…, n.peerEpoch:0x…, n.zxid:0x…, message format version:0x…`, logged
//!   at INFO by `FastLeaderElection.Messenger.WorkerReceiver`) is one our peer sent it, field
//!   for field;
//! - our learner speaks discovery with a real leader (FOLLOWERINFO → LEADERINFO → ACKEPOCH →
//!   DIFF or SNAP (the snapshot body is skipped) / NEWLEADER → ACK → UPTODATE → ACK, PING
//!   echoes) and the epoch is established;
//! - after the real leader is killed, our vote goes where ZooKeeper's rules send it (the
//!   surviving real server: epoch and zxid at least ours, larger sid) and that server leads
//!   with our acknowledgement, since it needs us for a quorum.
//!
//! With our peer as sid 3 (real servers 1 and 2): every vote goes to us, and both real servers
//! complete discovery and synchronisation with our leader and serve as its followers, and both
//! logged our votes with the values we sent.
//!
//! Fails (not skips) when `CI` is set and ZooKeeper is missing.

#![cfg(feature = "tokio")]

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;

use ha_testkit::{ExternalServer, ServerMode, ZkEnsemble};
use tokio::net::TcpListener;
use zab_core::discovery::QuorumPacket;
use zab_core::discovery::Timing;
use zab_core::peer::{PeerConfig, PeerHandle, QuorumPeer};
use zab_core::store::MemoryElectionStore;
use zab_core::transport::{PeerAddrs, TcpConfig, TcpTransport, Transport, TransportEvent};
use zab_core::{
    ElectionConfig, LearnerType, Notification, QuorumMaj, ServerEntry, ServerId, ServerState,
};

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

/// The election notifications our peer handed to its transport, by recipient.
type Sent = Arc<Mutex<Vec<(ServerId, Notification)>>>;

/// Our TCP transport, recording every election notification it is asked to send.
struct Recording {
    inner: TcpTransport,
    sent: Sent,
}

#[async_trait::async_trait]
impl Transport for Recording {
    fn my_sid(&self) -> ServerId {
        self.inner.my_sid()
    }
    fn send_election(&mut self, to: ServerId, payload: Bytes) {
        if let Ok(n) = Notification::decode(&payload) {
            self.sent.lock().unwrap().push((to, n));
        }
        self.inner.send_election(to, payload);
    }
    fn send_notification(&mut self, to: ServerId, notification: &Notification) {
        self.sent.lock().unwrap().push((to, notification.clone()));
        self.inner.send_notification(to, notification);
    }
    fn connect_all(&mut self) {
        self.inner.connect_all();
    }
    fn send_quorum(&mut self, to: ServerId, packet: QuorumPacket) {
        self.inner.send_quorum(to, packet);
    }
    fn close_quorum(&mut self, peer: ServerId) {
        self.inner.close_quorum(peer);
    }
    fn refuse_quorum(&mut self, peer: ServerId) {
        self.inner.refuse_quorum(peer);
    }
    async fn recv(&mut self) -> Option<TransportEvent> {
        self.inner.recv().await
    }
}

/// A vote as ZooKeeper logs a received notification: (n.state, n.leader, n.round, n.peerEpoch,
/// n.zxid, message format version).
type LoggedVote = (String, i64, i64, i64, i64, i32);

fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let start = line.find(name)? + name.len();
    let rest = &line[start..];
    let end = rest.find([',', ';']).unwrap_or(rest.len());
    Some(rest[..end].trim())
}

fn hex(v: &str) -> Option<i64> {
    u64::from_str_radix(v.strip_prefix("0x")?, 16)
        .ok()
        .map(|u| u as i64)
}

/// Every notification from `from` that a real server logged on receipt.
fn logged_votes(log: &str, from: u64) -> Vec<LoggedVote> {
    let sid = format!("n.sid:{from},");
    log.lines()
        .filter(|l| l.contains("Notification: my state:") && l.contains(&sid))
        .filter_map(|l| {
            Some((
                field(l, "n.state:")?.to_string(),
                field(l, "n.leader:")?.parse().ok()?,
                hex(field(l, "n.round:")?)?,
                hex(field(l, "n.peerEpoch:")?)?,
                hex(field(l, "n.zxid:")?)?,
                i32::try_from(hex(field(l, "message format version:")?)?).ok()?,
            ))
        })
        .collect()
}

/// The real server `real` logged at least one notification from our sid `ours`, and each one
/// it logged has the state, leader, round, peer epoch, zxid and format version of a
/// notification our peer sent to it. Returns what it logged.
fn assert_real_server_read_our_votes(
    zk: &ZkEnsemble,
    real: u64,
    ours: u64,
    sent: &Sent,
) -> Vec<LoggedVote> {
    let ours_to_it: Vec<LoggedVote> = sent
        .lock()
        .unwrap()
        .iter()
        .filter(|(to, _)| *to == ServerId(real as i64))
        .map(|(_, n)| {
            (
                n.state.to_string(),
                n.leader.0,
                n.election_epoch,
                n.peer_epoch,
                n.zxid.0,
                n.version,
            )
        })
        .collect();
    let log = zk.log(real);
    let logged = logged_votes(&log, ours);
    assert!(
        !logged.is_empty(),
        "real server {real} logged no notification from sid {ours} (we sent it {ours_to_it:?})"
    );
    for v in &logged {
        assert!(
            ours_to_it.contains(v),
            "real server {real} read the vote {v:?} from sid {ours}, which our peer never sent \
             it; we sent {ours_to_it:?}"
        );
    }
    logged
}

fn mode(zk: &ZkEnsemble, sid: u64) -> Option<ServerMode> {
    zk.srvr(sid).ok().map(|s| s.mode)
}

/// Starts real ZooKeeper servers `real` (consecutive sids) and our peer `ours` in one ensemble.
async fn mixed_ensemble(
    ours: u64,
    real: [u64; 2],
) -> (ZkEnsemble, PeerHandle, MemoryElectionStore, Sent) {
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
    let sent = Sent::default();
    let recording = Recording {
        inner: tcp,
        sent: sent.clone(),
    };
    let peer = QuorumPeer::new(cfg, recording, store.clone())
        .await
        .unwrap()
        .spawn();
    (zk, peer, store, sent)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_3_8_interop_our_peer_follows_the_real_leader_and_reelects_by_zookeeper_rules() {
    if !ha_testkit::require_zookeeper("interop_real_zookeeper")
        .expect("ZooKeeper is required when CI is set")
    {
        return;
    }
    let _serial = SERIAL.lock().await;
    let (mut zk, peer, store, sent) = mixed_ensemble(1, [2, 3]).await;

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
    // The real leader read our votes back as we sent them: leader, round, peer epoch, zxid.
    let read = assert_real_server_read_our_votes(&zk, real_leader, 1, &sent);
    println!("real leader {real_leader} read our votes, each as we sent it: {read:?}");

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
    // It could only be elected by our LOOKING vote for it, of a later round, carrying its own
    // zxid and peer epoch: it read that vote as we sent it.
    let read = assert_real_server_read_our_votes(&zk, other, 1, &sent);
    println!("surviving server {other} read our votes, each as we sent it: {read:?}");
    assert!(
        read.iter()
            .any(|v| v.0 == "LOOKING" && v.1 == other as i64 && v.2 > 1),
        "server {other} never read our LOOKING vote for it in the new round: {read:?}"
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
    let (zk, peer, store, sent) = mixed_ensemble(3, [1, 2]).await;
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
    // Both real servers read our votes back as we sent them.
    for sid in [1u64, 2] {
        let read = assert_real_server_read_our_votes(&zk, sid, 3, &sent);
        println!("real server {sid} read our votes, each as we sent it: {read:?}");
        assert!(
            read.iter().any(|v| v.1 == 3),
            "real server {sid} never read a vote of ours for ourselves"
        );
    }
    // They stay with us across several heartbeat periods (syncLimit * tickTime = 1 s). The
    // length of time is what is tested here, so the test waits it out, checking all along.
    let until = tokio::time::Instant::now() + TICK * 8;
    while tokio::time::Instant::now() < until {
        assert_eq!(peer.current().epoch, Some(epoch));
        for sid in [1u64, 2] {
            assert_eq!(mode(&zk, sid), Some(ServerMode::Follower));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
