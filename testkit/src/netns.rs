//! [`Lab`]: test hosts in Linux network namespaces, each with an address of its own on one
//! bridge, so that real processes (ZooKeeper servers, brokers) can be cut off from each other.
//!
//! Every host is a namespace `<prefix>-<name>` joined to the bridge by a veth pair; the root
//! namespace keeps the bridge's address, so the test process reaches every host. A host is cut
//! off by taking its end of the veth pair down in the root namespace (every packet to or from
//! it is then dropped) and healed by bringing it up again. Dropping the lab deletes exactly the
//! namespaces, links and bridge it created.
//!
//! It needs root (`CAP_NET_ADMIN`) and `ip` from iproute2; [`Lab::available`] says whether
//! this machine can run it.
//!
//! ```no_run
//! use ha_testkit::netns::Lab;
//! # fn main() -> Result<(), ha_testkit::TestkitError> {
//! let mut lab = Lab::new("hb")?;
//! let a = lab.host("zk1")?;
//! let mut cmd = lab.command(&a, "sleep");
//! cmd.arg("1");
//! lab.isolate(&a)?; // a's packets are dropped
//! lab.heal(&a)?;
//! # Ok(()) }
//! ```

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::error::TestkitError;

/// One host of a [`Lab`]: a namespace and its address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// The host's short name (e.g. `zk1`).
    pub name: String,
    /// The network namespace it runs in.
    pub netns: String,
    /// Its IPv4 address on the lab's bridge.
    pub ip: String,
    /// The root-namespace end of its veth pair.
    veth: String,
    /// The namespace's end of its veth pair.
    inner: String,
}

/// Test hosts in network namespaces on one bridge; see the [module](self) docs.
#[derive(Debug)]
pub struct Lab {
    prefix: String,
    bridge: String,
    /// The first three octets of the lab network.
    net: String,
    hosts: Vec<Host>,
}

/// Runs `ip` with `args`, failing with its stderr.
fn ip(args: &[&str]) -> Result<(), TestkitError> {
    run_ok("ip", args)
}

