//! [`BrokerNode`]: one complete broker as a library type — what an embedder's `main` starts.
//! It composes the existing pieces the way the `cluster` demo does, on any coordination store
//! (a real ZooKeeper ensemble through `ZooKeeperCoordination`, or in memory):
//!
//! 1. the data plane, built as [`Broker::start`](crate::Broker::start) builds it: a
//!    `ReplicaManager` over a [`NodeLog`] per partition ([`LogPlacement`]: files in a data
//!    directory, or memory), its [`ReplicaDriver`](crate::ReplicaDriver) writing ISR changes with [`ZkIsrWriter`]
//!    and fetching over [`TcpLeaderLink`]s from leaders found in a [`StoreAddressBook`], and
//!    [`KafkaApis`] behind the K3 server — here wrapped in [`AutoCreateTopics`] (Kafka's
//!    `auto.create.topics.enable`);
//! 2. [`IsrChangePropagator`]: batched ISR change notifications for the controller;
//! 3. [`BrokerRegistrar`]: `/brokers/ids/<id>` with the broker epoch (KIP-380), registered again
//!    after a session expiry;
//! 4. a campaigning [`Controller`] (K6) reaching the brokers through [`TcpBrokerChannel`]; it
//!    resigns on expiry and campaigns again on the new session.
//!
//! Before any of that, a node on a data directory locks it and checks its `meta.properties`
//! against the broker id and the cluster id in `/cluster/id` ([`data_dir`]); a node listening
//! on every interface must be told what address to advertise.
//!
//! [`BrokerNode::controlled_shutdown`] asks the controller to move this broker's leaderships
//! away first (Kafka's `KafkaServer.controlledShutdown`); [`BrokerNode::shutdown`] then resigns
//! the controller, stops the server and the replication tasks, and removes the registration
//! (so the controller moves whatever is still led at once instead of waiting for the session
//! to time out).
//!
//! ```no_run
//! use std::sync::Arc;
//! use ha_coordination::{Coordination, MemoryCoordination};
//! use kafka_broker::node::{BrokerNode, LogPlacement, NodeConfig};
//!
//! # async fn run() -> Result<(), kafka_broker::node::NodeError> {
//! let store: Arc<dyn Coordination> = Arc::new(MemoryCoordination::new());
//! let mut config = NodeConfig::new(1, "127.0.0.1:9092".parse().unwrap());
//! config.logs = LogPlacement::Memory;
//! let node = BrokerNode::start(config, store).await?;
//! println!("broker {} on {}", node.id(), node.local_addr());
//! node.shutdown().await;
//! # Ok(())
//! # }
//! ```

mod addresses;
mod auto_create;
mod controlled_shutdown;
pub mod data_dir;
mod log;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ha_coordination::Coordination;
use kafka_controller::controller::{Controller, ControllerConfig, ControllerHandle};
use kafka_controller::zk_data::{
    encode_topic_id, paths, BrokerRegistration, KafkaZkClient, KafkaZkError,
};

pub use addresses::{endpoint_of, StoreAddressBook};
pub use auto_create::{AutoCreateConfig, AutoCreateTopics};
pub use controlled_shutdown::{
    ControlledShutdownConfig, ControlledShutdownOutcome, CONTROLLED_SHUTDOWN_VERSION,
};
pub use log::{partition_dir, LogPlacement, NodeLog};

use crate::glue::{
    BrokerRegistrar, IsrChangePropagator, IsrChangeQueue, IsrPropagationConfig, RegisteredBroker,
    ZkIsrWriter, ZkProducerIdManager,
};
use crate::group::{GroupApis, GroupConfig, GroupService};
use crate::server::{ServerError, ServerHandle};
use crate::{Broker, BrokerConfig, KafkaApis, TcpBrokerChannel, TcpLeaderLink};

/// The listener name brokers register and reach each other on.
pub const LISTENER: &str = "PLAINTEXT";

