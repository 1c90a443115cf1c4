//! What travels between the tasks of the server: requests on the shared bounded request
//! channel (processors → handler workers) and completions on each connection's response queue
//! (handler workers → the connection, driven by the processor owning it).

use bytes::Bytes;
use kafka_wire::{ApiKey, RequestBody, RequestHeader};
use tokio::sync::mpsc;

use super::error::CloseReason;
use super::handler::RequestContext;

/// A decoded request waiting for a handler worker.
#[derive(Debug)]
pub(crate) struct QueuedRequest {
    /// Connection, processor and broker of the request.
    pub ctx: RequestContext,
    /// Position of the request on its connection (0, 1, 2, …), used to keep responses in
    /// request order.
    pub seq: u64,
    /// The API of `body`.
    pub api_key: ApiKey,
    /// The decoded request header.
    pub header: RequestHeader,
    /// The decoded request body.
    pub body: RequestBody,
    /// The response queue of the request's connection: the handler puts the completion
    /// there directly (a closed queue means the connection is gone).
    pub reply: mpsc::UnboundedSender<Completion>,
}

/// What became of one request.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// A whole response frame (size prefix first), as chunks to write vectored.
    Frame(Vec<Bytes>),
    /// Nothing to send (produce with `acks=0`).
    NoResponse,
    /// The connection must be closed once the responses before this one are written.
    Close(CloseReason),
}

/// A finished request on its way back to its connection.
#[derive(Debug)]
pub(crate) struct Completion {
    /// The request's position on that connection.
    pub seq: u64,
    /// The response, or why there is none.
    pub outcome: Outcome,
}
