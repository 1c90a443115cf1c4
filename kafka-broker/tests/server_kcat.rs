//! A real Kafka client (`kcat`, on librdkafka) against the K3 network server: it negotiates
//! versions with ApiVersions and lists the cluster with Metadata, so the server, the version
//! negotiation and the codec are checked by code nobody here wrote.
//!
//! When `kcat` is missing the test fails if the `CI` environment variable is set and is
//! skipped with a notice otherwise.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use kafka_broker::server::{RequestContext, RequestHandler, Server, ServerConfig, SupportedApis};
use kafka_wire::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_wire::messages::MetadataResponse;
use kafka_wire::{ApiKey, RequestBody, RequestHeader, ResponseBody};
use tokio::net::TcpListener;

/// Answers ApiVersions and Metadata for a one-broker cluster with topic `orders` (3 partitions).
struct OneBrokerMetadata {
    port: u16,
}

#[async_trait]
impl RequestHandler for OneBrokerMetadata {
    fn supported_apis(&self) -> SupportedApis {
        SupportedApis::new()
            .with(ApiKey::ApiVersions, 0, i16::MAX)
            .with(ApiKey::Metadata, 0, i16::MAX)
    }

    async fn handle(
        &self,
        _ctx: &RequestContext,
        header: &RequestHeader,
        body: RequestBody,
    ) -> Option<ResponseBody> {
        match body {
            RequestBody::ApiVersions(r) => Some(ResponseBody::ApiVersions(
                self.supported_apis()
                    .answer_api_versions(header.request_api_version, &r),
            )),
            RequestBody::Metadata(_) => Some(ResponseBody::Metadata(MetadataResponse {
                brokers: vec![MetadataResponseBroker {
                    node_id: 1,
                    host: "127.0.0.1".into(),
                    port: i32::from(self.port),
                    ..Default::default()
                }],
                cluster_id: Some("ha-blocks-test".into()),
                controller_id: 1,
                topics: vec![MetadataResponseTopic {
                    name: Some("orders".into()),
                    partitions: (0..3)
                        .map(|p| MetadataResponsePartition {
                            partition_index: p,
                            leader_id: 1,
                            replica_nodes: vec![1].into(),
                            isr_nodes: vec![1].into(),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                }],
                ..Default::default()
            })),
            _ => None,
        }
    }
}

fn kcat_present() -> bool {
    Command::new("kcat")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `kcat` with `args`, killing it after `limit`; returns (success, stdout, stderr).
fn run_kcat(args: &[String], limit: Duration) -> (bool, String, String) {
    let mut child = Command::new("kcat")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kcat starts");
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() < limit => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                break;
            }
        }
    }
    let out = child.wait_with_output().expect("kcat output");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_lists_the_cluster_through_api_versions_and_metadata() {
    if !kcat_present() {
        if std::env::var_os("CI").is_some() {
            panic!("kcat is required under CI (Debian package `kcat`)");
        }
        eprintln!(
            "kcat not found: skipping kcat_lists_the_cluster_through_api_versions_and_metadata"
        );
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let handler = Arc::new(OneBrokerMetadata { port: addr.port() });
    let config = ServerConfig::default().with_broker(1);
    let server = Server::serve(listener, config, handler).expect("server starts");

    let args: Vec<String> = ["-L", "-b", &addr.to_string(), "-m", "10"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (ok, stdout, stderr) =
        tokio::task::spawn_blocking(move || run_kcat(&args, Duration::from_secs(20)))
            .await
            .expect("kcat ran");
    server.shutdown().await;

    assert!(ok, "kcat -L failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("1 brokers:"), "{stdout}");
    assert!(stdout.contains("broker 1 at 127.0.0.1"), "{stdout}");
    assert!(
        stdout.contains("topic \"orders\" with 3 partitions"),
        "{stdout}"
    );
    assert!(
        stdout.contains("partition 2, leader 1, replicas: 1, isrs: 1"),
        "{stdout}"
    );
}