/// Why a node did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// The data directory could not be created.
    #[error("data directory {dir}: {error}")]
    DataDir {
        /// The directory.
        dir: PathBuf,
        /// What failed.
        error: std::io::Error,
    },
    /// The server did not start (address in use, ...).
    #[error("server: {0}")]
    Server(#[from] ServerError),
    /// The registration failed (the id is taken by a live broker, the store is down, ...).
    #[error("registration: {0}")]
    Registration(#[from] KafkaZkError),
    /// The cluster id could not be read from (or created in) `/cluster/id`.
    #[error("cluster id: {0}")]
    ClusterId(KafkaZkError),
    /// The node listens on every interface and was given no host to advertise.
    #[error(
        "listening on {listen} (every interface) needs an advertised host \
         (advertised.listeners): there is no single address to tell other brokers and clients"
    )]
    WildcardWithoutAdvertised {
        /// The listen address.
        listen: SocketAddr,
    },
    /// Another process (or node) holds the data directory's lock.
    #[error("data directory {dir} is in use by another broker process (its .lock is held)")]
    DataDirInUse {
        /// The directory.
        dir: PathBuf,
    },
    /// The data directory's `meta.properties` cannot be read.
    #[error("{path}: {reason}")]
    MetaProperties {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The data directory belongs to another broker (Kafka's `InconsistentBrokerIdException`).
    #[error(
        "data directory {dir} belongs to broker.id {stored} (meta.properties), \
         not to the configured broker.id {configured}"
    )]
    InconsistentBrokerId {
        /// The directory.
        dir: PathBuf,
        /// The configured id.
        configured: i32,
        /// The id in `meta.properties`.
        stored: i32,
    },
    /// The data directory belongs to another cluster (Kafka's
    /// `InconsistentClusterIdException`).
    #[error(
        "data directory {dir} belongs to cluster {stored} (meta.properties), but the store's \
         /cluster/id is {cluster}: the broker is trying to join the wrong cluster"
    )]
    InconsistentClusterId {
        /// The directory.
        dir: PathBuf,
        /// The store's cluster id.
        cluster: String,
        /// The id in `meta.properties`.
        stored: String,
    },
}

/// Settings of a [`BrokerNode`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NodeConfig {
    /// The data plane: id, listen address, partition and fetcher settings.
    pub broker: BrokerConfig,
    /// The host other brokers and clients are told to connect to; `None`: the listen
    /// address's IP, which must then not be a wildcard (`0.0.0.0`, `::`).
    pub advertised_host: Option<String>,
    /// The port advertised; `None`: the bound port.
    pub advertised_port: Option<u16>,
    /// The broker's rack (`broker.rack`).
    pub rack: Option<String>,
    /// Where the logs live.
    pub logs: LogPlacement,
    /// The controller's settings; its `broker_id` is overwritten with the node's id.
    pub controller: ControllerConfig,
    /// How soon ISR changes reach the controller.
    pub isr_propagation: IsrPropagationConfig,
    /// How long the controller waits for one broker's answer.
    pub channel_timeout: Duration,
    /// How often the other brokers' addresses are re-read besides the watch.
    pub address_refresh: Duration,
    /// Topic auto-creation on Metadata (`auto.create.topics.enable`); `None`: off.
    pub auto_create_topics: Option<AutoCreateConfig>,
    /// How long the registration waits for an older session's `/brokers/ids/<id>` to vanish
    /// (a restart before the previous process's session expired): the session timeout plus
    /// a margin ([`holder_wait_for`](crate::glue::holder_wait_for)).
    pub registration_wait: Duration,
    /// `controlled.shutdown.*`.
    pub controlled_shutdown: ControlledShutdownConfig,
    /// How often the replication and controller stats are published to the [`metrics`]
    /// facade ([`crate::metrics`]; a no-op without a recorder). Default 1 s.
    pub metrics_interval: Duration,
    /// The group coordinator's settings (`group.*`, `offsets.*`).
    pub groups: GroupConfig,
}

impl NodeConfig {
    /// Sets [`metrics_interval`](Self::metrics_interval).
    #[must_use]
    pub fn with_metrics_interval(mut self, interval: Duration) -> Self {
        self.metrics_interval = interval;
        self
    }

