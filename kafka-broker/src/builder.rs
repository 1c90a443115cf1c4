//! [`Broker`]: one broker's data path in a few lines — a `ReplicaManager` over the logs of a
//! [`LogFactory`], its [`ReplicaDriver`] with fetchers over [`TcpLeaderLink`]s, the
//! [`KafkaApis`] handler, and the K3 network server in front.
//!
//! The controller side (registration, campaign, LeaderAndIsr) is not here: whoever plays the
//! controller sends LeaderAndIsr / UpdateMetadata / StopReplica to the broker's listener, or
//! calls [`ReplicaDriver::with_manager`] in-process.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kafka_replication::isr::{IsrWriter, MemoryIsrWriter};
use kafka_replication::log::{LogStorage, RetentionPolicy};
use kafka_replication::partition::PartitionConfig;
use kafka_replication::replica_fetcher::FetcherConfig;
use kafka_replication::replica_manager::{LogFactory, ReplicaManager};

use super::{
    AddressBook, KafkaApis, LeadershipListener, LinkFactory, ReplicaDriver, TcpLeaderLink,
};
use crate::server::{RequestHandler, Server, ServerConfig, ServerError, ServerHandle};

/// An [`IsrWriter`] as a [`Broker`] holds it. The writer itself moves into the replication
/// driver; what it needs to hear from the request handler goes through the listener it hands
/// out here, shared with it.
pub trait BrokerIsrWriter: IsrWriter + 'static {
    /// The listener the broker tells every leadership change, if the writer wants them
    /// (`glue::ZkIsrWriter` does: its writes carry the controller epoch).
    fn leadership(&self) -> Option<Arc<dyn LeadershipListener>> {
        None
    }
}

/// The in-memory writer of tests needs no controller epochs.
impl BrokerIsrWriter for MemoryIsrWriter {}

/// Settings of a [`Broker`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BrokerConfig {
    /// The broker id.
    pub id: i32,
    /// Where to listen (port 0 picks one).
    pub listen: SocketAddr,
    /// The cluster id answered in Metadata.
    pub cluster_id: String,
    /// `replica.lag.time.max.ms`, `min.insync.replicas`.
    pub partition: PartitionConfig,
    /// `replica.fetch.*`.
    pub fetcher: FetcherConfig,
    /// How long a follower waits for one answer from its leader before reconnecting.
    pub leader_link_timeout: Duration,
    /// The network layer: `num.network.threads`, `num.io.threads`, queue and frame limits
    /// (its `broker` is overwritten with `id`).
    pub server: ServerConfig,
    /// `log.retention.ms`, `log.retention.bytes` (default: keep everything).
    pub retention: RetentionPolicy,
    /// `log.retention.check.interval.ms` (Kafka's default 300 000).
    pub retention_check_interval_ms: u64,
}

impl BrokerConfig {
    /// Sets [`id`](Self::id).
    #[must_use]
    pub fn with_id(mut self, id: i32) -> Self {
        self.id = id;
        self
    }

    /// Sets [`listen`](Self::listen).
    #[must_use]
    pub fn with_listen(mut self, listen: SocketAddr) -> Self {
        self.listen = listen;
        self
    }

    /// Sets [`cluster_id`](Self::cluster_id).
    #[must_use]
    pub fn with_cluster_id(mut self, cluster_id: String) -> Self {
        self.cluster_id = cluster_id;
        self
    }

    /// Sets [`partition`](Self::partition).
    #[must_use]
    pub fn with_partition(mut self, partition: PartitionConfig) -> Self {
        self.partition = partition;
        self
    }

    /// Sets [`fetcher`](Self::fetcher).
    #[must_use]
    pub fn with_fetcher(mut self, fetcher: FetcherConfig) -> Self {
        self.fetcher = fetcher;
        self
    }

