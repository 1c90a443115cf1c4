//! The [`Coordination`] trait: a ZooKeeper-like coordination service as the controller and
//! brokers use it.

use async_trait::async_trait;

use super::error::CoordinationError;
use super::types::{CreateMode, EventStream, Op, OpResult, SessionId, SessionState, Stat};

/// A client of a coordination service with ZooKeeper's semantics.
///
/// - A client owns one *session* at a time. Ephemeral nodes belong to the session and vanish
///   when it ends. When the session expires the client reports
///   [`SessionEvent::Expired`](super::SessionEvent::Expired), opens a new session by itself and
///   reports [`SessionEvent::Connected`](super::SessionEvent::Connected) with the new id (as
///   Kafka's `ZooKeeperClient` re-initialises): the user re-creates its ephemerals and
///   re-registers its watches then.
/// - Watches are one-shot, as in ZooKeeper: a read with `watch = true` registers one, it fires
///   at most once, on the client's [`events`](Coordination::events) stream, and is registered
///   again by reading again. A client has at most one data watch and one child watch per path;
///   a deleted node fires a single `NodeDeleted` for both.
///   - `get_data(watch)` / `exists(watch)` on an existing node: `NodeDataChanged`, `NodeDeleted`;
///   - `exists(watch)` on a missing node: `NodeCreated`;
///   - `children(watch)`: `NodeChildrenChanged`, `NodeDeleted`.
/// - Versions: every data change increments a node's `version`; conditional writes take the
///   expected version or [`ANY_VERSION`](super::ANY_VERSION).
///
/// The trait is object safe: the controller holds an `Arc<dyn Coordination>`.
#[async_trait]
pub trait Coordination: Send + Sync {
    /// The current session's id.
    fn session_id(&self) -> SessionId;

    /// The current session state.
    fn session_state(&self) -> SessionState;

    /// A stream of the watch and session events observed from now on, in order. Each call
    /// returns a new subscription receiving every later event.
    fn events(&self) -> EventStream;

    /// Creates a node and returns its path (with the sequence number for sequential modes) and
    /// its metadata.
    ///
    /// Errors: `NodeExists`, `NoNode` (no parent), `NoChildrenForEphemerals`, `BadPath`.
    async fn create(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> Result<(String, Stat), CoordinationError>;

    /// The node's data and metadata; with `watch`, registers a data watch. Errors: `NoNode`.
    async fn get_data(&self, path: &str, watch: bool)
        -> Result<(Vec<u8>, Stat), CoordinationError>;

    /// The node's metadata if it exists; with `watch`, registers a watch in either case.
    async fn exists(&self, path: &str, watch: bool) -> Result<Option<Stat>, CoordinationError>;

    /// Replaces the node's data if its version is `version` (or any, for `ANY_VERSION`) and
    /// returns the new metadata. Errors: `NoNode`, `BadVersion`.
    async fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: i32,
    ) -> Result<Stat, CoordinationError>;

    /// Deletes the node if its version is `version` (or any). Errors: `NoNode`, `BadVersion`,
    /// `NotEmpty`.
    async fn delete(&self, path: &str, version: i32) -> Result<(), CoordinationError>;

    /// The names (not paths) of the node's children, sorted; with `watch`, registers a child
    /// watch. Errors: `NoNode`.
    async fn children(&self, path: &str, watch: bool) -> Result<Vec<String>, CoordinationError>;

    /// The data and metadata of every node of `paths`, in order, each with its own result
    /// (`NoNode` for a missing one); no watches. Meant for bulk reads (every partition state at
    /// controller failover): an implementation may send many reads as one request, as
    /// ZooKeeper 3.6+'s multi-read does. The default issues the reads one by one, all in
    /// flight at once.
    async fn get_data_many(
        &self,
        paths: &[String],
    ) -> Vec<Result<(Vec<u8>, Stat), CoordinationError>> {
        futures::future::join_all(paths.iter().map(|p| self.get_data(p, false))).await
    }

    /// Makes this client's later reads see every write committed before the call (ZooKeeper's
    /// `sync`: the server this client talks to catches up with the leader). Needed only where
    /// a client must read what *another* client wrote, without a watch event in between. The
    /// default does nothing, which is right for a linearizable store.
    async fn sync(&self, path: &str) -> Result<(), CoordinationError> {
        let _ = path;
        Ok(())
    }

    /// Applies `ops` atomically, all or nothing, as one transaction. On failure returns
    /// [`CoordinationError::MultiOpFailed`] with the index and error of the first failing
    /// operation and changes nothing. An empty `ops` succeeds with no results.
    async fn multi(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, CoordinationError>;
}
