//! [`ZkProducerIdManager`]: producer ids in blocks of [`PRODUCER_ID_BLOCK_SIZE`] claimed from
//! `/latest_producer_id_block` in the coordination store, as Kafka's `ProducerIdManager` does
//! in ZooKeeper mode: read the last claimed block, write the next one with a compare-and-set
//! on the node's version (retrying when another broker won the race), then hand out its ids
//! one by one. Ids are unique across brokers and restarts.
//!
//! The node's JSON: `{"version":1,"broker":<id>,"block_start":"<first>","block_end":"<last>"}`.

use std::sync::Arc;

use async_trait::async_trait;
use ha_coordination::{Coordination, CoordinationError, CreateMode};
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use crate::{ProducerIdError, ProducerIdSource};

/// The node holding the last claimed block.
pub const PRODUCER_ID_BLOCK_PATH: &str = "/latest_producer_id_block";
/// Ids per block (Kafka's `PidBlockSize`).
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;
/// How many lost races for a block are retried before giving up.
const MAX_ATTEMPTS: u32 = 100;

/// A claimed block of producer ids, `[block_start, block_end]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerIdBlock {
    /// The broker that claimed it.
    pub broker: i32,
    /// The first id.
    pub block_start: i64,
    /// The last id.
    pub block_end: i64,
}

#[derive(Serialize, Deserialize)]
struct BlockJson {
    version: i64,
    broker: i32,
    block_start: String,
    block_end: String,
}

impl ProducerIdBlock {
    /// Encodes the node's JSON.
    pub fn to_json(&self) -> Vec<u8> {
        let json = BlockJson {
            version: 1,
            broker: self.broker,
            block_start: self.block_start.to_string(),
            block_end: self.block_end.to_string(),
        };
        serde_json::to_vec(&json).unwrap_or_default()
    }

    /// Decodes the node's JSON.
    pub fn from_json(bytes: &[u8]) -> Result<ProducerIdBlock, ProducerIdError> {
        let bad = |e: String| ProducerIdError::Store(format!("{PRODUCER_ID_BLOCK_PATH}: {e}"));
        let json: BlockJson = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
        Ok(ProducerIdBlock {
            broker: json.broker,
            block_start: json
                .block_start
                .parse()
                .map_err(|_| bad("block_start".into()))?,
            block_end: json
                .block_end
                .parse()
                .map_err(|_| bad("block_end".into()))?,
        })
    }
}

/// Where this broker is in its current block.
#[derive(Debug, Default)]
struct Cursor {
    next: i64,
    end: i64,
}

/// A [`ProducerIdSource`] claiming blocks from `/latest_producer_id_block` in the
/// coordination store, as Kafka's `ProducerIdManager` does in ZooKeeper mode.
pub struct ZkProducerIdManager {
    coord: Arc<dyn Coordination>,
    broker: i32,
    cursor: Mutex<Option<Cursor>>,
}

impl std::fmt::Debug for ZkProducerIdManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkProducerIdManager")
            .field("broker", &self.broker)
            .finish_non_exhaustive()
    }
}

fn store_error(e: CoordinationError) -> ProducerIdError {
    ProducerIdError::Store(e.to_string())
}

impl ZkProducerIdManager {
    /// The manager of broker `broker` on `coord`; it claims its first block on first use.
    pub fn new(coord: Arc<dyn Coordination>, broker: i32) -> Self {
        ZkProducerIdManager {
            coord,
            broker,
            cursor: Mutex::new(None),
        }
    }

    /// Claims the block after the last claimed one.
    pub async fn claim_block(&self) -> Result<ProducerIdBlock, ProducerIdError> {
        for _ in 0..MAX_ATTEMPTS {
            let current = match self.coord.get_data(PRODUCER_ID_BLOCK_PATH, false).await {
                Ok((data, stat)) if data.is_empty() => Some((None, stat.version)),
                Ok((data, stat)) => Some((Some(ProducerIdBlock::from_json(&data)?), stat.version)),
                Err(e) if e.is_no_node() => None,
                Err(e) => return Err(store_error(e)),
            };
            let last_end = current.as_ref().and_then(|(b, _)| b.map(|b| b.block_end));
            let block_start = match last_end {
                Some(end) if end > i64::MAX - PRODUCER_ID_BLOCK_SIZE => {
                    return Err(ProducerIdError::Exhausted)
                }
                Some(end) => end + 1,
                None => 0,
            };
            let block = ProducerIdBlock {
                broker: self.broker,
                block_start,
                block_end: block_start + PRODUCER_ID_BLOCK_SIZE - 1,
            };
            let data = block.to_json();
            let written = match current {
                Some((_, version)) => self
                    .coord
                    .set_data(PRODUCER_ID_BLOCK_PATH, &data, version)
                    .await
                    .map(|_| ()),
                None => self
                    .coord
                    .create(PRODUCER_ID_BLOCK_PATH, &data, CreateMode::Persistent)
                    .await
                    .map(|_| ()),
            };
            match written {
                Ok(()) => {
                    tracing::info!(
                        broker = self.broker,
                        block_start = block.block_start,
                        block_end = block.block_end,
                        "claimed a producer id block"
                    );
                    return Ok(block);
                }
                // Another broker claimed a block meanwhile: read again.
                Err(e) if e.is_bad_version() || e.is_node_exists() => continue,
                Err(e) => return Err(store_error(e)),
            }
        }
        Err(ProducerIdError::Store(
            "too many concurrent claims of a producer id block".into(),
        ))
    }
}

#[async_trait]
impl ProducerIdSource for ZkProducerIdManager {
    async fn next_producer_id(&self) -> Result<i64, ProducerIdError> {
        let mut cursor = self.cursor.lock().await;
        if cursor.as_ref().is_none_or(|c| c.next > c.end) {
            let block = self.claim_block().await?;
            *cursor = Some(Cursor {
                next: block.block_start,
                end: block.block_end,
            });
        }
        let c = cursor.as_mut().ok_or(ProducerIdError::Exhausted)?;
        let id = c.next;
        c.next += 1;
        Ok(id)
    }
}
