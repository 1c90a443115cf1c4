//! `ZkIsrWriter` (Kafka's `ReplicationUtils.updateLeaderAndIsr`, K1.3): the leader's ISR compare-and-set on the
//! partition-state znode, on `MemoryCoordination` and on a real ZooKeeper started by
//! `ha-testkit` (which fails under `CI` when ZooKeeper is missing and skips otherwise).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ha_coordination::{
    Coordination, CoordinationError, CoordinationLayer, CreateMode, MemoryCoordination, Stat,
    ZooKeeperCoordination, ZooKeeperOptions, ANY_VERSION,
};
use ha_testkit::{require_zookeeper, ZkEnsemble};
use kafka_broker::glue::{propagate_once, IsrChangeQueue, IsrPropagationConfig, ZkIsrWriter};
use kafka_controller::zk_data::{
    paths, Campaign, IsrChangeNotification, KafkaZkClient, KafkaZkError, PartitionStateZNode,
    TopicPartitionEntry,
};
use kafka_replication::isr::{IsrProposal, IsrResult, IsrWriter, LeaderAndIsr, TopicPartition};

type TestResult = Result<(), Box<dyn std::error::Error>>;

const STATE: &str = r#"{"version":1,"leader":1,"leader_epoch":3,"controller_epoch":7,"isr":[1,2,3],"zz_future":{"x":1}}"#;

/// Creates Kafka's top-level paths and `/brokers/topics/<topic>/partitions/0/state` as a
/// controller would, at version 0.
async fn create_partition(coord: &dyn Coordination, topic: &str) -> TestResult {
    for path in paths::PERSISTENT_PATHS {
        match coord.create(path, b"", CreateMode::Persistent).await {
            Err(e) if !e.is_node_exists() => return Err(e.into()),
            _ => {}
        }
    }
    for path in [
        paths::topic(topic),
        paths::topic_partitions(topic),
        paths::partition(topic, 0),
    ] {
        coord.create(&path, b"", CreateMode::Persistent).await?;
    }
    coord
        .create(
            &paths::partition_state(topic, 0),
            STATE.as_bytes(),
            CreateMode::Persistent,
        )
        .await?;
    Ok(())
}

fn shrink(topic: &str, isr: Vec<i32>, partition_epoch: i32) -> IsrProposal {
    IsrProposal {
        topic_partition: TopicPartition::new(topic, 0),
        proposed: LeaderAndIsr {
            leader: 1,
            leader_epoch: 3,
            isr,
            partition_epoch,
        },
    }
}

fn writer(coord: Arc<dyn Coordination>) -> ZkIsrWriter {
    ZkIsrWriter::new(coord, IsrChangeQueue::new(tokio::time::Instant::now()))
        .with_retries(3, Duration::from_millis(10))
}

async fn stored(coord: &dyn Coordination, topic: &str) -> Result<(String, i32), CoordinationError> {
    let (data, stat) = coord
        .get_data(&paths::partition_state(topic, 0), false)
        .await?;
    Ok((String::from_utf8_lossy(&data).into_owned(), stat.version))
}

