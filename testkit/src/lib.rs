//! # ha-testkit
//!
//! Test harness shared by the crates' interop and conformance tests: starts real Apache
//! ZooKeeper servers (Debian's `zookeeper` package, ZooKeeper 3.8) on free loopback ports in
//! temporary directories and stops exactly the processes it started.
//!
//! Every test that needs ZooKeeper starts with [`require_zookeeper`]: it fails when the `CI`
//! environment variable is set and ZooKeeper is missing, and skips with a notice otherwise.
//!
//! ```no_run
//! use std::time::Duration;
//! use ha_testkit::{require_zookeeper, ServerMode, ZkEnsemble};
//!
//! # fn main() -> Result<(), ha_testkit::TestkitError> {
//! if !require_zookeeper("three_servers_elect_a_leader")? {
//!     return Ok(());
//! }
//! let mut zk = ZkEnsemble::builder()
//!     .servers(3)
//!     .tick_time(Duration::from_millis(200))
//!     .start()?;
//! let leader = zk.wait_for_leader(Duration::from_secs(30))?;
//! assert_eq!(zk.srvr(leader)?.mode, ServerMode::Leader);
//! zk.kill(leader)?; // SIGKILL
//! let next = zk.wait_for_leader(Duration::from_secs(30))?;
//! assert_ne!(next, leader);
//! println!("clients connect to {}", zk.connect_string());
//! # Ok(())
//! # }
//! ```
//!
//! A quorum may include members the harness does not start ([`ExternalServer`]), for an
//! ensemble where one member is our own peer implementation; pick its ports with
//! [`free_ports`].
//!
//! [`TcpProxy`] sits between a client and a server and can be paused, cutting the client off
//! (a connection loss or a network partition) without touching either process.

mod ensemble;
mod error;
mod four_letter;
mod install;
pub mod netns;
mod ports;
mod process;
mod proxy;
mod python;

pub use ensemble::{ExternalServer, ServerPorts, ServerProgram, ZkEnsemble, ZkEnsembleBuilder};
pub use error::TestkitError;
pub use four_letter::{four_letter_word, four_letter_word_at, ServerMode, SrvrStats};
pub use install::{
    ha_zookeeper_binary, require_zookeeper, zookeeper_available, Installation, CLASSPATH_ENV,
    HA_ZOOKEEPER_ENV, JAVA_ENV,
};
pub use ports::free_ports;
pub use proxy::TcpProxy;
pub use python::{python, python_modules_available, require_python, PYTHON_ENV};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
