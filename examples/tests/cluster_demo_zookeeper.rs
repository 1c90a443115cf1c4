//! The `cluster` demo's whole flow on a real ZooKeeper started by `ha-testkit`: brokers,
//! controllers and the admin client each on their own ZooKeeper session, killed brokers' sessions
//! ended on the server — and run twice on the same server, since the demo prepares a fresh root
//! each time. Then the demo as its users run it, `cluster --zookeeper <connect string>`, on a
//! three-server ensemble given by program: Apache ZooKeeper 3.8, or our `ha-zookeeper`
//! (`ServerProgram::HaZookeeper`). Fails under `CI` when ZooKeeper is missing; skips with a
//! notice otherwise.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ha_examples::cluster::{run, DemoConfig, DemoStep};
use ha_examples::zookeeper_backend::{ZooKeeperHarness, DEFAULT_ROOT};
use ha_testkit::{require_zookeeper, ServerProgram, ZkEnsemble};

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

/// The `cluster` example's binary when cargo built it beside this test (`cargo test` builds
/// the package's examples unless targets are selected): `target/<profile>/examples/cluster`.
fn cluster_example() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    // target/<profile>/deps/<this test>
    let profile = exe.parent()?.parent()?;
    let bin = profile.join("examples").join("cluster");
    bin.is_file().then_some(bin)
}

/// Runs `cluster --records 5 --zookeeper <connect>` and returns (exit success, stdout), killing
/// it after `limit`.
fn run_cluster_example(bin: PathBuf, connect: String, limit: Duration) -> (bool, String) {
    let mut child = Command::new(&bin)
        .args(["--records", "5", "--zookeeper", &connect])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", bin.display()));
    let mut stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let ok = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status.success(),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break false;
            }
        }
    };
    (ok, reader.join().unwrap_or_default())
}

/// The demo on three servers of `program`, through `cluster --zookeeper` when that binary is
/// there, else through the library calls its `--zookeeper` option makes
/// (`ZooKeeperHarness::start(connect, DEFAULT_ROOT)`, then `run`).
async fn cluster_demo_on_three_servers(program: ServerProgram) -> TestResult {
    let zk = tokio::task::spawn_blocking(move || {
        ZkEnsemble::builder().servers(3).program(program).start()
    })
    .await??;
    let connect = zk.connect_string();
    match cluster_example() {
        Some(bin) => {
            println!("running {} --zookeeper {connect}", bin.display());
            let (ok, out) = tokio::task::spawn_blocking(move || {
                run_cluster_example(bin, connect, Duration::from_secs(300))
            })
            .await?;
            println!("{out}");
            assert!(ok, "the cluster example failed:\n{out}");
            let verdict = out
                .lines()
                .find(|l| l.starts_with("VERDICT: "))
                .unwrap_or_default();
            assert!(verdict.starts_with("VERDICT: PASS"), "{out}");
            assert!(verdict.contains(", 0 lost;"), "{verdict}");
        }
        None => {
            println!(
                "no cluster example binary beside this test (cargo build -p ha-examples \
                 --example cluster): running the flow it runs with --zookeeper {connect}"
            );
            let harness = ZooKeeperHarness::start(&connect, DEFAULT_ROOT).await?;
            let config = DemoConfig {
                records_per_partition: 5,
                step_timeout: Duration::from_secs(40),
                ..DemoConfig::on(Arc::new(harness))
            };
            let report = run(config, |line| println!("{line}")).await?;
            assert!(report.passed(), "{report:?}");
            assert_eq!(report.lost, 0, "{report:?}");
        }
    }
    drop(zk);
    Ok(())
}

type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_demo_with_zookeeper_option_passes_on_three_apache_zookeeper_servers() -> TestResult
{
    if !require_zookeeper(
        "cluster_demo_with_zookeeper_option_passes_on_three_apache_zookeeper_servers",
    )? {
        return Ok(());
    }
    cluster_demo_on_three_servers(ServerProgram::ApacheZooKeeper).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ha_zookeeper_cluster_demo_with_zookeeper_option_passes_on_three_servers() -> TestResult {
    cluster_demo_on_three_servers(ServerProgram::HaZookeeper(
        ha_testkit::ha_zookeeper_binary()?
    ))
    .await
}
