//! [`ServerProcess`]: one ZooKeeper JVM started by the harness, plus a small watchdog that
//! kills it if the test process dies without dropping the ensemble (e.g. killed by a timeout),
//! so no server outlives its test.

use std::io;
use std::process::{Child, Command, ExitStatus, Stdio};

/// Polls every second; exits when the JVM is gone; kills the JVM when the test process is gone.
const WATCHDOG: &str = r#"while kill -0 "$1" 2>/dev/null && kill -0 "$2" 2>/dev/null; do sleep 1; done
kill -0 "$1" 2>/dev/null || kill -9 "$2" 2>/dev/null"#;

/// A running server JVM and its watchdog; both are killed and reaped on drop.
#[derive(Debug)]
pub(crate) struct ServerProcess {
    java: Option<Child>,
    watchdog: Option<Child>,
}

impl ServerProcess {
    /// Spawns `command` and its watchdog (best effort: without `sh`, no watchdog).
    pub(crate) fn spawn(command: &mut Command) -> io::Result<ServerProcess> {
        let java = command.spawn()?;
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG)
            .arg("ha-testkit-watchdog")
            .arg(std::process::id().to_string())
            .arg(java.id().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
        Ok(ServerProcess {
            java: Some(java),
            watchdog,
        })
    }

    /// The JVM's process id.
    pub(crate) fn id(&self) -> Option<u32> {
        self.java.as_ref().map(Child::id)
    }

    /// The JVM's exit status if it has exited (then the watchdog is stopped too).
    pub(crate) fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        let status = match self.java.as_mut() {
            Some(java) => java.try_wait()?,
            None => return Ok(None),
        };
        if status.is_some() {
            self.java = None;
            self.stop_watchdog();
        }
        Ok(status)
    }

    /// Kills the JVM with SIGKILL and reaps it, then stops the watchdog.
    pub(crate) fn kill(&mut self) -> io::Result<()> {
        let result = match self.java.take() {
            Some(mut java) => {
                // An already exited process makes `kill` fail; reaping it is all that is left.
                let _ = java.kill();
                java.wait().map(|_| ())
            }
            None => Ok(()),
        };
        self.stop_watchdog();
        result
    }

    fn stop_watchdog(&mut self) {
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}
