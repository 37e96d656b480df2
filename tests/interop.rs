//! Interoperability with Apache Curator: Java workers on Curator's recipes and Rust workers on
//! this crate's share one path, in real processes on a real ZooKeeper, and respect each other:
//!
//! - `InterProcessMutex` and `ZkMutex` exclude each other;
//! - `InterProcessReadWriteLock` and `ZkRwLock`: a writer of either side is alone, readers of
//!   both sides share;
//! - `InterProcessSemaphoreV2` and `ZkSemaphore` with the same permits: never more holders than
//!   permits, each side counting the other's leases;
//! - `LeaderLatch` and `ZkLeaderElection`: one leader at a time, leadership passing both ways;
//! - `SharedCount` and `ZkSharedCount`: increments from both sides at once, none lost, each
//!   side reading the other's 4-byte values;
//! - `GroupMember` and `ZkGroup`: each side sees the other's member and payload, and its
//!   leaving.
//!
//! The Java worker is `examples/bench-peers/CuratorInterop.java`, compiled with `javac` against
//! Debian's Curator jars in /usr/share/java (`apt-get install -y --no-install-recommends
//! openjdk-17-jdk-headless libcurator-recipes-java libcurator-framework-java`). Without `javac`
//! or the jars the tests print why and pass without running.

mod support;

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::{contenders, wait_children, within, Zk};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use zk_recipes::{
    FencingToken, Session, ZkGroup, ZkLeaderElection, ZkLeadership, ZkLockSpace, ZkMutex, ZkRwLock,
    ZkRwLockGuard, ZkSemaphore, ZkSemaphoreLease, ZkSharedCount,
};
use zk_testcontainers::scaled;
use zookeeper_client as zkc;

/// The lock path both sides use (created persistent by the test, so Curator creates nothing).
const ROOT: &str = "/interop/lock";
/// The read/write lock, semaphore and election paths (created persistent, as `ROOT`).
const RW_ROOT: &str = "/interop/rwlock";
/// A key's directory in a lock space (`/interop/orders`, key `order-7`).
const KEYED_SPACE_KEY: &str = "/interop/orders/order-7";
const SEMAPHORE_ROOT: &str = "/interop/semaphore";
const ELECTION_ROOT: &str = "/interop/election";
/// The shared count's parent (created persistent) and the count, which both sides create.
const COUNT_PARENT: &str = "/interop/counters";
const COUNT: &str = "/interop/counters/jobs";
/// The group both sides join (created persistent).
const GROUP_ROOT: &str = "/interop/group";
/// The shared "resource": an ephemeral node each holder creates on entry and deletes on exit.
const INSIDE: &str = "/interop-inside";
/// The resource of the recipes that may share: a persistent node whose data lists who is
/// inside, changed only by compare-and-set (see `--holders` in CuratorInterop.java).
const HOLDERS: &str = "/interop-holders";
/// Acquisitions by each Java worker, and by each of the Rust workers.
const ROUNDS: usize = 40;
const RUST_WORKERS: usize = 2;
/// The semaphore's permits, on both sides.
const PERMITS: u32 = 2;
/// How long each holder stays inside.
const HOLD: Duration = Duration::from_millis(2);
/// The anchor this library keeps under each root.
const ANCHOR: &str = "~zk-recipes-anchor";

/// The jars the Java peers need (in /usr/share/java, from Debian's packages): one list for
/// the benchmark and the Rust/Curator interop test.
const CURATOR_JARS: &str = include_str!("../examples/bench-peers/classpath.txt");

/// Compiles `CuratorInterop.java` into `out`; the classpath to run it with, or why it cannot run.
async fn compile_java(out: &Path) -> Result<String, String> {
    let jars: Vec<&str> = CURATOR_JARS.lines().collect();
    support::compile_java(
        "examples/bench-peers/CuratorInterop.java",
        &jars,
        "libcurator-recipes-java libcurator-framework-java",
        out,
    )
    .await
}

/// A test's ZooKeeper and the compiled Java worker.
struct Interop {
    zk: Zk,
    /// A raw client in the test's chroot, for checks behind everyone's back.
    raw: zkc::Client,
    classpath: String,
    _classes: tempfile::TempDir,
}

impl Interop {
    /// Compiles the Java worker and starts a ZooKeeper with `/interop`, `root` and an empty
    /// holders list, all persistent (so Curator creates nothing); `None`, saying why, when Java
    /// cannot run.
    async fn start(name: &str, root: &str) -> Option<Interop> {
        let classes = tempfile::tempdir().unwrap();
        let classpath = match compile_java(classes.path()).await {
            Ok(classpath) => classpath,
            Err(why) => {
                println!("not run: {why}");
                return None;
            }
        };
        let zk = Zk::start(name).await;
        let raw = zk.raw().await;
        let persistent = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
        // A key's directory (under `/interop/orders`) is left to the lockers: a container.
        let keyed = root.starts_with("/interop/orders/");
        for path in ["/interop", root, HOLDERS] {
            if !(keyed && path == root) {
                raw.create(path, &[], &persistent).await.unwrap();
            }
        }
        Some(Interop {
            zk,
            raw,
            classpath,
            _classes: classes,
        })
    }

    /// Starts a Java worker called `name` taking `recipe` on `root` (with `extra` arguments),
    /// checking the holders list, and with `--wait-go` (see [`Java::go`]).
    fn java(&self, name: &str, recipe: &str, root: &str, extra: &[&str]) -> Java {
        let args = ["--recipe", recipe, "--name", name, "--root", root];
        let args = [&args[..], &["--holders", HOLDERS, "--wait-go"], extra].concat();
        Java::spawn(self, &format!("worker {name}"), &args)
    }

