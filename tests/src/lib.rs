//! # ha-tests
//!
//! Cross-crate integration tests and the deterministic cluster simulator of ha-blocks.
