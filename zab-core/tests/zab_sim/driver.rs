//! The driver of one simulated server: carries out the actions of its election, discovery
//! and broadcast cores in the order the tokio peer does, and its log and state-machine
//! actions as the peer's replication layer does.

use super::*;

impl ZabSim {
    /// Carries out every pending action of server `id`, in the tokio driver's order.
    pub(super) fn drain(&mut self, id: ServerId) -> Result<(), String> {
        let Some(mut node) = self.nodes.remove(&id) else {
            return Ok(());
        };
        let r = self.drain_node(id, &mut node);
        self.nodes.insert(id, node);
        r
    }

    /// One crash-plan step; `true` when the node must crash now.
    pub(super) fn crash_due(node: &mut Node, sent: Option<i32>) -> bool {
        match (&mut node.crash_plan, sent) {
            (Some(CrashPlan::AfterSteps(k)), None) => {
                if *k == 0 {
                    return true;
                }
                *k -= 1;
                false
            }
            (Some(CrashPlan::AfterSending(kind)), Some(s)) => *kind == s,
            _ => false,
        }
    }

    pub(super) fn drain_node(&mut self, id: ServerId, node: &mut Node) -> Result<(), String> {
        if !node.alive {
            return Ok(());
        }
        loop {
            if Self::crash_due(node, None) {
                self.stats.mid_action_crashes += 1;
                self.crash_node(id, node, "mid-driver");
                return Ok(());
            }
            if let Some(a) = node.core.poll_action() {
                match a {
                    Action::Send { to, notification } => {
                        let (rng, now, f) = (&mut self.rng, self.now, self.now < self.chaos_until);
                        if self.nodes.contains_key(&to) {
                            self.net.send_datagram_newest(
                                rng,
                                now,
                                f,
                                id,
                                to,
                                Msg::Vote(notification),
                                |m| matches!(m, Msg::Vote(_)),
                            );
                        }
                    }
                    Action::ConnectAll => {}
                    Action::Decided(d) => self.on_decided(id, node, d.state, d.vote.leader)?,
                }
                continue;
            }
            let next = match &mut node.role {
                Role::Looking => None,
                Role::Leader(d) => d.poll_action(),
                Role::Learner(d) => d.poll_action(),
            };
            if let Some(a) = next {
                self.discovery_action(id, node, a)?;
                continue;
            }
            let Some(a) = node.bc.as_mut().and_then(LeaderBroadcast::poll_action) else {
                return Ok(());
            };
            self.broadcast_action(id, node, a)?;
        }
    }

    pub(super) fn send_packet(
        &mut self,
        id: ServerId,
        node: &mut Node,
        to: ServerId,
        p: QuorumPacket,
    ) {
        let (kind, zxid) = (p.kind, p.zxid);
        let stream = match &node.role {
            Role::Leader(_) => node.down.get(&to).copied(),
            Role::Learner(_) => match node.up {
                Some(s) => Some(s),
                // (this node is out of the table while its driver runs: it is alive)
                None if self.nodes.get(&to).is_some_and(|n| n.alive)
                    && self.net.same_side(id, to) =>
                {
                    let s = self.net.open_stream(id, to);
                    node.up = Some(s);
                    Some(s)
                }
                None => {
                    // The connection cannot be opened: the learner retries or gives up.
                    if let Role::Learner(d) = &mut node.role {
                        d.connection_lost(self.now);
                    }
                    None
                }
            },
            Role::Looking => None,
        };
        if let Some(s) = stream {
            if self.faulty() && self.rng.random_bool(self.stream_reset) {
                self.stats.stream_resets += 1;
                self.reset_stream(s, id, false);
                self.note(format!("stream {s} of {} reset", id.0));
                self.on_stream_gone(id, node, s, false);
                return;
            }
            self.note(format!(
                "{} -> {} on {s}: {} {:#x}",
                id.0, to.0, p.kind, p.zxid
            ));
            let (rng, now) = (&mut self.rng, self.now);
            self.net.send_stream(rng, now, s, id, Msg::Packet(p));
        }
        let epoch_ack = kind == packet_type::ACK && Zxid(zxid).counter() == 0;
        if Self::crash_due(node, Some(kind))
            || (epoch_ack && Self::crash_due(node, Some(EPOCH_ACK)))
        {
            node.crash_plan = Some(CrashPlan::AfterSteps(0));
        }
    }

