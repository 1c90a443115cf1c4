//! Every record of ZooKeeper 3.8's client port (`zookeeper.jute`'s `org.apache.zookeeper.proto`
//! module and the hand-written `MultiOperationRecord` / `MultiResponse`), with the framing the
//! server and the Java client use.
//!
//! A connection starts with a [`ConnectRequest`] frame (no header) answered by a
//! [`ConnectResponse`] frame. After it, each client frame is a [`RequestHeader`] and the
//! request record ([`decode_frame_body`] gives a [`Request`]), each server frame a
//! [`ReplyHeader`] and, for some replies, a response record ([`encode_reply`]; which replies
//! carry one is documented on [`Response`]). Watch notifications are replies with xid -1
//! ([`encode_notification`]).
//!
//! ZooKeeper decodes request bodies lazily, in the request processors: a frame whose
//! [`RequestHeader`] decodes but whose body does not is answered `MarshallingError` (a
//! [`ReplyHeader`] with that error and no body), except an `auth` packet, which the server
//! decodes at once and whose failure closes the connection ([`split_frame_body`] gives the
//! header alone, so a server can do the same). A frame too short for its header closes the
//! connection. An op code ZooKeeper does not know ([`JuteError::UnknownOp`]) is answered
//! `ReplyHeader(xid, -1, Unimplemented)` and the connection is closed
//! (`UnimplementedRequestProcessor`).
//!
//! Decoding ignores bytes after a record, as ZooKeeper does (it reads a record from the
//! frame's buffer and never checks that the buffer was used up); [`Request::read`] with
//! [`Reader::finish`] is the strict form.

use super::jute::{JuteError, Reader, Writer};
use super::types::{
    op, xid, Acl, AddWatchMode, CreateMode, ErrorCode, EventType, Stat, WatcherType,
};

/// The `ttl` of a [`CreateRequest`] that is not a `createTTL` (the value ZooKeeper's
/// `PrepRequestProcessor` uses for it).
pub const NO_TTL: i64 = -1;

/// The zxid of every watch notification's [`ReplyHeader`]: ZooKeeper's `ServerCnxn.process`
/// always sends -1 (the client does not track zxids from notifications).
pub const NOTIFICATION_ZXID: i64 = -1;

/// The first frame of a connection (`ConnectRequest`, then the `readOnly` flag).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectRequest {
    /// Always 0.
    pub protocol_version: i32,
    /// The last zxid the client saw (a server behind it refuses the connection).
    pub last_zxid_seen: i64,
    /// The session timeout the client asks for, ms.
    pub timeout: i32,
    /// 0 for a new session, else the session to resume.
    pub session_id: i64,
    /// The session's password (16 bytes when resuming; a null buffer reads as empty, which
    /// ZooKeeper treats alike: neither matches a session's password).
    pub passwd: Vec<u8>,
    /// Whether the client accepts a read-only server.
    pub read_only: bool,
    /// Whether the frame ended before the `readOnly` flag (a client older than 3.4).
    /// ZooKeeper accepts it, marks the connection `isOldClient` (`read_only` is then false) and
    /// answers with a [`ConnectResponse`] without the flag either.
    pub omits_read_only: bool,
}

impl ConnectRequest {
    /// Decodes the body of a connection's first frame; the `readOnly` flag may be missing
    /// (as `ZooKeeperServer.processConnectRequest` allows); bytes after it are ignored.
    pub fn decode(body: &[u8]) -> Result<ConnectRequest, JuteError> {
        let mut r = Reader::new(body);
        let protocol_version = r.read_i32()?;
        let last_zxid_seen = r.read_i64()?;
        let timeout = r.read_i32()?;
        let session_id = r.read_i64()?;
        let passwd = r.read_buffer_or_empty()?;
        let omits_read_only = r.is_empty();
        let read_only = if omits_read_only {
            false
        } else {
            r.read_bool()?
        };
        Ok(ConnectRequest {
            protocol_version,
            last_zxid_seen,
            timeout,
            session_id,
            passwd,
            read_only,
            omits_read_only,
        })
    }

    /// Encodes the record (and the flag unless `omits_read_only`).
    pub fn encode(&self, w: &mut Writer) {
        w.write_i32(self.protocol_version);
        w.write_i64(self.last_zxid_seen);
        w.write_i32(self.timeout);
        w.write_i64(self.session_id);
        w.write_buffer(&self.passwd);
        if !self.omits_read_only {
            w.write_bool(self.read_only);
        }
    }

    /// The whole frame, length prefix included.
    pub fn encode_frame(&self) -> Vec<u8> {
        let mut w = Writer::frame();
        self.encode(&mut w);
        w.finish_frame()
    }
}

/// The server's answer to a [`ConnectRequest`] (`ConnectResponse`, then the `readOnly` flag).
///
/// ZooKeeper (`ZooKeeperServer.finishSessionInit`) answers protocol version 0, the negotiated
/// timeout, the session id and its 16-byte password; for a session it cannot resume (expired,
/// wrong password) timeout 0, session id 0 and 16 zero bytes, then closes the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectResponse {
    /// Always 0.
    pub protocol_version: i32,
    /// The negotiated session timeout, ms (0: the session is not valid).
    pub timeout: i32,
    /// The session id (0: the session is not valid).
    pub session_id: i64,
    /// The session's password.
    pub passwd: Vec<u8>,
    /// Whether the server is read-only.
    pub read_only: bool,
    /// Leave the `readOnly` flag out (answering a client whose request omitted it; when
    /// decoding: the server did not send it).
    pub omits_read_only: bool,
}

impl ConnectResponse {
    /// Decodes the body of the server's first frame; the flag may be missing (as the Java
    /// client's `ClientCnxnSocket.readConnectResult` allows).
    pub fn decode(body: &[u8]) -> Result<ConnectResponse, JuteError> {
        let mut r = Reader::new(body);
        let protocol_version = r.read_i32()?;
        let timeout = r.read_i32()?;
        let session_id = r.read_i64()?;
        let passwd = r.read_buffer_or_empty()?;
        let omits_read_only = r.is_empty();
        let read_only = if omits_read_only {
            false
        } else {
            r.read_bool()?
        };
        Ok(ConnectResponse {
            protocol_version,
            timeout,
            session_id,
            passwd,
            read_only,
            omits_read_only,
        })
    }

