//! One client connection, as ZooKeeper 3.8's `NIOServerCnxn` and request processors serve it:
//! the handshake (a four-letter word, or a `ConnectRequest` that opens a session or reattaches
//! to one), then requests answered in the order they came (FIFO per session, ZooKeeper's
//! guarantee), watch notifications, pings, and the end of the session.
//!
//! - **Writes** (create*, delete, setData, setACL, check, multi, closeSession) become
//!   [`ZkTxn`]s proposed through this server's peer (a follower forwards them to the leader).
//!   Their answer comes back from the state machine as a [`Notice::Reply`] when this server
//!   applies them.
//! - **Reads** are served from this server's replica, but only once every earlier request of
//!   the session is answered (ZooKeeper's `CommitProcessor`), so a client reads its own writes.
//! - **Watch events** are sent as they are triggered, while the state is locked, into the
//!   connection's sink; a read takes the events already in the sink before its own answer, so
//!   a client sees an event before the data that follows it.
//! - A connection ends when the client closes it, its session is closed or expires, a packet is
//!   malformed or larger than `jute.maxbuffer` (logged), or the server leaves its epoch (as
//!   ZooKeeper's server shuts down its client connections when it stops serving): the client
//!   then moves to another server with its session.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_util::codec::{Decoder, FramedRead};
use tracing::{debug, info, warn};

use super::four_letter;
use super::jute::JuteError;
use super::machine::{Notice, TxnResult, ZkState};
use super::proto::{
    self, ConnectRequest, ConnectResponse, CreateRequest, MultiReadResult, MultiResult,
    ReplyHeader, Request, Response, WatcherEvent,
};
use super::server::{now_ms, ConnectionInfo, ServerCtx};
use super::sessions::{new_password, PASSWORD_LEN};
use super::tree::OpOutcome;
use super::txn::{TxnBody, TxnOp, ZkTxn};
use super::types::{op, perms, xid, AddWatchMode, CreateMode, ErrorCode, Id, STATE_SYNC_CONNECTED};
use super::watches::WatchKind;

/// Requests of one connection waiting for their answer before the server reads more from it
/// (back-pressure: a flooding client is simply not read; ZooKeeper's
/// `globalOutstandingLimit` is 1 000).
const MAX_OUTSTANDING: usize = 1000;
/// How long a new connection may take to send its first packet.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a connection ended.
#[derive(Debug, thiserror::Error)]
enum Closed {
    #[error("the client closed the connection")]
    ByClient,
    #[error("socket: {0}")]
    Io(#[from] std::io::Error),
    #[error("malformed packet: {0}")]
    Malformed(#[from] JuteError),
    #[error("packet of {0} bytes exceeds jute.maxbuffer")]
    TooLarge(usize),
    #[error("the session was closed")]
    SessionEnded,
    #[error("the server left its epoch")]
    NotServing,
    #[error("{0}")]
    Refused(String),
}

/// A request of the session in arrival order, until its answer is sent.
#[derive(Debug)]
enum Pending {
    /// A write proposed, waiting for the state machine's reply.
    Write {
        xid: i32,
        op: i32,
        /// For a multi, per operation: whether a create there answers with the new node's
        /// stat (containers and TTL nodes; ZooKeeper answers a multi's other creates with the
        /// path only, whichever create op the client sent).
        with_stat: Vec<bool>,
        since: Instant,
    },
    /// A read, served when it reaches the front.
    Read {
        xid: i32,
        request: Request,
        since: Instant,
    },
    /// A `sync`, answered once the barrier completed and it reaches the front.
    Sync {
        xid: i32,
        path: String,
        done: Option<i64>,
        since: Instant,
    },
    /// An answer already made (a refused request), sent when it reaches the front.
    Ready { frame: Vec<u8>, since: Instant },
    /// A write's answer arrived; sent when it reaches the front.
    Answered { frame: Vec<u8>, since: Instant },
}

/// One connection's state after the handshake.
struct Conn {
    ctx: Arc<ServerCtx>,
    /// This connection's figures for `cons` (the server's map holds them too).
    info: Arc<std::sync::Mutex<ConnectionInfo>>,
    /// When the session was last touched at the peer.
    last_touch: Instant,
    session: i64,
    timeout: i32,
    auth: Vec<Id>,
    pending: VecDeque<Pending>,
    sink: mpsc::UnboundedReceiver<Notice>,
    sync_tx: mpsc::UnboundedSender<(i32, Option<i64>)>,
    out: Vec<u8>,
    received: u64,
    sent: u64,
    /// The session's close was seen while serving a read.
    closed: bool,
}

/// Serves one accepted client connection until it ends.
pub async fn serve(ctx: Arc<ServerCtx>, stream: TcpStream, remote: SocketAddr) {
    let id = ctx.next_connection.fetch_add(1, Ordering::Relaxed);
    let (mut rd, wr) = stream.into_split();
    let mut wr = wr;
    // Registered from the start, as ZooKeeper lists every accepted connection (a four-letter
    // word's own included) in `stat` and `cons`.
    let info = Arc::new(std::sync::Mutex::new(ConnectionInfo {
        remote: Some(remote),
        established_ms: now_ms(),
        ..ConnectionInfo::default()
    }));
    ctx.connections
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(id, info.clone());
    let unregister = |ctx: &ServerCtx| {
        ctx.connections
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&id);
    };
    let mut first = [0u8; 4];
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, rd.read_exact(&mut first)).await {
        Ok(Ok(_)) => {}
        _ => return unregister(&ctx),
    }
    if let Some(word) = four_letter::is_four_letter_word(first) {
        let answer = super::server::four_letter_answer(&ctx, word).await;
        unregister(&ctx);
        let _ = wr.write_all(answer.as_bytes()).await;
        let _ = wr.shutdown().await;
        return;
    }
    let result = handshake_and_run(&ctx, info, remote, first, rd, wr).await;
    unregister(&ctx);
    match result {
        Ok(()) | Err(Closed::ByClient) => {
            debug!(sid = ctx.sid, client = %remote, "connection closed")
        }
        Err(Closed::Malformed(e)) => {
            warn!(sid = ctx.sid, client = %remote, error = %e, "malformed packet: closing the connection")
        }
        Err(Closed::TooLarge(n)) => warn!(
            sid = ctx.sid,
            client = %remote,
            len = n,
            "packet larger than jute.maxbuffer: closing the connection"
        ),
        Err(e) => info!(sid = ctx.sid, client = %remote, reason = %e, "connection closed"),
    }
}

