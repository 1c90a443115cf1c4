//! `TcpTransport`: election connections wire-compatible with ZooKeeper 3.8's
//! `QuorumCnxManager` and quorum connections carrying ZooKeeper's jute `QuorumPacket`s.
//!
//! Election port rules implemented here:
//! - the initiator sends the V1 header (`-65536`, sid, addrLen 1..=2048, `host:port`); the acceptor
//!   sends nothing back;
//! - one connection per pair, initiated by the larger sid: an initiator with the smaller sid sends
//!   its header and closes; an acceptor that reads a smaller sid closes and dials back (at the
//!   configured address, or else the announced one unless it is a wildcard, ZOOKEEPER-2164); an
//!   equal sid is dropped; when both sides dial at once, the larger keeps its fresh connection;
//! - `i32`-framed messages of 1..=524288 bytes; a bad length closes that one connection;
//! - per peer a send slot of capacity 1 (the newest message replaces an unsent one), and on every
//!   (re)connection the last message sent to that peer is sent again first;
//! - messages to ourselves are looped back without a socket.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Notify};
use tokio::task::AbortHandle;
use tracing::{debug, warn};

use super::wire::{read_frame, write_frame, ConnectionHeader};
use super::{Transport, TransportEvent};
use quorum::{accept_quorum, dial_quorum};

mod quorum;
use crate::discovery::QuorumPacket;
use crate::types::ServerId;

/// Capacity of the event queue towards the peer; when full, new events are dropped (logged).
const EVENT_QUEUE: usize = 1024;
/// Capacity of one quorum connection's outgoing queue (packets). A connection whose queue is
/// full is closed: it must hold a burst of broadcast traffic while the socket is slow. A
/// learner's sync fits whatever its length: the driver hands the leader's core the next chunk
/// of a DIFF from the log only once the queue drained below half of this
/// ([`Transport::quorum_backlog`]).
const QUORUM_QUEUE: usize = 8192;
/// Most addresses learned from the headers of servers missing from our configuration.
const MAX_LEARNED_ADDRS: usize = 1024;
/// A smaller sid dialling us while our own connection to it is younger than this is a crossing
/// dial: our connection is kept instead of being replaced by a dial-back.
const CROSSING_DIAL_WINDOW: Duration = Duration::from_secs(1);

/// Addresses of one peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddrs {
    /// Its election port address.
    pub election: SocketAddr,
    /// Its quorum port address.
    pub quorum: SocketAddr,
}

/// Configuration of a [`TcpTransport`]: [`TcpConfig::new`] and the `with_*` setters.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TcpConfig {
    /// Our sid.
    pub my_sid: ServerId,
    /// The other servers (and optionally ourselves, which is ignored), by sid.
    pub peers: HashMap<ServerId, PeerAddrs>,
    /// The election address we announce in our connection header (`host:port`).
    pub announced_addr: String,
    /// Timeout for connecting and for reading a connection header (ZooKeeper's `cnxTimeout`).
    pub connect_timeout: Duration,
}

impl TcpConfig {
    /// A configuration with the default 5 s connect timeout.
    pub fn new(
        my_sid: ServerId,
        announced_addr: SocketAddr,
        peers: HashMap<ServerId, PeerAddrs>,
    ) -> Self {
        Self {
            my_sid,
            peers,
            announced_addr: announced_addr.to_string(),
            connect_timeout: Duration::from_secs(5),
        }
    }

    /// This configuration with another [`connect_timeout`](Self::connect_timeout).
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }
}

#[derive(Default)]
struct SendSlot {
    pending: Mutex<Option<Bytes>>,
    last_sent: Mutex<Option<Bytes>>,
    notify: Notify,
}

struct Conn {
    generation: u64,
    tasks: Vec<AbortHandle>,
    since: std::time::Instant,
}

