//! The demo's real-ZooKeeper backend: [`ZooKeeperHarness`], a
//! [`CoordinationCluster`] on a ZooKeeper ensemble. Each [`connect`](CoordinationCluster::connect)
//! opens a new `ZooKeeperCoordination` session; [`expire`](CoordinationCluster::expire) ends
//! that session on the server for real (ZooKeeper's documented trick: a second connection with
//! the same session id and password, closed at once), with the client cut off by its
//! [`Relay`] meanwhile so its own reconnection cannot compete.
//!
//! Every client works under a root of its own ([`DEFAULT_ROOT`] below the connect string's
//! chroot), deleted and created again when the harness starts, so reruns begin from an empty
//! store and nothing outside that root is read or touched.
//!
//! ```no_run
//! use std::sync::Arc;
//! use ha_examples::cluster::{run, DemoConfig};
//! use ha_examples::zookeeper_backend::{ZooKeeperHarness, DEFAULT_ROOT};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let harness = ZooKeeperHarness::start("127.0.0.1:2181", DEFAULT_ROOT).await?;
//! let config = DemoConfig { harness: Arc::new(harness), ..DemoConfig::default() };
//! let report = run(config, |line| println!("{line}")).await?;
//! assert!(report.passed());
//! # Ok(())
//! # }
//! ```

mod relay;

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use async_trait::async_trait;
use ha_coordination::{conformance::delete_recursive, CoordinationCluster};
use ha_coordination::{
    Coordination, CoordinationError, CreateMode, SessionId, ZooKeeperCoordination, ZooKeeperOptions,
};

pub use relay::Relay;

/// The root the demo works under, below the connect string's chroot.
pub const DEFAULT_ROOT: &str = "/ha-blocks-demo";

/// Why the harness could not start.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The connect string is not `host:port[,host:port…][/chroot]`.
    #[error("bad connect string {0:?}: expected host:port[,host:port...][/chroot]")]
    ConnectString(String),
    /// The root is not an absolute path below `/`.
    #[error("bad root {0:?}: expected an absolute path such as /ha-blocks-demo")]
    Root(String),
    /// ZooKeeper could not be reached or refused an operation.
    #[error("zookeeper: {0}")]
    Coordination(#[from] CoordinationError),
}

/// A [`CoordinationCluster`] on a real ZooKeeper ensemble; see the [module](self) docs.
pub struct ZooKeeperHarness {
    servers: Vec<String>,
    root: String,
    options: ZooKeeperOptions,
    // Weak: a dropped client closes its session as usual.
    clients: Mutex<Vec<(Weak<ZooKeeperCoordination>, Arc<Relay>)>>,
}

impl std::fmt::Debug for ZooKeeperHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZooKeeperHarness")
            .field("servers", &self.servers)
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

/// Splits `host:port,host:port/chroot` into the servers and the chroot ("" when none).
fn parse_connect_string(s: &str) -> Result<(Vec<String>, String), HarnessError> {
    let (hosts, chroot) = match s.find('/') {
        Some(i) => (&s[..i], s[i..].trim_end_matches('/').to_owned()),
        None => (s, String::new()),
    };
    let servers: Vec<String> = hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(str::to_owned)
        .collect();
    let well_formed = |h: &String| {
        h.rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
    };
    if servers.is_empty() || !servers.iter().all(well_formed) {
        return Err(HarnessError::ConnectString(s.to_owned()));
    }
    Ok((servers, chroot))
}

impl ZooKeeperHarness {
    /// Connects to the ensemble of `connect_string` (`host:port[,host:port…][/chroot]`) and
    /// prepares an empty `root` below its chroot: deletes whatever a previous run left there,
    /// then creates it (with missing parents). Must be called within a tokio runtime.
    pub async fn start(connect_string: &str, root: &str) -> Result<Self, HarnessError> {
        let (servers, chroot) = parse_connect_string(connect_string)?;
        if !root.starts_with('/') || root.len() < 2 || root.ends_with('/') {
            return Err(HarnessError::Root(root.to_owned()));
        }
        let options = ZooKeeperOptions::new()
            .with_session_timeout(Duration::from_secs(10))
            .with_connection_timeout(Duration::from_secs(5));
        let full_root = format!("{chroot}{root}");
        let admin =
            ZooKeeperCoordination::connect_with(&servers.join(","), options.clone()).await?;
        delete_recursive(&admin, &full_root).await?;
        let mut path = String::new();
        for part in full_root.split('/').filter(|p| !p.is_empty()) {
            path.push('/');
            path.push_str(part);
            match admin.create(&path, b"", CreateMode::Persistent).await {
                Ok(_) => {}
                Err(e) if e.is_node_exists() => {}
                Err(e) => return Err(e.into()),
            }
        }
        tracing::info!(root = %full_root, "demo root prepared on ZooKeeper");
        Ok(ZooKeeperHarness {
            servers,
            root: full_root,
            options,
            clients: Mutex::new(Vec::new()),
        })
    }

    /// The absolute path (chroot included) every client works under.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// The servers of the ensemble.
    pub fn servers(&self) -> &[String] {
        &self.servers
    }
}

#[async_trait]
impl CoordinationCluster for ZooKeeperHarness {
    async fn connect(&self) -> Result<Arc<dyn Coordination>, CoordinationError> {
        let relay = Arc::new(
            Relay::start(self.servers.clone())
                .await
                .map_err(|e| CoordinationError::Backend(format!("relay: {e}")))?,
        );
        let connect_string = format!("{}{}", relay.host_port(), self.root);
        let client = Arc::new(
            ZooKeeperCoordination::connect_with(&connect_string, self.options.clone()).await?,
        );
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        clients.retain(|(c, _)| c.strong_count() > 0);
        clients.push((Arc::downgrade(&client), relay));
        Ok(client)
    }

    async fn expire(&self, session: SessionId) -> Result<(), CoordinationError> {
        let found = {
            let clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
            clients.iter().find_map(|(c, relay)| {
                let c = c.upgrade()?;
                (c.session_id() == session).then(|| (c, relay.clone()))
            })
        };
        let Some((client, relay)) = found else {
            return Err(CoordinationError::SessionExpired);
        };
        relay.pause();
        let closed = client.close_session_at(&self.servers.join(",")).await;
        relay.resume();
        closed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_string_with_chroot_and_several_servers_is_split() {
        let (servers, chroot) = parse_connect_string("a:1,b:2/kafka/x").unwrap();
        assert_eq!(servers, vec!["a:1".to_owned(), "b:2".to_owned()]);
        assert_eq!(chroot, "/kafka/x");
        assert!(parse_connect_string("nohost").is_err());
        assert!(parse_connect_string(":12").is_err());
        assert!(parse_connect_string("").is_err());
    }
}
