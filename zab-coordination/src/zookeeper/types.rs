//! The values ZooKeeper's client protocol and its data tree share: operation codes
//! (`ZooDefs.OpCode`), error codes (`KeeperException.Code`), node metadata ([`Stat`]),
//! access control ([`Id`], [`Acl`], [`perms`]), create modes (`CreateMode`) and watch events
//! (`Watcher.Event`).

/// Operation codes: the `type` of a `RequestHeader` (ZooKeeper's `ZooDefs.OpCode`).
pub mod op {
    /// A watch notification (never sent by a client).
    pub const NOTIFICATION: i32 = 0;
    /// `create`.
    pub const CREATE: i32 = 1;
    /// `delete`.
    pub const DELETE: i32 = 2;
    /// `exists`.
    pub const EXISTS: i32 = 3;
    /// `getData`.
    pub const GET_DATA: i32 = 4;
    /// `setData`.
    pub const SET_DATA: i32 = 5;
    /// `getACL`.
    pub const GET_ACL: i32 = 6;
    /// `setACL`.
    pub const SET_ACL: i32 = 7;
    /// `getChildren`.
    pub const GET_CHILDREN: i32 = 8;
    /// `sync`.
    pub const SYNC: i32 = 9;
    /// `ping`.
    pub const PING: i32 = 11;
    /// `getChildren2` (children and the parent's stat).
    pub const GET_CHILDREN2: i32 = 12;
    /// `check` (a version check, inside `multi` only).
    pub const CHECK: i32 = 13;
    /// `multi`.
    pub const MULTI: i32 = 14;
    /// `create2` (create, answering the new node's stat).
    pub const CREATE2: i32 = 15;
    /// `reconfig` (not supported: answered `Unimplemented`).
    pub const RECONFIG: i32 = 16;
    /// `checkWatches`.
    pub const CHECK_WATCHES: i32 = 17;
    /// `removeWatches`.
    pub const REMOVE_WATCHES: i32 = 18;
    /// `createContainer`.
    pub const CREATE_CONTAINER: i32 = 19;
    /// `deleteContainer` (internal: the container manager's delete).
    pub const DELETE_CONTAINER: i32 = 20;
    /// `createTTL`.
    pub const CREATE_TTL: i32 = 21;
    /// `multiRead`.
    pub const MULTI_READ: i32 = 22;
    /// `addAuth`.
    pub const AUTH: i32 = 100;
    /// `setWatches`.
    pub const SET_WATCHES: i32 = 101;
    /// SASL (not supported).
    pub const SASL: i32 = 102;
    /// `getEphemerals`.
    pub const GET_EPHEMERALS: i32 = 103;
    /// `getAllChildrenNumber`.
    pub const GET_ALL_CHILDREN_NUMBER: i32 = 104;
    /// `setWatches2` (with persistent and recursive watches).
    pub const SET_WATCHES2: i32 = 105;
    /// `addWatch`.
    pub const ADD_WATCH: i32 = 106;
    /// `whoAmI`.
    pub const WHO_AM_I: i32 = 107;
    /// Opening a session (a transaction, never a client request header).
    pub const CREATE_SESSION: i32 = -10;
    /// `closeSession`.
    pub const CLOSE_SESSION: i32 = -11;
    /// A failed operation inside a `multi` result.
    pub const ERROR: i32 = -1;
}

/// Reserved xids of `RequestHeader` / `ReplyHeader`.
pub mod xid {
    /// A watch notification.
    pub const NOTIFICATION: i32 = -1;
    /// A ping.
    pub const PING: i32 = -2;
    /// An `addAuth`.
    pub const AUTH: i32 = -4;
    /// A `setWatches` / `setWatches2` sent on reconnection.
    pub const SET_WATCHES: i32 = -8;
}

