//! `zkr`, the command-line tool, run as a user runs it: the built binary as a child process
//! against a real ZooKeeper (a container of the test's own, or `ZK_CONNECT` where a test does
//! not need to break its server).
//!
//! - two `zkr lock` processes doing a read-modify-write of one file never overlap, and
//!   `ZK_LOCK_TOKEN` grows (a `ZkMutex`, and a keyed lock with `--key`);
//! - a lock lost while CMD runs (its session expired on the server, behind a partition) ends
//!   CMD within `--grace` + 1 s with exit code 125; SIGINT to `zkr` stops CMD and frees the
//!   lock at once, while waiting and while CMD runs;
//! - `zkr elect --observe` prints each leader change once, in order;
//! - `inspect` on a fixture with every recipe kind, a Curator holder, a persistent squatter, a
//!   counter near its end and a holder cut off from the server prints each right (JSON);
//! - `watch` prints again on every change;
//! - bad input gets a message on stderr and its documented exit code, never a panic or a hang;
//! - `ZK_DIGEST` authenticates the session (a queue only its digest user may read);
//! - with `tls` and `sasl-digest-md5` too: on a TLS-only server that requires SASL, credentials
//!   from the environment take a lock, and no CA, a wrong password or a malformed `ZK_DIGEST`
//!   get their codes.
//!
//! The TLS and SASL tests need zkr's default features `tls` and `sasl-digest-md5`. The inspect fixture also needs a server of its
//! own (not `ZK_CONNECT`), `javac` and Debian's ZooKeeper and Curator jars (`.ci/test` installs
//! them); without them it prints why and passes without running.
#[path = "../../tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{contenders, wait_children, within, Zk};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use zk_recipes::{
    Session, SessionOptions, SessionState, ZkLeaderElection, ZkLockSpace, ZkMutex, ZkRwLock,
    ZkSemaphore,
};
use zk_testcontainers::{ensemble_unavailable_reason, scaled, FaultProxy, ZkServer};
use zookeeper_client as zkc;

/// The binary under test, built by cargo for this test target.
const ZKR: &str = env!("CARGO_BIN_EXE_zkr");

/// `zkr ARGS` on `connect`, with nothing on stdin; killed if the test ends first.
fn zkr(connect: &str, args: &[&str]) -> Command {
    let mut command = Command::new(ZKR);
    command
        .args(args)
        .env("ZK_CONNECT", connect)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command
}

/// What a finished `zkr` said.
#[derive(Debug)]
struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs `command` to its end (within `secs`, scaled).
async fn run(mut command: Command, secs: u64) -> Ran {
    let output = within(&format!("{command:?}"), secs, command.output()).await;
    let output = output.expect("zkr runs");
    let ran = Ran {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert!(
        !ran.stderr.contains("panicked"),
        "zkr panicked: {}",
        ran.stderr
    );
    ran
}

/// The lines of a child's pipe as they come, with when each was read.
struct Lines(mpsc::UnboundedReceiver<(Instant, String)>);

impl Lines {
    fn of(pipe: impl tokio::io::AsyncRead + Unpin + Send + 'static) -> Lines {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(pipe).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if tx.send((Instant::now(), line)).is_err() {
                    break;
                }
            }
        });
        Lines(rx)
    }

    /// The next line for which `pred` holds (skipping others), within `secs`.
    async fn until(
        &mut self,
        what: &str,
        secs: u64,
        pred: impl Fn(&str) -> bool,
    ) -> (Instant, String) {
        within(what, secs, async {
            loop {
                match self.0.recv().await {
                    Some((at, line)) if pred(&line) => return (at, line),
                    Some(_) => continue,
                    None => panic!("the output ended before {what}"),
                }
            }
        })
        .await
    }

    /// The next line, within `secs`.
    async fn next(&mut self, what: &str, secs: u64) -> String {
        self.until(what, secs, |_| true).await.1
    }

    /// Whatever is left once the writer is gone.
    async fn rest(&mut self) -> Vec<String> {
        let mut rest = Vec::new();
        within("the rest of the output", 10, async {
            while let Some((_, line)) = self.0.recv().await {
                rest.push(line);
            }
        })
        .await;
        rest
    }
}

/// A spawned `zkr` with its stdout and stderr read line by line.
struct Running {
    child: Child,
    stdout: Lines,
    stderr: Lines,
}

impl Running {
    fn spawn(mut command: Command) -> Running {
        let mut child = command.spawn().expect("zkr starts");
        Running {
            stdout: Lines::of(child.stdout.take().unwrap()),
            stderr: Lines::of(child.stderr.take().unwrap()),
            child,
        }
    }

    fn signal(&self, signal: i32) {
        let pid = self.child.id().expect("still running") as i32;
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    }

    async fn code(&mut self, secs: u64) -> i32 {
        let status = within("zkr to exit", secs, self.child.wait())
            .await
            .unwrap();
        status.code().unwrap_or(-1)
    }
}

fn process_exists(pid: i32) -> bool {
    unsafe { libc::kill(pid, 0) == 0 }
}

/// The chroot part of a connect string (`/zk-tests/...`).
fn chroot_of(connect: &str) -> &str {
    &connect[connect.find('/').unwrap_or(connect.len())..]
}

// ---------------------------------------------------------------------------------------------
// zkr lock

/// The read-modify-write each CMD does: enter (a directory that only one may create), read the
/// counter, pause, write it plus one, note the token, leave.
const RMW: &str = r#"d="$1"
mkdir "$d/inside" 2>/dev/null || { echo "overlap $ZK_LOCK_TOKEN" >> "$d/overlaps"; exit 99; }
n=$(cat "$d/count")
sleep 0.02
echo $((n + 1)) > "$d/count"
echo "$ZK_LOCK_TOKEN $ZK_SESSION_ID $ZK_LOCK_ROOT $ZK_LOCK_PATH" >> "$d/tokens"
rmdir "$d/inside"
"#;

/// Runs `rounds` of `zkr lock ARGS -- sh rmw.sh DIR`, one after the other.
async fn locker(connect: String, dir: std::path::PathBuf, args: Vec<String>, rounds: usize) {
    let script = dir.join("rmw.sh");
    for _ in 0..rounds {
        let mut all: Vec<&str> = vec!["lock"];
        all.extend(args.iter().map(String::as_str));
        all.extend(["--", "sh", script.to_str().unwrap(), dir.to_str().unwrap()]);
        let ran = run(zkr(&connect, &all), 60).await;
        assert_eq!(ran.code, 0, "zkr {all:?}: {}", ran.stderr);
    }
}

