//! Leader selection (Kafka's `PartitionLeaderElectionAlgorithms`): the four strategies Kafka's controller uses — offline
//! (clean, or unclean when the topic allows it), reassign, preferred and controlled shutdown —
//! as pure functions of the assignment, the current ISR and the broker liveness sets.
//!
//! Every strategy scans the assignment in order (the first replica is the preferred one).
//! The caller turns a [`ElectionResult`] into a new leadership with
//! [`PartitionLeadership::new_leader_and_isr`], which bumps the leader epoch.

use std::collections::BTreeSet;

use crate::context::{BrokerId, ControllerContext, PartitionLeadership, TopicPartition};

/// Which leader-election strategy a partition state transition runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElectionStrategy {
    /// A partition is offline or new (K1.2); `allow_unclean` forces an unclean election
    /// (admin-requested); otherwise the topic's `unclean.leader.election.enable` decides.
    Offline {
        /// Allow unclean election regardless of the topic config.
        allow_unclean: bool,
    },
    /// A reassignment moves the leader onto the target replicas (K7 step 7).
    Reassign,
    /// The preferred replica takes the leadership back (admin path and auto-rebalance).
    Preferred,
    /// A broker in controlled shutdown gives up its leaderships.
    ControlledShutdown,
}

/// The inputs of one election.
#[derive(Clone, Copy, Debug)]
pub struct ElectionInput<'a> {
    /// The assignment (RS), in preference order.
    pub assignment: &'a [BrokerId],
    /// The target replicas of a reassignment (TRS); equal to `assignment` otherwise.
    pub target_replicas: &'a [BrokerId],
    /// The current ISR.
    pub isr: &'a [BrokerId],
    /// Live brokers, not counting those shutting down (`liveBrokerIds`).
    pub live: &'a BTreeSet<BrokerId>,
    /// Brokers in controlled shutdown (live, but leaving).
    pub shutting_down: &'a BTreeSet<BrokerId>,
    /// The topic's `unclean.leader.election.enable`.
    pub unclean_enabled: bool,
}

/// The outcome of a successful election.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElectionResult {
    /// The new leader.
    pub leader: BrokerId,
    /// The new ISR (never empty: it holds the leader).
    pub isr: Vec<BrokerId>,
    /// The brokers that get a LeaderAndIsr for the new state.
    pub recipients: Vec<BrokerId>,
    /// True when the leader was not in the ISR (data may be lost).
    pub unclean: bool,
}

/// K1.2, offline strategy: the first replica in AR that is live and in the ISR; if none and
/// unclean election is allowed, the first live replica in AR, which then forms the ISR
/// alone. The new ISR is the live part of the old ISR. Recipients: the live replicas of AR.
pub fn offline_leader(input: &ElectionInput<'_>, allow_unclean: bool) -> Option<ElectionResult> {
    let live_replicas: Vec<BrokerId> = input
        .assignment
        .iter()
        .copied()
        .filter(|r| input.live.contains(r))
        .collect();
    let clean = live_replicas
        .iter()
        .copied()
        .find(|r| input.isr.contains(r));
    let (leader, unclean) = match clean {
        Some(l) => (l, false),
        None if allow_unclean || input.unclean_enabled => (live_replicas.first().copied()?, true),
        None => return None,
    };
    let isr = if input.isr.contains(&leader) {
        input
            .isr
            .iter()
            .copied()
            .filter(|r| input.live.contains(r))
            .collect()
    } else {
        vec![leader]
    };
    Some(ElectionResult {
        leader,
        isr,
        recipients: live_replicas,
        unclean,
    })
}

/// K7 step 7, reassign strategy: the first target replica that is live and in the ISR; the
/// ISR is unchanged; all target replicas are told.
pub fn reassign_leader(input: &ElectionInput<'_>) -> Option<ElectionResult> {
    let leader = input
        .target_replicas
        .iter()
        .copied()
        .find(|r| input.live.contains(r) && input.isr.contains(r))?;
    Some(ElectionResult {
        leader,
        isr: input.isr.to_vec(),
        recipients: input.target_replicas.to_vec(),
        unclean: false,
    })
}

/// Preferred strategy: the head of AR only, if it is live and in the ISR; the ISR is
/// unchanged; all of AR is told.
pub fn preferred_leader(input: &ElectionInput<'_>) -> Option<ElectionResult> {
    let leader = input
        .assignment
        .first()
        .copied()
        .filter(|r| input.live.contains(r) && input.isr.contains(r))?;
    Some(ElectionResult {
        leader,
        isr: input.isr.to_vec(),
        recipients: input.assignment.to_vec(),
        unclean: false,
    })
}

