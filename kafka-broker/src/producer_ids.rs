//! Where InitProducerId gets its producer ids: a [`ProducerIdSource`]. The default,
//! [`BrokerRangeProducerIds`], needs no coordination (the broker id in the high bits);
//! `glue::ZkProducerIdManager` takes blocks from `/latest_producer_id_block` in the
//! coordination store, as Kafka's `ProducerIdManager` does in ZooKeeper mode.

use std::sync::atomic::{AtomicI64, Ordering};

use async_trait::async_trait;

/// Why no producer id could be handed out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProducerIdError {
    /// The coordination store failed or holds a block that does not decode.
    #[error("producer id block: {0}")]
    Store(String),
    /// Every producer id has been handed out.
    #[error("producer ids exhausted")]
    Exhausted,
}

/// Hands out producer ids, unique across the cluster.
#[async_trait]
pub trait ProducerIdSource: Send + Sync {
    /// The next unused producer id.
    async fn next_producer_id(&self) -> Result<i64, ProducerIdError>;
}

/// Producer ids without coordination: broker `id` owns `[id << 32, (id + 1) << 32)` and counts
/// up from its start; ids restart from the start when the broker restarts, so a producer must
/// not outlive a restart of the broker that gave it its id.
#[derive(Debug)]
pub struct BrokerRangeProducerIds {
    next: AtomicI64,
    end: i64,
}

impl BrokerRangeProducerIds {
    /// The range of broker `broker` (negative ids count as 0).
    pub fn new(broker: i32) -> Self {
        let start = i64::from(broker.max(0)) << 32;
        BrokerRangeProducerIds {
            next: AtomicI64::new(start),
            end: start + (1 << 32),
        }
    }
}

#[async_trait]
impl ProducerIdSource for BrokerRangeProducerIds {
    async fn next_producer_id(&self) -> Result<i64, ProducerIdError> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        if id >= self.end {
            return Err(ProducerIdError::Exhausted);
        }
        Ok(id)
    }
}
