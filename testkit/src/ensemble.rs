//! [`ZkEnsemble`]: real ZooKeeper server processes (standalone or a quorum) on loopback, each in
//! its own temporary directory, killed on drop.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::TestkitError;
use crate::four_letter::{four_letter_word_at, ServerMode, SrvrStats};
use crate::install::Installation;
use crate::netns::Host;
use crate::ports::free_ports;
use crate::process::ServerProcess;

/// How often the harness polls a server while waiting.
const POLL: Duration = Duration::from_millis(50);
/// Timeout of one four-letter-word exchange.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// How many times start-up is retried with fresh ports when a port was taken meanwhile.
const START_ATTEMPTS: usize = 3;

/// A quorum member that is not a ZooKeeper process started by the harness (for example our own
/// peer implementation), listed in every server's `zoo.cfg` as `server.<sid>=host:quorum:election`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExternalServer {
    /// The member's server id (`myid`).
    pub sid: u64,
    /// Host it listens on (usually `127.0.0.1`).
    pub host: String,
    /// Quorum (follower-to-leader) port.
    pub quorum_port: u16,
    /// Leader-election port.
    pub election_port: u16,
}

impl ExternalServer {
    /// A member `sid` listening on `host` with these quorum and election ports.
    pub fn new(sid: u64, host: impl Into<String>, quorum_port: u16, election_port: u16) -> Self {
        ExternalServer {
            sid,
            host: host.into(),
            quorum_port,
            election_port,
        }
    }
}

/// The ports of one server started by the harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerPorts {
    /// Client port (also answers four-letter words).
    pub client: u16,
    /// Quorum port.
    pub quorum: u16,
    /// Leader-election port.
    pub election: u16,
}

/// Which server program the harness starts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ServerProgram {
    /// Apache ZooKeeper 3.8 (`QuorumPeerMain` from Debian's `zookeeper` package, on Java).
    #[default]
    ApacheZooKeeper,
    /// ha-blocks' `ha-zookeeper` binary (at this path), run as `ha-zookeeper <zoo.cfg>`. It
    /// reads the same `zoo.cfg` and `myid`.
    HaZookeeper(PathBuf),
}

/// Configures and starts a [`ZkEnsemble`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `start` is called"]
pub struct ZkEnsembleBuilder {
    servers: usize,
    first_sid: u64,
    tick_time: Duration,
    init_limit: u32,
    sync_limit: u32,
    externals: Vec<ExternalServer>,
    extra_config: Vec<(String, String)>,
    start_timeout: Duration,
    wait_for_quorum: Option<bool>,
    heap_mb: u32,
    hosts: Vec<Host>,
    program: ServerProgram,
    server_jvm: bool,
    jvm_args: Vec<String>,
}

impl Default for ZkEnsembleBuilder {
    fn default() -> Self {
        ZkEnsembleBuilder {
            servers: 1,
            first_sid: 1,
            tick_time: Duration::from_millis(2000),
            init_limit: 10,
            sync_limit: 5,
            externals: Vec::new(),
            extra_config: Vec::new(),
            start_timeout: Duration::from_secs(60),
            wait_for_quorum: None,
            heap_mb: 128,
            hosts: Vec::new(),
            program: ServerProgram::ApacheZooKeeper,
            server_jvm: false,
            jvm_args: Vec::new(),
        }
    }
}

impl ZkEnsembleBuilder {
    /// Number of real ZooKeeper servers to start (default 1). One server without externals runs
    /// standalone; anything else is a quorum.
    pub fn servers(mut self, n: usize) -> Self {
        self.servers = n;
        self
    }

    /// Server id of the first real server (default 1); the others follow consecutively.
    pub fn first_sid(mut self, sid: u64) -> Self {
        self.first_sid = sid;
        self
    }

    /// `tickTime` (default 2000 ms). The minimum session timeout is two ticks, so tests of
    /// session expiry use small ticks (e.g. 200 ms).
    pub fn tick_time(mut self, tick: Duration) -> Self {
        self.tick_time = tick;
        self
    }