    /// Encodes the record (and the flag unless `omits_read_only`).
    pub fn encode(&self, w: &mut Writer) {
        w.write_i32(self.protocol_version);
        w.write_i32(self.timeout);
        w.write_i64(self.session_id);
        w.write_buffer(&self.passwd);
        if !self.omits_read_only {
            w.write_bool(self.read_only);
        }
    }

    /// The whole frame, length prefix included.
    pub fn encode_frame(&self) -> Vec<u8> {
        let mut w = Writer::frame();
        self.encode(&mut w);
        w.finish_frame()
    }
}

/// The header of every client frame after the handshake (`RequestHeader`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader {
    /// The client's request id, echoed in the reply ([`xid`] for the reserved ones).
    pub xid: i32,
    /// The operation ([`op`]).
    pub op: i32,
}

impl RequestHeader {
    /// Reads the header.
    pub fn read(r: &mut Reader<'_>) -> Result<RequestHeader, JuteError> {
        Ok(RequestHeader {
            xid: r.read_i32()?,
            op: r.read_i32()?,
        })
    }

    /// Writes the header.
    pub fn write(&self, w: &mut Writer) {
        w.write_i32(self.xid);
        w.write_i32(self.op);
    }
}

/// The header of every server frame after the handshake (`ReplyHeader`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyHeader {
    /// The request's xid (-1 for a notification, -2 for a ping's reply).
    pub xid: i32,
    /// The server's last processed zxid (-1 for a notification and for the `Unimplemented`
    /// answer to an unknown op, 0 for an `auth` reply).
    pub zxid: i64,
    /// The outcome.
    pub err: ErrorCode,
}

impl ReplyHeader {
    /// Reads the header.
    pub fn read(r: &mut Reader<'_>) -> Result<ReplyHeader, JuteError> {
        Ok(ReplyHeader {
            xid: r.read_i32()?,
            zxid: r.read_i64()?,
            err: ErrorCode::from_code(r.read_i32()?),
        })
    }

    /// Writes the header.
    pub fn write(&self, w: &mut Writer) {
        w.write_i32(self.xid);
        w.write_i64(self.zxid);
        w.write_i32(self.err.code());
    }
}

/// A watch notification's record (`WatcherEvent`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatcherEvent {
    /// What happened.
    pub event_type: EventType,
    /// The client's state ([`super::types::STATE_SYNC_CONNECTED`] for every event a server
    /// sends).
    pub state: i32,
    /// The node (a null path, which only a client-side session event has, reads as empty).
    pub path: String,
}

impl WatcherEvent {
    /// Reads the record; an unknown event type is [`JuteError::BadEnum`].
    pub fn read(r: &mut Reader<'_>) -> Result<WatcherEvent, JuteError> {
        let code = r.read_i32()?;
        let event_type = EventType::from_code(code).ok_or(JuteError::BadEnum {
            field: "event type",
            value: code,
        })?;
        Ok(WatcherEvent {
            event_type,
            state: r.read_i32()?,
            path: r.read_ustring()?.unwrap_or_default(),
        })
    }

    /// Decodes the record from a notification's body (after its [`ReplyHeader`]).
    pub fn decode(body: &[u8]) -> Result<WatcherEvent, JuteError> {
        WatcherEvent::read(&mut Reader::new(body))
    }

    /// Writes the record.
    pub fn write(&self, w: &mut Writer) {
        w.write_i32(self.event_type.code());
        w.write_i32(self.state);
        w.write_string(&self.path);
    }
}

/// A `create`, `create2`, `createContainer` (`CreateRequest`) or `createTTL`
/// (`CreateTTLRequest`, the same fields and the `ttl`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateRequest {
    /// The node to create (a sequential node's prefix).
    pub path: String,
    /// Its data: `None` for a null buffer, which ZooKeeper stores as such (a `getData` of the
    /// node then answers a null buffer, not an empty one).
    pub data: Option<Vec<u8>>,
    /// Its ACL (a null vector reads as empty; ZooKeeper refuses both with `InvalidACL`).
    pub acl: Vec<Acl>,
    /// The [`CreateMode`] flags, as sent (ZooKeeper's `CreateMode.fromFlag` refuses unknown
    /// ones).
    pub flags: i32,
    /// The TTL in ms of a `createTTL`; on the wire for `createTTL` only, [`NO_TTL`] for the
    /// others (decoding sets it, encoding ignores it).
    pub ttl: i64,
}

impl CreateRequest {
    fn read(r: &mut Reader<'_>, with_ttl: bool) -> Result<CreateRequest, JuteError> {
        Ok(CreateRequest {
            path: r.read_string()?,
            data: r.read_buffer()?,
            acl: r.read_acls()?,
            flags: r.read_i32()?,
            ttl: if with_ttl { r.read_i64()? } else { NO_TTL },
        })
    }

    fn write(&self, w: &mut Writer, with_ttl: bool) {
        w.write_string(&self.path);
        w.write_opt_buffer(self.data.as_deref());
        w.write_acls(&self.acl);
        w.write_i32(self.flags);
        if with_ttl {
            w.write_i64(self.ttl);
        }
    }

    /// The same request without a TTL.
    fn without_ttl(self) -> CreateRequest {
        CreateRequest {
            ttl: NO_TTL,
            ..self
        }
    }
}

