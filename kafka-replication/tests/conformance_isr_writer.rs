//! The `IsrWriter` conformance suite on `MemoryIsrWriter` (kafka-broker runs it on
//! `ZkIsrWriter` over `MemoryCoordination` and over a real ZooKeeper).

use async_trait::async_trait;
use kafka_replication::isr::{LeaderAndIsr, MemoryIsrWriter, TopicPartition};
use kafka_replication::testing::isr_writer::{self, IsrWriterBuilder};
use kafka_replication::testing::{BuilderError, ConformanceError};

struct Memory;

#[async_trait]
impl IsrWriterBuilder for Memory {
    type Writer = MemoryIsrWriter;

    async fn build(&self) -> Result<MemoryIsrWriter, BuilderError> {
        Ok(MemoryIsrWriter::new())
    }

    async fn controller_write(
        &self,
        w: &mut MemoryIsrWriter,
        tp: &TopicPartition,
        state: &LeaderAndIsr,
    ) -> Result<LeaderAndIsr, BuilderError> {
        let epoch = w.get(tp).map_or(0, |s| s.partition_epoch + 1);
        let stored = LeaderAndIsr {
            partition_epoch: epoch,
            ..state.clone()
        };
        w.set(tp.clone(), stored.clone());
        Ok(stored)
    }

    async fn stored(
        &self,
        w: &mut MemoryIsrWriter,
        tp: &TopicPartition,
    ) -> Result<Option<LeaderAndIsr>, BuilderError> {
        Ok(w.get(tp).cloned())
    }
}

#[test]
fn memory_isr_writer_passes_the_isr_writer_suite() -> Result<(), ConformanceError> {
    futures::executor::block_on(isr_writer::test_all(&Memory))
}