/// The tokens the CMDs noted, in the order they ran; checks the count and that none overlapped.
fn tokens_of(dir: &Path, expected: usize) -> Vec<(u64, String, String)> {
    assert!(
        !dir.join("overlaps").exists(),
        "critical sections overlapped: {}",
        std::fs::read_to_string(dir.join("overlaps")).unwrap()
    );
    let count: usize = std::fs::read_to_string(dir.join("count"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(count, expected, "an update was lost");
    std::fs::read_to_string(dir.join("tokens"))
        .unwrap()
        .lines()
        .map(|l| {
            let mut w = l.split_whitespace();
            let token = w.next().unwrap().parse().unwrap();
            let session = w.next().unwrap().to_owned();
            let root = w.next().unwrap().to_owned();
            (token, session, root)
        })
        .collect()
}

#[tokio::test]
async fn two_lockers_never_overlap_and_the_token_grows() {
    let zk = Zk::start("cli-lock").await;
    const ROUNDS: usize = 8;
    for (args, root) in [
        (vec!["/shared".to_owned()], "/shared"),
        (
            vec![
                "/orders".to_owned(),
                "--key".to_owned(),
                "order-7".to_owned(),
            ],
            "/orders/order-7",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("count"), "0\n").unwrap();
        std::fs::write(dir.path().join("rmw.sh"), RMW).unwrap();
        let a = locker(
            zk.connect.clone(),
            dir.path().to_owned(),
            args.clone(),
            ROUNDS,
        );
        let b = locker(
            zk.connect.clone(),
            dir.path().to_owned(),
            args.clone(),
            ROUNDS,
        );
        tokio::join!(a, b);
        let tokens = tokens_of(dir.path(), 2 * ROUNDS);
        assert_eq!(tokens.len(), 2 * ROUNDS);
        for pair in tokens.windows(2) {
            assert!(
                pair[0].0 < pair[1].0,
                "{root}: tokens did not grow: {tokens:?}"
            );
        }
        assert!(
            tokens.iter().all(|t| t.2 == root),
            "ZK_LOCK_ROOT: {tokens:?}"
        );
        assert!(
            tokens.iter().all(|t| t.1.starts_with("0x")),
            "ZK_SESSION_ID: {tokens:?}"
        );
        let sessions: std::collections::HashSet<_> = tokens.iter().map(|t| &t.1).collect();
        assert_eq!(sessions.len(), 2 * ROUNDS, "one session per zkr");
    }
    // Nothing is left behind: the mutex keeps its anchor, the key's directory is a container.
    let raw = zk.raw().await;
    assert_eq!(contenders(&raw, "/shared").await, Vec::<String>::new());
}

#[tokio::test]
async fn a_lock_lost_while_cmd_runs_ends_cmd_within_the_grace() {
    let zk = Zk::start("cli-lost").await;
    let raw = zk.raw().await;
    // zkr reaches the server through a proxy that the test can cut, as a partition would.
    let proxy = FaultProxy::start(zk.server.connect_string()).await.unwrap();
    let connect = format!("{}{}", proxy.addr(), chroot_of(&zk.connect));
    let grace = Duration::from_secs(1);
    // CMD ignores SIGTERM, so that it takes the SIGKILL after the grace.
    let mut cmd = zkr(
        &connect,
        &[
            "lock",
            "/lost",
            "--session-timeout",
            "2s",
            "--grace",
            "1s",
            "--",
            "sh",
            "-c",
            r#"trap "" TERM; echo "$$ $ZK_LOCK_PATH"; exec sleep 600"#,
        ],
    );
    cmd.stdin(Stdio::null());
    let mut zkr = Running::spawn(cmd);
    let started = zkr.stdout.next("CMD to start", 30).await;
    let (pid, node) = started.split_once(' ').unwrap();
    let pid: i32 = pid.parse().unwrap();
    let (stat, watcher) = raw.check_and_watch_stat(node).await.unwrap();
    assert!(stat.is_some(), "{node} is not there");

    // Nothing gets through: the server hears nothing from the session and expires it.
    proxy.blackhole();
    let event = within("the server to expire the session", 30, watcher.changed()).await;
    assert_eq!(event.event_type, zkc::EventType::NodeDeleted);
    let expired = Instant::now();
    proxy.heal();

    let (lost_at, lost) = zkr
        .stderr
        .until("zkr to report the loss", 30, |l| {
            l.contains("lost the lock")
        })
        .await;
    assert!(lost.contains("session expired"), "{lost}");
    let code = zkr.code(30).await;
    let ended = Instant::now();
    assert_eq!(code, 125, "the documented code for a lost lock");
    assert!(!process_exists(pid), "CMD (pid {pid}) is still running");
    let after_loss = ended - lost_at;
    assert!(
        after_loss <= scaled(grace + Duration::from_secs(1)),
        "CMD ended {after_loss:?} after the loss (grace {grace:?})"
    );
    let noticed = lost_at.saturating_duration_since(expired);
    assert!(
        noticed <= scaled(Duration::from_secs(5)),
        "zkr noticed the expiry {noticed:?} after the server"
    );
    let rest = zkr.stderr.rest().await.join("\n");
    assert!(rest.contains("SIGKILL"), "{rest}");
}

/// `zkr` itself frozen with SIGSTOP while CMD runs: its watchdog ends CMD before the next
/// holder's CMD starts (the next holder waits for the frozen session to expire); resumed, the
/// frozen zkr reports the loss.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_zkr_leaves_no_cmd_running_beside_the_next_holders() {
    let zk = Zk::start("cli-frozen").await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let log = log.to_str().unwrap();
    // Each CMD logs its start and its SIGTERM with a nanosecond timestamp.
    let script = format!(
        r#"echo "start $1 $(date +%s%N)" >> {log}; trap 'echo "term $1 $(date +%s%N)" >> {log}; exit 143' TERM; echo ready; while :; do sleep 0.02; done"#
    );
    let args = |who: &str| -> Vec<String> {
        [
            "lock",
            "/frozen",
            "--session-timeout",
            "2s",
            "--grace",
            "1s",
            "--",
            "sh",
            "-c",
            &script,
            "sh",
            who,
        ]
        .iter()
        .map(|a| a.to_string())
        .collect()
    };
    let first_args = args("first");
    let first_args: Vec<&str> = first_args.iter().map(String::as_str).collect();
    let mut first = Running::spawn(zkr(&zk.connect, &first_args));
    first.stdout.next("the first CMD to start", 30).await;
    first.signal(libc::SIGSTOP);
    let frozen = Instant::now();
    let second_args = args("second");
    let second_args: Vec<&str> = second_args.iter().map(String::as_str).collect();
    let mut second = Running::spawn(zkr(&zk.connect, &second_args));
    second.stdout.next("the second CMD to start", 30).await;
    let waited = frozen.elapsed();
    let text = std::fs::read_to_string(log).unwrap();
    let at = |what: &str| -> Option<i64> {
        text.lines()
            .find(|l| l.starts_with(what))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|t| t.parse().ok())
    };
    let Some(term) = at("term first") else {
        first.signal(libc::SIGCONT);
        let code = first.code(30).await;
        let said = first.stderr.rest().await.join("\n");
        panic!("the first CMD got no SIGTERM (zkr exited {code}):\n{text}\nzkr said:\n{said}");
    };
    let start = at("start second").unwrap();
    let ahead_ms = (start - term) / 1_000_000;
    println!("the frozen zkr's CMD got SIGTERM {ahead_ms} ms before the next holder's CMD started ({waited:?} after the freeze)");
    assert!(
        term < start,
        "the frozen zkr's CMD got SIGTERM {} ms after the next holder's CMD started",
        -ahead_ms
    );
    first.signal(libc::SIGCONT);
    assert_eq!(
        first.code(30).await,
        125,
        "the resumed zkr reports the loss"
    );
    second.signal(libc::SIGINT);
    let _ = second.code(30).await;
}

#[tokio::test]
async fn sigint_stops_cmd_and_frees_the_lock_at_once() {
    let zk = Zk::start("cli-sigint").await;
    let raw = zk.raw().await;
    // A long session: only a release at once explains a quick next grant.
    let long = ["--session-timeout", "30s"];
    let holder_args = [
        &["lock", "/int"][..],
        &long[..],
        &["--", "sh", "-c", "echo started; exec sleep 600"],
    ]
    .concat();
    let mut holder = Running::spawn(zkr(&zk.connect, &holder_args));
    holder
        .stdout
        .until("CMD to start", 30, |l| l == "started")
        .await;

    // A waiter interrupted while it waits withdraws its node at once.
    let waiter_args = [&["lock", "/int"][..], &long[..], &["--", "true"]].concat();
    let mut waiter = Running::spawn(zkr(&zk.connect, &waiter_args));
    wait_children(&raw, "/int", 2).await;
    waiter.signal(libc::SIGINT);
    assert_eq!(waiter.code(10).await, 130, "interrupted while waiting");
    let said = waiter.stderr.rest().await.join("\n");
    assert!(said.contains("interrupted by SIGINT"), "{said}");
    assert_eq!(
        contenders(&raw, "/int").await.len(),
        1,
        "the waiter's node is left"
    );

    // SIGINT to the holder reaches CMD; CMD dies of it; the lock is free at once.
    holder.signal(libc::SIGINT);
    let interrupted = Instant::now();
    assert_eq!(
        holder.code(10).await,
        130,
        "CMD's death by SIGINT, as a shell reports it"
    );
    let said = holder.stderr.rest().await.join("\n");
    assert!(said.contains("passing SIGINT on to CMD"), "{said}");
    let next = run(
        zkr(&zk.connect, &["lock", "/int", "--try", "--", "true"]),
        30,
    )
    .await;
    assert_eq!(
        next.code, 0,
        "the next zkr did not get the lock: {}",
        next.stderr
    );
    let took = interrupted.elapsed();
    assert!(
        took < scaled(Duration::from_secs(5)),
        "the lock was free only {took:?} after SIGINT (session timeout 30 s)"
    );
}

// ---------------------------------------------------------------------------------------------
// zkr elect

/// A candidate whose CMD leads until a line arrives on its stdin.
fn candidate(connect: &str, info: &str) -> Running {
    let mut cmd = zkr(
        connect,
        &[
            "elect",
            "/election",
            "--info",
            info,
            "--session-timeout",
            "2s",
            "--",
            "sh",
            "-c",
            r#"echo "leading $ZK_LEADER_TERM"; read line"#,
        ],
    );
    cmd.stdin(Stdio::piped());
    Running::spawn(cmd)
}

#[tokio::test]
async fn elect_observe_prints_each_leader_change_once_in_order() {
    let zk = Zk::start("cli-elect").await;
    let raw = zk.raw().await;
    let mut observer = Running::spawn(zkr(
        &zk.connect,
        &["elect", "/election", "--observe", "--json"],
    ));
    let leader_of = |line: &str| -> (Option<String>, Option<u64>) {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let leader = &v["leader"];
        (
            leader["info"].as_str().map(str::to_owned),
            leader["term"].as_u64(),
        )
    };
    let mut seen = Vec::new();
    let first = observer.stdout.next("the first report", 30).await;
    seen.push(leader_of(&first));
    assert_eq!(seen[0], (None, None), "nobody leads yet: {first}");

    let mut a = candidate(&zk.connect, "A");
    a.stdout
        .until("A to lead", 30, |l| l.starts_with("leading"))
        .await;
    seen.push(leader_of(&observer.stdout.next("A", 30).await));
    // B queues before C: one at a time, so that the order is known.
    let mut b = candidate(&zk.connect, "B");
    wait_children(&raw, "/election", 2).await;
    let mut c = candidate(&zk.connect, "C");
    wait_children(&raw, "/election", 3).await;
    let busy = run(
        zkr(&zk.connect, &["elect", "/election", "--try", "--", "true"]),
        30,
    )
    .await;
    assert_eq!(busy.code, 75, "--try while A leads: {}", busy.stderr);

    // A steps down (its CMD ends): B leads.
    a.child
        .stdin
        .take()
        .unwrap()
        .write_all(b"done\n")
        .await
        .unwrap();
    assert_eq!(a.code(10).await, 0);
    b.stdout
        .until("B to lead", 30, |l| l.starts_with("leading"))
        .await;
    seen.push(leader_of(&observer.stdout.next("B", 30).await));
    // B's zkr dies (SIGKILL): its CMD goes with it (the pipe they share closes), its session
    // expires, C leads.
    b.signal(libc::SIGKILL);
    b.stdout.rest().await;
    c.stdout
        .until("C to lead", 30, |l| l.starts_with("leading"))
        .await;
    seen.push(leader_of(&observer.stdout.next("C", 30).await));
    c.child
        .stdin
        .take()
        .unwrap()
        .write_all(b"done\n")
        .await
        .unwrap();
    assert_eq!(c.code(10).await, 0);
    seen.push(leader_of(&observer.stdout.next("no leader", 30).await));

    let infos: Vec<Option<&str>> = seen.iter().map(|s| s.0.as_deref()).collect();
    assert_eq!(infos, [None, Some("A"), Some("B"), Some("C"), None]);
    let terms: Vec<u64> = seen.iter().filter_map(|s| s.1).collect();
    assert!(terms.windows(2).all(|w| w[0] < w[1]), "terms {terms:?}");
    observer.signal(libc::SIGINT);
    assert_eq!(observer.code(10).await, 0);
    assert_eq!(
        observer.stdout.rest().await,
        Vec::<String>::new(),
        "a change reported twice"
    );
    let _ = b.code(10).await;
}

