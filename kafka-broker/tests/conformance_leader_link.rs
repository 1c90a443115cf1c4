//! The `LeaderLink` conformance suite on `TcpLeaderLink`, to a leader broker's `KafkaApis`
//! behind the network server on a loopback port; stopping the leader shuts its server down.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kafka_broker::server::{Server, ServerConfig, ServerHandle};
use kafka_broker::{AddressBook, KafkaApis, LinkFactory, ReplicaDriver, TcpLeaderLink};
use kafka_replication::isr::{BrokerId, MemoryIsrWriter};
use kafka_replication::log::MemoryLog;
use kafka_replication::partition::PartitionConfig;
use kafka_replication::replica_fetcher::FetcherConfig;
use kafka_replication::replica_manager::ReplicaManager;
use kafka_replication::testing::leader_link::{self, LeaderLinkBuilder};
use kafka_replication::testing::{BuilderError, ConformanceError};

type Apis = KafkaApis<MemoryLog, TcpLeaderLink, MemoryIsrWriter>;

/// A leader broker: its request handlers and its server.
struct Broker {
    apis: Arc<Apis>,
    server: ServerHandle,
}

struct Tcp;

#[async_trait]
impl LeaderLinkBuilder for Tcp {
    type Link = TcpLeaderLink;
    type Leader = Broker;

    async fn build(
        &self,
        leader: BrokerId,
        follower: BrokerId,
    ) -> Result<(Broker, TcpLeaderLink), BuilderError> {
        let manager = ReplicaManager::new(
            leader,
            PartitionConfig::default(),
            0,
            Box::new(|_| Ok(MemoryLog::new())),
        );
        // The leader follows nobody in these cases: its own links go nowhere.
        let nowhere: AddressBook = Arc::new(|_| None);
        let links: LinkFactory<TcpLeaderLink> = Box::new(move |to| {
            TcpLeaderLink::new(leader, to, nowhere.clone(), Duration::from_secs(5))
        });
        let driver = ReplicaDriver::start(
            manager,
            links,
            MemoryIsrWriter::new(),
            FetcherConfig::default(),
        );
        let apis = Arc::new(KafkaApis::new(leader, "conformance", driver));
        let server = Server::bind(
            "127.0.0.1:0",
            ServerConfig::default().with_broker(leader),
            apis.clone(),
        )
        .await?;
        let addr = server.local_addr();
        let book: AddressBook = Arc::new(move |b| (b == leader).then_some(addr));
        let link = TcpLeaderLink::new(follower, leader, book, Duration::from_secs(5));
        Ok((Broker { apis, server }, link))
    }

    fn with_manager(
        &self,
        leader: &Broker,
        f: &mut (dyn FnMut(&mut ReplicaManager<MemoryLog>, u64) + Send),
    ) {
        leader.apis.driver().with_manager(|m, now| f(m, now));
    }

    async fn stop(&self, leader: Broker) -> Option<Result<(), BuilderError>> {
        leader.server.shutdown().await;
        leader.apis.driver().shutdown().await;
        Some(Ok(()))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_leader_link_passes_the_leader_link_suite() -> Result<(), ConformanceError> {
    leader_link::test_all(&Tcp).await
}