/// Reads the body of the handshake's frame, whose 4-byte length was already read into `len`
/// (straight from the socket: what follows it is left for the [`FrameCodec`]).
async fn read_body(rd: &mut OwnedReadHalf, len: [u8; 4], max: usize) -> Result<Vec<u8>, Closed> {
    let n = i32::from_be_bytes(len);
    if n < 0 {
        return Err(Closed::Malformed(JuteError::NegativeLength(n)));
    }
    let n = n as usize;
    if n > max {
        return Err(Closed::TooLarge(n));
    }
    let mut body = vec![0u8; n];
    rd.read_exact(&mut body).await?;
    Ok(body)
}

/// The client port's framing after the handshake: a 4-byte big-endian length, then that many
/// bytes; a length above `jute.maxbuffer` (or negative) ends the connection before anything
/// is allocated for it.
#[derive(Debug, Clone, Copy)]
struct FrameCodec {
    max: usize,
}

impl Decoder for FrameCodec {
    type Item = BytesMut;
    type Error = Closed;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<BytesMut>, Closed> {
        if src.len() < 4 {
            return Ok(None);
        }
        let n = i32::from_be_bytes([src[0], src[1], src[2], src[3]]);
        if n < 0 {
            return Err(Closed::Malformed(JuteError::NegativeLength(n)));
        }
        let n = n as usize;
        if n > self.max {
            return Err(Closed::TooLarge(n));
        }
        if src.len() < 4 + n {
            src.reserve(4 + n - src.len());
            return Ok(None);
        }
        let mut frame = src.split_to(4 + n);
        let _ = frame.split_to(4);
        Ok(Some(frame))
    }
}