/// A client request after the handshake: the record of a [`RequestHeader`]'s op.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `create` (1): answered [`Response::Create`].
    Create(CreateRequest),
    /// `create2` (15): answered [`Response::Create2`].
    Create2(CreateRequest),
    /// `createContainer` (19): answered [`Response::Create2`].
    CreateContainer(CreateRequest),
    /// `createTTL` (21): answered [`Response::Create2`].
    CreateTtl(CreateRequest),
    /// `delete` (2, `DeleteRequest`).
    Delete {
        /// The node.
        path: String,
        /// The expected version, -1 for any.
        version: i32,
    },
    /// `exists` (3, `ExistsRequest`).
    Exists {
        /// The node.
        path: String,
        /// Leave a watch (a data watch if it exists, an exist watch if not).
        watch: bool,
    },
    /// `getData` (4, `GetDataRequest`).
    GetData {
        /// The node.
        path: String,
        /// Leave a data watch.
        watch: bool,
    },
    /// `setData` (5, `SetDataRequest`).
    SetData {
        /// The node.
        path: String,
        /// The new data (`None`: a null buffer, stored as such).
        data: Option<Vec<u8>>,
        /// The expected version, -1 for any.
        version: i32,
    },
    /// `getACL` (6, `GetACLRequest`).
    GetAcl {
        /// The node.
        path: String,
    },
    /// `setACL` (7, `SetACLRequest`).
    SetAcl {
        /// The node.
        path: String,
        /// The new ACL.
        acl: Vec<Acl>,
        /// The expected ACL version (`aversion`), -1 for any.
        version: i32,
    },
    /// `getChildren` (8, `GetChildrenRequest`).
    GetChildren {
        /// The node.
        path: String,
        /// Leave a child watch.
        watch: bool,
    },
    /// `getChildren2` (12, `GetChildren2Request`).
    GetChildren2 {
        /// The node.
        path: String,
        /// Leave a child watch.
        watch: bool,
    },
    /// `sync` (9, `SyncRequest`).
    Sync {
        /// The path (echoed in the reply).
        path: String,
    },
    /// `ping` (11): no record (xid -2).
    Ping,
    /// `check` (13, `CheckVersionRequest`): a version check, normally inside a `multi`.
    Check {
        /// The node.
        path: String,
        /// The expected version, -1 for any.
        version: i32,
    },
    /// `multi` (14): `MultiHeader`-framed operations (type, done, err), ended by a header
    /// with `done` set. Only creates, `delete`, `setData` and `check` may be inside.
    ///
    /// Decoding does what ZooKeeper's `MultiOperationRecord` and `Op.create` do with a
    /// create: its variant follows its flags, not the type it was sent with. A TTL mode
    /// gives [`Request::CreateTtl`] (sent as `createTTL` with its TTL; sent as another create,
    /// without a TTL, it is an error, as ZooKeeper fails it with `MarshallingError`), the
    /// container mode [`Request::CreateContainer`], any other flags [`Request::Create`] (a
    /// `create2` inside a `multi` is a plain create, answered [`MultiResult::Create`]).
    Multi(Vec<Request>),
    /// `multiRead` (22): like [`Request::Multi`] with only [`Request::GetChildren`] and
    /// [`Request::GetData`] inside; their `watch` flags are dropped (decoded as false), as
    /// ZooKeeper's `Op.getChildren` / `Op.getData` drop them.
    MultiRead(Vec<Request>),
    /// `checkWatches` (17, `CheckWatchesRequest`).
    CheckWatches {
        /// The node.
        path: String,
        /// Which watches: [`WatcherType::Children`], [`WatcherType::Data`] or
        /// [`WatcherType::Any`] (ZooKeeper 3.8 knows no other; the persistent types do not
        /// decode).
        watcher_type: WatcherType,
    },
    /// `removeWatches` (18, `RemoveWatchesRequest`).
    RemoveWatches {
        /// The node.
        path: String,
        /// Which watches (as for [`Request::CheckWatches`]).
        watcher_type: WatcherType,
    },
    /// `addWatch` (106, `AddWatchRequest`).
    AddWatch {
        /// The node.
        path: String,
        /// Persistent or persistent recursive.
        mode: AddWatchMode,
    },
    /// `setWatches` (101, `SetWatches`, xid -8): re-registers watches after a reconnection.
    SetWatches {
        /// The last zxid the client saw: watches whose node changed after it fire at once.
        relative_zxid: i64,
        /// Data watches.
        data: Vec<String>,
        /// Exist watches.
        exist: Vec<String>,
        /// Child watches.
        child: Vec<String>,
    },
    /// `setWatches2` (105, `SetWatches2`, xid -8): [`Request::SetWatches`] with persistent
    /// watches.
    SetWatches2 {
        /// The last zxid the client saw.
        relative_zxid: i64,
        /// Data watches.
        data: Vec<String>,
        /// Exist watches.
        exist: Vec<String>,
        /// Child watches.
        child: Vec<String>,
        /// Persistent watches.
        persistent: Vec<String>,
        /// Persistent recursive watches.
        persistent_recursive: Vec<String>,
    },
    /// `addAuth` (100, `AuthPacket`, xid -4).
    Auth {
        /// The packet's `type` (0; ZooKeeper ignores it).
        auth_type: i32,
        /// The scheme (`digest`, …; a null scheme reads as empty: no provider, `AuthFailed`).
        scheme: String,
        /// The credentials (null reads as empty).
        auth: Vec<u8>,
    },
    /// `getEphemerals` (103, `GetEphemeralsRequest`).
    GetEphemerals {
        /// Only ephemerals whose path starts with it; empty (or null, which reads as empty) or
        /// `/` for all of the session's ephemerals.
        prefix: String,
    },
    /// `getAllChildrenNumber` (104, `GetAllChildrenNumberRequest`).
    GetAllChildrenNumber {
        /// The node.
        path: String,
    },
    /// `whoAmI` (107): no record.
    WhoAmI,
    /// `closeSession` (-11): no record.
    CloseSession,
    /// An op ZooKeeper knows but this server does not serve, with its body unread:
    /// `reconfig` (16; ZooKeeper answers a well-formed `ReconfigRequest` `ReconfigDisabled`
    /// (-123) unless `reconfigEnabled`, one without its record `MarshallingError`), `sasl`
    /// (102; without a SASL server ZooKeeper answers OK with a null token), `deleteContainer`
    /// (20) and `createSession` (-10) (internal operations that ZooKeeper's `Request.isValid`
    /// lets through). Encoded with an empty body.
    Unsupported {
        /// The op code.
        op: i32,
    },
}

/// A `checkWatches` / `removeWatches` type as ZooKeeper 3.8's `WatcherType.fromInt` reads
/// it: children (1), data (2) or any (3). The persistent types (4, 5) are ZooKeeper 3.9's; a
/// 3.8 server fails them with `MarshallingError`, so they are [`JuteError::BadEnum`] here.
fn read_watcher_type(r: &mut Reader<'_>) -> Result<WatcherType, JuteError> {
    let code = r.read_i32()?;
    match WatcherType::from_code(code) {
        Some(t @ (WatcherType::Children | WatcherType::Data | WatcherType::Any)) => Ok(t),
        _ => Err(JuteError::BadEnum {
            field: "watcher type",
            value: code,
        }),
    }
}

