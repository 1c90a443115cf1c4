//! The conformance suite of [`BrokerChannel`]: the controller's channel to a broker must carry
//! each control request (LeaderAndIsr, UpdateMetadata, StopReplica, at Kafka 2.8's versions)
//! and bring back the broker's answer to that very request; sends to one broker, one after
//! the other or from many tasks at once, each get their own answer; a broker that cannot be
//! reached is a [`ChannelError::Unreachable`] naming it, within a bounded time (the
//! `ChannelManager` retries, the channel only reports); once the broker is back, the next
//! send reaches it.
//!
//! ```
//! use async_trait::async_trait;
//! use kafka_controller::broker_channel::MemoryBrokerChannel;
//! use kafka_controller::context::{BrokerId, BrokerInfo};
//! use kafka_controller::testing::{broker_channel::{self, BrokerChannelBuilder}, BuilderError};
//!
//! struct Memory;
//! #[async_trait]
//! impl BrokerChannelBuilder for Memory {
//!     type Channel = MemoryBrokerChannel;
//!     type Broker = ();
//!     async fn build(&self, _controller: BrokerId, broker: BrokerId)
//!         -> Result<(MemoryBrokerChannel, (), BrokerInfo), BuilderError> {
//!         Ok((MemoryBrokerChannel::new(), (), BrokerInfo::new(broker, 7)))
//!     }
//!     async fn stop(&self, channel: &MemoryBrokerChannel, _: (), info: &BrokerInfo)
//!         -> Result<(), BuilderError> {
//!         channel.set_down(info.id, true);
//!         Ok(())
//!     }
//!     async fn restart(&self, channel: &MemoryBrokerChannel, info: &BrokerInfo)
//!         -> Result<((), BrokerInfo), BuilderError> {
//!         channel.set_down(info.id, false);
//!         Ok(((), info.clone()))
//!     }
//! }
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! broker_channel::test_all(&Memory).await?;
//! # Ok::<(), kafka_controller::testing::ConformanceError>(())
//! # }).unwrap();
//! ```

use std::time::Duration;

use async_trait::async_trait;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::messages::leader_and_isr_request::{
    LeaderAndIsrLiveLeader, LeaderAndIsrPartitionState, LeaderAndIsrTopicState,
};
use kafka_wire::messages::stop_replica_request::{
    StopReplicaPartitionState, StopReplicaTopicState,
};
use kafka_wire::messages::update_metadata_request::{
    UpdateMetadataBroker, UpdateMetadataEndpoint, UpdateMetadataPartitionState,
    UpdateMetadataTopicState,
};
use kafka_wire::messages::{LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest};
use kafka_wire::{ApiKey, RequestBody, ResponseBody, Uuid};

use super::{BuilderError, Case, ConformanceError};
use crate::broker_channel::{response_error, BrokerChannel, ChannelError};
use crate::context::{BrokerId, BrokerInfo};
use crate::request_batch::ControlVersions;

/// How long a case waits for a send to an unreachable broker to fail.
const FAILURE_TIMEOUT: Duration = Duration::from_secs(30);

const CONTROLLER: BrokerId = 100;
const BROKER: BrokerId = 1;
const VERSIONS: ControlVersions = ControlVersions::KAFKA_2_8;

/// What the suite needs from a [`BrokerChannel`] implementation.
#[async_trait]
pub trait BrokerChannelBuilder: Sync {
    /// The channel under test.
    type Channel: BrokerChannel;
    /// What keeps the broker running (a server, nothing for an in-memory channel).
    type Broker: Send + Sync;

    /// The channel of controller `controller` and broker `broker`, reachable through it and
    /// accepting this controller's requests (controller epoch 1, the broker epoch of the
    /// returned [`BrokerInfo`]). Called inside a tokio runtime.
    async fn build(
        &self,
        controller: BrokerId,
        broker: BrokerId,
    ) -> Result<(Self::Channel, Self::Broker, BrokerInfo), BuilderError>;

    /// Stops the broker (its process dies): sends to `info` can no longer reach it.
    async fn stop(
        &self,
        channel: &Self::Channel,
        broker: Self::Broker,
        info: &BrokerInfo,
    ) -> Result<(), BuilderError>;

    /// Starts the stopped broker again (possibly listening elsewhere: the returned
    /// [`BrokerInfo`] says where, with the epoch it registered with).
    async fn restart(
        &self,
        channel: &Self::Channel,
        info: &BrokerInfo,
    ) -> Result<(Self::Broker, BrokerInfo), BuilderError>;
}

