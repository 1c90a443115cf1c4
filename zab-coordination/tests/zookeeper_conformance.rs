//! ha-coordination's conformance suite through `ZooKeeperCoordination` (the `zookeeper-client`
//! crate) against a three-server ensemble, with the clients spread over the servers; then a
//! session that expires after its timeout, and the fail-over of a client whose server is
//! killed. Each test runs against Apache ZooKeeper 3.8 and, with the same body, against
//! `ha-zookeeper` (the `ha_zookeeper_*` tests).
//!
//! Needs ZooKeeper (fails under `CI` when it is missing, skips otherwise).

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use ha_coordination::{conformance, CoordinationCluster};
use ha_coordination::{
    Coordination, CoordinationError, CoordinationEvent, CreateMode, SessionEvent, SessionId,
    ZooKeeperCoordination, ZooKeeperOptions,
};
use ha_testkit::{TcpProxy, ZkEnsemble};
use support::Flavour;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Each client connects through its own pausable proxy to one server, the servers taken in
/// turn, so the clients are spread over the ensemble and a case can cut one off.
struct Harness {
    direct: String,
    ports: Vec<u16>,
    next: AtomicUsize,
    // Weak: a case that drops its client must close the session.
    clients: Mutex<Vec<(Weak<ZooKeeperCoordination>, Arc<TcpProxy>)>>,
}

impl Harness {
    fn new(zk: &ZkEnsemble) -> Result<Harness, ha_testkit::TestkitError> {
        Ok(Harness {
            direct: zk.connect_string(),
            ports: zk
                .sids()
                .into_iter()
                .map(|sid| zk.client_port(sid))
                .collect::<Result<_, _>>()?,
            next: AtomicUsize::new(0),
            clients: Mutex::new(Vec::new()),
        })
    }

    fn proxy_of(&self, session: SessionId) -> Option<Arc<TcpProxy>> {
        self.clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|(c, _)| c.upgrade().is_some_and(|c| c.session_id() == session))
            .map(|(_, p)| p.clone())
    }
}

fn options() -> ZooKeeperOptions {
    ZooKeeperOptions::new()
        // Generous: the test machine may be heavily loaded.
        .with_session_timeout(Duration::from_secs(15))
        .with_connection_timeout(Duration::from_secs(10))
}

#[async_trait]
impl CoordinationCluster for Harness {
    async fn connect(&self) -> Result<Arc<dyn Coordination>, CoordinationError> {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        let proxy = Arc::new(
            TcpProxy::to_local_port(self.ports[i % self.ports.len()])
                .map_err(|e| CoordinationError::Backend(e.to_string()))?,
        );
        let client =
            Arc::new(ZooKeeperCoordination::connect_with(&proxy.host_port(), options()).await?);
        self.clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((Arc::downgrade(&client), proxy));
        Ok(client)
    }

    async fn expire(&self, session: SessionId) -> Result<(), CoordinationError> {
        let found = self
            .clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(|(c, p)| c.upgrade().map(|c| (c, p.clone())))
            .find(|(c, _)| c.session_id() == session);
        let Some((client, proxy)) = found else {
            return Err(CoordinationError::SessionExpired);
        };
        // Cut the client off so its reconnection cannot race the close from another
        // connection (which every server of the ensemble accepts).
        proxy.pause();
        let closed = client.close_session_at(&self.direct).await;
        proxy.resume();
        closed
    }

    async fn disconnect(&self, session: SessionId) -> Result<bool, CoordinationError> {
        Ok(self.proxy_of(session).map(|p| p.pause()).is_some())
    }

    async fn reconnect(&self, session: SessionId) -> Result<(), CoordinationError> {
        if let Some(p) = self.proxy_of(session) {
            p.resume();
        }
        Ok(())
    }
}