fn read_multi_header(r: &mut Reader<'_>) -> Result<(i32, bool, i32), JuteError> {
    Ok((r.read_i32()?, r.read_bool()?, r.read_i32()?))
}

fn write_multi_header(w: &mut Writer, op: i32, done: bool, err: i32) {
    w.write_i32(op);
    w.write_bool(done);
    w.write_i32(err);
}

/// The end of a `multi` request or response: `MultiHeader(-1, true, -1)`.
fn write_multi_end(w: &mut Writer) {
    write_multi_header(w, -1, true, -1);
}

/// A create inside a `multi`, as `Op.create` types it (see [`Request::Multi`]).
fn multi_create(c: CreateRequest, sent_with_ttl: bool) -> Result<Request, JuteError> {
    match CreateMode::from_flags(c.flags) {
        Some(mode) if mode.is_ttl() => {
            if sent_with_ttl {
                Ok(Request::CreateTtl(c))
            } else {
                Err(JuteError::BadEnum {
                    field: "create flags (a TTL mode inside multi needs createTTL)",
                    value: c.flags,
                })
            }
        }
        Some(CreateMode::Container) => Ok(Request::CreateContainer(c.without_ttl())),
        _ => Ok(Request::Create(c.without_ttl())),
    }
}

fn read_multi(r: &mut Reader<'_>) -> Result<Vec<Request>, JuteError> {
    let mut ops = Vec::new();
    loop {
        let (ty, done, _err) = read_multi_header(r)?;
        if done {
            return Ok(ops);
        }
        let req = match ty {
            op::CREATE | op::CREATE2 | op::CREATE_CONTAINER => {
                multi_create(CreateRequest::read(r, false)?, false)?
            }
            op::CREATE_TTL => multi_create(CreateRequest::read(r, true)?, true)?,
            op::DELETE | op::SET_DATA | op::CHECK => Request::read(ty, r)?,
            other => {
                return Err(JuteError::OpNotAllowed {
                    op: other,
                    context: "multi",
                })
            }
        };
        ops.push(req);
    }
}

fn read_multi_read(r: &mut Reader<'_>) -> Result<Vec<Request>, JuteError> {
    let mut ops = Vec::new();
    loop {
        let (ty, done, _err) = read_multi_header(r)?;
        if done {
            return Ok(ops);
        }
        let path = match ty {
            op::GET_CHILDREN | op::GET_DATA => {
                let path = r.read_string()?;
                r.read_bool()?;
                path
            }
            other => {
                return Err(JuteError::OpNotAllowed {
                    op: other,
                    context: "multiRead",
                })
            }
        };
        ops.push(if ty == op::GET_DATA {
            Request::GetData { path, watch: false }
        } else {
            Request::GetChildren { path, watch: false }
        });
    }
}

impl Request {
    /// Decodes the body of a request of op code `op` (the frame after its
    /// [`RequestHeader`]); bytes after the record are ignored, as ZooKeeper ignores them.
    /// An op code ZooKeeper does not know is [`JuteError::UnknownOp`].
    pub fn decode(op: i32, body: &[u8]) -> Result<Request, JuteError> {
        Request::read(op, &mut Reader::new(body))
    }

    /// Reads the record of a request of op code `op` from `r`.
    pub fn read(op: i32, r: &mut Reader<'_>) -> Result<Request, JuteError> {
        Ok(match op {
            op::CREATE => Request::Create(CreateRequest::read(r, false)?),
            op::CREATE2 => Request::Create2(CreateRequest::read(r, false)?),
            op::CREATE_CONTAINER => Request::CreateContainer(CreateRequest::read(r, false)?),
            op::CREATE_TTL => Request::CreateTtl(CreateRequest::read(r, true)?),
            op::DELETE => Request::Delete {
                path: r.read_string()?,
                version: r.read_i32()?,
            },
            op::EXISTS => Request::Exists {
                path: r.read_string()?,
                watch: r.read_bool()?,
            },
            op::GET_DATA => Request::GetData {
                path: r.read_string()?,
                watch: r.read_bool()?,
            },
            op::SET_DATA => Request::SetData {
                path: r.read_string()?,
                data: r.read_buffer()?,
                version: r.read_i32()?,
            },
            op::GET_ACL => Request::GetAcl {
                path: r.read_string()?,
            },
            op::SET_ACL => Request::SetAcl {
                path: r.read_string()?,
                acl: r.read_acls()?,
                version: r.read_i32()?,
            },
            op::GET_CHILDREN => Request::GetChildren {
                path: r.read_string()?,
                watch: r.read_bool()?,
            },
            op::GET_CHILDREN2 => Request::GetChildren2 {
                path: r.read_string()?,
                watch: r.read_bool()?,
            },
            op::SYNC => Request::Sync {
                path: r.read_string()?,
            },
            op::PING => Request::Ping,
            op::CHECK => Request::Check {
                path: r.read_string()?,
                version: r.read_i32()?,
            },
            op::MULTI => Request::Multi(read_multi(r)?),
            op::MULTI_READ => Request::MultiRead(read_multi_read(r)?),
            op::CHECK_WATCHES => Request::CheckWatches {
                path: r.read_string()?,
                watcher_type: read_watcher_type(r)?,
            },
            op::REMOVE_WATCHES => Request::RemoveWatches {
                path: r.read_string()?,
                watcher_type: read_watcher_type(r)?,
            },
            op::ADD_WATCH => {
                let path = r.read_string()?;
                let code = r.read_i32()?;
                let mode = AddWatchMode::from_code(code).ok_or(JuteError::BadEnum {
                    field: "addWatch mode",
                    value: code,
                })?;
                Request::AddWatch { path, mode }
            }
            op::SET_WATCHES => Request::SetWatches {
                relative_zxid: r.read_i64()?,
                data: r.read_strings()?,
                exist: r.read_strings()?,
                child: r.read_strings()?,
            },
            op::SET_WATCHES2 => Request::SetWatches2 {
                relative_zxid: r.read_i64()?,
                data: r.read_strings()?,
                exist: r.read_strings()?,
                child: r.read_strings()?,
                persistent: r.read_strings()?,
                persistent_recursive: r.read_strings()?,
            },
            op::AUTH => Request::Auth {
                auth_type: r.read_i32()?,
                scheme: r.read_ustring()?.unwrap_or_default(),
                auth: r.read_buffer_or_empty()?,
            },
            op::GET_EPHEMERALS => Request::GetEphemerals {
                prefix: r.read_ustring()?.unwrap_or_default(),
            },
            op::GET_ALL_CHILDREN_NUMBER => Request::GetAllChildrenNumber {
                path: r.read_string()?,
            },
            op::WHO_AM_I => Request::WhoAmI,
            op::CLOSE_SESSION => Request::CloseSession,
            op::RECONFIG | op::SASL | op::DELETE_CONTAINER | op::CREATE_SESSION => {
                Request::Unsupported { op }
            }
            other => return Err(JuteError::UnknownOp(other)),
        })
    }

