//! The controller → broker channel of a simulated node: the real `kafka-controller`
//! `ChannelManager` calls [`SimChannel::send`], which puts the wire request on the simulated
//! network and waits for the answer — or, when the request or its answer is lost, times out
//! so that the manager retries the same item.

use std::time::Duration;

use async_trait::async_trait;
use kafka_controller::broker_channel::{BrokerChannel, ChannelError};
use kafka_controller::context::BrokerInfo;
use kafka_wire::{RequestBody, ResponseBody};
use tokio::sync::{mpsc, oneshot};

use super::coord::LifeCell;

/// A control request leaving a controller, for the simulator to carry.
#[derive(Debug)]
pub struct Outgoing {
    /// The controller's broker.
    pub from: i32,
    /// The destination broker.
    pub to: i32,
    /// The wire version.
    pub version: i16,
    /// The request.
    pub body: RequestBody,
    /// Where the answer goes.
    pub reply: oneshot::Sender<ResponseBody>,
}

/// One controller's channel.
#[derive(Debug)]
pub struct SimChannel {
    from: i32,
    life: LifeCell,
    outbox: mpsc::UnboundedSender<Outgoing>,
    timeout: Duration,
}

impl SimChannel {
    /// The channel of broker `from`'s controller.
    pub fn new(
        from: i32,
        life: LifeCell,
        outbox: mpsc::UnboundedSender<Outgoing>,
        timeout: Duration,
    ) -> Self {
        SimChannel {
            from,
            life,
            outbox,
            timeout,
        }
    }
}

#[async_trait]
impl BrokerChannel for SimChannel {
    async fn send(
        &self,
        broker: &BrokerInfo,
        version: i16,
        request: &RequestBody,
    ) -> Result<ResponseBody, ChannelError> {
        self.life.wait_running().await;
        let (reply, rx) = oneshot::channel();
        let unreachable = |reason: &str| ChannelError::Unreachable {
            broker: broker.id,
            reason: reason.to_string(),
        };
        self.outbox
            .send(Outgoing {
                from: self.from,
                to: broker.id,
                version,
                body: request.clone(),
                reply,
            })
            .map_err(|_| unreachable("simulation over"))?;
        let answer = tokio::time::timeout(self.timeout, rx).await;
        // A paused controller sees the answer only when it wakes.
        self.life.wait_running().await;
        match answer {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(_)) => Err(unreachable("dropped")),
            Err(_) => Err(unreachable("timed out")),
        }
    }
}
