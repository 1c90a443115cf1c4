//! Handler workers (Kafka's `KafkaRequestHandler`, `num.io.threads` of them): each takes the
//! next request off the shared request channel, runs the [`RequestHandler`], encodes the
//! response and puts it on the response queue of the request's connection (which the
//! processor owning the connection drives).
//!
//! A worker never waits on a parked request: when the handler's future is not ready at its
//! first poll (an acks=all produce or a long-poll fetch waiting in a purgatory), the worker
//! keeps it aside with the others it parked and takes the next request, polling the parked
//! ones again as their answers arrive — as Kafka's handler threads leave delayed operations
//! to the purgatory. Parked requests stay bounded by the per-connection in-flight limit, and
//! are dropped at shutdown.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use kafka_replication::data_path::{self, Hop};
use tokio::sync::{mpsc, Mutex};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::channel::{Completion, Outcome, QueuedRequest};
use super::error::CloseReason;
use super::handler::RequestHandler;
use super::response::encode_response;

/// The receiving end of the request channel, shared by every worker.
pub(crate) type SharedRequests = Arc<Mutex<mpsc::Receiver<QueuedRequest>>>;

/// A request being handled, with where its completion goes.
type Handling = Pin<Box<dyn Future<Output = (Completion, Reply)> + Send>>;
type Reply = mpsc::UnboundedSender<Completion>;

/// Runs one handler worker until the request channel closes (and its parked requests are
/// done) or the server shuts down.
pub(crate) async fn run_worker<H: RequestHandler>(
    handler: Arc<H>,
    requests: SharedRequests,
    shutdown: CancellationToken,
) {
    let mut parked: FuturesUnordered<Handling> = FuturesUnordered::new();
    let mut open = true;
    loop {
        let next = tokio::select! {
            _ = shutdown.cancelled() => break,
            Some((completion, reply)) = parked.next(), if !parked.is_empty() => {
                deliver(&reply, completion);
                continue;
            }
            r = async { requests.lock().await.recv().await }, if open => r,
            else => break,
        };
        let Some(request) = next else {
            open = false;
            continue;
        };
        let reply = request.reply.clone();
        let mut handling: Handling = Box::pin(
            handle_one(handler.clone(), request).map(move |completion| (completion, reply)),
        );
        match futures::poll!(handling.as_mut()) {
            Poll::Ready((completion, reply)) => deliver(&reply, completion),
            Poll::Pending => {
                // Parked (in a purgatory, or on a lock): polled again when it is woken.
                data_path::count_hop(Hop::HandlerParked);
                parked.push(handling);
            }
        }
    }
}

/// Puts `completion` on its connection's response queue.
fn deliver(reply: &Reply, completion: Completion) {
    data_path::count_hop(Hop::ResponseQueued);
    // A closed queue means the connection is gone; its response goes with it.
    let _ = reply.send(completion);
}

async fn handle_one<H: RequestHandler>(handler: Arc<H>, request: QueuedRequest) -> Completion {
    let started = std::time::Instant::now();
    let QueuedRequest {
        ctx,
        seq,
        api_key,
        header,
        body,
        reply: _,
    } = request;
    let version = header.request_api_version;
    let correlation_id = header.correlation_id;
    let broker = ctx.broker;
    let api = api_key.as_i16();
    // Whatever the handler logs carries the request's fields.
    let span = tracing::debug_span!(
        "request",
        broker,
        api_key = api,
        api_version = version,
        correlation_id,
        connection_id = ctx.connection_id
    );
    let handled = AssertUnwindSafe(handler.handle(&ctx, &header, body))
        .catch_unwind()
        .instrument(span)
        .await;
    let outcome = match handled {
        Err(_) => {
            tracing::error!(
                broker,
                api_key = api,
                correlation_id,
                "request handler panicked"
            );
            Outcome::Close(CloseReason::HandlerPanicked)
        }
        Ok(None) => Outcome::NoResponse,
        Ok(Some(body)) if body.api_key() != api_key => {
            tracing::error!(
                broker,
                api_key = api,
                correlation_id,
                response_api_key = body.api_key().as_i16(),
                "handler answered with another API"
            );
            Outcome::Close(CloseReason::WrongResponseApi {
                request: api,
                response: body.api_key().as_i16(),
            })
        }
        Ok(Some(body)) => match encode_response(api_key, version, correlation_id, &body) {
            Ok(chunks) => Outcome::Frame(chunks),
            Err(e) => {
                tracing::error!(broker, api_key = api, correlation_id, error = %e, "response not encodable");
                Outcome::Close(e.into())
            }
        },
    };
    crate::metrics::record_request(api_key, started);
    tracing::trace!(broker, api_key = api, correlation_id, "request handled");
    Completion { seq, outcome }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::{RequestContext, SupportedApis};
    use async_trait::async_trait;
    use kafka_wire::messages::{MetadataRequest, MetadataResponse};
    use kafka_wire::{ApiKey, RequestBody, RequestHeader, ResponseBody};
    use std::time::Duration;

    /// Answers Metadata at once, except correlation id 0, which waits for `release`.
    struct Parking {
        release: tokio::sync::Notify,
    }

    #[async_trait]
    impl RequestHandler for Parking {
        fn supported_apis(&self) -> SupportedApis {
            SupportedApis::new().with(ApiKey::Metadata, 0, 12)
        }

        async fn handle(
            &self,
            _ctx: &RequestContext,
            header: &RequestHeader,
            _body: RequestBody,
        ) -> Option<ResponseBody> {
            if header.correlation_id == 0 {
                self.release.notified().await;
            }
            Some(ResponseBody::Metadata(MetadataResponse::default()))
        }
    }

    fn request(seq: u64, reply: &Reply) -> QueuedRequest {
        QueuedRequest {
            reply: reply.clone(),
            ctx: RequestContext {
                broker: 1,
                connection_id: seq,
                peer: std::net::SocketAddr::from(([127, 0, 0, 1], 1)),
                processor: 0,
            },
            seq,
            api_key: ApiKey::Metadata,
            header: RequestHeader {
                request_api_key: ApiKey::Metadata.as_i16(),
                request_api_version: 1,
                correlation_id: i32::try_from(seq).unwrap_or(0),
                ..Default::default()
            },
            body: RequestBody::Metadata(MetadataRequest::default()),
        }
    }

    #[tokio::test]
    async fn k3_a_parked_request_does_not_hold_its_handler_worker() {
        let handler = Arc::new(Parking {
            release: tokio::sync::Notify::new(),
        });
        let (request_tx, request_rx) = mpsc::channel(4);
        let (response_tx, mut response_rx) = mpsc::unbounded_channel();
        let shutdown = CancellationToken::new();
        // One worker only: the second request is answered while the first is parked.
        let worker = tokio::spawn(run_worker(
            handler.clone(),
            Arc::new(Mutex::new(request_rx)),
            shutdown.clone(),
        ));
        for seq in 0..2 {
            request_tx
                .send(request(seq, &response_tx))
                .await
                .expect("queued");
        }
        let first = tokio::time::timeout(Duration::from_secs(5), response_rx.recv())
            .await
            .expect("answered while the other request is parked")
            .expect("completion");
        assert_eq!(first.seq, 1);
        handler.release.notify_one();
        let second = tokio::time::timeout(Duration::from_secs(5), response_rx.recv())
            .await
            .expect("the parked request completes once released")
            .expect("completion");
        assert_eq!(second.seq, 0);
        assert!(matches!(second.outcome, Outcome::Frame(_)));
        shutdown.cancel();
        worker.await.expect("worker stops");
    }
}