    /// The op code and the record bytes (no header, no length prefix).
    pub fn encode(&self) -> (i32, Vec<u8>) {
        let mut w = Writer::new();
        self.write(&mut w);
        (self.op(), w.into_vec())
    }

    /// The whole client frame: length prefix, [`RequestHeader`] (`xid`, [`Request::op`]) and
    /// record.
    pub fn encode_frame(&self, xid: i32) -> Vec<u8> {
        let mut w = Writer::frame();
        RequestHeader { xid, op: self.op() }.write(&mut w);
        self.write(&mut w);
        w.finish_frame()
    }

    /// Writes the record (a [`Request::Multi`] holding an op it may not hold is written as
    /// it is, and does not decode).
    pub fn write(&self, w: &mut Writer) {
        match self {
            Request::Create(c) | Request::Create2(c) | Request::CreateContainer(c) => {
                c.write(w, false)
            }
            Request::CreateTtl(c) => c.write(w, true),
            Request::Delete { path, version } | Request::Check { path, version } => {
                w.write_string(path);
                w.write_i32(*version);
            }
            Request::Exists { path, watch }
            | Request::GetData { path, watch }
            | Request::GetChildren { path, watch }
            | Request::GetChildren2 { path, watch } => {
                w.write_string(path);
                w.write_bool(*watch);
            }
            Request::SetData {
                path,
                data,
                version,
            } => {
                w.write_string(path);
                w.write_opt_buffer(data.as_deref());
                w.write_i32(*version);
            }
            Request::GetAcl { path }
            | Request::Sync { path }
            | Request::GetAllChildrenNumber { path } => w.write_string(path),
            Request::SetAcl { path, acl, version } => {
                w.write_string(path);
                w.write_acls(acl);
                w.write_i32(*version);
            }
            Request::Multi(ops) | Request::MultiRead(ops) => {
                for o in ops {
                    write_multi_header(w, o.op(), false, -1);
                    o.write(w);
                }
                write_multi_end(w);
            }
            Request::CheckWatches { path, watcher_type }
            | Request::RemoveWatches { path, watcher_type } => {
                w.write_string(path);
                w.write_i32(watcher_type.code());
            }
            Request::AddWatch { path, mode } => {
                w.write_string(path);
                w.write_i32(mode.code());
            }
            Request::SetWatches {
                relative_zxid,
                data,
                exist,
                child,
            } => {
                w.write_i64(*relative_zxid);
                w.write_strings(data);
                w.write_strings(exist);
                w.write_strings(child);
            }
            Request::SetWatches2 {
                relative_zxid,
                data,
                exist,
                child,
                persistent,
                persistent_recursive,
            } => {
                w.write_i64(*relative_zxid);
                w.write_strings(data);
                w.write_strings(exist);
                w.write_strings(child);
                w.write_strings(persistent);
                w.write_strings(persistent_recursive);
            }
            Request::Auth {
                auth_type,
                scheme,
                auth,
            } => {
                w.write_i32(*auth_type);
                w.write_string(scheme);
                w.write_buffer(auth);
            }
            Request::GetEphemerals { prefix } => w.write_string(prefix),
            Request::Ping
            | Request::WhoAmI
            | Request::CloseSession
            | Request::Unsupported { .. } => {}
        }
    }

    /// The op code ([`op`]).
    pub fn op(&self) -> i32 {
        match self {
            Request::Create(_) => op::CREATE,
            Request::Create2(_) => op::CREATE2,
            Request::CreateContainer(_) => op::CREATE_CONTAINER,
            Request::CreateTtl(_) => op::CREATE_TTL,
            Request::Delete { .. } => op::DELETE,
            Request::Exists { .. } => op::EXISTS,
            Request::GetData { .. } => op::GET_DATA,
            Request::SetData { .. } => op::SET_DATA,
            Request::GetAcl { .. } => op::GET_ACL,
            Request::SetAcl { .. } => op::SET_ACL,
            Request::GetChildren { .. } => op::GET_CHILDREN,
            Request::GetChildren2 { .. } => op::GET_CHILDREN2,
            Request::Sync { .. } => op::SYNC,
            Request::Ping => op::PING,
            Request::Check { .. } => op::CHECK,
            Request::Multi(_) => op::MULTI,
            Request::MultiRead(_) => op::MULTI_READ,
            Request::CheckWatches { .. } => op::CHECK_WATCHES,
            Request::RemoveWatches { .. } => op::REMOVE_WATCHES,
            Request::AddWatch { .. } => op::ADD_WATCH,
            Request::SetWatches { .. } => op::SET_WATCHES,
            Request::SetWatches2 { .. } => op::SET_WATCHES2,
            Request::Auth { .. } => op::AUTH,
            Request::GetEphemerals { .. } => op::GET_EPHEMERALS,
            Request::GetAllChildrenNumber { .. } => op::GET_ALL_CHILDREN_NUMBER,
            Request::WhoAmI => op::WHO_AM_I,
            Request::CloseSession => op::CLOSE_SESSION,
            Request::Unsupported { op } => *op,
        }
    }