    /// `initLimit` in ticks (default 10).
    pub fn init_limit(mut self, ticks: u32) -> Self {
        self.init_limit = ticks;
        self
    }

    /// `syncLimit` in ticks (default 5).
    pub fn sync_limit(mut self, ticks: u32) -> Self {
        self.sync_limit = ticks;
        self
    }

    /// Adds a quorum member that the harness does not start.
    pub fn external(mut self, server: ExternalServer) -> Self {
        self.externals.push(server);
        self
    }

    /// Adds a `key=value` line to every server's `zoo.cfg`.
    pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.extra_config.push((key.into(), value.into()));
        self
    }

    /// How long start-up may take (default 60 s; the JVM starts slowly on a busy machine).
    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.start_timeout = timeout;
        self
    }

    /// Whether `start` waits until every real server serves requests (is in a quorum). Default:
    /// yes without external members, no with them (an external member may be needed for a
    /// quorum; wait later with [`ZkEnsemble::wait_serving`]).
    pub fn wait_for_quorum(mut self, wait: bool) -> Self {
        self.wait_for_quorum = Some(wait);
        self
    }

    /// Maximum Java heap per server in MiB (default 128).
    pub fn heap_mb(mut self, mb: u32) -> Self {
        self.heap_mb = mb;
        self
    }

    /// Runs Apache ZooKeeper on the JVM's defaults for a server (its optimising compiler and
    /// default collector), as in production, instead of the quick-start options the tests use
    /// (`-XX:+UseSerialGC -XX:TieredStopAtLevel=1`). For benchmarks.
    pub fn server_jvm(mut self, on: bool) -> Self {
        self.server_jvm = on;
        self
    }

    /// Adds an argument to every Apache ZooKeeper server's `java` command line, before the main
    /// class: a system property that `zoo.cfg` cannot set (e.g. `-Djute.maxbuffer=4194304`,
    /// which the server reads as `jute.maxbuffer`, not `zookeeper.jute.maxbuffer`) or a JVM
    /// option. Ignored for [`ServerProgram::HaZookeeper`].
    pub fn jvm_arg(mut self, arg: impl Into<String>) -> Self {
        self.jvm_args.push(arg.into());
        self
    }

    /// Runs server `i` (in sid order) in `hosts[i]`'s network namespace, listening on that
    /// host's address with ZooKeeper's default ports (2181, 2888, 3888), instead of on loopback
    /// with free ports. There must be one host per server.
    pub fn in_namespaces(mut self, hosts: Vec<Host>) -> Self {
        self.hosts = hosts;
        self
    }

    /// Which server program to start (default Apache ZooKeeper).
    pub fn program(mut self, program: ServerProgram) -> Self {
        self.program = program;
        self
    }

    /// Starts the servers and waits until each answers `ruok` (and, see
    /// [`wait_for_quorum`](Self::wait_for_quorum), serves requests).
    pub fn start(self) -> Result<ZkEnsemble, TestkitError> {
        if self.servers == 0 {
            return Err(TestkitError::InvalidConfig("at least one server".into()));
        }
        let install = match &self.program {
            ServerProgram::ApacheZooKeeper => Some(Installation::locate()?),
            ServerProgram::HaZookeeper(bin) if bin.is_file() => None,
            ServerProgram::HaZookeeper(bin) => {
                return Err(TestkitError::InvalidConfig(format!(
                    "no ha-zookeeper binary at {}",
                    bin.display()
                )))
            }
        };
        let mut last_err = None;
        for _ in 0..START_ATTEMPTS {
            let mut ensemble = ZkEnsemble::prepare(&self, install.clone())?;
            match ensemble.start_all(&self) {
                Ok(()) => return Ok(ensemble),
                Err(e) => {
                    let port_clash = ensemble
                        .servers
                        .keys()
                        .any(|&sid| ensemble.log(sid).contains("Address already in use"));
                    if !port_clash {
                        return Err(e);
                    }
                    last_err = Some(e);
                }
            }
        }
        Err(last_err.unwrap_or_else(|| TestkitError::InvalidConfig("no start attempt".into())))
    }
}

