//! The `cluster` demo's flow end to end: three brokers on loopback with controllers on an
//! in-memory store, a partition leader killed, the controller killed, brokers restarted —
//! a partition reassigned, the topic deleted — and no acknowledged record lost (K1, K2, K5,
//! K6, K7, K8).

use std::time::Duration;

use ha_examples::cluster::{run, DemoConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k1_k6_k7_cluster_demo_loses_no_acknowledged_record_through_failovers_and_reassignment() {
    let config = DemoConfig {
        records_per_partition: 20,
        step_timeout: Duration::from_secs(30),
    };
    let report = run(config, |line| println!("{line}"))
        .await
        .expect("the demo runs to its verdict");
    assert_eq!(report.acknowledged, 3 * 20 * 3, "{report:?}");
    assert!(report.topic_deleted, "{report:?}");
    assert_eq!(report.lost, 0, "{report:?}");
    assert!(report.passed());
    assert!(
        report.controller_epochs.windows(2).all(|w| w[1] > w[0]),
        "{report:?}"
    );
}
