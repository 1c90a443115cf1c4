//! Requests per second of the K3 network server answering ApiVersions over loopback TCP,
//! beside a raw tokio TCP ping-pong of the same frame sizes measured in the same run, with
//! the ratio. Run with `cargo bench -p ha-examples --bench server_api_versions`
//! (`-- --rounds N --round-ms MS` to change the rounds; `-- --help` lists the options).
//!
//! Each case runs closed-loop clients (send one request, wait for its response, repeat) for a
//! fixed time: one client (round-trip latency bound) and 32 clients (throughput bound). The
//! two sides alternate for several rounds and the best round of each is printed, the figure
//! least disturbed by other load on a shared machine.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::{BufMut, Bytes, BytesMut};
use clap::Parser;
use kafka_broker::server::{
    RequestContext, RequestHandler, Server, ServerConfig, ServerHandle, SupportedApis,
};
use kafka_wire::messages::ApiVersionsRequest;
use kafka_wire::{ApiKey, RequestBody, RequestHeader, ResponseBody};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// This bench's name, matched against a `cargo bench -- FILTER`.
const NAME: &str = "server_api_versions";

/// Requests per second of the K3 network server answering ApiVersions over loopback TCP,
/// beside a raw tokio TCP ping-pong of the same frame sizes.
#[derive(Debug, Parser)]
#[command(name = NAME, bin_name = NAME)]
struct Args {
    /// Run only if this bench's name contains FILTER (`cargo bench -- FILTER` passes it to
    /// every bench).
    filter: Option<String>,
    /// Measure (`cargo bench` passes it). Without it, as under `cargo test --benches`, each
    /// case runs one round of 100 ms, a check that it works.
    #[arg(long)]
    bench: bool,
    /// Alternating rounds per case when measuring.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = positive::<usize>)]
    rounds: usize,
    /// Length of each round in milliseconds when measuring.
    #[arg(long, value_name = "MS", default_value_t = 1000, value_parser = positive::<u64>)]
    round_ms: u64,
    /// The test harness's options (`cargo test --benches -- ...`), accepted and ignored.
    #[command(flatten)]
    harness: HarnessOptions,
}

/// Parses a whole number of at least 1.
fn positive<T: std::str::FromStr + Default + PartialEq>(s: &str) -> Result<T, String> {
    match s.parse::<T>() {
        Ok(n) if n != T::default() => Ok(n),
        _ => Err("expected a whole number of at least 1".to_string()),
    }
}

/// libtest's options, which `cargo test -- <options>` passes to every test and bench binary.
#[derive(Debug, clap::Args)]
struct HarnessOptions {
    #[arg(long, hide = true)]
    test: bool,
    #[arg(long, hide = true)]
    list: bool,
    #[arg(long, hide = true)]
    nocapture: bool,
    #[arg(long, hide = true)]
    show_output: bool,
    #[arg(long, hide = true)]
    exact: bool,
    #[arg(long, hide = true)]
    ignored: bool,
    #[arg(long, hide = true)]
    include_ignored: bool,
    #[arg(long, short = 'q', hide = true)]
    quiet: bool,
    #[arg(long, hide = true)]
    test_threads: Option<usize>,
    #[arg(long, hide = true)]
    format: Option<String>,
    #[arg(long, hide = true)]
    color: Option<String>,
}

struct ApiVersionsOnly {
    apis: SupportedApis,
}

#[async_trait]
impl RequestHandler for ApiVersionsOnly {
    fn supported_apis(&self) -> SupportedApis {
        self.apis.clone()
    }

    async fn handle(
        &self,
        _ctx: &RequestContext,
        header: &RequestHeader,
        body: RequestBody,
    ) -> Option<ResponseBody> {
        match body {
            RequestBody::ApiVersions(r) => Some(ResponseBody::ApiVersions(
                self.apis
                    .answer_api_versions(header.request_api_version, &r),
            )),
            _ => None,
        }
    }
}