    pub(super) fn discovery_action(
        &mut self,
        id: ServerId,
        node: &mut Node,
        a: DiscoveryAction,
    ) -> Result<(), String> {
        match a {
            DiscoveryAction::Send { to, packet } => {
                if packet.kind == packet_type::NEWLEADER {
                    if let Some(lb) = node.bc.as_mut() {
                        lb.add_learner(to);
                    }
                }
                self.send_packet(id, node, to, packet);
            }
            DiscoveryAction::PersistAcceptedEpoch(e) => node.epochs.accepted_epoch = e,
            DiscoveryAction::PersistCurrentEpoch(e) => {
                node.epochs.current_epoch = e;
                let data = VoteData::new(node.log.last_zxid(), e);
                node.core.set_vote_data(data);
            }
            DiscoveryAction::Close(s) => {
                if let Some(lb) = node.bc.as_mut() {
                    lb.remove_learner(s);
                }
                let stream = match &node.role {
                    Role::Leader(_) => node.down.remove(&s),
                    _ => node.up.take(),
                };
                if let Some(st) = stream {
                    self.close_stream(st, id, false);
                }
            }
            DiscoveryAction::Established { epoch } => {
                node.serving = true;
                if let Role::Leader(d) = &node.role {
                    if let Some(other) = self.leaders.insert(epoch, id) {
                        if other != id {
                            return Err(self.fail(format!(
                                "at most one established leader per epoch: epoch {epoch} by {} and {}",
                                other.0, id.0
                            )));
                        }
                    }
                    self.stats.epochs += 1;
                    let mut lb =
                        LeaderBroadcast::new(id, self.qv.clone(), epoch, node.log.last_zxid());
                    for s in d.sync_sent_learners() {
                        lb.add_learner(s);
                    }
                    node.bc = Some(lb);
                    self.note(format!("{} leads epoch {epoch}", id.0));
                } else {
                    self.note(format!("{} serves epoch {epoch}", id.0));
                }
                node.core.update_election_vote(epoch);
                self.establish_delivery(id, node)?;
            }
            DiscoveryAction::Abandon { reason } => {
                self.note(format!("{} goes LOOKING: {reason}", id.0));
                self.go_looking(id, node);
            }
            DiscoveryAction::Zab(a) => self.carry_out(id, node, a)?,
        }
        Ok(())
    }

    pub(super) fn broadcast_action(
        &mut self,
        id: ServerId,
        node: &mut Node,
        a: BroadcastAction,
    ) -> Result<(), String> {
        match a {
            BroadcastAction::Send { to, packet } => self.send_packet(id, node, to, packet),
            BroadcastAction::Log(txns) => {
                let epoch = node.bc.as_ref().map_or(0, LeaderBroadcast::epoch);
                for t in &txns {
                    self.on_proposed(id, node, epoch, t)?;
                }
                let last = txns.last().map(|t| t.zxid);
                if !self.log_durably(id, node, &txns)? {
                    return Ok(());
                }
                if let (Some(z), Some(lb)) = (last, node.bc.as_mut()) {
                    lb.local_logged(z);
                }
            }
            BroadcastAction::Apply(t) => {
                self.carry_out(id, node, BroadcastAction::Apply(t.clone()))?;
                if let Role::Leader(d) = &mut node.role {
                    d.push_committed(t);
                }
            }
            BroadcastAction::Abandon { reason } => {
                self.note(format!("{} stops leading: {reason}", id.0));
                self.go_looking(id, node);
            }
            other => self.carry_out(id, node, other)?,
        }
        Ok(())
    }

    /// Appends and fsyncs; a crash between the two loses the batch. `false` if it crashed.
    pub(super) fn log_durably(
        &mut self,
        id: ServerId,
        node: &mut Node,
        txns: &[Txn],
    ) -> Result<bool, String> {
        if let Err(e) = node.log.append(txns) {
            return Err(self.fail(format!("server {} cannot log: {e}", id.0)));
        }
        if Self::crash_due(node, None) {
            self.stats.mid_action_crashes += 1;
            self.crash_node(id, node, "between log write and fsync");
            return Ok(false);
        }
        node.log.sync().ok();
        Ok(true)
    }