// ---------------------------------------------------------------------------------------------
// zkr inspect and watch

/// The counter the fixture's `/near-end` starts at: 1,000 creates from its end.
const NEAR_END_COUNTER: i32 = i32::MAX - 1000;
/// The crafted snapshot's zxid: above anything the server logged before its restart.
const SNAPSHOT_ZXID: u64 = 0x1_0000_0005;

/// The jars the Java helpers need, in /usr/share/java.
const CURATOR_JARS: &str = include_str!("../../examples/bench-peers/classpath.txt");

/// A server of the test's own, restarted on a snapshot where `/fx/near-end`'s counter stands
/// at [`NEAR_END_COUNTER`] (written by `tests/java/SequenceNearWrap.java`).
async fn server_with_a_counter_near_its_end(classpath: &str) -> ZkServer {
    let snapshot = tempfile::tempdir().unwrap();
    let out = Command::new("java")
        .args(["-cp", classpath, "SequenceNearWrap"])
        .arg(snapshot.path())
        .args([
            &NEAR_END_COUNTER.to_string(),
            &SNAPSHOT_ZXID.to_string(),
            "/fx/near-end",
        ])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let server = ZkServer::start().await.unwrap();
    server.stop().await.unwrap();
    // The image keeps its data in /data, as the official image does.
    let target = format!("{}:/data/version-2/", server.container_name());
    let out = Command::new("docker")
        .arg("cp")
        .arg(snapshot.path().join("version-2/."))
        .arg(target)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.start_again().await.unwrap();
    server
}

/// A session labelled `owner` (what `inspect` shows for its lock nodes).
async fn labelled(connect: &str, owner: &str) -> Session {
    Session::connect(
        SessionOptions::new(connect)
            .owner(owner)
            .session_timeout(Duration::from_secs(10))
            .connection_timeout(scaled(Duration::from_secs(10))),
    )
    .await
    .unwrap()
}

fn sid(session: &Session) -> String {
    format!("{:#x}", session.session_id().unwrap())
}

/// The queue at `path` in an inspect report.
fn queue<'a>(report: &'a Value, path: &str) -> &'a Value {
    report["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["path"] == path)
        .unwrap_or_else(|| panic!("no queue {path} in {report:#}"))
}

/// `field` of every contender of `q`.
fn column<'a>(q: &'a Value, field: &str) -> Vec<&'a Value> {
    q["contenders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c[field])
        .collect()
}

fn strs<'a>(values: &[&'a Value]) -> Vec<Option<&'a str>> {
    values.iter().map(|v| v.as_str()).collect()
}