/// The error codes of a `ReplyHeader` (ZooKeeper's `KeeperException.Code`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// Success.
    Ok,
    /// A server error.
    SystemError,
    /// The server's state is inconsistent.
    RuntimeInconsistency,
    /// The data is inconsistent.
    DataInconsistency,
    /// The connection to the server was lost.
    ConnectionLoss,
    /// Bad serialisation.
    MarshallingError,
    /// The operation is not implemented.
    Unimplemented,
    /// The operation timed out.
    OperationTimeout,
    /// Invalid arguments (a bad path, a TTL out of range, …).
    BadArguments,
    /// The session is not known to the server.
    UnknownSession,
    /// No quorum for a new configuration.
    NewConfigNoQuorum,
    /// A reconfiguration is in progress.
    ReconfigInProgress,
    /// API errors start here.
    ApiError,
    /// The node does not exist.
    NoNode,
    /// Not authorised by the node's ACL.
    NoAuth,
    /// The version does not match.
    BadVersion,
    /// Ephemeral nodes may not have children.
    NoChildrenForEphemerals,
    /// The node already exists.
    NodeExists,
    /// The node has children.
    NotEmpty,
    /// The session expired.
    SessionExpired,
    /// Invalid callback.
    InvalidCallback,
    /// Invalid ACL.
    InvalidAcl,
    /// Authentication failed.
    AuthFailed,
    /// Session moved to another server: the operation is refused.
    SessionMoved,
    /// State-changing request passed to a read-only server.
    NotReadOnly,
    /// Ephemeral node on a local session.
    EphemeralOnLocalSession,
    /// No watcher matches a `removeWatches` / `checkWatches`.
    NoWatcher,
    /// The request's rate was throttled.
    Throttled,
    /// Quota exceeded.
    QuotaExceeded,
    /// Any other code (kept as sent).
    Other(i32),
}

impl ErrorCode {
    /// The code on the wire.
    pub fn code(self) -> i32 {
        match self {
            ErrorCode::Ok => 0,
            ErrorCode::SystemError => -1,
            ErrorCode::RuntimeInconsistency => -2,
            ErrorCode::DataInconsistency => -3,
            ErrorCode::ConnectionLoss => -4,
            ErrorCode::MarshallingError => -5,
            ErrorCode::Unimplemented => -6,
            ErrorCode::OperationTimeout => -7,
            ErrorCode::BadArguments => -8,
            ErrorCode::UnknownSession => -12,
            ErrorCode::NewConfigNoQuorum => -13,
            ErrorCode::ReconfigInProgress => -14,
            ErrorCode::ApiError => -100,
            ErrorCode::NoNode => -101,
            ErrorCode::NoAuth => -102,
            ErrorCode::BadVersion => -103,
            ErrorCode::NoChildrenForEphemerals => -108,
            ErrorCode::NodeExists => -110,
            ErrorCode::NotEmpty => -111,
            ErrorCode::SessionExpired => -112,
            ErrorCode::InvalidCallback => -113,
            ErrorCode::InvalidAcl => -114,
            ErrorCode::AuthFailed => -115,
            ErrorCode::SessionMoved => -118,
            ErrorCode::NotReadOnly => -119,
            ErrorCode::EphemeralOnLocalSession => -120,
            ErrorCode::NoWatcher => -121,
            ErrorCode::Throttled => -127,
            ErrorCode::QuotaExceeded => -125,
            ErrorCode::Other(c) => c,
        }
    }

    /// The code of `code` on the wire.
    pub fn from_code(code: i32) -> ErrorCode {
        match code {
            0 => ErrorCode::Ok,
            -1 => ErrorCode::SystemError,
            -2 => ErrorCode::RuntimeInconsistency,
            -3 => ErrorCode::DataInconsistency,
            -4 => ErrorCode::ConnectionLoss,
            -5 => ErrorCode::MarshallingError,
            -6 => ErrorCode::Unimplemented,
            -7 => ErrorCode::OperationTimeout,
            -8 => ErrorCode::BadArguments,
            -12 => ErrorCode::UnknownSession,
            -13 => ErrorCode::NewConfigNoQuorum,
            -14 => ErrorCode::ReconfigInProgress,
            -100 => ErrorCode::ApiError,
            -101 => ErrorCode::NoNode,
            -102 => ErrorCode::NoAuth,
            -103 => ErrorCode::BadVersion,
            -108 => ErrorCode::NoChildrenForEphemerals,
            -110 => ErrorCode::NodeExists,
            -111 => ErrorCode::NotEmpty,
            -112 => ErrorCode::SessionExpired,
            -113 => ErrorCode::InvalidCallback,
            -114 => ErrorCode::InvalidAcl,
            -115 => ErrorCode::AuthFailed,
            -118 => ErrorCode::SessionMoved,
            -119 => ErrorCode::NotReadOnly,
            -120 => ErrorCode::EphemeralOnLocalSession,
            -121 => ErrorCode::NoWatcher,
            -125 => ErrorCode::QuotaExceeded,
            -127 => ErrorCode::Throttled,
            c => ErrorCode::Other(c),
        }
    }
}