    /// Checks that nothing is left behind: nobody in the holders list, no contender node under
    /// `root`, only our anchor.
    async fn assert_clean(&self, root: &str) {
        let (holders, _) = self.raw.get_data(HOLDERS).await.unwrap();
        assert_eq!(
            String::from_utf8(holders).unwrap(),
            "",
            "holders left inside"
        );
        assert_eq!(contenders(&self.raw, root).await, Vec::<String>::new());
        assert_eq!(self.raw.list_children(root).await.unwrap(), vec![ANCHOR]);
    }
}

/// What the Java worker printed, in order.
#[derive(Debug, PartialEq, Eq)]
enum Marker {
    In(usize),
    Out(usize),
}

/// One "JAVA IN" line: when it was read, and what it said.
#[derive(Debug)]
struct JavaEntry {
    at: Instant,
    /// The holders list right after entering (`--holders`).
    holders: Vec<String>,
    /// The node of an election round (its sequence is the term).
    node: Option<String>,
    /// The value a count round wrote.
    count: Option<i32>,
}

/// Everything a Java worker printed after "JAVA READY".
#[derive(Debug, Default)]
struct JavaRun {
    markers: Vec<Marker>,
    entries: Vec<JavaEntry>,
    rest: Vec<String>,
}

/// How far a Java worker got, as its output tells.
#[derive(Clone, Copy, Debug, Default)]
struct Progress {
    ready: bool,
    entered: usize,
}

/// A Java worker (CuratorInterop) running as a child process (killed when dropped).
struct Java {
    what: String,
    child: Child,
    stdin: ChildStdin,
    progress: watch::Receiver<Progress>,
    output: Option<JoinHandle<JavaRun>>,
    stderr: Option<JoinHandle<String>>,
}

impl Java {
    /// Starts a Java worker with `args` (besides the connection, rounds, hold and timeout).
    /// The JVM takes a while: start the workers, then wait for each to be [`ready`](Java::ready).
    fn spawn(interop: &Interop, what: &str, args: &[&str]) -> Java {
        let timeout = scaled(Duration::from_secs(15));
        let mut child = tokio::process::Command::new("java")
            .arg("-cp")
            .arg(&interop.classpath)
            .arg("CuratorInterop")
            .args(["--connect", &interop.zk.connect])
            .args(["--rounds", &ROUNDS.to_string()])
            .args(["--hold-ms", &HOLD.as_millis().to_string()])
            .args(["--timeout-ms", &timeout.as_millis().to_string()])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("java");
        let mut stderr = child.stderr.take().unwrap();
        let stderr = tokio::spawn(async move {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text).await;
            text
        });
        let (progress, receiver) = watch::channel(Progress::default());
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let output = tokio::spawn(async move {
            let mut run = JavaRun::default();
            while let Some(line) = lines.next_line().await.unwrap() {
                let mut words = line.split_whitespace();
                match (words.next(), words.next(), words.next()) {
                    _ if line == "JAVA READY" && !progress.borrow().ready => {
                        progress.send_modify(|p| p.ready = true)
                    }
                    (Some("JAVA"), Some("IN"), Some(t)) => {
                        let mut entry = JavaEntry {
                            at: Instant::now(),
                            holders: Vec::new(),
                            node: None,
                            count: None,
                        };
                        for word in words {
                            if let Some(list) = word.strip_prefix("holders=") {
                                entry.holders = parse_holders(list);
                            } else if let Some(node) = word.strip_prefix("node=") {
                                entry.node = Some(node.to_owned());
                            } else if let Some(count) = word.strip_prefix("count=") {
                                entry.count = Some(count.parse().unwrap());
                            } else {
                                panic!("unexpected {word:?} in {line:?}");
                            }
                        }
                        run.entries.push(entry);
                        run.markers.push(Marker::In(t.parse().unwrap()));
                        progress.send_modify(|p| p.entered += 1);
                    }
                    (Some("JAVA"), Some("OUT"), Some(t)) => {
                        run.markers.push(Marker::Out(t.parse().unwrap()))
                    }
                    _ => run.rest.push(line),
                }
            }
            run
        });
        Java {
            what: what.to_owned(),
            stdin: child.stdin.take().unwrap(),
            child,
            progress: receiver,
            output: Some(output),
            stderr: Some(stderr),
        }
    }

    /// Waits for "JAVA READY" (connected).
    async fn ready(&mut self) {
        let what = format!("the Java {} to connect", self.what);
        self.wait_for(&what, 30, |p| p.ready).await;
    }

    /// Lets a worker started with `--wait-go` go on: the first time into its first round, the
    /// second time out of it (it holds its first round until then).
    async fn go(&mut self) {
        self.stdin.write_all(b"GO\n").await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// Waits until the worker has printed `n` "JAVA IN" lines.
    async fn entered(&mut self, n: usize, what: &str) {
        self.wait_for(what, 15, |p| p.entered >= n).await;
    }

    async fn wait_for(&mut self, what: &str, secs: u64, until: impl Fn(&Progress) -> bool) {
        let progress = &mut self.progress;
        if within(what, secs, progress.wait_for(until)).await.is_ok() {
            return;
        }
        // Its output ended first: it exited.
        let run = self.output.take().unwrap().await.unwrap();
        let stderr = self.stderr.take().unwrap().await.unwrap();
        panic!(
            "waiting for {what}, the Java {} ended: {run:?}, stderr: {stderr}",
            self.what
        );
    }

    /// Waits for the worker to exit, checks that it succeeded, entered and left every round in
    /// order and finished; what it printed.
    async fn finish(self) -> JavaRun {
        self.finish_rounds(ROUNDS).await
    }

    /// As [`finish`](Java::finish), for a worker run with `--rounds rounds`.
    async fn finish_rounds(mut self, rounds: usize) -> JavaRun {
        let what = format!("the Java {} to exit", self.what);
        let status = within(&what, 15, self.child.wait()).await.unwrap();
        let run = self.output.take().unwrap().await.unwrap();
        let stderr = self.stderr.take().unwrap().await.unwrap();
        let rest = &run.rest;
        assert!(
            status.success(),
            "the Java {} failed ({status}): stdout {rest:?}, stderr: {stderr}",
            self.what
        );
        let expected: Vec<Marker> = (0..rounds)
            .flat_map(|t| [Marker::In(t), Marker::Out(t)])
            .collect();
        assert_eq!(run.markers, expected, "Java's IN/OUT markers");
        assert_eq!(*rest, vec![format!("JAVA DONE {rounds}")]);
        run
    }
}

