//! The per-case context of the conformance suite: a root path per case, readable failures,
//! waiting for events with a timeout.

use std::time::Duration;

use futures::StreamExt;

use super::ConformanceError;
use crate::error::CoordinationError;
use crate::path::join;
use crate::service::Coordination;
use crate::types::{
    CoordinationEvent, CreateMode, EventStream, SessionEvent, WatchEvent, WatchEventKind,
    ANY_VERSION,
};

/// How long a case waits for an expected event.
const EVENT_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a case waits to be sure that no event comes.
const QUIET: Duration = Duration::from_millis(300);

pub(super) type CaseResult = Result<(), ConformanceError>;

/// Per-case context: the case name, its root path, and helpers producing good messages.
pub(super) struct Case {
    pub(super) name: &'static str,
    pub(super) root: String,
}

impl Case {
    pub(super) fn p(&self, rel: &str) -> String {
        join(&self.root, rel)
    }

    pub(super) fn op<T>(
        &self,
        context: &str,
        r: Result<T, CoordinationError>,
    ) -> Result<T, ConformanceError> {
        r.map_err(|error| ConformanceError::Operation {
            case: self.name,
            context: context.to_string(),
            error,
        })
    }

    pub(super) fn fail<T>(&self, message: String) -> Result<T, ConformanceError> {
        Err(ConformanceError::Expectation {
            case: self.name,
            message,
        })
    }

    /// Asserts `r` failed with an error (its root, for a multi) satisfying `pred`.
    pub(super) fn expect_err<T: std::fmt::Debug>(
        &self,
        what: &str,
        r: Result<T, CoordinationError>,
        pred: impl Fn(&CoordinationError) -> bool,
    ) -> CaseResult {
        match r {
            Err(e) if pred(e.root()) => Ok(()),
            other => self.fail(format!("{what}: unexpected outcome {other:?}")),
        }
    }

    pub(super) async fn start(
        name: &'static str,
        client: &dyn Coordination,
    ) -> Result<Case, ConformanceError> {
        let case = Case {
            name,
            root: format!("/{name}"),
        };
        case.op("clean up", delete_recursive(client, &case.root).await)?;
        case.op(
            "create the case root",
            client
                .create(&case.root, b"", CreateMode::Persistent)
                .await
                .map(|_| ()),
        )?;
        Ok(case)
    }

    pub(super) async fn next_event(
        &self,
        events: &mut EventStream,
    ) -> Result<CoordinationEvent, ConformanceError> {
        match tokio::time::timeout(EVENT_TIMEOUT, events.next()).await {
            Ok(Some(e)) => Ok(e),
            Ok(None) => self.fail("event stream ended".into()),
            Err(_) => self.fail(format!("no event within {EVENT_TIMEOUT:?}")),
        }
    }

    /// Waits for the next watch event (skipping `Connected`/`Disconnected` noise) and checks it.
    pub(super) async fn expect_watch(
        &self,
        events: &mut EventStream,
        kind: WatchEventKind,
        path: &str,
    ) -> CaseResult {
        loop {
            match self.next_event(events).await? {
                CoordinationEvent::Watch(w) => {
                    let want = WatchEvent {
                        kind,
                        path: path.to_string(),
                    };
                    ensure!(self, w == want, "expected {want:?}, got {w:?}");
                    return Ok(());
                }
                CoordinationEvent::Session(
                    SessionEvent::Connected { .. } | SessionEvent::Disconnected,
                ) => continue,
                other => return self.fail(format!("expected {kind:?} on {path}, got {other:?}")),
            }
        }
    }

    /// Checks that no watch event arrives for a short while.
    pub(super) async fn expect_quiet(&self, events: &mut EventStream) -> CaseResult {
        match tokio::time::timeout(QUIET, events.next()).await {
            Err(_) => Ok(()),
            Ok(None) => self.fail("event stream ended".into()),
            Ok(Some(e)) => self.fail(format!("unexpected event {e:?}")),
        }
    }
}

/// Deletes `path` and everything below it; a missing node is fine.
pub async fn delete_recursive(
    client: &dyn Coordination,
    path: &str,
) -> Result<(), CoordinationError> {
    let children = match client.children(path, false).await {
        Ok(c) => c,
        Err(e) if e.is_no_node() => return Ok(()),
        Err(e) => return Err(e),
    };
    for child in children {
        Box::pin(delete_recursive(client, &join(path, &child))).await?;
    }
    match client.delete(path, ANY_VERSION).await {
        Err(e) if e.is_no_node() => Ok(()),
        other => other,
    }
}
