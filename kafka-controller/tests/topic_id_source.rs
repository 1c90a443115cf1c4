//! KIP-516 topic ids from an injected source: only ids Kafka's `Uuid.randomUuid` could give
//! are handed out, and a source that gives none is given up on instead of looping forever.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use kafka_controller::topic_id_source::{is_assignable_topic_id, TopicIdGenerator, MAX_DRAWS};
use kafka_controller::zk_data::encode_topic_id;
use kafka_wire::Uuid;

#[test]
fn kip_516_reserved_ids_and_ids_printed_with_a_leading_dash_are_never_assigned() {
    assert!(!is_assignable_topic_id(Uuid::from_u128(0)), "the zero id");
    assert!(
        !is_assignable_topic_id(Uuid::from_u128(1)),
        "the metadata topic's id"
    );
    // 0xf8 in the first byte: the first base64 digit is 62, '-'.
    let dash = Uuid::from_u128(0xf8u128 << 120);
    assert!(encode_topic_id(dash).starts_with('-'));
    assert!(!is_assignable_topic_id(dash));
    assert!(is_assignable_topic_id(Uuid::from_u128(2)));
}

#[test]
fn kip_516_unusable_candidates_are_skipped() {
    let dash = Uuid::from_u128(0xf8u128 << 120);
    let mut answers = vec![
        Uuid::from_u128(0),
        dash,
        Uuid::from_u128(7),
        Uuid::from_u128(9),
    ]
    .into_iter();
    let ids = TopicIdGenerator::new(move || answers.next().unwrap_or(Uuid::from_u128(0)));
    assert_eq!(
        ids.fresh(|id| id == Uuid::from_u128(7)),
        Some(Uuid::from_u128(9))
    );
}

#[test]
fn a_source_without_usable_ids_is_given_up_after_max_draws() {
    let draws = Arc::new(AtomicUsize::new(0));
    let counted = draws.clone();
    let ids = TopicIdGenerator::new(move || {
        counted.fetch_add(1, Ordering::Relaxed);
        Uuid::from_u128(1)
    });
    assert_eq!(ids.fresh(|_| false), None);
    assert_eq!(draws.load(Ordering::Relaxed), MAX_DRAWS);
}

#[test]
fn clones_of_a_generator_share_its_source() {
    let ids = TopicIdGenerator::counter(10);
    let clone = ids.clone();
    assert_eq!(ids.fresh(|_| false), Some(Uuid::from_u128(10)));
    assert_eq!(clone.fresh(|_| false), Some(Uuid::from_u128(11)));
}
