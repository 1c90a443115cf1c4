//! [`ServerConfig`]: thread counts, queue and frame limits, and per-connection timeouts.

use std::time::Duration;

use kafka_wire::frame::DEFAULT_MAX_FRAME_SIZE;

/// Settings of a [`crate::server::Server`]; the Kafka broker setting each mirrors is named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// The broker id, attached to every log line (`broker`) and [`super::RequestContext`].
    pub broker: i32,
    /// Processors (connection reader/writer tasks); `num.network.threads`, default 3.
    pub num_processors: usize,
    /// Handler workers; `num.io.threads`, default 8.
    pub num_handlers: usize,
    /// Capacity of the shared request channel; `queued.max.requests`, default 500. A full
    /// channel stops processors reading further requests (back-pressure).
    pub request_queue_size: usize,
    /// Largest request frame accepted; `socket.request.max.bytes`, default 100 MiB. A bigger
    /// size prefix closes the connection before its bytes are read.
    pub max_frame_size: usize,
    /// Requests of one connection that may be queued or in a handler at once. Responses still
    /// go out in request order (a reorder buffer holds early ones). Kafka uses 1 (it mutes a
    /// channel while its request is in flight); more lets a pipelining client keep the
    /// handlers busy. Values below 1 are treated as 1. Default 16.
    pub max_in_flight_per_connection: usize,
    /// A connection with nothing in flight and no complete request for this long is closed;
    /// `connections.max.idle.ms`, default 10 minutes.
    pub idle_timeout: Duration,
    /// A request frame whose first bytes arrived must be complete within this time, or the
    /// connection is closed (against clients that stall mid-frame). Default 30 s.
    pub read_timeout: Duration,
    /// Writing one response must make progress within this time, or the connection is
    /// closed (against clients that never read). Default 30 s.
    pub write_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            broker: 0,
            num_processors: 3,
            num_handlers: 8,
            request_queue_size: 500,
            max_frame_size: DEFAULT_MAX_FRAME_SIZE,
            max_in_flight_per_connection: 16,
            idle_timeout: Duration::from_secs(600),
            read_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
        }
    }
}