/// Runs every case in order and stops at the first failure.
pub async fn test_all<B: BrokerChannelBuilder>(builder: &B) -> Result<(), ConformanceError> {
    each_control_request_gets_the_answer_of_its_api(builder).await?;
    sends_one_after_the_other_each_get_their_answer(builder).await?;
    concurrent_sends_each_get_their_answer(builder).await?;
    an_unreachable_broker_is_an_unreachable_error(builder).await?;
    a_broker_back_is_reached_again(builder).await?;
    Ok(())
}

fn topic_id() -> Uuid {
    Uuid([42; 16])
}

fn leader_and_isr(topic: &str, info: &BrokerInfo, leader_epoch: i32) -> RequestBody {
    RequestBody::LeaderAndIsr(LeaderAndIsrRequest {
        controller_id: CONTROLLER,
        controller_epoch: 1,
        broker_epoch: info.epoch,
        topic_states: vec![LeaderAndIsrTopicState {
            topic_name: topic.into(),
            topic_id: topic_id(),
            partition_states: vec![LeaderAndIsrPartitionState {
                topic_name: topic.into(),
                partition_index: 0,
                controller_epoch: 1,
                leader: info.id,
                leader_epoch,
                isr: vec![info.id].into(),
                partition_epoch: leader_epoch,
                replicas: vec![info.id].into(),
                is_new: leader_epoch == 0,
                ..Default::default()
            }],
            ..Default::default()
        }],
        live_leaders: vec![LeaderAndIsrLiveLeader {
            broker_id: info.id,
            host_name: info
                .endpoints
                .first()
                .map_or_else(|| "localhost".into(), |e| e.host.as_str().into()),
            port: info.endpoints.first().map_or(9092, |e| e.port),
            ..Default::default()
        }],
        ..Default::default()
    })
}

