//! The coordination store replicated by `zab-core` (issue 8): the whole `Coordination`
//! conformance suite on a three-server ZAB ensemble with clients spread over the servers; the
//! ZAB leader killed mid-suite (clients carry on, nothing committed is lost, sessions survive);
//! a silent session expired by the leader (its ephemerals vanish on every server); and a Kafka
//! controller carrying on over the ensemble after the ZAB leader dies; the suite again with
//! observers serving reads; servers restarted from their file logs in a given data directory.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use ha_coordination::{conformance, CoordinationCluster};
use ha_coordination::{
    Coordination, CoordinationError, CoordinationEvent, CreateMode, SessionEvent, SessionState,
    ANY_VERSION,
};
use kafka_controller::admin;
use kafka_controller::broker_channel::MemoryBrokerChannel;
use kafka_controller::controller::{Controller, ControllerConfig, ControllerHandle};
use kafka_controller::zk_data::{paths, BrokerRegistration, KafkaZkClient, PartitionStateZNode};
use zab_coordination::{ClientTimeouts, EnsembleTransport, ZabEnsemble, ZabEnsembleConfig};
use zab_core::ServerId;

type TestResult = Result<(), Box<dyn std::error::Error>>;

async fn eventually<F, Fut>(what: &str, timeout: Duration, mut f: F) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        if f().await {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(format!("timed out waiting for {what}"))
}

