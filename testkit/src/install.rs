//! Locating the installed ZooKeeper (Debian's `zookeeper` package) and a Java runtime, and the
//! policy for tests when they are missing: fail under `CI`, skip with a notice otherwise.

use std::path::{Path, PathBuf};

use crate::error::TestkitError;

/// Environment variable overriding the Java executable.
pub const JAVA_ENV: &str = "HA_TESTKIT_JAVA";
/// Environment variable overriding the ZooKeeper server classpath (`:`-separated).
pub const CLASSPATH_ENV: &str = "HA_TESTKIT_ZK_CLASSPATH";

/// The Debian package's server jar; its manifest's `Class-Path` names the dependencies.
const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";
/// An SLF4J binding printing to stderr, so the server log lands in the log file we capture.
const SLF4J_SIMPLE_JAR: &str = "/usr/share/java/slf4j-simple.jar";

/// Where the Java runtime and the ZooKeeper classes are.
#[derive(Debug, Clone)]
pub struct Installation {
    /// The `java` executable.
    pub java: PathBuf,
    /// The classpath for `org.apache.zookeeper.server.quorum.QuorumPeerMain`.
    pub classpath: String,
}

impl Installation {
    /// Finds Java and ZooKeeper, honouring [`JAVA_ENV`] and [`CLASSPATH_ENV`], then `JAVA_HOME`,
    /// then `/usr/bin/java` and the Debian jar locations.
    pub fn locate() -> Result<Installation, TestkitError> {
        let java = match std::env::var_os(JAVA_ENV) {
            Some(j) => PathBuf::from(j),
            None => {
                let from_home =
                    std::env::var_os("JAVA_HOME").map(|h| Path::new(&h).join("bin").join("java"));
                match from_home {
                    Some(p) if p.is_file() => p,
                    _ => PathBuf::from("/usr/bin/java"),
                }
            }
        };
        if !java.is_file() {
            return Err(TestkitError::ZooKeeperMissing(format!(
                "no Java runtime at {}",
                java.display()
            )));
        }
        let classpath = match std::env::var(CLASSPATH_ENV) {
            Ok(cp) => cp,
            Err(_) => {
                if !Path::new(ZOOKEEPER_JAR).is_file() {
                    return Err(TestkitError::ZooKeeperMissing(format!(
                        "{ZOOKEEPER_JAR} not found"
                    )));
                }
                let mut cp = ZOOKEEPER_JAR.to_string();
                if Path::new(SLF4J_SIMPLE_JAR).is_file() {
                    cp.push(':');
                    cp.push_str(SLF4J_SIMPLE_JAR);
                }
                cp
            }
        };
        Ok(Installation { java, classpath })
    }
}

/// True when a Java runtime and the ZooKeeper server jar are installed.
pub fn zookeeper_available() -> bool {
    Installation::locate().is_ok()
}

/// The rule for every test that needs ZooKeeper.
///
/// - ZooKeeper installed: `Ok(true)`, run the test.
/// - Missing and the `CI` environment variable set: `Err(ZooKeeperMissing)`, so the test fails
///   (CI must never silently skip the real-ZooKeeper tests).
/// - Missing otherwise: prints a notice naming `test` and returns `Ok(false)`; the test returns
///   early.
///
/// ```no_run
/// # fn main() -> Result<(), ha_testkit::TestkitError> {
/// if !ha_testkit::require_zookeeper("my_test")? {
///     return Ok(());
/// }
/// // ... start servers with ha_testkit::ZkEnsemble ...
/// # Ok(())
/// # }
/// ```
pub fn require_zookeeper(test: &str) -> Result<bool, TestkitError> {
    match Installation::locate() {
        Ok(_) => Ok(true),
        Err(e) if std::env::var_os("CI").is_some() => Err(e),
        Err(e) => {
            eprintln!("SKIPPED {test}: {e} (set CI to make this a failure)");
            Ok(false)
        }
    }
}

/// Environment variable naming the `ha-zookeeper` binary to start.
pub const HA_ZOOKEEPER_ENV: &str = "HA_ZOOKEEPER_BIN";

/// The `ha-zookeeper` binary (zab-coordination's ZooKeeper server): [`HA_ZOOKEEPER_ENV`] if
/// set, else `ha-zookeeper` in the cargo target folder the running test binary was built in
/// (`target/<profile>/`), else in the other profile's folder. Fails, naming the command that
/// builds it, when there is none: `cargo build -p zab-coordination --bin ha-zookeeper`.
pub fn ha_zookeeper_binary() -> Result<PathBuf, TestkitError> {
    if let Some(p) = std::env::var_os(HA_ZOOKEEPER_ENV) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(TestkitError::InvalidConfig(format!(
                "{HA_ZOOKEEPER_ENV}={} is not a file",
                p.display()
            )))
        };
    }
    let exe = std::env::current_exe().map_err(|e| TestkitError::io("find the test binary", e))?;
    // target/<profile>/deps/<test> or target/<profile>/<example>
    let mut candidates = Vec::new();
    for dir in exe.ancestors().skip(1).take(3) {
        candidates.push(dir.join("ha-zookeeper"));
        if let Some(target) = dir.parent() {
            for profile in ["release", "debug"] {
                candidates.push(target.join(profile).join("ha-zookeeper"));
            }
        }
    }
    candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| {
        TestkitError::InvalidConfig(
            "no ha-zookeeper binary next to the test binary: build it with \
             `cargo build -p zab-coordination --bin ha-zookeeper` or set HA_ZOOKEEPER_BIN"
                .into(),
        )
    })
}
