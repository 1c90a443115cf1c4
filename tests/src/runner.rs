//! Running many seeds of a scenario and summing what they did: seeds, steps, faults by kind,
//! network faults, acknowledged and consumed records, violations (with the first failure).

use std::ops::Range;

use crate::kafka::cluster::{run_seed, Failure, FaultCounts};
use crate::kafka::KafkaConfig;
use crate::net::NetStats;

/// The sum over a range of seeds.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// The scenario.
    pub name: String,
    /// Seeds run.
    pub seeds: u64,
    /// Steps simulated.
    pub steps: u64,
    /// Faults injected.
    pub faults: FaultCounts,
    /// Messages lost at random.
    pub lost: u64,
    /// Messages duplicated.
    pub duplicated: u64,
    /// Messages held back by a long delay.
    pub long_delayed: u64,
    /// Messages cut by partitions.
    pub cut: u64,
    /// Records acknowledged with acks=all.
    pub acked: u64,
    /// Records consumed.
    pub consumed: u64,
    /// Unclean elections.
    pub unclean_elections: u64,
    /// Stale LeaderAndIsr requests refused by brokers.
    pub refused_stale: u64,
    /// Seeds that violated an invariant.
    pub violations: u64,
    /// The first failure.
    pub first_failure: Option<Failure>,
}

impl Summary {
    fn add_net(&mut self, n: &NetStats) {
        self.lost += n.lost;
        self.duplicated += n.duplicated;
        self.long_delayed += n.long_delayed;
        self.cut += n.cut;
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let fl = &self.faults;
        write!(
            f,
            "[{}] seeds {} steps {} | faults: crash {} power-loss {} pause {} partition {} one-way {} \
             session-expiry {} controller-failover {} | network: lost {} duplicated {} \
             long-delayed {} cut {} | acked {} consumed {} unclean elections {} \
             stale requests refused {} | violations {}",
            self.name,
            self.seeds,
            self.steps,
            fl.crash,
            fl.power_loss,
            fl.pause,
            fl.partition,
            fl.one_way,
            fl.session_expiry,
            fl.controller_failover,
            self.lost,
            self.duplicated,
            self.long_delayed,
            self.cut,
            self.acked,
            self.consumed,
            self.unclean_elections,
            self.refused_stale,
            self.violations
        )
    }
}

/// Runs `seeds` of `cfg`; with `stop_at_first` it stops at the first violation.
pub fn run_seeds(name: &str, cfg: KafkaConfig, seeds: Range<u64>, stop_at_first: bool) -> Summary {
    let mut s = Summary {
        name: name.to_string(),
        ..Summary::default()
    };
    for seed in seeds {
        let (stats, failure) = run_seed(seed, cfg);
        s.seeds += 1;
        s.steps += stats.steps;
        s.faults.add(&stats.faults);
        s.add_net(&stats.net);
        s.acked += stats.acked;
        s.consumed += stats.consumed;
        s.unclean_elections += stats.unclean_elections;
        s.refused_stale += stats.refused_stale;
        if let Some(f) = failure {
            s.violations += 1;
            if s.first_failure.is_none() {
                s.first_failure = Some(f);
            }
            if stop_at_first {
                break;
            }
        }
    }
    s
}

/// The number of seeds to run: `SIM_SEEDS` if set (and a number), else `default`.
pub fn seeds_from_env(default: u64) -> u64 {
    std::env::var("SIM_SEEDS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// The sum over a range of ZAB ensemble seeds.
#[derive(Debug, Clone, Default)]
pub struct ZabSummary {
    /// The scenario.
    pub name: String,
    /// Seeds run.
    pub seeds: u64,
    /// Events simulated.
    pub steps: u64,
    /// Faults injected.
    pub faults: crate::zab::ensemble::ZabFaultCounts,
    /// Messages lost at random.
    pub lost: u64,
    /// Messages duplicated.
    pub duplicated: u64,
    /// Messages held back by a long delay.
    pub long_delayed: u64,
    /// Messages cut by partitions.
    pub cut: u64,
    /// Election decisions.
    pub decisions: u64,
    /// Epochs established.
    pub epochs: u64,
    /// Transactions committed.
    pub committed: u64,
    /// The longest time to settle after faults stopped, ms.
    pub max_settle_ms: u64,
    /// Seeds that violated an invariant.
    pub violations: u64,
    /// The first failure.
    pub first_failure: Option<crate::zab::ensemble::ZabFailure>,
}

impl std::fmt::Display for ZabSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let fl = &self.faults;
        write!(
            f,
            "[{}] seeds {} steps {} | faults: crash {} pause {} partition {} one-way {} \
             connection-reset {} | network: lost {} duplicated {} long-delayed {} cut {} | \
             decisions {} epochs {} committed {} | longest settle {} ms | violations {}",
            self.name,
            self.seeds,
            self.steps,
            fl.crash,
            fl.pause,
            fl.partition,
            fl.one_way,
            fl.conn_reset,
            self.lost,
            self.duplicated,
            self.long_delayed,
            self.cut,
            self.decisions,
            self.epochs,
            self.committed,
            self.max_settle_ms,
            self.violations
        )
    }
}

