//! The `Zab.tla` properties, checked as the simulation runs: integrity, prefix consistency
//! and agreement, total and primary order, primary integrity, and no lost commit.

use super::*;

impl ZabSim {
    /// A primary broadcasts `t`: integrity bookkeeping, and primary integrity at its first
    /// broadcast of the epoch.
    pub(super) fn on_proposed(
        &mut self,
        id: ServerId,
        node: &Node,
        epoch: i64,
        t: &Txn,
    ) -> Result<(), String> {
        self.stats.proposed += 1;
        if t.zxid.epoch() != epoch {
            return Err(self.fail(format!(
                "{} proposed {} outside its epoch {epoch}",
                id.0, t.zxid
            )));
        }
        if let Some((data, by)) = self.proposed.get(&t.zxid) {
            if *data != t.data || *by != id {
                return Err(self.fail(format!(
                    "zxid {} proposed twice: by {} and by {}",
                    t.zxid, by.0, id.0
                )));
            }
        }
        self.proposed.insert(t.zxid, (t.data.clone(), id));
        if let std::collections::btree_map::Entry::Vacant(e) = self.primary_prefix.entry(epoch) {
            // Primary integrity: before its first broadcast, the primary delivered every
            // transaction of an earlier epoch that anyone delivered.
            let last = node.delivered.last().map_or(Zxid::ZERO, |t| t.zxid);
            e.insert(last);
            if let Some(missing) = self.global[node.delivered.len().min(self.global.len())..]
                .iter()
                .find(|g| g.zxid.epoch() < epoch)
            {
                let z = missing.zxid;
                return Err(self.fail(format!(
                    "primary integrity: {} broadcasts in epoch {epoch} without having delivered {z}",
                    id.0
                )));
            }
        }
        Ok(())
    }

    /// The server starts serving: what its state machine holds is delivered. Nothing it
    /// delivered before (even before a crash) may be missing.
    pub(super) fn establish_delivery(
        &mut self,
        id: ServerId,
        node: &mut Node,
    ) -> Result<(), String> {
        let now_applied = node.srv.state_machine().applied.clone();
        let kept = node.delivered.len();
        if now_applied.len() < kept || now_applied[..kept] != node.delivered[..] {
            let lost = node
                .delivered
                .iter()
                .find(|t| !now_applied.contains(t))
                .map(|t| t.zxid.to_string())
                .unwrap_or_default();
            return Err(self.fail(format!(
                "lost committed transaction: server {} delivered {lost} before and no longer has it",
                id.0
            )));
        }
        for t in now_applied.into_iter().skip(kept) {
            self.deliver(id, node, t)?;
        }
        Ok(())
    }

    /// Server `id` delivers `t` (after everything in `node.delivered`).
    pub(super) fn deliver(&mut self, id: ServerId, node: &mut Node, t: Txn) -> Result<(), String> {
        self.stats.delivered += 1;
        // Integrity: only proposed transactions are delivered, with the proposed payload.
        match self.proposed.get(&t.zxid) {
            Some((data, _)) if *data == t.data => {}
            _ => {
                return Err(self.fail(format!(
                    "integrity: {} delivered {} which no primary proposed",
                    id.0, t.zxid
                )))
            }
        }
        if let Some(prev) = node.delivered.last() {
            // Total order (zxid order) and global primary order (epochs never go back).
            if t.zxid <= prev.zxid {
                return Err(self.fail(format!(
                    "total order: {} delivered {} after {}",
                    id.0, t.zxid, prev.zxid
                )));
            }
        }
        // Local primary order: within an epoch, in the primary's order with no gap.
        let prev_same_epoch = node
            .delivered
            .last()
            .filter(|p| p.zxid.epoch() == t.zxid.epoch());
        let expected = prev_same_epoch.map_or(1, |p| p.zxid.counter() + 1);
        if t.zxid.counter() != expected {
            return Err(self.fail(format!(
                "local primary order: {} delivered {} without the epoch's earlier transactions",
                id.0, t.zxid
            )));
        }
        // Prefix consistency / agreement: every delivered sequence is a prefix of one
        // sequence.
        let k = node.delivered.len();
        match self.global.get(k) {
            Some(g) if *g != t => {
                return Err(self.fail(format!(
                "prefix consistency: {} delivered {} at position {k}, others delivered {} there",
                id.0, t.zxid, g.zxid
            )))
            }
            Some(_) => {}
            None => {
                // Primary integrity, the other way round: no primary of a later epoch
                // broadcast without this transaction.
                if let Some((e, last)) = self
                    .primary_prefix
                    .range(t.zxid.epoch() + 1..)
                    .find(|(_, last)| t.zxid > **last)
                {
                    return Err(self.fail(format!(
                        "primary integrity: {} of epoch {} is delivered, but the primary of \
                         epoch {e} broadcast having delivered only up to {last}",
                        t.zxid,
                        t.zxid.epoch()
                    )));
                }
                self.global.push(t.clone());
            }
        }
        node.delivered.push(t);
        Ok(())
    }
}
