//! A processor (Kafka's `Processor`, one of `num.network.threads`): one task owning the
//! connections the acceptor hands it. It reads their requests, writes their responses and
//! does no business logic. Each connection is a future polled by this task, so a connection
//! waiting on a slow client or on a full request channel never holds up the others.

use std::net::SocketAddr;
use std::sync::Arc;

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::channel::QueuedRequest;
use super::config::ServerConfig;
use super::connection::run_connection;
use super::handler::SupportedApis;

/// A connection handed over by the acceptor.
#[derive(Debug)]
pub(crate) struct NewConnection {
    /// The accepted socket.
    pub stream: TcpStream,
    /// The client's address.
    pub peer: SocketAddr,
    /// Unique among this server's connections.
    pub connection_id: u64,
}

/// What every connection of one processor shares.
#[derive(Debug)]
pub(crate) struct ProcessorShared {
    /// Index of the processor.
    pub index: usize,
    /// The server settings.
    pub config: Arc<ServerConfig>,
    /// What the handler supports.
    pub apis: Arc<SupportedApis>,
    /// The shared bounded request channel.
    pub request_tx: mpsc::Sender<QueuedRequest>,
}

/// Runs one processor until shutdown; dropping its connections closes their sockets.
pub(crate) async fn run_processor(
    shared: Arc<ProcessorShared>,
    mut new_connections: mpsc::Receiver<NewConnection>,
    shutdown: CancellationToken,
) {
    let broker = shared.config.broker;
    let mut connections = FuturesUnordered::new();
    let mut accepting = true;
    loop {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => break,
            // Polling this drives every connection's I/O; it only completes when one closes.
            // Handler workers put completions on each connection's own queue, which wakes
            // this task through the connection's future.
            Some(_closed) = connections.next(), if !connections.is_empty() => {}
            new = new_connections.recv(), if accepting => match new {
                Some(NewConnection { stream, peer, connection_id }) => {
                    tracing::debug!(broker, connection_id, %peer, processor = shared.index, "connection accepted");
                    connections.push(run_connection(shared.clone(), stream, peer, connection_id));
                }
                None => accepting = false,
            },
        }
    }
    tracing::debug!(
        broker,
        processor = shared.index,
        open = connections.len(),
        "processor stopping"
    );
}