/// One server process started by the harness.
#[derive(Debug)]
struct Server {
    dir: PathBuf,
    /// The address it listens on (`127.0.0.1`, or its host's in a lab).
    ip: String,
    /// The network namespace it runs in, if any.
    netns: Option<String>,
    ports: ServerPorts,
    child: Option<ServerProcess>,
}

/// Real ZooKeeper servers on loopback. Dropping it kills exactly the processes it started and
/// removes their directories.
#[derive(Debug)]
#[must_use = "dropping the ensemble kills its servers"]
pub struct ZkEnsemble {
    /// The Java installation, for Apache ZooKeeper; `None` for `ha-zookeeper`.
    install: Option<Installation>,
    program: ServerProgram,
    heap_mb: u32,
    server_jvm: bool,
    jvm_args: Vec<String>,
    start_timeout: Duration,
    servers: BTreeMap<u64, Server>,
    // Dropped after `servers` (field order), once the processes are gone.
    root: tempfile::TempDir,
}

impl ZkEnsemble {
    /// A builder with the defaults (one standalone server, tickTime 2000 ms).
    pub fn builder() -> ZkEnsembleBuilder {
        ZkEnsembleBuilder::default()
    }

    /// Starts `n` servers with the defaults (standalone when `n == 1`).
    pub fn start(n: usize) -> Result<ZkEnsemble, TestkitError> {
        ZkEnsembleBuilder::default().servers(n).start()
    }

    /// Starts one standalone server with the defaults.
    pub fn standalone() -> Result<ZkEnsemble, TestkitError> {
        Self::start(1)
    }

    fn prepare(
        b: &ZkEnsembleBuilder,
        install: Option<Installation>,
    ) -> Result<ZkEnsemble, TestkitError> {
        let root = tempfile::Builder::new()
            .prefix("ha-testkit-zk-")
            .tempdir()
            .map_err(|e| TestkitError::io("create the ensemble directory", e))?;
        if !b.hosts.is_empty() && b.hosts.len() != b.servers {
            return Err(TestkitError::InvalidConfig(format!(
                "{} hosts for {} servers",
                b.hosts.len(),
                b.servers
            )));
        }
        let ports = if b.hosts.is_empty() {
            free_ports(b.servers * 3)?
        } else {
            [2181, 2888, 3888].repeat(b.servers)
        };
        let sids: Vec<u64> = (0..b.servers as u64).map(|i| b.first_sid + i).collect();
        if let Some(dup) = b.externals.iter().find(|x| sids.contains(&x.sid)) {
            return Err(TestkitError::InvalidConfig(format!(
                "external sid {} clashes with a local server",
                dup.sid
            )));
        }
        let mut servers = BTreeMap::new();
        for (i, &sid) in sids.iter().enumerate() {
            let dir = root.path().join(format!("server-{sid}"));
            let ports = ServerPorts {
                client: ports[3 * i],
                quorum: ports[3 * i + 1],
                election: ports[3 * i + 2],
            };
            let host = b.hosts.get(i);
            servers.insert(
                sid,
                Server {
                    dir,
                    ip: host.map_or_else(|| "127.0.0.1".to_owned(), |h| h.ip.clone()),
                    netns: host.map(|h| h.netns.clone()),
                    ports,
                    child: None,
                },
            );
        }
        let standalone = b.servers == 1 && b.externals.is_empty();
        let mut members = String::new();
        if !standalone {
            for (sid, s) in &servers {
                let _ = writeln!(
                    members,
                    "server.{sid}={}:{}:{}",
                    s.ip, s.ports.quorum, s.ports.election
                );
            }
            for x in &b.externals {
                let _ = writeln!(
                    members,
                    "server.{}={}:{}:{}",
                    x.sid, x.host, x.quorum_port, x.election_port
                );
            }
        }
        for (sid, s) in &servers {
            let data = s.dir.join("data");
            fs::create_dir_all(&data)
                .map_err(|e| TestkitError::io(format!("create {}", data.display()), e))?;
            let mut cfg = String::new();
            let _ = writeln!(cfg, "tickTime={}", b.tick_time.as_millis().max(1));
            let _ = writeln!(cfg, "initLimit={}", b.init_limit);
            let _ = writeln!(cfg, "syncLimit={}", b.sync_limit);
            let _ = writeln!(cfg, "dataDir={}", data.display());
            let _ = writeln!(cfg, "clientPort={}", s.ports.client);
            let _ = writeln!(cfg, "clientPortAddress={}", s.ip);
            let _ = writeln!(cfg, "4lw.commands.whitelist=*");
            let _ = writeln!(cfg, "admin.enableServer=false");
            for (k, v) in &b.extra_config {
                let _ = writeln!(cfg, "{k}={v}");
            }
            cfg.push_str(&members);
            write_file(&s.dir.join("zoo.cfg"), &cfg)?;
            if !standalone {
                write_file(&data.join("myid"), &format!("{sid}\n"))?;
            }
        }
        Ok(ZkEnsemble {
            install,
            program: b.program.clone(),
            heap_mb: b.heap_mb,
            server_jvm: b.server_jvm,
            jvm_args: b.jvm_args.clone(),
            start_timeout: b.start_timeout,
            servers,
            root,
        })
    }

