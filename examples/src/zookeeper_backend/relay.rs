//! [`Relay`]: a loopback TCP forwarder in front of a ZooKeeper ensemble that can cut its
//! client off. Forcing a session to end needs the client silenced first (otherwise its own
//! reconnection competes with the connection that closes the session), so every demo client
//! reaches ZooKeeper through one of these.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

struct Shared {
    targets: Vec<String>,
    next: AtomicUsize,
    paused: AtomicBool,
    /// Bumped on every pause: live forwarded connections end when it changes.
    cut: watch::Sender<u64>,
}

/// Forwards connections from a free loopback port to the servers of an ensemble, one server
/// per connection in turn (the next one when a server does not answer). While paused, every
/// live connection is cut and new ones are closed at once. Dropping it stops forwarding.
pub struct Relay {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("addr", &self.addr)
            .field("targets", &self.shared.targets)
            .finish_non_exhaustive()
    }
}

impl Relay {
    /// Starts forwarding a free loopback port to `targets` (`host:port` each). Must be called
    /// within a tokio runtime.
    pub async fn start(targets: Vec<String>) -> std::io::Result<Relay> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let (cut, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            targets,
            next: AtomicUsize::new(0),
            paused: AtomicBool::new(false),
            cut,
        });
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        Ok(Relay {
            addr,
            shared,
            accept,
        })
    }

    /// `127.0.0.1:<port>` of the relay, for a connect string.
    pub fn host_port(&self) -> String {
        format!("127.0.0.1:{}", self.addr.port())
    }

    /// Cuts every forwarded connection and refuses new ones until [`resume`](Self::resume).
    pub fn pause(&self) {
        self.shared.paused.store(true, Ordering::SeqCst);
        self.shared.cut.send_modify(|g| *g += 1);
    }

    /// Forwards new connections again.
    pub fn resume(&self) {
        self.shared.paused.store(false, Ordering::SeqCst);
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.accept.abort();
        self.shared.cut.send_modify(|g| *g += 1);
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        if shared.paused.load(Ordering::SeqCst) {
            drop(client);
            continue;
        }
        tokio::spawn(forward(client, shared.clone()));
    }
}

async fn forward(mut client: TcpStream, shared: Arc<Shared>) {
    let mut cut = shared.cut.subscribe();
    let n = shared.targets.len();
    let first = shared.next.fetch_add(1, Ordering::Relaxed);
    let mut server = None;
    for i in 0..n {
        if let Ok(s) = TcpStream::connect(shared.targets[(first + i) % n].as_str()).await {
            server = Some(s);
            break;
        }
    }
    let Some(mut server) = server else { return };
    if shared.paused.load(Ordering::SeqCst) {
        return;
    }
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
        _ = cut.changed() => {}
    }
}
