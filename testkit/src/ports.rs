//! Picking free loopback TCP ports.

use std::net::TcpListener;

use crate::error::TestkitError;

/// Returns `n` distinct TCP ports that were free on 127.0.0.1 a moment ago.
///
/// All `n` listeners are held open together so the ports are distinct, then released for the
/// caller to bind. Another process may still take one in between; the ensemble start-up retries
/// with fresh ports when a server reports its address in use.
pub fn free_ports(n: usize) -> Result<Vec<u16>, TestkitError> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind(("127.0.0.1", 0)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TestkitError::io("bind a free loopback port", e))?;
    listeners
        .iter()
        .map(|l| {
            l.local_addr()
                .map(|a| a.port())
                .map_err(|e| TestkitError::io("read a bound port", e))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct_and_nonzero() {
        let ports = free_ports(6).expect("ports");
        let mut sorted = ports.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 6);
        assert!(ports.iter().all(|&p| p != 0));
    }
}
