//! The `BrokerChannel` conformance suite on `TcpBrokerChannel`, to a broker's `KafkaApis`
//! behind the network server on a loopback port; a restarted broker listens on a new port.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kafka_broker::server::{Server, ServerConfig, ServerHandle};
use kafka_broker::{
    AddressBook, KafkaApis, LinkFactory, ReplicaDriver, TcpBrokerChannel, TcpLeaderLink,
};
use kafka_controller::context::{BrokerEndpoint, BrokerId, BrokerInfo};
use kafka_controller::testing::broker_channel::{self, BrokerChannelBuilder};
use kafka_controller::testing::{BuilderError, ConformanceError};
use kafka_replication::isr::MemoryIsrWriter;
use kafka_replication::log::MemoryLog;
use kafka_replication::partition::PartitionConfig;
use kafka_replication::replica_fetcher::FetcherConfig;
use kafka_replication::replica_manager::ReplicaManager;

type Apis = KafkaApis<MemoryLog, TcpLeaderLink, MemoryIsrWriter>;

/// A broker: its request handlers and its server.
struct Broker {
    apis: Arc<Apis>,
    server: ServerHandle,
}

/// Starts broker `id` on a free loopback port.
async fn start(id: BrokerId) -> Result<(Broker, BrokerInfo), BuilderError> {
    let manager = ReplicaManager::new(
        id,
        PartitionConfig::default(),
        0,
        Box::new(|_| Ok(MemoryLog::new())),
    );
    let nowhere: AddressBook = Arc::new(|_| None);
    let links: LinkFactory<TcpLeaderLink> =
        Box::new(move |to| TcpLeaderLink::new(id, to, nowhere.clone(), Duration::from_secs(5)));
    let driver = ReplicaDriver::start(
        manager,
        links,
        MemoryIsrWriter::new(),
        FetcherConfig::default(),
    );
    let apis = Arc::new(KafkaApis::new(id, "conformance", driver));
    let server = Server::bind(
        "127.0.0.1:0",
        ServerConfig::default().with_broker(id),
        apis.clone(),
    )
    .await?;
    let mut info = BrokerInfo::new(id, 7);
    info.endpoints.push(BrokerEndpoint {
        listener: "PLAINTEXT".into(),
        host: "127.0.0.1".into(),
        port: i32::from(server.local_addr().port()),
        security_protocol: 0,
    });
    Ok((Broker { apis, server }, info))
}

struct Tcp;

#[async_trait]
impl BrokerChannelBuilder for Tcp {
    type Channel = TcpBrokerChannel;
    type Broker = Broker;

    async fn build(
        &self,
        controller: BrokerId,
        broker: BrokerId,
    ) -> Result<(TcpBrokerChannel, Broker, BrokerInfo), BuilderError> {
        let (b, info) = start(broker).await?;
        let channel = TcpBrokerChannel::new(controller, "PLAINTEXT", Duration::from_secs(5));
        Ok((channel, b, info))
    }

    async fn stop(
        &self,
        _: &TcpBrokerChannel,
        broker: Broker,
        _: &BrokerInfo,
    ) -> Result<(), BuilderError> {
        broker.server.shutdown().await;
        broker.apis.driver().shutdown().await;
        Ok(())
    }

    async fn restart(
        &self,
        _: &TcpBrokerChannel,
        info: &BrokerInfo,
    ) -> Result<(Broker, BrokerInfo), BuilderError> {
        start(info.id).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_broker_channel_passes_the_broker_channel_suite() -> Result<(), ConformanceError> {
    broker_channel::test_all(&Tcp).await
}
