//! [`Notification`]: the election message exchanged on the election port, and its wire codec
//! (big-endian, ZooKeeper 3.8's `buildMsg` / `WorkerReceiver` layouts).
//!
//! | offset | type | field |
//! |---|---|---|
//! | 0 | i32 | sender state (0 LOOKING, 1 FOLLOWING, 2 LEADING, 3 OBSERVING) |
//! | 4 | i64 | proposed leader |
//! | 12 | i64 | proposed leader's zxid |
//! | 20 | i64 | election epoch (round) |
//! | 28 | i64 | peer epoch |
//! | 36 | i32 | version (2) |
//! | 40 | i32 | config length |
//! | 44 | bytes | UTF-8 config string |
//!
//! Decoding accepts the older layouts exactly as ZooKeeper does: a 28-byte message has no peer
//! epoch (it is taken from the zxid), a 40-byte message is version 0 without config. Unlike
//! ZooKeeper 3.8.0 — whose receiver thread dies on a well-framed version-2 message with config
//! length 0 — an empty, non-UTF-8 or unparsable config is simply "no config".

use crate::types::{ServerId, ServerState};
use crate::vote::{Candidate, Vote};
use crate::zxid::Zxid;

/// The notification format version this crate writes (`Notification.CURRENTVERSION`).
pub const CURRENT_VERSION: i32 = 2;
/// The shortest message ZooKeeper accepts (state, leader, zxid, round).
pub const MIN_LEN: usize = 28;
/// Length of the layout without version (peer epoch present).
pub const LEGACY_LEN: usize = 40;
/// Length of a version-2 message before its config bytes.
pub const HEADER_LEN: usize = 44;

/// Why a received election message was dropped. None of these stops the election: the
/// message is skipped, as ZooKeeper skips it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Fewer than 28 bytes.
    #[error("notification too short: {len} bytes (at least {MIN_LEN} needed)")]
    TooShort {
        /// Bytes received.
        len: usize,
    },
    /// The layout announced more bytes than the message holds.
    #[error("notification truncated: {needed} bytes needed, {len} present")]
    Truncated {
        /// Bytes needed.
        needed: usize,
        /// Bytes present.
        len: usize,
    },
    /// The config length is negative or larger than the whole message.
    #[error("invalid config length {config_len} in a {len}-byte notification")]
    InvalidConfigLength {
        /// The announced length.
        config_len: i32,
        /// Bytes in the message.
        len: usize,
    },
    /// The state field is not 0..=3.
    #[error("invalid sender state {value}")]
    BadState {
        /// The received value.
        value: i32,
    },
}

/// A decoded election message (ZooKeeper's `FastLeaderElection.Notification`, without the
/// sender id, which the transport knows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// The sender's state.
    pub state: ServerState,
    /// The proposed leader.
    pub leader: ServerId,
    /// The proposed leader's zxid.
    pub zxid: Zxid,
    /// The sender's round (`logicalclock`), or the round of its decided vote.
    pub election_epoch: i64,
    /// The proposed leader's epoch.
    pub peer_epoch: i64,
    /// Format version (0 for the 28- and 40-byte layouts).
    pub version: i32,
    /// The sender's configuration string, when it sent a usable one.
    pub config: Option<String>,
}

impl Notification {
    /// A notification carrying `vote` from a server in `state`, version 2, with `config`.
    pub fn from_vote(vote: &Vote, state: ServerState, config: Option<String>) -> Self {
        Notification {
            state,
            leader: vote.leader,
            zxid: vote.zxid,
            election_epoch: vote.election_epoch,
            peer_epoch: vote.peer_epoch,
            version: CURRENT_VERSION,
            config,
        }
    }

    /// The vote this notification carries (with its state and version).
    pub fn vote(&self) -> Vote {
        Vote {
            leader: self.leader,
            zxid: self.zxid,
            election_epoch: self.election_epoch,
            peer_epoch: self.peer_epoch,
            state: self.state,
            version: self.version,
        }
    }

    /// The proposed leader with its zxid and epoch.
    pub fn candidate(&self) -> Candidate {
        Candidate::new(self.leader, self.zxid, self.peer_epoch)
    }

    /// The version of the carried config, when there is one (`version=` line, hexadecimal).
    pub fn config_version(&self) -> Option<i64> {
        self.config.as_deref().and_then(parse_config_version)
    }

    /// Bytes [`encode`](Self::encode) produces.
    pub fn encoded_len(&self) -> usize {
        match &self.config {
            Some(c) if !c.is_empty() => HEADER_LEN + c.len(),
            _ => LEGACY_LEN,
        }
    }