async fn handshake_and_run(
    ctx: &Arc<ServerCtx>,
    info: Arc<std::sync::Mutex<ConnectionInfo>>,
    remote: SocketAddr,
    first: [u8; 4],
    mut rd: OwnedReadHalf,
    mut wr: OwnedWriteHalf,
) -> Result<(), Closed> {
    let body = tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        read_body(&mut rd, first, ctx.max_packet()),
    )
    .await
    .map_err(|_| Closed::Refused("no ConnectRequest in time".into()))??;
    let req = ConnectRequest::decode(&body)?;
    ctx.counters.received.fetch_add(1, Ordering::Relaxed);
    if !ctx.serving() {
        return Err(Closed::Refused(
            "the server does not serve an epoch yet".into(),
        ));
    }
    let last = ctx.lock().last_applied().0;
    if req.last_zxid_seen > last {
        // ZooKeeper's processConnectRequest: the client has seen a newer state than ours.
        return Err(Closed::Refused(format!(
            "the client has seen zxid {:#x}, our last zxid is {last:#x}: it must try another server",
            req.last_zxid_seen
        )));
    }
    let timeout = ctx.limits.negotiate(req.timeout);
    let (sink_tx, sink_rx) = mpsc::unbounded_channel();
    let sink_keep = sink_tx.clone();
    let (session, passwd) = if req.session_id == 0 {
        open_session(ctx, timeout, sink_tx).await?
    } else {
        let known = |ctx: &ServerCtx| {
            ctx.lock()
                .db
                .sessions
                .get(&req.session_id)
                .map(|s| s.passwd == req.passwd)
        };
        // A session opened on another server a moment ago may not be applied here yet: as
        // ZooKeeper revalidates a session with the leader, catch up with it before refusing.
        let mut valid = known(ctx);
        if valid.is_none() {
            let _ = tokio::time::timeout(HANDSHAKE_TIMEOUT, ctx.peer.sync()).await;
            valid = known(ctx);
        }
        // Checked again with the sink registered under the same lock, so that a close applied
        // meanwhile is not missed.
        let valid = valid == Some(true) && {
            let mut st = ctx.lock();
            let open = st
                .db
                .sessions
                .get(&req.session_id)
                .is_some_and(|s| s.passwd == req.passwd);
            if open {
                st.register_sink(req.session_id, sink_tx);
            }
            open
        };
        if !valid {
            // ZooKeeper answers an unknown session or a wrong password with a zero timeout and
            // session id, then closes: the client reports the session expired.
            let resp = ConnectResponse {
                protocol_version: 0,
                timeout: 0,
                session_id: 0,
                passwd: vec![0; PASSWORD_LEN],
                read_only: false,
                omits_read_only: req.omits_read_only,
            };
            wr.write_all(&resp.encode_frame()).await?;
            let _ = wr.shutdown().await;
            return Err(Closed::Refused(format!(
                "session {:#x} is not open (expired or wrong password)",
                req.session_id
            )));
        }
        (req.session_id, req.passwd.clone())
    };
    let _ = ctx
        .peer
        .touch_session(session, Duration::from_millis(timeout.max(1) as u64));
    let resp = ConnectResponse {
        protocol_version: 0,
        timeout,
        session_id: session,
        passwd,
        read_only: false,
        omits_read_only: req.omits_read_only,
    };
    let result = async {
        wr.write_all(&resp.encode_frame()).await?;
        ctx.counters.sent.fetch_add(1, Ordering::Relaxed);
        {
            let mut c = info.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            c.session = session;
            c.timeout = timeout;
        }
        debug!(sid = ctx.sid, client = %remote, session = format!("{session:#x}"), timeout, "session established");
        let (sync_tx, sync_rx) = mpsc::unbounded_channel();
        let mut conn = Conn {
            ctx: ctx.clone(),
            info,
            last_touch: Instant::now(),
            session,
            timeout,
            auth: vec![Id::new("ip", remote.ip().to_string())],
            pending: VecDeque::new(),
            sink: sink_rx,
            sync_tx,
            out: Vec::new(),
            received: 0,
            sent: 0,
            closed: false,
        };
        let frames = FramedRead::with_capacity(rd, FrameCodec {
                max: ctx.max_packet(),
            }, 1024);
        conn.run(frames, wr, sync_rx).await
    }
    .await;
    ctx.lock().detach(session, &sink_keep);
    result
}