/// A holders list as stored: comma-separated entries.
fn parse_holders(list: &str) -> Vec<String> {
    list.split(',')
        .filter(|h| !h.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Adds `entry` ("x:<name>" exclusive, "s:<name>" shared) to the holders list by
/// compare-and-set, as CuratorInterop.java does; panics if it must not be there: an exclusive
/// entry into a list that is not empty, a shared one beside an exclusive holder or into `limit`
/// holders. Returns the list after entering.
async fn enter_holders(client: &zkc::Client, entry: &str, limit: usize) -> Vec<String> {
    loop {
        let (data, stat) = client.get_data(HOLDERS).await.unwrap();
        let mut holders = parse_holders(std::str::from_utf8(&data).unwrap());
        let free = if entry.starts_with("x:") {
            holders.is_empty()
        } else {
            holders.len() < limit && !holders.iter().any(|h| h.starts_with("x:"))
        };
        assert!(free, "{entry} got in while {holders:?} were inside");
        holders.push(entry.to_owned());
        let list = holders.join(",");
        match client
            .set_data(HOLDERS, list.as_bytes(), Some(stat.version))
            .await
        {
            Ok(_) => return holders,
            Err(zkc::Error::BadVersion) => continue,
            Err(e) => panic!("set {HOLDERS}: {e}"),
        }
    }
}

/// Removes `entry` from the holders list by compare-and-set.
async fn leave_holders(client: &zkc::Client, entry: &str) {
    loop {
        let (data, stat) = client.get_data(HOLDERS).await.unwrap();
        let mut holders = parse_holders(std::str::from_utf8(&data).unwrap());
        let at = holders.iter().position(|h| h == entry);
        let at = at.unwrap_or_else(|| panic!("{entry} is not among the holders {holders:?}"));
        holders.remove(at);
        let list = holders.join(",");
        match client
            .set_data(HOLDERS, list.as_bytes(), Some(stat.version))
            .await
        {
            Ok(_) => return,
            Err(zkc::Error::BadVersion) => continue,
            Err(e) => panic!("set {HOLDERS}: {e}"),
        }
    }
}

/// What a Rust worker takes in each round.
#[derive(Clone, Copy, Debug)]
enum Role {
    /// A read lock of the `ZkRwLock` on `RW_ROOT`.
    Reader,
    /// Its write lock.
    Writer,
    /// A lease of the `ZkSemaphore` on `SEMAPHORE_ROOT` with `PERMITS`.
    Lease,
    /// ZkLeadership of the `ZkLeaderElection` on `ELECTION_ROOT`.
    Candidate,
}

enum Recipe {
    RwLock(ZkRwLock),
    Semaphore(ZkSemaphore),
    Election(ZkLeaderElection),
}

/// What a Rust worker holds while inside.
enum Hold {
    Lock(ZkRwLockGuard),
    Lease(ZkSemaphoreLease),
    Leadership(ZkLeadership),
}

/// One round of a Rust worker, recorded while inside.
#[derive(Clone, Debug)]
struct Entered {
    who: String,
    token: FencingToken,
    /// The holders list right after entering.
    holders: Vec<String>,
}

/// A Rust worker: a session of its own, its recipe value, and a raw client of its own for the
/// holders list.
struct Rust {
    name: String,
    role: Role,
    session: Session,
    check: zkc::Client,
    recipe: Recipe,
}

impl Rust {
    async fn new(zk: &Zk, role: Role, name: &str) -> Rust {
        let session = zk.session().await;
        let recipe = match role {
            Role::Reader | Role::Writer => {
                Recipe::RwLock(ZkRwLock::new(&session, RW_ROOT).unwrap())
            }
            Role::Lease => {
                Recipe::Semaphore(ZkSemaphore::new(&session, SEMAPHORE_ROOT, PERMITS).unwrap())
            }
            Role::Candidate => {
                Recipe::Election(ZkLeaderElection::new(&session, ELECTION_ROOT, name).unwrap())
            }
        };
        Rust {
            name: name.to_owned(),
            role,
            check: zk.raw().await,
            session,
            recipe,
        }
    }

    /// Its entry in the holders list.
    fn entry(&self) -> String {
        match self.role {
            Role::Writer | Role::Candidate => format!("x:{}", self.name),
            Role::Reader | Role::Lease => format!("s:{}", self.name),
        }
    }

    /// Acquires, waiting as long as it takes or (`wait` false) not at all: `None` when not
    /// granted at once.
    async fn take(&self, wait: bool) -> Option<Hold> {
        Some(match (&self.recipe, self.role, wait) {
            (Recipe::RwLock(lock), Role::Reader, true) => Hold::Lock(lock.read().await.unwrap()),
            (Recipe::RwLock(lock), Role::Reader, false) => {
                Hold::Lock(lock.try_read().await.unwrap()?)
            }
            (Recipe::RwLock(lock), _, true) => Hold::Lock(lock.write().await.unwrap()),
            (Recipe::RwLock(lock), _, false) => Hold::Lock(lock.try_write().await.unwrap()?),
            (Recipe::Semaphore(semaphore), _, true) => {
                Hold::Lease(semaphore.acquire().await.unwrap())
            }
            (Recipe::Semaphore(semaphore), _, false) => {
                Hold::Lease(semaphore.try_acquire().await.unwrap()?)
            }
            (Recipe::Election(election), _, true) => {
                Hold::Leadership(election.campaign().await.unwrap())
            }
            (Recipe::Election(election), _, false) => {
                Hold::Leadership(election.try_campaign().await.unwrap()?)
            }
        })
    }

    /// Acquires and enters the holders list (panicking if it must not be inside).
    async fn enter(&self) -> (Hold, Entered) {
        let hold = self.take(true).await.expect("waits until granted");
        self.enter_holders(hold).await
    }

    /// Enters, as [`enter`](Rust::enter), if granted at once.
    async fn try_enter(&self) -> Option<(Hold, Entered)> {
        Some(self.enter_holders(self.take(false).await?).await)
    }

    async fn enter_holders(&self, hold: Hold) -> (Hold, Entered) {
        let (token, limit) = match &hold {
            Hold::Lock(guard) => (guard.token(), usize::MAX),
            Hold::Lease(lease) => (lease.token(), PERMITS as usize),
            Hold::Leadership(leadership) => (leadership.term(), 1),
        };
        let holders = enter_holders(&self.check, &self.entry(), limit).await;
        let who = self.name.clone();
        let entered = Entered {
            who,
            token,
            holders,
        };
        (hold, entered)
    }

    /// Leaves the holders list and releases.
    async fn leave(&self, hold: Hold) {
        leave_holders(&self.check, &self.entry()).await;
        match hold {
            Hold::Lock(guard) => guard.release().await.unwrap(),
            Hold::Lease(lease) => lease.release().await.unwrap(),
            Hold::Leadership(leadership) => leadership.release().await.unwrap(),
        }
    }

    /// `ROUNDS` rounds of entering, holding and leaving, each recorded in `log`.
    async fn rounds(self, log: Arc<Mutex<Vec<Entered>>>) {
        for _ in 0..ROUNDS {
            let (hold, entered) = self.enter().await;
            log.lock().unwrap().push(entered);
            tokio::time::sleep(HOLD).await;
            self.leave(hold).await;
        }
        self.session.close().await;
    }
}

/// Starts Rust workers doing their rounds, each on a session of its own.
async fn start_rust(
    zk: &Zk,
    workers: &[(Role, &str)],
    log: &Arc<Mutex<Vec<Entered>>>,
) -> Vec<JoinHandle<()>> {
    let mut tasks = Vec::new();
    for &(role, name) in workers {
        let worker = Rust::new(zk, role, name).await;
        tasks.push(tokio::spawn(worker.rounds(log.clone())));
    }
    tasks
}

/// Waits for the Rust workers to finish their rounds.
async fn join_rust(tasks: Vec<JoinHandle<()>>) {
    within("the Rust workers", 15, async {
        for t in tasks {
            t.await.unwrap();
        }
    })
    .await;
}

/// Waits (on watch events) until a child of `path` has a name containing `part`.
async fn wait_child_named(client: &zkc::Client, path: &str, part: &str) {
    within(&format!("a {part} node under {path}"), 30, async {
        loop {
            let (children, _, watcher) = client.get_and_watch_children(path).await.unwrap();
            if children.iter().any(|c| c.contains(part)) {
                return;
            }
            watcher.changed().await;
        }
    })
    .await;
}

/// Which Rust lock the Java `InterProcessMutex` contends with.
#[derive(Clone, Copy)]
enum RustLock {
    /// A `ZkMutex` on the same path.
    Mutex,
    /// A `ZkLockSpace` whose key lives at the path (Curator creates the key's directory as a
    /// container, as `creatingParentContainersIfNeeded` does).
    Keyed,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_and_curator_workers_exclude_each_other() {
    mutex_interop("interop", ROOT, RustLock::Mutex).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_keyed_locks_and_curator_exclude_each_other_on_one_key() {
    mutex_interop("interop-keyed", KEYED_SPACE_KEY, RustLock::Keyed).await;
}

/// Java's `InterProcessMutex` on `root` and Rust workers on the same lock exclude each other
/// (checked through one ephemeral node both sides create when inside); Rust tokens grow.
async fn mutex_interop(name: &str, root: &str, rust: RustLock) {
    let Some(interop) = Interop::start(name, root).await else {
        return;
    };
    let zk = &interop.zk;

    // The Java worker: started first, as the JVM takes a while; the Rust workers start once it
    // says it is connected, so that both sides contend for the whole run.
    let mut java = Java::spawn(&interop, "worker", &["--root", root, "--inside", INSIDE]);
    java.ready().await;

    // The Rust workers, each with a session of its own, checking exclusion through the same
    // ephemeral node (created with that session's own raw client).
    let grants: Arc<Mutex<Vec<FencingToken>>> = Arc::default();
    let mut tasks = Vec::new();
    let rust_start = Instant::now();
    let (space, key) = root.rsplit_once('/').unwrap();
    for _ in 0..RUST_WORKERS {
        let session = zk.session().await;
        let check = zk.raw().await;
        let grants = grants.clone();
        let (mutex, keyed) = match rust {
            RustLock::Mutex => (Some(ZkMutex::new(&session, root).unwrap()), None),
            RustLock::Keyed => (None, Some(ZkLockSpace::new(&session, space).unwrap())),
        };
        let key = key.to_owned();
        tasks.push(tokio::spawn(async move {
            let ephemeral = zkc::CreateMode::Ephemeral.with_acls(zkc::Acls::anyone_all());
            for round in 0..ROUNDS {
                let (mutex_guard, keyed_guard) = match (&mutex, &keyed) {
                    (Some(mutex), _) => (Some(mutex.lock().await.unwrap()), None),
                    (_, Some(keyed)) => (None, Some(keyed.lock(&key).await.unwrap())),
                    _ => unreachable!(),
                };
                match check.create(INSIDE, &[], &ephemeral).await {
                    Ok(_) => {}
                    Err(zkc::Error::NodeExists) => {
                        panic!("round {round}: Rust got the lock while another holder was inside")
                    }
                    Err(e) => panic!("create {INSIDE}: {e}"),
                }
                let token = match (&mutex_guard, &keyed_guard) {
                    (Some(g), _) => g.token(),
                    (_, Some(g)) => g.token(),
                    _ => unreachable!(),
                };
                grants.lock().unwrap().push(token);
                tokio::time::sleep(HOLD).await;
                check.delete(INSIDE, None).await.unwrap();
                match (mutex_guard, keyed_guard) {
                    (Some(g), _) => g.release().await.unwrap(),
                    (_, Some(g)) => g.release().await.unwrap(),
                    _ => unreachable!(),
                }
            }
            session.close().await;
        }));
    }
    join_rust(tasks).await;
    let rust_end = Instant::now();
    // Java: every round entered and left in order, and it finished.
    let run = java.finish().await;

    // Rust: every round granted, tokens strictly increasing in grant order.
    let grants = grants.lock().unwrap().clone();
    assert_eq!(grants.len(), RUST_WORKERS * ROUNDS);
    assert!(
        grants.windows(2).all(|w| w[0] < w[1]),
        "tokens in grant order must strictly increase: {grants:?}"
    );

    // The two sides really contended: Java entered while the Rust workers were running.
    let java_during_rust = run
        .entries
        .iter()
        .filter(|e| (rust_start..rust_end).contains(&e.at))
        .count();
    println!(
        "Java entered {java_during_rust} of {ROUNDS} times while the Rust workers ran ({:?})",
        rust_end - rust_start
    );
    assert!(
        java_during_rust > 0,
        "no Java acquisition while the Rust workers ran"
    );

    // Nothing left behind: no holder inside, no lock node (and, for the mutex, only our
    // anchor under the root; a key's directory has none).
    assert!(interop.raw.check_stat(INSIDE).await.unwrap().is_none());
    match rust {
        RustLock::Mutex => interop.assert_clean(root).await,
        RustLock::Keyed => {
            let left = interop.raw.list_children(root).await.unwrap_or_default();
            assert_eq!(
                left,
                Vec::<String>::new(),
                "nodes left in the key's directory"
            );
        }
    }
}

/// A Java writer and a Java reader (`InterProcessReadWriteLock`) and Rust writers and readers
/// (`ZkRwLock`) on one path, each checking the holders list as it enters: a writer of either
/// side is never inside with anyone; every round is granted; each Rust writer's token is above
/// every Rust token granted before it and below every one granted after it. Once for certain
/// each: the Java reader gets in beside a Rust reader, and a Rust reader beside the Java reader
/// but not a Rust writer; the Java writer waits for a Rust reader, and while it holds no Rust
/// reader or writer gets in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_and_curator_rwlock_writers_are_alone_and_readers_share() {
    let Some(interop) = Interop::start("interop-rwlock", RW_ROOT).await else {
        return;
    };
    let zk = &interop.zk;
    let mut writer = interop.java("java-writer", "rwlock-write", RW_ROOT, &[]);
    let mut reader = interop.java("java-reader", "rwlock-read", RW_ROOT, &[]);
    writer.ready().await;
    reader.ready().await;
    let rust_reader = Rust::new(zk, Role::Reader, "rust-reader-first").await;
    let rust_writer = Rust::new(zk, Role::Writer, "rust-writer-first").await;

    // The Java reader gets in beside a Rust reader, and holds its first round...
    let (held, _) = rust_reader.enter().await;
    reader.go().await;
    reader
        .entered(1, "the Java reader to get in beside a Rust reader")
        .await;
    rust_reader.leave(held).await;
    // ... while a Rust writer cannot get in, and a Rust reader can (once the writer's withdrawn
    // node, which would be ahead of it, is gone).
    let got_in = rust_writer.try_enter().await.map(|(_, e)| e);
    assert!(got_in.is_none(), "beside the Java reader: {got_in:?}");
    wait_children(&interop.raw, RW_ROOT, 1).await;
    let (held, beside) = rust_reader
        .try_enter()
        .await
        .expect("beside the Java reader");
    assert_eq!(beside.holders, ["s:java-reader", "s:rust-reader-first"]);
    reader.go().await;

    // The Java writer queues behind the Rust reader, gets in once it leaves, and holds its first
    // round: no Rust reader or writer gets in meanwhile.
    writer.go().await;
    wait_child_named(&interop.raw, RW_ROOT, "__WRIT__").await;
    rust_reader.leave(held).await;
    writer
        .entered(1, "the Java writer to get in after the Rust reader")
        .await;
    for probe in [&rust_reader, &rust_writer] {
        let got_in = probe.try_enter().await.map(|(_, e)| e);
        assert!(got_in.is_none(), "beside the Java writer: {got_in:?}");
    }

    // Then everyone contends.
    let log: Arc<Mutex<Vec<Entered>>> = Arc::default();
    let workers = [
        (Role::Writer, "rust-writer-0"),
        (Role::Writer, "rust-writer-1"),
        (Role::Reader, "rust-reader-0"),
        (Role::Reader, "rust-reader-1"),
    ];
    let tasks = start_rust(zk, &workers, &log).await;
    writer.go().await;
    join_rust(tasks).await;
    let writer = writer.finish().await;
    let reader = reader.finish().await;
    let log = log.lock().unwrap().clone();
    assert_eq!(log.len(), workers.len() * ROUNDS);

    // Writers were alone (each side also checked as it entered).
    for entry in &writer.entries {
        assert_eq!(entry.holders, ["x:java-writer"]);
    }
    let is_writer = |e: &Entered| e.who.contains("writer");
    for entry in log.iter().filter(|e| is_writer(e)) {
        assert_eq!(entry.holders, [format!("x:{}", entry.who)]);
    }
    // Tokens order Rust's grants around each Rust writer's.
    for (i, entry) in log.iter().enumerate().filter(|(_, e)| is_writer(e)) {
        assert!(
            log[..i].iter().all(|e| e.token < entry.token)
                && log[i + 1..].iter().all(|e| e.token > entry.token),
            "{entry:?} is not ordered by its token among {log:?}"
        );
    }

    // The Java reader's first round was beside the Rust reader.
    assert_eq!(
        reader.entries[0].holders,
        ["s:rust-reader-first", "s:java-reader"]
    );
    let beside_java = log
        .iter()
        .filter(|e| e.holders.iter().any(|h| h == "s:java-reader"))
        .count();
    let beside_rust = (reader.entries.iter())
        .filter(|e| e.holders.iter().any(|h| h.starts_with("s:rust-")))
        .count();
    println!(
        "Rust readers entered beside the Java reader {beside_java} times, the Java reader \
         beside Rust readers {beside_rust} of {ROUNDS} times"
    );

    interop.assert_clean(RW_ROOT).await;
}

/// A Java worker on `InterProcessSemaphoreV2` and Rust workers on `ZkSemaphore` with the same
/// permits on one path, counting themselves in the holders list as they enter: never more
/// holders than permits, every round granted. Once for certain each way: with every permit
/// taken by Rust the Java worker queues its lease and waits, and gets in beside the Rust lease
/// left; then no Rust lease gets in beside the two, and one does beside the Java lease alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_and_curator_semaphore_holders_never_exceed_the_permits() {
    let Some(interop) = Interop::start("interop-semaphore", SEMAPHORE_ROOT).await else {
        return;
    };
    let zk = &interop.zk;
    let permits = PERMITS.to_string();
    let mut java = interop.java(
        "java",
        "semaphore",
        SEMAPHORE_ROOT,
        &["--permits", &permits],
    );
    java.ready().await;
    let firsts = [
        Rust::new(zk, Role::Lease, "rust-first-0").await,
        Rust::new(zk, Role::Lease, "rust-first-1").await,
    ];

    // Rust holds every permit: the Java worker queues its lease and waits...
    let (held_0, _) = firsts[0].enter().await;
    let (held_1, _) = firsts[1].enter().await;
    java.go().await;
    let leases = format!("{SEMAPHORE_ROOT}/leases");
    wait_children(&interop.raw, &leases, PERMITS as usize + 1).await;
    // ... until a Rust lease goes; then it gets in beside the other, and holds its first round.
    firsts[1].leave(held_1).await;
    java.entered(1, "the Java worker to take the freed permit")
        .await;
    // Rust counts the Java lease: no permit is left, until the other Rust lease goes (and the
    // withdrawn lease node with it).
    let got_in = firsts[1].try_enter().await.map(|(_, e)| e);
    assert!(
        got_in.is_none(),
        "beside the Java lease and another: {got_in:?}"
    );
    firsts[0].leave(held_0).await;
    wait_children(&interop.raw, &leases, 1).await;
    let (held, beside) = firsts[1].try_enter().await.expect("beside the Java lease");
    assert_eq!(beside.holders, ["s:java", "s:rust-first-1"]);

    // Then everyone contends.
    let log: Arc<Mutex<Vec<Entered>>> = Arc::default();
    let workers = [(Role::Lease, "rust-0"), (Role::Lease, "rust-1")];
    let tasks = start_rust(zk, &workers, &log).await;
    java.go().await;
    firsts[1].leave(held).await;
    join_rust(tasks).await;
    let run = java.finish().await;
    let log = log.lock().unwrap().clone();
    assert_eq!(log.len(), workers.len() * ROUNDS);

    assert_eq!(run.entries[0].holders, ["s:rust-first-0", "s:java"]);
    let most = (run.entries.iter().map(|e| e.holders.len()))
        .chain(log.iter().map(|e| e.holders.len()))
        .max();
    let mixed = (run.entries.iter().filter(|e| e.holders.len() > 1)).count();
    println!("at most {most:?} holders at once; the Java worker entered beside Rust {mixed} times");
    assert_eq!(most, Some(PERMITS as usize));

    // Nothing left: no lease, no internal lock node, the permits as stored by Rust.
    assert_eq!(
        interop.raw.list_children(&leases).await.unwrap(),
        Vec::<String>::new()
    );
    interop
        .assert_clean(&format!("{SEMAPHORE_ROOT}/locks"))
        .await;
    let (stored, _) = interop.raw.get_data(SEMAPHORE_ROOT).await.unwrap();
    assert_eq!(stored, permits.as_bytes());
}

/// A Java candidate (`LeaderLatch`, a new latch per round) and Rust candidates
/// (`ZkLeaderElection`) on one path, each leader entering the holders list alone: one leader at a
/// time; every candidate leads in each of its rounds; leadership passes both ways, in the order
/// of the terms (the nodes' sequences). Once for certain: a Rust leader resigns to the Java
/// candidate queued right behind it (Curator's `LeaderLatch` acts on `NodeDeleted` only, so a
/// Rust leader must not resign with a data change), which Rust then reports as the leader (by
/// the id it campaigned with) and does not lead beside, and which hands over to a Rust
/// candidate queued behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_and_curator_candidates_lead_one_at_a_time_and_hand_over_both_ways() {
    let Some(interop) = Interop::start("interop-election", ELECTION_ROOT).await else {
        return;
    };
    let zk = &interop.zk;
    let mut java = interop.java("java", "election", ELECTION_ROOT, &[]);
    java.ready().await;

    // A Rust candidate leads; the Java candidate queues right behind it, the Rust workers
    // behind that.
    let first = Rust::new(zk, Role::Candidate, "rust-first").await;
    let (held, first_entered) = first.enter().await;
    java.go().await;
    wait_children(&interop.raw, ELECTION_ROOT, 2).await;
    let log: Arc<Mutex<Vec<Entered>>> = Arc::default();
    let workers = [(Role::Candidate, "rust-0"), (Role::Candidate, "rust-1")];
    let tasks = start_rust(zk, &workers, &log).await;
    wait_children(&interop.raw, ELECTION_ROOT, 2 + RUST_WORKERS).await;
    // The Rust leader resigns: the Java candidate leads, and holds its first round.
    first.leave(held).await;
    java.entered(
        1,
        "the Java candidate to lead after the Rust leader resigned",
    )
    .await;
    let Recipe::Election(election) = &first.recipe else {
        unreachable!("a candidate campaigns")
    };
    let leader = election.leader().await.unwrap().expect("a leader");
    assert_eq!(leader.info, b"java");
    let got_in = first.try_enter().await.map(|(_, e)| e);
    assert!(got_in.is_none(), "beside the Java leader: {got_in:?}");
    // The Java leader resigns: the Rust workers go on.
    java.go().await;
    join_rust(tasks).await;
    let run = java.finish().await;
    let mut log = log.lock().unwrap().clone();
    assert_eq!(log.len(), workers.len() * ROUNDS);
    assert_eq!(run.entries[0].node.as_ref(), Some(&leader.path));

    // Every leader was alone (each side also checked as it entered).
    log.push(first_entered);
    for entry in &log {
        assert_eq!(entry.holders, [format!("x:{}", entry.who)]);
    }
    for entry in &run.entries {
        assert_eq!(entry.holders, ["x:java"]);
    }

    // The leaderships in the order of their terms: the Java candidate's from its node.
    let mut terms: Vec<(u64, &str)> = log.iter().map(|e| (e.token.as_u64(), &*e.who)).collect();
    for entry in &run.entries {
        let node = (entry.node.as_deref()).expect("an election round prints its node");
        let sequence = &node[node.len() - 10..];
        terms.push((sequence.parse().unwrap(), "java"));
    }
    terms.sort();
    assert!(
        terms.windows(2).all(|w| w[0].0 < w[1].0),
        "every leadership has a term of its own: {terms:?}"
    );
    let order: Vec<&str> = terms.iter().map(|&(_, who)| who).collect();
    assert_eq!(order[..2], ["rust-first", "java"]);
    assert!(
        order[2].starts_with("rust-"),
        "after the Java leader: {order:?}"
    );
    let to_java = order
        .windows(2)
        .filter(|w| w[0] != "java" && w[1] == "java");
    let to_rust = order
        .windows(2)
        .filter(|w| w[0] == "java" && w[1] != "java");
    println!(
        "leadership passed Rust -> Java {} times, Java -> Rust {} times",
        to_java.count(),
        to_rust.count()
    );

    interop.assert_clean(ELECTION_ROOT).await;
}

/// Two Java workers (`SharedCount.trySetCount`) and two Rust workers (`ZkSharedCount::add`) add
/// 1 to one count at once, each ROUNDS times, on a count neither side made beforehand: every
/// addition writes a value of its own (together exactly 1..=4 x ROUNDS), so none is lost and
/// each side decodes what the other wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_and_curator_increments_of_one_shared_count_are_none_of_them_lost() {
    let Some(interop) = Interop::start("interop-count", COUNT_PARENT).await else {
        return;
    };
    let mut javas = [
        interop.java("java-0", "count", COUNT, &[]),
        interop.java("java-1", "count", COUNT, &[]),
    ];
    for java in &mut javas {
        java.ready().await;
    }
    let mut rust = Vec::new();
    for _ in 0..2 {
        let session = interop.zk.session().await;
        let count = ZkSharedCount::new(&session, COUNT, 0).unwrap();
        rust.push(tokio::spawn(async move {
            let mut wrote = Vec::new();
            for _ in 0..ROUNDS {
                wrote.push(count.add(1).await.unwrap().value());
            }
            session.close().await;
            wrote
        }));
    }
    for java in &mut javas {
        java.go().await;
    }
    let mut written = Vec::new();
    for task in rust {
        written.extend(within("the Rust additions", 60, task).await.unwrap());
    }
    let [java_0, java_1] = javas;
    let mut by_java = 0;
    for java in [java_0, java_1] {
        let run = java.finish().await;
        by_java += run.entries.len();
        written.extend(run.entries.iter().map(|e| e.count.expect("count=")));
    }
    assert_eq!(by_java, 2 * ROUNDS);
    written.sort_unstable();
    let total = (4 * ROUNDS) as i32;
    assert_eq!(
        written,
        (1..=total).collect::<Vec<i32>>(),
        "each value once"
    );
    let (data, _) = interop.raw.get_data(COUNT).await.unwrap();
    assert_eq!(data, total.to_be_bytes());
}

