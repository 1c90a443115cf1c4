//! Restarts that always come back, on a real ZooKeeper started by `ha-testkit` (which fails
//! under `CI` when ZooKeeper is missing and skips otherwise):
//!
//! - a `BrokerNode` restarted with the same id while its previous process's session is still
//!   alive (the old client never closed, just cut off) waits for that session's registration
//!   to vanish and registers then, instead of exiting;
//! - a broker cut off long enough for its session to expire (as after SIGSTOP) registers again
//!   with a new broker epoch by itself when it can reach the ensemble, and the controller
//!   takes it back (KIP-380).

use std::sync::Arc;
use std::time::Duration;

use ha_coordination::{Coordination, ZooKeeperCoordination, ZooKeeperOptions};
use ha_testkit::{require_zookeeper, TcpProxy, ZkEnsemble};
use kafka_broker::glue::holder_wait_for;
use kafka_broker::node::{BrokerNode, LogPlacement, NodeConfig};
use kafka_controller::admin;
use kafka_controller::zk_data::{paths, KafkaZkClient};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// The session timeout of the brokers' clients (the test ensemble ticks every 500 ms).
const SESSION_TIMEOUT: Duration = Duration::from_secs(3);

/// A generous bound on every wait.
const WAIT: Duration = Duration::from_secs(60);

fn options() -> ZooKeeperOptions {
    ZooKeeperOptions::new()
        .with_session_timeout(SESSION_TIMEOUT)
        .with_connection_timeout(Duration::from_secs(10))
}

fn config(id: i32) -> NodeConfig {
    let mut c = NodeConfig::new(id, "127.0.0.1:0".parse().expect("address"));
    c.logs = LogPlacement::Memory;
    c.registration_wait = holder_wait_for(SESSION_TIMEOUT);
    c.controller.auto_leader_rebalance_enable = false;
    c
}

fn ensemble() -> Result<ZkEnsemble, Box<dyn std::error::Error>> {
    Ok(ZkEnsemble::builder()
        .tick_time(Duration::from_millis(500))
        .start()?)
}

async fn wait_until<F, Fut>(what: &str, mut f: F) -> TestResult
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    while !f().await {
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("timed out waiting for {what}").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip_380_a_node_restarted_before_its_old_session_expired_registers_once_it_has(
) -> TestResult {
    if !require_zookeeper(
        "kip_380_a_node_restarted_before_its_old_session_expired_registers_once_it_has",
    )? {
        return Ok(());
    }
    let zk = ensemble()?;
    let proxy = TcpProxy::to_local_port(zk.client_port(1)?)?;
    let old_client =
        Arc::new(ZooKeeperCoordination::connect_with(&proxy.host_port(), options()).await?);
    let old_session = old_client.session_id();
    let old = BrokerNode::start(config(1), old_client.clone()).await?;
    let old_epoch = old.broker_epoch().ok_or("old node not registered")?;

    // The old process stops answering without closing its session (a crash, a kill -9):
    // its registration stays until the server expires the session.
    proxy.pause();
    let observer = KafkaZkClient::new(Arc::new(
        ZooKeeperCoordination::connect(&zk.connect_string()).await?,
    ));
    let (_, stat) = observer
        .coordination()
        .get_data(&paths::broker(1), false)
        .await?;
    assert_eq!(stat.ephemeral_owner, old_session, "still the old session's");

    // The restarted process registers the same id on a new session: it waits, then succeeds.
    let started = tokio::time::Instant::now();
    let new_client =
        Arc::new(ZooKeeperCoordination::connect_with(&zk.connect_string(), options()).await?);
    let new =
        tokio::time::timeout(WAIT, BrokerNode::start(config(1), new_client.clone())).await??;
    let waited = started.elapsed();
    let new_epoch = new.broker_epoch().ok_or("new node not registered")?;
    assert!(new_epoch > old_epoch, "a new broker epoch");
    assert!(
        waited >= Duration::from_millis(500),
        "it had to wait for the old session ({waited:?})"
    );
    let (_, stat) = observer
        .coordination()
        .get_data(&paths::broker(1), false)
        .await?;
    assert_eq!(
        (stat.czxid, stat.ephemeral_owner),
        (new_epoch, new_client.session_id())
    );
    // The new process also becomes the controller once the old one's session is gone.
    assert!(new.controller().wait_active(WAIT).await.is_some());

    new.shutdown().await;
    let _ = tokio::time::timeout(Duration::from_secs(10), old.shutdown()).await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip_380_a_paused_node_whose_session_expired_re_registers_and_rejoins_by_itself(
) -> TestResult {
    if !require_zookeeper(
        "kip_380_a_paused_node_whose_session_expired_re_registers_and_rejoins_by_itself",
    )? {
        return Ok(());
    }
    let zk = ensemble()?;
    let direct =
        Arc::new(ZooKeeperCoordination::connect_with(&zk.connect_string(), options()).await?);
    let one = BrokerNode::start(config(1), direct).await?;
    assert!(one.controller().wait_active(WAIT).await.is_some());
    let proxy = TcpProxy::to_local_port(zk.client_port(1)?)?;
    let paused_client =
        Arc::new(ZooKeeperCoordination::connect_with(&proxy.host_port(), options()).await?);
    let two = BrokerNode::start(config(2), paused_client.clone()).await?;
    let first_epoch = two.broker_epoch().ok_or("not registered")?;
    let admin_client = ZooKeeperCoordination::connect(&zk.connect_string()).await?;
    admin::create_topic_with_assignment(
        &admin_client,
        "orders",
        &[(0, vec![2, 1])].into_iter().collect(),
    )
    .await?;
    let observer = KafkaZkClient::new(Arc::new(admin_client));
    let state = || async {
        observer
            .partition_states(&[("orders".to_owned(), 0)])
            .await
            .pop()
            .and_then(|r| r.ok().flatten())
            .map(|(s, _)| (s.leader, s.isr))
    };
    wait_until("broker 2 leads orders-0", || async {
        state().await.is_some_and(|(l, _)| l == 2)
    })
    .await?;

    // Broker 2 is paused (no heartbeats reach the ensemble) until its session expires.
    proxy.pause();
    paused_client.close_session_at(&zk.connect_string()).await?;
    wait_until("the controller moved the leadership away", || async {
        state()
            .await
            .is_some_and(|(l, isr)| l == 1 && isr == vec![1])
    })
    .await?;
    assert_eq!(
        observer.broker(2).await?,
        None,
        "its registration went with the session"
    );

    // It resumes: a new session, a new registration with a larger epoch, by itself.
    proxy.resume();
    let second = tokio::time::timeout(WAIT, async {
        loop {
            if let Some(e) = two.broker_epoch().filter(|e| *e > first_epoch) {
                return e;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await?;
    assert_eq!(observer.broker(2).await?.map(|(_, e)| e), Some(second));
    // The controller took the new incarnation back: live with its new epoch, and it caught
    // up into the ISR again.
    wait_until("the controller knows the new broker epoch", || async {
        match one.controller().context().await {
            Some(ctx) => ctx.broker(2).is_some_and(|b| b.epoch == second),
            None => false,
        }
    })
    .await?;
    wait_until("broker 2 is back in the ISR", || async {
        state().await.is_some_and(|(_, isr)| isr.contains(&2))
    })
    .await?;

    two.shutdown().await;
    one.shutdown().await;
    Ok(())
}
