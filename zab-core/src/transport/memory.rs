//! `MemoryNetwork`: an in-process mesh of [`MemoryTransport`] endpoints with fault hooks
//! (crash, isolate, cut a link, and a per-message filter that drops or delays), for tests.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::mpsc;
use tracing::debug;

use super::{Transport, TransportEvent};
use crate::discovery::QuorumPacket;
use crate::types::ServerId;

/// Capacity of an endpoint's event queue; when full, new events are dropped.
const EVENT_QUEUE: usize = 4096;

/// What the network does with one message from `from` to `to` (see [`MemoryNetwork::set_filter`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkVerdict {
    /// Deliver it now.
    Deliver,
    /// Lose it.
    Drop,
    /// Deliver it after this delay.
    Delay(Duration),
}

/// What kind of message a filter is looking at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageKind {
    /// An election message.
    Election,
    /// A quorum packet.
    Quorum,
}

type Filter = Arc<dyn Fn(ServerId, ServerId, MessageKind) -> LinkVerdict + Send + Sync>;

#[derive(Default)]
struct Hub {
    endpoints: HashMap<ServerId, (u64, mpsc::Sender<TransportEvent>)>,
    next_generation: u64,
    cut: HashSet<(ServerId, ServerId)>,
    quorum_links: HashSet<(ServerId, ServerId)>,
    filter: Option<Filter>,
}

fn pair(a: ServerId, b: ServerId) -> (ServerId, ServerId) {
    (a.min(b), a.max(b))
}

impl Hub {
    fn linked(&self, a: ServerId, b: ServerId) -> bool {
        a == b
            || (self.endpoints.contains_key(&a)
                && self.endpoints.contains_key(&b)
                && !self.cut.contains(&pair(a, b)))
    }

    fn emit(&self, to: ServerId, ev: TransportEvent) {
        if let Some((_, tx)) = self.endpoints.get(&to) {
            if tx.try_send(ev).is_err() {
                debug!(sid = to.0, "memory endpoint queue full, event dropped");
            }
        }
    }

    /// Tells both sides that the link between `a` and `b` went down.
    fn link_down(&mut self, a: ServerId, b: ServerId) {
        self.emit(a, TransportEvent::ConnectionDown(b));
        self.emit(b, TransportEvent::ConnectionDown(a));
        if self.quorum_links.remove(&pair(a, b)) {
            self.emit(a, TransportEvent::QuorumDown(b));
            self.emit(b, TransportEvent::QuorumDown(a));
        }
    }
}

/// An in-memory network. Clones share the same mesh.
#[derive(Clone, Default)]
pub struct MemoryNetwork {
    hub: Arc<Mutex<Hub>>,
}

impl std::fmt::Debug for MemoryNetwork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hub = self.hub();
        f.debug_struct("MemoryNetwork")
            .field("endpoints", &hub.endpoints.keys().collect::<Vec<_>>())
            .field("cut", &hub.cut)
            .finish()
    }
}

impl MemoryNetwork {
    /// An empty network.
    pub fn new() -> Self {
        Self::default()
    }

    fn hub(&self) -> MutexGuard<'_, Hub> {
        self.hub.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Attaches (or re-attaches, after a crash) the endpoint of `sid`. Every reachable peer and
    /// the new endpoint get [`TransportEvent::ConnectionUp`] for each other.
    pub fn endpoint(&self, sid: ServerId) -> MemoryTransport {
        let (tx, rx) = mpsc::channel(EVENT_QUEUE);
        let mut hub = self.hub();
        let generation = hub.next_generation;
        hub.next_generation += 1;
        if hub.endpoints.insert(sid, (generation, tx)).is_some() {
            debug!(sid = sid.0, "endpoint replaced");
        }
        let others: Vec<ServerId> = hub
            .endpoints
            .keys()
            .copied()
            .filter(|o| *o != sid)
            .collect();
        for o in others {
            if hub.linked(sid, o) {
                hub.emit(o, TransportEvent::ConnectionUp(sid));
                hub.emit(sid, TransportEvent::ConnectionUp(o));
            }
        }
        drop(hub);
        MemoryTransport {
            net: self.clone(),
            sid,
            generation,
            events: rx,
        }
    }

    /// Detaches `sid` as if its process died: every linked peer sees its connections close.
    pub fn crash(&self, sid: ServerId) {
        self.crash_generation(sid, None);
    }

    fn crash_generation(&self, sid: ServerId, generation: Option<u64>) {
        let mut hub = self.hub();
        match hub.endpoints.get(&sid) {
            Some((g, _)) if generation.is_none_or(|want| want == *g) => {}
            _ => return,
        }
        let others: Vec<ServerId> = hub
            .endpoints
            .keys()
            .copied()
            .filter(|o| *o != sid)
            .collect();
        for o in others {
            if hub.linked(sid, o) {
                hub.link_down(sid, o);
            }
        }
        hub.endpoints.remove(&sid);
    }

