//! One client connection as its processor drives it: read frames, decode header and body,
//! queue requests on the request channel, and write completions back in request order.
//!
//! Ordering: every request gets the next sequence number of its connection; completions come
//! back from the handler workers in any order and wait in a small reorder buffer until every
//! earlier one is written. At most `max_in_flight_per_connection` requests of a connection are
//! queued or in a handler at once; at that limit the connection stops reading, which bounds
//! the reorder buffer and pushes back on a pipelining client. (Kafka instead mutes a channel
//! while its one request is in flight, which is the same design with a limit of 1; a larger
//! limit lets one pipelining client use several handler workers.)

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_replication::data_path::{self, CopyStep, Hop};
use kafka_wire::frame::{peek_request_header, KafkaFrameCodec};
use kafka_wire::{ApiKey, RequestBody, RequestHeader};
use tokio::io::AsyncReadExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::codec::Decoder;

use super::channel::{Completion, Outcome, QueuedRequest};
use super::error::CloseReason;
use super::handler::RequestContext;
use super::order::ResponseOrder;
use super::processor::ProcessorShared;
use super::response::{encode_api_versions, write_chunks};

/// Bytes the read buffer has free for each read while requests are coming: several pipelined
/// produce requests of 16 KiB batches are taken in one `recv`.
const READ_CHUNK: usize = 64 * 1024;
/// Bytes a busy connection's read buffer grows by when less than [`READ_CHUNK`] is free. A
/// partly read request at the end of the buffer is moved (copied) when it grows, so growing by
/// much more than one request keeps those moves to about one request per this many bytes. A
/// busy connection's buffer therefore holds up to about this much (plus a frame); an idle one
/// lets it go (see [`IDLE_READ_CHUNK`]).
const BUSY_RESERVE: usize = 512 * 1024;
/// Bytes the read buffer of an idle connection (nothing in flight, nothing buffered) keeps.
const IDLE_READ_CHUNK: usize = 8 * 1024;
/// Ready responses of one connection are written together up to about this many bytes.
const WRITE_BATCH: usize = 1 << 20;

/// Drives one connection until it is closed; returns its id so the processor can forget it.
pub(crate) async fn run_connection(
    shared: Arc<ProcessorShared>,
    stream: TcpStream,
    peer: SocketAddr,
    connection_id: u64,
) -> u64 {
    let (reply, completions) = mpsc::unbounded_channel();
    let broker = shared.config.broker;
    let (read, write) = stream.into_split();
    let mut conn = Connection {
        ctx: RequestContext {
            broker,
            connection_id,
            peer,
            processor: shared.index,
        },
        codec: KafkaFrameCodec::new(shared.config.max_frame_size),
        read_buf: BytesMut::with_capacity(IDLE_READ_CHUNK),
        writer: write,
        order: ResponseOrder::new(shared.config.max_in_flight_per_connection),
        reply,
        completions,
        last_activity: Instant::now(),
        shared,
    };
    let reason = conn.drive(read).await;
    match reason {
        CloseReason::PeerClosed | CloseReason::Shutdown => {
            tracing::debug!(broker, connection_id, %peer, %reason, "connection closed");
        }
        _ => tracing::info!(broker, connection_id, %peer, %reason, "closing connection"),
    }
    connection_id
}

struct Connection {
    shared: Arc<ProcessorShared>,
    ctx: RequestContext,
    codec: KafkaFrameCodec,
    read_buf: BytesMut,
    writer: OwnedWriteHalf,
    /// Handed to each request: where its completion comes back.
    reply: mpsc::UnboundedSender<Completion>,
    completions: mpsc::UnboundedReceiver<Completion>,
    /// Sequence numbers and the reorder buffer of this connection's responses.
    order: ResponseOrder<Outcome>,
    /// When the last complete request was read or the last response written.
    last_activity: Instant,
}

impl Connection {
    async fn drive(&mut self, mut read: tokio::net::tcp::OwnedReadHalf) -> CloseReason {
        loop {
            if let Err(reason) = self.write_ready().await {
                return reason;
            }
            // Take the whole frames already buffered, up to the in-flight limit.
            while self.order.has_room() {
                let (at, held) = (self.read_buf.as_ptr(), self.read_buf.len());
                match self.codec.decode(&mut self.read_buf) {
                    Ok(None) => {
                        // Growing the buffer for a partly read frame may have moved it.
                        count_moved(at, held, &self.read_buf);
                        break;
                    }
                    Ok(Some(frame)) => {
                        self.last_activity = Instant::now();
                        if let Err(reason) = self.on_frame(frame).await {
                            return reason;
                        }
                    }
                    Err(e) => return e.into(),
                }
            }
            if self.order.next_is_ready() {
                continue;
            }
            let can_read = self.order.has_room();
            let config = &self.shared.config;
            let deadline = if self.order.in_flight() > 0 {
                None
            } else if self.read_buf.is_empty() {
                Some((self.last_activity + config.idle_timeout, CloseReason::Idle))
            } else {
                Some((
                    self.last_activity + config.read_timeout,
                    CloseReason::ReadTimeout,
                ))
            };
            let (sleep_until, on_timeout) = match deadline {
                Some((at, reason)) => (at, Some(reason)),
                None => (Instant::now() + config.idle_timeout, None),
            };
            let idle = self.order.in_flight() == 0 && self.read_buf.is_empty();
            if idle && self.read_buf.capacity() > IDLE_READ_CHUNK {
                // The frames already taken keep their own share of the old buffer.
                self.read_buf = BytesMut::new();
            }
            let (chunk, grow) = if idle {
                (IDLE_READ_CHUNK, IDLE_READ_CHUNK)
            } else {
                (READ_CHUNK, BUSY_RESERVE)
            };
            if self.read_buf.capacity() - self.read_buf.len() < chunk {
                let (at, held) = (self.read_buf.as_ptr(), self.read_buf.len());
                self.read_buf.reserve(grow);
                count_moved(at, held, &self.read_buf);
            }
            tokio::select! {
                r = read.read_buf(&mut self.read_buf), if can_read => match r {
                    Ok(0) => return CloseReason::PeerClosed,
                    Ok(n) => crate::metrics::record_bytes_in(n),
                    Err(e) => return CloseReason::Frame(e.into()),
                },
                c = self.completions.recv() => match c {
                    Some(c) => {
                        self.order.finish(c.seq, c.outcome);
                        // Take every completion already there, so the responses that are
                        // ready go out in one write.
                        while let Ok(c) = self.completions.try_recv() {
                            self.order.finish(c.seq, c.outcome);
                        }
                    }
                    None => return CloseReason::Shutdown,
                },
                _ = tokio::time::sleep_until(sleep_until), if on_timeout.is_some() => {
                    if let Some(reason) = on_timeout {
                        return reason;
                    }
                }
            }
        }
    }