    /// Sets [`groups`](Self::groups).
    #[must_use]
    pub fn with_groups(mut self, groups: GroupConfig) -> Self {
        self.groups = groups;
        self
    }

    /// Sets [`broker`](Self::broker).
    #[must_use]
    pub fn with_broker(mut self, broker: BrokerConfig) -> Self {
        self.broker = broker;
        self
    }

    /// Sets the `advertised_host` field.
    #[must_use]
    pub fn with_advertised_host(mut self, advertised_host: Option<String>) -> Self {
        self.advertised_host = advertised_host;
        self
    }

    /// Sets [`rack`](Self::rack).
    #[must_use]
    pub fn with_rack(mut self, rack: Option<String>) -> Self {
        self.rack = rack;
        self
    }

    /// Sets [`logs`](Self::logs).
    #[must_use]
    pub fn with_logs(mut self, logs: LogPlacement) -> Self {
        self.logs = logs;
        self
    }

    /// Sets [`controller`](Self::controller).
    #[must_use]
    pub fn with_controller(mut self, controller: ControllerConfig) -> Self {
        self.controller = controller;
        self
    }

    /// Sets [`isr_propagation`](Self::isr_propagation).
    #[must_use]
    pub fn with_isr_propagation(mut self, isr_propagation: IsrPropagationConfig) -> Self {
        self.isr_propagation = isr_propagation;
        self
    }

    /// Sets [`channel_timeout`](Self::channel_timeout).
    #[must_use]
    pub fn with_channel_timeout(mut self, channel_timeout: Duration) -> Self {
        self.channel_timeout = channel_timeout;
        self
    }

    /// Sets [`address_refresh`](Self::address_refresh).
    #[must_use]
    pub fn with_address_refresh(mut self, address_refresh: Duration) -> Self {
        self.address_refresh = address_refresh;
        self
    }

    /// Sets [`auto_create_topics`](Self::auto_create_topics).
    #[must_use]
    pub fn with_auto_create_topics(mut self, auto_create_topics: Option<AutoCreateConfig>) -> Self {
        self.auto_create_topics = auto_create_topics;
        self
    }
}

impl NodeConfig {
    /// Broker `id` listening on `listen`, logs in `./data`, Kafka's defaults for the rest
    /// (topics auto-created with 1 partition of 1 replica).
    pub fn new(id: i32, listen: SocketAddr) -> Self {
        NodeConfig {
            broker: BrokerConfig::new(id, listen),
            advertised_host: None,
            advertised_port: None,
            rack: None,
            logs: LogPlacement::Files(PathBuf::from("data")),
            controller: ControllerConfig::new(id),
            isr_propagation: IsrPropagationConfig::default(),
            channel_timeout: Duration::from_secs(5),
            address_refresh: Duration::from_secs(2),
            auto_create_topics: Some(AutoCreateConfig::default()),
            registration_wait: crate::glue::DEFAULT_HOLDER_WAIT,
            controlled_shutdown: ControlledShutdownConfig::default(),
            metrics_interval: Duration::from_secs(1),
            groups: GroupConfig::default(),
        }
    }

    /// The host written into the registration; a wildcard listen address without an
    /// advertised host is refused.
    fn advertised_host(&self) -> Result<String, NodeError> {
        match &self.advertised_host {
            Some(h) => Ok(h.clone()),
            None if self.broker.listen.ip().is_unspecified() => {
                Err(NodeError::WildcardWithoutAdvertised {
                    listen: self.broker.listen,
                })
            }
            None => Ok(self.broker.listen.ip().to_string()),
        }
    }
}

/// A fresh cluster id as Kafka's `CoreUtils.generateUuidAsBase64` makes one: a random UUID in
/// URL-safe base64 (22 characters).
fn random_cluster_id() -> String {
    loop {
        let id = kafka_wire::Uuid::from_u128(rand::random::<u128>());
        let text = encode_topic_id(id);
        if id.as_u128() > 1 && !text.starts_with('-') {
            return text;
        }
    }
}