async fn conformance_suite_on_three_servers(flavour: Flavour, test: &str) -> TestResult {
    let Some(b) = support::builder(flavour, test)? else {
        return Ok(());
    };
    let zk = b.servers(3).start()?;
    let h = Harness::new(&zk)?;
    let mut failures = Vec::new();
    macro_rules! case {
        ($name:ident) => {
            let started = Instant::now();
            match conformance::$name(&h).await {
                Ok(()) => println!(
                    "conformance {} ... ok ({:?})",
                    stringify!($name),
                    started.elapsed()
                ),
                Err(e) => {
                    println!("conformance {} ... FAILED: {e}", stringify!($name));
                    failures.push(e.to_string());
                }
            }
        };
    }
    case!(create_and_read);
    case!(typed_errors);
    case!(sequential_nodes);
    case!(conditional_writes);
    case!(multi_is_atomic);
    case!(multi_reports_the_first_bad_version);
    case!(bulk_read);
    case!(data_watch_is_one_shot);
    case!(exists_watch_sees_creation);
    case!(child_watch);
    case!(session_expiry);
    case!(connection_loss_keeps_the_session);
    case!(close_removes_ephemerals);
    assert!(
        failures.is_empty(),
        "failed cases:\n{}",
        failures.join("\n")
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_suite_on_a_three_server_ensemble() -> TestResult {
    conformance_suite_on_three_servers(
        Flavour::Apache,
        "conformance_suite_on_a_three_server_ensemble",
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ha_zookeeper_conformance_suite_on_a_three_server_ensemble() -> TestResult {
    conformance_suite_on_three_servers(
        Flavour::HaZookeeper,
        "ha_zookeeper_conformance_suite_on_a_three_server_ensemble",
    )
    .await
}

/// Waits (up to `timeout`) until `path` no longer exists as seen by `observer`.
async fn wait_gone(observer: &ZooKeeperCoordination, path: &str, timeout: Duration) -> TestResult {
    let deadline = Instant::now() + timeout;
    while observer.exists(path, false).await?.is_some() {
        if Instant::now() >= deadline {
            return Err(format!("{path} still exists after {timeout:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// A client cut off from its server for longer than its session timeout loses its session:
/// the ensemble expires it (its ephemeral goes, seen from a client on another server), and
/// when the client gets through again it is told the session expired.
async fn cut_off_session_expires(flavour: Flavour, test: &str) -> TestResult {
    let Some(b) = support::builder(flavour, test)? else {
        return Ok(());
    };
    // tickTime 200 ms: session timeouts from 400 ms to 4 s.
    let zk = b.servers(3).tick_time(Duration::from_millis(200)).start()?;
    let sids = zk.sids();
    let proxy = TcpProxy::to_local_port(zk.client_port(sids[0])?)?;
    let short = ZooKeeperOptions::new()
        .with_session_timeout(Duration::from_secs(2))
        .with_connection_timeout(Duration::from_secs(10));
    let client = ZooKeeperCoordination::connect_with(&proxy.host_port(), short).await?;
    let session = client.session_id();
    client
        .create("/expiring", b"", CreateMode::Ephemeral)
        .await?;
    let observer = ZooKeeperCoordination::connect_with(
        &format!("127.0.0.1:{}", zk.client_port(sids[1])?),
        options(),
    )
    .await?;
    let (_, stat) = observer.get_data("/expiring", false).await?;
    assert_eq!(stat.ephemeral_owner, session);
    let mut events = client.events();
    proxy.pause();
    wait_gone(&observer, "/expiring", Duration::from_secs(30)).await?;
    proxy.resume();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, events.next()).await? {
            Some(CoordinationEvent::Session(SessionEvent::Expired { session_id })) => {
                assert_eq!(session_id, session);
                break;
            }
            Some(CoordinationEvent::Session(SessionEvent::Disconnected)) => {}
            other => return Err(format!("unexpected {other:?} before the expiry").into()),
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_session_expires_after_its_timeout_and_its_ephemeral_is_deleted() -> TestResult {
    cut_off_session_expires(
        Flavour::Apache,
        "a_cut_off_session_expires_after_its_timeout_and_its_ephemeral_is_deleted",
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ha_zookeeper_a_cut_off_session_expires_after_its_timeout_and_its_ephemeral_is_deleted(
) -> TestResult {
    cut_off_session_expires(
        Flavour::HaZookeeper,
        "ha_zookeeper_a_cut_off_session_expires_after_its_timeout_and_its_ephemeral_is_deleted",
    )
    .await
}

/// The server holding `session`'s connection, found in each running server's `cons` answer
/// (`sid=0x<session>`).
fn server_of(zk: &ZkEnsemble, running: &[u64], session: SessionId) -> Option<u64> {
    let needle = format!("sid=0x{:x},", session as u64);
    running.iter().copied().find(|&sid| {
        zk.four_letter_word(sid, "cons")
            .is_ok_and(|answer| answer.contains(&needle))
    })
}

/// Killing the server a client is connected to moves the client to another server within
/// its session: same session id, its ephemeral kept, its watch still set.
async fn client_fails_over(flavour: Flavour, test: &str) -> TestResult {
    let Some(b) = support::builder(flavour, test)? else {
        return Ok(());
    };
    let mut zk = b.servers(3).start()?;
    let client = ZooKeeperCoordination::connect_with(&zk.connect_string(), options()).await?;
    let session = client.session_id();
    client
        .create("/member", b"{}", CreateMode::Ephemeral)
        .await?;
    client
        .create("/watched", b"a", CreateMode::Persistent)
        .await?;
    client.get_data("/watched", true).await?;
    let all = zk.sids();
    let home = server_of(&zk, &all, session).ok_or("no server lists the client's session")?;
    let mut events = client.events();
    zk.kill(home)?;
    let others: Vec<u64> = all.iter().copied().filter(|&s| s != home).collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut saw_disconnect = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, events.next()).await? {
            Some(CoordinationEvent::Session(SessionEvent::Disconnected)) => saw_disconnect = true,
            Some(CoordinationEvent::Session(SessionEvent::Connected { session_id })) => {
                assert_eq!(session_id, session, "the same session after fail-over");
                break;
            }
            other => return Err(format!("unexpected {other:?} during fail-over").into()),
        }
    }
    assert!(saw_disconnect, "the connection loss was reported");
    let (_, stat) = client.get_data("/member", false).await?;
    assert_eq!(stat.ephemeral_owner, session, "the ephemeral survived");
    let now = server_of(&zk, &others, session).ok_or("no surviving server lists the session")?;
    assert_ne!(now, home);
    // The watch set before the fail-over still fires.
    let writer = ZooKeeperCoordination::connect_with(
        &format!("127.0.0.1:{}", zk.client_port(now)?),
        options(),
    )
    .await?;
    writer.set_data("/watched", b"b", -1).await?;
    match tokio::time::timeout(Duration::from_secs(30), events.next()).await? {
        Some(CoordinationEvent::Watch(w)) => assert_eq!(w.path, "/watched"),
        other => return Err(format!("expected the data watch, got {other:?}").into()),
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_clients_server_moves_it_to_another_within_its_session() -> TestResult {
    client_fails_over(
        Flavour::Apache,
        "killing_the_clients_server_moves_it_to_another_within_its_session",
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ha_zookeeper_killing_the_clients_server_moves_it_to_another_within_its_session(
) -> TestResult {
    client_fails_over(
        Flavour::HaZookeeper,
        "ha_zookeeper_killing_the_clients_server_moves_it_to_another_within_its_session",
    )
    .await
}