fn warning_kinds(q: &Value) -> Vec<&str> {
    q["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["kind"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn inspect_shows_every_recipe_kind_right() {
    if let Some(reason) = ensemble_unavailable_reason() {
        println!("not run: needs a server of its own for the crafted counter ({reason})");
        return;
    }
    let classes = tempfile::tempdir().unwrap();
    let mut jars: Vec<&str> = CURATOR_JARS.lines().collect();
    jars.push("zookeeper-jute");
    let java = support::compile_java(
        "../tests/java/SequenceNearWrap.java",
        &jars,
        "libzookeeper-java libcurator-recipes-java",
        classes.path(),
    )
    .await;
    let classpath = match java {
        Ok(_) => support::compile_java(
            "../examples/bench-peers/CuratorInterop.java",
            &jars,
            "libcurator-recipes-java",
            classes.path(),
        )
        .await
        .unwrap(),
        Err(why) => {
            println!("not run: {why}");
            return;
        }
    };
    let server = server_with_a_counter_near_its_end(&classpath).await;
    let connect = format!("{}/fx", server.connect_string());
    let raw = zkc::Client::connect(&connect).await.unwrap();
    let open = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    let mut tasks = Vec::new();
    let mut keep: Vec<Box<dyn std::any::Any + Send>> = Vec::new();

    // A mutex: a holder and two waiters.
    let s_mutex = labelled(&connect, "mutex-holder").await;
    let mutex_guard = ZkMutex::new(&s_mutex, "/mutex")
        .unwrap()
        .lock()
        .await
        .unwrap();
    let mut mutex_waiters = Vec::new();
    for i in 1..=2 {
        let s = labelled(&connect, &format!("mutex-waiter-{i}")).await;
        mutex_waiters.push(sid(&s));
        tasks.push(tokio::spawn(async move {
            let g = ZkMutex::new(&s, "/mutex").unwrap().lock().await;
            drop(g);
        }));
        wait_children(&raw, "/mutex", i + 1).await;
    }

    // A lock space: key order-42 held and awaited, key a/b held.
    let s_order = labelled(&connect, "order-holder").await;
    let space = ZkLockSpace::new(&s_order, "/orders").unwrap();
    let order_guard = space.lock("order-42").await.unwrap();
    let ab_guard = space.lock("a/b").await.unwrap();
    let s = labelled(&connect, "order-waiter").await;
    tasks.push(tokio::spawn(async move {
        let g = ZkLockSpace::new(&s, "/orders")
            .unwrap()
            .lock("order-42")
            .await;
        drop(g);
    }));
    wait_children(&raw, "/orders/order-42", 2).await;

    // A read/write lock: two readers hold, a writer and a reader wait.
    let s_r1 = labelled(&connect, "reader-1").await;
    let s_r2 = labelled(&connect, "reader-2").await;
    keep.push(Box::new(
        ZkRwLock::new(&s_r1, "/catalog")
            .unwrap()
            .read()
            .await
            .unwrap(),
    ));
    keep.push(Box::new(
        ZkRwLock::new(&s_r2, "/catalog")
            .unwrap()
            .read()
            .await
            .unwrap(),
    ));
    for (i, (label, write)) in [("writer", true), ("reader-3", false)]
        .into_iter()
        .enumerate()
    {
        let s = labelled(&connect, label).await;
        tasks.push(tokio::spawn(async move {
            let lock = ZkRwLock::new(&s, "/catalog").unwrap();
            let g = if write {
                lock.write().await
            } else {
                lock.read().await
            };
            drop(g);
        }));
        wait_children(&raw, "/catalog", 3 + i).await;
    }

    // A semaphore of 2: two leases, a third waiting for room, a fourth for the lock.
    for i in 1..=4 {
        let s = labelled(&connect, &format!("lease-{i}")).await;
        let semaphore = ZkSemaphore::new(&s, "/pool", 2).unwrap();
        if i <= 2 {
            keep.push(Box::new(semaphore.acquire().await.unwrap()));
            keep.push(Box::new(s));
        } else {
            tasks.push(tokio::spawn(async move {
                let g = semaphore.acquire().await;
                drop((g, s));
            }));
            match i {
                3 => wait_children(&raw, "/pool/leases", 3).await,
                _ => wait_children(&raw, "/pool/locks", 2).await,
            }
        }
    }

    // An election: a leader and a candidate.
    let s_leader = labelled(&connect, "x").await;
    let leadership = ZkLeaderElection::new(&s_leader, "/election", "leader-info")
        .unwrap()
        .campaign()
        .await
        .unwrap();
    let s = labelled(&connect, "x").await;
    tasks.push(tokio::spawn(async move {
        let l = ZkLeaderElection::new(&s, "/election", "candidate-info")
            .unwrap()
            .campaign()
            .await;
        drop(l);
    }));
    wait_children(&raw, "/election", 2).await;

    // A Curator InterProcessMutex holder (Java), whose root Curator makes as a container.
    let mut curator = Command::new("java")
        .args(["-cp", &classpath, "CuratorInterop", "--connect", &connect])
        .args([
            "--recipe",
            "mutex",
            "--root",
            "/curator",
            "--inside",
            "/curator-inside",
        ])
        .args(["--rounds", "1", "--timeout-ms", "30000", "--wait-go"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut curator_out = Lines::of(curator.stdout.take().unwrap());
    let mut curator_in = curator.stdin.take().unwrap();
    curator_out
        .until("Curator to connect", 60, |l| l == "JAVA READY")
        .await;
    curator_in.write_all(b"GO\n").await.unwrap();
    curator_out
        .until("Curator to hold", 30, |l| l.starts_with("JAVA IN 0"))
        .await;

    // A persistent squatter in a mutex queue, and a contender behind it (zk-recipes passes the
    // squatter over and holds; Curator's contenders would wait behind it).
    raw.create("/squatted", &[], &open).await.unwrap();
    raw.create(
        "/squatted/lock-",
        b"",
        &zkc::CreateMode::PersistentSequential.with_acls(zkc::Acls::anyone_all()),
    )
    .await
    .unwrap();
    let s = labelled(&connect, "squat-victim").await;
    tasks.push(tokio::spawn(async move {
        let _g = ZkMutex::new(&s, "/squatted").unwrap().lock().await;
        std::future::pending::<()>().await;
    }));
    wait_children(&raw, "/squatted", 2).await;

    // The counter near its end (from the snapshot): a holder there.
    let s_near = labelled(&connect, "near-end-holder").await;
    let near_guard = ZkMutex::new(&s_near, "/near-end")
        .unwrap()
        .lock()
        .await
        .unwrap();

    // kazoo's lock nodes (made with a raw client, named as kazoo names them), a holder and a
    // waiter; and zookeeper-client's own Client::lock with Curator's names.
    raw.create("/kazoo", &[], &open).await.unwrap();
    let kazoo_1 = zkc::Client::connect(&connect).await.unwrap();
    let kazoo_2 = zkc::Client::connect(&connect).await.unwrap();
    let eph_seq = zkc::CreateMode::EphemeralSequential.with_acls(zkc::Acls::anyone_all());
    for (client, hex, data) in [
        (
            &kazoo_1,
            "3f2a9c0d5e6b4f718293a4b5c6d7e8f9",
            "kazoo-worker-1",
        ),
        (
            &kazoo_2,
            "a1b2c3d4e5f60718293a4b5c6d7e8f90",
            "kazoo-worker-2",
        ),
    ] {
        client
            .create(&format!("/kazoo/{hex}__lock__"), data.as_bytes(), &eph_seq)
            .await
            .unwrap();
    }
    let zkc_client = zkc::Client::connect(&connect).await.unwrap();
    let zkc_lock = zkc_client
        .lock(
            zkc::LockPrefix::new_curator("/zkc", "lock-").unwrap(),
            b"zkc-holder",
            zkc::LockOptions::new(zkc::Acls::anyone_all())
                .with_ancestor_options(
                    zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all()),
                )
                .unwrap(),
        )
        .await
        .unwrap();

    // A holder cut off from the server (its host gone): its session lives on, unconnected.
    let proxy = FaultProxy::start(server.connect_string()).await.unwrap();
    let cut_connect = format!("{}/fx", proxy.addr());
    let s_cut = Session::connect(
        SessionOptions::new(cut_connect)
            .owner("cut-off-host/4242")
            .session_timeout(Duration::from_secs(40))
            .connection_timeout(scaled(Duration::from_secs(10))),
    )
    .await
    .unwrap();
    let cut_sid = s_cut.session_id().unwrap();
    let cut_guard = ZkMutex::new(&s_cut, "/disconnected")
        .unwrap()
        .lock()
        .await
        .unwrap();
    let mut cut_state = s_cut.watch_state();
    proxy.blackhole();
    proxy.drop_connections();
    within(
        "the cut-off client to notice",
        20,
        cut_state.wait_for(|s| !matches!(s, SessionState::Connected { .. })),
    )
    .await
    .unwrap();
    // The server learns of the closed connection by itself: until its `cons` drops the session
    // (bounded: each try is one request).
    let hex = format!("sid={cut_sid:#x}");
    let mut tries = 0;
    while server.four_letter("cons").await.unwrap().contains(&hex) {
        tries += 1;
        assert!(tries < 500, "the server kept the cut-off connection");
        tokio::task::yield_now().await;
    }

    // What zkr says.
    let json = run(
        zkr(&connect, &["inspect", "/", "--recursive", "--json"]),
        60,
    )
    .await;
    assert_eq!(json.code, 0, "{}", json.stderr);
    let report: Value =
        serde_json::from_str(&json.stdout).unwrap_or_else(|e| panic!("{e}: {}", json.stdout));
    assert_eq!(report["sessions_checked"], true, "{report:#}");

    let q = queue(&report, "/mutex");
    assert_eq!(
        (q["kind"].as_str(), q["tokens"].as_str()),
        (Some("mutex"), Some("sequence"))
    );
    assert_eq!(q["libraries"], serde_json::json!(["zk-recipes"]));
    assert_eq!(
        strs(&column(q, "role")),
        [Some("holder"), Some("waiter"), Some("waiter")]
    );
    assert_eq!(
        strs(&column(q, "owner")),
        [
            Some("mutex-holder"),
            Some("mutex-waiter-1"),
            Some("mutex-waiter-2")
        ]
    );
    let sessions = strs(&column(q, "session"));
    assert_eq!(sessions[0], Some(sid(&s_mutex).as_str()));
    assert_eq!(
        sessions[1..],
        mutex_waiters
            .iter()
            .map(|s| Some(s.as_str()))
            .collect::<Vec<_>>()[..]
    );
    assert_eq!(
        column(q, "token")[0].as_u64(),
        Some(mutex_guard.token().as_u64())
    );
    let nodes = strs(&column(q, "node"));
    assert_eq!(strs(&column(q, "waits_for")), [None, nodes[0], nodes[1]]);
    assert!(strs(&column(q, "session_state"))
        .iter()
        .all(|s| *s == Some("connected")));
    assert!(column(q, "age_ms").iter().all(|a| a.as_i64().unwrap() >= 0));
    assert_eq!(warning_kinds(q), Vec::<&str>::new());
    // Each session's silence, against the timeout its server negotiated (10 s, asked for).
    assert!(column(q, "session_timeout_ms")
        .iter()
        .all(|t| t.as_i64() == Some(10_000)));
    assert!(
        column(q, "silent_ms")
            .iter()
            .all(|s| s.as_i64().is_some_and(|ms| (0..5_000).contains(&ms))),
        "{q:#}"
    );
    // Each root's kind from its mark.
    for (path, marked_as) in [
        ("/mutex", Some("ZkMutex")),
        ("/catalog", Some("ZkRwLock")),
        ("/election", Some("ZkLeaderElection")),
        ("/pool", Some("ZkSemaphore")),
        ("/curator", None),
        ("/orders/order-42", None),
    ] {
        assert_eq!(
            queue(&report, path)["marked_as"].as_str(),
            marked_as,
            "{path}"
        );
    }
    assert_eq!(queue(&report, "/orders/order-42")["lock_space"], "/orders");

    let q = queue(&report, "/orders/order-42");
    assert_eq!(
        (q["kind"].as_str(), q["key"].as_str(), q["tokens"].as_str()),
        (Some("keyed-lock"), Some("order-42"), Some("czxid"))
    );
    assert_eq!(
        column(q, "token")[0].as_u64(),
        Some(order_guard.token().as_u64())
    );
    assert_eq!(
        strs(&column(q, "owner")),
        [Some("order-holder"), Some("order-waiter")]
    );
    let q = queue(&report, "/orders/a%2Fb");
    assert_eq!(q["key"], "a/b");
    assert_eq!(
        column(q, "token")[0].as_u64(),
        Some(ab_guard.token().as_u64())
    );
    assert_eq!(warning_kinds(q), Vec::<&str>::new());

    let q = queue(&report, "/catalog");
    assert_eq!(q["kind"], "rwlock");
    assert_eq!(
        strs(&column(q, "role")),
        [
            Some("holder"),
            Some("holder"),
            Some("waiter"),
            Some("waiter")
        ]
    );
    assert_eq!(
        strs(&column(q, "wants")),
        [Some("read"), Some("read"), Some("write"), Some("read")]
    );
    assert_eq!(
        strs(&column(q, "owner")),
        [
            Some("reader-1"),
            Some("reader-2"),
            Some("writer"),
            Some("reader-3")
        ]
    );
    let nodes = strs(&column(q, "node"));
    assert_eq!(
        strs(&column(q, "waits_for")),
        [None, None, nodes[1], nodes[2]]
    );

    let q = queue(&report, "/pool");
    assert_eq!(
        (q["kind"].as_str(), q["permits"].as_u64()),
        (Some("semaphore"), Some(2))
    );
    assert_eq!(
        strs(&column(q, "role")),
        [
            Some("holder"),
            Some("holder"),
            Some("waiter"),
            Some("waiter")
        ]
    );
    assert_eq!(
        strs(&column(q, "owner")),
        [
            Some("lease-1"),
            Some("lease-2"),
            Some("lease-3"),
            Some("lease-4")
        ]
    );
    let waits = strs(&column(q, "waits_for"));
    assert_eq!(waits[2], Some("a free lease (2 of 2 taken)"));
    assert!(waits[3].unwrap().starts_with("locks/lock-"), "{waits:?}");
    assert!(strs(&column(q, "node"))[3].unwrap().starts_with("locks/"));

    let q = queue(&report, "/election");
    assert_eq!(q["kind"], "election");
    // A zk-recipes election: its candidates carry the user's data, its root the anchor.
    assert_eq!(q["libraries"], serde_json::json!(["zk-recipes"]));
    assert_eq!(
        strs(&column(q, "owner")),
        [Some("leader-info"), Some("candidate-info")]
    );
    assert_eq!(
        column(q, "token")[0].as_u64(),
        Some(leadership.term().as_u64())
    );

    let q = queue(&report, "/curator");
    assert_eq!(
        (q["kind"].as_str(), q["anchored"].as_bool()),
        (Some("mutex"), Some(false))
    );
    assert_eq!(q["libraries"], serde_json::json!(["curator"]));
    assert_eq!(strs(&column(q, "role")), [Some("holder")]);
    assert!(
        column(q, "owner")[0].as_str().is_some(),
        "Curator's node data: {q:#}"
    );
    assert_eq!(warning_kinds(q), ["unanchored-root"]);

    let q = queue(&report, "/squatted");
    assert_eq!(
        strs(&column(q, "session")),
        [None, Some(sid_of(q, 1).as_str())]
    );
    assert_eq!(strs(&column(q, "owner"))[1], Some("squat-victim"));
    assert_eq!(warning_kinds(q), ["persistent-node"]);
    // The victim holds, as the library decides (it passes the squatter over); the squatter
    // shows as a holder for the clients that count it.
    assert_eq!(strs(&column(q, "role")), [Some("holder"), Some("holder")]);
    assert!(column(q, "waits_for")[1].is_null(), "{q:#}");

    let q = queue(&report, "/near-end");
    let last = i64::from(i32::MAX);
    assert_eq!(
        column(q, "token")[0].as_u64(),
        Some(near_guard.token().as_u64())
    );
    assert_eq!(
        near_guard.token().as_u64(),
        (last - 999) as u64,
        "the anchor took one create"
    );
    assert_eq!(q["counter"]["left"].as_i64(), Some(998));
    assert_eq!(warning_kinds(q), ["counter-near-end"]);

    let q = queue(&report, "/kazoo");
    assert_eq!(
        (q["kind"].as_str(), q["tokens"].as_str()),
        (Some("mutex"), Some("none"))
    );
    assert_eq!(q["libraries"], serde_json::json!(["kazoo"]));
    assert_eq!(
        strs(&column(q, "owner")),
        [Some("kazoo-worker-1"), Some("kazoo-worker-2")]
    );
    assert_eq!(strs(&column(q, "role")), [Some("holder"), Some("waiter")]);

    let q = queue(&report, "/zkc");
    assert_eq!(q["libraries"], serde_json::json!(["curator"]));
    assert_eq!(strs(&column(q, "owner")), [Some("zkc-holder")]);

    let q = queue(&report, "/disconnected");
    assert_eq!(
        strs(&column(q, "session")),
        [Some(format!("{cut_sid:#x}").as_str())]
    );
    assert_eq!(strs(&column(q, "session_state")), [Some("disconnected")]);
    assert_eq!(warning_kinds(q), ["session-disconnected"]);

    // The same as a table, for people (and zkr/README.md).
    let table = run(zkr(&connect, &["inspect", "/", "--recursive"]), 60).await;
    assert_eq!(table.code, 0, "{}", table.stderr);
    println!("zkr inspect / --recursive\n{}", table.stdout);
    for expected in [
        "/mutex  mutex (zk-recipes)",
        "/orders/order-42  keyed-lock (zk-recipes)  key \"order-42\"",
        "/pool  semaphore (zk-recipes)  marked ZkSemaphore  permits 2",
        "/mutex  mutex (zk-recipes)  marked ZkMutex  tokens: sequence",
        "! persistent-node",
        "! counter-near-end: 998 tokens left",
        "! unanchored-root",
        "(no connection)",
        "mutex-waiter-2",
        "kazoo-worker-1",
    ] {
        assert!(
            table.stdout.contains(expected),
            "{expected:?} missing from\n{}",
            table.stdout
        );
    }
    // Without --recursive: PATH and its children (here the lock space's keys).
    let shallow = run(
        zkr(&connect, &["inspect", "/orders", "--json", "--no-sessions"]),
        60,
    )
    .await;
    let shallow: Value = serde_json::from_str(&shallow.stdout).unwrap();
    assert_eq!(
        shallow["queues"].as_array().unwrap().len(),
        2,
        "{shallow:#}"
    );
    assert_eq!(shallow["sessions_checked"], false);

    drop((
        mutex_guard,
        order_guard,
        ab_guard,
        near_guard,
        cut_guard,
        leadership,
        keep,
        zkc_lock,
    ));
    for task in tasks {
        task.abort();
    }
    let _ = curator_in.write_all(b"GO\n").await;
    let _ = curator.kill().await;
}

/// The session of the `i`th contender of `q`, as a string.
fn sid_of(q: &Value, i: usize) -> String {
    column(q, "session")[i].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn watch_prints_again_on_every_change() {
    let zk = Zk::start("cli-watch").await;
    let session = zk.session().await;
    let mut watch = Running::spawn(zkr(
        &zk.connect,
        &["watch", "/w", "--json", "--no-sessions"],
    ));
    let report = |line: String| -> Value {
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line}: {e}"))
    };
    let first = report(watch.stdout.next("the first snapshot", 30).await);
    assert_eq!(first["queues"], serde_json::json!([]), "{first:#}");

    // A lock taken: a snapshot with its holder (the root's creation may come first).
    let guard = ZkMutex::new(&session, "/w/job")
        .unwrap()
        .lock()
        .await
        .unwrap();
    let node = guard.path().rsplit('/').next().unwrap().to_owned();
    let holds = |v: &Value| {
        v["queues"].as_array().unwrap().iter().any(|q| {
            q["path"] == "/w/job"
                && q["contenders"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|c| c["node"] == node.as_str())
        })
    };
    within("a snapshot with the holder", 30, async {
        while !holds(&report(watch.stdout.next("a snapshot", 30).await)) {}
    })
    .await;
    guard.release().await.unwrap();
    within("a snapshot without it", 30, async {
        loop {
            let v = report(watch.stdout.next("a snapshot", 30).await);
            if !holds(&v)
                && v["queues"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|q| q["path"] == "/w/job")
            {
                break;
            }
        }
    })
    .await;
    watch.signal(libc::SIGTERM);
    assert_eq!(watch.code(10).await, 0);
    session.close().await;
}

/// Every line of a `--json` zkr's stderr: one object with an `event` each.
fn json_lines(stderr: &str) -> Vec<Value> {
    stderr
        .lines()
        .map(|l| {
            let v: Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
            assert!(v["event"].is_string(), "no event: {l}");
            v
        })
        .collect()
}

/// A contender node of an earlier ZkMutex (or `zkr lock`): ephemeral, sequential, with an
/// owner record, made by a raw client.
async fn raw_contender(client: &zkc::Client, root: &str, name: &str, owner: &str) -> String {
    let data = format!("id=0f8fad5b-d9cb-469f-a165-70867728950e\nowner={owner}\n");
    let (_, sequence) = client
        .create(
            &format!("{root}/{name}"),
            data.as_bytes(),
            &zkc::CreateMode::EphemeralSequential.with_acls(zkc::Acls::anyone_all()),
        )
        .await
        .unwrap();
    format!("{name}{sequence}")
}

/// The issue's slip: `zkr lock /shop/orders/order-1 -- CMD` (`--key` forgotten) with an
/// earlier version anchored the key's directory; every keyed worker then refuses the key.
/// `inspect` flags it with the fix, `repair` refuses while someone is there (naming them) and
/// refuses what is no anchored key (a lock space, a ZkMutex root in a plain directory), makes
/// no change with `--dry-run`, and repairs; keyed workers lock order-1 again. An unmarked space
/// of an earlier version is told by its key in use.
#[tokio::test]
async fn repair_removes_an_anchored_key_and_nothing_else() {
    let zk = Zk::start("cli-repair").await;
    let raw = zk.raw().await;
    let session = zk.session().await;
    let open = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    // A lock space in use (this version marks it), and the slip in its key order-1.
    let space = ZkLockSpace::new(&session, "/shop/orders").unwrap();
    let other_key = space.lock("order-2").await.unwrap();
    raw.create("/shop/orders/order-1", &[], &open)
        .await
        .unwrap();
    let anchor = "/shop/orders/order-1/~zk-recipes-anchor";
    raw.create(anchor, &[], &open).await.unwrap();
    match space.try_lock("order-1").await {
        Err(zk_recipes::Error::UnsuitableRoot { kind, .. }) => {
            assert_eq!(kind, zk_recipes::RootKind::AnchoredKey)
        }
        other => panic!("the keyed lock took an anchored key: {other:?}"),
    }

    // inspect flags it, with the one command that removes it.
    let ran = run(zkr(&zk.connect, &["inspect", "/shop/orders", "--json"]), 30).await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let report: Value = serde_json::from_str(&ran.stdout).unwrap();
    let q = queue(&report, "/shop/orders/order-1");
    assert_eq!(q["kind"], "idle");
    assert_eq!(q["lock_space"], "/shop/orders");
    assert_eq!(q["mark"], "", "an earlier version's anchor: no mark");
    assert_eq!(warning_kinds(q), ["anchored-key"]);
    assert_eq!(
        q["warnings"][0]["message"],
        "key order-1: anchored as a ZkMutex root (`zkr lock` without --key?): ZkLockSpace \
         workers refuse it; fix: zkr repair /shop/orders/order-1"
    );
    let q = queue(&report, "/shop/orders/order-2");
    assert_eq!(q["kind"], "keyed-lock");
    assert_eq!(warning_kinds(q), Vec::<&str>::new());
    let table = run(zkr(&zk.connect, &["inspect", "/shop/orders"]), 30).await;
    println!("zkr inspect /shop/orders\n{}", table.stdout);
    assert!(
        table.stdout.contains("! anchored-key: key order-1"),
        "{}",
        table.stdout
    );

    // Someone holds there (an earlier ZkMutex's node): refused, naming them; nothing touched.
    let squatter = zkc::Client::connect(&zk.connect).await.unwrap();
    let node = raw_contender(&squatter, "/shop/orders/order-1", "lock-", "cron@db-1/77").await;
    let sid = format!("{:#x}", squatter.session_id().0);
    let busy = run(zkr(&zk.connect, &["repair", "/shop/orders/order-1"]), 30).await;
    assert_eq!(busy.code, 75, "{}", busy.stderr);
    println!("zkr repair (busy): {}", busy.stderr);
    for part in [
        node.as_str(),
        "cron@db-1/77",
        sid.as_str(),
        "nothing touched",
    ] {
        assert!(
            busy.stderr.contains(part),
            "{part:?} not in {}",
            busy.stderr
        );
    }
    let busy = run(
        zkr(&zk.connect, &["repair", "/shop/orders/order-1", "--json"]),
        30,
    )
    .await;
    assert_eq!(busy.code, 75);
    let lines = json_lines(&busy.stderr);
    assert_eq!(lines.len(), 1, "{}", busy.stderr);
    assert_eq!(
        (lines[0]["event"].as_str(), lines[0]["reason"].as_str()),
        (Some("refused"), Some("busy"))
    );
    assert_eq!(
        lines[0]["contenders"],
        serde_json::json!([{"node": node, "owner": "cron@db-1/77", "session": sid}])
    );
    assert!(
        raw.check_stat(anchor).await.unwrap().is_some(),
        "the anchor went"
    );
    drop(squatter);
    wait_children(&raw, "/shop/orders/order-1", 0).await;

    // What is no anchored key is refused, untouched: the space itself, a ZkMutex root in a
    // plain directory (its sequence is its tokens), a path without an anchor.
    let mutex = ZkMutex::new(&session, "/jobs/nightly").unwrap();
    mutex.lock().await.unwrap().release().await.unwrap();
    ZkMutex::new(&session, "/jobs/hourly")
        .unwrap()
        .lock()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    for (path, code, message) in [
        ("/shop/orders", 70, "a lock space itself"),
        (
            "/jobs/nightly",
            70,
            "cannot be told from a plain directory of ZkMutex roots",
        ),
        ("/shop/orders/order-2", 70, "carries no ~zk-recipes-anchor"),
        ("/shop/nothing", 66, "no such node"),
    ] {
        let ran = run(zkr(&zk.connect, &["repair", path]), 30).await;
        assert_eq!(ran.code, code, "{path}: {}", ran.stderr);
        assert!(ran.stderr.contains(message), "{path}: {}", ran.stderr);
    }
    assert!(raw
        .check_stat("/jobs/nightly/~zk-recipes-anchor")
        .await
        .unwrap()
        .is_some());

    // --dry-run says what it would do and does nothing; then the repair.
    let dry = run(
        zkr(
            &zk.connect,
            &["repair", "/shop/orders/order-1", "--dry-run"],
        ),
        30,
    )
    .await;
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(
        dry.stdout.starts_with("would repair /shop/orders/order-1"),
        "{}",
        dry.stdout
    );
    assert!(raw.check_stat(anchor).await.unwrap().is_some());
    let done = run(zkr(&zk.connect, &["repair", "/shop/orders/order-1"]), 30).await;
    assert_eq!(done.code, 0, "{}", done.stderr);
    println!("zkr repair: {}", done.stdout);
    assert!(
        done.stdout.starts_with("repaired /shop/orders/order-1"),
        "{}",
        done.stdout
    );
    assert_eq!(raw.check_stat("/shop/orders/order-1").await.unwrap(), None);
    // Keyed workers lock order-1 again: a zxid token, a container directory.
    let guard = space.lock("order-1").await.unwrap();
    let stat = raw.check_stat(guard.path()).await.unwrap().unwrap();
    assert_eq!(guard.token().as_u64(), stat.czxid as u64);
    guard.release().await.unwrap();

    // A space of an earlier version carries no mark: told by its key in use.
    raw.create("/old", &[], &open).await.unwrap();
    raw.create("/old/k2", &[], &open).await.unwrap();
    let worker = zkc::Client::connect(&zk.connect).await.unwrap();
    raw_contender(
        &worker,
        "/old/k2",
        "_c_4e8b4b4a-0c49-4b0f-9d8a-5d5e1b1f9c11-lock-",
        "w/1",
    )
    .await;
    raw.create("/old/k1", &[], &open).await.unwrap();
    raw.create("/old/k1/~zk-recipes-anchor", &[], &open)
        .await
        .unwrap();
    let ran = run(zkr(&zk.connect, &["repair", "/old/k1", "--json"]), 30).await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let v: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(
        (
            v["event"].as_str(),
            v["space"].as_str(),
            v["space_key_in_use"].as_str()
        ),
        (Some("repaired"), Some("key-in-use"), Some("k2"))
    );
    assert_eq!(raw.check_stat("/old/k1").await.unwrap(), None);
    other_key.release().await.unwrap();
    session.close().await;
}

/// The hot lock of issue 22: a ZkMutex root with 20,000 waiters, more than `--max-nodes`'
/// default. The anchor is read by path, so the root is a mutex with sequence tokens however
/// the listing is cut (the default, and a cut to 30), and the report says what was cut.
#[tokio::test]
async fn inspect_reads_a_hot_lock_right_through_a_cut_listing() {
    const WAITERS: usize = 20_000;
    const BURST: usize = 1_000;
    let zk = Zk::start("cli-hot").await;
    // Long sessions: reading 20,000 nodes loads a shared machine's server, and an expired
    // session would take its nodes with it between the two inspections.
    let long = scaled(Duration::from_secs(30));
    let session = Session::connect(zk.options().session_timeout(long))
        .await
        .unwrap();
    let holder = ZkMutex::new(&session, "/hot")
        .unwrap()
        .lock()
        .await
        .unwrap();
    // The waiters: ephemeral `lock-N` nodes with owner records, in pipelined bursts.
    let started = Instant::now();
    let raw = zkc::Client::connector()
        .with_session_timeout(long)
        .connect(&zk.connect)
        .await
        .unwrap();
    let data = b"id=0f8fad5b-d9cb-469f-a165-70867728950e\nowner=hot-waiter\n";
    let mode = zkc::CreateMode::EphemeralSequential.with_acls(zkc::Acls::anyone_all());
    for _ in 0..WAITERS / BURST {
        let burst: Vec<_> = (0..BURST)
            .map(|_| raw.create("/hot/lock-", data, &mode))
            .collect();
        for create in burst {
            create.await.unwrap();
        }
    }
    println!("{WAITERS} waiters made in {:?}", started.elapsed());
    for max_nodes in [None, Some("30")] {
        let mut args = vec!["inspect", "/hot", "--json", "--no-sessions"];
        if let Some(n) = max_nodes {
            args.extend(["--max-nodes", n]);
        }
        let ran = run(zkr(&zk.connect, &args), 120).await;
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        let report: Value = serde_json::from_str(&ran.stdout).unwrap();
        let q = queue(&report, "/hot");
        assert_eq!(
            (
                q["kind"].as_str(),
                q["tokens"].as_str(),
                q["marked_as"].as_str()
            ),
            (Some("mutex"), Some("sequence"), Some("ZkMutex")),
            "{max_nodes:?}"
        );
        let shown = max_nodes.map_or(20_000, |n| n.parse().unwrap());
        assert_eq!(
            q["cut"],
            serde_json::json!({"shown": shown, "of": WAITERS + 1}),
            "{max_nodes:?}"
        );
        let tokens: Vec<u64> = column(q, "token")
            .iter()
            .map(|t| t.as_u64().unwrap())
            .collect();
        assert_eq!(tokens.len(), shown);
        assert_eq!(tokens[0], holder.token().as_u64(), "the holder first");
        assert!(
            tokens.windows(2).all(|w| w[1] == w[0] + 1),
            "sequence tokens, in queue order"
        );
        assert_eq!(
            strs(&column(q, "role"))[..2],
            [Some("holder"), Some("waiter")]
        );
        assert_eq!(report["truncated"], true);
        assert!(holder.is_held());
    }
    let table = run(
        zkr(
            &zk.connect,
            &["inspect", "/hot", "--max-nodes", "5", "--no-sessions"],
        ),
        60,
    )
    .await;
    println!("zkr inspect /hot --max-nodes 5\n{}", table.stdout);
    assert!(
        table.stdout.contains("… cut: 5 of 20,001 children read (--max-nodes); the head of the queue is shown, 19,996 more not read"),
        "{}",
        table.stdout
    );
    assert!(table
        .stdout
        .contains("/hot  mutex (zk-recipes)  marked ZkMutex  tokens: sequence"));
    holder.release().await.unwrap();
    session.close().await;
}

/// A holder whose zkr is frozen (SIGSTOP) goes silent on its server: `inspect` shows the time
/// since its session was last heard from against its timeout, and past half of it the
/// `session-silent` warning; a healthy holder beside it never gets one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_sees_a_silent_holder() {
    let zk = Zk::start("cli-silent").await;
    let holder = |path: &str| {
        let args = [
            "lock",
            path,
            "--session-timeout",
            "8s",
            "--",
            "sh",
            "-c",
            "echo ready; exec sleep 600",
        ];
        Running::spawn(zkr(&zk.connect, &args))
    };
    let mut frozen = holder("/silent");
    let mut healthy = holder("/healthy");
    frozen.stdout.next("the frozen one's CMD", 30).await;
    healthy.stdout.next("the healthy one's CMD", 30).await;
    let inspect = || async {
        let ran = run(
            zkr(&zk.connect, &["inspect", "/", "--recursive", "--json"]),
            30,
        )
        .await;
        assert_eq!(ran.code, 0, "{}", ran.stderr);
        serde_json::from_str::<Value>(&ran.stdout).unwrap()
    };
    let before = inspect().await;
    for path in ["/silent", "/healthy"] {
        let q = queue(&before, path);
        assert_eq!(
            column(q, "session_timeout_ms")[0].as_i64(),
            Some(8000),
            "{q:#}"
        );
        assert!(column(q, "silent_ms")[0].as_i64().unwrap() < 4000, "{q:#}");
        assert_eq!(warning_kinds(q), Vec::<&str>::new(), "{path}");
    }
    frozen.signal(libc::SIGSTOP);
    let stopped = Instant::now();
    // Silence grows with time, not with any event: inspect again until it passes half the
    // timeout, which must happen before the session expires (8 s of silence).
    let report = within("the frozen holder to show as silent", 30, async {
        loop {
            let report = inspect().await;
            let healthy_q = queue(&report, "/healthy");
            let silent = column(healthy_q, "silent_ms")[0].as_i64().unwrap();
            assert!(silent < 4000, "the healthy holder silent for {silent} ms");
            assert_eq!(warning_kinds(healthy_q), Vec::<&str>::new());
            let q = report["queues"]
                .as_array()
                .unwrap()
                .iter()
                .find(|q| q["path"] == "/silent")
                .unwrap_or_else(|| {
                    panic!(
                        "/silent's holder went first ({:?} after SIGSTOP)",
                        stopped.elapsed()
                    )
                });
            let silent = column(q, "silent_ms")[0].as_i64().unwrap();
            if silent > 4000 {
                return report;
            }
            assert_eq!(warning_kinds(q), Vec::<&str>::new(), "{silent} ms");
        }
    })
    .await;
    let q = queue(&report, "/silent");
    assert_eq!(warning_kinds(q), ["session-silent"]);
    let message = q["warnings"][0]["message"].as_str().unwrap();
    assert!(message.starts_with("no ping for "), "{message}");
    assert!(
        message.contains(" of an 8 s session: frozen or cut off?"),
        "{message}"
    );
    let table = run(zkr(&zk.connect, &["inspect", "/silent"]), 30).await;
    println!("zkr inspect /silent\n{}", table.stdout);
    // Resumed inside its session, the frozen zkr holds on; SIGINT ends it (and its CMD, if the
    // watchdog has not ended that already).
    frozen.signal(libc::SIGCONT);
    frozen.signal(libc::SIGINT);
    let _ = frozen.code(30).await;
    healthy.signal(libc::SIGINT);
    assert_eq!(healthy.code(30).await, 130);
}

/// In an ensemble a server's `cons` times are its own clock's: `inspect` reads each member's
/// through a session of its own there (its main session is on one member only), so holders
/// connected to every member get their silence, each from the member that has them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_reads_the_clock_of_every_member() {
    if let Some(reason) = ensemble_unavailable_reason() {
        println!("not run: {reason}");
        return;
    }
    let ensemble = zk_testcontainers::ZkEnsemble::start(3).await.unwrap();
    let mut holders = Vec::new();
    for (i, member) in ensemble.members().iter().enumerate() {
        let path = format!("/m{i}");
        let args = [
            "lock",
            path.as_str(),
            "--session-timeout",
            "8s",
            "--connect-timeout",
            "20s",
            "--",
            "sh",
            "-c",
            "echo ready; exec sleep 600",
        ];
        let mut holder = Running::spawn(zkr(&member.connect_string(), &args));
        holder.stdout.next("a holder's CMD", 60).await;
        holders.push(holder);
    }
    let ran = run(
        zkr(
            &ensemble.connect_string(),
            &["inspect", "/", "--recursive", "--json"],
        ),
        60,
    )
    .await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let report: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(report["sessions_checked"], true, "{report:#}");
    assert!(
        report["notes"].as_array().unwrap().is_empty(),
        "{:#}",
        report["notes"]
    );
    for (i, member) in ensemble.members().iter().enumerate() {
        let q = queue(&report, &format!("/m{i}"));
        assert_eq!(
            strs(&column(q, "server")),
            [Some(member.connect_string().as_str())]
        );
        let silent = column(q, "silent_ms")[0].as_i64();
        assert!(
            silent.is_some_and(|ms| (0..4_000).contains(&ms)),
            "member {i}: {q:#}"
        );
        assert_eq!(column(q, "session_timeout_ms")[0].as_i64(), Some(8_000));
    }
    for holder in &mut holders {
        holder.signal(libc::SIGINT);
        assert_eq!(holder.code(30).await, 130);
    }
}