/// The request handler of a node.
pub type NodeApis = KafkaApis<NodeLog, TcpLeaderLink, ZkIsrWriter>;

/// A running broker node: data plane, registration, ISR propagation and controller.
pub struct BrokerNode {
    id: i32,
    apis: Arc<NodeApis>,
    server: ServerHandle,
    controller: ControllerHandle,
    registered: RegisteredBroker,
    propagator: IsrChangePropagator,
    addresses: StoreAddressBook,
    session: Arc<dyn Coordination>,
    controlled_shutdown: ControlledShutdownConfig,
    cluster_id: String,
    groups: GroupService,
    _metrics: crate::metrics::MetricsPublisher,
    _data_dir: Option<data_dir::DataDirLock>,
}

impl std::fmt::Debug for BrokerNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerNode")
            .field("id", &self.id)
            .field("addr", &self.local_addr())
            .field("broker_epoch", &self.broker_epoch())
            .field("controller", &self.controller.status())
            .finish()
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The data plane: a [`Broker`] whose Metadata answers create unknown topics first
/// ([`AutoCreateTopics`]), behind the group coordinator's APIs ([`GroupApis`]).
async fn start_data_plane(
    config: &NodeConfig,
    isr_writer: ZkIsrWriter,
    addresses: crate::AddressBook,
    store: Arc<dyn Coordination>,
) -> Result<(Arc<NodeApis>, ServerHandle, GroupService), ServerError> {
    let auto_create = config.auto_create_topics;
    let groups = config.groups.clone();
    let mut service = None;
    let broker = Broker::start_with_handler(
        config.broker.clone(),
        config.logs.factory(),
        isr_writer,
        addresses,
        |apis| {
            let inner = Arc::new(AutoCreateTopics::new(
                apis.clone(),
                store.clone(),
                auto_create,
            ));
            let handler = GroupApis::start(inner, apis, store, groups);
            service = Some(handler.service().clone());
            Arc::new(handler)
        },
    )
    .await;
    let (apis, server) = match broker {
        Ok(b) => b.into_parts(),
        Err(e) => {
            if let Some(s) = service {
                s.shutdown().await;
            }
            return Err(e);
        }
    };
    let Some(service) = service else {
        unreachable!("the handler closure runs before the server binds");
    };
    Ok((apis, server, service))
}

impl BrokerNode {
    /// Starts the node on `session` (this broker's own client of the store): the cluster id
    /// (`/cluster/id`, created if missing) and the data directory's lock and
    /// `meta.properties` first, then the server, then the registration with the bound port
    /// (waiting for an older session's registration to vanish), then the controller campaign.
    pub async fn start(
        mut config: NodeConfig,
        session: Arc<dyn Coordination>,
    ) -> Result<BrokerNode, NodeError> {
        let id = config.broker.id;
        let host = config.advertised_host()?;
        let cluster_id = KafkaZkClient::new(session.clone())
            .get_or_create_cluster_id(&random_cluster_id())
            .await
            .map_err(NodeError::ClusterId)?;
        let data_dir = match config.logs.dir() {
            Some(dir) => {
                let lock = data_dir::lock(dir)?;
                data_dir::check_meta_properties(&lock, id, &cluster_id)?;
                Some(lock)
            }
            None => None,
        };
        config.broker.cluster_id = cluster_id.clone();
        let changes = IsrChangeQueue::new(tokio::time::Instant::now());
        let isr_writer = ZkIsrWriter::new(session.clone(), changes.clone());
        let addresses = StoreAddressBook::spawn(session.clone(), LISTENER, config.address_refresh);
        let (apis, server, groups) =
            start_data_plane(&config, isr_writer, addresses.book(), session.clone()).await?;
        let addr = server.local_addr();
        // Producer ids in blocks from /latest_producer_id_block, unique across restarts.
        apis.use_producer_ids(Arc::new(ZkProducerIdManager::new(session.clone(), id)));
        let registration = BrokerRegistration::plaintext(
            &host,
            config.advertised_port.unwrap_or(addr.port()),
            config.rack.as_deref(),
            now_ms(),
        );
        let registered = match BrokerRegistrar::new(session.clone(), id, registration)
            .with_holder_wait(config.registration_wait)
            .start()
            .await
        {
            Ok(r) => r,
            Err(e) => {
                server.shutdown().await;
                groups.shutdown().await;
                apis.driver().shutdown().await;
                return Err(e.into());
            }
        };
        // KIP-380: control requests meant for an earlier registration are refused.
        apis.follow_registration(registered.subscribe());
        let propagator =
            IsrChangePropagator::spawn(session.clone(), changes, config.isr_propagation);
        let channel = Arc::new(TcpBrokerChannel::new(id, LISTENER, config.channel_timeout));
        let mut controller_config = config.controller.clone();
        controller_config.broker_id = id;
        let controller = Controller::start(controller_config, session.clone(), channel);
        apis.serve_controller(controller.clone());
        let driver = apis.driver().clone();
        let metrics = crate::metrics::MetricsPublisher::spawn(
            config.metrics_interval,
            move || driver.with_manager(|m, _| m.stats()),
            controller.clone(),
        );
        tracing::info!(broker = id, %addr, broker_epoch = registered.broker_epoch(), cluster_id = %cluster_id, "broker node started");
        Ok(BrokerNode {
            id,
            apis,
            server,
            controller,
            registered,
            propagator,
            addresses,
            session,
            controlled_shutdown: config.controlled_shutdown,
            cluster_id,
            groups,
            _metrics: metrics,
            _data_dir: data_dir,
        })
    }

