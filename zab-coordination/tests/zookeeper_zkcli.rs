//! ZooKeeper's own command-line client (`org.apache.zookeeper.ZooKeeperMain`, what Debian's
//! `zkCli.sh` runs) driven through a script of commands against a standalone server; the
//! normalised transcript must equal the one recorded from Apache ZooKeeper 3.8 below
//! ([`APACHE_TRANSCRIPT`]). The same body runs against Apache ZooKeeper (which checks the
//! recording and the normalisation) and against `ha-zookeeper`.
//!
//! The client runs without JLine (Debian does not ship it), so it reads commands from stdin.
//! Its stdout and stderr (command results go to both) share one pipe, so their order is kept;
//! it logs nothing (`slf4j-simple` at level `off`). After each command the driver sends
//! `ls /zkcli-end-<n>`, a node that never exists, and reads up to its `Node does not exist`
//! line: the lines before it are that command's output.
//!
//! Normalisation (what may differ between two correct servers):
//! - `cZxid`, `mZxid`, `pZxid` values become `0x<zxid>`; `ctime`, `mtime` become `<time>`;
//! - an `ephemeralOwner` that is a session id becomes `0x<session>` (0x0, the container
//!   owner 0x8000000000000000 and the TTL owners 0xff.. are kept);
//! - the server address in the banner becomes `<server>`;
//! - blank lines, the `WATCHER::` headers and `SLF4J:` lines are dropped;
//! - `WatchedEvent` lines (printed by the client's event thread, so their place among the
//!   command outputs is a race) are listed apart, sorted: which events fire is compared, not
//!   their order (ZooKeeper's `deleteall` deletes children in the order of a Java hash set);
//! - the elements of a one-line list `[a, b]` are sorted (`getEphemerals` returns a Java
//!   hash set's order; `ls` sorts already).
//!
//! Needs ZooKeeper (fails under `CI` when it is missing, skips otherwise).

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use ha_testkit::{Installation, ZkEnsemble};
use support::Flavour;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// How long one command may take (the JVM client starts slowly on a busy machine).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// Apache ZooKeeper 3.8.0's (Debian) normalised transcript of [`SCRIPT`].
const APACHE_TRANSCRIPT: &str = r#"(banner)
Connecting to <server>
Welcome to ZooKeeper!
JLine support is disabled
> create /zkcli hello
Created /zkcli
> create -e /zkcli/eph e
Created /zkcli/eph
> create -s /zkcli/seq- s
Created /zkcli/seq-0000000001
> create -e -s /zkcli/eph-seq- es
Created /zkcli/eph-seq-0000000002
> create -s /zkcli/seq- s2
Created /zkcli/seq-0000000003
> create -c /zkcli-container c
Created /zkcli-container
> create /zkcli-container/child x
Created /zkcli-container/child
> create -t 600000 /zkcli-ttl t
Created /zkcli-ttl
> get /zkcli
hello
> get -s /zkcli
hello
cZxid = 0x<zxid>
ctime = <time>
mZxid = 0x<zxid>
mtime = <time>
pZxid = 0x<zxid>
cversion = 4
dataVersion = 0
aclVersion = 0
ephemeralOwner = 0x0
dataLength = 5
numChildren = 4
> stat /zkcli
cZxid = 0x<zxid>
ctime = <time>
mZxid = 0x<zxid>
mtime = <time>
pZxid = 0x<zxid>
cversion = 4
dataVersion = 0
aclVersion = 0
ephemeralOwner = 0x0
dataLength = 5
numChildren = 4
> stat /zkcli/eph
cZxid = 0x<zxid>
ctime = <time>
mZxid = 0x<zxid>
mtime = <time>
pZxid = 0x<zxid>
cversion = 0
dataVersion = 0
aclVersion = 0
ephemeralOwner = 0x<session>
dataLength = 1
numChildren = 0
> stat /zkcli-container
cZxid = 0x<zxid>
ctime = <time>
mZxid = 0x<zxid>
mtime = <time>
pZxid = 0x<zxid>
cversion = 1
dataVersion = 0
aclVersion = 0
ephemeralOwner = 0x0
dataLength = 1
numChildren = 1
> stat /zkcli-ttl
cZxid = 0x<zxid>
ctime = <time>
mZxid = 0x<zxid>
mtime = <time>
pZxid = 0x<zxid>
cversion = 0
dataVersion = 0
aclVersion = 0
ephemeralOwner = 0x0
dataLength = 1
numChildren = 0
> ls /zkcli
[eph, eph-seq-0000000002, seq-0000000001, seq-0000000003]
> ls -s /zkcli
[eph, eph-seq-0000000002, seq-0000000001, seq-0000000003]
cZxid = 0x<zxid>
ctime = <time>
mZxid = 0x<zxid>
mtime = <time>
pZxid = 0x<zxid>
cversion = 4
dataVersion = 0
aclVersion = 0
ephemeralOwner = 0x0
dataLength = 5
numChildren = 4
> ls -R /
/
/zkcli
/zkcli-container
/zkcli-ttl
/zookeeper
/zkcli/eph
/zkcli/eph-seq-0000000002
/zkcli/seq-0000000001
/zkcli/seq-0000000003
/zkcli-container/child
/zookeeper/config
/zookeeper/quota
> getAllChildrenNumber /zkcli
4
> getAllChildrenNumber /
11
> getEphemerals
[/zkcli/eph, /zkcli/eph-seq-0000000002]
> getEphemerals /zkcli/eph-
[/zkcli/eph-seq-0000000002]
> set /zkcli world
> set -s /zkcli again
cZxid = 0x<zxid>
ctime = <time>
mZxid = 0x<zxid>
mtime = <time>
pZxid = 0x<zxid>
cversion = 4
dataVersion = 2
aclVersion = 0
ephemeralOwner = 0x0
dataLength = 5
numChildren = 4
> set -v 0 /zkcli stale
version No is not valid : /zkcli
> get -w /zkcli
again
(second client) set /zkcli changed
Connecting to <server>
(exit) 0
> get /zkcli
changed
> ls -w /zkcli
[eph, eph-seq-0000000002, seq-0000000001, seq-0000000003]
(second client) create /zkcli/other o
Connecting to <server>
Created /zkcli/other
(exit) 0
> stat -w /zkcli-missing
Node does not exist: /zkcli-missing
(second client) create /zkcli-missing m
Connecting to <server>
Created /zkcli-missing
(exit) 0
> addWatch /zkcli
> create /zkcli/child c
Created /zkcli/child
> addWatch -m PERSISTENT /zkcli-container
(second client) set /zkcli-container c2
Connecting to <server>
(exit) 0
> whoami
Auth scheme: User
ip: 127.0.0.1
> addauth digest user:pass
> whoami
Auth scheme: User
ip: 127.0.0.1
digest: user
> create /zkcli-acl a
Created /zkcli-acl
> setAcl /zkcli-acl auth::cdrwa
> getAcl /zkcli-acl
'digest,'user:smGaoVKd/cQkjm7b88GyorAUz20=
: cdrwa
> setAcl -s /zkcli-acl digest:user:smGaoVKd/cQkjm7b88GyorAUz20=:cdrwa,world:anyone:r
cZxid = 0x<zxid>
ctime = <time>
mZxid = 0x<zxid>
mtime = <time>
pZxid = 0x<zxid>
cversion = 0
dataVersion = 0
aclVersion = 2
ephemeralOwner = 0x0
dataLength = 1
numChildren = 0
> getAcl -s /zkcli-acl
'digest,'user:smGaoVKd/cQkjm7b88GyorAUz20=
: cdrwa
'world,'anyone
: r
cZxid = 0x<zxid>
ctime = <time>
mZxid = 0x<zxid>
mtime = <time>
pZxid = 0x<zxid>
cversion = 0
dataVersion = 0
aclVersion = 2
ephemeralOwner = 0x0
dataLength = 1
numChildren = 0
(second client) set /zkcli-acl denied
Connecting to <server>
Insufficient permission : /zkcli-acl
(exit) 1
> get /zkcli-acl
a
> sync /zkcli
Sync is OK
> create /zkcli again
Node already exists: /zkcli
> delete /zkcli
Node not empty: /zkcli
> delete -v 7 /zkcli/child
version No is not valid : /zkcli/child
> delete /zkcli/child
> deleteall /zkcli
> ls /zkcli
Node does not exist: /zkcli
> get /zkcli
Node does not exist: /zkcli
> deleteall /zkcli-container
> delete /zkcli-ttl
> delete /zkcli-acl
> delete /zkcli-missing
> ls /
[zookeeper]
> create bad-path x
Path must start with / character
> quit
(events, sorted)
WatchedEvent state:Closed type:None path:null
WatchedEvent state:SyncConnected type:NodeChildrenChanged path:/zkcli
WatchedEvent state:SyncConnected type:NodeChildrenChanged path:/zkcli-container
WatchedEvent state:SyncConnected type:NodeCreated path:/zkcli-missing
WatchedEvent state:SyncConnected type:NodeCreated path:/zkcli/child
WatchedEvent state:SyncConnected type:NodeDataChanged path:/zkcli
WatchedEvent state:SyncConnected type:NodeDataChanged path:/zkcli-container
WatchedEvent state:SyncConnected type:NodeDeleted path:/zkcli
WatchedEvent state:SyncConnected type:NodeDeleted path:/zkcli-container
WatchedEvent state:SyncConnected type:NodeDeleted path:/zkcli/child
WatchedEvent state:SyncConnected type:NodeDeleted path:/zkcli/eph
WatchedEvent state:SyncConnected type:NodeDeleted path:/zkcli/eph-seq-0000000002
WatchedEvent state:SyncConnected type:NodeDeleted path:/zkcli/other
WatchedEvent state:SyncConnected type:NodeDeleted path:/zkcli/seq-0000000001
WatchedEvent state:SyncConnected type:NodeDeleted path:/zkcli/seq-0000000003
WatchedEvent state:SyncConnected type:None path:null
(exit) 1
"#;

