//! [`ChannelManager`]: one tokio task per broker draining its FIFO queue, one request in
//! flight, the same item retried after a backoff until it is answered (Kafka's
//! `ControllerChannelManager` and its `RequestSendThread`s).

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{
    is_retriable_response_error, response_error, BrokerChannel, ChannelConfig, DeliveredResponse,
};
use crate::context::{BrokerId, BrokerInfo};
use crate::request_batch::{BrokerRequest, ControlRequest};

struct BrokerQueue {
    tx: mpsc::UnboundedSender<Arc<ControlRequest>>,
    task: JoinHandle<()>,
}

/// One FIFO queue and one in-flight request per broker (`ControllerChannelManager`).
/// Must be used inside a tokio runtime.
pub struct ChannelManager {
    channel: Arc<dyn BrokerChannel>,
    config: ChannelConfig,
    listener: String,
    responses: mpsc::UnboundedSender<DeliveredResponse>,
    queues: BTreeMap<BrokerId, BrokerQueue>,
}

impl std::fmt::Debug for ChannelManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelManager")
            .field("brokers", &self.queues.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ChannelManager {
    /// A manager sending over `channel`, converting requests at `config.versions` with the
    /// endpoints of `listener`, and delivering responses to `responses`.
    pub fn new(
        channel: Arc<dyn BrokerChannel>,
        config: ChannelConfig,
        listener: &str,
        responses: mpsc::UnboundedSender<DeliveredResponse>,
    ) -> Self {
        Self {
            channel,
            config,
            listener: listener.to_string(),
            responses,
            queues: BTreeMap::new(),
        }
    }

    /// Starts the queue of `broker` (a no-op if it has one).
    pub fn add_broker(&mut self, broker: BrokerInfo) {
        if self.queues.contains_key(&broker.id) {
            return;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(send_loop(
            self.channel.clone(),
            broker.clone(),
            rx,
            self.responses.clone(),
            self.config,
            self.listener.clone(),
        ));
        self.queues.insert(broker.id, BrokerQueue { tx, task });
    }

    /// Stops the queue of `broker`, dropping what it still holds (the broker left).
    pub fn remove_broker(&mut self, broker: BrokerId) {
        if let Some(q) = self.queues.remove(&broker) {
            q.task.abort();
        }
    }

    /// Stops every queue (the controller resigned).
    pub fn shutdown(&mut self) {
        for (_, q) in std::mem::take(&mut self.queues) {
            q.task.abort();
        }
    }

    /// True if `broker` has a queue.
    pub fn has_broker(&self, broker: BrokerId) -> bool {
        self.queues.contains_key(&broker)
    }

    /// Queues the requests of a batch, in order, each on its broker's queue (the conversion to
    /// `kafka-wire` bodies happens on the queue's task, off the event loop). Requests for a
    /// broker without a queue are dropped (Kafka logs and drops them too).
    pub fn enqueue(&mut self, requests: Vec<BrokerRequest>) {
        for r in requests {
            let Some(q) = self.queues.get(&r.broker) else {
                tracing::warn!(broker = r.broker, "no queue for broker; request dropped");
                continue;
            };
            let _ = q.tx.send(Arc::new(r.request));
        }
    }
}

impl Drop for ChannelManager {
    fn drop(&mut self) {
        self.shutdown();
    }
}

async fn send_loop(
    channel: Arc<dyn BrokerChannel>,
    broker: BrokerInfo,
    mut rx: mpsc::UnboundedReceiver<Arc<ControlRequest>>,
    responses: mpsc::UnboundedSender<DeliveredResponse>,
    config: ChannelConfig,
    listener: String,
) {
    while let Some(request) = rx.recv().await {
        let bodies = match request.to_wire(config.versions, &listener) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(broker = broker.id, error = %e, "request cannot be encoded");
                continue;
            }
        };
        for (version, body) in bodies {
            loop {
                match channel.send(&broker, version, &body).await {
                    Ok(response) if is_retriable_response_error(response_error(&response)) => {
                        tracing::warn!(broker = broker.id, error = %response_error(&response),
                            "control request answered with a retriable error; retrying");
                        tokio::time::sleep(config.retry_backoff).await;
                    }
                    Ok(response) => {
                        let _ = responses.send(DeliveredResponse {
                            broker: broker.id,
                            request: request.clone(),
                            response,
                        });
                        break;
                    }
                    Err(e) => {
                        tracing::debug!(broker = broker.id, error = %e,
                            "control request failed; retrying");
                        tokio::time::sleep(config.retry_backoff).await;
                    }
                }
            }
        }
    }
}
