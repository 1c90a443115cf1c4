//! Known Kafka data-loss bugs as scripted schedules on the simulator: the 0.8 design loses
//! acknowledged writes and the checker says so; the fixed design does not.

use ha_tests::kafka::check::{Invariant, Violation};
use ha_tests::kafka::cluster::Cluster;
use ha_tests::kafka::{FaultRates, KafkaConfig};
use ha_tests::net::NetConfig;
use kafka_replication::log::MemoryLog;
use kafka_replication::partition::{Legacy, Partition};

/// A quiet cluster: no random faults, a reliable network; the script makes the faults.
fn scripted(cfg: KafkaConfig) -> KafkaConfig {
    KafkaConfig {
        faults: FaultRates::none(),
        net: NetConfig {
            loss: 0.0,
            duplicate: 0.0,
            long_delay: 0.0,
            ..NetConfig::default()
        },
        ..cfg
    }
}

fn report(c: &Cluster, r: &Result<(), Violation>) {
    println!("{:?}", c.stats());
    if let Err(v) = r {
        println!("violation: {v:?}\n{}", c.trace());
    }
}

/// Jepsen 2013: the ISR shrinks to the leader alone (it keeps its coordination session, the
/// followers are cut off), the leader acknowledges writes alone (min.insync.replicas = 1, as
/// in 0.8), then dies; only out-of-sync replicas are left.
fn jepsen_2013(unclean: bool, min_insync_replicas: usize) -> (Cluster, Result<(), Violation>) {
    let cfg = scripted(KafkaConfig {
        unclean_election: unclean,
        min_insync_replicas,
        duration_ms: 3_000,
        ..KafkaConfig::default()
    });
    let mut c = Cluster::new(2013, cfg, true);
    let r = (|| {
        while c.now() < 300 {
            c.step()?;
        }
        c.split(&[0, 1], &[2, 3]);
        while c.now() < 1_000 {
            c.step()?;
        }
        c.crash(1, 2_000);
        c.heal();
        c.run()
    })();
    (c, r)
}

#[test]
fn jepsen_2013_unclean_election_loses_acknowledged_writes_and_the_checker_reports_it() {
    let (c, r) = jepsen_2013(true, 1);
    report(&c, &r);
    assert!(c.stats().unclean_elections >= 1);
    let v = r.expect_err("an unclean election after the ISR shrank to the leader loses data");
    assert!(
        matches!(
            v.invariant,
            Invariant::AckedWriteLost | Invariant::ConsumedRecordLost | Invariant::StrongIsr
        ),
        "{v:?}"
    );
}

#[test]
fn jepsen_2013_without_unclean_election_loses_nothing() {
    let (c, r) = jepsen_2013(false, 1);
    report(&c, &r);
    assert!(r.is_ok());
    assert_eq!(c.stats().unclean_elections, 0);
    assert!(c.stats().acked > 0);
}

#[test]
fn jepsen_2013_with_min_insync_replicas_2_loses_nothing_even_with_unclean_election() {
    // The leader alone may not acknowledge: nothing acked can be lost by the unclean election.
    let (c, r) = jepsen_2013(true, 2);
    report(&c, &r);
    assert!(
        !matches!(
            r,
            Err(Violation {
                invariant: Invariant::AckedWriteLost,
                ..
            })
        ),
        "{r:?}"
    );
}

fn expand_at_hw(p: &mut Partition<MemoryLog>) {
    p.set_legacy(Legacy::default().with_expand_isr_at_high_watermark(true));
}

/// KAFKA-7128, four brokers: broker 3 is down for a while and leaves the ISR, then catches up
/// one batch per fetch; leader 1 dies and broker 2 leads with a high watermark one fetch
/// behind, kept there because broker 4 (in the ISR) is cut off from it. The moment broker 3
/// joins broker 2's ISR while still below the epoch's start offset, broker 2 dies and broker 3
/// is elected — cleanly, from the ISR.
fn kafka_7128(seed: u64, legacy: bool) -> (Cluster, Result<(), Violation>, bool) {
    let cfg = scripted(KafkaConfig {
        brokers: 4,
        duration_ms: 5_000,
        fetch_max_bytes: 1,
        produce_interval_ms: 10,
        replica_lag_time_max_ms: 3_000,
        partition_hook: legacy.then_some(expand_at_hw as fn(&mut Partition<MemoryLog>)),
        ..KafkaConfig::default()
    });
    let mut c = Cluster::new(seed, cfg, true);
    let mut fired = false;
    let r = (|| {
        while c.now() < 300 {
            c.step()?;
        }
        c.crash(3, 900);
        while c.now() < 1_000 {
            c.step()?;
        }
        // Leader 1 dies when broker 2's HW is well behind its own and broker 3 is behind both.
        loop {
            c.step()?;
            let b = c.brokers();
            let hw = |id| {
                b.get(&id)
                    .and_then(|b| b.partition())
                    .map(|p| p.high_watermark())
            };
            let leo3 = b
                .get(&3)
                .and_then(|b| b.partition())
                .map(|p| p.log_end_offset());
            if let (Some(h1), Some(h2), Some(l3)) = (hw(1), hw(2), leo3) {
                if h1 >= h2 + 3 && l3 < h2 {
                    break;
                }
            }
            if c.now() >= 2_000 {
                return Ok(());
            }
        }
        c.crash(1, 100_000);
        c.split(&[2], &[4]);
        while c.now() < cfg.duration_ms {
            c.step()?;
            if fired {
                continue;
            }
            let b = c.brokers();
            let (Some(p2), Some(p3)) = (
                b.get(&2).and_then(|b| b.partition()),
                b.get(&3).and_then(|b| b.partition()),
            ) else {
                continue;
            };
            if p2.is_leader()
                && p2.isr().contains(&3)
                && p2
                    .leader_epoch_start_offset()
                    .is_some_and(|s| p3.log_end_offset() < s)
            {
                fired = true;
                println!(
                    "t={}: broker 3 joined the ISR at LEO {}, epoch start {:?}; broker 2 dies",
                    c.now(),
                    p3.log_end_offset(),
                    p2.leader_epoch_start_offset(),
                );
                c.crash(2, 100_000);
            }
        }
        Ok(())
    })();
    (c, r, fired)
}

