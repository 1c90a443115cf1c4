//! The simulated network around each server: carries the network half of the actions the
//! shared harness (`SimServer`) hands back, delivers messages to the core, and records what
//! the invariants need. The composition of the cores is `PeerCore`'s, as in production.

use super::*;

impl ZabSim {
    /// Carries out every pending action of server `id`.
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
            let now = self.now;
            let carried = match node.srv.carry_out_next(now) {
                Ok(c) => c,
                Err(e) => return Err(self.fail(format!("server {}: {e}", id.0))),
            };
            let Some(c) = carried else {
                // Nothing left: the group of appends is synced (a crash may come first).
                if !node.srv.has_unsynced() {
                    return Ok(());
                }
                if Self::crash_due(node, None) {
                    self.stats.mid_action_crashes += 1;
                    self.crash_node(id, node, "between log write and fsync");
                    return Ok(());
                }
                if let Err(e) = node.srv.flush(now) {
                    return Err(self.fail(format!("server {} cannot sync: {e}", id.0)));
                }
                continue;
            };
            self.on_carried(id, node, c.action)?;
            for t in c.applied {
                if node.serving() {
                    self.deliver(id, node, t)?;
                }
            }
            if !node.alive {
                return Ok(());
            }
        }
    }

    /// The network half of an action, and what the invariants record of it.
    fn on_carried(&mut self, id: ServerId, node: &mut Node, a: PeerAction) -> Result<(), String> {
        let status = node.srv.status();
        match a {
            PeerAction::SendNotification { to, notification } => {
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
            PeerAction::Send { to, packet } => self.send_packet(id, node, to, packet),
            PeerAction::Close(s) => self.close_conn(id, node, s, false),
            PeerAction::Refuse(s) => self.close_conn(id, node, s, true),
            PeerAction::Append(txns) => {
                if let (ServerState::Leading, Some(epoch)) = (status.state, status.epoch) {
                    for t in &txns {
                        self.on_proposed(id, node, epoch, t)?;
                    }
                }
            }
            PeerAction::RestoreSnapshot(_) => self.stats.snap_syncs += 1,
            PeerAction::ReadLog { max_bytes: 0, .. } => self.stats.log_probes += 1,
            PeerAction::ReadLog { .. } => self.stats.log_chunks += 1,
            PeerAction::TakeSnapshot => self.stats.snapshots += 1,
            PeerAction::Status(s) => match (s.state, s.leader, s.epoch) {
                (ServerState::Looking, _, _) => self.note(format!("{} goes LOOKING", id.0)),
                (state, Some(leader), None) => {
                    self.stats.elections += 1;
                    self.note(format!("{} decided {state} (leader {})", id.0, leader.0));
                }
                (state, _, Some(epoch)) => {
                    if state == ServerState::Leading {
                        if let Some(other) = self.leaders.insert(epoch, id) {
                            if other != id {
                                return Err(self.fail(format!(
                                    "at most one established leader per epoch: epoch {epoch} by {} and {}",
                                    other.0, id.0
                                )));
                            }
                        }
                        self.stats.epochs += 1;
                        self.note(format!("{} leads epoch {epoch}", id.0));
                    } else {
                        self.note(format!("{} serves epoch {epoch}", id.0));
                    }
                    self.establish_delivery(id, node)?;
                }
                (_, None, None) => {}
            },
            // Storage was carried out by the harness; the rest needs no network.
            _ => {}
        }
        Ok(())
    }

    /// Closes (or refuses) this node's stream with `peer`, if it has one.
    fn close_conn(&mut self, id: ServerId, node: &mut Node, peer: ServerId, refused: bool) {
        if let Some(s) = node.conns.remove(&peer) {
            node.closed.insert(s);
            self.close_stream(s, id, refused);
        }
    }

    /// Sends on the stream with `to`, opening one if there is none (as the transports do);
    /// if it cannot be opened, the core hears that the connection is down.
    pub(super) fn send_packet(
        &mut self,
        id: ServerId,
        node: &mut Node,
        to: ServerId,
        p: QuorumPacket,
    ) {
        let (kind, zxid) = (p.kind, p.zxid);
        let stream = match node.conns.get(&to) {
            Some(s) => Some(*s),
            // (this node is out of the table while its driver runs: it is alive)
            None if self.nodes.get(&to).is_some_and(|n| n.alive) && self.net.same_side(id, to) => {
                let s = self.net.open_stream(id, to);
                node.conns.insert(to, s);
                Some(s)
            }
            None => {
                node.srv.handle(self.now, PeerInput::QuorumDown(to));
                None
            }
        };
        if let Some(s) = stream {
            if self.faulty() && self.rng.random_bool(self.stream_reset) {
                self.stats.stream_resets += 1;
                self.reset_stream(s, id, false);
                self.note(format!("stream {s} of {} reset", id.0));
                node.conns.remove(&to);
                node.closed.insert(s);
                node.srv.handle(self.now, PeerInput::QuorumDown(to));
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
                        let input = PeerInput::Notification {
                            from,
                            notification: n,
                        };
                        node.srv.handle(now, input);
                    }
                }
                Msg::Reset(s) | Msg::Refused(s) if node.conns.get(&from) == Some(&s) => {
                    node.conns.remove(&from);
                    let input = if matches!(env.msg, Msg::Refused(_)) {
                        PeerInput::QuorumRefused(from)
                    } else {
                        PeerInput::QuorumDown(from)
                    };
                    node.srv.handle(now, input);
                }
                Msg::Reset(_) | Msg::Refused(_) => {}
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

    /// A packet on `stream`: a stream the node does not know yet is a new connection from
    /// `from`, which replaces the old one (as the transports accept it).
    pub(super) fn on_packet(
        &mut self,
        id: ServerId,
        node: &mut Node,
        from: ServerId,
        stream: u64,
        p: QuorumPacket,
    ) {
        let now = self.now;
        if node.closed.contains(&stream) {
            return;
        }
        if node.conns.get(&from) != Some(&stream) {
            if let Some(old) = node.conns.insert(from, stream) {
                node.closed.insert(old);
                self.close_stream(old, id, false);
                node.srv.handle(now, PeerInput::QuorumDown(from));
            }
        }
        node.srv.handle(now, PeerInput::Packet { from, packet: p });
    }
}
