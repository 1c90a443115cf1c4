//! [`StoreAddressBook`]: where the other brokers listen, read from their registrations
//! (`/brokers/ids/<id>`) on the coordination store and kept current by a watch on
//! `/brokers/ids` plus a periodic re-read. A follower's fetcher looks its leader up here.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use ha_coordination::{Coordination, CoordinationEvent};
use kafka_controller::zk_data::{paths, BrokerRegistration, KafkaZkClient, KafkaZkError};
use tokio::task::JoinHandle;

use crate::AddressBook;

type Addresses = Arc<Mutex<HashMap<i32, SocketAddr>>>;

/// The listener addresses of the registered brokers, kept up to date by a task.
#[derive(Debug)]
pub struct StoreAddressBook {
    addresses: Addresses,
    task: JoinHandle<()>,
}

/// The `host:port` of the `listener` endpoint of a registration (`LISTENER://host:port`),
/// else the v1 `host` / `port` fields.
pub fn endpoint_of(registration: &BrokerRegistration, listener: &str) -> Option<(String, u16)> {
    let prefix = format!("{listener}://");
    let from_endpoints = registration.endpoints.iter().find_map(|e| {
        let rest = e.strip_prefix(&prefix)?;
        let (host, port) = rest.rsplit_once(':')?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        Some((host.to_owned(), port.parse().ok()?))
    });
    from_endpoints.or_else(|| {
        let host = registration.host.clone()?;
        Some((host, u16::try_from(registration.port).ok()?))
    })
}

async fn read_all(
    zk: &KafkaZkClient,
    listener: &str,
) -> Result<HashMap<i32, SocketAddr>, KafkaZkError> {
    let mut out = HashMap::new();
    for id in zk.live_broker_ids(true).await? {
        let Some((registration, _)) = zk.broker(id).await? else {
            continue;
        };
        let Some((host, port)) = endpoint_of(&registration, listener) else {
            continue;
        };
        let target = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let resolved = tokio::net::lookup_host(target).await;
        match resolved.map(|mut addrs| addrs.next()) {
            Ok(Some(addr)) => {
                out.insert(id, addr);
            }
            Ok(None) => tracing::warn!(broker = id, %host, "a broker's host has no address"),
            Err(error) => {
                tracing::warn!(broker = id, %host, %error, "cannot resolve a broker's host")
            }
        }
    }
    Ok(out)
}

impl StoreAddressBook {
    /// Starts following the registrations on `coord`, reading `listener`'s endpoints; they are
    /// re-read when `/brokers/ids` changes, on a new session, and every `refresh`.
    pub fn spawn(coord: Arc<dyn Coordination>, listener: &str, refresh: Duration) -> Self {
        let addresses: Addresses = Arc::default();
        let shared = addresses.clone();
        let listener = listener.to_owned();
        let mut events = coord.events();
        let zk = KafkaZkClient::new(coord);
        let task = tokio::spawn(async move {
            loop {
                match read_all(&zk, &listener).await {
                    Ok(now) => *shared.lock().unwrap_or_else(PoisonError::into_inner) = now,
                    Err(error) => tracing::debug!(%error, "reading broker registrations failed"),
                }
                let wait = async {
                    while let Some(event) = events.next().await {
                        match event {
                            CoordinationEvent::Watch(w) if w.path == paths::BROKER_IDS => return,
                            CoordinationEvent::Session(_) => return,
                            _ => {}
                        }
                    }
                    // The client is gone: nothing will change any more.
                    std::future::pending::<()>().await;
                };
                let _ = tokio::time::timeout(refresh, wait).await;
            }
        });
        StoreAddressBook { addresses, task }
    }

    /// The address of broker `id`'s listener, if known.
    pub fn get(&self, id: i32) -> Option<SocketAddr> {
        self.addresses
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .copied()
    }

    /// The lookup function a [`Broker`](crate::Broker) takes.
    pub fn book(&self) -> AddressBook {
        let addresses = self.addresses.clone();
        Arc::new(move |id| {
            addresses
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&id)
                .copied()
        })
    }
}

impl Drop for StoreAddressBook {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_of_reads_the_named_listener_then_the_v1_fields() {
        let mut r = BrokerRegistration::plaintext("10.0.0.7", 9093, None, 0);
        r.endpoints = vec![
            "SSL://10.0.0.7:9094".to_owned(),
            "PLAINTEXT://[::1]:9093".to_owned(),
        ];
        assert_eq!(endpoint_of(&r, "PLAINTEXT"), Some(("::1".to_owned(), 9093)));
        assert_eq!(endpoint_of(&r, "SSL"), Some(("10.0.0.7".to_owned(), 9094)));
        r.endpoints.clear();
        assert_eq!(
            endpoint_of(&r, "PLAINTEXT"),
            Some(("10.0.0.7".to_owned(), 9093))
        );
        r.host = None;
        assert_eq!(endpoint_of(&r, "PLAINTEXT"), None);
    }

    #[tokio::test]
    async fn the_book_follows_registrations_on_the_store() {
        use ha_coordination::MemoryTree;
        let tree = MemoryTree::new();
        let broker: Arc<dyn Coordination> = Arc::new(tree.connect());
        let zk = KafkaZkClient::new(broker.clone());
        zk.create_persistent_paths().await.unwrap();
        let book = StoreAddressBook::spawn(
            Arc::new(tree.connect()),
            "PLAINTEXT",
            Duration::from_secs(60),
        );
        zk.register_broker(
            2,
            &BrokerRegistration::plaintext("127.0.0.1", 9200, None, 0),
        )
        .await
        .unwrap();
        let lookup = book.book();
        for _ in 0..200 {
            if lookup(2).is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(lookup(2), Some(SocketAddr::from(([127, 0, 0, 1], 9200))));
        tree.expire(broker.session_id());
        for _ in 0..200 {
            if lookup(2).is_none() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(book.get(2), None);
    }
}
