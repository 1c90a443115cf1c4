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
        ..DemoConfig::default()
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_demo_calls_the_step_hook_between_every_step_and_narrates_each_k7_step() {
    use std::sync::{Arc, Mutex};

    use ha_examples::cluster::DemoStep;

    let steps = Arc::new(Mutex::new(Vec::new()));
    let seen = steps.clone();
    let config = DemoConfig {
        records_per_partition: 3,
        step_timeout: Duration::from_secs(30),
        ..DemoConfig::default()
    }
    .with_step_hook(move |step| {
        seen.lock().unwrap().push(step);
        // An async hook is awaited before the demo goes on.
        async { tokio::time::sleep(Duration::from_millis(5)).await }
    });
    let mut lines = Vec::new();
    let report = run(config, |line| lines.push(line.to_owned()))
        .await
        .expect("the demo runs to its verdict");
    assert!(report.passed(), "{report:?}");
    let steps = steps.lock().unwrap().clone();
    assert_eq!(
        steps,
        vec![
            DemoStep::BrokersStarted,
            DemoStep::ControllerElected,
            DemoStep::TopicOnline,
            DemoStep::Produced { round: 1 },
            steps[4],
            DemoStep::Produced { round: 2 },
            steps[6],
            DemoStep::IsrRestored,
            DemoStep::FourthBrokerStarted,
            DemoStep::Reassigned,
            DemoStep::Produced { round: 3 },
            DemoStep::ReadBack,
            DemoStep::TopicDeleted,
        ]
    );
    assert!(matches!(steps[4], DemoStep::LeaderFailedOver { .. }));
    assert!(matches!(steps[6], DemoStep::ControllerFailedOver { .. }));
    let text = lines.join("\n");
    for k7 in [
        "K7.1 ", "K7.2 ", "K7.4 ", "K7.7 ", "K7.8 ", "K7.9 ", "K7.10", "K7.11",
    ] {
        assert!(text.contains(k7), "{k7} missing from:\n{text}");
    }
    assert!(
        lines.iter().filter(|l| l.contains("(took ")).count() >= 20,
        "{text}"
    );
}

/// Issue 8's demo: the controller's store is replicated by three in-process ZAB peers, and the
/// ZAB leader is killed after the first produce round (Z8: the survivors re-elect). The Kafka
/// cluster carries on through every later failover, and nothing acknowledged is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn z8_k6_cluster_demo_on_a_zab_ensemble_survives_the_zab_leader_killed_mid_run() {
    use std::sync::{Arc, Mutex};

    use ha_examples::cluster::DemoStep;
    use zab_coordination::ZabEnsemble;

    let ensemble = Arc::new(ZabEnsemble::start(3).await.expect("ensemble starts"));
    let first = ensemble
        .wait_for_leader(Duration::from_secs(10))
        .await
        .expect("a first ZAB leader");
    let killed = Arc::new(Mutex::new(None));
    let (ens, k) = (ensemble.clone(), killed.clone());
    let config = DemoConfig {
        records_per_partition: 10,
        step_timeout: Duration::from_secs(30),
        harness: ensemble.clone(),
        ..DemoConfig::default()
    }
    .with_step_hook(move |step| {
        let (ens, k) = (ens.clone(), k.clone());
        async move {
            match step {
                DemoStep::Produced { round: 1 } => {
                    let sid = ens.kill_leader().await;
                    let next = ens.wait_for_leader(Duration::from_secs(10)).await.ok();
                    *k.lock().unwrap() = Some((sid, next));
                }
                DemoStep::IsrRestored => {
                    if let Some((Some(sid), _)) = *k.lock().unwrap() {
                        // Restarted in the background of the next steps.
                        let ens = ens.clone();
                        tokio::spawn(async move { ens.restart(sid).await });
                    }
                }
                _ => {}
            }
        }
    });
    let report = run(config, |line| println!("{line}"))
        .await
        .expect("the demo runs to its verdict");
    let (sid, next) = killed.lock().unwrap().expect("the hook ran");
    assert_eq!(sid, Some(first), "the first ZAB leader was killed");
    let next = next.expect("the survivors re-elected");
    assert_ne!(next, first);
    assert_eq!(report.acknowledged, 3 * 10 * 3, "{report:?}");
    assert_eq!(report.lost, 0, "{report:?}");
    assert!(report.topic_deleted && report.passed(), "{report:?}");
}
