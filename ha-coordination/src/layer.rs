//! [`CoordinationLayer`]: a wrapper around another [`Coordination`] that states only the
//! methods it changes; every other method forwards to [`inner`](CoordinationLayer::inner)
//! (the blanket `impl<T: CoordinationLayer> Coordination for T`).

use async_trait::async_trait;

use crate::error::CoordinationError;
use crate::service::Coordination;
use crate::types::{CreateMode, EventStream, Op, OpResult, SessionId, SessionState, Stat};

/// A [`Coordination`] that wraps another one and overrides some of its methods — a fault
/// injector, a recorder, a counter. Implement [`inner`](Self::inner) and the methods you
/// change; every other method forwards to the inner client, including `get_data_many` and
/// `sync`, so that a wrapper keeps the inner client's batching and catching up. The blanket
/// implementation makes every layer a [`Coordination`].
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use async_trait::async_trait;
/// use ha_coordination::{
///     Coordination, CoordinationError, CoordinationLayer, CreateMode, MemoryCoordination, Stat,
/// };
///
/// /// Counts the writes of data, changes nothing else.
/// struct CountSetData {
///     inner: MemoryCoordination,
///     writes: AtomicUsize,
/// }
///
/// #[async_trait]
/// impl CoordinationLayer for CountSetData {
///     fn inner(&self) -> &dyn Coordination {
///         &self.inner
///     }
///     async fn set_data(&self, path: &str, data: &[u8], version: i32)
///         -> Result<Stat, CoordinationError> {
///         self.writes.fetch_add(1, Ordering::Relaxed);
///         self.inner.set_data(path, data, version).await
///     }
/// }
///
/// # futures::executor::block_on(async {
/// let c = CountSetData { inner: MemoryCoordination::new(), writes: AtomicUsize::new(0) };
/// let zk: &dyn Coordination = &c;
/// zk.create("/a", b"", CreateMode::Persistent).await?;
/// zk.set_data("/a", b"1", 0).await?;
/// assert_eq!(c.writes.load(Ordering::Relaxed), 1);
/// # Ok::<(), CoordinationError>(())
/// # }).unwrap();
/// ```
#[async_trait]
pub trait CoordinationLayer: Send + Sync {
    /// The client every method not overridden forwards to.
    fn inner(&self) -> &dyn Coordination;

    /// [`Coordination::session_id`]; forwards by default.
    fn session_id(&self) -> SessionId {
        self.inner().session_id()
    }

    /// [`Coordination::session_state`]; forwards by default.
    fn session_state(&self) -> SessionState {
        self.inner().session_state()
    }

    /// [`Coordination::events`]; forwards by default.
    fn events(&self) -> EventStream {
        self.inner().events()
    }

    /// [`Coordination::create`]; forwards by default.
    async fn create(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> Result<(String, Stat), CoordinationError> {
        self.inner().create(path, data, mode).await
    }

    /// [`Coordination::get_data`]; forwards by default.
    async fn get_data(
        &self,
        path: &str,
        watch: bool,
    ) -> Result<(Vec<u8>, Stat), CoordinationError> {
        self.inner().get_data(path, watch).await
    }

    /// [`Coordination::exists`]; forwards by default.
    async fn exists(&self, path: &str, watch: bool) -> Result<Option<Stat>, CoordinationError> {
        self.inner().exists(path, watch).await
    }

    /// [`Coordination::set_data`]; forwards by default.
    async fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: i32,
    ) -> Result<Stat, CoordinationError> {
        self.inner().set_data(path, data, version).await
    }

    /// [`Coordination::delete`]; forwards by default.
    async fn delete(&self, path: &str, version: i32) -> Result<(), CoordinationError> {
        self.inner().delete(path, version).await
    }

    /// [`Coordination::children`]; forwards by default.
    async fn children(&self, path: &str, watch: bool) -> Result<Vec<String>, CoordinationError> {
        self.inner().children(path, watch).await
    }

    /// [`Coordination::get_data_many`]; forwards by default.
    async fn get_data_many(
        &self,
        paths: &[String],
    ) -> Vec<Result<(Vec<u8>, Stat), CoordinationError>> {
        self.inner().get_data_many(paths).await
    }