/// Runs `seeds` of the ensemble `cfg(seed)` gives; with `stop_at_first` it stops at the first
/// violation.
pub fn run_zab_seeds(
    name: &str,
    cfg: impl Fn(u64) -> crate::zab::ZabConfig,
    seeds: Range<u64>,
    stop_at_first: bool,
) -> ZabSummary {
    let mut s = ZabSummary {
        name: name.to_string(),
        ..ZabSummary::default()
    };
    for seed in seeds {
        let (stats, failure) = crate::zab::ensemble::run_seed(seed, &cfg(seed));
        s.seeds += 1;
        s.steps += stats.steps;
        s.faults.add(&stats.faults);
        s.lost += stats.net.lost;
        s.duplicated += stats.net.duplicated;
        s.long_delayed += stats.net.long_delayed;
        s.cut += stats.net.cut;
        s.decisions += stats.decisions;
        s.epochs += stats.epochs;
        s.committed += stats.committed;
        s.max_settle_ms = s.max_settle_ms.max(stats.settle_ms);
        if let Some(f) = failure {
            s.violations += 1;
            if s.first_failure.is_none() {
                s.first_failure = Some(f);
            }
            if stop_at_first {
                break;
            }
        }
    }
    s
}

/// The seeds to run: `SIM_SEED=S` replays exactly seed `S`; otherwise `0..SIM_SEEDS` (or
/// `0..default`).
pub fn seed_range_from_env(default: u64) -> Range<u64> {
    match std::env::var("SIM_SEED")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        Some(s) => s..s.saturating_add(1),
        None => 0..seeds_from_env(default),
    }
}

/// What every scenario's summary tells: how many seeds ran, how many broke an invariant, and
/// the first failure (seed, invariant and trace), for [`expect_no_violation`].
pub trait SeedSummary: std::fmt::Display {
    /// Seeds run.
    fn seeds(&self) -> u64;
    /// Seeds that violated an invariant.
    fn violations(&self) -> u64;
    /// The first failure, printed.
    fn first_failure(&self) -> Option<String>;
}

impl SeedSummary for Summary {
    fn seeds(&self) -> u64 {
        self.seeds
    }
    fn violations(&self) -> u64 {
        self.violations
    }
    fn first_failure(&self) -> Option<String> {
        self.first_failure.as_ref().map(ToString::to_string)
    }
}

impl SeedSummary for ZabSummary {
    fn seeds(&self) -> u64 {
        self.seeds
    }
    fn violations(&self) -> u64 {
        self.violations
    }
    fn first_failure(&self) -> Option<String> {
        self.first_failure.as_ref().map(ToString::to_string)
    }
}

impl SeedSummary for crate::real::cluster::RealSummary {
    fn seeds(&self) -> u64 {
        self.seeds
    }
    fn violations(&self) -> u64 {
        self.violations
    }
    fn first_failure(&self) -> Option<String> {
        self.first_failure.as_ref().map(ToString::to_string)
    }
}

/// Runs a scenario's seeds with `run`, prints the summary and the seeds per minute, and
/// panics with the first failure if any seed broke an invariant.
pub fn expect_no_violation<S: SeedSummary>(name: &str, run: impl FnOnce() -> S) -> S {
    let t = std::time::Instant::now();
    let s = run();
    let secs = t.elapsed().as_secs_f64();
    println!("{s}");
    println!(
        "[{name}] {:.1} s, {:.0} seeds/minute",
        secs,
        s.seeds() as f64 * 60.0 / secs.max(1e-9)
    );
    if let Some(f) = s.first_failure() {
        panic!(
            "{} of {} seeds violated an invariant; first:\n{f}",
            s.violations(),
            s.seeds()
        );
    }
    s
}