fn update_metadata(topic: &str, info: &BrokerInfo, leader_epoch: i32) -> RequestBody {
    RequestBody::UpdateMetadata(UpdateMetadataRequest {
        controller_id: CONTROLLER,
        controller_epoch: 1,
        broker_epoch: info.epoch,
        topic_states: vec![UpdateMetadataTopicState {
            topic_name: topic.into(),
            topic_id: topic_id(),
            partition_states: vec![UpdateMetadataPartitionState {
                topic_name: topic.into(),
                partition_index: 0,
                controller_epoch: 1,
                leader: info.id,
                leader_epoch,
                isr: vec![info.id].into(),
                replicas: vec![info.id].into(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        live_brokers: vec![UpdateMetadataBroker {
            id: info.id,
            endpoints: info
                .endpoints
                .iter()
                .map(|e| UpdateMetadataEndpoint {
                    port: e.port,
                    host: e.host.as_str().into(),
                    listener: e.listener.as_str().into(),
                    security_protocol: e.security_protocol,
                    ..Default::default()
                })
                .collect(),
            rack: info.rack.as_deref().map(Into::into),
            ..Default::default()
        }],
        ..Default::default()
    })
}

fn stop_replica(topic: &str, info: &BrokerInfo, leader_epoch: i32) -> RequestBody {
    RequestBody::StopReplica(StopReplicaRequest {
        controller_id: CONTROLLER,
        controller_epoch: 1,
        broker_epoch: info.epoch,
        topic_states: vec![StopReplicaTopicState {
            topic_name: topic.into(),
            partition_states: vec![StopReplicaPartitionState {
                partition_index: 0,
                leader_epoch,
                delete_partition: false,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    })
}

fn version_of(request: &RequestBody) -> i16 {
    match request.api_key() {
        ApiKey::LeaderAndIsr => VERSIONS.leader_and_isr,
        ApiKey::UpdateMetadata => VERSIONS.update_metadata,
        _ => VERSIONS.stop_replica,
    }
}

/// Sends `request` and checks the answer is of its API without a top-level error.
async fn send_ok<C: BrokerChannel>(
    c: Case,
    channel: &C,
    info: &BrokerInfo,
    request: &RequestBody,
) -> Result<ResponseBody, ConformanceError> {
    let what = format!("{:?}", request.api_key());
    let response = c.op(
        &format!("send {what}"),
        channel.send(info, version_of(request), request).await,
    )?;
    c.eq(
        &format!("API of the answer to {what}"),
        response.api_key(),
        request.api_key(),
    )?;
    c.eq(
        &format!("top-level error of the answer to {what}"),
        response_error(&response),
        ErrorCode::None,
    )?;
    Ok(response)
}

/// LeaderAndIsr, UpdateMetadata and StopReplica each get an answer of their own API, without
/// a top-level error.
pub async fn each_control_request_gets_the_answer_of_its_api<B: BrokerChannelBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("each_control_request_gets_the_answer_of_its_api");
    let (channel, _broker, info) = c.setup("build", builder.build(CONTROLLER, BROKER).await)?;
    let topic = "channel-conformance";
    send_ok(c, &channel, &info, &update_metadata(topic, &info, 0)).await?;
    send_ok(c, &channel, &info, &leader_and_isr(topic, &info, 0)).await?;
    send_ok(c, &channel, &info, &stop_replica(topic, &info, 0)).await?;
    Ok(())
}

/// Forty sends to one broker, one after the other and of alternating APIs, each get the
/// answer of their own API.
pub async fn sends_one_after_the_other_each_get_their_answer<B: BrokerChannelBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("sends_one_after_the_other_each_get_their_answer");
    let (channel, _broker, info) = c.setup("build", builder.build(CONTROLLER, BROKER).await)?;
    let topic = "channel-sequence";
    for epoch in 0..20 {
        send_ok(c, &channel, &info, &update_metadata(topic, &info, epoch)).await?;
        send_ok(c, &channel, &info, &leader_and_isr(topic, &info, epoch)).await?;
    }
    Ok(())
}

/// Sends from many tasks at once over one channel each get the answer of their own API.
pub async fn concurrent_sends_each_get_their_answer<B: BrokerChannelBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("concurrent_sends_each_get_their_answer");
    let (channel, _broker, info) = c.setup("build", builder.build(CONTROLLER, BROKER).await)?;
    let topic = "channel-concurrent";
    let requests: Vec<RequestBody> = (0..24)
        .map(|i| match i % 3 {
            0 => update_metadata(topic, &info, 0),
            1 => stop_replica(topic, &info, 0),
            _ => update_metadata(topic, &info, 0),
        })
        .collect();
    let answers =
        futures::future::join_all(requests.iter().map(|r| send_ok(c, &channel, &info, r))).await;
    for a in answers {
        a?;
    }
    Ok(())
}

/// A send to a stopped broker fails with `Unreachable` naming it, within a bounded time.
pub async fn an_unreachable_broker_is_an_unreachable_error<B: BrokerChannelBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("an_unreachable_broker_is_an_unreachable_error");
    let (channel, broker, info) = c.setup("build", builder.build(CONTROLLER, BROKER).await)?;
    let topic = "channel-unreachable";
    send_ok(c, &channel, &info, &update_metadata(topic, &info, 0)).await?;
    c.setup(
        "stop the broker",
        builder.stop(&channel, broker, &info).await,
    )?;
    for request in [
        update_metadata(topic, &info, 1),
        leader_and_isr(topic, &info, 1),
    ] {
        let sent = channel.send(&info, version_of(&request), &request);
        match tokio::time::timeout(FAILURE_TIMEOUT, sent).await {
            Ok(Err(ChannelError::Unreachable { broker, .. })) if broker == info.id => {}
            Ok(other) => {
                return Err(c.fail(format!(
                    "a send to a stopped broker: expected Unreachable, got {other:?}"
                )))
            }
            Err(_) => {
                return Err(c.fail(format!(
                    "a send to a stopped broker hung for {FAILURE_TIMEOUT:?}"
                )))
            }
        }
    }
    Ok(())
}

/// After a failure, a broker started again (maybe elsewhere) is reached by the next send.
pub async fn a_broker_back_is_reached_again<B: BrokerChannelBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("a_broker_back_is_reached_again");
    let (channel, broker, info) = c.setup("build", builder.build(CONTROLLER, BROKER).await)?;
    let topic = "channel-back";
    send_ok(c, &channel, &info, &update_metadata(topic, &info, 0)).await?;
    c.setup(
        "stop the broker",
        builder.stop(&channel, broker, &info).await,
    )?;
    let request = update_metadata(topic, &info, 1);
    match tokio::time::timeout(
        FAILURE_TIMEOUT,
        channel.send(&info, version_of(&request), &request),
    )
    .await
    {
        Ok(Err(_)) => {}
        other => {
            return Err(c.fail(format!(
                "a send to a stopped broker: expected an error, got {other:?}"
            )))
        }
    }
    let (_broker, info) = c.setup("restart the broker", builder.restart(&channel, &info).await)?;
    send_ok(c, &channel, &info, &update_metadata(topic, &info, 2)).await?;
    send_ok(c, &channel, &info, &leader_and_isr(topic, &info, 2)).await?;
    Ok(())
}