/// Controlled-shutdown strategy: the first replica of AR that is live or shutting down, in
/// the ISR and not shutting down; the new ISR drops every shutting-down broker; recipients
/// are the live-or-shutting-down replicas.
pub fn controlled_shutdown_leader(input: &ElectionInput<'_>) -> Option<ElectionResult> {
    let up = |r: &BrokerId| input.live.contains(r) || input.shutting_down.contains(r);
    let recipients: Vec<BrokerId> = input.assignment.iter().copied().filter(up).collect();
    let leader = recipients
        .iter()
        .copied()
        .find(|r| input.isr.contains(r) && !input.shutting_down.contains(r))?;
    let isr = input
        .isr
        .iter()
        .copied()
        .filter(|r| !input.shutting_down.contains(r))
        .collect();
    Some(ElectionResult {
        leader,
        isr,
        recipients,
        unclean: false,
    })
}

/// Runs `strategy` on `input`. `None` means no leader could be elected.
pub fn elect(strategy: ElectionStrategy, input: &ElectionInput<'_>) -> Option<ElectionResult> {
    match strategy {
        ElectionStrategy::Offline { allow_unclean } => offline_leader(input, allow_unclean),
        ElectionStrategy::Reassign => reassign_leader(input),
        ElectionStrategy::Preferred => preferred_leader(input),
        ElectionStrategy::ControlledShutdown => controlled_shutdown_leader(input),
    }
}

/// Runs `strategy` for `tp` against the context's assignment and broker sets, with `current`
/// the leadership just read from the store.
pub fn elect_in_context(
    ctx: &ControllerContext,
    tp: &TopicPartition,
    current: &PartitionLeadership,
    strategy: ElectionStrategy,
) -> Option<ElectionResult> {
    let assignment = ctx.partition_assignment(tp)?;
    let target = assignment.target_replicas();
    // Replicas on failed log directories cannot lead (Kafka's `isReplicaOnline`).
    let live = ctx.live_broker_ids_for(tp);
    let input = ElectionInput {
        assignment: &assignment.replicas,
        target_replicas: &target,
        isr: &current.isr,
        live: &live,
        shutting_down: ctx.shutting_down_broker_ids(),
        unclean_enabled: ctx.unclean_leader_election_enabled(&tp.topic),
    };
    elect(strategy, &input)
}

/// Why a controlled-shutdown request is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ControlledShutdownError {
    /// The broker is not registered.
    #[error("broker {0} is not live")]
    BrokerNotAvailable(BrokerId),
    /// The request's broker epoch is older than the registered one (KIP-380).
    #[error("stale broker epoch {got} for broker {broker}, current {current}")]
    StaleBrokerEpoch {
        /// The broker.
        broker: BrokerId,
        /// The epoch in the request.
        got: i64,
        /// The registered epoch.
        current: i64,
    },
}

/// The partitions a controlled shutdown acts on: those with more than one replica, with
/// leadership, of topics not being deleted, split by whether the broker leads them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[must_use = "the plan names the elections and ISR removals still to perform"]
pub struct ControlledShutdownPlan {
    /// Move these to Online with [`ElectionStrategy::ControlledShutdown`].
    pub led: Vec<TopicPartition>,
    /// Send StopReplica (no delete) to the broker for these, then move its replica to
    /// OfflineReplica (ISR shrink).
    pub followed: Vec<TopicPartition>,
}

/// `doControlledShutdown` steps 1–3: checks the request (a broker epoch of -1 skips the
/// epoch check), marks the broker as shutting down and returns what to move.
pub fn begin_controlled_shutdown(
    ctx: &mut ControllerContext,
    broker: BrokerId,
    broker_epoch: i64,
) -> Result<ControlledShutdownPlan, ControlledShutdownError> {
    let current = ctx
        .broker(broker)
        .map(|b| b.epoch)
        .ok_or(ControlledShutdownError::BrokerNotAvailable(broker))?;
    if broker_epoch != -1 && broker_epoch < current {
        return Err(ControlledShutdownError::StaleBrokerEpoch {
            broker,
            got: broker_epoch,
            current,
        });
    }
    ctx.mark_shutting_down(broker);
    let mut plan = ControlledShutdownPlan::default();
    for tp in ctx.partitions_on_broker(broker) {
        if ctx.partition_replicas(&tp).len() <= 1 || ctx.is_topic_queued_for_deletion(&tp.topic) {
            continue;
        }
        match ctx.leadership(&tp) {
            Some(l) if l.leader == broker => plan.led.push(tp),
            Some(_) => plan.followed.push(tp),
            None => {}
        }
    }
    Ok(plan)
}

/// `doControlledShutdown` step 5: the replicated partitions the broker still leads; the broker
/// retries until this is empty.
pub fn partitions_still_led(ctx: &ControllerContext, broker: BrokerId) -> Vec<TopicPartition> {
    ctx.partitions_on_broker(broker)
        .into_iter()
        .filter(|tp| {
            !ctx.is_topic_queued_for_deletion(&tp.topic)
                && ctx.partition_replicas(tp).len() > 1
                && ctx.leadership(tp).is_some_and(|l| l.leader == broker)
        })
        .collect()
}