/// A node's metadata exactly as ZooKeeper's `Stat` record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Stat {
    /// Zxid of the transaction that created the node.
    pub czxid: i64,
    /// Zxid of the transaction that last changed the node's data.
    pub mzxid: i64,
    /// Creation time, ms since the epoch (the leader's clock when the transaction was made).
    pub ctime: i64,
    /// Last data change time, ms since the epoch.
    pub mtime: i64,
    /// Number of data changes.
    pub version: i32,
    /// Number of changes to the children.
    pub cversion: i32,
    /// Number of ACL changes.
    pub aversion: i32,
    /// Owning session if ephemeral, else 0.
    pub ephemeral_owner: i64,
    /// Length of the data.
    pub data_length: i32,
    /// Number of children.
    pub num_children: i32,
    /// Zxid of the transaction that last changed the children (created or deleted one).
    pub pzxid: i64,
}

/// An identity: an authentication scheme and an id in it (`world:anyone`,
/// `digest:user:base64(sha1(user:password))`, `ip:1.2.3.4`, `auth:`, …).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Id {
    /// The scheme.
    pub scheme: String,
    /// The id in the scheme.
    pub id: String,
}

impl Id {
    /// An id.
    pub fn new(scheme: impl Into<String>, id: impl Into<String>) -> Id {
        Id {
            scheme: scheme.into(),
            id: id.into(),
        }
    }

    /// `world:anyone`.
    pub fn anyone() -> Id {
        Id::new("world", "anyone")
    }
}

/// The permission bits of an [`Acl`] (ZooKeeper's `ZooDefs.Perms`).
pub mod perms {
    /// Read the data and list the children.
    pub const READ: i32 = 1;
    /// Set the data.
    pub const WRITE: i32 = 2;
    /// Create children.
    pub const CREATE: i32 = 4;
    /// Delete children.
    pub const DELETE: i32 = 8;
    /// Set the ACL.
    pub const ADMIN: i32 = 16;
    /// Everything.
    pub const ALL: i32 = READ | WRITE | CREATE | DELETE | ADMIN;
}

/// One access control entry: the permissions an [`Id`] has.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Acl {
    /// Bits of [`perms`].
    pub perms: i32,
    /// Whom they are granted to.
    pub id: Id,
}

impl Acl {
    /// `world:anyone` with every permission (`ZooDefs.Ids.OPEN_ACL_UNSAFE`).
    pub fn open_unsafe() -> Vec<Acl> {
        vec![Acl {
            perms: perms::ALL,
            id: Id::anyone(),
        }]
    }
}

/// How a node is created: the `flags` of a `CreateRequest` (ZooKeeper's `CreateMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CreateMode {
    /// Lives until deleted (flag 0).
    Persistent,
    /// Deleted when the creating session ends (flag 1).
    Ephemeral,
    /// Persistent with a 10-digit sequence number appended (flag 2).
    PersistentSequential,
    /// Ephemeral with a sequence number (flag 3).
    EphemeralSequential,
    /// Deleted by the server once its last child is gone (flag 4).
    Container,
    /// Deleted by the server once it has no children and was not changed for its TTL (flag 5).
    PersistentWithTtl,
    /// A TTL node with a sequence number (flag 6).
    PersistentSequentialWithTtl,
}

impl CreateMode {
    /// The mode of `flags`, `None` for an unknown flag.
    pub fn from_flags(flags: i32) -> Option<CreateMode> {
        Some(match flags {
            0 => CreateMode::Persistent,
            1 => CreateMode::Ephemeral,
            2 => CreateMode::PersistentSequential,
            3 => CreateMode::EphemeralSequential,
            4 => CreateMode::Container,
            5 => CreateMode::PersistentWithTtl,
            6 => CreateMode::PersistentSequentialWithTtl,
            _ => return None,
        })
    }

    /// The flag on the wire.
    pub fn flags(self) -> i32 {
        match self {
            CreateMode::Persistent => 0,
            CreateMode::Ephemeral => 1,
            CreateMode::PersistentSequential => 2,
            CreateMode::EphemeralSequential => 3,
            CreateMode::Container => 4,
            CreateMode::PersistentWithTtl => 5,
            CreateMode::PersistentSequentialWithTtl => 6,
        }
    }

