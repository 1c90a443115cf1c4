//! The controller on a real ZooKeeper 3.8 server started by `ha-testkit`: a broker's session
//! expiry (K1) and the controller's session expiry (K6). Fails under `CI` when ZooKeeper is
//! missing; skips with a notice otherwise.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ha_coordination::{Coordination, ZooKeeperCoordination, ZooKeeperOptions};
use ha_testkit::{require_zookeeper, TcpProxy, ZkEnsemble};
use kafka_controller::admin;
use kafka_controller::broker_channel::MemoryBrokerChannel;
use kafka_controller::context::BrokerId;
use kafka_controller::controller::{Controller, ControllerConfig, ControllerHandle};
use kafka_controller::zk_data::{paths, BrokerRegistration, KafkaZkClient, PartitionStateZNode};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn options() -> ZooKeeperOptions {
    ZooKeeperOptions::new()
        .with_session_timeout(Duration::from_secs(6))
        .with_connection_timeout(Duration::from_secs(10))
}

fn config(id: BrokerId) -> ControllerConfig {
    let mut c = ControllerConfig::new(id);
    c.auto_leader_rebalance_enable = false;
    c.channel.retry_backoff = Duration::from_millis(10);
    c
}

struct ZkBroker {
    client: Arc<ZooKeeperCoordination>,
    proxy: TcpProxy,
    handle: ControllerHandle,
}

impl ZkBroker {
    /// Expires this broker's session: cut off, session closed from a second connection,
    /// reconnected (it then reports `Expired` and opens a new session).
    async fn expire(&self, zk: &ZkEnsemble) -> Result<(), Box<dyn std::error::Error>> {
        self.proxy.pause();
        let closed = self.client.close_session_at(&zk.connect_string()).await;
        self.proxy.resume();
        Ok(closed?)
    }
}

async fn start_broker(
    zk: &ZkEnsemble,
    id: BrokerId,
    channel: &MemoryBrokerChannel,
) -> Result<ZkBroker, Box<dyn std::error::Error>> {
    let proxy = TcpProxy::to_local_port(zk.client_port(1)?)?;
    let client =
        Arc::new(ZooKeeperCoordination::connect_with(&proxy.host_port(), options()).await?);
    let kzk = KafkaZkClient::new(client.clone());
    kzk.create_persistent_paths().await?;
    kzk.register_broker(
        id,
        &BrokerRegistration::plaintext("localhost", 9092, None, 0),
    )
    .await?;
    let handle = Controller::start(config(id), client.clone(), Arc::new(channel.clone()));
    Ok(ZkBroker {
        client,
        proxy,
        handle,
    })
}

async fn leader(admin: &ZooKeeperCoordination, topic: &str, p: i32) -> Option<i32> {
    let (data, _) = admin
        .get_data(&paths::partition_state(topic, p), false)
        .await
        .ok()?;
    PartitionStateZNode::from_json(&data).ok().map(|s| s.leader)
}

