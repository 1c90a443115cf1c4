//! Seeded runs of the Kafka model with every fault on, and the invariants after every step.

use ha_tests::kafka::KafkaConfig;
use ha_tests::runner::{run_seeds, seeds_from_env};

#[test]
fn smoke() {
    let t = std::time::Instant::now();
    let s = run_seeds(
        "smoke",
        KafkaConfig::default(),
        0..seeds_from_env(20),
        false,
    );
    println!("{s}\n{:?}", t.elapsed());
    if let Some(f) = &s.first_failure {
        println!("{f}");
    }
    assert_eq!(s.violations, 0);
}
