//! Shared by the client-side tests of the ZooKeeper server: which server program a test runs
//! against. Every test body runs once against Apache ZooKeeper 3.8 and once against
//! `ha-zookeeper`, from the same `zoo.cfg` and `myid` (`ha_testkit::ZkEnsembleBuilder`).

use ha_testkit::{ha_zookeeper_binary, require_zookeeper, ServerProgram, ZkEnsembleBuilder};

/// The server program under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    /// Apache ZooKeeper 3.8 (Debian's `zookeeper` package).
    Apache,
    /// zab-coordination's `ha-zookeeper` binary.
    HaZookeeper,
}

/// A builder starting `flavour`'s servers, or `None` when the test must skip (Apache
/// ZooKeeper missing outside CI; under `CI` that is an error). A test against `ha-zookeeper`
/// also needs Apache ZooKeeper's Java client installed (zkCli) or its reference answers, so
/// it checks for ZooKeeper too; a missing `ha-zookeeper` binary is an error.
pub fn builder(
    flavour: Flavour,
    test: &str,
) -> Result<Option<ZkEnsembleBuilder>, ha_testkit::TestkitError> {
    if !require_zookeeper(test)? {
        return Ok(None);
    }
    let b = ha_testkit::ZkEnsemble::builder();
    Ok(Some(match flavour {
        Flavour::Apache => b.program(ServerProgram::ApacheZooKeeper),
        Flavour::HaZookeeper => b.program(ServerProgram::HaZookeeper(ha_zookeeper_binary()?)),
    }))
}