impl Conn {
    fn abort(&self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

#[derive(Default)]
struct ElectionPeer {
    slot: Arc<SendSlot>,
    conn: Option<Conn>,
    dialing: bool,
}

struct QuorumConn {
    generation: u64,
    tx: mpsc::Sender<QuorumPacket>,
    tasks: Vec<AbortHandle>,
}

#[derive(Default)]
struct State {
    election: HashMap<ServerId, ElectionPeer>,
    /// Election addresses announced in the headers of servers missing from our configuration.
    learned: HashMap<ServerId, SocketAddr>,
    quorum: HashMap<ServerId, QuorumConn>,
    next_generation: u64,
    listeners: Vec<AbortHandle>,
}

struct Shared {
    cfg: TcpConfig,
    events: mpsc::Sender<TransportEvent>,
    state: Mutex<State>,
}

impl Shared {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn emit(&self, ev: TransportEvent) {
        if let Err(e) = self.events.try_send(ev) {
            warn!(
                sid = self.cfg.my_sid.0,
                "event queue full or closed, dropping {:?}", e
            );
        }
    }
}

/// A TCP [`Transport`], wire-compatible with ZooKeeper 3.8's election and quorum ports.
/// Dropping it stops every task and closes every connection it owns.
pub struct TcpTransport {
    shared: Arc<Shared>,
    events: mpsc::Receiver<TransportEvent>,
    election_addr: SocketAddr,
    quorum_addr: SocketAddr,
}

impl std::fmt::Debug for TcpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpTransport")
            .field("sid", &self.shared.cfg.my_sid)
            .field("election_addr", &self.election_addr)
            .field("quorum_addr", &self.quorum_addr)
            .finish()
    }
}

impl TcpTransport {
    /// Starts the transport on already bound election and quorum listeners (bind them to
    /// port 0 first to learn free ports, then build every peer's [`TcpConfig`]).
    pub fn start(
        cfg: TcpConfig,
        election: TcpListener,
        quorum: TcpListener,
    ) -> std::io::Result<Self> {
        let election_addr = election.local_addr()?;
        let quorum_addr = quorum.local_addr()?;
        let (tx, rx) = mpsc::channel(EVENT_QUEUE);
        let shared = Arc::new(Shared {
            cfg,
            events: tx,
            state: Mutex::new(State::default()),
        });
        let a = tokio::spawn(accept_election(shared.clone(), election)).abort_handle();
        let b = tokio::spawn(accept_quorum(shared.clone(), quorum)).abort_handle();
        shared.state().listeners = vec![a, b];
        Ok(Self {
            shared,
            events: rx,
            election_addr,
            quorum_addr,
        })
    }

    /// Binds both listeners and starts the transport.
    pub async fn bind(
        cfg: TcpConfig,
        election_addr: SocketAddr,
        quorum_addr: SocketAddr,
    ) -> std::io::Result<Self> {
        let e = TcpListener::bind(election_addr).await?;
        let q = TcpListener::bind(quorum_addr).await?;
        Self::start(cfg, e, q)
    }

    /// The local election port address.
    pub fn election_addr(&self) -> SocketAddr {
        self.election_addr
    }

    /// The local quorum port address.
    pub fn quorum_addr(&self) -> SocketAddr {
        self.quorum_addr
    }

    /// Sids with an established election connection (for tests and diagnostics).
    pub fn connected_peers(&self) -> Vec<ServerId> {
        let st = self.shared.state();
        let mut v: Vec<ServerId> = st
            .election
            .iter()
            .filter(|(_, p)| p.conn.is_some())
            .map(|(s, _)| *s)
            .collect();
        v.sort_unstable();
        v
    }
}

impl Drop for TcpTransport {
    fn drop(&mut self) {
        // Abort every task and drop every queue, so that every socket closes now and the
        // peers see the connections go down (as when a process dies).
        let mut st = self.shared.state();
        for l in st.listeners.drain(..) {
            l.abort();
        }
        for (_, p) in st.election.drain() {
            if let Some(c) = &p.conn {
                c.abort();
            }
        }
        for (_, q) in st.quorum.drain() {
            for t in &q.tasks {
                t.abort();
            }
        }
    }
}

#[async_trait]
impl Transport for TcpTransport {
    fn my_sid(&self) -> ServerId {
        self.shared.cfg.my_sid
    }

    fn send_election(&mut self, to: ServerId, payload: Bytes) {
        let me = self.shared.cfg.my_sid;
        if to == me {
            self.shared
                .emit(TransportEvent::Election { from: me, payload });
            return;
        }
        let needs_dial = {
            let mut st = self.shared.state();
            let peer = st.election.entry(to).or_default();
            *peer
                .slot
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(payload);
            peer.slot.notify.notify_one();
            peer.conn.is_none()
        };
        if needs_dial {
            connect_one(&self.shared, to);
        }
    }

    fn connect_all(&mut self) {
        let me = self.shared.cfg.my_sid;
        let sids: Vec<ServerId> = self.shared.cfg.peers.keys().copied().collect();
        for sid in sids.into_iter().filter(|s| *s != me) {
            connect_one(&self.shared, sid);
        }
    }

    fn quorum_backlog(&self, to: ServerId) -> usize {
        self.shared
            .state()
            .quorum
            .get(&to)
            .map_or(0, |c| c.tx.max_capacity() - c.tx.capacity())
    }