    /// Sets [`leader_link_timeout`](Self::leader_link_timeout).
    #[must_use]
    pub fn with_leader_link_timeout(mut self, leader_link_timeout: Duration) -> Self {
        self.leader_link_timeout = leader_link_timeout;
        self
    }
}

impl BrokerConfig {
    /// Broker `id` on `listen`, with Kafka's defaults for the rest.
    pub fn new(id: i32, listen: SocketAddr) -> Self {
        BrokerConfig {
            id,
            listen,
            cluster_id: "ha-blocks".to_owned(),
            partition: PartitionConfig::default(),
            fetcher: FetcherConfig::default(),
            leader_link_timeout: Duration::from_secs(30),
            server: ServerConfig::default(),
            retention: RetentionPolicy::keep_all(),
            retention_check_interval_ms: 300_000,
        }
    }

    /// With this retention policy, checked every `check_interval_ms`.
    pub fn with_retention(mut self, policy: RetentionPolicy, check_interval_ms: u64) -> Self {
        self.retention = policy;
        self.retention_check_interval_ms = check_interval_ms;
        self
    }
}

/// A running broker.
pub struct Broker<L, W> {
    apis: Arc<KafkaApis<L, TcpLeaderLink, W>>,
    server: ServerHandle,
}

impl<L, W> Broker<L, W>
where
    L: LogStorage + Send + 'static,
    W: BrokerIsrWriter,
{
    /// Starts a broker: logs from `new_log`, ISR changes to `isr_writer` (which hears every
    /// leadership change through its [`BrokerIsrWriter::leadership`] listener), leaders found
    /// in `addresses`.
    pub async fn start(
        config: BrokerConfig,
        new_log: LogFactory<L>,
        isr_writer: W,
        addresses: AddressBook,
    ) -> Result<Self, ServerError> {
        Self::start_with_handler(config, new_log, isr_writer, addresses, |apis| apis).await
    }

    /// As [`start`](Self::start), with `handler` put in front of the [`KafkaApis`]: it is
    /// given them and returns what the server dispatches requests to (for example a wrapper
    /// that creates unknown topics before answering Metadata).
    pub async fn start_with_handler<H: RequestHandler>(
        config: BrokerConfig,
        new_log: LogFactory<L>,
        isr_writer: W,
        addresses: AddressBook,
        handler: impl FnOnce(Arc<KafkaApis<L, TcpLeaderLink, W>>) -> Arc<H>,
    ) -> Result<Self, ServerError> {
        let id = config.id;
        let mut manager = ReplicaManager::new(id, config.partition, 0, new_log);
        manager.set_retention(config.retention, config.retention_check_interval_ms);
        let timeout = config.leader_link_timeout;
        let links: LinkFactory<TcpLeaderLink> =
            Box::new(move |leader| TcpLeaderLink::new(id, leader, addresses.clone(), timeout));
        let leadership = isr_writer.leadership();
        let driver = ReplicaDriver::start(manager, links, isr_writer, config.fetcher);
        let apis =
            Arc::new(KafkaApis::new(id, config.cluster_id, driver).with_leadership(leadership));
        let server_config = ServerConfig {
            broker: id,
            ..config.server.clone()
        };
        match Server::bind(config.listen, server_config, handler(apis.clone())).await {
            Ok(server) => Ok(Broker { apis, server }),
            Err(e) => {
                apis.driver().shutdown().await;
                Err(e)
            }
        }
    }

    /// The request handler and the server, for an owner that stops them itself.
    pub fn into_parts(self) -> (Arc<KafkaApis<L, TcpLeaderLink, W>>, ServerHandle) {
        (self.apis, self.server)
    }

    /// The address the broker listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// The request handler (and through it, [`KafkaApis::driver`]).
    pub fn apis(&self) -> &KafkaApis<L, TcpLeaderLink, W> {
        &self.apis
    }

    /// Stops the server, then the replication tasks.
    pub async fn shutdown(self) {
        self.server.shutdown().await;
        self.apis.driver().shutdown().await;
    }
}
