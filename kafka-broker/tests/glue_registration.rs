//! Broker registration (KIP-380): `/brokers/ids/<id>` with endpoints and rack, the broker
//! epoch = its czxid, and re-registration with a larger epoch after the session expired — on
//! `MemoryCoordination` and on a real ZooKeeper started by `ha-testkit` (which fails under
//! `CI` when ZooKeeper is missing and skips otherwise).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ha_coordination::{Coordination, MemoryTree, ZooKeeperCoordination, ZooKeeperOptions};
use ha_testkit::{require_zookeeper, TcpProxy, ZkEnsemble};
use kafka_broker::glue::BrokerRegistrar;
use kafka_controller::zk_data::{
    paths, BrokerRegistration, FeatureRange, KafkaZkClient, KafkaZkError,
};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// A generous bound on every wait of these tests.
const WAIT: Duration = Duration::from_secs(20);

fn v5_registration() -> BrokerRegistration {
    let mut r =
        BrokerRegistration::plaintext("broker1.local", 9092, Some("rack-a"), 1_700_000_000_000);
    r.version = 5;
    r.features = Some(BTreeMap::from([(
        "metadata.version".to_string(),
        FeatureRange {
            min_version: 1,
            max_version: 1,
            extra: Default::default(),
        },
    )]));
    r
}

#[tokio::test]
async fn kip_380_registration_is_ephemeral_with_endpoints_rack_and_epoch_czxid() -> TestResult {
    let tree = MemoryTree::new();
    let coord: Arc<dyn Coordination> = Arc::new(tree.connect());
    let broker = BrokerRegistrar::new(coord.clone(), 1, v5_registration())
        .start()
        .await?;
    let epoch = broker.broker_epoch().ok_or("not registered")?;
    let (data, stat) = coord.get_data(&paths::broker(1), false).await?;
    assert_eq!(stat.czxid, epoch);
    assert_eq!(stat.ephemeral_owner, coord.session_id());
    let read = BrokerRegistration::from_json(&data)?;
    assert_eq!(read, v5_registration());
    assert_eq!(
        read.endpoints,
        vec!["PLAINTEXT://broker1.local:9092".to_string()]
    );
    assert_eq!(read.rack.as_deref(), Some("rack-a"));

    // One registration attempt of another broker process with the same id is refused once
    // the wait runs out (a starting broker goes on waiting: see below).
    let other: Arc<dyn Coordination> = Arc::new(tree.connect());
    let taken = BrokerRegistrar::new(other, 1, v5_registration())
        .with_holder_wait(Duration::from_millis(50))
        .register()
        .await;
    assert!(matches!(
        taken,
        Err(KafkaZkError::BrokerIdStillTaken { id: 1, .. })
    ));
    Ok(())
}

/// A broker restarted before its previous process's session expired: the registration is
/// still held by the old session, so the new one waits (watching the node) instead of
/// exiting, and registers — with a larger broker epoch — once the old session's node is gone.
#[tokio::test]
async fn kip_380_a_restart_waits_for_the_old_sessions_registration_to_vanish() -> TestResult {
    let tree = MemoryTree::new();
    let old_client = tree.connect();
    let old_session = old_client.session_id();
    let old: Arc<dyn Coordination> = Arc::new(old_client);
    let old_zk = KafkaZkClient::new(old.clone());
    old_zk.create_persistent_paths().await?;
    let old_epoch = old_zk.register_broker(1, &v5_registration()).await?;
    let new: Arc<dyn Coordination> = Arc::new(tree.connect());
    let registrar = BrokerRegistrar::new(new.clone(), 1, v5_registration()).with_holder_wait(WAIT);
    let started = tokio::time::Instant::now();
    let registering = tokio::spawn(async move { registrar.start().await });
    // The new process is waiting, not failing: the node still belongs to the old session.
    let observer = tree.connect();
    let (_, stat) = observer.get_data(&paths::broker(1), false).await?;
    assert_eq!(stat.ephemeral_owner, old_session);
    assert!(!registering.is_finished());
    // The old session expires (its ephemeral vanishes) a while later.
    let expire_after = Duration::from_millis(300);
    tokio::time::sleep_until(started + expire_after).await;
    assert!(
        !registering.is_finished(),
        "still waiting for the old session"
    );
    assert!(tree.expire(old_session));
    let registered = tokio::time::timeout(WAIT, registering).await???;
    let epoch = registered.broker_epoch().ok_or("not registered")?;
    assert!(started.elapsed() >= expire_after);
    assert!(
        epoch > old_epoch,
        "a new registration has a new broker epoch"
    );
    let (_, stat) = observer.get_data(&paths::broker(1), false).await?;
    assert_eq!(
        (stat.czxid, stat.ephemeral_owner),
        (epoch, new.session_id())
    );
    Ok(())
}

