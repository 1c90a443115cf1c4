//! Retention seen by clients (`log.retention.bytes`, `log.retention.ms`): after whole
//! segments go, ListOffsets for the earliest offset answers the new log start offset and a
//! Fetch below it is OFFSET_OUT_OF_RANGE, as in Kafka.

mod broker_common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kafka_broker::{EARLIEST_TIMESTAMP, LATEST_TIMESTAMP};
use kafka_replication::isr::MemoryIsrWriter;
use kafka_replication::log::RetentionPolicy;
use kafka_wire::error_code::ErrorCode;
use kafka_wire::ResponseBody;

use broker_common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_retention_moves_list_offsets_earliest_and_fetch_below_it_is_out_of_range() {
    let addresses = Arc::new(Mutex::new(HashMap::new()));
    let b1 = start_broker(1, addresses.clone(), MemoryIsrWriter::new()).await;
    let mut c = connect(&b1).await;
    let r = c
        .send(4, &leader_and_isr(1, 0, &[1]))
        .await
        .expect("answered");
    assert!(
        matches!(r, ResponseBody::LeaderAndIsr(ref l) if l.error_code == 0),
        "{r:?}"
    );
    // Four committed batches (a single-replica ISR commits at once).
    for v in [b"a", b"b", b"c", b"d"] {
        let r = c.send(9, &produce(-1, &[v])).await.expect("answered");
        assert!(matches!(r, ResponseBody::Produce(_)), "{r:?}");
    }
    assert_eq!(
        listed_offset(
            c.send(7, &list_offsets(EARLIEST_TIMESTAMP))
                .await
                .expect("answered")
        ),
        (0, 0)
    );
    // log.retention.bytes=0: every batch but the newest (each is a segment of a MemoryLog) goes.
    let deleted = b1.apis.driver().with_manager(|m, _| {
        m.set_retention(RetentionPolicy::keep_all().with_retention_bytes(0), 1_000);
        m.apply_retention(0)
    });
    assert_eq!(deleted, 3);
    assert_eq!(
        listed_offset(
            c.send(7, &list_offsets(EARLIEST_TIMESTAMP))
                .await
                .expect("answered")
        ),
        (0, 3),
        "the earliest offset is the new log start"
    );
    assert_eq!(
        listed_offset(
            c.send(7, &list_offsets(LATEST_TIMESTAMP))
                .await
                .expect("answered")
        ),
        (0, 4)
    );
    let p = fetched_partition(c.send(12, &fetch(-1, 0, 0)).await.expect("answered"));
    assert_eq!(p.error_code, ErrorCode::OffsetOutOfRange.code());
    // The out-of-range answer names the log start offset (Kafka answers -1 and its followers
    // ask ListOffsets; ours start again there at once).
    assert_eq!(p.log_start_offset, 3);
    let p = fetched_partition(c.send(12, &fetch(-1, 3, 0)).await.expect("answered"));
    assert_eq!(p.error_code, 0);
    assert_eq!(
        p.log_start_offset, 3,
        "a served fetch carries the log start offset"
    );
    assert!(p.records.is_some_and(|r| !r.is_empty()));
}
