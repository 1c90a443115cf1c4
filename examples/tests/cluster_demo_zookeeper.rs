//! The `cluster` demo's whole flow on a real ZooKeeper started by `ha-testkit`: brokers,
//! controllers and the admin client each on their own ZooKeeper session, killed brokers' sessions
//! ended on the server — and run twice on the same server, since the demo prepares a fresh root
//! each time. Fails under `CI` when ZooKeeper is missing; skips with a notice otherwise.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ha_examples::cluster::{run, DemoConfig, DemoStep};
use ha_examples::zookeeper_backend::{ZooKeeperHarness, DEFAULT_ROOT};
use ha_testkit::{require_zookeeper, ZkEnsemble};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k1_k6_k7_cluster_demo_on_real_zookeeper_loses_no_acknowledged_record_and_reruns(
) -> Result<(), Box<dyn std::error::Error>> {
    if !require_zookeeper(
        "k1_k6_k7_cluster_demo_on_real_zookeeper_loses_no_acknowledged_record_and_reruns",
    )? {
        return Ok(());
    }
    let zk = tokio::task::spawn_blocking(ZkEnsemble::standalone).await??;
    // A chroot of our own, to show the demo's root goes below it.
    let connect = format!("{}/it", zk.connect_string());
    for attempt in 1..=2 {
        let harness = ZooKeeperHarness::start(&connect, DEFAULT_ROOT).await?;
        assert_eq!(harness.root(), "/it/ha-blocks-demo");
        let steps = Arc::new(Mutex::new(Vec::new()));
        let seen = steps.clone();
        let config = DemoConfig {
            records_per_partition: 5,
            step_timeout: Duration::from_secs(40),
            ..DemoConfig::on(Arc::new(harness))
        }
        .with_step_hook(move |step| {
            seen.lock().unwrap().push(step);
            async {}
        });
        let report = run(config, |line| println!("run {attempt}: {line}")).await?;
        assert_eq!(report.acknowledged, 3 * 5 * 3, "{report:?}");
        assert_eq!(report.lost, 0, "{report:?}");
        assert!(report.topic_deleted, "{report:?}");
        assert!(
            report.controller_epochs.windows(2).all(|w| w[1] > w[0]),
            "{report:?}"
        );
        let steps = steps.lock().unwrap().clone();
        assert_eq!(steps.first(), Some(&DemoStep::BrokersStarted));
        assert_eq!(steps.last(), Some(&DemoStep::TopicDeleted));
    }
    Ok(())
}
