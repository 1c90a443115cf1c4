//! The `Transport` conformance suite on the in-memory mesh and on the TCP transport over
//! loopback.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener};

use zab_core::testing::transport::{self, TransportBuilder};
use zab_core::testing::ConformanceError;
use zab_core::transport::{MemoryNetwork, MemoryTransport, PeerAddrs, TcpConfig, TcpTransport};
use zab_core::ServerId;

struct Memory;

impl TransportBuilder for Memory {
    type Transport = MemoryTransport;

    fn pair(
        &self,
        a: ServerId,
        b: ServerId,
    ) -> std::io::Result<(MemoryTransport, MemoryTransport)> {
        let net = MemoryNetwork::new();
        Ok((net.endpoint(a), net.endpoint(b)))
    }
}

struct Tcp;

fn listener() -> std::io::Result<(tokio::net::TcpListener, SocketAddr)> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    l.set_nonblocking(true)?;
    let addr = l.local_addr()?;
    Ok((tokio::net::TcpListener::from_std(l)?, addr))
}

impl TransportBuilder for Tcp {
    type Transport = TcpTransport;

    fn pair(&self, a: ServerId, b: ServerId) -> std::io::Result<(TcpTransport, TcpTransport)> {
        let (ea, ea_addr) = listener()?;
        let (qa, qa_addr) = listener()?;
        let (eb, eb_addr) = listener()?;
        let (qb, qb_addr) = listener()?;
        let peers: HashMap<ServerId, PeerAddrs> = [
            (
                a,
                PeerAddrs {
                    election: ea_addr,
                    quorum: qa_addr,
                },
            ),
            (
                b,
                PeerAddrs {
                    election: eb_addr,
                    quorum: qb_addr,
                },
            ),
        ]
        .into();
        let ta = TcpTransport::start(TcpConfig::new(a, ea_addr, peers.clone()), ea, qa)?;
        let tb = TcpTransport::start(TcpConfig::new(b, eb_addr, peers), eb, qb)?;
        Ok((ta, tb))
    }
}

#[tokio::test]
async fn memory_transport_passes_the_transport_suite() -> Result<(), ConformanceError> {
    transport::test_all(&Memory).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_transport_passes_the_transport_suite() -> Result<(), ConformanceError> {
    transport::test_all(&Tcp).await
}