/// Seeds tried for the KAFKA-7128 schedule (the delays differ; the schedule does not).
const KAFKA_7128_SEEDS: u64 = 40;

#[test]
fn kafka_7128_isr_expansion_below_the_epoch_start_loses_acknowledged_writes() {
    let mut fired_count = 0;
    for seed in 0..KAFKA_7128_SEEDS {
        let (c, r, fired) = kafka_7128(seed, true);
        fired_count += u64::from(fired);
        if let Err(v) = &r {
            report(&c, &r);
            println!("seed {seed}: caught after {fired_count} early expansions");
            assert!(
                matches!(
                    v.invariant,
                    Invariant::AckedWriteLost
                        | Invariant::ConsumedRecordLost
                        | Invariant::StrongIsr
                ),
                "{v:?}"
            );
            return;
        }
    }
    panic!("no violation in {KAFKA_7128_SEEDS} seeds ({fired_count} early expansions)");
}

#[test]
fn kafka_7128_fixed_rule_never_admits_a_follower_below_the_epoch_start() {
    for seed in 0..KAFKA_7128_SEEDS {
        let (c, r, fired) = kafka_7128(seed, false);
        if fired || r.is_err() {
            report(&c, &r);
        }
        assert!(!fired, "seed {seed}");
        assert!(r.is_ok(), "seed {seed}");
    }
}

/// KIP-966 "last replica standing": the followers die and leave the ISR, the leader alone is
/// the ISR; it loses power before its page cache is written back and comes back with a
/// shorter log; being the whole ISR it is re-elected — cleanly — and acknowledged writes are
/// gone. ZooKeeper-mode Kafka (our reference, 2.8) has this gap; KRaft closes it with the ELR.
#[test]
fn kip_966_last_replica_standing_after_power_loss_loses_acked_writes_and_the_checker_reports_it() {
    let cfg = scripted(KafkaConfig {
        duration_ms: 2_500,
        flush_interval_ms: 10_000,
        ..KafkaConfig::default()
    });
    let mut c = Cluster::new(966, cfg, true);
    let r = (|| {
        while c.now() < 300 {
            c.step()?;
        }
        c.crash(2, 2_000);
        c.crash(3, 2_000);
        while c.now() < 800 {
            c.step()?;
        }
        c.power_loss(1, 900);
        c.run()
    })();
    report(&c, &r);
    assert!(c.stats().acked > 0);
    assert_eq!(c.stats().unclean_elections, 0);
    let v = r.expect_err("the sole ISR member lost acknowledged writes");
    assert!(
        matches!(
            v.invariant,
            Invariant::AckedWriteLost | Invariant::ConsumedRecordLost
        ),
        "{v:?}"
    );
}

/// A leader pauses (a long GC pause) past its session; the controller elects another; the old
/// leader wakes up still believing it leads. Its ISR writes fail the partition-epoch check,
/// fetches at the new epoch fence it, and nothing it accepts is acknowledged.
#[test]
fn paused_leader_wakes_believing_it_leads_and_is_fenced() {
    let cfg = scripted(KafkaConfig {
        duration_ms: 3_000,
        ..KafkaConfig::default()
    });
    let mut c = Cluster::new(1, cfg, true);
    let mut woke_as_zombie = false;
    let r = (|| {
        while c.now() < 500 {
            c.step()?;
        }
        c.pause(1, 1_500);
        while c.now() < cfg.duration_ms {
            c.step()?;
            let store = c.controller_mut().state();
            if let Some(p) = c.brokers().get(&1).and_then(|b| b.partition()) {
                if c.now() >= 1_500 && p.is_leader() && store.leader != 1 {
                    woke_as_zombie = true;
                }
            }
        }
        Ok(())
    })();
    report(&c, &r);
    assert!(r.is_ok());
    assert!(woke_as_zombie, "broker 1 never woke up believing it led");
    assert_ne!(c.controller_mut().state().leader_epoch, 0);
}