    /// Writes every completion that is next in request order, the frames of several
    /// responses together in one vectored write (up to [`WRITE_BATCH`] bytes).
    async fn write_ready(&mut self) -> Result<(), CloseReason> {
        let mut batch: Vec<Bytes> = Vec::new();
        let mut batch_bytes = 0usize;
        let mut close = None;
        loop {
            match self.order.pop_next() {
                Some(Outcome::Frame(chunks)) => {
                    batch_bytes += chunks.iter().map(Bytes::len).sum::<usize>();
                    batch.extend(chunks);
                    if batch_bytes < WRITE_BATCH {
                        continue;
                    }
                }
                Some(Outcome::NoResponse) => continue,
                Some(Outcome::Close(reason)) => close = Some(reason),
                None => {}
            }
            if !batch.is_empty() {
                let write_timeout = self.shared.config.write_timeout;
                match write_chunks(&mut self.writer, std::mem::take(&mut batch), write_timeout)
                    .await
                {
                    Ok(()) => self.last_activity = Instant::now(),
                    Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                        return Err(CloseReason::WriteTimeout)
                    }
                    Err(e) => return Err(CloseReason::Write(e)),
                }
                batch_bytes = 0;
            }
            if let Some(reason) = close {
                return Err(reason);
            }
            if !self.order.next_is_ready() {
                return Ok(());
            }
        }
    }

    /// Takes one request frame: refuses what the handler does not support, answers an
    /// unsupported ApiVersions version itself, and queues the rest for the handler workers.
    async fn on_frame(&mut self, frame: bytes::Bytes) -> Result<(), CloseReason> {
        let broker = self.ctx.broker;
        let (key, version, correlation_id) = peek_request_header(&frame)?;
        let apis = &self.shared.apis;
        let api_key = match ApiKey::try_from(key) {
            Ok(k) if apis.range(k).is_some() => k,
            _ => return Err(CloseReason::UnknownApiKey(key)),
        };
        if !apis.supports(api_key, version) {
            if api_key != ApiKey::ApiVersions {
                return Err(CloseReason::UnsupportedVersion {
                    api_key: key,
                    version,
                });
            }
            tracing::debug!(
                broker,
                api_key = key,
                api_version = version,
                correlation_id,
                "unsupported ApiVersions version, answering UNSUPPORTED_VERSION as v0"
            );
            let body = apis.unsupported_version_response();
            let chunks = encode_api_versions(0, correlation_id, &body)?;
            let seq = self.take_seq()?;
            self.order.finish(seq, Outcome::Frame(chunks));
            return Ok(());
        }
        let mut rest = frame;
        let header = RequestHeader::decode_auto(&mut rest)?;
        let body = RequestBody::decode(api_key, version, &mut rest)?;
        tracing::trace!(
            broker,
            api_key = key,
            api_version = version,
            correlation_id,
            "request read"
        );
        let seq = self.take_seq()?;
        let request = QueuedRequest {
            ctx: self.ctx.clone(),
            seq,
            api_key,
            header,
            body,
            reply: self.reply.clone(),
        };
        // A full channel blocks this connection only (back-pressure); the others of the
        // processor keep going.
        data_path::count_hop(Hop::RequestQueued);
        self.shared
            .request_tx
            .send(request)
            .await
            .map_err(|_| CloseReason::Shutdown)
    }

    /// The next sequence number; the caller only takes a frame when there is room.
    fn take_seq(&mut self) -> Result<u64, CloseReason> {
        self.order.start().ok_or(CloseReason::Internal(
            "request taken beyond the in-flight limit",
        ))
    }
}

/// Counts the `held` bytes of a partly read request as copied when growing the read buffer
/// moved them away from `at` (a reallocation, or a shift to the front of the buffer).
fn count_moved(at: *const u8, held: usize, buf: &BytesMut) {
    if held > 0 && buf.as_ptr() != at {
        data_path::count_copy(CopyStep::RequestReadBuffer, held);
    }
}
