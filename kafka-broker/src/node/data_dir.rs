//! The guards of a node's data directory, as Kafka's `LogManager.lockLogDirs` and
//! `BrokerMetadataCheckpoint` keep them: an exclusive lock on `<dir>/.lock` held for the
//! node's life (a second process on the same directory is refused), and `meta.properties`
//! recording the broker id and cluster id the directory belongs to (a broker started on
//! another broker's or another cluster's directory is refused).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::NodeError;
use crate::config::properties;

/// The lock file's name (Kafka's `LogManager.LockFile`).
pub const LOCK_FILE: &str = ".lock";

/// The metadata file's name (Kafka's `KafkaServer.brokerMetaPropsFile`).
pub const META_PROPERTIES: &str = "meta.properties";

/// The `meta.properties` version of a ZooKeeper-mode broker.
pub const META_VERSION: u32 = 0;

/// An exclusive lock on a data directory; released when dropped (or the process ends).
#[derive(Debug)]
pub struct DataDirLock {
    dir: PathBuf,
    _file: File,
}

impl DataDirLock {
    /// The locked directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Creates `dir` if missing and locks it exclusively; a directory locked by another process
/// (or another node of this one) is [`NodeError::DataDirInUse`].
pub fn lock(dir: &Path) -> Result<DataDirLock, NodeError> {
    let io = |error| NodeError::DataDir {
        dir: dir.to_path_buf(),
        error,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(LOCK_FILE))
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => Ok(DataDirLock {
            dir: dir.to_path_buf(),
            _file: file,
        }),
        Err(TryLockError::WouldBlock) => Err(NodeError::DataDirInUse {
            dir: dir.to_path_buf(),
        }),
        Err(TryLockError::Error(error)) => Err(io(error)),
    }
}

/// What `meta.properties` records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaProperties {
    /// `version` (0 in ZooKeeper mode).
    pub version: u32,
    /// `broker.id`.
    pub broker_id: i32,
    /// `cluster.id`, absent in files written before clusters had ids.
    pub cluster_id: Option<String>,
}

impl MetaProperties {
    /// Reads `meta.properties` text.
    pub fn parse(path: &Path, text: &str) -> Result<MetaProperties, NodeError> {
        let bad = |reason: String| NodeError::MetaProperties {
            path: path.to_path_buf(),
            reason,
        };
        let props: BTreeMap<String, String> =
            properties::parse(text).map_err(|e| bad(e.to_string()))?;
        let field = |key: &str| props.get(key).map(|v| v.trim().to_owned());
        let version = field("version")
            .ok_or_else(|| bad("no version".into()))?
            .parse::<u32>()
            .map_err(|_| bad("version is not a number".into()))?;
        if version != META_VERSION {
            return Err(bad(format!(
                "version {version} is not supported (a ZooKeeper-mode broker writes {META_VERSION})"
            )));
        }
        let broker_id = field("broker.id")
            .ok_or_else(|| bad("no broker.id".into()))?
            .parse::<i32>()
            .map_err(|_| bad("broker.id is not a number".into()))?;
        Ok(MetaProperties {
            version,
            broker_id,
            cluster_id: field("cluster.id").filter(|c| !c.is_empty()),
        })
    }

    /// The file's text.
    pub fn to_text(&self) -> String {
        let mut out = String::from("#\n");
        if let Some(c) = &self.cluster_id {
            out.push_str(&format!("cluster.id={c}\n"));
        }
        out.push_str(&format!(
            "version={}\nbroker.id={}\n",
            self.version, self.broker_id
        ));
        out
    }
}

/// Checks `<dir>/meta.properties` against `broker_id` and `cluster_id`, writing it when
/// missing (or when it predates cluster ids). A directory of another broker is
/// [`NodeError::InconsistentBrokerId`], of another cluster
/// [`NodeError::InconsistentClusterId`]; the caller holds the directory's lock.
pub fn check_meta_properties(
    lock: &DataDirLock,
    broker_id: i32,
    cluster_id: &str,
) -> Result<(), NodeError> {
    let path = lock.dir().join(META_PROPERTIES);
    let io = |error| NodeError::DataDir {
        dir: lock.dir().to_path_buf(),
        error,
    };
    let stored = match std::fs::read_to_string(&path) {
        Ok(text) => Some(MetaProperties::parse(&path, &text)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io(e)),
    };
    if let Some(stored) = &stored {
        if stored.broker_id != broker_id {
            return Err(NodeError::InconsistentBrokerId {
                dir: lock.dir().to_path_buf(),
                configured: broker_id,
                stored: stored.broker_id,
            });
        }
        match &stored.cluster_id {
            Some(c) if c != cluster_id => {
                return Err(NodeError::InconsistentClusterId {
                    dir: lock.dir().to_path_buf(),
                    cluster: cluster_id.to_owned(),
                    stored: c.clone(),
                })
            }
            Some(_) => return Ok(()),
            None => {}
        }
    }
    let meta = MetaProperties {
        version: META_VERSION,
        broker_id,
        cluster_id: Some(cluster_id.to_owned()),
    };
    // Written aside and renamed: a crash never leaves a half-written file.
    let tmp = lock.dir().join(format!("{META_PROPERTIES}.tmp"));
    let mut f = File::create(&tmp).map_err(io)?;
    f.write_all(meta.to_text().as_bytes()).map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, &path).map_err(io)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_locked_data_dir_is_refused_until_the_lock_is_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = lock(dir.path()).expect("locks");
        assert!(matches!(
            lock(dir.path()),
            Err(NodeError::DataDirInUse { .. })
        ));
        drop(first);
        lock(dir.path()).expect("free again");
    }

    #[test]
    fn meta_properties_is_written_then_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let l = lock(dir.path()).expect("locks");
        check_meta_properties(&l, 3, "clusterA").expect("written");
        let text = std::fs::read_to_string(dir.path().join(META_PROPERTIES)).expect("reads");
        let meta = MetaProperties::parse(Path::new("m"), &text).expect("parses");
        assert_eq!(
            meta,
            MetaProperties {
                version: 0,
                broker_id: 3,
                cluster_id: Some("clusterA".into())
            }
        );
        check_meta_properties(&l, 3, "clusterA").expect("same broker and cluster");
        let e = check_meta_properties(&l, 4, "clusterA").expect_err("another broker's dir");
        assert!(matches!(
            e,
            NodeError::InconsistentBrokerId {
                configured: 4,
                stored: 3,
                ..
            }
        ));
        assert!(e.to_string().contains("broker.id"), "{e}");
        let e = check_meta_properties(&l, 3, "clusterB").expect_err("another cluster's dir");
        assert!(matches!(e, NodeError::InconsistentClusterId { .. }));
        assert!(e.to_string().contains("clusterA"), "{e}");
    }

    #[test]
    fn meta_properties_without_a_cluster_id_gets_one_and_bad_files_are_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(META_PROPERTIES);
        std::fs::write(&path, "#old\nversion=0\nbroker.id=1\n").expect("writes");
        let l = lock(dir.path()).expect("locks");
        check_meta_properties(&l, 1, "c1").expect("cluster id added");
        let text = std::fs::read_to_string(&path).expect("reads");
        assert!(text.contains("cluster.id=c1"), "{text}");
        for bad in [
            "broker.id=1\n",
            "version=1\nbroker.id=1\n",
            "version=0\nbroker.id=x\n",
        ] {
            std::fs::write(&path, bad).expect("writes");
            assert!(
                matches!(
                    check_meta_properties(&l, 1, "c1"),
                    Err(NodeError::MetaProperties { .. })
                ),
                "{bad:?}"
            );
        }
    }
}
