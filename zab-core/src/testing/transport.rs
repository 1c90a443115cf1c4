//! The conformance suite of [`Transport`] (feature `tokio` too): what every transport between
//! peers must do, per the trait's documentation — an endpoint knows its sid, election messages
//! to ourselves are looped back, election messages reach the peer undecoded and a newer one is
//! never overtaken by an older one (per destination only the newest unsent one is kept), quorum
//! packets flow in order both ways on the connection a learner opened with FOLLOWERINFO,
//! closing or refusing that connection is seen by the other side, and a dropped endpoint is
//! seen as its connections going down.
//!
//! Cases wait for what they expect with a generous timeout and skip events they do not look
//! for (connections coming up, a TCP transport re-sending its last election message on a new
//! connection). Run them inside a tokio runtime with the timer enabled.
//!
//! ```
//! use zab_core::testing::transport::{self, TransportBuilder};
//! use zab_core::transport::{MemoryNetwork, MemoryTransport};
//! use zab_core::ServerId;
//!
//! struct Memory;
//! impl TransportBuilder for Memory {
//!     type Transport = MemoryTransport;
//!     fn pair(&self, a: ServerId, b: ServerId)
//!         -> std::io::Result<(MemoryTransport, MemoryTransport)> {
//!         let net = MemoryNetwork::new();
//!         Ok((net.endpoint(a), net.endpoint(b)))
//!     }
//! }
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! transport::test_all(&Memory).await?;
//! # Ok::<(), zab_core::testing::ConformanceError>(())
//! # }).unwrap();
//! ```

use std::time::Duration;

use bytes::Bytes;

use super::{Case, ConformanceError};
use crate::discovery::{packet_type, LearnerInfo, QuorumPacket, LEARNER_PROTOCOL_VERSION};
use crate::notification::Notification;
use crate::transport::{Transport, TransportEvent};
use crate::types::{ServerId, ServerState};
use crate::zxid::Zxid;

/// How long a case waits for an expected event.
const EVENT_TIMEOUT: Duration = Duration::from_secs(20);

/// What the suite needs from a [`Transport`] implementation.
pub trait TransportBuilder {
    /// The transport under test.
    type Transport: Transport;

    /// The endpoints of peers `a` and `b`, which can reach each other, on a network of their
    /// own (nothing else talks to them). Called inside a tokio runtime.
    fn pair(&self, a: ServerId, b: ServerId)
        -> std::io::Result<(Self::Transport, Self::Transport)>;
}

/// Runs every case in order and stops at the first failure.
pub async fn test_all<B: TransportBuilder>(builder: &B) -> Result<(), ConformanceError> {
    an_endpoint_knows_its_sid(builder).await?;
    election_messages_to_ourselves_are_looped_back(builder).await?;
    election_messages_reach_the_peer_undecoded(builder).await?;
    a_newer_election_message_is_never_overtaken(builder).await?;
    quorum_packets_flow_in_order_both_ways(builder).await?;
    closing_a_quorum_connection_is_seen_by_the_peer(builder).await?;
    a_refused_learner_sees_quorum_refused(builder).await?;
    a_dropped_endpoint_is_seen_as_its_connection_going_down(builder).await?;
    Ok(())
}

fn pair<B: TransportBuilder>(
    c: Case,
    builder: &B,
    a: i64,
    b: i64,
) -> Result<(B::Transport, B::Transport), ConformanceError> {
    c.op("build a pair", builder.pair(ServerId(a), ServerId(b)))
}

/// The next event satisfying `want`, skipping every other one.
async fn expect<T: Transport>(
    c: Case,
    t: &mut T,
    what: &str,
    mut want: impl FnMut(&TransportEvent) -> bool,
) -> Result<TransportEvent, ConformanceError> {
    let wait = async {
        loop {
            match t.recv().await {
                Some(ev) if want(&ev) => return Ok(ev),
                Some(_) => continue,
                None => return Err(c.fail(format!("{what}: the transport shut down"))),
            }
        }
    };
    match tokio::time::timeout(EVENT_TIMEOUT, wait).await {
        Ok(r) => r,
        Err(_) => Err(c.fail(format!("{what}: nothing within {EVENT_TIMEOUT:?}"))),
    }
}

/// The next election payload from `from`.
async fn election_from<T: Transport>(
    c: Case,
    t: &mut T,
    from: ServerId,
) -> Result<Bytes, ConformanceError> {
    let what = format!("an election message from {}", from.0);
    match expect(
        c,
        t,
        &what,
        |ev| matches!(ev, TransportEvent::Election { from: f, .. } if *f == from),
    )
    .await?
    {
        TransportEvent::Election { payload, .. } => Ok(payload),
        other => Err(c.fail(format!("{what}: got {other:?}"))),
    }
}

