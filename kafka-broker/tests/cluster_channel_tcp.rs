//! `TcpBrokerChannel` against real brokers on loopback: control requests arrive and are
//! answered, a broker that is down is reported unreachable, and a broker restarted on another
//! port is reached again through a fresh connection.

#[path = "broker_common/mod.rs"]
mod broker_common;

use std::sync::Arc;
use std::time::Duration;

use kafka_broker::{Broker, BrokerConfig, TcpBrokerChannel};
use kafka_controller::broker_channel::{BrokerChannel, ChannelError};
use kafka_controller::context::BrokerInfo;
use kafka_replication::isr::MemoryIsrWriter;
use kafka_replication::log::MemoryLog;
use kafka_wire::ResponseBody;

use broker_common::{leader_and_isr, update_metadata};

async fn start(id: i32) -> Broker<MemoryLog, MemoryIsrWriter> {
    Broker::start(
        BrokerConfig::new(id, "127.0.0.1:0".parse().expect("addr")),
        Box::new(|_| Ok(MemoryLog::new())),
        MemoryIsrWriter::new(),
        Arc::new(|_| None),
    )
    .await
    .expect("broker starts")
}

fn info(id: i32, broker: &Broker<MemoryLog, MemoryIsrWriter>) -> BrokerInfo {
    BrokerInfo::new(id, 1).with_plaintext("127.0.0.1", i32::from(broker.local_addr().port()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k4_control_requests_reach_the_broker_over_tcp_and_reconnect_after_restart() {
    let channel = TcpBrokerChannel::new(100, "PLAINTEXT", Duration::from_secs(5));
    let b1 = start(1).await;
    let target = info(1, &b1);

    let r = channel
        .send(&target, 4, &leader_and_isr(1, 0, &[1]))
        .await
        .expect("answered");
    assert!(
        matches!(r, ResponseBody::LeaderAndIsr(ref l) if l.error_code == 0),
        "{r:?}"
    );
    let r = channel
        .send(
            &target,
            7,
            &update_metadata(1, 0, &[1], &[(1, b1.local_addr())]),
        )
        .await
        .expect("answered");
    assert!(
        matches!(r, ResponseBody::UpdateMetadata(ref u) if u.error_code == 0),
        "{r:?}"
    );

    // The broker goes away: the channel reports it, it does not hang or panic.
    b1.shutdown().await;
    let e = channel
        .send(&target, 4, &leader_and_isr(1, 1, &[1]))
        .await
        .expect_err("broker is down");
    assert!(
        matches!(e, ChannelError::Unreachable { broker: 1, .. }),
        "{e:?}"
    );

    // Restarted on another port: the next send connects to the new listener.
    let b1 = start(1).await;
    let r = channel
        .send(&info(1, &b1), 4, &leader_and_isr(1, 1, &[1]))
        .await
        .expect("answered after restart");
    assert!(
        matches!(r, ResponseBody::LeaderAndIsr(ref l) if l.error_code == 0),
        "{r:?}"
    );
    b1.shutdown().await;
}
