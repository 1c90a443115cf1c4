//! The `BrokerChannel` conformance suite on `MemoryBrokerChannel` (kafka-broker runs it on
//! `TcpBrokerChannel` to a broker's server).

use async_trait::async_trait;
use kafka_controller::broker_channel::MemoryBrokerChannel;
use kafka_controller::context::{BrokerId, BrokerInfo};
use kafka_controller::testing::broker_channel::{self, BrokerChannelBuilder};
use kafka_controller::testing::{BuilderError, ConformanceError};

struct Memory;

#[async_trait]
impl BrokerChannelBuilder for Memory {
    type Channel = MemoryBrokerChannel;
    type Broker = ();

    async fn build(
        &self,
        _controller: BrokerId,
        broker: BrokerId,
    ) -> Result<(MemoryBrokerChannel, (), BrokerInfo), BuilderError> {
        Ok((MemoryBrokerChannel::new(), (), BrokerInfo::new(broker, 7)))
    }

    async fn stop(
        &self,
        channel: &MemoryBrokerChannel,
        _: (),
        info: &BrokerInfo,
    ) -> Result<(), BuilderError> {
        channel.set_down(info.id, true);
        Ok(())
    }

    async fn restart(
        &self,
        channel: &MemoryBrokerChannel,
        info: &BrokerInfo,
    ) -> Result<((), BrokerInfo), BuilderError> {
        channel.set_down(info.id, false);
        Ok(((), info.clone()))
    }
}

#[tokio::test]
async fn memory_broker_channel_passes_the_broker_channel_suite() -> Result<(), ConformanceError> {
    broker_channel::test_all(&Memory).await
}