/// The next quorum packet from `from`.
async fn quorum_from<T: Transport>(
    c: Case,
    t: &mut T,
    from: ServerId,
) -> Result<QuorumPacket, ConformanceError> {
    let what = format!("a quorum packet from {}", from.0);
    match expect(
        c,
        t,
        &what,
        |ev| matches!(ev, TransportEvent::Quorum { from: f, .. } if *f == from),
    )
    .await?
    {
        TransportEvent::Quorum { packet, .. } => Ok(packet),
        other => Err(c.fail(format!("{what}: got {other:?}"))),
    }
}

fn follower_info(sid: ServerId) -> QuorumPacket {
    let info = LearnerInfo {
        sid: sid.0,
        protocol_version: LEARNER_PROTOCOL_VERSION,
        config_version: 0,
    };
    QuorumPacket::with_data(packet_type::FOLLOWERINFO, 0, info.encode())
}

fn proposal(i: i64) -> QuorumPacket {
    QuorumPacket::with_data(
        packet_type::PROPOSAL,
        Zxid::new(1, i as u32).0,
        Bytes::from(format!("proposal {i}")),
    )
}

/// Learner `learner` dials `leader` with FOLLOWERINFO; returns once the leader has it.
async fn open_quorum<T: Transport>(
    c: Case,
    learner: &mut T,
    leader: &mut T,
) -> Result<(), ConformanceError> {
    let info = follower_info(learner.my_sid());
    learner.send_quorum(leader.my_sid(), info.clone());
    let got = quorum_from(c, leader, learner.my_sid()).await?;
    c.eq("the learner's first packet", got, info)
}

/// `my_sid` is the sid the endpoint was built for.
pub async fn an_endpoint_knows_its_sid<B: TransportBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("an_endpoint_knows_its_sid");
    let (a, b) = pair(c, builder, 1, 2)?;
    c.eq("sids", (a.my_sid(), b.my_sid()), (ServerId(1), ServerId(2)))
}

/// An election message to our own sid comes back as an event from us, without a peer.
pub async fn election_messages_to_ourselves_are_looped_back<B: TransportBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("election_messages_to_ourselves_are_looped_back");
    let (mut a, _b) = pair(c, builder, 1, 2)?;
    a.send_election(ServerId(1), Bytes::from_static(b"to myself"));
    let got = election_from(c, &mut a, ServerId(1)).await?;
    c.eq("looped-back payload", got, Bytes::from_static(b"to myself"))
}

/// Election messages reach the peer in both directions as the payload sent, even when it
/// does not decode (the receiver decodes); `send_notification` sends the vote's encoding.
pub async fn election_messages_reach_the_peer_undecoded<B: TransportBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("election_messages_reach_the_peer_undecoded");
    let (mut a, mut b) = pair(c, builder, 1, 2)?;
    let garbage = Bytes::from_static(b"\x00\x01not a notification");
    a.send_election(ServerId(2), garbage.clone());
    c.eq(
        "payload at 2",
        election_from(c, &mut b, ServerId(1)).await?,
        garbage,
    )?;
    let vote = Notification {
        state: ServerState::Looking,
        leader: ServerId(2),
        zxid: Zxid::new(1, 7),
        election_epoch: 3,
        peer_epoch: 1,
        version: 2,
        config: None,
    };
    b.send_notification(ServerId(1), &vote);
    let got = election_from(c, &mut a, ServerId(2)).await?;
    c.eq("notification at 1", got, Bytes::from(vote.encode()))
}

/// Of many election messages sent at once to one peer, the newest arrives and none arrives
/// after a newer one.
pub async fn a_newer_election_message_is_never_overtaken<B: TransportBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("a_newer_election_message_is_never_overtaken");
    let (mut a, mut b) = pair(c, builder, 1, 2)?;
    const N: u32 = 50;
    for i in 1..=N {
        b.send_election(ServerId(1), Bytes::from(i.to_be_bytes().to_vec()));
    }
    let mut seen = Vec::new();
    loop {
        let p = election_from(c, &mut a, ServerId(2)).await?;
        let n = <[u8; 4]>::try_from(&p[..])
            .map(u32::from_be_bytes)
            .map_err(|_| c.fail(format!("a payload that was never sent: {p:?}")))?;
        if seen.last().is_some_and(|last| n < *last) {
            return Err(c.fail(format!("message {n} arrived after {seen:?}")));
        }
        seen.push(n);
        if n == N {
            return Ok(());
        }
    }
}

