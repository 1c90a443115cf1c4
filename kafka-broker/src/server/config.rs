//! [`ServerConfig`]: thread counts, queue and frame limits, and per-connection timeouts.

use std::time::Duration;

use kafka_wire::frame::DEFAULT_MAX_FRAME_SIZE;

/// Settings of a [`crate::server::Server`]; the Kafka broker setting each mirrors is named.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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

impl ServerConfig {
    /// Sets [`broker`](Self::broker).
    #[must_use]
    pub fn with_broker(mut self, broker: i32) -> Self {
        self.broker = broker;
        self
    }

    /// Sets [`num_processors`](Self::num_processors).
    #[must_use]
    pub fn with_num_processors(mut self, num_processors: usize) -> Self {
        self.num_processors = num_processors;
        self
    }

    /// Sets [`num_handlers`](Self::num_handlers).
    #[must_use]
    pub fn with_num_handlers(mut self, num_handlers: usize) -> Self {
        self.num_handlers = num_handlers;
        self
    }

    /// Sets [`request_queue_size`](Self::request_queue_size).
    #[must_use]
    pub fn with_request_queue_size(mut self, request_queue_size: usize) -> Self {
        self.request_queue_size = request_queue_size;
        self
    }

    /// Sets [`max_frame_size`](Self::max_frame_size).
    #[must_use]
    pub fn with_max_frame_size(mut self, max_frame_size: usize) -> Self {
        self.max_frame_size = max_frame_size;
        self
    }

    /// Sets [`max_in_flight_per_connection`](Self::max_in_flight_per_connection).
    #[must_use]
    pub fn with_max_in_flight_per_connection(
        mut self,
        max_in_flight_per_connection: usize,
    ) -> Self {
        self.max_in_flight_per_connection = max_in_flight_per_connection;
        self
    }

    /// Sets [`idle_timeout`](Self::idle_timeout).
    #[must_use]
    pub fn with_idle_timeout(mut self, idle_timeout: Duration) -> Self {
        self.idle_timeout = idle_timeout;
        self
    }

    /// Sets [`read_timeout`](Self::read_timeout).
    #[must_use]
    pub fn with_read_timeout(mut self, read_timeout: Duration) -> Self {
        self.read_timeout = read_timeout;
        self
    }

    /// Sets [`write_timeout`](Self::write_timeout).
    #[must_use]
    pub fn with_write_timeout(mut self, write_timeout: Duration) -> Self {
        self.write_timeout = write_timeout;
        self
    }
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