    fn send_quorum(&mut self, to: ServerId, packet: QuorumPacket) {
        let shared = &self.shared;
        let mut st = shared.state();
        if let Some(c) = st.quorum.get(&to) {
            if c.tx.try_send(packet).is_err() {
                warn!(
                    sid = to.0,
                    "quorum send queue full, closing that connection"
                );
                if let Some(c) = st.quorum.remove(&to) {
                    for t in &c.tasks {
                        t.abort();
                    }
                }
                drop(st);
                shared.emit(TransportEvent::QuorumDown(to));
            }
            return;
        }
        let Some(addrs) = shared.cfg.peers.get(&to).copied() else {
            warn!(
                sid = to.0,
                "no quorum connection and no address for peer, packet dropped"
            );
            return;
        };
        let (tx, rx) = mpsc::channel(QUORUM_QUEUE);
        let _ = tx.try_send(packet);
        let generation = st.next_generation;
        st.next_generation += 1;
        let task = tokio::spawn(dial_quorum(
            shared.clone(),
            to,
            generation,
            addrs.quorum,
            rx,
        ));
        st.quorum.insert(
            to,
            QuorumConn {
                generation,
                tx,
                tasks: vec![task.abort_handle()],
            },
        );
    }

    fn close_quorum(&mut self, peer: ServerId) {
        if let Some(c) = self.shared.state().quorum.remove(&peer) {
            for t in &c.tasks {
                t.abort();
            }
        }
    }

    async fn recv(&mut self) -> Option<TransportEvent> {
        self.events.recv().await
    }
}

// ---------- election connections ----------

fn connect_one(shared: &Arc<Shared>, sid: ServerId) {
    let addr = {
        let mut st = shared.state();
        let addr = match shared.cfg.peers.get(&sid) {
            Some(a) => a.election,
            None => match st.learned.get(&sid) {
                Some(a) => *a,
                None => return,
            },
        };
        let peer = st.election.entry(sid).or_default();
        if peer.conn.is_some() || peer.dialing {
            return;
        }
        peer.dialing = true;
        addr
    };
    let shared = shared.clone();
    tokio::spawn(async move {
        let result = dial_election(&shared, sid, addr).await;
        if let Some(p) = shared.state().election.get_mut(&sid) {
            p.dialing = false;
        }
        match result {
            Ok(Some(stream)) => start_election_conn(&shared, sid, stream),
            Ok(None) => {}
            Err(e) => debug!(sid = sid.0, "election connect failed: {e}"),
        }
    });
}

/// Dials `sid`, sends our header; returns the stream if we keep it (our sid is the larger).
async fn dial_election(
    shared: &Shared,
    sid: ServerId,
    addr: SocketAddr,
) -> std::io::Result<Option<TcpStream>> {
    let timeout = shared.cfg.connect_timeout;
    let mut stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timeout"))??;
    stream.set_nodelay(true)?;
    let header = ConnectionHeader {
        sid: shared.cfg.my_sid.0,
        addr: Some(shared.cfg.announced_addr.clone()),
    };
    stream.write_all(&header.encode()).await?;
    stream.flush().await?;
    if sid > shared.cfg.my_sid {
        // The larger sid keeps the connection it initiates: ours is dropped, it dials back.
        debug!(
            sid = sid.0,
            "smaller sid: sent header and closing, waiting for the dial-back"
        );
        let _ = stream.shutdown().await;
        return Ok(None);
    }
    Ok(Some(stream))
}