async fn eventually<F, Fut>(what: &str, mut f: F) -> Result<(), String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    while tokio::time::Instant::now() < deadline {
        if f().await {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(format!("timed out waiting for {what}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k1_on_zookeeper_a_broker_session_expiry_moves_its_leaderships() -> TestResult {
    if !require_zookeeper("k1_on_zookeeper_a_broker_session_expiry_moves_its_leaderships")? {
        return Ok(());
    }
    let zk = ZkEnsemble::standalone()?;
    let channel = MemoryBrokerChannel::new();
    let b1 = start_broker(&zk, 1, &channel).await?;
    b1.handle
        .wait_active(Duration::from_secs(30))
        .await
        .ok_or("broker 1 not elected")?;
    let b2 = start_broker(&zk, 2, &channel).await?;
    let b3 = start_broker(&zk, 3, &channel).await?;
    let admin_client = ZooKeeperCoordination::connect_with(&zk.connect_string(), options()).await?;
    admin::create_topic_with_assignment(
        &admin_client,
        "t",
        &BTreeMap::from([(0, vec![2, 1, 3]), (1, vec![2, 3, 1])]),
    )
    .await?;
    eventually("t led by 2", || async {
        leader(&admin_client, "t", 0).await == Some(2)
            && leader(&admin_client, "t", 1).await == Some(2)
    })
    .await?;
    b2.expire(&zk).await?;
    eventually("leaderships moved off 2", || async {
        leader(&admin_client, "t", 0).await == Some(1)
            && leader(&admin_client, "t", 1).await == Some(3)
    })
    .await?;
    for b in [&b1, &b2, &b3] {
        b.handle.shutdown();
    }
    Ok(())
}

/// The real `Controller` event loops of brokers 1 and 2 on one ZooKeeper: controller 1's
/// session expires while it is cut off, so broker 2 (not broker 1 on a new session) wins the
/// next epoch and takes broker 1's leadership; broker 1 comes back, resigns, stays a follower,
/// and a write it makes as the old controller is rejected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k6_on_zookeeper_controller_event_loops_another_broker_wins_and_the_old_one_is_fenced(
) -> TestResult {
    use ha_coordination::{CreateMode, Op};
    use kafka_controller::zk_data::{ControllerZNode, KafkaZkError};

    if !require_zookeeper(
        "k6_on_zookeeper_controller_event_loops_another_broker_wins_and_the_old_one_is_fenced",
    )? {
        return Ok(());
    }
    let zk = ZkEnsemble::standalone()?;
    let channel = MemoryBrokerChannel::new();
    let b1 = start_broker(&zk, 1, &channel).await?;
    let first = b1
        .handle
        .wait_active(Duration::from_secs(30))
        .await
        .ok_or("broker 1 not elected")?;
    let b2 = start_broker(&zk, 2, &channel).await?;
    let admin_client = ZooKeeperCoordination::connect_with(&zk.connect_string(), options()).await?;
    let admin_zk = KafkaZkClient::new(Arc::new(
        ZooKeeperCoordination::connect_with(&zk.connect_string(), options()).await?,
    ));
    let first_epoch = admin_zk.controller_epoch().await?.ok_or("no epoch")?;
    assert_eq!(first_epoch.epoch, first);
    admin::create_topic_with_assignment(&admin_client, "t", &BTreeMap::from([(0, vec![1, 2])]))
        .await?;
    eventually("t-0 led by 1", || async {
        leader(&admin_client, "t", 0).await == Some(1)
    })
    .await?;
    // Controller 1 is cut off and its session closed; it stays cut off until broker 2 has won.
    b1.proxy.pause();
    b1.client.close_session_at(&zk.connect_string()).await?;
    eventually("broker 2 controls a higher epoch", || async {
        b2.handle.status().active_epoch.is_some_and(|e| e > first)
    })
    .await?;
    let second = admin_zk.controller_epoch().await?.ok_or("no epoch")?;
    assert_eq!(second.epoch, first + 1);
    assert_eq!(b2.handle.status().active_epoch, Some(second.epoch));
    // Broker 1's registration went with its session: broker 2 moved t-0 to itself.
    eventually("t-0 led by 2", || async {
        leader(&admin_client, "t", 0).await == Some(2)
    })
    .await?;
    // Broker 1 reconnects, learns its session expired, and resigns.
    b1.proxy.resume();
    eventually("broker 1 resigned", || async {
        b1.handle.status().active_epoch.is_none()
    })
    .await?;
    let (data, _) = admin_client.get_data(paths::CONTROLLER, false).await?;
    assert_eq!(ControllerZNode::from_json(&data)?.brokerid, 2);
    assert_eq!(b2.handle.status().active_epoch, Some(second.epoch));
    // A write broker 1 makes as the epoch-`first` controller is rejected and lands nothing.
    let old = KafkaZkClient::new(b1.client.clone());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let zombie = loop {
        let r = old
            .fenced_multi(
                first_epoch,
                vec![Op::create("/zombie", Vec::new(), CreateMode::Persistent)],
            )
            .await;
        match &r {
            Err(KafkaZkError::Coordination(e))
                if e.is_session_problem() && tokio::time::Instant::now() < deadline =>
            {
                // The client is still opening its new session: poll until it has.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            _ => break r,
        }
    };
    assert!(
        matches!(zombie, Err(KafkaZkError::ControllerMoved { .. })),
        "{zombie:?}"
    );
    assert!(admin_client.exists("/zombie", false).await?.is_none());
    let (data, _) = admin_client
        .get_data(&paths::partition_state("t", 0), false)
        .await?;
    assert_eq!(
        PartitionStateZNode::from_json(&data)?.controller_epoch,
        second.epoch,
        "the partition's last writer is the new controller"
    );
    for b in [&b1, &b2] {
        b.handle.shutdown();
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k6_controller_session_expiry_on_real_zookeeper_elects_a_successor_and_fences_the_old_one(
) -> Result<(), Box<dyn std::error::Error>> {
    use futures::StreamExt;
    use ha_coordination::{CoordinationEvent, CreateMode, Op, WatchEvent, WatchEventKind};
    use kafka_controller::zk_data::{Campaign, KafkaZkError};

    if !require_zookeeper("k6_controller_session_expiry_on_real_zookeeper")? {
        return Ok(());
    }
    let zk = ZkEnsemble::standalone()?;
    let proxy = TcpProxy::to_local_port(zk.client_port(1)?)?;
    let c1 = Arc::new(ZooKeeperCoordination::connect_with(&proxy.host_port(), options()).await?);
    let c2 = Arc::new(ZooKeeperCoordination::connect_with(&zk.connect_string(), options()).await?);
    let (b1, b2) = (
        KafkaZkClient::new(c1.clone()),
        KafkaZkClient::new(c2.clone()),
    );
    b1.create_persistent_paths().await?;
    let Campaign::Elected(first) = b1.campaign(1, 1).await? else {
        panic!("broker 1 must win an empty cluster");
    };
    assert_eq!(
        b2.campaign(2, 2).await?,
        Campaign::Lost {
            controller: Some(1)
        }
    );
    let mut events = c2.events();
    assert!(b2.controller(true).await?.is_some());
    // Broker 1 (the controller) is cut off and its session ends.
    proxy.pause();
    c1.close_session_at(&zk.connect_string()).await?;
    proxy.resume();
    // Broker 2 sees /controller vanish and takes over with the next epoch.
    loop {
        match tokio::time::timeout(Duration::from_secs(20), events.next()).await? {
            Some(CoordinationEvent::Watch(WatchEvent {
                kind: WatchEventKind::NodeDeleted,
                path,
            })) if path == paths::CONTROLLER => break,
            Some(CoordinationEvent::Session(_)) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    let Campaign::Elected(second) = b2.campaign(2, 3).await? else {
        panic!("broker 2 must win after the controller's session expired");
    };
    assert_eq!(second.epoch, first.epoch + 1);
    // Broker 1's client renews its session; its writes as the old controller are fenced.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let zombie = loop {
        let r = b1
            .fenced_multi(
                first,
                vec![Op::create("/zombie", Vec::new(), CreateMode::Persistent)],
            )
            .await;
        match &r {
            Err(KafkaZkError::Coordination(e))
                if e.is_session_problem() && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            _ => break r,
        }
    };
    assert!(
        matches!(zombie, Err(KafkaZkError::ControllerMoved { .. })),
        "{zombie:?}"
    );
    assert!(c2.exists("/zombie", false).await?.is_none());
    Ok(())
}
