//! The demo's narration: a [`Timeline`] of lines stamped with the time since the start and,
//! for each step, how long it took; and [`K7Narration`], naming the K7 steps (docs/behaviour.md
//! numbering) of a reassignment from the writes and control requests observed in order.

use std::time::Instant;

use super::Observed;

/// The demo's narration: each line carries the time since the start and, for a step, how
/// long the step took.
pub(super) struct Timeline<F> {
    t0: Instant,
    step_start: Instant,
    say: F,
}

impl<F: FnMut(&str)> Timeline<F> {
    pub(super) fn new(say: F) -> Self {
        let now = Instant::now();
        Timeline {
            t0: now,
            step_start: now,
            say,
        }
    }

    /// A finished step: prints it with its duration and starts timing the next one.
    pub(super) fn step(&mut self, text: String) {
        let took = self.step_start.elapsed().as_secs_f64();
        (self.say)(&format!(
            "[{:>7.3}s] {text} (took {took:.3}s)",
            self.t0.elapsed().as_secs_f64()
        ));
        self.step_start = Instant::now();
    }

    /// A detail within the current step.
    pub(super) fn detail(&mut self, text: String) {
        (self.say)(&format!(
            "[{:>7.3}s]   {text}",
            self.t0.elapsed().as_secs_f64()
        ));
    }

    /// Restarts the timing of the current step (after a hook ran).
    pub(super) fn restart(&mut self) {
        self.step_start = Instant::now();
    }
}

/// Names the K7 steps (as docs/behaviour.md numbers them) of a partition moving from `oar` led by `old_leader` to
/// `rar`, from the writes and requests observed in order.
pub(super) struct K7Narration<'a> {
    pub(super) oar: &'a [i32],
    pub(super) rar: &'a [i32],
    pub(super) old_leader: i32,
    /// The last partition state seen: (leader, leader epoch, ISR).
    pub(super) last: Option<(i32, i32, Vec<i32>)>,
}

impl K7Narration<'_> {
    fn leaving(&self, b: &i32) -> bool {
        self.oar.contains(b) && !self.rar.contains(b)
    }

    pub(super) fn describe(&mut self, event: &Observed) -> String {
        match event {
            Observed::Assignment {
                replicas,
                adding,
                removing,
            } if !adding.is_empty() || !removing.is_empty() => format!(
                "K7.1  store: AR = OAR+RAR = {replicas:?} (adding {adding:?}, removing {removing:?})"
            ),
            Observed::Assignment { replicas, .. } => {
                format!("K7.10 store: AR = RAR = {replicas:?}")
            }
            Observed::LeaderAndIsr {
                broker,
                leader,
                leader_epoch,
                isr,
            } => {
                let n = if isr.iter().any(|b| self.leaving(b)) {
                    if *leader == self.old_leader {
                        "K7.2  LeaderAndIsr (new epoch)"
                    } else {
                        "K7.7  LeaderAndIsr (new leader)"
                    }
                } else {
                    "K7.8  LeaderAndIsr (OAR-RAR out of the ISR)"
                };
                format!("{n} to broker {broker}: leader {leader}, epoch {leader_epoch}, isr {isr:?}")
            }
            Observed::State {
                leader,
                leader_epoch,
                isr,
            } => {
                let (last_leader, last_epoch, last_isr) = self
                    .last
                    .replace((*leader, *leader_epoch, isr.clone()))
                    .unwrap_or((self.old_leader, -1, Vec::new()));
                let n = if *leader != last_leader {
                    "K7.7  store: new leader from RAR"
                } else if isr.len() < last_isr.len() && !isr.iter().any(|b| self.leaving(b)) {
                    "K7.8  store: OAR-RAR out of the ISR"
                } else if *leader_epoch != last_epoch && isr == &last_isr {
                    "K7.2  store: leader epoch bumped"
                } else if self.rar.iter().all(|b| isr.contains(b)) {
                    "K7.4  store: every RAR replica in the ISR"
                } else if *leader_epoch != last_epoch {
                    "K7.2  store: leader epoch bumped"
                } else {
                    "K7.4  store: ISR grows"
                };
                format!("{n}: leader {leader}, epoch {leader_epoch}, isr {isr:?}")
            }
            Observed::StopReplica {
                broker,
                delete: false,
            } => format!("K7.8  StopReplica to broker {broker} (OfflineReplica)"),
            Observed::StopReplica {
                broker,
                delete: true,
            } => format!("K7.9  StopReplica to broker {broker} with delete (NonExistentReplica)"),
            Observed::RequestDeleted => {
                "K7.11 store: /admin/reassign_partitions deleted".to_owned()
            }
        }
    }
}