async fn accept_election(shared: Arc<Shared>, listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(handle_incoming_election(shared.clone(), stream));
            }
            Err(e) => {
                warn!(sid = shared.cfg.my_sid.0, "election accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

async fn handle_incoming_election(shared: Arc<Shared>, mut stream: TcpStream) {
    let me = shared.cfg.my_sid;
    let _ = stream.set_nodelay(true);
    let header = match tokio::time::timeout(
        shared.cfg.connect_timeout,
        ConnectionHeader::read(&mut stream),
    )
    .await
    {
        Ok(Ok(h)) => h,
        Ok(Err(e)) => {
            warn!(sid = me.0, "bad election connection header, closing: {e}");
            return;
        }
        Err(_) => {
            warn!(sid = me.0, "election connection header timed out, closing");
            return;
        }
    };
    let sid = ServerId(header.sid);
    if sid == me {
        warn!(
            sid = sid.0,
            "connection from a server with our own sid, dropping it"
        );
        return;
    }
    if sid < me {
        // We have the larger sid: close and dial back, so that we are the initiator.
        drop(stream);
        let fresh = shared
            .state()
            .election
            .get(&sid)
            .and_then(|p| p.conn.as_ref())
            .is_some_and(|c| c.since.elapsed() < CROSSING_DIAL_WINDOW);
        if fresh {
            // Both sides dialled at once and our own connection just came up: it is the one
            // ZooKeeper's rule keeps anyway, so do not tear it down and dial again.
            debug!(sid = sid.0, "crossing dials: keeping our new connection");
            return;
        }
        debug!(
            sid = sid.0,
            "smaller sid connected: closing and dialling back"
        );
        {
            let mut st = shared.state();
            if let Some(p) = st.election.get_mut(&sid) {
                if let Some(c) = p.conn.take() {
                    c.abort();
                }
            }
            // A server missing from our configuration is dialled back at the address it
            // announced, unless that is a wildcard (ZOOKEEPER-2164) or the table is full.
            if !shared.cfg.peers.contains_key(&sid) {
                let announced = header
                    .addr
                    .as_deref()
                    .and_then(|a| a.split('|').next())
                    .and_then(|a| a.parse::<SocketAddr>().ok())
                    .filter(|a| !a.ip().is_unspecified());
                if let Some(a) = announced {
                    if st.learned.len() < MAX_LEARNED_ADDRS || st.learned.contains_key(&sid) {
                        st.learned.insert(sid, a);
                    }
                }
            }
        }
        connect_one(&shared, sid);
        return;
    }
    start_election_conn(&shared, sid, stream);
}

fn start_election_conn(shared: &Arc<Shared>, sid: ServerId, stream: TcpStream) {
    let (r, w) = stream.into_split();
    let mut st = shared.state();
    let generation = st.next_generation;
    st.next_generation += 1;
    let peer = st.election.entry(sid).or_default();
    if let Some(old) = peer.conn.take() {
        old.abort();
    }
    // Announce the connection before anything received on it, so that the receiver knows the
    // peer is connected when its first message arrives.
    shared.emit(TransportEvent::ConnectionUp(sid));
    let slot = peer.slot.clone();
    let s1 = shared.clone();
    let send = tokio::spawn(async move {
        let e = election_send_loop(slot, w).await;
        debug!(sid = sid.0, "election send worker ended: {e}");
        election_conn_ended(&s1, sid, generation);
    });
    let s2 = shared.clone();
    let recv = tokio::spawn(async move {
        let e = election_recv_loop(&s2, sid, r).await;
        warn!(sid = sid.0, "election connection closed: {e}");
        election_conn_ended(&s2, sid, generation);
    });
    peer.conn = Some(Conn {
        generation,
        tasks: vec![send.abort_handle(), recv.abort_handle()],
        since: std::time::Instant::now(),
    });
}

fn election_conn_ended(shared: &Shared, sid: ServerId, generation: u64) {
    let mut st = shared.state();
    let Some(peer) = st.election.get_mut(&sid) else {
        return;
    };
    if peer.conn.as_ref().map(|c| c.generation) != Some(generation) {
        return;
    }
    if let Some(c) = peer.conn.take() {
        c.abort();
    }
    // Forget servers that are not in our configuration (observers, strangers), so that
    // connections from ever new sids cannot grow the table without bound.
    if !shared.cfg.peers.contains_key(&sid) {
        st.election.remove(&sid);
    }
    drop(st);
    shared.emit(TransportEvent::ConnectionDown(sid));
}

async fn election_send_loop(slot: Arc<SendSlot>, mut w: OwnedWriteHalf) -> String {
    // Re-send the last message on (re)connection when nothing newer is queued.
    let resend = {
        let pending = slot.pending.lock().unwrap_or_else(PoisonError::into_inner);
        if pending.is_none() {
            slot.last_sent
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        } else {
            None
        }
    };
    if let Some(m) = resend {
        if let Err(e) = write_frame(&mut w, &m).await {
            return e.to_string();
        }
    }
    loop {
        let next = slot
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(msg) = next else {
            slot.notify.notified().await;
            continue;
        };
        // Remember it before writing: if this connection is replaced (its task aborted) or
        // fails mid-write, the next connection starts by sending it again.
        *slot
            .last_sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(msg.clone());
        if let Err(e) = write_frame(&mut w, &msg).await {
            return e.to_string();
        }
    }
}

async fn election_recv_loop(shared: &Shared, sid: ServerId, mut r: OwnedReadHalf) -> String {
    loop {
        match read_frame(&mut r).await {
            Ok(payload) => shared.emit(TransportEvent::Election { from: sid, payload }),
            Err(e) => return e.to_string(),
        }
    }
}