    /// Cuts the link between `a` and `b` (both directions).
    pub fn cut(&self, a: ServerId, b: ServerId) {
        let mut hub = self.hub();
        if hub.linked(a, b) && a != b {
            hub.link_down(a, b);
        }
        hub.cut.insert(pair(a, b));
    }

    /// Cuts every link of `sid`.
    pub fn isolate(&self, sid: ServerId) {
        let others: Vec<ServerId> = self.hub().endpoints.keys().copied().collect();
        for o in others.into_iter().filter(|o| *o != sid) {
            self.cut(sid, o);
        }
    }

    /// Restores every cut link; both sides of each restored link get `ConnectionUp`.
    pub fn heal(&self) {
        let mut hub = self.hub();
        let cut: Vec<(ServerId, ServerId)> = hub.cut.drain().collect();
        for (a, b) in cut {
            if hub.linked(a, b) {
                hub.emit(a, TransportEvent::ConnectionUp(b));
                hub.emit(b, TransportEvent::ConnectionUp(a));
            }
        }
    }

    /// Installs a per-message filter `(from, to, kind) -> verdict` (drop, delay); replaces any
    /// previous one.
    pub fn set_filter(
        &self,
        f: impl Fn(ServerId, ServerId, MessageKind) -> LinkVerdict + Send + Sync + 'static,
    ) {
        self.hub().filter = Some(Arc::new(f));
    }

    /// Removes the filter.
    pub fn clear_filter(&self) {
        self.hub().filter = None;
    }

    fn deliver(&self, from: ServerId, to: ServerId, kind: MessageKind, ev: TransportEvent) {
        let hub = self.hub();
        if !hub.linked(from, to) {
            return;
        }
        let verdict = match (&hub.filter, from == to) {
            (Some(f), false) => f(from, to, kind),
            _ => LinkVerdict::Deliver,
        };
        match verdict {
            LinkVerdict::Deliver => hub.emit(to, ev),
            LinkVerdict::Drop => {}
            LinkVerdict::Delay(d) => {
                drop(hub);
                let net = self.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(d).await;
                    let hub = net.hub();
                    if hub.linked(from, to) {
                        hub.emit(to, ev);
                    }
                });
            }
        }
    }
}

/// One peer's endpoint of a [`MemoryNetwork`]. Dropping it counts as a crash of that peer.
#[derive(Debug)]
#[must_use = "dropping the endpoint counts as a crash of its peer"]
pub struct MemoryTransport {
    net: MemoryNetwork,
    sid: ServerId,
    generation: u64,
    events: mpsc::Receiver<TransportEvent>,
}

impl Drop for MemoryTransport {
    fn drop(&mut self) {
        self.net.crash_generation(self.sid, Some(self.generation));
    }
}

#[async_trait]
impl Transport for MemoryTransport {
    /// The events waiting in `to`'s queue (everything sent to it shares that queue).
    fn quorum_backlog(&self, to: ServerId) -> usize {
        self.net
            .hub()
            .endpoints
            .get(&to)
            .map_or(0, |(_, tx)| EVENT_QUEUE - tx.capacity())
    }

    fn my_sid(&self) -> ServerId {
        self.sid
    }

    fn send_election(&mut self, to: ServerId, payload: Bytes) {
        let ev = TransportEvent::Election {
            from: self.sid,
            payload,
        };
        self.net.deliver(self.sid, to, MessageKind::Election, ev);
    }

    fn send_quorum(&mut self, to: ServerId, packet: QuorumPacket) {
        {
            let mut hub = self.net.hub();
            if !hub.linked(self.sid, to) {
                return;
            }
            hub.quorum_links.insert(pair(self.sid, to));
        }
        let ev = TransportEvent::Quorum {
            from: self.sid,
            packet,
        };
        self.net.deliver(self.sid, to, MessageKind::Quorum, ev);
    }

    fn close_quorum(&mut self, peer: ServerId) {
        let mut hub = self.net.hub();
        if hub.quorum_links.remove(&pair(self.sid, peer)) {
            hub.emit(peer, TransportEvent::QuorumDown(self.sid));
        }
    }

    fn refuse_quorum(&mut self, peer: ServerId) {
        let mut hub = self.net.hub();
        if hub.quorum_links.remove(&pair(self.sid, peer)) {
            hub.emit(peer, TransportEvent::QuorumRefused(self.sid));
        }
    }

    async fn recv(&mut self) -> Option<TransportEvent> {
        self.events.recv().await
    }
}