/// A running `ZooKeeperMain` reading commands from its stdin.
struct ZkCli {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Non-event lines read but not yet given to a command.
    pending: Vec<String>,
    /// `WatchedEvent ...` lines, in arrival order.
    events: Vec<String>,
    markers: u32,
    transcript: String,
}

impl ZkCli {
    /// Starts the client of the installed ZooKeeper against `server` (`host:port`) and reads
    /// its banner.
    fn start(server: &str) -> Result<ZkCli, Box<dyn std::error::Error>> {
        let (mut cmd, out) = zookeeper_main(&["-server", server])?;
        let mut child = cmd.stdin(Stdio::piped()).spawn()?;
        // The command holds the writing ends of the output pipe: drop them, so the reader
        // sees the end of the output when the client exits.
        drop(cmd);
        let stdin = child.stdin.take();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut cli = ZkCli {
            child,
            stdin,
            lines,
            pending: Vec::new(),
            events: Vec::new(),
            markers: 0,
            transcript: String::new(),
        };
        cli.exchange("", server)?;
        Ok(cli)
    }

    fn send(&mut self, text: &str) -> std::io::Result<()> {
        let stdin = self.stdin.as_mut().ok_or(std::io::ErrorKind::BrokenPipe)?;
        stdin.write_all(text.as_bytes())?;
        stdin.flush()
    }

