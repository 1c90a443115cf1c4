//! The `LeaderLink` conformance suite on `MemoryLeaderLink` (kafka-broker runs it on
//! `TcpLeaderLink` to a broker's server).

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use kafka_replication::isr::BrokerId;
use kafka_replication::log::MemoryLog;
use kafka_replication::partition::PartitionConfig;
use kafka_replication::replica_fetcher::MemoryLeaderLink;
use kafka_replication::replica_manager::ReplicaManager;
use kafka_replication::testing::leader_link::{self, LeaderLinkBuilder};
use kafka_replication::testing::{BuilderError, ConformanceError};

type Manager = Arc<Mutex<ReplicaManager<MemoryLog>>>;

struct Memory;

#[async_trait]
impl LeaderLinkBuilder for Memory {
    type Link = MemoryLeaderLink<MemoryLog>;
    type Leader = Manager;

    async fn build(
        &self,
        leader: BrokerId,
        _follower: BrokerId,
    ) -> Result<(Manager, MemoryLeaderLink<MemoryLog>), BuilderError> {
        let manager = Arc::new(Mutex::new(ReplicaManager::new(
            leader,
            PartitionConfig::default(),
            0,
            Box::new(|_| Ok(MemoryLog::new())),
        )));
        let link = MemoryLeaderLink::new(manager.clone(), Arc::new(AtomicU64::new(0)));
        Ok((manager, link))
    }

    fn with_manager(
        &self,
        leader: &Manager,
        f: &mut (dyn FnMut(&mut ReplicaManager<MemoryLog>, u64) + Send),
    ) {
        f(
            &mut leader.lock().unwrap_or_else(PoisonError::into_inner),
            0,
        );
    }
}

#[tokio::test]
async fn memory_leader_link_passes_the_leader_link_suite() -> Result<(), ConformanceError> {
    leader_link::test_all(&Memory).await
}