    /// The cluster id (`/cluster/id`).
    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    /// The broker id.
    pub fn id(&self) -> i32 {
        self.id
    }

    /// The address the broker listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// The current broker epoch (KIP-380), `None` while not registered.
    pub fn broker_epoch(&self) -> Option<i64> {
        self.registered.broker_epoch()
    }

    /// This broker's controller.
    pub fn controller(&self) -> &ControllerHandle {
        &self.controller
    }

    /// The request handler (and through it, [`KafkaApis::driver`]).
    pub fn apis(&self) -> &NodeApis {
        &self.apis
    }

    /// Where the other brokers listen, as last read from the store.
    pub fn addresses(&self) -> &StoreAddressBook {
        &self.addresses
    }

    /// The group coordinator of this broker.
    pub fn groups(&self) -> &GroupService {
        &self.groups
    }

    /// The node's client of the coordination store.
    pub fn session(&self) -> &Arc<dyn Coordination> {
        &self.session
    }

    /// Stops the node (after a [`controlled_shutdown`](Self::controlled_shutdown), it leads
    /// nothing by now): the controller resigns (waiting up to 5 s), the server and the
    /// replication tasks stop, then the registration is removed if this session still owns
    /// it, the ISR propagation stops and the data directory is unlocked.
    pub async fn shutdown(self) {
        let BrokerNode {
            id,
            apis,
            server,
            controller,
            registered,
            propagator,
            addresses,
            session,
            controlled_shutdown: _,
            cluster_id: _,
            groups,
            _metrics: metrics,
            _data_dir: data_dir,
        } = self;
        drop(metrics);
        controller.shutdown();
        let mut resigned = false;
        for _ in 0..100 {
            if controller.status().active_epoch.is_none() {
                resigned = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if !resigned {
            tracing::warn!(broker = id, "controller did not resign in time");
        }
        server.shutdown().await;
        groups.shutdown().await;
        apis.driver().shutdown().await;
        drop(registered);
        let path = paths::broker(id);
        if let Ok((_, stat)) = session.get_data(&path, false).await {
            if stat.ephemeral_owner == session.session_id() {
                if let Err(error) = session.delete(&path, stat.version).await {
                    tracing::warn!(broker = id, %error, "could not remove the registration");
                }
            }
        }
        propagator.stop();
        drop(addresses);
        drop(data_dir);
        tracing::info!(broker = id, "broker node stopped");
    }
}

#[cfg(test)]
mod tests;
