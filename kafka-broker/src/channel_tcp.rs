//! [`TcpBrokerChannel`]: the controller's [`BrokerChannel`] over TCP — each LeaderAndIsr /
//! UpdateMetadata / StopReplica request goes to the broker's listener as an ordinary
//! `kafka-wire` request on a [`KafkaConnection`].
//!
//! One connection per broker, opened on first use; a failed round trip (or a broker that now
//! listens elsewhere, e.g. after a restart) drops it and the next send reconnects. Retrying is
//! the `ChannelManager`'s job: this channel only reports the failure.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use kafka_controller::broker_channel::{BrokerChannel, ChannelError};
use kafka_controller::context::{BrokerId, BrokerInfo};
use kafka_wire::{RequestBody, ResponseBody};

use super::{KafkaConnection, LinkError};

struct Slot {
    addr: SocketAddr,
    connection: KafkaConnection,
}

type SharedSlot = Arc<tokio::sync::Mutex<Option<Slot>>>;

/// A [`BrokerChannel`] over TCP: one [`KafkaConnection`] per broker, reconnecting on failure.
pub struct TcpBrokerChannel {
    client_id: String,
    listener: String,
    timeout: Duration,
    slots: Mutex<HashMap<BrokerId, SharedSlot>>,
}

impl std::fmt::Debug for TcpBrokerChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpBrokerChannel")
            .field("client_id", &self.client_id)
            .field("listener", &self.listener)
            .finish()
    }
}

impl TcpBrokerChannel {
    /// The channel of controller `controller`, reaching each broker on its endpoint named
    /// `listener` (else its first one); a round trip longer than `timeout` fails.
    pub fn new(controller: BrokerId, listener: &str, timeout: Duration) -> Self {
        TcpBrokerChannel {
            client_id: format!("controller-{controller}"),
            listener: listener.to_owned(),
            timeout,
            slots: Mutex::new(HashMap::new()),
        }
    }

    fn slot(&self, broker: BrokerId) -> SharedSlot {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(broker)
            .or_default()
            .clone()
    }

    async fn resolve(&self, broker: &BrokerInfo) -> Result<SocketAddr, LinkError> {
        let endpoint = broker
            .endpoint(&self.listener)
            .ok_or(LinkError::NoAddress(broker.id))?;
        let port = u16::try_from(endpoint.port).map_err(|_| LinkError::NoAddress(broker.id))?;
        tokio::net::lookup_host((endpoint.host.as_str(), port))
            .await?
            .next()
            .ok_or(LinkError::NoAddress(broker.id))
    }

    async fn round_trip(
        &self,
        broker: &BrokerInfo,
        version: i16,
        request: &RequestBody,
    ) -> Result<ResponseBody, LinkError> {
        let addr = self.resolve(broker).await?;
        let slot = self.slot(broker.id);
        let mut slot = slot.lock().await;
        let result = tokio::time::timeout(self.timeout, async {
            if slot.as_ref().map(|s| s.addr) != Some(addr) {
                *slot = None;
                let connection = KafkaConnection::connect(addr, &self.client_id).await?;
                *slot = Some(Slot { addr, connection });
            }
            match slot.as_mut() {
                Some(s) => s.connection.send(version, request).await,
                None => Err(LinkError::Closed),
            }
        })
        .await
        .unwrap_or(Err(LinkError::Timeout));
        if result.is_err() {
            *slot = None;
        }
        result
    }
}

#[async_trait]
impl BrokerChannel for TcpBrokerChannel {
    async fn send(
        &self,
        broker: &BrokerInfo,
        version: i16,
        request: &RequestBody,
    ) -> Result<ResponseBody, ChannelError> {
        let response = self
            .round_trip(broker, version, request)
            .await
            .map_err(|e| {
                tracing::debug!(broker = broker.id, error = %e, "control request failed");
                ChannelError::Unreachable {
                    broker: broker.id,
                    reason: e.to_string(),
                }
            })?;
        if response.api_key() != request.api_key() {
            return Err(ChannelError::UnexpectedResponse { broker: broker.id });
        }
        Ok(response)
    }
}