/// A waiting `zkr lock` says whom it waits behind (node, owner, session; the holder), and
/// again when that node goes; with `--json` every line it prints is one object: waiting,
/// busy, timeout, interrupted, lost and stopped, errors.
#[tokio::test]
async fn a_waiter_says_whom_it_waits_behind_and_json_covers_every_line() {
    let zk = Zk::start("cli-behind").await;
    let raw = zk.raw().await;
    let mut holder_cmd = zkr(
        &zk.connect,
        &[
            "lock",
            "/q",
            "--owner",
            "holder-A",
            "--",
            "sh",
            "-c",
            "echo $ZK_LOCK_PATH; read x",
        ],
    );
    holder_cmd.stdin(Stdio::piped());
    let mut holder = Running::spawn(holder_cmd);
    let holder_node = holder.stdout.next("the holder's CMD", 30).await;
    let holder_node = holder_node.rsplit('/').next().unwrap().to_owned();
    let holder_sid = holder
        .stderr
        .until("holding", 30, |l| l.contains("holding /q"))
        .await
        .1;
    let holder_sid = holder_sid
        .split("session ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .unwrap()
        .to_owned();

    // B waits (--json), then C (text) behind B.
    let mut b = Running::spawn(zkr(
        &zk.connect,
        &["lock", "/q", "--owner", "waiter-B", "--json", "--", "true"],
    ));
    let (_, line) = b
        .stderr
        .until("B to say whom it waits behind", 30, |l| {
            l.contains("waiting")
        })
        .await;
    let waiting: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(waiting["for"], "/q");
    assert_eq!(waiting["position"], 2);
    assert_eq!(
        waiting["behind"],
        serde_json::json!({"node": holder_node, "owner": "holder-A", "session": holder_sid})
    );
    assert!(
        waiting["holder"].is_null(),
        "B waits behind the holder itself"
    );
    let b_node = waiting["node"].as_str().unwrap().to_owned();
    let mut c = Running::spawn(zkr(
        &zk.connect,
        &["lock", "/q", "--owner", "waiter-C", "--", "true"],
    ));
    let (_, line) = c
        .stderr
        .until("C to say whom it waits behind", 30, |l| {
            l.contains("waiting")
        })
        .await;
    println!("{line}");
    assert!(
        line.starts_with(&format!(
            "zkr: waiting for /q: behind {b_node} (waiter-B, session 0x"
        )),
        "{line}"
    );
    assert!(
        line.ends_with(&format!(
            "3rd in line; held by {holder_node} (holder-A, session {holder_sid})"
        )),
        "{line}"
    );
    // B gives up (SIGINT): C now waits behind the holder, and says so.
    b.signal(libc::SIGINT);
    assert_eq!(b.code(30).await, 130);
    let b_lines = json_lines(&b.stderr.rest().await.join("\n"));
    let last = b_lines.last().unwrap();
    assert_eq!(
        (
            last["event"].as_str(),
            last["code"].as_i64(),
            last["signal"].as_str()
        ),
        (Some("interrupted"), Some(130), Some("SIGINT"))
    );
    let (_, line) = c
        .stderr
        .until("C to say it moved up", 30, |l| l.contains("waiting"))
        .await;
    assert_eq!(
        line,
        format!("zkr: still waiting for /q: behind {holder_node} (holder-A, session {holder_sid}), 2nd in line")
    );

    // --json while it is busy, and a timeout.
    let busy = run(
        zkr(
            &zk.connect,
            &["lock", "/q", "--try", "--json", "--", "true"],
        ),
        30,
    )
    .await;
    assert_eq!(busy.code, 75);
    let lines = json_lines(&busy.stderr);
    assert_eq!(lines.len(), 1, "{}", busy.stderr);
    assert_eq!(
        (lines[0]["event"].as_str(), lines[0]["code"].as_i64()),
        (Some("busy"), Some(75))
    );
    let timeout = run(
        zkr(
            &zk.connect,
            &["lock", "/q", "--timeout", "1500ms", "--json", "--", "true"],
        ),
        30,
    )
    .await;
    assert_eq!(timeout.code, 124);
    let events: Vec<String> = json_lines(&timeout.stderr)
        .iter()
        .map(|l| l["event"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(events, ["waiting", "timeout"], "{}", timeout.stderr);

    // The holder's node deleted behind its back: lost, CMD stopped, all in JSON.
    holder
        .child
        .stdin
        .take()
        .unwrap()
        .write_all(b"done\n")
        .await
        .unwrap();
    assert_eq!(holder.code(30).await, 0);
    let _ = c.code(30).await;
    let mut lost = Running::spawn(zkr(
        &zk.connect,
        &[
            "lock",
            "/q",
            "--json",
            "--grace",
            "1s",
            "--",
            "sh",
            "-c",
            "echo $ZK_LOCK_PATH; exec sleep 600",
        ],
    ));
    let node = lost.stdout.next("CMD", 30).await;
    raw.delete(&node, None).await.unwrap();
    assert_eq!(lost.code(30).await, 125);
    let lines = json_lines(&lost.stderr.rest().await.join("\n"));
    let events: Vec<&str> = lines.iter().map(|l| l["event"].as_str().unwrap()).collect();
    assert_eq!(events, ["holding", "lost", "stopped"], "{lines:?}");
    assert_eq!(lines[2]["code"], 125);
    assert_eq!(lines[2]["reason"], "NodeDeleted");

    // Errors, zkr's and clap's.
    for (args, code) in [
        (vec!["lock", "relative", "--json", "--", "true"], 2),
        (
            vec!["lock", "/q", "--json", "--frobnicate", "--", "true"],
            2,
        ),
        (vec!["inspect", "/nothing", "--json"], 66),
        (vec!["repair", "/nothing", "--json"], 66),
    ] {
        let ran = run(zkr(&zk.connect, &args), 30).await;
        assert_eq!(ran.code, code, "{args:?}: {}", ran.stderr);
        let lines = json_lines(&ran.stderr);
        assert_eq!(lines.len(), 1, "{args:?}: {}", ran.stderr);
        assert_eq!(
            (lines[0]["event"].as_str(), lines[0]["code"].as_i64()),
            (Some("error"), Some(code as i64))
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Bad input

#[tokio::test]
async fn bad_input_gets_a_clear_message_and_a_documented_code() {
    let zk = Zk::start("cli-bad").await;
    let raw = zk.raw().await;
    // Nothing listens on port 1.
    let nowhere = "127.0.0.1:1";
    let dir = tempfile::tempdir().unwrap();
    let not_executable = dir.path().join("script.sh");
    std::fs::write(&not_executable, "#!/bin/sh\n").unwrap();
    let not_executable = not_executable.to_str().unwrap().to_owned();
    let cases: Vec<(&str, Vec<&str>, &str, i32, &str)> = vec![
        (
            "no ensemble reachable",
            vec!["--connect-timeout", "1s", "lock", "/x", "--", "true"],
            nowhere,
            69,
            "could not connect",
        ),
        (
            "no ensemble reachable (inspect)",
            vec!["--connect-timeout", "1s", "inspect", "/"],
            nowhere,
            69,
            "could not connect",
        ),
        (
            "no ensemble given",
            vec!["lock", "/x", "--", "true"],
            "",
            2,
            "no ZooKeeper ensemble",
        ),
        (
            "a relative path",
            vec!["lock", "relative", "--", "true"],
            &zk.connect,
            2,
            "invalid path",
        ),
        (
            "a doubled slash",
            vec!["lock", "/a//b", "--", "true"],
            &zk.connect,
            2,
            "invalid path",
        ),
        (
            "a trailing slash (inspect)",
            vec!["inspect", "/a/"],
            &zk.connect,
            2,
            "invalid path",
        ),
        (
            "an empty key",
            vec!["lock", "/space", "--key", "", "--", "true"],
            &zk.connect,
            2,
            "invalid lock key",
        ),
        ("no CMD", vec!["lock", "/x"], &zk.connect, 2, "CMD"),
        (
            "no CMD after --",
            vec!["lock", "/x", "--"],
            &zk.connect,
            2,
            "CMD",
        ),
        ("no CMD (elect)", vec!["elect", "/e"], &zk.connect, 2, "CMD"),
        (
            "a CMD that does not exist",
            vec!["lock", "/x", "--", "zkr-no-such-command"],
            &zk.connect,
            127,
            "command not found",
        ),
        (
            "a CMD that does not exist, no server either",
            vec!["lock", "/x", "--", "zkr-no-such-command"],
            nowhere,
            127,
            "command not found",
        ),
        (
            "a CMD that is not executable",
            vec!["lock", "/x", "--", &not_executable],
            &zk.connect,
            126,
            "not an executable file",
        ),
        (
            "a bad duration",
            vec!["lock", "/x", "--timeout", "5parsecs", "--", "true"],
            &zk.connect,
            2,
            "unknown unit",
        ),
        (
            "an unknown option",
            vec!["lock", "/x", "--frobnicate", "--", "true"],
            &zk.connect,
            2,
            "--frobnicate",
        ),
        (
            "--try with --timeout",
            vec!["lock", "/x", "--try", "--timeout", "1s", "--", "true"],
            &zk.connect,
            2,
            "cannot be used with",
        ),
        (
            "a path that does not exist (inspect)",
            vec!["inspect", "/nothing/here"],
            &zk.connect,
            66,
            "no such node",
        ),
    ];
    for (what, args, connect, code, message) in cases {
        let started = Instant::now();
        let mut command = zkr(connect, &args);
        if connect.is_empty() {
            command.env_remove("ZK_CONNECT");
        }
        let ran = run(command, 30).await;
        assert_eq!(ran.code, code, "{what}: zkr {args:?}\n{}", ran.stderr);
        assert!(
            ran.stderr.contains(message),
            "{what}: {message:?} not in {:?}",
            ran.stderr
        );
        assert!(ran.stdout.is_empty(), "{what}: stdout {:?}", ran.stdout);
        assert!(
            started.elapsed() < scaled(Duration::from_secs(15)),
            "{what} took {:?}",
            started.elapsed()
        );
    }
    // The command that was not found took no lock: nothing was created.
    assert_eq!(raw.check_stat("/x").await.unwrap(), None);

    // Help: examples on every subcommand, the exit codes on the top level.
    let help = run(zkr("", &["--help"]), 10).await;
    assert_eq!(help.code, 0);
    assert!(
        help.stdout.contains("Exit codes:") && help.stdout.contains("125"),
        "{}",
        help.stdout
    );
    for sub in ["lock", "elect", "inspect", "watch"] {
        let help = run(zkr("", &[sub, "--help"]), 10).await;
        assert_eq!(help.code, 0, "{sub}");
        assert!(help.stdout.contains("Examples:"), "{sub}: {}", help.stdout);
    }
}

/// `ZK_DIGEST` authenticates `zkr`'s session: a queue whose nodes only `bob` may read is
/// inspected with bob's digest and refused (exit 70) without it.
#[tokio::test]
async fn a_digest_from_the_environment_authenticates_the_session() {
    let zk = Zk::start("cli-digest").await;
    let bob = Session::connect(
        zk.options()
            .digest_auth("bob", "bob-secret")
            .node_acls(zkc::Acls::creator_all()),
    )
    .await
    .unwrap();
    let held = ZkMutex::new(&bob, "/private/lock")
        .unwrap()
        .lock()
        .await
        .unwrap();

    let anonymous = run(
        zkr(&zk.connect, &["inspect", "/private/lock", "--json"]),
        30,
    )
    .await;
    assert_eq!(anonymous.code, 70, "{}", anonymous.stderr);
    let mut with_digest = zkr(&zk.connect, &["inspect", "/private/lock", "--json"]);
    with_digest.env("ZK_DIGEST", "bob:bob-secret");
    let ran = run(with_digest, 30).await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let report: Value = serde_json::from_str(&ran.stdout).unwrap();
    let holder = &report["queues"][0]["contenders"][0];
    assert_eq!(holder["role"], "holder", "{report}");
    assert!(
        held.path().ends_with(holder["node"].as_str().unwrap()),
        "{report}"
    );
    held.release().await.unwrap();
    bob.close().await;
}

/// `zkr` given only the TLS port of a server that requires SASL, its credentials from the
/// environment and a flag given after the subcommand: a lock and an inspect work (inspect says
/// it could not ask the TLS port for sessions), and CMD does not see the password; no CA, a
/// wrong password, an unreadable CA file, half a client certificate and a malformed
/// `ZK_DIGEST` get their documented codes in bounded time.
#[cfg(all(feature = "tls", feature = "sasl-digest-md5"))]
#[tokio::test]
async fn tls_and_sasl_credentials_come_from_the_environment() {
    use zk_testcontainers::{ServerOptions, ServerSasl, ServerTls, TestCa};

    if let Some(reason) = ensemble_unavailable_reason() {
        println!("not run: {reason}");
        return;
    }
    let ca = TestCa::new("zkr test CA");
    let cert = ca.server_cert(&["127.0.0.1", "localhost"]);
    let opts = ServerOptions::default()
        .with_tls(ServerTls::new(cert.keystore_pem(), ca.cert_pem()))
        .with_sasl(ServerSasl::digest_md5([("bob", "bob-secret")]).required(true));
    let server = ZkServer::start_with(opts).await.unwrap();
    let secure = server.secure_connect_string().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let client = ca.client_cert("zkr");
    let files = [
        ("ZK_TLS_CA", "ca.pem", ca.cert_pem()),
        ("ZK_TLS_CERT", "client.pem", client.cert_pem.as_str()),
        ("ZK_TLS_KEY", "client.key", client.key_pem.as_str()),
    ]
    .map(|(var, name, pem)| {
        let path = dir.path().join(name);
        std::fs::write(&path, pem).unwrap();
        (var, path)
    });
    // The password from the environment, the user as a flag after the subcommand.
    let with_credentials = |args: &[&str], password: &str| {
        let mut command = zkr(&secure, args);
        for (var, path) in &files {
            command.env(var, path);
        }
        command.env("ZK_SASL_PASSWORD", password);
        command
    };

    let lock = &[
        "lock",
        "--sasl-user",
        "bob",
        "--connect-timeout",
        "10s",
        "/cli-tls/lock",
        "--",
        "sh",
        "-c",
        "echo token=$ZK_LOCK_TOKEN password=${ZK_SASL_PASSWORD:-unset}",
    ];
    let ran = run(with_credentials(lock, "bob-secret"), 60).await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(ran.stdout.contains("token="), "{}", ran.stdout);
    assert!(ran.stdout.contains("password=unset"), "{}", ran.stdout);

    let inspect = &["inspect", "--sasl-user", "bob", "/cli-tls", "--json"];
    let ran = run(with_credentials(inspect, "bob-secret"), 60).await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let report: Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(report["sessions_checked"], false, "{report}");
    assert!(
        ran.stdout.contains("TLS server(s) not asked"),
        "{}",
        ran.stdout
    );

    let started = Instant::now();
    let ran = run(with_credentials(lock, "wrong"), 60).await;
    assert_eq!(ran.code, 70, "a wrong SASL password: {}", ran.stderr);
    assert!(ran.stderr.contains("SASL"), "{}", ran.stderr);

    // Plain text to the TLS port: no session.
    let mut plain = zkr(&secure, &["--connect-timeout", "3s", "inspect", "/"]);
    plain
        .env("ZK_SASL_USER", "bob")
        .env("ZK_SASL_PASSWORD", "bob-secret");
    let ran = run(plain, 60).await;
    assert_eq!(ran.code, 69, "no CA: {}", ran.stderr);

    // What is wrong, the one variable that says it, and what the message names.
    let usage = [
        (
            "an unreadable CA file",
            ("ZK_TLS_CA", "/nonexistent/ca.pem"),
            "/nonexistent/ca.pem",
        ),
        (
            "half a client certificate",
            ("ZK_TLS_CERT", "/x.pem"),
            "go together",
        ),
        (
            "a user without a password",
            ("ZK_SASL_USER", "bob"),
            "go together",
        ),
        (
            "a malformed digest",
            ("ZK_DIGEST", "no-colon"),
            "USER:PASSWORD",
        ),
    ];
    for (what, (var, value), message) in usage {
        let mut command = zkr(&secure, &["inspect", "/"]);
        command.env(var, value);
        let ran = run(command, 30).await;
        assert_eq!(ran.code, 2, "{what}: {}", ran.stderr);
        assert!(ran.stderr.contains(message), "{what}: {}", ran.stderr);
    }
    assert!(
        started.elapsed() < scaled(Duration::from_secs(60)),
        "the refusals took {:?}",
        started.elapsed()
    );
}
