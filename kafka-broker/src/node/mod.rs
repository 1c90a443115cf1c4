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
//! [`BrokerNode::shutdown`] resigns the controller, removes the registration (so the
//! controller moves leadership at once instead of waiting for the session to time out), and
//! stops the server and the replication tasks.
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
mod log;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ha_coordination::Coordination;
use kafka_controller::controller::{Controller, ControllerConfig, ControllerHandle};
use kafka_controller::zk_data::{paths, BrokerRegistration, KafkaZkError};

pub use addresses::{endpoint_of, StoreAddressBook};
pub use auto_create::{AutoCreateConfig, AutoCreateTopics};
pub use log::{partition_dir, LogPlacement, NodeLog};

use crate::glue::{
    BrokerRegistrar, IsrChangePropagator, IsrChangeQueue, IsrPropagationConfig, RegisteredBroker,
    ZkIsrWriter, ZkProducerIdManager,
};
use crate::server::{ServerError, ServerHandle};
use crate::{Broker, BrokerConfig, KafkaApis, TcpBrokerChannel, TcpLeaderLink};

/// The listener name brokers register and reach each other on.
pub const LISTENER: &str = "PLAINTEXT";

/// Why a node did not start.
#[derive(Debug, thiserror::Error)]
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
}

/// Settings of a [`BrokerNode`].
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// The data plane: id, listen address, partition and fetcher settings.
    pub broker: BrokerConfig,
    /// The host other brokers and clients are told to connect to; `None`: the listen
    /// address's IP (`127.0.0.1` when listening on every interface).
    pub advertised_host: Option<String>,
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
}

impl NodeConfig {
    /// Broker `id` listening on `listen`, logs in `./data`, Kafka's defaults for the rest
    /// (topics auto-created with 1 partition of 1 replica).
    pub fn new(id: i32, listen: SocketAddr) -> Self {
        NodeConfig {
            broker: BrokerConfig::new(id, listen),
            advertised_host: None,
            rack: None,
            logs: LogPlacement::Files(PathBuf::from("data")),
            controller: ControllerConfig::new(id),
            isr_propagation: IsrPropagationConfig::default(),
            channel_timeout: Duration::from_secs(5),
            address_refresh: Duration::from_secs(2),
            auto_create_topics: Some(AutoCreateConfig::default()),
        }
    }

    /// The host written into the registration.
    fn advertised_host(&self) -> String {
        match &self.advertised_host {
            Some(h) => h.clone(),
            None if self.broker.listen.ip().is_unspecified() => "127.0.0.1".to_owned(),
            None => self.broker.listen.ip().to_string(),
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
/// ([`AutoCreateTopics`]).
async fn start_data_plane(
    config: &NodeConfig,
    isr_writer: ZkIsrWriter,
    addresses: crate::AddressBook,
    store: Arc<dyn Coordination>,
) -> Result<(Arc<NodeApis>, ServerHandle), ServerError> {
    let auto_create = config.auto_create_topics;
    let broker = Broker::start_with_handler(
        config.broker.clone(),
        config.logs.factory(),
        isr_writer,
        addresses,
        |apis| Arc::new(AutoCreateTopics::new(apis, store, auto_create)),
    )
    .await?;
    Ok(broker.into_parts())
}

impl BrokerNode {
    /// Starts the node on `session` (this broker's own client of the store): the server
    /// first, then the registration with the bound port, then the controller campaign.
    pub async fn start(
        config: NodeConfig,
        session: Arc<dyn Coordination>,
    ) -> Result<BrokerNode, NodeError> {
        let id = config.broker.id;
        if let LogPlacement::Files(dir) = &config.logs {
            std::fs::create_dir_all(dir).map_err(|error| NodeError::DataDir {
                dir: dir.clone(),
                error,
            })?;
        }
        let host = config.advertised_host();
        let changes = IsrChangeQueue::new(tokio::time::Instant::now());
        let isr_writer = ZkIsrWriter::new(session.clone(), changes.clone());
        let addresses = StoreAddressBook::spawn(session.clone(), LISTENER, config.address_refresh);
        let (apis, server) =
            start_data_plane(&config, isr_writer, addresses.book(), session.clone()).await?;
        let addr = server.local_addr();
        // Producer ids in blocks from /latest_producer_id_block, unique across restarts.
        apis.use_producer_ids(Arc::new(ZkProducerIdManager::new(session.clone(), id)));
        let registration =
            BrokerRegistration::plaintext(&host, addr.port(), config.rack.as_deref(), now_ms());
        let registered = match BrokerRegistrar::new(session.clone(), id, registration)
            .start()
            .await
        {
            Ok(r) => r,
            Err(e) => {
                server.shutdown().await;
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
        tracing::info!(broker = id, %addr, broker_epoch = registered.broker_epoch(), "broker node started");
        Ok(BrokerNode {
            id,
            apis,
            server,
            controller,
            registered,
            propagator,
            addresses,
            session,
        })
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

    /// The node's client of the coordination store.
    pub fn session(&self) -> &Arc<dyn Coordination> {
        &self.session
    }

    /// Stops the node: the controller resigns (waiting up to 5 s), the registration is
    /// removed if this session still owns it, then the ISR propagation, the server and the
    /// replication tasks stop.
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
        } = self;
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
        server.shutdown().await;
        apis.driver().shutdown().await;
        drop(addresses);
        tracing::info!(broker = id, "broker node stopped");
    }
}

#[cfg(test)]
mod tests;