/// A Java `GroupMember` and a Rust `ZkGroup` member in one group: each side sees both members
/// with their payloads, and Rust sees the Java member leave when its worker ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_and_curator_group_members_see_each_other() {
    let Some(interop) = Interop::start("interop-group", GROUP_ROOT).await else {
        return;
    };
    let mut java = interop.java(
        "java",
        "group",
        GROUP_ROOT,
        &["--rounds", "1", "--permits", "2"],
    );
    java.ready().await;
    let session = interop.zk.session().await;
    let group = ZkGroup::new(&session, GROUP_ROOT).unwrap();
    let member = group.join("rust", b"payload-rust").await.unwrap();
    // Rust sees the Java member and its payload.
    let both = within("both members seen from Rust", 30, async {
        let mut members = group.members().await.unwrap();
        while members.len() < 2 {
            members = group.changed(&members).await.unwrap();
        }
        members
    })
    .await;
    assert_eq!(both.payload("java"), Some(&b"payload-java"[..]));
    assert_eq!(both.payload("rust"), Some(&b"payload-rust"[..]));
    // Java sees the Rust member and its payload.
    java.go().await;
    let run = java.finish_rounds(1).await;
    assert_eq!(
        run.entries[0].holders,
        ["java=payload-java", "rust=payload-rust"]
    );
    // The Java worker closed its member as it ended.
    within("the Java member gone", 30, async {
        let mut members = group.members().await.unwrap();
        while members.contains("java") {
            members = group.changed(&members).await.unwrap();
        }
    })
    .await;
    member.release().await.unwrap();
    assert!(group.members().await.unwrap().is_empty());
    session.close().await;
}