fn api_versions_request() -> Bytes {
    let header = RequestHeader {
        request_api_key: ApiKey::ApiVersions.as_i16(),
        request_api_version: 3,
        correlation_id: 1,
        client_id: Some("bench".into()),
        unknown_tagged_fields: Default::default(),
    };
    let body = RequestBody::ApiVersions(ApiVersionsRequest {
        client_software_name: "bench".into(),
        client_software_version: "1".into(),
        ..Default::default()
    });
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    let encoded = header
        .encode(&mut buf, ApiKey::ApiVersions.request_header_version(3))
        .and_then(|()| body.encode(&mut buf, 3));
    if let Err(e) = encoded {
        panic!("request encodes: {e}");
    }
    let len = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    buf.freeze()
}

async fn read_frame(s: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<()> {
    let mut size = [0u8; 4];
    s.read_exact(&mut size).await?;
    buf.resize(i32::from_be_bytes(size).max(0) as usize, 0);
    s.read_exact(buf).await?;
    Ok(())
}

/// A raw tokio server answering every frame with `reply`: the baseline.
async fn raw_ping_pong_server(reply: Bytes) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let _ = s.set_nodelay(true);
            let reply = reply.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                while read_frame(&mut s, &mut buf).await.is_ok() {
                    if s.write_all(&reply).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

/// Runs `clients` closed-loop clients sending `request` for `run`; requests per second.
async fn measure(addr: SocketAddr, request: Bytes, clients: usize, run: Duration) -> f64 {
    let deadline = Instant::now() + run;
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let request = request.clone();
        tasks.push(tokio::spawn(async move {
            let mut s = TcpStream::connect(addr).await.expect("connect");
            let _ = s.set_nodelay(true);
            let mut buf = Vec::new();
            let mut n = 0u64;
            while Instant::now() < deadline {
                s.write_all(&request).await.expect("write");
                read_frame(&mut s, &mut buf).await.expect("read");
                n += 1;
            }
            n
        }));
    }
    let started = Instant::now();
    let mut total = 0u64;
    for t in tasks {
        total += t.await.expect("client");
    }
    total as f64 / started.elapsed().as_secs_f64()
}

async fn start_server(apis: SupportedApis) -> ServerHandle {
    let config = ServerConfig::default()
        .with_num_processors(2)
        .with_num_handlers(2);
    Server::bind("127.0.0.1:0", config, Arc::new(ApiVersionsOnly { apis }))
        .await
        .expect("server binds")
}

fn main() {
    let args = Args::parse();
    if args.harness.list {
        return;
    }
    if args
        .filter
        .as_ref()
        .is_some_and(|f| !NAME.contains(f.as_str()))
    {
        return;
    }
    let (rounds, run) = if args.bench {
        (args.rounds, Duration::from_millis(args.round_ms))
    } else {
        (1, Duration::from_millis(100))
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let apis = SupportedApis::all();
        let request = api_versions_request();
        let server = start_server(apis.clone()).await;

        // The baseline answers with a frame of the same size as the server's answer.
        let mut probe = TcpStream::connect(server.local_addr())
            .await
            .expect("connect");
        probe.write_all(&request).await.expect("write");
        let mut reply = Vec::new();
        read_frame(&mut probe, &mut reply).await.expect("read");
        drop(probe);
        let mut framed = BytesMut::new();
        framed.put_i32(reply.len() as i32);
        framed.put_slice(&reply);
        let raw = raw_ping_pong_server(framed.freeze()).await;

        println!(
            "ApiVersions v3 over loopback ({} B request, {} B response), best of {rounds} \
             alternating rounds of {run:?}{}",
            request.len(),
            reply.len() + 4,
            if args.bench {
                ""
            } else {
                " (a check: `cargo bench` measures)"
            }
        );
        println!("| clients | raw tokio ping-pong | K3 server | server / raw |");
        println!("|---|---|---|---|");
        for clients in [1usize, 32] {
            let (mut baseline, mut ours) = (0f64, 0f64);
            for _ in 0..rounds {
                baseline = baseline.max(measure(raw, request.clone(), clients, run).await);
                ours = ours.max(measure(server.local_addr(), request.clone(), clients, run).await);
            }
            println!(
                "| {clients} | {baseline:.0} req/s | {ours:.0} req/s | {:.2} |",
                ours / baseline
            );
        }
        server.shutdown().await;
    });
}
