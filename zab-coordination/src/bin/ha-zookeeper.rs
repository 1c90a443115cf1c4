//! `ha-zookeeper <zoo.cfg>`: one server of a ZooKeeper-compatible ensemble on `zab-core`, read
//! from a ZooKeeper `zoo.cfg` (and `myid` in its `dataDir`). Real ZooKeeper clients connect to
//! its `clientPort`; the servers of `server.N` lines elect a leader with ZooKeeper's fast leader
//! election and replicate the znode tree with ZAB. Logs go to standard error (`RUST_LOG`
//! filters them, `info` by default). SIGTERM or Ctrl-C stops the server.

use std::path::PathBuf;
use std::process::ExitCode;

use tracing::{error, info};
use zab_coordination::zookeeper::config::ZkConfig;
use zab_coordination::zookeeper::server::ZkServer;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let mut args = std::env::args_os().skip(1);
    let Some(path) = args.next().map(PathBuf::from) else {
        eprintln!("usage: ha-zookeeper <zoo.cfg>");
        return ExitCode::from(2);
    };
    if path.as_os_str() == "--help" || path.as_os_str() == "-h" {
        println!("usage: ha-zookeeper <zoo.cfg>");
        return ExitCode::SUCCESS;
    }
    let config = match ZkConfig::load(&path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ha-zookeeper: {}: {e}", path.display());
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ha-zookeeper: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let server = match ZkServer::start(config).await {
            Ok(s) => s,
            Err(e) => {
                error!(error = %e, "cannot start");
                eprintln!("ha-zookeeper: {e}");
                return ExitCode::FAILURE;
            }
        };
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("ha-zookeeper: cannot wait for SIGTERM: {e}");
                    return ExitCode::FAILURE;
                }
            };
        tokio::select! {
            _ = server.wait() => {
                error!("the ZAB peer stopped");
                ExitCode::FAILURE
            }
            _ = tokio::signal::ctrl_c() => {
                info!("interrupted: stopping");
                ExitCode::SUCCESS
            }
            _ = term.recv() => {
                info!("SIGTERM: stopping");
                ExitCode::SUCCESS
            }
        }
    })
}
