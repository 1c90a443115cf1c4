//! The coordination conformance suite against real ZooKeeper 3.8 (a standalone server and a
//! three-server ensemble) started by `ha-testkit`, plus reconnection after a server restart or
//! the loss of the ensemble leader. Fails under `CI` when ZooKeeper is
//! missing; skips with a notice otherwise.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use ha_coordination::{conformance, CoordinationCluster};
use ha_coordination::{
    Coordination, CoordinationError, CoordinationEvent, CreateMode, SessionEvent, SessionId,
    ZooKeeperCoordination, ZooKeeperOptions,
};
use ha_testkit::{require_zookeeper, TcpProxy, ZkEnsemble};

/// Each client connects through its own pausable proxy, so a test can cut it off and close
/// its session from a direct connection without the client's reconnection racing it.
/// Clients are spread over the ensemble's servers in turn.
struct ZkHarness {
    direct: String,
    zk_ports: Vec<u16>,
    next: std::sync::atomic::AtomicUsize,
    // Weak: a case that drops its client must close the session.
    clients: Mutex<Vec<(Weak<ZooKeeperCoordination>, Arc<TcpProxy>)>>,
}

impl ZkHarness {
    fn new(zk: &ZkEnsemble) -> Result<ZkHarness, ha_testkit::TestkitError> {
        Ok(ZkHarness {
            direct: zk.connect_string(),
            zk_ports: zk
                .sids()
                .into_iter()
                .map(|sid| zk.client_port(sid))
                .collect::<Result<_, _>>()?,
            next: std::sync::atomic::AtomicUsize::new(0),
            clients: Mutex::new(Vec::new()),
        })
    }
}

impl ZkHarness {
    fn next_port(&self) -> u16 {
        let i = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.zk_ports[i % self.zk_ports.len()]
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
impl CoordinationCluster for ZkHarness {
    async fn connect(&self) -> Result<Arc<dyn Coordination>, CoordinationError> {
        let proxy = Arc::new(
            TcpProxy::to_local_port(self.next_port())
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

/// Runs every conformance case on `zk`, reporting each, failing with the list of failures.
async fn run_suite(zk: &ZkEnsemble) -> Result<(), Box<dyn std::error::Error>> {
    let h = ZkHarness::new(zk)?;
    let mut failures = Vec::new();
    macro_rules! case {
        ($name:ident) => {
            let started = std::time::Instant::now();
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
async fn conformance_suite_on_real_zookeeper() -> Result<(), Box<dyn std::error::Error>> {
    if !require_zookeeper("conformance_suite_on_real_zookeeper")? {
        return Ok(());
    }
    let zk = ZkEnsemble::standalone()?;
    conformance::test_all(&ZkHarness::new(&zk)?).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_suite_on_a_three_server_ensemble() -> Result<(), Box<dyn std::error::Error>> {
    if !require_zookeeper("conformance_suite_on_a_three_server_ensemble")? {
        return Ok(());
    }
    run_suite(&ZkEnsemble::start(3)?).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_reconnects_within_its_session_after_a_server_restart(
) -> Result<(), Box<dyn std::error::Error>> {
    if !require_zookeeper("client_reconnects_within_its_session_after_a_server_restart")? {
        return Ok(());
    }
    let mut zk = ZkEnsemble::standalone()?;
    let client = ZooKeeperCoordination::connect_with(&zk.connect_string(), options()).await?;
    let session = client.session_id();
    client
        .create("/broker", b"{}", CreateMode::Ephemeral)
        .await?;
    let mut events = client.events();
    zk.kill(1)?; // a crash: the session lives on in the server's transaction log
    zk.restart(1)?;
    zk.wait_serving(1, Duration::from_secs(30))?;
    let mut saw_disconnect = false;
    loop {
        let next = tokio::time::timeout(Duration::from_secs(30), events.next()).await?;
        match next {
            Some(CoordinationEvent::Session(SessionEvent::Disconnected)) => saw_disconnect = true,
            Some(CoordinationEvent::Session(SessionEvent::Connected { session_id })) => {
                assert_eq!(session_id, session, "same session after reconnection");
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(saw_disconnect, "the connection loss was reported");
    let (_, stat) = client.get_data("/broker", false).await?;
    assert_eq!(
        stat.ephemeral_owner, session,
        "the session and its ephemeral survived"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_fails_over_to_another_ensemble_member_keeping_its_session(
) -> Result<(), Box<dyn std::error::Error>> {
    if !require_zookeeper("client_fails_over_to_another_ensemble_member_keeping_its_session")? {
        return Ok(());
    }
    let mut zk = ZkEnsemble::start(3)?;
    let leader = zk.wait_for_leader(Duration::from_secs(60))?;
    let client = ZooKeeperCoordination::connect_with(&zk.connect_string(), options()).await?;
    let session = client.session_id();
    client
        .create("/broker", b"{}", CreateMode::Ephemeral)
        .await?;
    let mut events = client.events();
    zk.kill(leader)?;
    let next_leader = zk.wait_for_leader(Duration::from_secs(60))?;
    assert_ne!(next_leader, leader);
    // Whichever member the client was on, it loses the connection and reconnects elsewhere.
    let mut saw_disconnect = false;
    loop {
        match tokio::time::timeout(Duration::from_secs(30), events.next()).await? {
            Some(CoordinationEvent::Session(SessionEvent::Disconnected)) => saw_disconnect = true,
            Some(CoordinationEvent::Session(SessionEvent::Connected { session_id })) => {
                assert_eq!(session_id, session);
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(saw_disconnect);
    let (_, stat) = client.get_data("/broker", false).await?;
    assert_eq!(
        stat.ephemeral_owner, session,
        "the ephemeral survived the fail-over"
    );
    Ok(())
}
