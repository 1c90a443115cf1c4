//! The `IsrWriter` conformance suite on `ZkIsrWriter`, over `MemoryCoordination` and over a
//! real ZooKeeper started by `ha-testkit` (which fails under `CI` when ZooKeeper is missing
//! and skips otherwise). The builder plays the controller on the partition-state znodes.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ha_coordination::{
    Coordination, CreateMode, MemoryCoordination, ZooKeeperCoordination, ZooKeeperOptions,
    ANY_VERSION,
};
use ha_testkit::{require_zookeeper, ZkEnsemble};
use kafka_broker::glue::{IsrChangeQueue, ZkIsrWriter};
use kafka_controller::zk_data::{paths, PartitionStateZNode};
use kafka_replication::isr::{LeaderAndIsr, TopicPartition};
use kafka_replication::testing::isr_writer::{self, IsrWriterBuilder};
use kafka_replication::testing::BuilderError;

/// `ZkIsrWriter`s on one coordination client; the controller's writes go through it too.
struct OnCoordination(Arc<dyn Coordination>);

async fn create_if_missing(coord: &dyn Coordination, path: &str) -> Result<(), BuilderError> {
    match coord.create(path, b"", CreateMode::Persistent).await {
        Err(e) if !e.is_node_exists() => Err(e.into()),
        _ => Ok(()),
    }
}

#[async_trait]
impl IsrWriterBuilder for OnCoordination {
    type Writer = ZkIsrWriter;

    async fn build(&self) -> Result<ZkIsrWriter, BuilderError> {
        Ok(ZkIsrWriter::new(
            self.0.clone(),
            IsrChangeQueue::new(tokio::time::Instant::now()),
        )
        .with_retries(3, Duration::from_millis(10)))
    }

    async fn controller_write(
        &self,
        _: &mut ZkIsrWriter,
        tp: &TopicPartition,
        state: &LeaderAndIsr,
    ) -> Result<LeaderAndIsr, BuilderError> {
        let coord = self.0.as_ref();
        for path in paths::PERSISTENT_PATHS {
            create_if_missing(coord, path).await?;
        }
        for path in [
            paths::topic(&tp.topic),
            paths::topic_partitions(&tp.topic),
            paths::partition(&tp.topic, tp.partition),
        ] {
            create_if_missing(coord, &path).await?;
        }
        let path = paths::partition_state(&tp.topic, tp.partition);
        let json = PartitionStateZNode::new(state.leader, state.leader_epoch, 1, state.isr.clone())
            .to_json()?;
        let version = match coord.exists(&path, false).await? {
            Some(_) => coord.set_data(&path, &json, ANY_VERSION).await?.version,
            None => {
                coord
                    .create(&path, &json, CreateMode::Persistent)
                    .await?
                    .1
                    .version
            }
        };
        Ok(LeaderAndIsr {
            partition_epoch: version,
            ..state.clone()
        })
    }

    async fn stored(
        &self,
        _: &mut ZkIsrWriter,
        tp: &TopicPartition,
    ) -> Result<Option<LeaderAndIsr>, BuilderError> {
        let path = paths::partition_state(&tp.topic, tp.partition);
        match self.0.get_data(&path, false).await {
            Ok((data, stat)) => {
                let s = PartitionStateZNode::from_json(&data)?;
                Ok(Some(LeaderAndIsr {
                    leader: s.leader,
                    leader_epoch: s.leader_epoch,
                    isr: s.isr,
                    partition_epoch: stat.version,
                }))
            }
            Err(e) if e.is_no_node() => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

#[tokio::test]
async fn zk_isr_writer_on_memory_coordination_passes_the_isr_writer_suite(
) -> Result<(), Box<dyn std::error::Error>> {
    isr_writer::test_all(&OnCoordination(Arc::new(MemoryCoordination::new()))).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zk_isr_writer_on_real_zookeeper_passes_the_isr_writer_suite(
) -> Result<(), Box<dyn std::error::Error>> {
    if !require_zookeeper("zk_isr_writer_on_real_zookeeper_passes_the_isr_writer_suite")? {
        return Ok(());
    }
    let zk = ZkEnsemble::standalone()?;
    let options = ZooKeeperOptions::new()
        .with_session_timeout(Duration::from_secs(15))
        .with_connection_timeout(Duration::from_secs(10));
    let coord = ZooKeeperCoordination::connect_with(&zk.connect_string(), options).await?;
    isr_writer::test_all(&OnCoordination(Arc::new(coord))).await?;
    Ok(())
}
