//! Checkpoint files in Kafka's text format — a version line (`0`), a count line, then one
//! entry per line — written atomically: write a temporary file, fsync it, rename it over the
//! old one, fsync the directory. Used for the leader-epoch cache (`epoch startOffset` lines),
//! the high watermark and the recovery point (one number each).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use crate::epoch_cache::EpochEntry;

/// Why a checkpoint file could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// The file could not be read.
    #[error("checkpoint I/O: {0}")]
    Io(#[from] io::Error),
    /// The file is not a valid checkpoint.
    #[error("malformed checkpoint: {0}")]
    Malformed(&'static str),
}

const VERSION: &str = "0";
/// No checkpoint holds more entries than this (a corrupt count cannot make us allocate).
const MAX_ENTRIES: usize = 1 << 20;

/// Writes `lines` as a checkpoint at `path`, atomically.
pub fn write_atomically(path: &Path, lines: &[String]) -> io::Result<()> {
    let mut text = String::with_capacity(16 + lines.iter().map(|l| l.len() + 1).sum::<usize>());
    text.push_str(VERSION);
    text.push('\n');
    text.push_str(&lines.len().to_string());
    text.push('\n');
    for l in lines {
        text.push_str(l);
        text.push('\n');
    }
    let tmp = path.with_extension("tmp");
    {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        // Make the rename durable; not every platform can open a directory.
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

/// Reads the entry lines of the checkpoint at `path`; `Ok(None)` if there is no file.
pub fn read_lines(path: &Path) -> Result<Option<Vec<String>>, CheckpointError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            return Err(CheckpointError::Malformed("not UTF-8"))
        }
        Err(e) => return Err(e.into()),
    };
    let mut lines = text.lines();
    if lines.next() != Some(VERSION) {
        return Err(CheckpointError::Malformed("unknown version"));
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or(CheckpointError::Malformed("bad count"))?;
    if count > MAX_ENTRIES {
        return Err(CheckpointError::Malformed("count too large"));
    }
    let entries: Vec<String> = lines.map(str::to_owned).collect();
    if entries.len() != count {
        return Err(CheckpointError::Malformed(
            "count does not match the entries",
        ));
    }
    Ok(Some(entries))
}

/// Writes a leader-epoch checkpoint.
pub fn write_epochs(path: &Path, entries: &[EpochEntry]) -> io::Result<()> {
    let lines: Vec<String> = entries
        .iter()
        .map(|e| format!("{} {}", e.epoch, e.start_offset))
        .collect();
    write_atomically(path, &lines)
}

/// Reads a leader-epoch checkpoint.
pub fn read_epochs(path: &Path) -> Result<Option<Vec<EpochEntry>>, CheckpointError> {
    let Some(lines) = read_lines(path)? else {
        return Ok(None);
    };
    lines
        .iter()
        .map(|l| {
            let mut it = l.split_whitespace();
            let epoch = it.next().and_then(|s| s.parse().ok());
            let start = it.next().and_then(|s| s.parse().ok());
            match (epoch, start, it.next()) {
                (Some(epoch), Some(start_offset), None) => Ok(EpochEntry {
                    epoch,
                    start_offset,
                }),
                _ => Err(CheckpointError::Malformed("bad epoch entry")),
            }
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// Writes a one-number checkpoint (high watermark, recovery point).
pub fn write_offset(path: &Path, offset: i64) -> io::Result<()> {
    write_atomically(path, &[offset.to_string()])
}

/// Reads a one-number checkpoint.
pub fn read_offset(path: &Path) -> Result<Option<i64>, CheckpointError> {
    let Some(lines) = read_lines(path)? else {
        return Ok(None);
    };
    match lines.as_slice() {
        [one] => one
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| CheckpointError::Malformed("bad offset")),
        _ => Err(CheckpointError::Malformed("expected one entry")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_round_trip_and_reject_garbage() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let p = dir.path().join("leader-epoch-checkpoint");
        assert!(matches!(read_epochs(&p), Ok(None)));
        let entries = vec![
            EpochEntry {
                epoch: 1,
                start_offset: 0,
            },
            EpochEntry {
                epoch: 4,
                start_offset: 77,
            },
        ];
        write_epochs(&p, &entries).unwrap_or_else(|e| panic!("write: {e}"));
        assert_eq!(read_epochs(&p).ok().flatten(), Some(entries));
        assert_eq!(
            fs::read_to_string(&p).ok().as_deref(),
            Some("0\n2\n1 0\n4 77\n")
        );
        for bad in [
            "",
            "1\n0\n",
            "0\n2\n1 0\n",
            "0\n1\n1 x\n",
            "0\n99999999999\n",
            "\u{0}\u{ff}",
        ] {
            fs::write(&p, bad).unwrap_or_else(|e| panic!("write: {e}"));
            assert!(read_epochs(&p).is_err(), "accepted {bad:?}");
        }
        let hw = dir.path().join("hw");
        write_offset(&hw, 42).unwrap_or_else(|e| panic!("write: {e}"));
        assert_eq!(read_offset(&hw).ok().flatten(), Some(42));
    }
}