    /// Sorts one line into events and output.
    fn classify(&mut self, line: String) {
        let line = line.trim_end().to_string();
        if line.is_empty() || line == "WATCHER::" || line.starts_with("SLF4J:") {
            return;
        }
        if line.starts_with("WatchedEvent ") {
            self.events.push(line);
        } else {
            self.pending.push(line);
        }
    }

    /// Reads one line within `deadline`.
    fn read_line(&mut self, deadline: Instant, what: &str) -> Result<String, String> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(line) => Ok(line),
            Err(RecvTimeoutError::Timeout) => Err(format!(
                "no answer to {what} within {COMMAND_TIMEOUT:?}; transcript so far:\n{}",
                self.transcript
            )),
            Err(RecvTimeoutError::Disconnected) => Err(format!(
                "the client exited during {what}; transcript so far:\n{}",
                self.transcript
            )),
        }
    }

    /// Sends `command` (nothing for the banner) and the end marker, and records the output.
    fn exchange(&mut self, command: &str, server: &str) -> TestResult {
        self.markers += 1;
        let marker = format!("/zkcli-end-{}", self.markers);
        let mut text = String::new();
        if !command.is_empty() {
            text.push_str(command);
            text.push('\n');
        }
        text.push_str(&format!("ls {marker}\n"));
        self.send(&text)?;
        let end = format!("Node does not exist: {marker}");
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        loop {
            let line = self.read_line(deadline, command)?;
            if line.trim_end() == end {
                break;
            }
            self.classify(line);
        }
        let title = if command.is_empty() {
            "(banner)".to_string()
        } else {
            format!("> {command}")
        };
        self.transcript.push_str(&title);
        self.transcript.push('\n');
        for line in std::mem::take(&mut self.pending) {
            self.transcript.push_str(&normalise(&line, server));
            self.transcript.push('\n');
        }
        Ok(())
    }

    /// Records the output of a second client's command (without its events: whether it
    /// sees its own connection event before it exits is a race).
    fn record_second(&mut self, command: &[&str], output: &str, server: &str) {
        self.transcript
            .push_str(&format!("(second client) {}\n", command.join(" ")));
        for line in output.lines().map(str::trim_end) {
            if line.is_empty()
                || line == "WATCHER::"
                || line.starts_with("SLF4J:")
                || line.starts_with("WatchedEvent ")
            {
                continue;
            }
            self.transcript.push_str(&normalise(line, server));
            self.transcript.push('\n');
        }
    }

    /// Waits until an event line ending in `needle` (`type:<type> path:<path>`) has arrived.
    fn wait_event(&mut self, needle: &str) -> TestResult {
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        while !self.events.iter().any(|e| e.ends_with(needle)) {
            let line = self.read_line(deadline, &format!("the event {needle}"))?;
            self.classify(line);
        }
        Ok(())
    }

    /// Quits, waits for the client to exit and returns the whole normalised transcript.
    fn finish(mut self) -> Result<String, Box<dyn std::error::Error>> {
        self.send("quit\n")?;
        drop(self.stdin.take());
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        loop {
            match self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(line) => self.classify(line),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => return Err("the client did not exit".into()),
            }
        }
        let status = self.child.wait()?;
        let mut t = std::mem::take(&mut self.transcript);
        t.push_str("> quit\n");
        for line in std::mem::take(&mut self.pending) {
            t.push_str(&line);
            t.push('\n');
        }
        let mut events = std::mem::take(&mut self.events);
        events.sort();
        t.push_str("(events, sorted)\n");
        for e in events {
            t.push_str(&e);
            t.push('\n');
        }
        t.push_str(&format!("(exit) {}\n", status.code().unwrap_or(-1)));
        Ok(t)
    }
}