/// Curator's own `Revoker.attemptRevoke` on a Rust waiter's node and then on the Rust
/// holder's: the holder hears the request (and still holds), the waiter does not move, and
/// the lock moves when the holder releases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curators_revoker_asks_a_rust_holder_and_moves_nobody() {
    const REVOKED: &str = "/interop/revoked";
    let Some(interop) = Interop::start("interop-revoke", REVOKED).await else {
        return;
    };
    let mut java = Java::spawn(&interop, "revoker", &["--recipe", "revoke"]);
    java.ready().await;
    for round in 0..3 {
        let session = interop.zk.session().await;
        let mutex = ZkMutex::new(&session, REVOKED).unwrap();
        let holder = mutex.lock().await.unwrap();
        let waiter = {
            let mutex = ZkMutex::new(&session, REVOKED).unwrap();
            tokio::spawn(async move { mutex.lock().await.unwrap() })
        };
        wait_children(&interop.raw, REVOKED, 2).await;
        let nodes = contenders(&interop.raw, REVOKED).await;
        let waiting = nodes
            .iter()
            .map(|n| format!("{REVOKED}/{n}"))
            .find(|n| n != holder.path())
            .unwrap();
        // In this order: the Java peer revokes one path after the other.
        for path in [waiting.as_str(), holder.path()] {
            java.stdin
                .write_all(format!("REVOKE {path}\n").as_bytes())
                .await
                .unwrap();
        }
        java.stdin.flush().await.unwrap();
        within(
            "the holder hears the revocation",
            15,
            holder.revoke_requested(),
        )
        .await;
        assert!(holder.is_held(), "round {round}: a request is no loss");
        let (data, _) = interop.raw.get_data(&waiting).await.unwrap();
        assert_eq!(data, b"__REVOKE__", "the waiter's node was revoked first");
        // Everything this session was sent is answered, and a moment to act on it: the
        // waiter has not moved.
        let client = session.client().await.unwrap();
        client.sync(REVOKED).await.unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(
            !waiter.is_finished(),
            "round {round}: the waiter moved while the holder held"
        );
        let first = holder.token();
        holder.release().await.unwrap();
        let next = within("the waiter after the release", 15, waiter)
            .await
            .unwrap();
        assert!(next.token() > first);
        next.release().await.unwrap();
        session.close().await;
    }
    interop.assert_clean(REVOKED).await;
}
