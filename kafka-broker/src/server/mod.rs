//! The reference broker's network server (K3) on tokio.
//!
//! ```text
//!              ┌────────────┐  round robin   ┌─────────────┐  bounded request   ┌──────────┐
//! clients ───▶ │  acceptor  │ ─────────────▶ │ processor i │ ─── channel ─────▶ │ worker j │
//!              └────────────┘                │ (N of them) │ ◀── response ───── │ (M)      │
//!                                            └─────────────┘  queue per conn.   └──────────┘
//! ```
//!
//! - One **acceptor** task takes connections and hands each to one of N **processors**, round
//!   robin.
//! - A processor owns its connections: it reads size-prefixed frames (at most
//!   [`ServerConfig::max_frame_size`]), decodes the request header and the body by
//!   (api key, version), puts the request on the one **bounded** request channel, and writes
//!   back the responses of its connections, in request order (see the `connection` module).
//!   It runs no business logic.
//! - M **handler workers** take requests off the channel, call [`RequestHandler::handle`],
//!   encode the response with the response header version its API and version call for, and
//!   put it on the response queue of the request's connection (whose future the processor
//!   owning it polls: one hand-off, no routing through the processor). Record data stays in
//!   its own buffers up to the vectored socket write. A request that parks (an acks=all
//!   produce, a long-poll fetch) is set aside by its worker, which takes the next request at
//!   once and finishes the parked one when its answer wakes it.
//!
//! Bad input never reaches the handler and never stalls another connection:
//! - an API key the handler does not declare, or a version outside the declared range of any
//!   API but ApiVersions, closes the connection (as Kafka does);
//! - an ApiVersions version outside the declared range is answered UNSUPPORTED_VERSION with
//!   the declared ranges, as a v0 body (so the client can read it and retry);
//! - an undecodable header or body, a negative or oversized frame size closes the connection;
//! - a client that does not read its responses blocks only its own connection, until the
//!   write timeout closes it; a started frame must complete within the read timeout; an idle
//!   connection is closed after the idle timeout.
//!
//! ```no_run
//! use std::sync::Arc;
//! use async_trait::async_trait;
//! use kafka_broker::server::{RequestContext, RequestHandler, Server, ServerConfig, SupportedApis};
//! use kafka_wire::{ApiKey, RequestBody, RequestHeader, ResponseBody};
//!
//! struct OnlyApiVersions;
//!
//! #[async_trait]
//! impl RequestHandler for OnlyApiVersions {
//!     fn supported_apis(&self) -> SupportedApis {
//!         SupportedApis::new().with(ApiKey::ApiVersions, 0, 3)
//!     }
//!     async fn handle(&self, _: &RequestContext, header: &RequestHeader, body: RequestBody) -> Option<ResponseBody> {
//!         match body {
//!             RequestBody::ApiVersions(r) => Some(ResponseBody::ApiVersions(
//!                 self.supported_apis().answer_api_versions(header.request_api_version, &r),
//!             )),
//!             _ => None,
//!         }
//!     }
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let server = Server::bind("127.0.0.1:0", ServerConfig::default(), Arc::new(OnlyApiVersions)).await?;
//! println!("listening on {}", server.local_addr());
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```

mod channel;
mod config;
mod connection;
mod error;
mod handler;
mod order;
mod processor;
mod response;
mod worker;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, ToSocketAddrs};
use tokio::sync::{mpsc, Mutex};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use config::ServerConfig;
pub use error::ServerError;
pub use handler::{RequestContext, RequestHandler, SupportedApis};

use processor::{run_processor, NewConnection, ProcessorShared};
use worker::run_worker;

/// Connections waiting for their processor to take them.
const NEW_CONNECTION_QUEUE: usize = 20;

/// Starts network servers; see the module documentation.
#[derive(Debug, Clone, Copy)]
pub struct Server;

impl Server {
    /// Binds `addr` (port 0 picks a free port; see [`ServerHandle::local_addr`]) and starts
    /// serving `handler` (K3).
    pub async fn bind<A: ToSocketAddrs, H: RequestHandler>(
        addr: A,
        config: ServerConfig,
        handler: Arc<H>,
    ) -> Result<ServerHandle, ServerError> {
        let listener = TcpListener::bind(addr).await?;
        Self::serve(listener, config, handler)
    }

    /// Starts serving `handler` on an already bound listener (K3): one acceptor task,
    /// `num_processors` processor tasks and `num_handlers` worker tasks on the current tokio
    /// runtime.
    pub fn serve<H: RequestHandler>(
        listener: TcpListener,
        config: ServerConfig,
        handler: Arc<H>,
    ) -> Result<ServerHandle, ServerError> {
        if config.num_processors == 0 {
            return Err(ServerError::Config("num_processors must be at least 1"));
        }
        if config.num_handlers == 0 {
            return Err(ServerError::Config("num_handlers must be at least 1"));
        }
        if config.request_queue_size == 0 {
            return Err(ServerError::Config("request_queue_size must be at least 1"));
        }
        let local_addr = listener.local_addr()?;
        let config = Arc::new(config);
        let apis = Arc::new(handler.supported_apis());
        let shutdown = CancellationToken::new();
        let mut tasks = Vec::new();

        let (request_tx, request_rx) = mpsc::channel(config.request_queue_size);
        let mut processor_inboxes = Vec::with_capacity(config.num_processors);
        for index in 0..config.num_processors {
            let (conn_tx, conn_rx) = mpsc::channel(NEW_CONNECTION_QUEUE);
            processor_inboxes.push(conn_tx);
            let shared = Arc::new(ProcessorShared {
                index,
                config: config.clone(),
                apis: apis.clone(),
                request_tx: request_tx.clone(),
            });
            tasks.push(tokio::spawn(run_processor(
                shared,
                conn_rx,
                shutdown.clone(),
            )));
        }
        drop(request_tx);

        let requests = Arc::new(Mutex::new(request_rx));
        for _ in 0..config.num_handlers {
            tasks.push(tokio::spawn(run_worker(
                handler.clone(),
                requests.clone(),
                shutdown.clone(),
            )));
        }

        tasks.push(tokio::spawn(run_acceptor(
            listener,
            processor_inboxes,
            config.broker,
            shutdown.clone(),
        )));
        tracing::info!(broker = config.broker, %local_addr, "network server started");
        Ok(ServerHandle {
            local_addr,
            broker: config.broker,
            shutdown,
            tasks,
        })
    }
}

/// A running server. [`ServerHandle::shutdown`] stops it; dropping the handle stops it too,
/// without waiting.
#[derive(Debug)]
pub struct ServerHandle {
    local_addr: SocketAddr,
    broker: i32,
    shutdown: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

impl ServerHandle {
    /// The address the server listens on (with the real port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting, closes every connection (responses not yet written are dropped),
    /// stops the handler workers once their current request is done, and waits for all of it.
    pub async fn shutdown(mut self) {
        self.shutdown.cancel();
        for task in std::mem::take(&mut self.tasks) {
            if let Err(e) = task.await {
                tracing::warn!(broker = self.broker, error = %e, "server task failed");
            }
        }
        tracing::info!(broker = self.broker, "network server stopped");
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// The acceptor (Kafka's `Acceptor`): takes connections and hands them to the processors,
/// round robin.
async fn run_acceptor(
    listener: TcpListener,
    processors: Vec<mpsc::Sender<NewConnection>>,
    broker: i32,
    shutdown: CancellationToken,
) {
    let mut next_id: u64 = 0;
    let mut next_processor = 0usize;
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, peer)) => {
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!(broker, %peer, error = %e, "TCP_NODELAY not set");
                }
                let connection_id = next_id;
                next_id += 1;
                let Some(processor) = processors.get(next_processor) else {
                    break;
                };
                next_processor = (next_processor + 1) % processors.len();
                let conn = NewConnection {
                    stream,
                    peer,
                    connection_id,
                };
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    sent = processor.send(conn) => if sent.is_err() { break },
                }
            }
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                tracing::warn!(broker, error = %e, "accept failed");
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                }
            }
        }
    }
    tracing::debug!(broker, "acceptor stopped");
}