/// One registration attempt (`register`) on a node that another session holds past the wait
/// (another live broker with this id): a clear error naming the id and the holder, not a hang.
#[tokio::test]
async fn kip_380_a_registration_held_past_the_wait_is_a_clear_error_not_a_hang() -> TestResult {
    let tree = MemoryTree::new();
    let holder_client = tree.connect();
    let holder = holder_client.session_id();
    // Kept alive to the end: the holder is a live broker.
    let holder_zk = KafkaZkClient::new(Arc::new(holder_client));
    holder_zk.create_persistent_paths().await?;
    holder_zk.register_broker(4, &v5_registration()).await?;
    let wait = Duration::from_millis(200);
    let started = tokio::time::Instant::now();
    let result = tokio::time::timeout(
        WAIT,
        BrokerRegistrar::new(Arc::new(tree.connect()), 4, v5_registration())
            .with_holder_wait(wait)
            .register(),
    )
    .await?;
    let elapsed = started.elapsed();
    let Err(error) = result else {
        return Err("registered over a live session's node".into());
    };
    assert!(
        matches!(error, KafkaZkError::BrokerIdStillTaken { id: 4, owner, waited_ms }
            if owner == holder && waited_ms >= 200),
        "{error:?}"
    );
    assert!(elapsed >= wait && elapsed < WAIT, "{elapsed:?}");
    let message = error.to_string();
    assert!(
        message.contains("broker id 4") && message.contains(&format!("{holder:#x}")),
        "{message}"
    );
    Ok(())
}

