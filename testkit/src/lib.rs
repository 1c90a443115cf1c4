//! # ha-testkit
//!
//! Test harness shared by the crates' interop and conformance tests: starts real Apache
//! ZooKeeper servers (Debian's `zookeeper` package) on free loopback ports in temporary
//! directories and stops exactly the processes it started.