/// K1.3: the CAS at the partition epoch succeeds, returns the next epoch, keeps leader,
/// leader epoch, the deciding controller's epoch and unknown fields, and records the change.
async fn cas_success(coord: Arc<dyn Coordination>, topic: &str) -> TestResult {
    create_partition(coord.as_ref(), topic).await?;
    let mut w = writer(coord.clone());
    let tp = TopicPartition::new(topic, 0);
    w.set_controller_epoch(tp.clone(), 7);
    let r = w.propose(&shrink(topic, vec![1, 2], 0)).await;
    assert_eq!(r, IsrResult::Committed { partition_epoch: 1 });
    let (json, version) = stored(coord.as_ref(), topic).await?;
    assert_eq!(
        json,
        r#"{"version":1,"leader":1,"leader_epoch":3,"controller_epoch":7,"isr":[1,2],"zz_future":{"x":1}}"#
    );
    assert_eq!(version, 1);
    assert_eq!(w.changes().pending(), vec![tp]);
    // The next change is based on the new epoch.
    let r = w.propose(&shrink(topic, vec![1], 1)).await;
    assert_eq!(r, IsrResult::Committed { partition_epoch: 2 });

    // A controller's write based on the epoch it saw before the leader's changes is refused.
    let zk = KafkaZkClient::new(coord.clone());
    let Campaign::Elected(epoch) = zk.campaign(9, 0).await? else {
        return Err("the controller must be elected".into());
    };
    let stale = PartitionStateZNode::new(2, 4, epoch.epoch, vec![2]);
    let refused = zk.set_partition_state(epoch, topic, 0, &stale, 0).await;
    assert!(
        matches!(&refused, Err(KafkaZkError::Coordination(e)) if e.is_bad_version()),
        "{refused:?}"
    );

    // As Kafka's `ReplicaManager.maybePropagateIsrChanges`: the recorded change goes out as one sequential notification.
    let config = IsrPropagationConfig::default();
    let later = tokio::time::Instant::now() + Duration::from_secs(6);
    let path = propagate_once(&zk, w.changes(), &config, later)
        .await
        .ok_or("no notification written")?;
    assert!(
        path.starts_with("/isr_change_notification/isr_change_"),
        "{path}"
    );
    let (data, _) = coord.get_data(&path, false).await?;
    let n = IsrChangeNotification::from_json(&data)?;
    assert_eq!(n.partitions, vec![TopicPartitionEntry::new(topic, 0)]);
    assert!(w.changes().pending().is_empty());
    Ok(())
}

/// K1.3: a controller wrote the state meanwhile (new leader epoch); the leader's CAS at the
/// old epoch is a conflict reporting the stored state, and nothing is written or recorded.
async fn conflict_with_controller(coord: Arc<dyn Coordination>, topic: &str) -> TestResult {
    create_partition(coord.as_ref(), topic).await?;
    let controller = PartitionStateZNode::new(2, 4, 8, vec![2, 3]);
    coord
        .set_data(&paths::partition_state(topic, 0), &controller.to_json()?, 0)
        .await?;
    let mut w = writer(coord.clone());
    let r = w.propose(&shrink(topic, vec![1, 2], 0)).await;
    assert_eq!(
        r,
        IsrResult::Conflict {
            current: Some(LeaderAndIsr {
                leader: 2,
                leader_epoch: 4,
                isr: vec![2, 3],
                partition_epoch: 1,
            })
        }
    );
    assert_eq!(stored(coord.as_ref(), topic).await?.1, 1);
    assert!(w.changes().pending().is_empty());
    Ok(())
}

/// Applies the first `set_data` and then reports `ConnectionLoss`, as when the connection
/// drops before the answer arrives; with `overwrite`, a controller writes that content in
/// between.
struct LoseFirstAnswer {
    inner: Arc<dyn Coordination>,
    lost: AtomicBool,
    overwrite: Option<Vec<u8>>,
}

#[async_trait]
impl CoordinationLayer for LoseFirstAnswer {
    fn inner(&self) -> &dyn Coordination {
        self.inner.as_ref()
    }

    async fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: i32,
    ) -> Result<Stat, CoordinationError> {
        let stat = self.inner.set_data(path, data, version).await?;
        if !self.lost.swap(true, Ordering::SeqCst) {
            if let Some(other) = &self.overwrite {
                self.inner.set_data(path, other, ANY_VERSION).await?;
            }
            return Err(CoordinationError::ConnectionLoss);
        }
        Ok(stat)
    }
}