    /// [`Coordination::sync`]; forwards by default.
    async fn sync(&self, path: &str) -> Result<(), CoordinationError> {
        self.inner().sync(path).await
    }

    /// [`Coordination::multi`]; forwards by default.
    async fn multi(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, CoordinationError> {
        self.inner().multi(ops).await
    }
}

#[async_trait]
impl<T: CoordinationLayer> Coordination for T {
    fn session_id(&self) -> SessionId {
        CoordinationLayer::session_id(self)
    }

    fn session_state(&self) -> SessionState {
        CoordinationLayer::session_state(self)
    }

    fn events(&self) -> EventStream {
        CoordinationLayer::events(self)
    }

    async fn create(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> Result<(String, Stat), CoordinationError> {
        CoordinationLayer::create(self, path, data, mode).await
    }

    async fn get_data(
        &self,
        path: &str,
        watch: bool,
    ) -> Result<(Vec<u8>, Stat), CoordinationError> {
        CoordinationLayer::get_data(self, path, watch).await
    }

    async fn exists(&self, path: &str, watch: bool) -> Result<Option<Stat>, CoordinationError> {
        CoordinationLayer::exists(self, path, watch).await
    }

    async fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: i32,
    ) -> Result<Stat, CoordinationError> {
        CoordinationLayer::set_data(self, path, data, version).await
    }

    async fn delete(&self, path: &str, version: i32) -> Result<(), CoordinationError> {
        CoordinationLayer::delete(self, path, version).await
    }

    async fn children(&self, path: &str, watch: bool) -> Result<Vec<String>, CoordinationError> {
        CoordinationLayer::children(self, path, watch).await
    }

    async fn get_data_many(
        &self,
        paths: &[String],
    ) -> Vec<Result<(Vec<u8>, Stat), CoordinationError>> {
        CoordinationLayer::get_data_many(self, paths).await
    }

    async fn sync(&self, path: &str) -> Result<(), CoordinationError> {
        CoordinationLayer::sync(self, path).await
    }

    async fn multi(&self, ops: Vec<Op>) -> Result<Vec<OpResult>, CoordinationError> {
        CoordinationLayer::multi(self, ops).await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::memory::MemoryCoordination;

    /// Records the paths read in bulk, overrides nothing else.
    struct RecordBulk {
        inner: MemoryCoordination,
        bulk: Mutex<Vec<String>>,
    }

    #[async_trait]
    impl CoordinationLayer for RecordBulk {
        fn inner(&self) -> &dyn Coordination {
            &self.inner
        }
        async fn get_data_many(
            &self,
            paths: &[String],
        ) -> Vec<Result<(Vec<u8>, Stat), CoordinationError>> {
            self.bulk
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(paths.iter().cloned());
            self.inner.get_data_many(paths).await
        }
    }

    #[test]
    fn a_layer_forwards_what_it_does_not_override_and_runs_what_it_does() {
        let layer = RecordBulk {
            inner: MemoryCoordination::new(),
            bulk: Mutex::new(Vec::new()),
        };
        let c: &dyn Coordination = &layer;
        futures::executor::block_on(async {
            assert_eq!(c.session_id(), layer.inner.session_id());
            let created = c.create("/a", b"x", CreateMode::Persistent).await;
            assert_eq!(created.map(|(p, _)| p).ok(), Some("/a".to_string()));
            assert_eq!(
                layer.inner.get_data("/a", false).await.map(|(d, _)| d).ok(),
                Some(b"x".to_vec())
            );
            let many = c.get_data_many(&["/a".into(), "/b".into()]).await;
            assert!(many[0].is_ok() && many[1].as_ref().is_err_and(|e| e.is_no_node()));
            assert_eq!(c.multi(Vec::new()).await.ok(), Some(Vec::new()));
        });
        assert_eq!(
            *layer.bulk.lock().unwrap_or_else(|e| e.into_inner()),
            vec!["/a".to_string(), "/b".to_string()]
        );
    }
}
