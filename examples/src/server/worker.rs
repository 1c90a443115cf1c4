//! Handler workers (Kafka's `KafkaRequestHandler`, `num.io.threads` of them): each takes the
//! next request off the shared request channel, runs the [`RequestHandler`], encodes the
//! response and puts it on the response queue of the processor owning the connection.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use tokio::sync::{mpsc, Mutex};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::channel::{Completion, Outcome, QueuedRequest};
use super::error::CloseReason;
use super::handler::RequestHandler;
use super::response::encode_response;

/// The receiving end of the request channel, shared by every worker.
pub(crate) type SharedRequests = Arc<Mutex<mpsc::Receiver<QueuedRequest>>>;

/// Runs one handler worker until the request channel closes or the server shuts down.
pub(crate) async fn run_worker<H: RequestHandler>(
    handler: Arc<H>,
    requests: SharedRequests,
    responses: Arc<Vec<mpsc::UnboundedSender<Completion>>>,
    shutdown: CancellationToken,
) {
    loop {
        let next = tokio::select! {
            _ = shutdown.cancelled() => None,
            r = async { requests.lock().await.recv().await } => r,
        };
        let Some(request) = next else {
            break;
        };
        let processor = request.ctx.processor;
        let completion = handle_one(handler.as_ref(), request).await;
        if let Some(queue) = responses.get(processor) {
            // A closed queue means the processor stopped: the server is shutting down.
            let _ = queue.send(completion);
        }
    }
}

async fn handle_one<H: RequestHandler>(handler: &H, request: QueuedRequest) -> Completion {
    let QueuedRequest {
        ctx,
        seq,
        api_key,
        header,
        body,
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
    tracing::trace!(broker, api_key = api, correlation_id, "request handled");
    Completion {
        connection_id: ctx.connection_id,
        seq,
        outcome,
    }
}