/// A learner opens the quorum connection with FOLLOWERINFO; packets then arrive complete and
/// in order at the leader, and the leader's answers in order at the learner.
pub async fn quorum_packets_flow_in_order_both_ways<B: TransportBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("quorum_packets_flow_in_order_both_ways");
    // The learner has the smaller sid in one pair and the larger in the other.
    for (l, r) in [(1, 2), (2, 1)] {
        let (mut learner, mut leader) = pair(c, builder, l, r)?;
        open_quorum(c, &mut learner, &mut leader).await?;
        for i in 1..=200 {
            learner.send_quorum(ServerId(r), proposal(i));
        }
        for i in 1..=200 {
            let got = quorum_from(c, &mut leader, ServerId(l)).await?;
            c.eq("packet at the leader", got, proposal(i))?;
        }
        for i in 1..=100 {
            leader.send_quorum(ServerId(l), proposal(1000 + i));
        }
        for i in 1..=100 {
            let got = quorum_from(c, &mut learner, ServerId(r)).await?;
            c.eq("packet at the learner", got, proposal(1000 + i))?;
        }
    }
    Ok(())
}

/// `close_quorum` on either side is seen by the other as `QuorumDown`.
pub async fn closing_a_quorum_connection_is_seen_by_the_peer<B: TransportBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("closing_a_quorum_connection_is_seen_by_the_peer");
    let (mut learner, mut leader) = pair(c, builder, 1, 2)?;
    open_quorum(c, &mut learner, &mut leader).await?;
    learner.close_quorum(ServerId(2));
    expect(c, &mut leader, "QuorumDown(1) at the leader", |ev| {
        *ev == TransportEvent::QuorumDown(ServerId(1))
    })
    .await?;
    // The learner comes back; now the leader closes.
    open_quorum(c, &mut learner, &mut leader).await?;
    leader.send_quorum(ServerId(1), proposal(1));
    c.eq(
        "packet at the learner",
        quorum_from(c, &mut learner, ServerId(2)).await?,
        proposal(1),
    )?;
    leader.close_quorum(ServerId(1));
    expect(c, &mut learner, "QuorumDown(2) at the learner", |ev| {
        *ev == TransportEvent::QuorumDown(ServerId(2))
    })
    .await
    .map(|_| ())
}

/// A would-be learner whose connection is refused (the peer does not lead) sees
/// `QuorumRefused`.
pub async fn a_refused_learner_sees_quorum_refused<B: TransportBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("a_refused_learner_sees_quorum_refused");
    let (mut learner, mut peer) = pair(c, builder, 2, 1)?;
    open_quorum(c, &mut learner, &mut peer).await?;
    peer.refuse_quorum(ServerId(2));
    expect(c, &mut learner, "QuorumRefused(1) at the learner", |ev| {
        *ev == TransportEvent::QuorumRefused(ServerId(1))
    })
    .await
    .map(|_| ())
}

/// Dropping an endpoint (its process dies) is seen by the peer as `ConnectionDown`, and as
/// `QuorumDown` for a quorum connection between them.
pub async fn a_dropped_endpoint_is_seen_as_its_connection_going_down<B: TransportBuilder>(
    builder: &B,
) -> Result<(), ConformanceError> {
    let c = Case("a_dropped_endpoint_is_seen_as_its_connection_going_down");
    let (mut a, mut b) = pair(c, builder, 1, 2)?;
    // An election connection, both ways, and a quorum connection from 2 to 1.
    a.send_election(ServerId(2), Bytes::from_static(b"hello"));
    election_from(c, &mut b, ServerId(1)).await?;
    b.send_election(ServerId(1), Bytes::from_static(b"hello"));
    election_from(c, &mut a, ServerId(2)).await?;
    open_quorum(c, &mut b, &mut a).await?;
    drop(b);
    let mut election_down = false;
    let mut quorum_down = false;
    while !(election_down && quorum_down) {
        match expect(c, &mut a, "ConnectionDown(2) and QuorumDown(2)", |ev| {
            matches!(
                ev,
                TransportEvent::ConnectionDown(ServerId(2))
                    | TransportEvent::QuorumDown(ServerId(2))
            )
        })
        .await?
        {
            TransportEvent::ConnectionDown(_) => election_down = true,
            _ => quorum_down = true,
        }
    }
    Ok(())
}