impl Drop for ZkCli {
    fn drop(&mut self) {
        // Kills only the client this driver started (a no-op once it has exited).
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `java ... org.apache.zookeeper.ZooKeeperMain <args>` with logging off, and the reading end
/// of the one pipe its stdout and stderr both go to.
fn zookeeper_main(
    args: &[&str],
) -> Result<(Command, std::io::PipeReader), Box<dyn std::error::Error>> {
    let install = Installation::locate()?;
    let (reader, writer) = std::io::pipe()?;
    let mut cmd = Command::new(&install.java);
    cmd.arg("-Xmx64m")
        .arg("-XX:+UseSerialGC")
        .arg("-XX:TieredStopAtLevel=1")
        .arg("-Djava.net.preferIPv4Stack=true")
        .arg("-Dorg.slf4j.simpleLogger.defaultLogLevel=off")
        .arg("-cp")
        .arg(&install.classpath)
        .arg("org.apache.zookeeper.ZooKeeperMain")
        .args(args)
        .stdin(Stdio::null())
        .stderr(writer.try_clone()?)
        .stdout(writer);
    Ok((cmd, reader))
}

/// Runs one command with a client of its own (`ZooKeeperMain -server <server> <command>`),
/// as a second client, and returns its output and exit code.
fn run_once(server: &str, command: &[&str]) -> Result<String, Box<dyn std::error::Error>> {
    let mut args = vec!["-server", server];
    args.extend_from_slice(command);
    let (mut cmd, mut out) = zookeeper_main(&args)?;
    let mut child = cmd.spawn()?;
    drop(cmd);
    let mut text = String::new();
    std::io::Read::read_to_string(&mut out, &mut text)?;
    let status = child.wait()?;
    text.push_str(&format!("(exit) {}\n", status.code().unwrap_or(-1)));
    Ok(text)
}

/// The normalisation rules of the module documentation, for one output line.
fn normalise(line: &str, server: &str) -> String {
    if let Some((key, value)) = line.split_once(" = ") {
        match key {
            "cZxid" | "mZxid" | "pZxid" if value.starts_with("0x") => {
                return format!("{key} = 0x<zxid>")
            }
            "ctime" | "mtime" => return format!("{key} = <time>"),
            "ephemeralOwner" => {
                let kept = value == "0x0"
                    || value == "0x8000000000000000"
                    || (value.len() == 18 && value.starts_with("0xff"));
                if !kept {
                    return format!("{key} = 0x<session>");
                }
            }
            _ => {}
        }
    }
    if let Some(inner) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
        let mut items: Vec<&str> = inner.split(", ").collect();
        items.sort_unstable();
        return format!("[{}]", items.join(", "));
    }
    line.replace(server, "<server>")
}

/// One step of the script.
enum Step {
    /// A command for the scripted client.
    Cli(&'static str),
    /// A command run by a second client, once (its output is not part of the transcript).
    Second(&'static [&'static str]),
    /// Wait until the scripted client has printed an event ending in this text.
    Event(&'static str),
}

/// The script: creates of every mode, reads, sets, watches fired by a second client,
/// persistent watches, auth and ACLs, sync, errors, deletes.
const SCRIPT: &[Step] = &[
    Step::Cli("create /zkcli hello"),
    Step::Cli("create -e /zkcli/eph e"),
    Step::Cli("create -s /zkcli/seq- s"),
    Step::Cli("create -e -s /zkcli/eph-seq- es"),
    Step::Cli("create -s /zkcli/seq- s2"),
    Step::Cli("create -c /zkcli-container c"),
    Step::Cli("create /zkcli-container/child x"),
    Step::Cli("create -t 600000 /zkcli-ttl t"),
    Step::Cli("get /zkcli"),
    Step::Cli("get -s /zkcli"),
    Step::Cli("stat /zkcli"),
    Step::Cli("stat /zkcli/eph"),
    Step::Cli("stat /zkcli-container"),
    Step::Cli("stat /zkcli-ttl"),
    Step::Cli("ls /zkcli"),
    Step::Cli("ls -s /zkcli"),
    Step::Cli("ls -R /"),
    Step::Cli("getAllChildrenNumber /zkcli"),
    Step::Cli("getAllChildrenNumber /"),
    Step::Cli("getEphemerals"),
    Step::Cli("getEphemerals /zkcli/eph-"),
    Step::Cli("set /zkcli world"),
    Step::Cli("set -s /zkcli again"),
    Step::Cli("set -v 0 /zkcli stale"),
    Step::Cli("get -w /zkcli"),
    Step::Second(&["set", "/zkcli", "changed"]),
    Step::Event("type:NodeDataChanged path:/zkcli"),
    Step::Cli("get /zkcli"),
    Step::Cli("ls -w /zkcli"),
    Step::Second(&["create", "/zkcli/other", "o"]),
    Step::Event("type:NodeChildrenChanged path:/zkcli"),
    Step::Cli("stat -w /zkcli-missing"),
    Step::Second(&["create", "/zkcli-missing", "m"]),
    Step::Event("type:NodeCreated path:/zkcli-missing"),
    Step::Cli("addWatch /zkcli"),
    Step::Cli("create /zkcli/child c"),
    Step::Event("type:NodeCreated path:/zkcli/child"),
    Step::Cli("addWatch -m PERSISTENT /zkcli-container"),
    Step::Second(&["set", "/zkcli-container", "c2"]),
    Step::Event("type:NodeDataChanged path:/zkcli-container"),
    Step::Cli("whoami"),
    Step::Cli("addauth digest user:pass"),
    Step::Cli("whoami"),
    Step::Cli("create /zkcli-acl a"),
    Step::Cli("setAcl /zkcli-acl auth::cdrwa"),
    Step::Cli("getAcl /zkcli-acl"),
    Step::Cli("setAcl -s /zkcli-acl digest:user:smGaoVKd/cQkjm7b88GyorAUz20=:cdrwa,world:anyone:r"),
    Step::Cli("getAcl -s /zkcli-acl"),
    Step::Second(&["set", "/zkcli-acl", "denied"]),
    Step::Cli("get /zkcli-acl"),
    Step::Cli("sync /zkcli"),
    Step::Cli("create /zkcli again"),
    Step::Cli("delete /zkcli"),
    Step::Cli("delete -v 7 /zkcli/child"),
    Step::Cli("delete /zkcli/child"),
    Step::Event("type:NodeDeleted path:/zkcli/child"),
    Step::Cli("deleteall /zkcli"),
    Step::Event("type:NodeDeleted path:/zkcli/eph"),
    Step::Event("type:NodeDeleted path:/zkcli/other"),
    Step::Event("type:NodeDeleted path:/zkcli/seq-0000000001"),
    Step::Event("type:NodeDeleted path:/zkcli"),
    Step::Cli("ls /zkcli"),
    Step::Cli("get /zkcli"),
    Step::Cli("deleteall /zkcli-container"),
    Step::Event("type:NodeDeleted path:/zkcli-container"),
    Step::Cli("delete /zkcli-ttl"),
    Step::Cli("delete /zkcli-acl"),
    Step::Cli("delete /zkcli-missing"),
    Step::Cli("ls /"),
    Step::Cli("create bad-path x"),
];

fn zkcli_transcript_matches_apache(flavour: Flavour, test: &str) -> TestResult {
    let Some(b) = support::builder(flavour, test)? else {
        return Ok(());
    };
    // TTL nodes need ZooKeeper's extended types (a system property zoo.cfg sets).
    let zk: ZkEnsemble = b.config("extendedTypesEnabled", "true").start()?;
    let server = zk.connect_string();
    let mut cli = ZkCli::start(&server)?;
    for step in SCRIPT {
        match step {
            Step::Cli(command) => cli.exchange(command, &server)?,
            Step::Second(command) => {
                let output = run_once(&server, command)?;
                cli.record_second(command, &output, &server);
            }
            Step::Event(needle) => cli.wait_event(needle)?,
        }
    }
    let transcript = cli.finish()?;
    if transcript != APACHE_TRANSCRIPT {
        println!("---- normalised transcript ----\n{transcript}---- end ----");
    }
    assert_eq!(transcript, APACHE_TRANSCRIPT);
    Ok(())
}

#[test]
fn zkcli_script_gives_apache_zookeepers_transcript() -> TestResult {
    zkcli_transcript_matches_apache(
        Flavour::Apache,
        "zkcli_script_gives_apache_zookeepers_transcript",
    )
}

#[test]
fn ha_zookeeper_zkcli_script_gives_apache_zookeepers_transcript() -> TestResult {
    zkcli_transcript_matches_apache(
        Flavour::HaZookeeper,
        "ha_zookeeper_zkcli_script_gives_apache_zookeepers_transcript",
    )
}
