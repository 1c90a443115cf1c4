//! A Python interpreter with given modules (the real-client tests drive `confluent-kafka`, the
//! Python binding of librdkafka, and `kafka-python`).
//!
//! The interpreter is `HA_PYTHON` when set (the README's test command makes a virtual
//! environment with the clients and sets it), else `python3`. Like [`crate::require_zookeeper`],
//! a missing interpreter or module fails the test when `CI` is set and skips it otherwise.

use std::path::PathBuf;
use std::process::Command;

use crate::TestkitError;

/// The environment variable naming the Python interpreter the tests use.
pub const PYTHON_ENV: &str = "HA_PYTHON";

/// The interpreter the tests use: `HA_PYTHON`, else `python3` from `PATH`.
pub fn python() -> PathBuf {
    std::env::var_os(PYTHON_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("python3"))
}

/// Whether [`python`] runs and imports every module of `modules`; `Err` says what is missing.
pub fn python_modules_available(modules: &[&str]) -> Result<PathBuf, TestkitError> {
    let py = python();
    let script = modules
        .iter()
        .map(|m| format!("import {m}"))
        .collect::<Vec<_>>()
        .join("; ");
    let out = Command::new(&py)
        .args(["-c", &script])
        .output()
        .map_err(|e| TestkitError::PythonMissing(format!("{}: {e}", py.display())))?;
    if out.status.success() {
        Ok(py)
    } else {
        Err(TestkitError::PythonMissing(format!(
            "{} cannot import {}: {}",
            py.display(),
            modules.join(", "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// The interpreter to run `test` with when it imports `modules`: `Ok(Some(path))` when they
/// are there; `Ok(None)` (the test skips, with a notice) when they are not and `CI` is unset;
/// `Err` when they are not and `CI` is set.
pub fn require_python(test: &str, modules: &[&str]) -> Result<Option<PathBuf>, TestkitError> {
    match python_modules_available(modules) {
        Ok(p) => Ok(Some(p)),
        Err(e) if std::env::var_os("CI").is_some() => Err(e),
        Err(e) => {
            eprintln!("SKIPPED {test}: {e} (set CI to make this a failure)");
            Ok(None)
        }
    }
}