/// Polls `f` every 100 ms for the whole of `period`; `Err` carries how long after the start
/// it first failed. For the tests whose subject is that something lasts.
async fn holds_for<F, Fut>(period: Duration, mut f: F) -> Result<(), Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = tokio::time::Instant::now();
    loop {
        if !f().await {
            return Err(start.elapsed());
        }
        if start.elapsed() >= period {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_suite_on_a_three_server_zab_ensemble() -> TestResult {
    let ensemble = ZabEnsemble::start(3).await?;
    conformance::test_all(&ensemble).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_suite_on_a_zab_ensemble_over_loopback_tcp_and_after_its_leader_dies(
) -> TestResult {
    let ensemble = ZabEnsemble::start_with(
        ZabEnsembleConfig::default().with_transport(EnsembleTransport::Tcp),
    )
    .await?;
    conformance::test_all(&ensemble).await?;
    // A write too large for a quorum packet is refused; the ensemble goes on.
    let c = ensemble.connect_spread().await?;
    let huge = vec![7u8; 2 << 20];
    let refused = c.create("/huge", &huge, CreateMode::Persistent).await;
    assert!(
        matches!(refused, Err(CoordinationError::BadArguments(_))),
        "{refused:?}"
    );
    let old = ensemble.kill_leader().await.ok_or("no leader")?;
    ensemble.wait_for_leader(Duration::from_secs(10)).await?;
    conformance::create_and_read(&ensemble).await?;
    conformance::session_expiry(&ensemble).await?;
    ensemble.restart(old).await?;
    ensemble.wait_for_leader(Duration::from_secs(10)).await?;
    let c = ensemble.connect(old).await?;
    c.sync("/").await?;
    assert!(c.exists("/session_expiry", false).await?.is_some());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn z8_clients_carry_on_after_the_zab_leader_dies_mid_suite_keeping_sessions_and_writes(
) -> TestResult {
    let ensemble = ZabEnsemble::start(3).await?;
    conformance::create_and_read(&ensemble).await?;
    conformance::sequential_nodes(&ensemble).await?;
    // One client per server; each writes a node and holds an ephemeral.
    let mut clients = Vec::new();
    for sid in 1..=3 {
        clients.push(ensemble.connect(ServerId(sid)).await?);
    }
    clients[0]
        .create("/failover", b"", CreateMode::Persistent)
        .await?;
    let mut events = Vec::new();
    for (i, c) in clients.iter().enumerate() {
        c.sync("/failover").await?;
        c.create(
            &format!("/failover/w{i}"),
            b"before",
            CreateMode::Persistent,
        )
        .await?;
        c.create(&format!("/failover/e{i}"), b"", CreateMode::Ephemeral)
            .await?;
        events.push(c.events());
    }
    let sessions: Vec<i64> = clients.iter().map(|c| c.session_id()).collect();

    let old = ensemble.kill_leader().await.ok_or("no leader to kill")?;
    let new = ensemble.wait_for_leader(Duration::from_secs(10)).await?;
    assert_ne!(old, new);

    // Every client carries on (the old leader's client on another server), same session.
    for (i, c) in clients.iter().enumerate() {
        eventually("client usable again", Duration::from_secs(10), || async {
            c.set_data(&format!("/failover/w{i}"), b"after", ANY_VERSION)
                .await
                .is_ok()
        })
        .await?;
        assert_eq!(c.session_id(), sessions[i], "client {i} lost its session");
    }
    for c in &clients {
        c.sync("/failover").await?;
        let names = c.children("/failover", false).await?;
        assert_eq!(names, vec!["e0", "e1", "e2", "w0", "w1", "w2"]);
        for i in 0..3 {
            let (data, _) = c.get_data(&format!("/failover/w{i}"), false).await?;
            assert_eq!(data, b"after");
        }
    }
    // Every live server holds the same tree, with nothing committed lost.
    for sid in ensemble.live_servers() {
        let n = ensemble
            .inspect(sid, |t| t.children("/failover"))
            .flatten()
            .map(|c| c.len());
        assert_eq!(n, Some(6), "server {}", sid.0);
    }
    // No client saw its session expire.
    for e in &mut events {
        while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_millis(50), e.next()).await {
            assert!(
                !matches!(ev, CoordinationEvent::Session(SessionEvent::Expired { .. })),
                "{ev:?}"
            );
        }
    }
    // The rest of the suite on the re-elected ensemble.
    conformance::conditional_writes(&ensemble).await?;
    conformance::multi_is_atomic(&ensemble).await?;
    conformance::data_watch_is_one_shot(&ensemble).await?;
    conformance::child_watch(&ensemble).await?;
    conformance::session_expiry(&ensemble).await?;
    conformance::close_removes_ephemerals(&ensemble).await?;

    // The killed server restarts and catches up.
    ensemble.restart(old).await?;
    eventually(
        "restarted server caught up",
        Duration::from_secs(10),
        || async {
            ensemble
                .inspect(old, |t| t.children("/failover").map(|c| c.len()))
                .flatten()
                == Some(6)
        },
    )
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn z6_a_silent_session_is_expired_by_the_leader_and_its_ephemerals_vanish_everywhere(
) -> TestResult {
    let ensemble = ZabEnsemble::start_with(ZabEnsembleConfig::default().with_client(
        ClientTimeouts::new(Duration::from_millis(1500), Duration::from_secs(5)),
    ))
    .await?;
    let leader = ensemble.leader().ok_or("no leader")?;
    // The silent client sits on a follower: only learners' PING replies carry its touches.
    let follower = ensemble
        .live_servers()
        .into_iter()
        .find(|s| *s != leader)
        .ok_or("no follower")?;
    let quiet = ensemble.connect(follower).await?;
    let other = ensemble.connect(follower).await?;
    quiet.create("/eph", b"", CreateMode::Ephemeral).await?;
    let session = quiet.session_id();
    let mut quiet_events = quiet.events();
    // Heartbeats through the follower keep it alive well past its timeout. That it lasts is
    // the subject here, so the test watches it for twice the session timeout.
    holds_for(Duration::from_millis(3000), || async {
        other.exists("/eph", false).await.ok().flatten().is_some()
            && ensemble.session_open_on(leader, session) == Some(true)
    })
    .await
    .map_err(|at| format!("expired while alive, {at:?} after the wait began"))?;

    // Cut off: no more touches; the leader expires it.
    assert!(CoordinationCluster::disconnect(&ensemble, session).await?);
    eventually(
        "ephemeral gone on every server",
        Duration::from_secs(10),
        || async {
            ensemble.live_servers().iter().all(|s| {
                ensemble.stat_on(*s, "/eph") == Some(None)
                    && ensemble.session_open_on(*s, session) == Some(false)
            })
        },
    )
    .await?;
    assert!(other.exists("/eph", false).await?.is_none());
    // Back: the client learns of the expiry and opens a new session by itself.
    CoordinationCluster::reconnect(&ensemble, session).await?;
    let mut expired = false;
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), quiet_events.next())
            .await?
            .ok_or("event stream ended")?;
        match ev {
            CoordinationEvent::Session(SessionEvent::Expired { session_id }) => {
                assert_eq!(session_id, session);
                expired = true;
            }
            CoordinationEvent::Session(SessionEvent::Connected { session_id }) if expired => {
                assert_ne!(session_id, session);
                break;
            }
            _ => {}
        }
    }
    quiet.create("/eph", b"", CreateMode::Ephemeral).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn z6_a_client_of_a_partitioned_follower_moves_to_a_serving_server_keeping_its_session(
) -> TestResult {
    let ensemble = ZabEnsemble::start_with(ZabEnsembleConfig::default().with_client(
        ClientTimeouts::new(Duration::from_secs(3), Duration::from_secs(3)),
    ))
    .await?;
    let leader = ensemble.leader().ok_or("no leader")?;
    let follower = ensemble
        .live_servers()
        .into_iter()
        .find(|s| *s != leader)
        .ok_or("no follower")?;
    let client = ensemble.connect_client(follower).await?;
    client.create("/mine", b"", CreateMode::Ephemeral).await?;
    let session = client.session_id();
    assert!(ensemble.isolate(follower));
    eventually(
        "client moved off the isolated follower",
        Duration::from_secs(10),
        || async {
            client.server() != follower && client.session_state() == SessionState::Connected
        },
    )
    .await?;
    // Same session, its ephemeral alive, and it writes through its new server.
    assert_eq!(client.session_id(), session);
    client.create("/after", b"", CreateMode::Persistent).await?;
    let stat = client
        .exists("/mine", false)
        .await?
        .ok_or("ephemeral lost")?;
    assert_eq!(stat.ephemeral_owner, session);
    // Well past the session timeout: still alive (touched through the new server). That it
    // lasts is the subject here, so the test watches it for more than the session timeout.
    holds_for(Duration::from_secs(4), || async {
        client.exists("/mine", false).await.ok().flatten().is_some()
    })
    .await
    .map_err(|at| format!("the moved session's ephemeral vanished {at:?} after the move"))?;
    ensemble.heal();
    Ok(())
}

fn controller_config(id: i32) -> ControllerConfig {
    let mut c = ControllerConfig::new(id);
    c.auto_leader_rebalance_enable = false;
    c.channel.retry_backoff = Duration::from_millis(10);
    c
}

async fn leader_of(admin: &dyn Coordination, topic: &str, p: i32) -> Option<i32> {
    let (data, _) = admin
        .get_data(&paths::partition_state(topic, p), false)
        .await
        .ok()?;
    PartitionStateZNode::from_json(&data).ok().map(|s| s.leader)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k1_the_controller_carries_on_over_zab_after_the_zab_leader_dies() -> TestResult {
    let ensemble = ZabEnsemble::start(3).await?;
    let channel = MemoryBrokerChannel::new();
    let mut brokers: BTreeMap<i32, (Arc<dyn Coordination>, ControllerHandle)> = BTreeMap::new();
    for id in 1..=3 {
        // Broker i's session lives on ZAB server i.
        let coord = ensemble.connect(ServerId(i64::from(id))).await?;
        let kzk = KafkaZkClient::new(coord.clone());
        kzk.create_persistent_paths().await?;
        kzk.register_broker(
            id,
            &BrokerRegistration::plaintext("localhost", 9092, None, 0),
        )
        .await?;
        let handle = Controller::start(
            controller_config(id),
            coord.clone(),
            Arc::new(channel.clone()),
        );
        brokers.insert(id, (coord, handle));
        if id == 1 {
            if let Some((_, h)) = brokers.get(&1) {
                h.wait_active(Duration::from_secs(30))
                    .await
                    .ok_or("broker 1 not elected")?;
            }
        }
    }
    let admin_client = ensemble.connect(ServerId(1)).await?;
    admin::create_topic_with_assignment(
        admin_client.as_ref(),
        "t",
        &BTreeMap::from([(0, vec![2, 1, 3]), (1, vec![2, 3, 1])]),
    )
    .await?;
    let timeout = Duration::from_secs(30);
    let led_by = |l0: i32, l1: i32| {
        let admin_client = admin_client.clone();
        move || {
            let admin_client = admin_client.clone();
            async move {
                admin_client.sync("/").await.is_ok()
                    && leader_of(admin_client.as_ref(), "t", 0).await == Some(l0)
                    && leader_of(admin_client.as_ref(), "t", 1).await == Some(l1)
            }
        }
    };
    eventually("t led by broker 2", timeout, led_by(2, 2)).await?;

    let old = ensemble.kill_leader().await.ok_or("no ZAB leader")?;
    ensemble.wait_for_leader(Duration::from_secs(10)).await?;
    assert!(
        ensemble.stat_on(old, "/").is_none(),
        "killed server still answers"
    );

    // After re-election a broker failure still moves its leaderships: broker 2's session
    // expires (as the ZooKeeper test does it), the controller elects new leaders.
    let s2 = brokers
        .get(&2)
        .map(|(c, _)| c.session_id())
        .ok_or("no broker 2")?;
    ensemble.expire(s2).await?;
    eventually("leaderships moved off broker 2", timeout, led_by(1, 3)).await?;
    for (_, (_, h)) in brokers {
        h.shutdown();
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_suite_on_three_voters_and_two_observers_serving_reads() -> TestResult {
    let ensemble = ZabEnsemble::start_with(ZabEnsembleConfig::default().with_observers(2)).await?;
    assert_eq!(ensemble.observers(), vec![ServerId(4), ServerId(5)]);
    // The suite's clients are spread over all five servers, observers included.
    conformance::test_all(&ensemble).await?;
    // A write through a voter is read on each observer after a sync; a write through an
    // observer is forwarded to the leader and read on a voter.
    let voter = ensemble.connect(ServerId(1)).await?;
    voter
        .create("/from_voter", b"v", CreateMode::Persistent)
        .await?;
    for ob in ensemble.observers() {
        let c = ensemble.connect(ob).await?;
        c.sync("/from_voter").await?;
        let (data, _) = c.get_data("/from_voter", false).await?;
        assert_eq!(data, b"v".to_vec(), "observer {ob:?}");
        c.create(
            &format!("/from_observer_{}", ob.0),
            b"o",
            CreateMode::Persistent,
        )
        .await?;
    }
    voter.sync("/").await?;
    for ob in ensemble.observers() {
        assert!(voter
            .exists(&format!("/from_observer_{}", ob.0), false)
            .await?
            .is_some());
    }
    // An observer never leads: with every voter but a quorum alive the leader is a voter.
    let leader = ensemble.wait_for_leader(Duration::from_secs(10)).await?;
    assert!(leader.0 <= 3, "{leader:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zab_ensemble_servers_restart_from_their_file_logs_in_the_given_data_dir() -> TestResult {
    let root = tempfile::tempdir()?;
    let ensemble = ZabEnsemble::start_with(
        ZabEnsembleConfig::default()
            .with_observers(1)
            .with_data_dir(root.path()),
    )
    .await?;
    let c = ensemble.connect(ServerId(1)).await?;
    for i in 0..20 {
        c.create(&format!("/n{i}"), b"x", CreateMode::Persistent)
            .await?;
    }
    // Each server logs to segments in its own directory.
    for sid in 1..=4 {
        let log = ensemble
            .data_dir(ServerId(sid))
            .ok_or("no dir")?
            .join("log");
        assert!(log.starts_with(root.path()));
        let segments = std::fs::read_dir(&log)?
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("log."))
            })
            .count();
        assert!(segments >= 1, "server {sid}: no log segment in {log:?}");
    }
    // Every server restarts from its own files and still has every node.
    for sid in [ServerId(4), ServerId(2)] {
        ensemble.restart(sid).await?;
        ensemble.wait_for_leader(Duration::from_secs(10)).await?;
        eventually(
            "restarted server has every node",
            Duration::from_secs(10),
            || async { ensemble.inspect(sid, |t| t.stat("/n19").is_some()) == Some(true) },
        )
        .await?;
    }
    drop(ensemble);
    // The whole ensemble restarts from the same directory.
    let again = ZabEnsemble::start_with(
        ZabEnsembleConfig::default()
            .with_observers(1)
            .with_data_dir(root.path()),
    )
    .await?;
    let c = again.connect(ServerId(4)).await?;
    c.sync("/").await?;
    assert!(c.exists("/n19", false).await?.is_some());
    Ok(())
}
