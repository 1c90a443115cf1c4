//! [`TcpProxy`]: a loopback TCP forwarder that tests can pause, cutting a client off from its
//! server (connection loss, a network partition) without touching either process.

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::TestkitError;

/// How long the proxy waits to reach its target.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Accept-loop polling interval.
const POLL: Duration = Duration::from_millis(10);

struct Shared {
    paused: AtomicBool,
    stop: AtomicBool,
    /// Both sockets of every live forwarded connection, to cut them on pause.
    live: Mutex<Vec<TcpStream>>,
}

impl Shared {
    fn cut_all(&self) {
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        for s in live.drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// Forwards connections from `127.0.0.1:<port>` to a target address. While paused, existing
/// connections are cut and new ones are accepted and closed at once (the client sees a
/// connection loss and keeps retrying). Dropping it stops forwarding.
pub struct TcpProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for TcpProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpProxy")
            .field("addr", &self.addr)
            .field("paused", &self.is_paused())
            .finish()
    }
}

impl TcpProxy {
    /// Starts forwarding a free loopback port to `target`.
    pub fn start(target: SocketAddr) -> Result<TcpProxy, TestkitError> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .map_err(|e| TestkitError::io("bind the proxy", e))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| TestkitError::io("configure the proxy", e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| TestkitError::io("read the proxy address", e))?;
        let shared = Arc::new(Shared {
            paused: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            live: Mutex::new(Vec::new()),
        });
        let s = shared.clone();
        let accept = std::thread::Builder::new()
            .name(format!("tcp-proxy-{}", addr.port()))
            .spawn(move || accept_loop(listener, target, s))
            .map_err(|e| TestkitError::io("spawn the proxy thread", e))?;
        Ok(TcpProxy {
            addr,
            shared,
            accept: Some(accept),
        })
    }

    /// Starts forwarding to `127.0.0.1:port`.
    pub fn to_local_port(port: u16) -> Result<TcpProxy, TestkitError> {
        Self::start(SocketAddr::from(([127, 0, 0, 1], port)))
    }

    /// The proxy's listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `127.0.0.1:<port>` of the proxy, for a connect string.
    pub fn host_port(&self) -> String {
        format!("127.0.0.1:{}", self.addr.port())
    }

    /// Cuts every forwarded connection and refuses new ones until [`resume`](Self::resume).
    pub fn pause(&self) {
        self.shared.paused.store(true, Ordering::SeqCst);
        self.shared.cut_all();
    }

    /// Forwards new connections again.
    pub fn resume(&self) {
        self.shared.paused.store(false, Ordering::SeqCst);
    }

    /// Whether the proxy is paused.
    pub fn is_paused(&self) -> bool {
        self.shared.paused.load(Ordering::SeqCst)
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.cut_all();
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: TcpListener, target: SocketAddr, shared: Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((client, _)) => {
                if shared.paused.load(Ordering::SeqCst) {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                }
                // If the target is down the client just sees its connection closed.
                let _ = forward(client, target, &shared);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

fn forward(client: TcpStream, target: SocketAddr, shared: &Arc<Shared>) -> io::Result<()> {
    client.set_nonblocking(false)?;
    let server = TcpStream::connect_timeout(&target, CONNECT_TIMEOUT)?;
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    {
        let mut live = shared.live.lock().unwrap_or_else(|e| e.into_inner());
        live.push(client.try_clone()?);
        live.push(server.try_clone()?);
    }
    pump(client.try_clone()?, server.try_clone()?)?;
    pump(server, client)?;
    Ok(())
}

/// Copies `from` → `to` on a thread until either side closes, then closes both.
fn pump(mut from: TcpStream, mut to: TcpStream) -> io::Result<()> {
    std::thread::Builder::new()
        .name("tcp-proxy-pump".into())
        .spawn(move || {
            let _ = io::copy(&mut from, &mut to);
            let _ = from.shutdown(Shutdown::Both);
            let _ = to.shutdown(Shutdown::Both);
        })
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn proxy_forwards_and_pause_cuts_the_connection() {
        let echo = TcpListener::bind(("127.0.0.1", 0)).expect("bind");
        let target = echo.local_addr().expect("addr");
        std::thread::spawn(move || {
            while let Ok((mut s, _)) = echo.accept() {
                std::thread::spawn(move || {
                    let mut buf = [0u8; 64];
                    while let Ok(n) = s.read(&mut buf) {
                        if n == 0 || s.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        let proxy = TcpProxy::start(target).expect("proxy");
        let mut c = TcpStream::connect(proxy.addr()).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        c.write_all(b"ping").expect("write");
        let mut buf = [0u8; 4];
        c.read_exact(&mut buf).expect("echo");
        assert_eq!(&buf, b"ping");
        proxy.pause();
        let mut rest = Vec::new();
        // The cut connection reads EOF (or an error) instead of hanging.
        let _ = c.read_to_end(&mut rest);
        assert!(rest.is_empty());
        let mut refused = TcpStream::connect(proxy.addr()).expect("accepted, then closed");
        refused
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        assert_eq!(refused.read(&mut buf).unwrap_or(0), 0);
        proxy.resume();
        let mut again = TcpStream::connect(proxy.addr()).expect("connect");
        again
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        again.write_all(b"pong").expect("write");
        again.read_exact(&mut buf).expect("echo");
        assert_eq!(&buf, b"pong");
    }
}