    /// The log / state-machine half of the driver (`Replication::carry_out`).
    pub(super) fn carry_out(
        &mut self,
        id: ServerId,
        node: &mut Node,
        a: BroadcastAction,
    ) -> Result<(), String> {
        match a {
            BroadcastAction::Log(txns) => {
                // (a crash in between leaves the node dead; the check below skips it)
                self.log_durably(id, node, &txns)?;
            }
            BroadcastAction::Apply(t) if t.zxid > node.sm.last_applied() => {
                node.sm.apply(&t);
                if node.serving {
                    self.deliver(id, node, t)?;
                }
                self.applied(node, 1);
            }
            BroadcastAction::CommitLogged(z) => {
                let logged = node
                    .log
                    .read_after(node.sm.last_applied())
                    .unwrap_or_default();
                let mut n = 0;
                for t in logged.into_iter().take_while(|t| t.zxid <= z) {
                    node.sm.apply(&t);
                    n += 1;
                    if node.serving {
                        self.deliver(id, node, t)?;
                    }
                }
                self.applied(node, n);
            }
            BroadcastAction::Truncate(z) => {
                node.log.truncate(z).ok();
                if node.sm.last_applied() > z {
                    reload(node);
                }
            }
            BroadcastAction::RestoreSnapshot(s) => {
                self.stats.snap_syncs += 1;
                node.log.clear().ok();
                if let Err(e) = node.sm.restore(&s) {
                    return Err(self.fail(format!("server {} cannot restore: {e}", id.0)));
                }
                node.log.save_snapshot(&s).ok();
            }
            _ => {}
        }
        if node.alive {
            let data = VoteData::new(node.log.last_zxid(), node.epochs.current_epoch);
            node.epochs.last_zxid = data.last_zxid.0;
            node.core.set_vote_data(data);
        }
        Ok(())
    }

    /// Every `snap_count` applied transactions, snapshot and compact the log (as the peer's
    /// replication layer does).
    pub(super) fn applied(&mut self, node: &mut Node, n: u64) {
        node.since_snapshot += n;
        // Only while serving: then everything applied is committed. During a sync with a
        // leader that has not established its epoch yet, applied proposals may still be cut
        // by a later leader's TRUNC, and a snapshot would make them permanent.
        if node.serving && node.since_snapshot >= self.snap_count {
            node.since_snapshot = 0;
            let s = node.sm.take_snapshot();
            node.log.save_snapshot(&s).ok();
            node.log.purge(s.zxid).ok();
            self.stats.snapshots += 1;
        }
    }

    pub(super) fn on_decided(
        &mut self,
        id: ServerId,
        node: &mut Node,
        state: ServerState,
        leader: ServerId,
    ) -> Result<(), String> {
        self.stats.elections += 1;
        let now = self.now;
        node.epochs.last_zxid = node.log.last_zxid().0;
        match state {
            ServerState::Leading => {
                self.note(format!("{} decided LEADING", id.0));
                let mut disc =
                    LeaderDiscovery::new(now, id, self.qv.clone(), node.epochs, self.timing);
                let snapshot = node.log.latest_snapshot().ok().flatten();
                let base = match (&snapshot, node.log.first_zxid()) {
                    (Some(s), Some(first)) if first > s.zxid => s.zxid,
                    (Some(s), None) => s.zxid,
                    _ => Zxid::ZERO,
                };
                let committed = node.log.read_after(base).unwrap_or_default();
                disc.set_history(base, committed, snapshot);
                for (from, (stream, p)) in std::mem::take(&mut node.stashed) {
                    if self.net.is_open(stream) {
                        node.down.insert(from, stream);
                        disc.handle_packet(now, from, p);
                    }
                }
                node.role = Role::Leader(Box::new(disc));
            }
            ServerState::Following | ServerState::Observing => {
                self.note(format!("{} decided to follow {}", id.0, leader.0));
                for (_, (stream, _)) in std::mem::take(&mut node.stashed) {
                    self.close_stream(stream, id, true);
                }
                let mut disc = LearnerDiscovery::new(
                    now,
                    id,
                    leader,
                    state == ServerState::Observing,
                    0,
                    node.epochs,
                    self.timing,
                );
                disc.set_broadcast_options(self.options);
                node.role = Role::Learner(Box::new(disc));
            }
            ServerState::Looking => {}
        }
        Ok(())
    }