/// Kafka's `ReplicationUtils.checkLeaderAndIsrZkData`: the first write applied but its answer was
/// lost; the retry meets BADVERSION, re-reads exactly what it wrote and counts as success with
/// the new epoch. A different content after BADVERSION stays a conflict.
async fn retried_write_that_applied(coord: Arc<dyn Coordination>, topic: &str) -> TestResult {
    create_partition(coord.as_ref(), topic).await?;
    let flaky: Arc<dyn Coordination> = Arc::new(LoseFirstAnswer {
        inner: coord.clone(),
        lost: AtomicBool::new(false),
        overwrite: None,
    });
    let mut w = writer(flaky);
    let r = w.propose(&shrink(topic, vec![1, 3], 0)).await;
    assert_eq!(r, IsrResult::Committed { partition_epoch: 1 });
    assert_eq!(stored(coord.as_ref(), topic).await?.1, 1);
    assert_eq!(w.changes().pending(), vec![TopicPartition::new(topic, 0)]);

    // The same lost answer, but a controller overwrote the state before the retry.
    let flaky: Arc<dyn Coordination> = Arc::new(LoseFirstAnswer {
        inner: coord.clone(),
        lost: AtomicBool::new(false),
        overwrite: Some(PartitionStateZNode::new(2, 4, 8, vec![2]).to_json()?),
    });
    let mut w = writer(flaky);
    let r = w.propose(&shrink(topic, vec![1], 1)).await;
    assert_eq!(
        r,
        IsrResult::Conflict {
            current: Some(LeaderAndIsr {
                leader: 2,
                leader_epoch: 4,
                isr: vec![2],
                partition_epoch: 3,
            })
        }
    );
    assert!(w.changes().pending().is_empty());
    Ok(())
}

#[tokio::test]
async fn k1_3_zk_isr_writer_cas_success_on_memory() -> TestResult {
    cas_success(Arc::new(MemoryCoordination::new()), "t").await
}

#[tokio::test]
async fn k1_3_zk_isr_writer_conflict_with_controller_write_on_memory() -> TestResult {
    conflict_with_controller(Arc::new(MemoryCoordination::new()), "t").await
}

#[tokio::test]
async fn check_leader_and_isr_zk_data_retried_write_that_applied_on_memory() -> TestResult {
    retried_write_that_applied(Arc::new(MemoryCoordination::new()), "t").await
}

