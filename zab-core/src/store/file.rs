//! `FileElectionStore`: the election state in one small checksummed text file, replaced
//! atomically (write a temporary file, fsync it, rename it over the old one, fsync the directory).

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use async_trait::async_trait;

use super::{ElectionStore, PersistedEpochs, StoreError};

const HEADER: &str = "zab-core election state v1";
const FILE_NAME: &str = "election-state";
const TMP_NAME: &str = "election-state.tmp";
/// A valid file is well under this; anything longer is corrupt (bounded read).
const MAX_FILE_LEN: u64 = 1024;

/// An [`ElectionStore`] in a directory, as the file `election-state`:
///
/// ```text
/// zab-core election state v1
/// currentEpoch=3
/// acceptedEpoch=4
/// lastZxid=12884901890
/// crc32c=1a2b3c4d
/// ```
///
/// The checksum covers every byte before the `crc32c=` line. A missing file gives
/// [`StoreError::Missing`] and a damaged one [`StoreError::Corrupt`]: the state is never
/// silently reset. A new server starts with [`FileElectionStore::create_fresh`].
///
/// The file is tiny; reads and writes are done synchronously inside the async methods.
#[derive(Debug)]
pub struct FileElectionStore {
    dir: PathBuf,
    // Serialises writers of this process so two saves never interleave on the temp file.
    write_lock: Mutex<()>,
}

impl FileElectionStore {
    /// Opens the store in `dir`, checking that its state file exists and is intact.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let store = Self {
            dir: dir.into(),
            write_lock: Mutex::new(()),
        };
        store.read_state()?;
        Ok(store)
    }

    /// Initialises a fresh store in `dir` (created if needed) with all values zero, as a new
    /// server has. Refuses with [`StoreError::AlreadyExists`] if a state file is already there.
    pub fn create_fresh(dir: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(|source| StoreError::Io {
            path: dir.clone(),
            source,
        })?;
        let store = Self {
            dir,
            write_lock: Mutex::new(()),
        };
        let path = store.path();
        if path.exists() {
            return Err(StoreError::AlreadyExists { path });
        }
        store.write_state(PersistedEpochs::default())?;
        Ok(store)
    }

    /// The path of the state file.
    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }

    fn read_state(&self) -> Result<PersistedEpochs, StoreError> {
        let path = self.path();
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::Missing { path })
            }
            Err(source) => return Err(StoreError::Io { path, source }),
        };
        let mut raw = Vec::new();
        file.take(MAX_FILE_LEN + 1)
            .read_to_end(&mut raw)
            .map_err(|source| StoreError::Io {
                path: path.clone(),
                source,
            })?;
        parse(&raw).map_err(|reason| StoreError::Corrupt { path, reason })
    }

    fn write_state(&self, state: PersistedEpochs) -> Result<(), StoreError> {
        let _guard = self
            .write_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let tmp = self.dir.join(TMP_NAME);
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StoreError::Io { path, source }
        };
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(io(&tmp))?;
        f.write_all(render(state).as_bytes()).map_err(io(&tmp))?;
        f.sync_all().map_err(io(&tmp))?;
        drop(f);
        let path = self.path();
        fs::rename(&tmp, &path).map_err(io(&path))?;
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io(&self.dir))?;
        Ok(())
    }
}

fn render(s: PersistedEpochs) -> String {
    let body = format!(
        "{HEADER}\ncurrentEpoch={}\nacceptedEpoch={}\nlastZxid={}\n",
        s.current_epoch, s.accepted_epoch, s.last_zxid
    );
    let crc = crc32c::crc32c(body.as_bytes());
    format!("{body}crc32c={crc:08x}\n")
}

fn parse(raw: &[u8]) -> Result<PersistedEpochs, String> {
    if raw.len() as u64 > MAX_FILE_LEN {
        return Err("file too long".into());
    }
    let text = std::str::from_utf8(raw).map_err(|_| "not UTF-8".to_string())?;
    let crc_at = text
        .rfind("crc32c=")
        .ok_or_else(|| "no checksum line".to_string())?;
    let (body, crc_line) = text.split_at(crc_at);
    let want = crc_line
        .trim_end_matches('\n')
        .strip_prefix("crc32c=")
        .and_then(|h| u32::from_str_radix(h, 16).ok())
        .ok_or_else(|| "bad checksum line".to_string())?;
    if crc32c::crc32c(body.as_bytes()) != want {
        return Err("checksum mismatch".into());
    }
    let mut lines = body.lines();
    if lines.next() != Some(HEADER) {
        return Err("unknown header".into());
    }
    let mut field = |name: &str| -> Result<i64, String> {
        lines
            .next()
            .and_then(|l| l.strip_prefix(name))
            .and_then(|l| l.strip_prefix('='))
            .and_then(|v| v.parse::<i64>().ok())
            .ok_or_else(|| format!("bad or missing field {name}"))
    };
    let current_epoch = field("currentEpoch")?;
    let accepted_epoch = field("acceptedEpoch")?;
    let last_zxid = field("lastZxid")?;
    if lines.next().is_some() {
        return Err("trailing data".into());
    }
    Ok(PersistedEpochs {
        current_epoch,
        accepted_epoch,
        last_zxid,
    })
}

#[async_trait]
impl ElectionStore for FileElectionStore {
    async fn load(&self) -> Result<PersistedEpochs, StoreError> {
        self.read_state()
    }

    async fn save(&self, state: PersistedEpochs) -> Result<(), StoreError> {
        self.write_state(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_then_parse_round_trips() {
        let s = PersistedEpochs {
            current_epoch: 3,
            accepted_epoch: 4,
            last_zxid: (3 << 32) | 2,
        };
        assert_eq!(parse(render(s).as_bytes()), Ok(s));
    }

    #[test]
    fn a_flipped_digit_is_caught_by_the_checksum() {
        let text = render(PersistedEpochs::default()).replace("acceptedEpoch=0", "acceptedEpoch=9");
        assert_eq!(parse(text.as_bytes()), Err("checksum mismatch".to_string()));
    }
}