#[tokio::test]
async fn kip_380_reregistration_after_session_expiry_has_a_larger_broker_epoch() -> TestResult {
    let tree = MemoryTree::new();
    let client = tree.connect();
    let session = client.session_id();
    let coord: Arc<dyn Coordination> = Arc::new(client);
    let broker = BrokerRegistrar::new(coord.clone(), 3, v5_registration())
        .start()
        .await?;
    let first = broker.broker_epoch().ok_or("not registered")?;
    // Unrelated writes move the zxid on.
    coord
        .create("/other", b"", ha_coordination::CreateMode::Persistent)
        .await?;
    assert!(tree.expire(session));
    let second = broker
        .wait_for_epoch_above(first, Duration::from_secs(10))
        .await
        .ok_or("not registered again")?;
    assert!(second > first);
    let (_, stat) = coord.get_data(&paths::broker(3), false).await?;
    assert_eq!(stat.czxid, second);
    assert_eq!(stat.ephemeral_owner, coord.session_id());
    assert_ne!(coord.session_id(), session);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip_380_reregistration_after_session_expiry_on_real_zookeeper() -> TestResult {
    if !require_zookeeper("kip_380_reregistration_after_session_expiry_on_real_zookeeper")? {
        return Ok(());
    }
    let zk = ZkEnsemble::standalone()?;
    let proxy = TcpProxy::to_local_port(zk.client_port(1)?)?;
    let options = ZooKeeperOptions::new()
        .with_session_timeout(Duration::from_secs(15))
        .with_connection_timeout(Duration::from_secs(10));
    let client = Arc::new(ZooKeeperCoordination::connect_with(&proxy.host_port(), options).await?);
    let session = client.session_id();
    let coord: Arc<dyn Coordination> = client.clone();
    let broker = BrokerRegistrar::new(coord.clone(), 1, v5_registration())
        .start()
        .await?;
    let first = broker.broker_epoch().ok_or("not registered")?;
    let observer = KafkaZkClient::new(Arc::new(
        ZooKeeperCoordination::connect(&zk.connect_string()).await?,
    ));
    assert_eq!(observer.broker(1).await?.map(|(_, e)| e), Some(first));

    // Cut the broker off and end its session, as an expiry would.
    proxy.pause();
    client.close_session_at(&zk.connect_string()).await?;
    proxy.resume();
    let second = broker
        .wait_for_epoch_above(first, Duration::from_secs(60))
        .await
        .ok_or("not registered again")?;
    assert!(second > first);
    assert_ne!(coord.session_id(), session);
    let (registration, epoch) = observer.broker(1).await?.ok_or("registration missing")?;
    assert_eq!(epoch, second);
    assert_eq!(registration, v5_registration());
    Ok(())
}

#[tokio::test]
async fn kip_380_connection_loss_without_expiry_keeps_the_registration_and_epoch() -> TestResult {
    let tree = MemoryTree::new();
    let client = tree.connect();
    let session = client.session_id();
    let coord: Arc<dyn Coordination> = Arc::new(client);
    let broker = BrokerRegistrar::new(coord.clone(), 2, v5_registration())
        .start()
        .await?;
    let first = broker.broker_epoch().ok_or("not registered")?;
    assert!(tree.suspend(session));
    assert!(tree.resume(session));
    // A deliberate window, the thing tested: the task gets the reconnection event and must
    // not register again (an absence, so nothing to wait on).
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(broker.broker_epoch(), Some(first));
    let (_, stat) = coord.get_data(&paths::broker(2), false).await?;
    assert_eq!((stat.czxid, stat.ephemeral_owner), (first, session));
    Ok(())
}

/// The restarted broker loses its own connection to the store while it waits for the old
/// session's registration to vanish (the ZooKeeper leader it was on died): it registers once
/// connected again instead of giving up (found by the real-process fault test, where the
/// broker exited with "registration: connection lost").
#[tokio::test]
async fn kip_380_a_restart_waiting_for_the_old_session_survives_a_connection_loss() -> TestResult {
    let tree = MemoryTree::new();
    let old_client = tree.connect();
    let old_session = old_client.session_id();
    let old: Arc<dyn Coordination> = Arc::new(old_client);
    let old_zk = KafkaZkClient::new(old.clone());
    old_zk.create_persistent_paths().await?;
    let old_epoch = old_zk.register_broker(1, &v5_registration()).await?;
    let new_client = tree.connect();
    let new_session = new_client.session_id();
    let new: Arc<dyn Coordination> = Arc::new(new_client);
    let registrar = BrokerRegistrar::new(new.clone(), 1, v5_registration()).with_holder_wait(WAIT);
    let registering = tokio::spawn(async move { registrar.start().await });
    // The waiting broker is cut off for longer than its recheck period.
    assert!(tree.suspend(new_session));
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert!(!registering.is_finished(), "it waits, it does not give up");
    assert!(tree.resume(new_session));
    assert!(tree.expire(old_session));
    let registered = tokio::time::timeout(WAIT, registering).await???;
    let epoch = registered.broker_epoch().ok_or("not registered")?;
    assert!(epoch > old_epoch);
    Ok(())
}

/// A broker starting (`start`) never gives up on a registration held past the wait: the old
/// session may outlive its timeout while the ZooKeeper ensemble re-elects (a new leader tracks
/// every session afresh). It logs an error at every wait period and registers once the holder
/// is gone (found by the real-process fault test, where the broker exited after 11 s).
#[tokio::test]
async fn kip_380_a_starting_broker_waits_past_the_bound_and_registers_when_the_holder_goes(
) -> TestResult {
    let tree = MemoryTree::new();
    let holder_client = tree.connect();
    let holder = holder_client.session_id();
    let holder_zk = KafkaZkClient::new(Arc::new(holder_client));
    holder_zk.create_persistent_paths().await?;
    let old_epoch = holder_zk.register_broker(5, &v5_registration()).await?;
    let wait = Duration::from_millis(200);
    let registering = tokio::spawn(
        BrokerRegistrar::new(Arc::new(tree.connect()), 5, v5_registration())
            .with_holder_wait(wait)
            .start(),
    );
    tokio::time::sleep(wait * 4).await;
    assert!(
        !registering.is_finished(),
        "still waiting after four wait periods"
    );
    assert!(tree.expire(holder));
    let registered = tokio::time::timeout(WAIT, registering).await???;
    assert!(registered.broker_epoch().ok_or("not registered")? > old_epoch);
    Ok(())
}