    /// Whether ZooKeeper sends the request through the leader as a transaction
    /// (`Request.isQuorum`): the creates, `delete`, `setData`, `setACL`, `check`, `multi`,
    /// `closeSession`, and the unsupported `reconfig`, `deleteContainer` and
    /// `createSession`. (A `closeSession` of a local session does not go through the leader
    /// in ZooKeeper; this server has no local sessions.) `sync` is not a write: the server
    /// asks the leader to catch it up, with no transaction.
    pub fn is_write(&self) -> bool {
        match self {
            Request::Create(_)
            | Request::Create2(_)
            | Request::CreateContainer(_)
            | Request::CreateTtl(_)
            | Request::Delete { .. }
            | Request::SetData { .. }
            | Request::SetAcl { .. }
            | Request::Check { .. }
            | Request::Multi(_)
            | Request::CloseSession => true,
            Request::Unsupported { op } => matches!(
                *op,
                op::RECONFIG | op::DELETE_CONTAINER | op::CREATE_SESSION
            ),
            _ => false,
        }
    }

    /// The node the request is about (`getEphemerals`: its prefix); `None` for those about
    /// no single node (`multi`, `multiRead`, `setWatches`, `auth`, `ping`, …).
    pub fn path(&self) -> Option<&str> {
        match self {
            Request::Create(c)
            | Request::Create2(c)
            | Request::CreateContainer(c)
            | Request::CreateTtl(c) => Some(&c.path),
            Request::Delete { path, .. }
            | Request::Exists { path, .. }
            | Request::GetData { path, .. }
            | Request::SetData { path, .. }
            | Request::GetAcl { path }
            | Request::SetAcl { path, .. }
            | Request::GetChildren { path, .. }
            | Request::GetChildren2 { path, .. }
            | Request::Sync { path }
            | Request::Check { path, .. }
            | Request::CheckWatches { path, .. }
            | Request::RemoveWatches { path, .. }
            | Request::AddWatch { path, .. }
            | Request::GetAllChildrenNumber { path } => Some(path),
            Request::GetEphemerals { prefix } => Some(prefix),
            Request::Multi(_)
            | Request::MultiRead(_)
            | Request::SetWatches { .. }
            | Request::SetWatches2 { .. }
            | Request::Auth { .. }
            | Request::Ping
            | Request::WhoAmI
            | Request::CloseSession
            | Request::Unsupported { .. } => None,
        }
    }
}

/// Splits a post-handshake client frame body (after the length prefix) into its
/// [`RequestHeader`] and the record bytes, so that a server can answer a record that fails
/// to decode with the header's xid (ZooKeeper answers `MarshallingError`).
pub fn split_frame_body(body: &[u8]) -> Result<(RequestHeader, &[u8]), JuteError> {
    let mut r = Reader::new(body);
    let header = RequestHeader::read(&mut r)?;
    Ok((header, r.rest()))
}

/// Decodes a post-handshake client frame body (after the length prefix): its header and
/// its request.
pub fn decode_frame_body(body: &[u8]) -> Result<(RequestHeader, Request), JuteError> {
    let (header, rest) = split_frame_body(body)?;
    Ok((header, Request::decode(header.op, rest)?))
}

/// Splits a server frame body (after the length prefix) into its [`ReplyHeader`] and the
/// record bytes (decode those with [`Response::decode`] when `err` is OK, or
/// [`WatcherEvent::decode`] for xid -1).
pub fn split_reply(body: &[u8]) -> Result<(ReplyHeader, &[u8]), JuteError> {
    let mut r = Reader::new(body);
    let header = ReplyHeader::read(&mut r)?;
    Ok((header, r.rest()))
}

/// One identity of a session (`ClientInfo`), answered by `whoAmI`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientInfo {
    /// The scheme (`ip`, `digest`, `super`, …).
    pub auth_scheme: String,
    /// The user or id in it.
    pub user: String,
}

/// The result of one operation of a `multi` (`OpResult`), in a [`Response::Multi`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiResult {
    /// Of a [`Request::Create`] (type `create`, `CreateResponse`).
    Create {
        /// The created node (with its sequence number).
        path: String,
    },
    /// Of a [`Request::CreateContainer`] or [`Request::CreateTtl`] (type `create2`,
    /// `Create2Response`: ZooKeeper's `FinalRequestProcessor` gives those a stat).
    Create2 {
        /// The created node.
        path: String,
        /// Its stat.
        stat: Stat,
    },
    /// Of a `delete` (no record).
    Delete,
    /// Of a `setData` (`SetDataResponse`).
    SetData {
        /// The node's new stat.
        stat: Stat,
    },
    /// Of a `check` (no record).
    Check,
    /// Of an operation of a failed `multi` (type -1, `ErrorResponse`): `Ok` for those before
    /// the failing one (rolled back), the failure's code for it, `RuntimeInconsistency` for
    /// those after it (not tried).
    Error(ErrorCode),
}

/// The result of one operation of a `multiRead`, in a [`Response::MultiRead`]; each
/// operation succeeds or fails on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiReadResult {
    /// Of a `getData` (`GetDataResponse`).
    GetData {
        /// The data (`None`: a null buffer).
        data: Option<Vec<u8>>,
        /// The node's stat.
        stat: Stat,
    },
    /// Of a `getChildren` (`GetChildrenResponse`).
    GetChildren {
        /// The children's names.
        children: Vec<String>,
    },
    /// Of a failed read (type -1, `ErrorResponse`).
    Error(ErrorCode),
}