    /// Encodes the payload of one election frame.
    ///
    /// With a non-empty config this is the version-2 layout. Without one it is the 40-byte
    /// layout (which every ZooKeeper since 3.4 reads as "version 0, no config"): a version-2
    /// message with config length 0 would kill a ZooKeeper 3.8.0 receiver.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        out.extend_from_slice(&self.state.wire_value().to_be_bytes());
        out.extend_from_slice(&self.leader.0.to_be_bytes());
        out.extend_from_slice(&self.zxid.0.to_be_bytes());
        out.extend_from_slice(&self.election_epoch.to_be_bytes());
        out.extend_from_slice(&self.peer_epoch.to_be_bytes());
        match &self.config {
            Some(c) if !c.is_empty() => {
                out.extend_from_slice(&CURRENT_VERSION.to_be_bytes());
                // A config longer than i32::MAX cannot be sent; clamp keeps this total and a
                // receiver rejects the mismatch instead of us panicking.
                let len = i32::try_from(c.len()).unwrap_or(i32::MAX);
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(c.as_bytes());
            }
            _ => out.extend_from_slice(&1i32.to_be_bytes()),
        }
        out
    }

    /// Decodes the payload of one election frame (ZooKeeper's `WorkerReceiver` rules):
    /// - fewer than 28 bytes: [`DecodeError::TooShort`];
    /// - exactly 28: no peer epoch, it is derived from the zxid (`zxid >> 32`), version 0;
    /// - exactly 40: version 0, no config;
    /// - otherwise the version is read; if it is above 1 the config length follows, which must
    ///   be `0 ..= len` ([`DecodeError::InvalidConfigLength`]) and present
    ///   ([`DecodeError::Truncated`]). Trailing bytes are ignored, as in ZooKeeper.
    ///
    /// An empty, non-UTF-8 or unparsable config decodes as `config: None`, never as an error.
    pub fn decode(buf: &[u8]) -> Result<Notification, DecodeError> {
        let len = buf.len();
        if len < MIN_LEN {
            return Err(DecodeError::TooShort { len });
        }
        let raw_state = read_i32(buf, 0)?;
        let leader = ServerId(read_i64(buf, 4)?);
        let zxid = Zxid(read_i64(buf, 12)?);
        let election_epoch = read_i64(buf, 20)?;
        let mut version = 0;
        let mut config = None;
        let peer_epoch = if len == MIN_LEN {
            zxid.epoch()
        } else {
            let pe = read_i64(buf, 28)?;
            if len != LEGACY_LEN {
                version = read_i32(buf, 36)?;
            }
            pe
        };
        if version > 1 {
            let config_len = read_i32(buf, 40)?;
            let clen = usize::try_from(config_len)
                .ok()
                .filter(|l| *l <= len)
                .ok_or(DecodeError::InvalidConfigLength { config_len, len })?;
            let bytes = buf
                .get(HEADER_LEN..HEADER_LEN + clen)
                .ok_or(DecodeError::Truncated {
                    needed: HEADER_LEN + clen,
                    len,
                })?;
            config = std::str::from_utf8(bytes)
                .ok()
                .filter(|s| parse_config_version(s).is_some())
                .map(str::to_owned);
        }
        let state =
            ServerState::from_wire(raw_state).ok_or(DecodeError::BadState { value: raw_state })?;
        Ok(Notification {
            state,
            leader,
            zxid,
            election_epoch,
            peer_epoch,
            version,
            config,
        })
    }
}

/// The version of a ZooKeeper dynamic config string, or `None` if the string is not one: it
/// needs at least one `server.N=` line with a numeric id and exactly one valid hexadecimal
/// `version=` line, and every non-empty line must be `key=value`.
pub fn parse_config_version(config: &str) -> Option<i64> {
    let mut version = None;
    let mut servers = 0usize;
    for line in config.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let (key, value) = line.split_once('=')?;
        if key == "version" {
            if version.is_some() {
                return None;
            }
            version = Some(i64::from_str_radix(value, 16).ok()?);
        } else if let Some(id) = key.strip_prefix("server.") {
            id.parse::<i64>().ok()?;
            servers += 1;
        }
    }
    if servers == 0 {
        return None;
    }
    version
}

fn read_i32(buf: &[u8], at: usize) -> Result<i32, DecodeError> {
    buf.get(at..at + 4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(i32::from_be_bytes)
        .ok_or(DecodeError::Truncated {
            needed: at + 4,
            len: buf.len(),
        })
}

fn read_i64(buf: &[u8], at: usize) -> Result<i64, DecodeError> {
    buf.get(at..at + 8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(i64::from_be_bytes)
        .ok_or(DecodeError::Truncated {
            needed: at + 8,
            len: buf.len(),
        })
}
