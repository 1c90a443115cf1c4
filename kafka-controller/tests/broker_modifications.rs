//! Kafka's `BrokerModifications`: a broker rewriting its `/brokers/ids/<id>` registration
//! (new listeners) updates the controller's context and sends every live broker an
//! UpdateMetadata naming the new endpoints; an unchanged rewrite sends nothing.

mod controller_harness;

use controller_harness::{wait_for, Cluster};
use ha_coordination::{Coordination, ANY_VERSION};
use kafka_controller::zk_data::{paths, BrokerRegistration};
use kafka_wire::RequestBody;

/// The brokers that received an UpdateMetadata listing broker `id` at `host:port`.
fn told_about(c: &Cluster, id: i32, host: &str, port: i32) -> Vec<i32> {
    let mut to: Vec<i32> = c
        .channel
        .sent()
        .into_iter()
        .filter(|r| match &r.body {
            RequestBody::UpdateMetadata(u) => u.live_brokers.iter().any(|b| {
                b.id == id
                    && b.endpoints
                        .iter()
                        .any(|e| e.host.as_ref() as &str == host && e.port == port)
            }),
            _ => false,
        })
        .map(|r| r.broker)
        .collect();
    to.sort_unstable();
    to.dedup();
    to
}

#[tokio::test]
async fn broker_modification_updates_the_context_and_sends_update_metadata_to_all() {
    let c = Cluster::start(&[1, 2, 3]).await;
    let controller = c.wait_controller().await;
    c.channel.clear();
    // Broker 2 re-registers with a new listener (same session, same broker epoch).
    let moved = BrokerRegistration::plaintext("broker2.example", 19092, None, 0)
        .to_json()
        .unwrap();
    c.brokers[&2]
        .session
        .set_data(&paths::broker(2), &moved, ANY_VERSION)
        .await
        .unwrap();
    wait_for(
        "UpdateMetadata with the new endpoint to every broker",
        || async { told_about(&c, 2, "broker2.example", 19092) == vec![1, 2, 3] },
    )
    .await;
    let ctx = c.brokers[&controller]
        .handle
        .context()
        .await
        .expect("active");
    let b2 = ctx.broker(2).expect("broker 2 known");
    assert_eq!(b2.endpoints.len(), 1);
    assert_eq!(b2.endpoints[0].host, "broker2.example");
    assert_eq!(b2.endpoints[0].port, 19092);
    assert!(ctx.is_broker_live(2));

    // The watch is set again: a second change is seen too.
    let again = BrokerRegistration::plaintext("broker2.example", 29092, None, 0)
        .to_json()
        .unwrap();
    c.brokers[&2]
        .session
        .set_data(&paths::broker(2), &again, ANY_VERSION)
        .await
        .unwrap();
    wait_for("second change", || async {
        told_about(&c, 2, "broker2.example", 29092) == vec![1, 2, 3]
    })
    .await;

    // Rewriting the same content changes nothing: no request.
    c.channel.clear();
    c.brokers[&2]
        .session
        .set_data(&paths::broker(2), &again, ANY_VERSION)
        .await
        .unwrap();
    // A third, real change: its watch event arrives after the unchanged rewrite's (one
    // session's events come in order), so once it has been acted on the rewrite was handled
    // too, and every request sent since the rewrite is the third change's.
    let third = BrokerRegistration::plaintext("broker2.example", 39092, None, 0)
        .to_json()
        .unwrap();
    c.brokers[&2]
        .session
        .set_data(&paths::broker(2), &third, ANY_VERSION)
        .await
        .unwrap();
    wait_for("third change", || async {
        told_about(&c, 2, "broker2.example", 39092) == vec![1, 2, 3]
    })
    .await;
    c.brokers[&controller].handle.sync().await;
    assert!(
        told_about(&c, 2, "broker2.example", 29092).is_empty(),
        "the unchanged rewrite sent {:?}",
        c.channel.sent()
    );
    assert_eq!(c.channel.sent().len(), 3, "{:?}", c.channel.sent());
}