    pub(super) fn go_looking(&mut self, id: ServerId, node: &mut Node) {
        node.bc = None;
        node.serving = false;
        node.role = Role::Looking;
        let streams: Vec<u64> = node.down.values().copied().chain(node.up.take()).collect();
        node.down.clear();
        for s in streams {
            self.close_stream(s, id, false);
        }
        let data = VoteData::new(node.log.last_zxid(), node.epochs.current_epoch);
        node.core.set_vote_data(data);
        node.core.start(self.now);
    }

    /// A stream of `id` ended (reset or refused by the peer, or reset here).
    pub(super) fn on_stream_gone(
        &mut self,
        _id: ServerId,
        node: &mut Node,
        stream: u64,
        refused: bool,
    ) {
        let now = self.now;
        if node.up == Some(stream) {
            node.up = None;
            if let Role::Learner(d) = &mut node.role {
                if refused {
                    d.refused();
                } else {
                    d.connection_lost(now);
                }
            }
            return;
        }
        let gone: Vec<ServerId> = node
            .down
            .iter()
            .filter(|(_, s)| **s == stream)
            .map(|(l, _)| *l)
            .collect();
        for l in gone {
            node.down.remove(&l);
            if let Some(lb) = node.bc.as_mut() {
                lb.remove_learner(l);
            }
            if let Role::Leader(d) = &mut node.role {
                d.learner_gone(now, l);
            }
        }
        node.stashed.retain(|_, (s, _)| *s != stream);
    }

    pub(super) fn receive(&mut self, env: net::Envelope<Msg>) -> Result<(), String> {
        let (from, to) = (env.from, env.to);
        let now = self.now;
        let Some(mut node) = self.nodes.remove(&to) else {
            return Ok(());
        };
        if let Msg::Reset(s) | Msg::Refused(s) = env.msg {
            self.net.break_stream(s);
        }
        if node.alive {
            match env.msg {
                Msg::Vote(n) => {
                    if self.net.same_side(from, to)
                        && self.nodes.get(&from).is_some_and(|n| n.alive)
                    {
                        node.core.handle_notification(now, from, n);
                    }
                }
                Msg::Reset(s) => self.on_stream_gone(to, &mut node, s, false),
                Msg::Refused(s) => self.on_stream_gone(to, &mut node, s, true),
                Msg::Packet(p) => {
                    let stream = env.stream.unwrap_or(0);
                    self.on_packet(to, &mut node, from, stream, p);
                }
            }
        }
        let r = self.drain_node(to, &mut node);
        self.nodes.insert(to, node);
        r
    }

    pub(super) fn on_packet(
        &mut self,
        id: ServerId,
        node: &mut Node,
        from: ServerId,
        stream: u64,
        p: QuorumPacket,
    ) {
        let now = self.now;
        let opens = p.kind == packet_type::FOLLOWERINFO || p.kind == packet_type::OBSERVERINFO;
        match &mut node.role {
            Role::Leader(d) => {
                if node.down.get(&from) != Some(&stream) {
                    if !opens {
                        return;
                    }
                    // A new connection from this learner replaces its old one.
                    if let Some(old) = node.down.insert(from, stream) {
                        if let Some(lb) = node.bc.as_mut() {
                            lb.remove_learner(from);
                        }
                        d.learner_gone(now, from);
                        self.close_stream(old, id, false);
                    }
                }
                if let Some(lb) = node.bc.as_mut() {
                    lb.handle_packet(from, p.clone());
                }
                if let Role::Leader(d) = &mut node.role {
                    d.handle_packet(now, from, p);
                }
            }
            Role::Learner(_) if opens => self.close_stream(stream, id, true),
            Role::Learner(d) => {
                if node.up == Some(stream) {
                    d.handle_packet(now, from, p);
                }
            }
            Role::Looking => {
                if opens {
                    if let Some((old, _)) = node.stashed.insert(from, (stream, p)) {
                        if old != stream {
                            self.close_stream(old, id, false);
                        }
                    }
                }
            }
        }
    }
}
