//! Where the controller's fresh topic ids come from (KIP-516). The controller core draws no
//! randomness of its own: a topic created without an id gets the next id of a
//! [`TopicIdGenerator`] the caller hands in (in `ControllerConfig::topic_ids`). The default is
//! random, as Kafka's `Uuid.randomUuid` (`TopicIdGenerator::random`, feature `tokio`); a
//! simulation passes a seeded source, so that one seed replays one run, and a test can pass a
//! counter ([`TopicIdGenerator::counter`]).
//!
//! Whatever the source answers, an id is only given out if Kafka could have drawn it
//! ([`is_assignable_topic_id`]) and no topic in the context holds it already; a source that
//! gives no such id in [`MAX_DRAWS`] draws leaves the topic without an id (the controller then
//! tries again at its next failover).
//!
//! ```
//! use kafka_controller::topic_id_source::TopicIdGenerator;
//! use kafka_wire::Uuid;
//!
//! let ids = TopicIdGenerator::counter(0);
//! // 0 and 1 are reserved (the zero id and the metadata topic's): the counter skips them.
//! assert_eq!(ids.fresh(|_| false), Some(Uuid::from_u128(2)));
//! assert_eq!(ids.fresh(|id| id == Uuid::from_u128(3)), Some(Uuid::from_u128(4)));
//! ```

use std::sync::{Arc, Mutex, PoisonError};

use kafka_wire::Uuid;

use crate::zk_data::encode_topic_id;

/// How many candidates [`TopicIdGenerator::fresh`] draws before it gives up.
pub const MAX_DRAWS: usize = 64;

/// A source of candidate topic ids. Any `FnMut() -> Uuid + Send` closure is one.
pub trait TopicIdSource: Send {
    /// The next candidate.
    fn next_topic_id(&mut self) -> Uuid;
}

impl<F: FnMut() -> Uuid + Send> TopicIdSource for F {
    fn next_topic_id(&mut self) -> Uuid {
        self()
    }
}

/// Whether `id` is one Kafka's `Uuid.randomUuid` could give a topic: not the zero id, not the
/// reserved metadata-topic id (1), and no text form starting with `-` (it would read as an
/// option on a command line).
pub fn is_assignable_topic_id(id: Uuid) -> bool {
    id.as_u128() > 1 && !encode_topic_id(id).starts_with('-')
}

/// A shared handle on a [`TopicIdSource`]: clones draw from the same source.
#[derive(Clone)]
pub struct TopicIdGenerator {
    source: Arc<Mutex<dyn TopicIdSource>>,
}

impl std::fmt::Debug for TopicIdGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopicIdGenerator").finish_non_exhaustive()
    }
}

impl TopicIdGenerator {
    /// Draws from `source`.
    pub fn new(source: impl TopicIdSource + 'static) -> Self {
        Self {
            source: Arc::new(Mutex::new(source)),
        }
    }

    /// The ids `first`, `first + 1`, ... (wrapping): deterministic, for tests. Controllers
    /// of one cluster that may each assign ids need disjoint ranges (e.g. the broker id in
    /// the upper 64 bits).
    pub fn counter(first: u128) -> Self {
        let mut next = first;
        Self::new(move || {
            let id = Uuid::from_u128(next);
            next = next.wrapping_add(1);
            id
        })
    }

    /// Random ids, as Kafka's `Uuid.randomUuid` draws them (the default of the tokio driver).
    #[cfg(feature = "tokio")]
    pub fn random() -> Self {
        Self::new(|| Uuid::from_u128(rand::random::<u128>()))
    }

    /// The next assignable id ([`is_assignable_topic_id`]) for which `taken` is false, or
    /// `None` if the source gave none in [`MAX_DRAWS`] draws.
    pub fn fresh(&self, taken: impl Fn(Uuid) -> bool) -> Option<Uuid> {
        let mut source = self.source.lock().unwrap_or_else(PoisonError::into_inner);
        (0..MAX_DRAWS)
            .map(|_| source.next_topic_id())
            .find(|&id| is_assignable_topic_id(id) && !taken(id))
    }
}