/// The record of a reply, after its [`ReplyHeader`].
///
/// # Which replies carry a record (ZooKeeper's `FinalRequestProcessor`)
///
/// - **A failed request carries none**: the [`ReplyHeader`] with `err` set, nothing after
///   it, whatever the op (`exists` of a missing node included: `NoNode`, no stat). The Java
///   client decodes a record only when `err` is 0. (ZooKeeper also sends a record with a
///   non-zero `err` when a create, `setData` or `setACL` transaction that passed its checks
///   fails when applied, which cannot happen on a consistent tree.)
/// - **A `multi` always carries its [`Response::Multi`]**, and its header's `err` is 0 even
///   when an operation failed: then every result is a [`MultiResult::Error`] (`Ok` before the
///   failing operation, its code for it, `RuntimeInconsistency` after it) and the client
///   finds the failure in the results. Only a `multi` failing as a whole (a body that does
///   not decode: `MarshallingError`) is answered with a bare header with `err` set; one
///   whose result is `SessionMoved` gets no reply (ZooKeeper closes the connection).
/// - **A `multiRead` always carries its [`Response::MultiRead`]** with `err` 0, each failed
///   read a [`MultiReadResult::Error`].
/// - **`addWatch` carries [`Response::AddWatch`]** (an `ErrorResponse` with 0): the Java
///   client reads it and drops the connection if it is missing.
/// - The replies of `delete`, `ping` (xid -2, zxid the last processed), `auth` (zxid 0;
///   `AuthFailed` then closes the connection), `setWatches` / `setWatches2`, `checkWatches`,
///   `removeWatches`, `closeSession` (then the connection closes) carry none
///   ([`Response::Empty`]). So does a standalone `check` here: ZooKeeper 3.8 does not answer
///   one at all (its `FinalRequestProcessor` fails serialising a `SetDataResponse` without a
///   stat), and its Java client never sends one.
/// - Every other successful reply carries the record of its op: [`Response::decode`] lists
///   them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// Of `create` (`CreateResponse`).
    Create {
        /// The created node (with its sequence number).
        path: String,
    },
    /// Of `create2`, `createContainer` and `createTTL` (`Create2Response`).
    Create2 {
        /// The created node.
        path: String,
        /// Its stat.
        stat: Stat,
    },
    /// Of `exists`, `setData`, `setACL` (`ExistsResponse`, `SetDataResponse`,
    /// `SetACLResponse`: each a stat).
    Stat(Stat),
    /// Of `getData` (`GetDataResponse`).
    GetData {
        /// The data (`None`: a null buffer).
        data: Option<Vec<u8>>,
        /// The node's stat.
        stat: Stat,
    },
    /// Of `getACL` (`GetACLResponse`).
    GetAcl {
        /// The ACL (digest ids masked for a session without `ADMIN`).
        acl: Vec<Acl>,
        /// The node's stat.
        stat: Stat,
    },
    /// Of `getChildren` (`GetChildrenResponse`).
    GetChildren {
        /// The children's names.
        children: Vec<String>,
    },
    /// Of `getChildren2` (`GetChildren2Response`).
    GetChildren2 {
        /// The children's names.
        children: Vec<String>,
        /// The node's stat.
        stat: Stat,
    },
    /// Of `sync` (`SyncResponse`).
    Sync {
        /// The request's path.
        path: String,
    },
    /// Of `getAllChildrenNumber` (`GetAllChildrenNumberResponse`).
    AllChildrenNumber(i32),
    /// Of `getEphemerals` (`GetEphemeralsResponse`).
    Ephemerals(Vec<String>),
    /// Of `whoAmI` (`WhoAmIResponse`).
    WhoAmI(Vec<ClientInfo>),
    /// Of `multi` (`MultiResponse`).
    Multi(Vec<MultiResult>),
    /// Of `multiRead` (`MultiResponse`).
    MultiRead(Vec<MultiReadResult>),
    /// Of `addWatch`: an `ErrorResponse` with 0 (any value decodes: the client ignores it).
    AddWatch,
    /// No record.
    Empty,
}

fn read_multi_results(r: &mut Reader<'_>) -> Result<Vec<MultiResult>, JuteError> {
    let mut out = Vec::new();
    loop {
        let (ty, done, _err) = read_multi_header(r)?;
        if done {
            return Ok(out);
        }
        out.push(match ty {
            op::CREATE => MultiResult::Create {
                path: r.read_string()?,
            },
            op::CREATE2 => MultiResult::Create2 {
                path: r.read_string()?,
                stat: r.read_stat()?,
            },
            op::DELETE => MultiResult::Delete,
            op::SET_DATA => MultiResult::SetData {
                stat: r.read_stat()?,
            },
            op::CHECK => MultiResult::Check,
            op::ERROR => MultiResult::Error(ErrorCode::from_code(r.read_i32()?)),
            other => {
                return Err(JuteError::OpNotAllowed {
                    op: other,
                    context: "a multi response",
                })
            }
        });
    }
}

fn read_multi_read_results(r: &mut Reader<'_>) -> Result<Vec<MultiReadResult>, JuteError> {
    let mut out = Vec::new();
    loop {
        let (ty, done, _err) = read_multi_header(r)?;
        if done {
            return Ok(out);
        }
        out.push(match ty {
            op::GET_DATA => MultiReadResult::GetData {
                data: r.read_buffer()?,
                stat: r.read_stat()?,
            },
            op::GET_CHILDREN => MultiReadResult::GetChildren {
                children: r.read_strings()?,
            },
            op::ERROR => MultiReadResult::Error(ErrorCode::from_code(r.read_i32()?)),
            other => {
                return Err(JuteError::OpNotAllowed {
                    op: other,
                    context: "a multiRead response",
                })
            }
        });
    }
}

impl Response {
    /// Decodes the record of a successful reply to a request of op code `op`; bytes after it
    /// are ignored (as the Java client ignores them):
    ///
    /// | op | record |
    /// |---|---|
    /// | `create` | [`Response::Create`] |
    /// | `create2`, `createContainer`, `createTTL` | [`Response::Create2`] |
    /// | `exists`, `setData`, `setACL` | [`Response::Stat`] |
    /// | `getData`, `reconfig` | [`Response::GetData`] |
    /// | `getACL` | [`Response::GetAcl`] |
    /// | `getChildren` / `getChildren2` | [`Response::GetChildren`] / [`Response::GetChildren2`] |
    /// | `sync` | [`Response::Sync`] |
    /// | `getAllChildrenNumber` | [`Response::AllChildrenNumber`] |
    /// | `getEphemerals` | [`Response::Ephemerals`] |
    /// | `whoAmI` | [`Response::WhoAmI`] |
    /// | `multi` / `multiRead` | [`Response::Multi`] / [`Response::MultiRead`] |
    /// | `addWatch` | [`Response::AddWatch`] |
    /// | `delete`, `ping`, `check`, `checkWatches`, `removeWatches`, `auth`, `setWatches`, `setWatches2`, `closeSession` | [`Response::Empty`] (nothing read) |
    ///
    /// `sasl`, `deleteContainer` and `createSession` have no reply record here
    /// ([`JuteError::OpNotAllowed`]); an unknown op is [`JuteError::UnknownOp`].
    pub fn decode(op: i32, body: &[u8]) -> Result<Response, JuteError> {
        Response::read(op, &mut Reader::new(body))
    }