    fn start_all(&mut self, b: &ZkEnsembleBuilder) -> Result<(), TestkitError> {
        let sids: Vec<u64> = self.servers.keys().copied().collect();
        for &sid in &sids {
            self.spawn(sid)?;
        }
        let deadline = Instant::now() + self.start_timeout;
        for &sid in &sids {
            self.wait_answering(sid, deadline)?;
        }
        if b.wait_for_quorum.unwrap_or(b.externals.is_empty()) {
            for &sid in &sids {
                self.wait_serving_until(sid, deadline)?;
            }
        }
        Ok(())
    }

    fn server(&self, sid: u64) -> Result<&Server, TestkitError> {
        self.servers
            .get(&sid)
            .ok_or(TestkitError::UnknownServer(sid))
    }

    fn server_mut(&mut self, sid: u64) -> Result<&mut Server, TestkitError> {
        self.servers
            .get_mut(&sid)
            .ok_or(TestkitError::UnknownServer(sid))
    }

    fn spawn(&mut self, sid: u64) -> Result<(), TestkitError> {
        let java = self
            .install
            .as_ref()
            .map(|i| (i.java.clone(), i.classpath.clone()));
        let program = self.program.clone();
        let heap = self.heap_mb;
        let server_jvm = self.server_jvm;
        let jvm_args = self.jvm_args.clone();
        let server = self.server_mut(sid)?;
        if server.child.is_some() {
            return Ok(());
        }
        let log_path = server.dir.join("zookeeper.log");
        let log = File::options()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| TestkitError::io(format!("open {}", log_path.display()), e))?;
        let log_err = log
            .try_clone()
            .map_err(|e| TestkitError::io("duplicate the log handle", e))?;
        let exe = match (&program, &java) {
            (ServerProgram::HaZookeeper(bin), _) => bin.clone(),
            (_, Some((java, _))) => java.clone(),
            (_, None) => return Err(TestkitError::ZooKeeperMissing("no Java runtime".into())),
        };
        let mut command = match &server.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.arg("netns").arg("exec").arg(ns).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        if let (ServerProgram::ApacheZooKeeper, Some((_, classpath))) = (&program, &java) {
            command.arg(format!("-Xmx{heap}m"));
            if !server_jvm {
                command
                    .arg("-XX:+UseSerialGC")
                    .arg("-XX:TieredStopAtLevel=1");
            }
            command.args(&jvm_args);
            command
                .arg("-Djava.net.preferIPv4Stack=true")
                .arg("-Dzookeeper.admin.enableServer=false")
                .arg("-Dorg.slf4j.simpleLogger.showDateTime=true")
                .arg("-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS")
                .arg("-cp")
                .arg(classpath)
                .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain");
        }
        command
            .arg(server.dir.join("zoo.cfg"))
            .current_dir(&server.dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err);
        let child = ServerProcess::spawn(&mut command)
            .map_err(|e| TestkitError::io(format!("spawn {}", exe.display()), e))?;
        server.child = Some(child);
        Ok(())
    }

    /// Fails with `ExitedEarly` when the server's process has exited.
    fn check_alive(&mut self, sid: u64) -> Result<(), TestkitError> {
        let log = self.log_path(sid)?;
        let server = self.server_mut(sid)?;
        let child = server.child.as_mut().ok_or(TestkitError::NotRunning(sid))?;
        match child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => {
                server.child = None;
                Err(TestkitError::ExitedEarly {
                    sid,
                    status: status.to_string(),
                    log,
                })
            }
            Err(e) => Err(TestkitError::io("poll a server process", e)),
        }
    }

    fn wait_answering(&mut self, sid: u64, deadline: Instant) -> Result<(), TestkitError> {
        loop {
            self.check_alive(sid)?;
            if let Ok(a) = self.four_letter_word(sid, "ruok") {
                if a.trim() == "imok" {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                return Err(TestkitError::Timeout {
                    what: format!("server {sid} to answer ruok"),
                    waited: self.start_timeout,
                });
            }
            std::thread::sleep(POLL);
        }
    }

    fn wait_serving_until(
        &mut self,
        sid: u64,
        deadline: Instant,
    ) -> Result<SrvrStats, TestkitError> {
        loop {
            self.check_alive(sid)?;
            if let Ok(stats) = self.srvr(sid) {
                return Ok(stats);
            }
            if Instant::now() >= deadline {
                return Err(TestkitError::Timeout {
                    what: format!("server {sid} to serve requests"),
                    waited: self.start_timeout,
                });
            }
            std::thread::sleep(POLL);
        }
    }

    /// Waits until server `sid` serves requests (is standalone or in a quorum) and returns its
    /// `srvr` statistics.
    pub fn wait_serving(&mut self, sid: u64, timeout: Duration) -> Result<SrvrStats, TestkitError> {
        self.wait_serving_until(sid, Instant::now() + timeout)
    }

    /// `host:port,...` of every local server, for a ZooKeeper client.
    pub fn connect_string(&self) -> String {
        self.servers
            .values()
            .map(|s| format!("{}:{}", s.ip, s.ports.client))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The server ids of the local servers, ascending.
    pub fn sids(&self) -> Vec<u64> {
        self.servers.keys().copied().collect()
    }

    /// Client port of server `sid`.
    pub fn client_port(&self, sid: u64) -> Result<u16, TestkitError> {
        Ok(self.server(sid)?.ports.client)
    }

    /// All ports of server `sid`.
    pub fn ports(&self, sid: u64) -> Result<ServerPorts, TestkitError> {
        Ok(self.server(sid)?.ports)
    }

    /// The directory of server `sid` (holds `zoo.cfg`, `data/` and `zookeeper.log`).
    pub fn dir(&self, sid: u64) -> Result<&Path, TestkitError> {
        Ok(&self.server(sid)?.dir)
    }

    /// The root directory of the whole ensemble.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// Path of server `sid`'s log file (stdout and stderr of the process, kept across restarts).
    pub fn log_path(&self, sid: u64) -> Result<PathBuf, TestkitError> {
        Ok(self.server(sid)?.dir.join("zookeeper.log"))
    }

    /// Server `sid`'s log so far (empty when it cannot be read).
    pub fn log(&self, sid: u64) -> String {
        self.log_path(sid)
            .ok()
            .and_then(|p| fs::read(p).ok())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// The process id of server `sid`'s JVM while the harness runs it (e.g. to read its CPU
    /// time from `/proc` in a benchmark).
    pub fn pid(&self, sid: u64) -> Option<u32> {
        self.servers.get(&sid)?.child.as_ref()?.id()
    }

    /// Whether server `sid`'s process is running.
    pub fn is_running(&mut self, sid: u64) -> bool {
        self.check_alive(sid).is_ok()
    }

    /// Sends a four-letter word to server `sid` and returns the answer.
    pub fn four_letter_word(&self, sid: u64, word: &str) -> Result<String, TestkitError> {
        let s = self.server(sid)?;
        let addr = format!("{}:{}", s.ip, s.ports.client)
            .parse()
            .map_err(|_| TestkitError::InvalidConfig(format!("address {}", s.ip)))?;
        four_letter_word_at(addr, word, PROBE_TIMEOUT)
    }

    /// Server `sid`'s `srvr` answer, parsed. Fails while the server does not serve requests.
    pub fn srvr(&self, sid: u64) -> Result<SrvrStats, TestkitError> {
        SrvrStats::parse(&self.four_letter_word(sid, "srvr")?)
    }

    /// Kills server `sid` with SIGKILL and reaps it.
    pub fn kill(&mut self, sid: u64) -> Result<(), TestkitError> {
        let server = self.server_mut(sid)?;
        let mut child = server.child.take().ok_or(TestkitError::NotRunning(sid))?;
        child
            .kill()
            .map_err(|e| TestkitError::io("reap a killed server", e))
    }

    /// Stops server `sid` gracefully (SIGTERM through the `kill` command), falling back to
    /// SIGKILL after 10 s.
    pub fn stop(&mut self, sid: u64) -> Result<(), TestkitError> {
        let server = self.server_mut(sid)?;
        let child = server.child.as_mut().ok_or(TestkitError::NotRunning(sid))?;
        let pid = child.id().map(|p| p.to_string()).unwrap_or_default();
        let termed = Command::new("kill")
            .args(["-TERM", &pid])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if termed {
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                match child.try_wait() {
                    Ok(Some(_)) => {
                        server.child = None;
                        return Ok(());
                    }
                    Ok(None) => std::thread::sleep(POLL),
                    Err(e) => return Err(TestkitError::io("poll a stopping server", e)),
                }
            }
        }
        self.kill(sid)
    }

    /// Starts server `sid` again (stopping it first if it runs) with its data and ports, and
    /// waits until it answers `ruok` (use [`wait_serving`](Self::wait_serving) to wait until it
    /// has joined a quorum or, standalone, finished loading its data).
    pub fn restart(&mut self, sid: u64) -> Result<(), TestkitError> {
        if self.server(sid)?.child.is_some() {
            self.stop(sid)?;
        }
        self.spawn(sid)?;
        let deadline = Instant::now() + self.start_timeout;
        self.wait_answering(sid, deadline)
    }

    /// Waits until a running server reports mode leader (or standalone) and returns its sid.
    pub fn wait_for_leader(&mut self, timeout: Duration) -> Result<u64, TestkitError> {
        let deadline = Instant::now() + timeout;
        loop {
            let sids = self.sids();
            for sid in sids {
                if self.server(sid)?.child.is_none() {
                    continue;
                }
                if let Ok(stats) = self.srvr(sid) {
                    if matches!(stats.mode, ServerMode::Leader | ServerMode::Standalone) {
                        return Ok(sid);
                    }
                }
            }
            if Instant::now() >= deadline {
                return Err(TestkitError::Timeout {
                    what: "a leader".into(),
                    waited: timeout,
                });
            }
            std::thread::sleep(POLL);
        }
    }
}

impl Drop for ZkEnsemble {
    fn drop(&mut self) {
        for server in self.servers.values_mut() {
            if let Some(mut child) = server.child.take() {
                let _ = child.kill();
            }
        }
    }
}

fn write_file(path: &Path, contents: &str) -> Result<(), TestkitError> {
    fs::write(path, contents).map_err(|e| TestkitError::io(format!("write {}", path.display()), e))
}