    /// The ephemeral modes.
    pub fn is_ephemeral(self) -> bool {
        matches!(
            self,
            CreateMode::Ephemeral | CreateMode::EphemeralSequential
        )
    }

    /// The sequential modes.
    pub fn is_sequential(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentSequential
                | CreateMode::EphemeralSequential
                | CreateMode::PersistentSequentialWithTtl
        )
    }

    /// The TTL modes.
    pub fn is_ttl(self) -> bool {
        matches!(
            self,
            CreateMode::PersistentWithTtl | CreateMode::PersistentSequentialWithTtl
        )
    }
}

/// The type of a watch event (ZooKeeper's `Watcher.Event.EventType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventType {
    /// A session state change (no node).
    None,
    /// The node was created.
    NodeCreated,
    /// The node was deleted.
    NodeDeleted,
    /// The node's data changed.
    NodeDataChanged,
    /// The node's children changed.
    NodeChildrenChanged,
    /// A data watch was removed.
    DataWatchRemoved,
    /// A child watch was removed.
    ChildWatchRemoved,
    /// A persistent watch was removed.
    PersistentWatchRemoved,
}

impl EventType {
    /// The code on the wire.
    pub fn code(self) -> i32 {
        match self {
            EventType::None => -1,
            EventType::NodeCreated => 1,
            EventType::NodeDeleted => 2,
            EventType::NodeDataChanged => 3,
            EventType::NodeChildrenChanged => 4,
            EventType::DataWatchRemoved => 5,
            EventType::ChildWatchRemoved => 6,
            EventType::PersistentWatchRemoved => 7,
        }
    }

    /// The type of `code`.
    pub fn from_code(code: i32) -> Option<EventType> {
        Some(match code {
            -1 => EventType::None,
            1 => EventType::NodeCreated,
            2 => EventType::NodeDeleted,
            3 => EventType::NodeDataChanged,
            4 => EventType::NodeChildrenChanged,
            5 => EventType::DataWatchRemoved,
            6 => EventType::ChildWatchRemoved,
            7 => EventType::PersistentWatchRemoved,
            _ => return None,
        })
    }
}

/// `Watcher.Event.KeeperState.SyncConnected`: the state of every node event a server sends.
pub const STATE_SYNC_CONNECTED: i32 = 3;

/// The mode of an `addWatch` (ZooKeeper's `AddWatchMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddWatchMode {
    /// Fires for changes of the node itself, and is not removed when fired (mode 0).
    Persistent,
    /// Fires for changes of the node and of every node under it (mode 1).
    PersistentRecursive,
}

impl AddWatchMode {
    /// The mode of `code`.
    pub fn from_code(code: i32) -> Option<AddWatchMode> {
        match code {
            0 => Some(AddWatchMode::Persistent),
            1 => Some(AddWatchMode::PersistentRecursive),
            _ => None,
        }
    }

    /// The code on the wire.
    pub fn code(self) -> i32 {
        match self {
            AddWatchMode::Persistent => 0,
            AddWatchMode::PersistentRecursive => 1,
        }
    }
}

/// Which watches a `removeWatches` / `checkWatches` is about (ZooKeeper's
/// `Watcher.WatcherType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatcherType {
    /// Child watches (1).
    Children,
    /// Data and exist watches (2).
    Data,
    /// Persistent and recursive watches (4).
    Persistent,
    /// Persistent recursive watches only (5).
    PersistentRecursive,
    /// All of them (3).
    Any,
}

impl WatcherType {
    /// The type of `code`.
    pub fn from_code(code: i32) -> Option<WatcherType> {
        Some(match code {
            1 => WatcherType::Children,
            2 => WatcherType::Data,
            3 => WatcherType::Any,
            4 => WatcherType::Persistent,
            5 => WatcherType::PersistentRecursive,
            _ => return None,
        })
    }

    /// The code on the wire.
    pub fn code(self) -> i32 {
        match self {
            WatcherType::Children => 1,
            WatcherType::Data => 2,
            WatcherType::Any => 3,
            WatcherType::Persistent => 4,
            WatcherType::PersistentRecursive => 5,
        }
    }
}