    /// Reads the record of a successful reply to `op` from `r` (see [`Response::decode`]).
    pub fn read(op: i32, r: &mut Reader<'_>) -> Result<Response, JuteError> {
        Ok(match op {
            op::CREATE => Response::Create {
                path: r.read_string()?,
            },
            op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL => Response::Create2 {
                path: r.read_string()?,
                stat: r.read_stat()?,
            },
            op::EXISTS | op::SET_DATA | op::SET_ACL => Response::Stat(r.read_stat()?),
            op::GET_DATA | op::RECONFIG => Response::GetData {
                data: r.read_buffer()?,
                stat: r.read_stat()?,
            },
            op::GET_ACL => Response::GetAcl {
                acl: r.read_acls()?,
                stat: r.read_stat()?,
            },
            op::GET_CHILDREN => Response::GetChildren {
                children: r.read_strings()?,
            },
            op::GET_CHILDREN2 => Response::GetChildren2 {
                children: r.read_strings()?,
                stat: r.read_stat()?,
            },
            op::SYNC => Response::Sync {
                path: r.read_string()?,
            },
            op::GET_ALL_CHILDREN_NUMBER => Response::AllChildrenNumber(r.read_i32()?),
            op::GET_EPHEMERALS => Response::Ephemerals(r.read_strings()?),
            op::WHO_AM_I => Response::WhoAmI(r.read_vec(|r| {
                Ok(ClientInfo {
                    auth_scheme: r.read_string()?,
                    user: r.read_string()?,
                })
            })?),
            op::MULTI => Response::Multi(read_multi_results(r)?),
            op::MULTI_READ => Response::MultiRead(read_multi_read_results(r)?),
            op::ADD_WATCH => {
                r.read_i32()?;
                Response::AddWatch
            }
            op::DELETE
            | op::PING
            | op::CHECK
            | op::CHECK_WATCHES
            | op::REMOVE_WATCHES
            | op::AUTH
            | op::SET_WATCHES
            | op::SET_WATCHES2
            | op::CLOSE_SESSION => Response::Empty,
            op::SASL | op::DELETE_CONTAINER | op::CREATE_SESSION => {
                return Err(JuteError::OpNotAllowed {
                    op,
                    context: "a reply this codec decodes",
                })
            }
            other => return Err(JuteError::UnknownOp(other)),
        })
    }

    /// Writes the record ([`Response::Empty`] writes nothing).
    pub fn encode(&self, w: &mut Writer) {
        match self {
            Response::Create { path } | Response::Sync { path } => w.write_string(path),
            Response::Create2 { path, stat } => {
                w.write_string(path);
                w.write_stat(stat);
            }
            Response::Stat(stat) => w.write_stat(stat),
            Response::GetData { data, stat } => {
                w.write_opt_buffer(data.as_deref());
                w.write_stat(stat);
            }
            Response::GetAcl { acl, stat } => {
                w.write_acls(acl);
                w.write_stat(stat);
            }
            Response::GetChildren { children } | Response::Ephemerals(children) => {
                w.write_strings(children)
            }
            Response::GetChildren2 { children, stat } => {
                w.write_strings(children);
                w.write_stat(stat);
            }
            Response::AllChildrenNumber(n) => w.write_i32(*n),
            Response::WhoAmI(infos) => w.write_vec(infos, |w, i| {
                w.write_string(&i.auth_scheme);
                w.write_string(&i.user);
            }),
            Response::Multi(results) => {
                for res in results {
                    match res {
                        MultiResult::Create { path } => {
                            write_multi_header(w, op::CREATE, false, 0);
                            w.write_string(path);
                        }
                        MultiResult::Create2 { path, stat } => {
                            write_multi_header(w, op::CREATE2, false, 0);
                            w.write_string(path);
                            w.write_stat(stat);
                        }
                        MultiResult::Delete => write_multi_header(w, op::DELETE, false, 0),
                        MultiResult::SetData { stat } => {
                            write_multi_header(w, op::SET_DATA, false, 0);
                            w.write_stat(stat);
                        }
                        MultiResult::Check => write_multi_header(w, op::CHECK, false, 0),
                        MultiResult::Error(e) => {
                            write_multi_header(w, op::ERROR, false, e.code());
                            w.write_i32(e.code());
                        }
                    }
                }
                write_multi_end(w);
            }
            Response::MultiRead(results) => {
                for res in results {
                    match res {
                        MultiReadResult::GetData { data, stat } => {
                            write_multi_header(w, op::GET_DATA, false, 0);
                            w.write_opt_buffer(data.as_deref());
                            w.write_stat(stat);
                        }
                        MultiReadResult::GetChildren { children } => {
                            write_multi_header(w, op::GET_CHILDREN, false, 0);
                            w.write_strings(children);
                        }
                        MultiReadResult::Error(e) => {
                            write_multi_header(w, op::ERROR, false, e.code());
                            w.write_i32(e.code());
                        }
                    }
                }
                write_multi_end(w);
            }
            Response::AddWatch => w.write_i32(0),
            Response::Empty => {}
        }
    }
}

/// A whole server frame: the length prefix, `header` and, if given, `body` (see [`Response`]
/// for which replies carry one).
pub fn encode_reply(header: &ReplyHeader, body: Option<&Response>) -> Vec<u8> {
    let mut w = Writer::frame();
    header.write(&mut w);
    if let Some(b) = body {
        b.encode(&mut w);
    }
    w.finish_frame()
}

/// A whole watch notification frame: the length prefix, `ReplyHeader(-1, -1, 0)` (xid
/// [`xid::NOTIFICATION`], zxid [`NOTIFICATION_ZXID`], as ZooKeeper's `ServerCnxn.process`
/// sends it) and `event`.
pub fn encode_notification(event: &WatcherEvent) -> Vec<u8> {
    let mut w = Writer::frame();
    ReplyHeader {
        xid: xid::NOTIFICATION,
        zxid: NOTIFICATION_ZXID,
        err: ErrorCode::Ok,
    }
    .write(&mut w);
    event.write(&mut w);
    w.finish_frame()
}