/// Runs `program` with `args`, failing with its stderr.
fn run_ok(program: &str, args: &[&str]) -> Result<(), TestkitError> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| TestkitError::io("run ip", e))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(TestkitError::Netns(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

impl Lab {
    /// True when this process may create namespaces (it is root and `ip netns` works).
    pub fn available() -> bool {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        root && Command::new("ip")
            .args(["netns", "list"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// A lab whose links and namespaces are named `<prefix><n>-…` (`n`, from the process id and
    /// a count of this process's labs, keeps concurrent labs apart). Its bridge is up with address `10.<a>.<b>.1/24`, a subnet
    /// picked from the process id in `10.200.0.0/13`.
    pub fn new(prefix: &str) -> Result<Lab, TestkitError> {
        // Up to four labs at once in one process, apart from those of 512 other processes.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 4;
        let n = (std::process::id() % 512) * 4 + k;
        let prefix = format!("{prefix}{n}");
        let bridge = format!("{prefix}br");
        if bridge.len() > 15 {
            return Err(TestkitError::InvalidConfig(format!(
                "lab prefix {prefix:?} makes link names longer than 15 bytes"
            )));
        }
        // 10.200.0.0 .. 10.207.255.0: one /24 per lab.
        let lab = Lab {
            prefix,
            bridge,
            net: format!("10.{}.{}", 200 + n / 256, n % 256),
            hosts: Vec::new(),
        };
        // A leftover of an earlier run with the same pid: remove it first.
        let _ = ip(&["link", "del", &lab.bridge]);
        ip(&["link", "add", &lab.bridge, "type", "bridge"])?;
        ip(&[
            "addr",
            "add",
            &format!("{}/24", lab.gateway()),
            "dev",
            &lab.bridge,
        ])?;
        ip(&["link", "set", &lab.bridge, "up"])?;
        Ok(lab)
    }

    /// The bridge's address, the root namespace's address on the lab network.
    pub fn gateway(&self) -> String {
        format!("{}.1", self.net)
    }

    /// Adds a host named `name` (at most 8 bytes), with the next free address.
    pub fn host(&mut self, name: &str) -> Result<Host, TestkitError> {
        let index = self.hosts.len() + 2;
        if index > 254 {
            return Err(TestkitError::InvalidConfig("at most 253 hosts".into()));
        }
        let netns = format!("{}-{name}", self.prefix);
        let veth = format!("{}{name}", self.prefix);
        if veth.len() > 15 {
            return Err(TestkitError::InvalidConfig(format!(
                "host name {name:?} makes link names longer than 15 bytes"
            )));
        }
        let inner = format!("{veth}i");
        let inner = if inner.len() > 15 {
            format!("hbi{index}")
        } else {
            inner
        };
        let _ = ip(&["netns", "del", &netns]);
        let _ = ip(&["link", "del", &veth]);
        ip(&["netns", "add", &netns])?;
        let host = Host {
            name: name.to_owned(),
            netns: netns.clone(),
            ip: format!("{}.{index}", self.net),
            veth: veth.clone(),
            inner: inner.clone(),
        };
        // Recorded before the links exist, so that a failure below still cleans up.
        self.hosts.push(host.clone());
        ip(&["link", "add", &veth, "type", "veth", "peer", "name", &inner])?;
        ip(&["link", "set", &inner, "netns", &netns])?;
        ip(&["link", "set", &veth, "master", &self.bridge])?;
        ip(&["link", "set", &veth, "up"])?;
        let in_ns = |args: &[&str]| {
            let mut all = vec!["netns", "exec", &netns, "ip"];
            all.extend_from_slice(args);
            ip(&all)
        };
        in_ns(&["link", "set", "lo", "up"])?;
        in_ns(&["addr", "add", &format!("{}/24", host.ip), "dev", &inner])?;
        in_ns(&["link", "set", &inner, "up"])?;
        Ok(host)
    }

    /// A command that runs `program` inside `host`'s namespace (through `ip netns exec`, which
    /// executes the program in place: the child's pid is the program's).
    pub fn command(&self, host: &Host, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new("ip");
        cmd.arg("netns").arg("exec").arg(&host.netns).arg(program);
        cmd
    }

    /// Cuts `host` off: every packet to or from it is dropped until [`heal`](Self::heal).
    pub fn isolate(&self, host: &Host) -> Result<(), TestkitError> {
        ip(&["link", "set", &host.veth, "down"])
    }

    /// Reconnects a host cut off by [`isolate`](Self::isolate).
    pub fn heal(&self, host: &Host) -> Result<(), TestkitError> {
        ip(&["link", "set", &host.veth, "up"])
    }

    /// Delays every packet `host` sends by `delay` (a `netem` qdisc on its interface), or
    /// removes the delay with `None`. Fails where the kernel has no `netem` (then `None` fails
    /// too, which is how a caller can probe for it).
    pub fn set_latency(&self, host: &Host, delay: Option<Duration>) -> Result<(), TestkitError> {
        let dev = host.inner.as_str();
        let mut args = vec!["netns", "exec", host.netns.as_str(), "tc", "qdisc"];
        let ms;
        match delay {
            Some(d) => {
                ms = format!("{}ms", d.as_millis().max(1));
                args.extend_from_slice(&["replace", "dev", dev, "root", "netem", "delay", &ms]);
            }
            None => {
                // Probe (and clear) with a zero delay, then remove the qdisc.
                args.extend_from_slice(&["replace", "dev", dev, "root", "netem", "delay", "0ms"]);
            }
        }
        run_ok("ip", &args)?;
        if delay.is_none() {
            run_ok(
                "ip",
                &[
                    "netns",
                    "exec",
                    &host.netns,
                    "tc",
                    "qdisc",
                    "del",
                    "dev",
                    dev,
                    "root",
                ],
            )?;
        }
        Ok(())
    }

    /// The hosts added so far.
    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for h in &self.hosts {
            let _ = ip(&["link", "del", &h.veth]);
            let _ = ip(&["netns", "del", &h.netns]);
        }
        let _ = ip(&["link", "del", &self.bridge]);
    }
}