#[tokio::test]
async fn k1_3_missing_partition_or_stale_leader_epoch_is_a_conflict_on_memory() -> TestResult {
    let coord: Arc<dyn Coordination> = Arc::new(MemoryCoordination::new());
    let mut w = writer(coord.clone());
    assert_eq!(
        w.propose(&shrink("absent", vec![1], 0)).await,
        IsrResult::Conflict { current: None }
    );
    create_partition(coord.as_ref(), "t").await?;
    let mut stale = shrink("t", vec![1], 0);
    stale.proposed.leader_epoch = 2;
    assert!(matches!(
        w.propose(&stale).await,
        IsrResult::Conflict {
            current: Some(LeaderAndIsr {
                leader_epoch: 3,
                ..
            })
        }
    ));
    // Garbage in the znode is a typed error, reported to the leader as a bare conflict.
    coord
        .set_data(&paths::partition_state("t", 0), b"{not json", ANY_VERSION)
        .await?;
    assert!(w.try_propose(&shrink("t", vec![1], 1)).await.is_err());
    assert_eq!(
        w.propose(&shrink("t", vec![1], 1)).await,
        IsrResult::Conflict { current: None }
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k1_3_zk_isr_writer_on_real_zookeeper() -> TestResult {
    if !require_zookeeper("k1_3_zk_isr_writer_on_real_zookeeper")? {
        return Ok(());
    }
    let zk = ZkEnsemble::standalone()?;
    let options = ZooKeeperOptions::new()
        .with_session_timeout(Duration::from_secs(15))
        .with_connection_timeout(Duration::from_secs(10));
    let coord: Arc<dyn Coordination> =
        Arc::new(ZooKeeperCoordination::connect_with(&zk.connect_string(), options).await?);
    cas_success(coord.clone(), "a").await?;
    conflict_with_controller(coord.clone(), "b").await?;
    retried_write_that_applied(coord, "c").await?;
    Ok(())
}

#[tokio::test]
async fn k4_3_isr_write_carries_the_controller_epoch_of_the_leadership_decision() -> TestResult {
    let coord: Arc<dyn Coordination> = Arc::new(MemoryCoordination::new());
    create_partition(coord.as_ref(), "t").await?;
    let tp = TopicPartition::new("t", 0);
    let mut w = writer(coord.clone());
    // Not told by a LeaderAndIsr: the stored controller epoch stays.
    w.propose(&shrink("t", vec![1, 2], 0)).await;
    let stored_state = |json: String| PartitionStateZNode::from_json(json.as_bytes());
    let s = stored_state(stored(coord.as_ref(), "t").await?.0)?;
    assert_eq!(s.controller_epoch, 7);
    // Made leader by the LeaderAndIsr of controller epoch 8: the write carries 8.
    w.set_controller_epoch(tp.clone(), 8);
    w.propose(&shrink("t", vec![1], 1)).await;
    let s = stored_state(stored(coord.as_ref(), "t").await?.0)?;
    assert_eq!((s.controller_epoch, s.isr), (8, vec![1]));
    w.forget(&tp);
    Ok(())
}

#[tokio::test]
async fn k1_3_partition_leader_shrinks_its_isr_through_the_zk_isr_writer() -> TestResult {
    use kafka_replication::log::MemoryLog;
    use kafka_replication::partition::{Partition, PartitionConfig, PartitionState};

    let coord: Arc<dyn Coordination> = Arc::new(MemoryCoordination::new());
    create_partition(coord.as_ref(), "t").await?;
    let tp = TopicPartition::new("t", 0);
    let mut p = Partition::new(tp.clone(), 1, MemoryLog::new(), PartitionConfig::default());
    // The LeaderAndIsr of controller epoch 7 made broker 1 leader at partition epoch 0.
    p.make_leader(
        0,
        &PartitionState {
            controller_epoch: 7,
            leader: 1,
            leader_epoch: 3,
            isr: vec![1, 2, 3],
            partition_epoch: 0,
            replicas: vec![1, 2, 3],
        },
    )?;
    let mut w = writer(coord.clone());
    w.set_controller_epoch(tp.clone(), p.controller_epoch());
    // Followers 2 and 3 never fetch: after replica.lag.time.max.ms they are out.
    assert!(p.maybe_shrink_isr(30_001));
    let proposal = p.poll_isr_proposal().ok_or("no proposal")?;
    p.on_isr_result(&proposal, w.propose(&proposal).await);
    assert_eq!(p.isr(), &[1]);
    assert_eq!(p.partition_epoch(), 1);
    let s = PartitionStateZNode::from_json(stored(coord.as_ref(), "t").await?.0.as_bytes())?;
    assert_eq!(
        (s.leader, s.leader_epoch, s.controller_epoch, s.isr),
        (1, 3, 7, vec![1])
    );
    assert_eq!(w.changes().pending(), vec![tp]);
    Ok(())
}

/// Found by the real-core simulation in `ha-tests` (`Liveness`): a write lost with the
/// connection used to be retried three times, 200 ms apart, and then reported as an unknown
/// outcome, which left the leader waiting for a LeaderAndIsr that might never come. By
/// default the writer now waits out a disconnection for as long as the session lives, as
/// Kafka's `ZooKeeperClient` does; once the session has ended the outcome is unknown.
#[tokio::test(start_paused = true)]
async fn k1_3_isr_write_waits_out_a_disconnection_while_the_session_lives() -> TestResult {
    let tree = ha_coordination::MemoryTree::new();
    let admin = tree.connect();
    create_partition(&admin, "t").await?;
    let leader = tree.connect();
    let session = leader.session_id();
    let w = ZkIsrWriter::new(
        Arc::new(leader.clone()),
        IsrChangeQueue::new(tokio::time::Instant::now()),
    );
    tree.suspend(session);
    let write = tokio::spawn(async move { w.try_propose(&shrink("t", vec![1, 2], 0)).await });
    // Ten seconds cut off, far past the old 600 ms: the write is still waiting.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(!write.is_finished());
    tree.resume(session);
    let result = write.await??;
    assert_eq!(result, IsrResult::Committed { partition_epoch: 1 });
    assert_eq!(stored(&admin, "t").await?.1, 1);

    // Cut off again, and the session expires meanwhile: the outcome is unknown.
    let w = ZkIsrWriter::new(
        Arc::new(leader.clone()),
        IsrChangeQueue::new(tokio::time::Instant::now()),
    );
    let session = leader.session_id();
    tree.suspend(session);
    let write = tokio::spawn(async move { w.try_propose(&shrink("t", vec![1], 1)).await });
    tokio::time::sleep(Duration::from_secs(1)).await;
    tree.expire(session);
    assert!(write.await?.is_err(), "the session ended: outcome unknown");
    assert_eq!(stored(&admin, "t").await?.1, 1, "nothing written");
    Ok(())
}
