//! ZooKeeper's four-letter-word commands (`ruok`, `srvr`, ...) over the client port, and the
//! parsed answer of `srvr`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::error::TestkitError;

/// Largest answer read from a four-letter word (the answers we use are a few hundred bytes).
const MAX_ANSWER: u64 = 1 << 20;

/// Sends a four-letter word to `127.0.0.1:port` and returns the full answer.
pub fn four_letter_word(port: u16, word: &str, timeout: Duration) -> Result<String, TestkitError> {
    four_letter_word_at(SocketAddr::from(([127, 0, 0, 1], port)), word, timeout)
}

/// Sends a four-letter word to `addr` and returns the full answer.
pub fn four_letter_word_at(
    addr: SocketAddr,
    word: &str,
    timeout: Duration,
) -> Result<String, TestkitError> {
    let ctx = |what: &str| format!("{what} `{word}` on {addr}");
    let mut stream = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| TestkitError::io(ctx("connect"), e))?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|_| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| TestkitError::io(ctx("configure"), e))?;
    stream
        .write_all(word.as_bytes())
        .map_err(|e| TestkitError::io(ctx("send"), e))?;
    let mut answer = Vec::new();
    stream
        .take(MAX_ANSWER)
        .read_to_end(&mut answer)
        .map_err(|e| TestkitError::io(ctx("read"), e))?;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

/// The role a server reports in `srvr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerMode {
    /// A single server without a quorum.
    Standalone,
    /// The quorum's leader.
    Leader,
    /// A follower of the leader.
    Follower,
    /// A non-voting observer.
    Observer,
    /// Serving in read-only mode (quorum lost, `readonlymode.enabled`).
    ReadOnly,
}

/// The parsed answer of `srvr`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrvrStats {
    /// The `Zookeeper version:` line.
    pub version: String,
    /// The server's last zxid.
    pub zxid: u64,
    /// The server's role.
    pub mode: ServerMode,
    /// Number of znodes.
    pub node_count: u64,
    /// Open client connections.
    pub connections: u64,
    /// Requests queued but not yet answered.
    pub outstanding: u64,
}

impl SrvrStats {
    /// Parses a `srvr` answer. A server that is running but not serving (no quorum yet) answers
    /// "This ZooKeeper instance is not currently serving requests", which is a
    /// [`TestkitError::BadAnswer`].
    pub fn parse(answer: &str) -> Result<SrvrStats, TestkitError> {
        let bad = || TestkitError::BadAnswer(answer.chars().take(300).collect());
        let field = |name: &str| {
            answer.lines().find_map(|l| {
                l.strip_prefix(name)
                    .and_then(|rest| rest.strip_prefix(':'))
                    .map(str::trim)
            })
        };
        let num = |name: &str| -> Result<u64, TestkitError> {
            field(name)
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(bad)
        };
        let version = field("Zookeeper version").ok_or_else(bad)?.to_string();
        let zxid = field("Zxid")
            .and_then(|z| z.strip_prefix("0x"))
            .and_then(|z| u64::from_str_radix(z, 16).ok())
            .ok_or_else(bad)?;
        let mode = match field("Mode").ok_or_else(bad)? {
            "standalone" => ServerMode::Standalone,
            "leader" => ServerMode::Leader,
            "follower" => ServerMode::Follower,
            "observer" => ServerMode::Observer,
            "read-only" => ServerMode::ReadOnly,
            _ => return Err(bad()),
        };
        Ok(SrvrStats {
            version,
            zxid,
            mode,
            node_count: num("Node count")?,
            connections: num("Connections")?,
            outstanding: num("Outstanding")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn srvr_answer_of_a_leader_parses() {
        let answer = "Zookeeper version: 3.8.0-debian--1, built on 2023-03-12 10:00 UTC\n\
            Latency min/avg/max: 0/0.0/0\nReceived: 3\nSent: 2\nConnections: 1\n\
            Outstanding: 0\nZxid: 0x100000002\nMode: leader\nNode count: 5\n\
            Proposal sizes last/min/max: -1/-1/-1\n";
        let s = SrvrStats::parse(answer).expect("parses");
        assert_eq!(s.mode, ServerMode::Leader);
        assert_eq!(s.zxid, 0x1_0000_0002);
        assert_eq!(s.node_count, 5);
        assert_eq!(s.connections, 1);
        assert!(s.version.starts_with("3.8.0"));
    }

    #[test]
    fn srvr_answer_of_a_server_without_quorum_is_an_error() {
        let answer = "This ZooKeeper instance is not currently serving requests\n";
        assert!(matches!(
            SrvrStats::parse(answer),
            Err(TestkitError::BadAnswer(_))
        ));
    }
}