/// Opens a new session: proposes its `createSession` and waits until this server applied it.
async fn open_session(
    ctx: &Arc<ServerCtx>,
    timeout: i32,
    sink_tx: mpsc::UnboundedSender<Notice>,
) -> Result<(i64, Vec<u8>), Closed> {
    let session = ctx
        .ids
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .next_id();
    let passwd = new_password();
    let (tx, mut rx) = mpsc::unbounded_channel();
    ctx.lock().register_sink(session, tx);
    let txn = ZkTxn {
        origin: ctx.incarnation,
        session,
        cxid: 0,
        time: now_ms(),
        auth: Vec::new(),
        body: TxnBody::CreateSession {
            timeout,
            passwd: passwd.clone(),
        },
    };
    if !ctx.propose(&txn) {
        ctx.lock().unregister_sink(session);
        return Err(Closed::NotServing);
    }
    let wait = Duration::from_millis(timeout.max(1) as u64).max(ctx.config.tick_time() * 2);
    let created = tokio::time::timeout(wait, async {
        while let Some(n) = rx.recv().await {
            if let Notice::Reply {
                result: TxnResult::SessionCreated,
                ..
            } = n
            {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    if !created {
        ctx.lock().unregister_sink(session);
        return Err(Closed::Refused(
            "the session's creation was not committed in time".into(),
        ));
    }
    ctx.lock().register_sink(session, sink_tx);
    Ok((session, passwd))
}

impl Conn {
    async fn run(
        &mut self,
        mut frames: FramedRead<OwnedReadHalf, FrameCodec>,
        mut wr: OwnedWriteHalf,
        mut sync_rx: mpsc::UnboundedReceiver<(i32, Option<i64>)>,
    ) -> Result<(), Closed> {
        let mut status = self.ctx.status.clone();
        let result = loop {
            tokio::select! {
                biased;
                n = self.sink.recv() => match n {
                    Some(n) => {
                        if let Err(e) = self.on_notice(n) { break Err(e); }
                    }
                    None => break Err(Closed::SessionEnded),
                },
                s = sync_rx.recv() => {
                    if let Some((xid, zxid)) = s {
                        self.on_sync_done(xid, zxid);
                    }
                }
                changed = status.changed() => {
                    if changed.is_err() || status.borrow().epoch.is_none() {
                        break Err(Closed::NotServing);
                    }
                }
                // Cancel-safe: a frame read in part stays in the codec's buffer.
                f = frames.next(), if self.pending.len() < MAX_OUTSTANDING => match f {
                    Some(Ok(body)) => {
                        if let Err(e) = self.on_frame(&body) { break Err(e); }
                    }
                    Some(Err(e)) => break Err(e),
                    None => break Err(Closed::ByClient),
                },
            }
            self.flush_front();
            if !self.out.is_empty() {
                let out = std::mem::take(&mut self.out);
                if let Err(e) = wr.write_all(&out).await {
                    break Err(e.into());
                }
            }
            if self.closed {
                break Err(Closed::SessionEnded);
            }
        };
        // Send what is already answered (e.g. the reply to closeSession) before closing.
        self.flush_front();
        if !self.out.is_empty() {
            let _ = wr.write_all(&self.out).await;
        }
        let _ = wr.shutdown().await;
        result
    }

    /// Queues an encoded frame; the first one of a batch becomes the output buffer itself.
    fn emit(&mut self, frame: Vec<u8>) {
        if self.out.is_empty() {
            self.out = frame;
        } else {
            self.out.extend_from_slice(&frame);
        }
        self.sent += 1;
        self.ctx.counters.sent.fetch_add(1, Ordering::Relaxed);
    }

    /// A sign of life of the session. The peer hears of it at most once per tenth of the
    /// session's timeout (and at every ping, which clients send at a third of it when idle):
    /// a learner reports touches to its leader only every half tick anyway, and a busy
    /// connection then costs the peer nothing per request.
    fn touch(&mut self) {
        let timeout = Duration::from_millis(self.timeout.max(1) as u64);
        if self.last_touch.elapsed() >= timeout / 10 {
            self.last_touch = Instant::now();
            let _ = self.ctx.peer.touch_session(self.session, timeout);
        }
    }

    fn on_frame(&mut self, body: &[u8]) -> Result<(), Closed> {
        let (header, request) = proto::decode_frame_body(body)?;
        self.received += 1;
        self.ctx.counters.received.fetch_add(1, Ordering::Relaxed);
        self.touch();
        let since = Instant::now();
        self.note_request(header.xid, header.op);
        match request {
            Request::Auth { scheme, auth, .. } => {
                // ZooKeeper handles addAuth as it arrives, outside the request pipeline.
                let err = if scheme == "digest" {
                    match std::str::from_utf8(&auth)
                        .ok()
                        .and_then(super::tree::digest_id)
                    {
                        Some(id) => {
                            if !self.auth.contains(&id) {
                                self.auth.push(id);
                            }
                            ErrorCode::Ok
                        }
                        None => ErrorCode::AuthFailed,
                    }
                } else {
                    ErrorCode::AuthFailed
                };
                // Answered with the request's xid (the Java client sends -4) and zxid 0, as
                // ZooKeeperServer.processPacket does.
                let frame = proto::encode_reply(
                    &ReplyHeader {
                        xid: header.xid,
                        zxid: 0,
                        err,
                    },
                    None,
                );
                self.emit(frame);
                if err != ErrorCode::Ok {
                    return Err(Closed::Refused(format!(
                        "authentication with scheme {scheme} failed"
                    )));
                }
                Ok(())
            }
            Request::Sync { path } => {
                self.pending.push_back(Pending::Sync {
                    xid: header.xid,
                    path,
                    done: None,
                    since,
                });
                let ctx = self.ctx.clone();
                let tx = self.sync_tx.clone();
                let xid = header.xid;
                tokio::spawn(async move {
                    let r = ctx.peer.sync().await.ok().map(|z| z.0);
                    let _ = tx.send((xid, r));
                });
                Ok(())
            }
            Request::Unsupported { op } => {
                let frame = self.error_frame(header.xid, ErrorCode::Unimplemented);
                debug!(sid = self.ctx.sid, op, "unsupported operation");
                self.pending.push_back(Pending::Ready { frame, since });
                Ok(())
            }
            request if request.is_write() => {
                match self.to_txn(header.xid, request) {
                    Ok(body) => {
                        let with_stat = match &body {
                            TxnBody::Multi(ops) => ops
                                .iter()
                                .map(|o| {
                                    matches!(o, TxnOp::Create { mode, .. }
                                        if *mode == CreateMode::Container || mode.is_ttl())
                                })
                                .collect(),
                            _ => Vec::new(),
                        };
                        let txn = ZkTxn {
                            origin: self.ctx.incarnation,
                            session: self.session,
                            cxid: header.xid,
                            time: now_ms(),
                            auth: self.auth.clone(),
                            body,
                        };
                        if !self.ctx.propose(&txn) {
                            // Not serving, overloaded, or over jute.maxbuffer: ZooKeeper's
                            // client then sees the connection lost and retries elsewhere.
                            return Err(Closed::NotServing);
                        }
                        self.pending.push_back(Pending::Write {
                            xid: header.xid,
                            op: header.op,
                            with_stat,
                            since,
                        });
                    }
                    Err(frame) => self.pending.push_back(Pending::Ready { frame, since }),
                }
                Ok(())
            }
            request => {
                self.pending.push_back(Pending::Read {
                    xid: header.xid,
                    request,
                    since,
                });
                Ok(())
            }
        }
    }

    fn note_request(&self, cxid: i32, op: i32) {
        let mut c = self
            .info
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        c.received = self.received;
        c.last_cxid = cxid;
        c.last_op = short_op_name(op);
        c.queued = self.pending.len() as u64;
    }

    fn error_frame(&self, xid: i32, err: ErrorCode) -> Vec<u8> {
        let zxid = self.ctx.lock().last_applied().0;
        proto::encode_reply(&ReplyHeader { xid, zxid, err }, None)
    }

    /// The transaction of a write, or the error answer of a write refused before it is
    /// proposed (an unknown create flag, a create mode its op code does not allow).
    fn to_txn(&self, xid: i32, request: Request) -> Result<TxnBody, Vec<u8>> {
        match request {
            Request::CloseSession => Ok(TxnBody::CloseSession),
            Request::Multi(ops) => {
                let mut txn_ops = Vec::with_capacity(ops.len());
                let n = ops.len();
                for (i, r) in ops.into_iter().enumerate() {
                    match write_op(r) {
                        Ok(o) => txn_ops.push(o),
                        Err(code) => {
                            // As ZooKeeper's multi: the ops before the failed one report Ok,
                            // the failed one its error, the ones after RuntimeInconsistency.
                            let results = (0..n)
                                .map(|j| {
                                    MultiResult::Error(if j < i {
                                        ErrorCode::Ok
                                    } else if j == i {
                                        code
                                    } else {
                                        ErrorCode::RuntimeInconsistency
                                    })
                                })
                                .collect();
                            let zxid = self.ctx.lock().last_applied().0;
                            return Err(proto::encode_reply(
                                &ReplyHeader {
                                    xid,
                                    zxid,
                                    err: ErrorCode::Ok,
                                },
                                Some(&Response::Multi(results)),
                            ));
                        }
                    }
                }
                Ok(TxnBody::Multi(txn_ops))
            }
            r => write_op(r)
                .map(TxnBody::Op)
                .map_err(|code| self.error_frame(xid, code)),
        }
    }

    /// The state machine's notice: a watch event goes out at once; a write's reply answers the
    /// first pending write.
    fn on_notice(&mut self, n: Notice) -> Result<(), Closed> {
        match n {
            Notice::Watch {
                zxid,
                event_type,
                path,
            } => {
                let _ = zxid; // ZooKeeper 3.8 sends every notification with zxid -1.
                let frame = proto::encode_notification(&WatcherEvent {
                    event_type,
                    state: STATE_SYNC_CONNECTED,
                    path,
                });
                self.emit(frame);
                Ok(())
            }
            Notice::Reply { cxid, zxid, result } => {
                let pos = self
                    .pending
                    .iter()
                    .position(|p| matches!(p, Pending::Write { xid, .. } if *xid == cxid));
                let Some(pos) = pos else {
                    debug!(sid = self.ctx.sid, cxid, "a reply for no pending write");
                    return Ok(());
                };
                let Some(Pending::Write {
                    xid,
                    op,
                    with_stat,
                    since,
                }) = self.pending.get(pos)
                else {
                    return Ok(());
                };
                let (xid, op, since) = (*xid, *op, *since);
                let frame = write_reply(xid, op, zxid, result, with_stat);
                self.pending[pos] = Pending::Answered { frame, since };
                Ok(())
            }
            Notice::SessionClosed => {
                // The close's own reply (if this connection asked for it) is already queued:
                // apply sends it while the state is locked, before the sink is dropped.
                while let Ok(n) = self.sink.try_recv() {
                    if !matches!(n, Notice::SessionClosed) {
                        self.on_notice(n)?;
                    }
                }
                self.flush_front();
                Err(Closed::SessionEnded)
            }
        }
    }

    fn on_sync_done(&mut self, xid_done: i32, zxid: Option<i64>) {
        for p in self.pending.iter_mut() {
            if let Pending::Sync { xid, done, .. } = p {
                if *xid == xid_done && done.is_none() {
                    *done = Some(zxid.unwrap_or(-1));
                    return;
                }
            }
        }
    }

    /// Sends the answers at the front of the queue, serving reads as they come to the front.
    fn flush_front(&mut self) {
        loop {
            let ready = match self.pending.front() {
                None => return,
                Some(Pending::Write { .. }) => return,
                Some(Pending::Sync { done: None, .. }) => return,
                Some(_) => true,
            };
            if !ready {
                return;
            }
            let Some(p) = self.pending.pop_front() else {
                return;
            };
            match p {
                Pending::Ready { frame, since } | Pending::Answered { frame, since } => {
                    self.emit(frame);
                    self.answered(since);
                }
                Pending::Sync {
                    xid,
                    path,
                    since,
                    done,
                } => {
                    let frame = match done {
                        Some(z) if z >= 0 => proto::encode_reply(
                            &ReplyHeader {
                                xid,
                                zxid: z,
                                err: ErrorCode::Ok,
                            },
                            Some(&Response::Sync { path }),
                        ),
                        _ => self.error_frame(xid, ErrorCode::ConnectionLoss),
                    };
                    self.emit(frame);
                    self.answered(since);
                }
                Pending::Read {
                    xid,
                    request,
                    since,
                } => {
                    // Under the lock: first the events already triggered (they precede the
                    // data this read returns), then the read itself.
                    let ctx = self.ctx.clone();
                    let mut st = ctx.lock();
                    while let Ok(n) = self.sink.try_recv() {
                        match n {
                            Notice::SessionClosed => {
                                // Answer nothing more: the connection ends.
                                self.pending.clear();
                                self.closed = true;
                                return;
                            }
                            n => {
                                let _ = self.on_notice(n);
                            }
                        }
                    }
                    let frame = self.serve_read(&mut st, xid, request);
                    drop(st);
                    self.emit(frame);
                    self.answered(since);
                }
                // Not reached (the loop returns at a pending write before popping it); put
                // back rather than lost if it ever is.
                p @ Pending::Write { .. } => {
                    self.pending.push_front(p);
                    return;
                }
            }
        }
    }

    fn answered(&mut self, since: Instant) {
        let us = since.elapsed().as_micros().min(u64::MAX as u128) as u64;
        self.ctx.counters.record_latency(us);
        let mut c = self
            .info
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        c.sent = self.sent;
        c.last_latency_ms = us / 1000;
        c.queued = self.pending.len() as u64;
    }

    /// Answers a read from the replica (the state is locked by the caller).
    fn serve_read(&mut self, st: &mut ZkState, xid: i32, request: Request) -> Vec<u8> {
        let zxid = st.last_applied().0;
        let session = self.session;
        let reply = |err: ErrorCode, body: Option<Response>| {
            proto::encode_reply(&ReplyHeader { xid, zxid, err }, body.as_ref())
        };
        let result: Result<Option<Response>, ErrorCode> = match request {
            Request::Ping => {
                return proto::encode_reply(
                    &ReplyHeader {
                        xid: xid::PING,
                        zxid,
                        err: ErrorCode::Ok,
                    },
                    None,
                )
            }
            Request::Exists { path, watch } => match st.db.tree.stat(&path) {
                Some(stat) => {
                    if watch {
                        st.watches.add(&path, WatchKind::Data, session);
                    }
                    Ok(Some(Response::Stat(stat)))
                }
                None => {
                    if watch {
                        st.watches.add(&path, WatchKind::Exist, session);
                    }
                    Err(ErrorCode::NoNode)
                }
            },
            Request::GetData { path, watch } => {
                read_get_data(st, &self.auth, session, &path, watch).map(Some)
            }
            Request::GetChildren { path, watch } => {
                read_children(st, &self.auth, session, &path, watch, false).map(Some)
            }
            Request::GetChildren2 { path, watch } => {
                read_children(st, &self.auth, session, &path, watch, true).map(Some)
            }
            Request::GetAcl { path } => match st.db.tree.get_acl(&path) {
                None => Err(ErrorCode::NoNode),
                Some((acl, stat)) => st
                    .db
                    .tree
                    .check_acl(&path, perms::READ | perms::ADMIN, &self.auth)
                    .map(|()| Some(Response::GetAcl { acl, stat })),
            },
            Request::GetAllChildrenNumber { path } => match st.db.tree.all_children_number(&path) {
                None => Err(ErrorCode::NoNode),
                Some(n) => st
                    .db
                    .tree
                    .check_acl(&path, perms::READ, &self.auth)
                    .map(|()| Some(Response::AllChildrenNumber(n))),
            },
            Request::GetEphemerals { prefix } => {
                let all = st.db.tree.ephemerals(session);
                let p = prefix.trim();
                let list = if p.is_empty() || p == "/" {
                    all
                } else {
                    all.into_iter().filter(|e| e.starts_with(p)).collect()
                };
                Ok(Some(Response::Ephemerals(list)))
            }
            Request::WhoAmI => Ok(Some(Response::WhoAmI(
                self.auth
                    .iter()
                    .map(|id| proto::ClientInfo {
                        auth_scheme: id.scheme.clone(),
                        // The provider's user name: a digest id's user part (ZooKeeper's
                        // DigestAuthenticationProvider.getUserName).
                        user: match id.scheme.as_str() {
                            "digest" => id.id.split(':').next().unwrap_or_default().to_string(),
                            _ => id.id.clone(),
                        },
                    })
                    .collect(),
            ))),
            Request::MultiRead(ops) => {
                let mut results = Vec::with_capacity(ops.len());
                for r in ops {
                    let one = match r {
                        Request::GetData { path, watch } => {
                            read_get_data(st, &self.auth, session, &path, watch)
                        }
                        Request::GetChildren { path, watch } => {
                            read_children(st, &self.auth, session, &path, watch, false)
                        }
                        _ => Err(ErrorCode::BadArguments),
                    };
                    results.push(match one {
                        Ok(Response::GetData { data, stat }) => {
                            MultiReadResult::GetData { data, stat }
                        }
                        Ok(Response::GetChildren { children }) => {
                            MultiReadResult::GetChildren { children }
                        }
                        Ok(_) => MultiReadResult::Error(ErrorCode::SystemError),
                        Err(e) => MultiReadResult::Error(e),
                    });
                }
                Ok(Some(Response::MultiRead(results)))
            }
            Request::SetWatches {
                relative_zxid,
                data,
                exist,
                child,
            } => {
                self.set_watches(
                    st,
                    relative_zxid,
                    data,
                    exist,
                    child,
                    Vec::new(),
                    Vec::new(),
                );
                Ok(None)
            }
            Request::SetWatches2 {
                relative_zxid,
                data,
                exist,
                child,
                persistent,
                persistent_recursive,
            } => {
                self.set_watches(
                    st,
                    relative_zxid,
                    data,
                    exist,
                    child,
                    persistent,
                    persistent_recursive,
                );
                Ok(None)
            }
            Request::AddWatch { path, mode } => {
                let kind = match mode {
                    AddWatchMode::Persistent => WatchKind::Persistent,
                    AddWatchMode::PersistentRecursive => WatchKind::PersistentRecursive,
                };
                st.watches.add(&path, kind, session);
                Ok(Some(Response::AddWatch))
            }
            Request::CheckWatches { path, watcher_type } => {
                if st.watches.contains(&path, watcher_type, session) {
                    Ok(Some(Response::Empty))
                } else {
                    Err(ErrorCode::NoWatcher)
                }
            }
            Request::RemoveWatches { path, watcher_type } => {
                if st.watches.remove(&path, watcher_type, session) {
                    Ok(Some(Response::Empty))
                } else {
                    Err(ErrorCode::NoWatcher)
                }
            }
            _ => Err(ErrorCode::Unimplemented),
        };
        match result {
            Ok(body) => reply(ErrorCode::Ok, body),
            Err(e) => reply(e, None),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn set_watches(
        &mut self,
        st: &mut ZkState,
        relative_zxid: i64,
        data: Vec<String>,
        exist: Vec<String>,
        child: Vec<String>,
        persistent: Vec<String>,
        persistent_recursive: Vec<String>,
    ) {
        let ZkState { db, watches, .. } = st;
        let events = watches.set_watches(
            &db.tree,
            relative_zxid,
            &data,
            &exist,
            &child,
            &persistent,
            &persistent_recursive,
            self.session,
        );
        for (event_type, path) in events {
            let frame = proto::encode_notification(&WatcherEvent {
                event_type,
                state: STATE_SYNC_CONNECTED,
                path,
            });
            self.emit(frame);
        }
    }
}

fn read_get_data(
    st: &mut ZkState,
    auth: &[Id],
    session: i64,
    path: &str,
    watch: bool,
) -> Result<Response, ErrorCode> {
    let (data, stat) = match st.db.tree.get_data(path) {
        None => return Err(ErrorCode::NoNode),
        Some((d, s)) => (d.to_vec(), s),
    };
    st.db.tree.check_acl(path, perms::READ, auth)?;
    if watch {
        st.watches.add(path, WatchKind::Data, session);
    }
    Ok(Response::GetData {
        data: Some(data),
        stat,
    })
}

fn read_children(
    st: &mut ZkState,
    auth: &[Id],
    session: i64,
    path: &str,
    watch: bool,
    with_stat: bool,
) -> Result<Response, ErrorCode> {
    let Some(children) = st.db.tree.children(path) else {
        return Err(ErrorCode::NoNode);
    };
    st.db.tree.check_acl(path, perms::READ, auth)?;
    if watch {
        st.watches.add(path, WatchKind::Child, session);
    }
    if with_stat {
        let stat = st.db.tree.stat(path).unwrap_or_default();
        Ok(Response::GetChildren2 { children, stat })
    } else {
        Ok(Response::GetChildren { children })
    }
}

/// The transaction operation of one write request, or the error ZooKeeper answers it with
/// before it reaches the leader's pipeline.
fn write_op(request: Request) -> Result<TxnOp, ErrorCode> {
    let create = |c: CreateRequest, must: fn(CreateMode) -> bool| -> Result<TxnOp, ErrorCode> {
        let mode = CreateMode::from_flags(c.flags).ok_or(ErrorCode::BadArguments)?;
        if !must(mode) {
            return Err(ErrorCode::BadArguments);
        }
        // The tree refuses a TTL with a mode that has none, as ZooKeeper does: only createTTL
        // carries one.
        let ttl = if mode.is_ttl() { c.ttl } else { -1 };
        Ok(TxnOp::Create {
            path: c.path,
            data: c.data.unwrap_or_default(),
            acl: c.acl,
            mode,
            ttl,
        })
    };
    match request {
        Request::Create(c) | Request::Create2(c) => create(c, |m| !m.is_ttl()),
        Request::CreateContainer(c) => create(c, |m| m == CreateMode::Container),
        Request::CreateTtl(c) => create(c, |m| m.is_ttl()),
        Request::Delete { path, version } => Ok(TxnOp::Delete { path, version }),
        Request::SetData {
            path,
            data,
            version,
        } => Ok(TxnOp::SetData {
            path,
            data: data.unwrap_or_default(),
            version,
        }),
        Request::SetAcl { path, acl, version } => Ok(TxnOp::SetAcl { path, acl, version }),
        Request::Check { path, version } => Ok(TxnOp::Check { path, version }),
        _ => Err(ErrorCode::BadArguments),
    }
}

/// The answer to a write, from the state machine's result.
fn write_reply(
    xid: i32,
    op_code: i32,
    zxid: i64,
    result: TxnResult,
    with_stat: &[bool],
) -> Vec<u8> {
    let ok = |body: Option<Response>| {
        proto::encode_reply(
            &ReplyHeader {
                xid,
                zxid,
                err: ErrorCode::Ok,
            },
            body.as_ref(),
        )
    };
    let err = |e: ErrorCode| proto::encode_reply(&ReplyHeader { xid, zxid, err: e }, None);
    match result {
        TxnResult::SessionCreated | TxnResult::SessionClosed => ok(None),
        TxnResult::Op(Err(e)) => err(e),
        TxnResult::Op(Ok(outcome)) => ok(single_reply(op_code, outcome)),
        TxnResult::Multi(Ok(outcomes)) => ok(Some(Response::Multi(
            outcomes
                .into_iter()
                .enumerate()
                .map(|(i, o)| multi_result(o, with_stat.get(i).copied().unwrap_or(false)))
                .collect(),
        ))),
        TxnResult::Multi(Err(codes)) => ok(Some(Response::Multi(
            codes.into_iter().map(MultiResult::Error).collect(),
        ))),
    }
}

fn single_reply(op_code: i32, outcome: OpOutcome) -> Option<Response> {
    match outcome {
        OpOutcome::Created { path, stat } => Some(match op_code {
            op::CREATE2 | op::CREATE_TTL | op::CREATE_CONTAINER => Response::Create2 { path, stat },
            _ => Response::Create { path },
        }),
        OpOutcome::Deleted | OpOutcome::Checked => None,
        OpOutcome::SetData { stat } | OpOutcome::SetAcl { stat } => Some(Response::Stat(stat)),
    }
}

fn multi_result(outcome: OpOutcome, with_stat: bool) -> MultiResult {
    match outcome {
        OpOutcome::Created { path, stat } if with_stat => MultiResult::Create2 { path, stat },
        OpOutcome::Created { path, .. } => MultiResult::Create { path },
        OpOutcome::Deleted => MultiResult::Delete,
        OpOutcome::SetData { stat } => MultiResult::SetData { stat },
        OpOutcome::SetAcl { .. } | OpOutcome::Checked => MultiResult::Check,
    }
}

/// ZooKeeper's four-letter short names of operations (`cons`' `lop`).
fn short_op_name(op_code: i32) -> &'static str {
    match op_code {
        op::CREATE | op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL => "CREA",
        op::DELETE => "DELE",
        op::EXISTS => "EXIS",
        op::GET_DATA => "GETD",
        op::SET_DATA => "SETD",
        op::GET_ACL => "GETA",
        op::SET_ACL => "SETA",
        op::GET_CHILDREN => "GETC",
        op::GET_CHILDREN2 => "GETC",
        op::SYNC => "SYNC",
        op::PING => "PING",
        op::CHECK => "CHEC",
        op::MULTI => "MULT",
        op::MULTI_READ => "MLTR",
        op::CLOSE_SESSION => "CLOS",
        op::SET_WATCHES | op::SET_WATCHES2 => "SETW",
        op::ADD_WATCH => "ADDW",
        op::REMOVE_WATCHES => "REMW",
        op::CHECK_WATCHES => "CHKW",
        op::GET_EPHEMERALS => "GETE",
        op::GET_ALL_CHILDREN_NUMBER => "GETACN",
        op::WHO_AM_I => "HOMI",
        op::AUTH => "AUTH",
        _ => "NA",
    }
}
