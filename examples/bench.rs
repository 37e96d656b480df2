//! Benchmarks of `ZkMutex` against its peers on one ZooKeeper server (issue #7).
//!
//! ```text
//! examples/bench-peers/run.sh                       # installs Curator if missing, then runs:
//! cargo run --release --example bench -- --json bench.json
//! ZK_CONNECT=127.0.0.1:2181 cargo run --release --example bench    # an existing server
//! cargo run --release --example bench -- --measure 10 --warmup 2 --waiters 5000   # longer
//! ```
//!
//! Flags: `--json PATH` (also write the JSON there), `--measure SECS` (measurement window of
//! each throughput workload, default 5), `--warmup SECS` (default 1), `--waiters N` (default
//! 1000), `--no-java` (skip Curator), `--only LIBS` (a comma-separated subset of `zk-recipes`,
//! `client-lock`, `curator`), `--workloads LIST` (a subset of `uncontended`, `contended8`,
//! `locks64x4`, `waiters`). `BENCH_MEASURE_SECS` / `BENCH_WARMUP_SECS` do the same as the
//! flags.
//!
//! What runs, in one process against one server (a fresh ZooKeeper 3.8 container from
//! `zk-testcontainers`, or `ZK_CONNECT`), about a minute and a half by default:
//!
//! - **server floor**, with the raw `zookeeper_client::Client`, one request at a time, before
//!   and after the lock workloads (pooled): `set_data` (one write round trip: the yardstick of
//!   the targets), `get_children` (one read), ephemeral sequential `create` + `delete` (the two
//!   writes of every lock cycle), and `create` and `get_children` pipelined in both orders (what
//!   a one-round-trip acquire can at best cost);
//! - for `zk-recipes`' `ZkMutex`, zookeeper-client's own `Client::lock` (Curator-style prefix)
//!   and, where Java and Debian's Curator are installed, Curator's `InterProcessMutex` (our Java
//!   harness `examples/bench-peers/CuratorBench.java`, compiled with `javac` and run as a
//!   subprocess that prints JSON):
//!   - uncontended acquire + release on one session: cycles/s, acquire latency p50/p99;
//!   - 8 contenders on one lock, each on its own session: cycles/s, acquire latency p50/p99,
//!     handoff latency (from the holder calling release to the next holder's grant, both
//!     timestamps taken in this process);
//!   - 64 locks x 4 contenders (4 sessions, each contending on all 64 locks): cycles/s;
//!   - client CPU per 1,000 cycles (`/proc/self/stat` around the measurement window; for the
//!     Java peer, the JVM's process CPU time, JIT and GC included);
//! - 1,000 waiters on one lock, on one session, in a fresh child process each (so one
//!   workload's freed memory does not flatter the next): RSS delta per waiter
//!   (`/proc/self/status`) once ZooKeeper reports every waiter's watch (`wchs`), and for
//!   `ZkMutex` the wake-ups per release, counted from the library's `"watch fired"` debug events
//!   while the queue drains, and the drain rate;
//! - a census of `ZkMutex`'s requests per grant and where an uncontended acquire's and a
//!   handoff's time goes, from the library's tracing events with timestamps (a separate short
//!   run, so that the measured runs pay nothing for tracing).
//!
//! Fairness: the server churns unmeasured with both Rust libraries first (a fresh server is
//! slower for its first seconds); workload by workload, the two Rust libraries take turns going
//! first; the JVM churns unmeasured for 2 s before its first workload (JIT). Every workload
//! releases with a delete whose reply is awaited (`ZkMutexGuard::release`, an explicit `delete`
//! for `Client::lock`, whose guard otherwise deletes in the background on drop, and Curator's
//! `release()`), holds for no time, and checks that no two holders overlap.
//!
//! Linux only (`/proc`). Each workload opens its own sessions. The targets of issue #7 are
//! judged at the end of the table, as ratios from this one run.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing::span::{Attributes, Id};
use tracing::subscriber::Interest;
use tracing::{Metadata, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;
use zk_recipes::{OwnedZkMutexGuard, Session, SessionOptions, ZkMutex};
use zk_testcontainers::{ServerOptions, ZkServer};
use zookeeper_client as zkc;

/// The server's JVM options (`ZK_JAVA_OPTS` of the image; `BENCH_ZK_JAVA_OPTS` overrides): the
/// image's default stops the JIT at C1 and keeps the heap small for fast test start-up, which
/// is not how a production server runs.
const SERVER_JAVA_OPTS: &str = "-Xms256m -Xmx512m -XX:+UseSerialGC";

/// Contenders on the single contended lock.
const CONTENDERS: usize = 8;
/// Locks and contenders per lock of the many-locks workload.
const GRID: (usize, usize) = (64, 4);

// ---------------------------------------------------------------------------------------------
// Command line

/// What the command line asks for.
#[derive(Clone, Debug)]
struct Args {
    /// Where to write the JSON report too.
    json: Option<PathBuf>,
    /// Measurement window of each throughput workload.
    measure: Duration,
    /// Warm-up before each window.
    warmup: Duration,
    /// Waiters of the memory / wake-up workload.
    waiters: usize,
    /// Skip the Curator peer.
    no_java: bool,
    /// Only these libraries (`zk-recipes`, `client-lock`, `curator`); all when empty.
    only: Vec<String>,
    /// Only these workloads (`uncontended`, `contended8`, `locks64x4`, `waiters`); all when
    /// empty.
    workloads: Vec<String>,
    /// Internal: run the waiters workload of this library in this (child) process.
    child: Option<Lib>,
    /// Internal (child): the connect string.
    connect: Option<String>,
    /// Internal (child): the lock path.
    path: Option<String>,
}

impl Args {
    fn parse() -> Args {
        let env_secs = |name: &str, default: f64| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(default)
        };
        let mut args = Args {
            json: None,
            measure: Duration::from_secs_f64(env_secs("BENCH_MEASURE_SECS", 5.0)),
            warmup: Duration::from_secs_f64(env_secs("BENCH_WARMUP_SECS", 1.0)),
            waiters: 1000,
            no_java: false,
            only: Vec::new(),
            workloads: Vec::new(),
            child: None,
            connect: None,
            path: None,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let mut value = || {
                it.next()
                    .unwrap_or_else(|| usage(&format!("{flag} needs a value")))
            };
            match flag.as_str() {
                "--json" => args.json = Some(PathBuf::from(value())),
                "--measure" => args.measure = Duration::from_secs_f64(parse(&value(), &flag)),
                "--warmup" => args.warmup = Duration::from_secs_f64(parse(&value(), &flag)),
                "--waiters" => args.waiters = parse(&value(), &flag),
                "--no-java" => args.no_java = true,
                "--only" => args.only = value().split(',').map(str::to_owned).collect(),
                "--workloads" => args.workloads = value().split(',').map(str::to_owned).collect(),
                "--child-waiters" => {
                    args.child = Some(match value().as_str() {
                        "zk-recipes" => Lib::Ours,
                        "client-lock" => Lib::ClientLock,
                        other => usage(&format!("unknown library {other}")),
                    })
                }
                "--connect" => args.connect = Some(value()),
                "--path" => args.path = Some(value()),
                "-h" | "--help" => usage(""),
                other => usage(&format!("unknown argument {other}")),
            }
        }
        args
    }
}

impl Args {
    /// Whether the library named `key` is to be measured.
    fn runs(&self, key: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == key)
    }

    /// Whether the workload named `key` is to be run.
    fn runs_workload(&self, key: &str) -> bool {
        self.workloads.is_empty() || self.workloads.iter().any(|w| w == key)
    }
}

/// Parses a flag's value or exits with the usage.
fn parse<T: std::str::FromStr>(value: &str, flag: &str) -> T {
    value
        .parse()
        .unwrap_or_else(|_| usage(&format!("bad value {value:?} for {flag}")))
}

/// Prints the usage (and a complaint) and exits.
fn usage(complaint: &str) -> ! {
    if !complaint.is_empty() {
        eprintln!("bench: {complaint}");
    }
    eprintln!(
        "usage: cargo run --release --example bench -- [--json PATH] [--measure SECS] \
         [--warmup SECS] [--waiters N] [--no-java] [--only zk-recipes,client-lock,curator] \
         [--workloads uncontended,contended8,locks64x4,waiters]"
    );
    std::process::exit(2)
}

// ---------------------------------------------------------------------------------------------
// Counting the library's tracing events and spans

/// Logs `zk_recipes` events (by message) and span creations (as `span:{name}`) with their
/// time, plus the benchmark's own marks, only while switched on: when off, the library's
/// callsites are disabled and cost next to nothing.
#[derive(Clone, Default)]
struct Census {
    on: Arc<AtomicBool>,
    log: Arc<Mutex<Vec<(u64, String)>>>,
}

impl Census {
    /// Starts a fresh log.
    fn start(&self) {
        self.log.lock().unwrap().clear();
        self.on.store(true, Ordering::SeqCst);
    }

    /// Stops logging and returns the log.
    fn stop(&self) -> Vec<(u64, String)> {
        self.on.store(false, Ordering::SeqCst);
        std::mem::take(&mut *self.log.lock().unwrap())
    }

    /// Logs one of the benchmark's own moments (e.g. `"release"`), when on.
    fn mark(&self, label: &str) {
        if self.on.load(Ordering::Relaxed) {
            self.add(label.to_owned());
        }
    }

    fn add(&self, key: String) {
        let t = now_ns();
        self.log.lock().unwrap().push((t, key));
    }

    /// Installs the census as the global subscriber (the only layer).
    fn install(&self) {
        let _ = tracing_subscriber::registry().with(self.clone()).try_init();
    }
}

/// How many times each label occurs in a log.
fn counts(log: &[(u64, String)]) -> HashMap<String, u64> {
    let mut counts = HashMap::new();
    for (_, label) in log {
        *counts.entry(label.clone()).or_default() += 1;
    }
    counts
}

/// Where the time of a `ZkMutex` handoff goes, from a census log of one lock (medians, µs).
#[derive(Clone, Debug, Default)]
struct Breakdown {
    /// Handoffs with a wake-up.
    handoffs: usize,
    /// From the holder calling release to the next waiter's watch event.
    release_to_event: Option<f64>,
    /// From the watch event to the waiter asking for the children again.
    event_to_relist: Option<f64>,
    /// From asking for the children again to the grant (a read round trip and the decision).
    relist_to_grant: Option<f64>,
    /// From the watch event to the grant, for handoffs without a re-list.
    event_to_grant_direct: Option<f64>,
    /// From the holder calling release to the next grant.
    total: Option<f64>,
    /// Its 99th percentile.
    total_p99: Option<f64>,
    /// The holder's delete round trip (release called to `"released"`).
    delete_rtt: Option<f64>,
}

/// Splits each handoff of a one-lock census log at the waiter's watch event and re-list.
/// A handoff starts at the `"release"` mark (or, without one, the previous grant).
fn breakdown(log: &[(u64, String)]) -> Breakdown {
    let (mut to_event, mut to_relist, mut relist_to_grant, mut direct, mut total, mut delete) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut last_grant, mut release, mut last_release) = (None::<u64>, None::<u64>, None::<u64>);
    let (mut watch, mut relist) = (None::<u64>, None::<u64>);
    for (t, label) in log {
        let t = *t;
        match label.as_str() {
            "release" => {
                release.get_or_insert(t);
                last_release = Some(t);
            }
            "released" => {
                if let Some(r) = last_release.take() {
                    delete.push(t.saturating_sub(r));
                }
            }
            "watch fired" => {
                watch.get_or_insert(t);
            }
            "listing again" => relist = Some(t),
            "granted" => {
                if let (Some(start), Some(w)) = (release.or(last_grant), watch) {
                    to_event.push(w.saturating_sub(start));
                    total.push(t.saturating_sub(start));
                    match relist {
                        Some(r) if r >= w => {
                            to_relist.push(r - w);
                            relist_to_grant.push(t.saturating_sub(r));
                        }
                        _ => direct.push(t.saturating_sub(w)),
                    }
                }
                last_grant = Some(t);
                (release, watch, relist) = (None, None, None);
            }
            _ => {}
        }
    }
    Breakdown {
        handoffs: total.len(),
        release_to_event: Latency::of(to_event).p50,
        event_to_relist: Latency::of(to_relist).p50,
        relist_to_grant: Latency::of(relist_to_grant).p50,
        event_to_grant_direct: Latency::of(direct).p50,
        total: Latency::of(total.clone()).p50,
        total_p99: Latency::of(total).p99,
        delete_rtt: Latency::of(delete).p50,
    }
}

/// Takes the `message` field of an event.
struct MessageVisitor(Option<String>);

impl tracing::field::Visit for MessageVisitor {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

impl<S: Subscriber> Layer<S> for Census {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if meta.target().starts_with("zk_recipes") {
            Interest::sometimes()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>, _: Context<'_, S>) -> bool {
        self.on.load(Ordering::Relaxed) && meta.target().starts_with("zk_recipes")
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, _: &Id, _: Context<'_, S>) {
        self.add(format!("span:{}", attrs.metadata().name()));
    }

    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut visitor = MessageVisitor(None);
        event.record(&mut visitor);
        if let Some(message) = visitor.0 {
            self.add(message);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Measuring

/// Nanoseconds since the first call: the process-wide clock of handoff timestamps.
fn now_ns() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64 + 1
}

/// Client CPU time of this process (user + system, every thread), from `/proc/self/stat`.
fn cpu_time() -> Duration {
    static TICKS: OnceLock<f64> = OnceLock::new();
    let ticks = *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    });
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) in parentheses: utime is the 14th
    // field of the line, the 12th after ")".
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Duration::from_secs_f64((field(11) + field(12)) / ticks)
}

/// Resident set size of this process, in KiB (`VmRSS` of `/proc/self/status`).
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The 1-minute load average.
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Nearest-rank percentile of nanosecond samples, in microseconds (`None` without samples).
/// The Java peer uses the same rule.
fn percentile_us(sorted: &[u64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).max(1);
    Some(sorted[rank - 1] as f64 / 1000.0)
}

/// Latency summary (µs).
#[derive(Clone, Copy, Debug, Default)]
struct Latency {
    p50: Option<f64>,
    p99: Option<f64>,
    samples: usize,
}

impl Latency {
    fn of(mut samples: Vec<u64>) -> Latency {
        samples.sort_unstable();
        Latency {
            p50: percentile_us(&samples, 0.50),
            p99: percentile_us(&samples, 0.99),
            samples: samples.len(),
        }
    }
}

/// What a throughput workload measured.
#[derive(Clone, Debug, Default)]
struct Figures {
    cycles: u64,
    seconds: f64,
    acquire: Latency,
    handoff: Latency,
    cpu_ms: f64,
    violations: u64,
    error: Option<String>,
}

impl Figures {
    fn cycles_per_s(&self) -> Option<f64> {
        (self.seconds > 0.0 && self.error.is_none()).then(|| self.cycles as f64 / self.seconds)
    }

    fn cpu_ms_per_1000(&self) -> Option<f64> {
        (self.cycles > 0 && self.error.is_none()).then(|| self.cpu_ms * 1000.0 / self.cycles as f64)
    }
}

/// What the waiters workload measured (in a child process).
#[derive(Clone, Debug, Default)]
struct WaiterFigures {
    waiters: usize,
    rss_before_kib: u64,
    rss_waiting_kib: u64,
    kib_per_waiter: Option<f64>,
    /// `"watch fired"` events per release that had a waiter (ZkMutex only).
    wakeups_per_release: Option<f64>,
    /// Extra listings (`"listing again"`) per handoff (ZkMutex only).
    relists_per_handoff: Option<f64>,
    enqueue_s: f64,
    drain_handoffs_per_s: Option<f64>,
    /// Where the drain's handoffs spend their time (ZkMutex only).
    breakdown: Option<Breakdown>,
    error: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// The Rust locks under test

/// A Rust lock implementation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lib {
    /// zk-recipes' `ZkMutex`.
    Ours,
    /// zookeeper-client's `Client::lock` with `LockPrefix::new_curator`.
    ClientLock,
}

impl Lib {
    fn key(self) -> &'static str {
        match self {
            Lib::Ours => "zk-recipes",
            Lib::ClientLock => "client-lock",
        }
    }
}

/// One ZooKeeper session of a library.
#[derive(Clone)]
enum Conn {
    Ours(Session),
    ClientLock(zkc::Client),
}

impl Conn {
    async fn open(lib: Lib, connect: &str) -> Result<Conn, String> {
        match lib {
            Lib::Ours => Session::connect(SessionOptions::new(connect))
                .await
                .map(Conn::Ours)
                .map_err(|e| format!("zk-recipes session: {e}")),
            Lib::ClientLock => zkc::Client::connect(connect)
                .await
                .map(Conn::ClientLock)
                .map_err(|e| format!("zookeeper-client session: {e}")),
        }
    }

    async fn close(self) {
        match self {
            Conn::Ours(session) => session.close().await,
            Conn::ClientLock(client) => drop(client),
        }
    }

    /// A contender on `path` over this session.
    fn locker(&self, path: &str) -> Locker {
        match self {
            Conn::Ours(session) => Locker::Ours(Arc::new(
                ZkMutex::new(session, path).expect("a valid lock path"),
            )),
            Conn::ClientLock(client) => Locker::ClientLock {
                client: client.clone(),
                dir: path.to_owned(),
            },
        }
    }
}

/// One contender on one lock.
enum Locker {
    Ours(Arc<ZkMutex>),
    ClientLock { client: zkc::Client, dir: String },
}

/// A held lock.
enum Held {
    Ours(OwnedZkMutexGuard),
    ClientLock { client: zkc::Client, path: String },
}

impl Locker {
    /// Waits for the lock.
    async fn acquire(&self) -> Result<Held, String> {
        match self {
            Locker::Ours(mutex) => mutex
                .clone()
                .lock_owned()
                .await
                .map(Held::Ours)
                .map_err(|e| format!("ZkMutex::lock: {e}")),
            Locker::ClientLock { client, dir } => {
                let prefix = zkc::LockPrefix::new_curator(dir, "lock-")
                    .map_err(|e| format!("LockPrefix: {e}"))?;
                let options = zkc::LockOptions::new(zkc::Acls::anyone_all());
                let lock = client
                    .lock(prefix, b"", options)
                    .await
                    .map_err(|e| format!("Client::lock: {e}"))?;
                let path = lock.lock_path().to_owned();
                // Its Drop would delete in the background without waiting for the reply; we
                // delete explicitly (and wait), like the other two. Forgetting it leaks only
                // its copy of the path.
                std::mem::forget(lock);
                Ok(Held::ClientLock {
                    client: client.clone(),
                    path,
                })
            }
        }
    }
}

impl Held {
    /// Releases: deletes the node and waits for the reply.
    async fn release(self) -> Result<(), String> {
        match self {
            Held::Ours(guard) => guard.release().await.map_err(|e| format!("release: {e}")),
            Held::ClientLock { client, path } => client
                .delete(&path, None)
                .await
                .map_err(|e| format!("delete {path}: {e}")),
        }
    }
}

/// Shared by the contenders of one lock: who holds (to catch overlaps) and when the last
/// holder called release.
#[derive(Default)]
struct LockState {
    held: AtomicBool,
    released_at: AtomicU64,
}

/// The measurement window, set by the driver after the warm-up.
#[derive(Default)]
struct Window {
    bounds: OnceLock<(u64, u64)>,
    stop: AtomicBool,
}

impl Window {
    fn contains(&self, t: u64) -> Option<bool> {
        self.bounds.get().map(|&(s, e)| t >= s && t < e)
    }

    fn start(&self) -> Option<u64> {
        self.bounds.get().map(|&(s, _)| s)
    }
}

/// What one contender task saw.
#[derive(Default)]
struct Tally {
    acquire: Vec<u64>,
    handoff: Vec<u64>,
    cycles: u64,
    violations: u64,
    error: Option<String>,
}

/// One contender: acquire, note the times, release, until the window closes. With a census,
/// marks the moment it calls release.
async fn contend(
    locker: Locker,
    lock: Arc<LockState>,
    window: Arc<Window>,
    census: Option<Census>,
) -> Tally {
    let mut tally = Tally::default();
    let mark = |label: &str| {
        if let Some(census) = &census {
            census.mark(label);
        }
    };
    while !window.stop.load(Ordering::Relaxed) {
        mark("acquire");
        let asked = now_ns();
        let held = match locker.acquire().await {
            Ok(held) => held,
            Err(e) => {
                tally.error = Some(e);
                break;
            }
        };
        let granted = now_ns();
        mark("acquired");
        if lock.held.swap(true, Ordering::SeqCst) {
            tally.violations += 1;
        }
        let released = lock.released_at.swap(0, Ordering::SeqCst);
        if window.contains(granted) == Some(true) {
            let start = window.start().unwrap_or(u64::MAX);
            tally.cycles += 1;
            if asked >= start {
                tally.acquire.push(granted - asked);
            }
            if released != 0 && released >= start {
                tally.handoff.push(granted - released);
            }
        }
        lock.held.store(false, Ordering::SeqCst);
        lock.released_at.store(now_ns(), Ordering::SeqCst);
        mark("release");
        if let Err(e) = held.release().await {
            tally.error = Some(e);
            break;
        }
    }
    tally
}

/// `locks` locks under `dir`, `per_lock` contenders on each; contender `i` of every lock uses
/// session `i`. With a census, the contenders mark their releases in it.
async fn run_locks(
    lib: Lib,
    connect: &str,
    dir: &str,
    (locks, per_lock): (usize, usize),
    args: &Args,
    census: Option<&Census>,
) -> Figures {
    let mut conns = Vec::new();
    for _ in 0..per_lock {
        match Conn::open(lib, connect).await {
            Ok(conn) => conns.push(conn),
            Err(error) => {
                return Figures {
                    error: Some(error),
                    ..Figures::default()
                }
            }
        }
    }
    let window = Arc::new(Window::default());
    let mut tasks = Vec::new();
    for l in 0..locks {
        let path = format!("{dir}/lock-{l}");
        if lib == Lib::ClientLock {
            // Client::lock needs its directory (zk-recipes creates its own).
            if let Err(e) = mkdir(connect, &path).await {
                return Figures {
                    error: Some(e),
                    ..Figures::default()
                };
            }
        }
        let state = Arc::new(LockState::default());
        for conn in &conns {
            tasks.push(tokio::spawn(contend(
                conn.locker(&path),
                state.clone(),
                window.clone(),
                census.cloned(),
            )));
        }
    }
    tokio::time::sleep(args.warmup).await;
    let cpu0 = cpu_time();
    let start = now_ns();
    let end = start + args.measure.as_nanos() as u64;
    let _ = window.bounds.set((start, end));
    tokio::time::sleep(args.measure).await;
    let cpu1 = cpu_time();
    window.stop.store(true, Ordering::SeqCst);
    let mut figures = Figures {
        seconds: args.measure.as_secs_f64(),
        cpu_ms: (cpu1 - cpu0).as_secs_f64() * 1000.0,
        ..Figures::default()
    };
    let (mut acquire, mut handoff) = (Vec::new(), Vec::new());
    for task in tasks {
        match tokio::time::timeout(Duration::from_secs(60), task).await {
            Ok(Ok(tally)) => {
                figures.cycles += tally.cycles;
                figures.violations += tally.violations;
                acquire.extend(tally.acquire);
                handoff.extend(tally.handoff);
                if figures.error.is_none() {
                    figures.error = tally.error;
                }
            }
            Ok(Err(e)) => figures.error = Some(format!("contender task: {e}")),
            Err(_) => figures.error = Some("a contender did not finish within 60 s".into()),
        }
    }
    figures.acquire = Latency::of(acquire);
    // With one contender a lock has no handoffs (its next grant is its own).
    if per_lock > 1 {
        figures.handoff = Latency::of(handoff);
    }
    for conn in conns {
        conn.close().await;
    }
    figures
}

// ---------------------------------------------------------------------------------------------
// The server's floor

/// The raw client's write round trips, one request at a time.
#[derive(Clone, Debug, Default)]
struct Floor {
    set_data: Vec<u64>,
    /// `get_children` of the run's root (a handful of children): one read round trip.
    list: Vec<u64>,
    /// `create` and `get_children` sent back to back, until both replies are in.
    create_list: Vec<u64>,
    /// `get_children` and `create` sent back to back (list first).
    list_create: Vec<u64>,
    /// How many of those listings were provably exact (sequence == listed cversion).
    list_create_exact: u64,
    create: Vec<u64>,
    delete: Vec<u64>,
    /// create + delete cycles and the seconds they took.
    cycles: u64,
    seconds: f64,
    cpu_ms: f64,
}

impl Floor {
    fn merge(&mut self, other: Floor) {
        self.set_data.extend(other.set_data);
        self.list.extend(other.list);
        self.create_list.extend(other.create_list);
        self.list_create.extend(other.list_create);
        self.list_create_exact += other.list_create_exact;
        self.create.extend(other.create);
        self.delete.extend(other.delete);
        self.cycles += other.cycles;
        self.seconds += other.seconds;
        self.cpu_ms += other.cpu_ms;
    }
}

/// `set_data` on one node for `secs`, `get_children` for `secs / 2`, then ephemeral sequential
/// `create` + `delete` for `secs`.
async fn measure_floor(connect: &str, dir: &str, secs: Duration) -> Result<Floor, String> {
    let client = zkc::Client::connect(connect)
        .await
        .map_err(|e| format!("raw client: {e}"))?;
    let node = format!("{dir}/floor");
    let persistent = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    match client.create(&node, b"", &persistent).await {
        Ok(_) | Err(zkc::Error::NodeExists) => {}
        Err(e) => return Err(format!("create {node}: {e}")),
    }
    let mut floor = Floor::default();
    // A short warm-up of both request kinds.
    for _ in 0..50 {
        client
            .set_data(&node, b"x", None)
            .await
            .map_err(|e| e.to_string())?;
    }
    let until = Instant::now() + secs;
    while Instant::now() < until {
        let t = now_ns();
        client
            .set_data(&node, b"x", None)
            .await
            .map_err(|e| format!("set_data: {e}"))?;
        floor.set_data.push(now_ns() - t);
    }
    let until = Instant::now() + secs / 2;
    while Instant::now() < until {
        let t = now_ns();
        client
            .get_children(dir)
            .await
            .map_err(|e| format!("get_children: {e}"))?;
        floor.list.push(now_ns() - t);
    }
    let sequential = zkc::CreateMode::EphemeralSequential.with_acls(zkc::Acls::anyone_all());
    let prefix = format!("{node}/n-");
    let cpu0 = cpu_time();
    let started = Instant::now();
    while started.elapsed() < secs {
        let t0 = now_ns();
        let (_, sequence) = client
            .create(&prefix, b"", &sequential)
            .await
            .map_err(|e| format!("create: {e}"))?;
        let t1 = now_ns();
        client
            .delete(&format!("{prefix}{sequence}"), None)
            .await
            .map_err(|e| format!("delete: {e}"))?;
        let t2 = now_ns();
        floor.create.push(t1 - t0);
        floor.delete.push(t2 - t1);
        floor.cycles += 1;
    }
    floor.seconds = started.elapsed().as_secs_f64();
    floor.cpu_ms = (cpu_time() - cpu0).as_secs_f64() * 1000.0;
    // What a one-round-trip acquire can at best cost: create and list sent back to back, in
    // either order (alternating, so that drift favours neither). Listing after the create
    // (what zk-recipes does) makes the listing wait for the create to commit; listing first
    // does not, and the listing is then exactly the queue ahead of the new node whenever no
    // child was created in between: ZooKeeper takes the sequence from the parent's count of
    // child creates, and reports `cversion = 2 * creates - children`.
    let until = Instant::now() + secs;
    let mut list_first = false;
    while Instant::now() < until {
        list_first = !list_first;
        let t0 = now_ns();
        let (created, listed) = if list_first {
            let list = client.get_children(&node);
            let create = client.create(&prefix, b"", &sequential);
            let (listed, created) = (list.await, create.await);
            (created, listed)
        } else {
            let create = client.create(&prefix, b"", &sequential);
            let list = client.get_children(&node);
            (create.await, list.await)
        };
        let elapsed = now_ns() - t0;
        let (_, sequence) = created.map_err(|e| format!("create: {e}"))?;
        let (children, parent) = listed.map_err(|e| format!("get_children: {e}"))?;
        if list_first {
            floor.list_create.push(elapsed);
            let creates = (i64::from(parent.cversion) + children.len() as i64) / 2;
            if sequence.into_i64() == creates {
                floor.list_create_exact += 1;
            }
        } else {
            floor.create_list.push(elapsed);
        }
        client
            .delete(&format!("{prefix}{sequence}"), None)
            .await
            .map_err(|e| format!("delete: {e}"))?;
    }
    Ok(floor)
}

// ---------------------------------------------------------------------------------------------
// The waiters workload (child process)

/// Runs `--child-waiters`: one session, a holder, `n` waiters; prints `RESULT {json}`.
async fn child_waiters(lib: Lib, connect: &str, path: &str, n: usize, census: &Census) {
    let result = waiters(lib, connect, path, n, census).await;
    let figures = result.unwrap_or_else(|error| WaiterFigures {
        error: Some(error),
        ..WaiterFigures::default()
    });
    println!("RESULT {}", waiter_json(&figures).render_compact());
}

async fn waiters(
    lib: Lib,
    connect: &str,
    path: &str,
    n: usize,
    census: &Census,
) -> Result<WaiterFigures, String> {
    let conn = Conn::open(lib, connect).await?;
    let raw = zkc::Client::connect(connect)
        .await
        .map_err(|e| format!("raw client: {e}"))?;
    if lib == Lib::ClientLock {
        mkdir(connect, path).await?;
    }
    let locker = Arc::new(conn.locker(path));
    // Warm up the session and the lock's root, then hold the lock.
    for _ in 0..20 {
        locker.acquire().await?.release().await?;
    }
    let holder = locker.acquire().await?;
    let watches_before = total_watches(connect).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = rss_kib();

    let done = Arc::new(AtomicU64::new(0));
    let (err_tx, mut err_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let enqueue_started = Instant::now();
    let mut tasks = Vec::with_capacity(n);
    for _ in 0..n {
        let locker = locker.clone();
        let done = done.clone();
        let err_tx = err_tx.clone();
        let census = census.clone();
        tasks.push(tokio::spawn(async move {
            match locker.acquire().await {
                Ok(held) => {
                    census.mark("release");
                    if let Err(e) = held.release().await {
                        let _ = err_tx.send(e);
                    }
                }
                Err(e) => {
                    let _ = err_tx.send(e);
                }
            }
            done.fetch_add(1, Ordering::SeqCst);
        }));
    }
    // Every waiter is in the queue and watching once the server has `n` more watches (or, when
    // four-letter words are off, `n` more children and a pause).
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(e) = err_rx.try_recv() {
            return Err(e);
        }
        if Instant::now() > deadline {
            return Err("waiters did not all enqueue within 120 s".into());
        }
        let children = raw
            .list_children(path)
            .await
            .map_err(|e| format!("list: {e}"))?;
        let queued = children.iter().filter(|c| c.contains("lock-")).count();
        if queued > n {
            match (watches_before, total_watches(connect).await) {
                (Some(b), Some(now)) if now >= b + n as u64 => break,
                (Some(_), Some(_)) => {}
                _ => {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let enqueue_s = enqueue_started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let waiting = rss_kib();

    census.start();
    let drain_started = Instant::now();
    census.mark("release");
    holder.release().await?;
    for task in tasks {
        match tokio::time::timeout(Duration::from_secs(120), task).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(format!("waiter task: {e}")),
            Err(_) => return Err("the queue did not drain within 120 s".into()),
        }
    }
    let drain = drain_started.elapsed().as_secs_f64();
    let log = census.stop();
    let counts = counts(&log);
    if let Ok(e) = err_rx.try_recv() {
        return Err(e);
    }
    let count = |k: &str| counts.get(k).copied().unwrap_or(0) as f64;
    let ours = lib == Lib::Ours;
    conn.close().await;
    Ok(WaiterFigures {
        waiters: n,
        rss_before_kib: before,
        rss_waiting_kib: waiting,
        kib_per_waiter: Some((waiting as f64 - before as f64) / n as f64),
        wakeups_per_release: ours.then(|| count("watch fired") / n as f64),
        relists_per_handoff: ours.then(|| count("listing again") / n as f64),
        enqueue_s,
        drain_handoffs_per_s: Some(n as f64 / drain),
        breakdown: ours.then(|| breakdown(&log)),
        error: None,
    })
}

/// Runs the waiters workload of `lib` in a child process (this program again).
async fn run_waiters(lib: Lib, connect: &str, path: &str, n: usize) -> WaiterFigures {
    let failed = |error: String| WaiterFigures {
        error: Some(error),
        ..WaiterFigures::default()
    };
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return failed(format!("current_exe: {e}")),
    };
    let output = tokio::process::Command::new(exe)
        .args([
            "--child-waiters",
            lib.key(),
            "--connect",
            connect,
            "--path",
            path,
        ])
        .args(["--waiters", &n.to_string()])
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(Duration::from_secs(300), output).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => return failed(format!("child: {e}")),
        Err(_) => return failed("child did not finish within 300 s".into()),
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let Some(line) = stdout.lines().find_map(|l| l.strip_prefix("RESULT ")) else {
        return failed(format!(
            "child printed no result: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    };
    let map = parse_flat_json(line);
    let num = |k: &str| map.get(k).and_then(Json::as_f64);
    WaiterFigures {
        waiters: num("waiters").unwrap_or(0.0) as usize,
        rss_before_kib: num("rss_before_kib").unwrap_or(0.0) as u64,
        rss_waiting_kib: num("rss_waiting_kib").unwrap_or(0.0) as u64,
        kib_per_waiter: num("kib_per_waiter"),
        wakeups_per_release: num("wakeups_per_release"),
        relists_per_handoff: num("relists_per_handoff"),
        enqueue_s: num("enqueue_s").unwrap_or(0.0),
        drain_handoffs_per_s: num("drain_handoffs_per_s"),
        breakdown: num("handoff_breakdown.handoffs").map(|_| breakdown_from(&map)),
        error: map.get("error").and_then(|e| e.as_str().map(str::to_owned)),
    }
}

// ---------------------------------------------------------------------------------------------
// The round-trip census of ZkMutex

/// Requests per grant of `ZkMutex` with 8 contenders, from its spans and events.
#[derive(Clone, Debug, Default)]
struct RoundTrips {
    grants: u64,
    /// `create` + `getChildren`, pipelined: one round trip.
    enqueues: f64,
    /// `exists` + watch on the predecessor.
    watches: f64,
    /// Watch events received.
    wakeups: f64,
    /// `getChildren` after a wake-up (the waiter could not decide from what it knew).
    relists: f64,
    /// Where the handoffs' time goes.
    breakdown: Breakdown,
    /// Where an uncontended acquire's time goes.
    uncontended: AcquireBreakdown,
}

/// Where the time of an uncontended `ZkMutex::lock` goes (medians, µs).
#[derive(Clone, Debug, Default)]
struct AcquireBreakdown {
    acquires: usize,
    /// From calling `lock` to `"enqueued"` (create and list answered, back in the caller).
    to_enqueued: Option<f64>,
    /// From `"enqueued"` to `"granted"` (deciding on the listing).
    enqueued_to_granted: Option<f64>,
    /// From `"granted"` to `lock` returning (building the guard).
    granted_to_return: Option<f64>,
    /// The whole `lock` call.
    total: Option<f64>,
}

/// Splits each uncontended acquire of a census log at the library's events.
fn acquire_breakdown(log: &[(u64, String)]) -> AcquireBreakdown {
    let (mut a, mut b, mut c, mut total) = (vec![], vec![], vec![], vec![]);
    let (mut asked, mut enqueued, mut granted) = (None::<u64>, None::<u64>, None::<u64>);
    for (t, label) in log {
        match label.as_str() {
            "acquire" => (asked, enqueued, granted) = (Some(*t), None, None),
            "enqueued" => enqueued = Some(*t),
            "granted" => granted = Some(*t),
            "acquired" => {
                if let (Some(s), Some(e), Some(g)) = (asked, enqueued, granted) {
                    a.push(e.saturating_sub(s));
                    b.push(g.saturating_sub(e));
                    c.push(t.saturating_sub(g));
                    total.push(t.saturating_sub(s));
                }
                asked = None;
            }
            _ => {}
        }
    }
    AcquireBreakdown {
        acquires: total.len(),
        to_enqueued: Latency::of(a).p50,
        enqueued_to_granted: Latency::of(b).p50,
        granted_to_return: Latency::of(c).p50,
        total: Latency::of(total).p50,
    }
}

/// Runs 8 contenders for a second with the census on.
async fn census_rounds(connect: &str, dir: &str, census: &Census, args: &Args) -> RoundTrips {
    let short = Args {
        warmup: Duration::from_millis(300),
        measure: Duration::from_secs(1),
        ..args.clone()
    };
    census.start();
    run_locks(
        Lib::Ours,
        connect,
        &format!("{dir}/one"),
        (1, 1),
        &short,
        Some(census),
    )
    .await;
    let solo = census.stop();
    census.start();
    run_locks(
        Lib::Ours,
        connect,
        &format!("{dir}/eight"),
        (1, CONTENDERS),
        &short,
        Some(census),
    )
    .await;
    let log = census.stop();
    let counts = counts(&log);
    let grants = counts.get("granted").copied().unwrap_or(0);
    let per = |k: &str| counts.get(k).copied().unwrap_or(0) as f64 / grants.max(1) as f64;
    RoundTrips {
        breakdown: breakdown(&log),
        uncontended: acquire_breakdown(&solo),
        grants,
        enqueues: per("enqueued"),
        watches: per("span:wait"),
        wakeups: per("watch fired"),
        relists: per("listing again"),
    }
}

// ---------------------------------------------------------------------------------------------
// Curator (Java peer)

/// The Curator peer's figures, or why there are none.
#[derive(Clone, Debug, Default)]
struct CuratorRun {
    skipped: Option<String>,
    version: Option<String>,
    workloads: BTreeMap<String, Figures>,
}

/// The jars the Java peers need (in /usr/share/java, from Debian's packages): one list for
/// the benchmark and the Rust/Curator interop test.
const CURATOR_JARS: &str = include_str!("bench-peers/classpath.txt");

/// Compiles (when needed) and runs `CuratorBench.java`.
async fn run_curator(connect: &str, dir: &str, args: &Args) -> CuratorRun {
    let skip = |why: String| CuratorRun {
        skipped: Some(why),
        ..CuratorRun::default()
    };
    if !args.runs("curator") {
        return skip("skipped (--only)".into());
    }
    if args.no_java {
        return skip("skipped (--no-java)".into());
    }
    let java_workloads: Vec<&str> = ["uncontended", "contended8", "locks64x4"]
        .into_iter()
        .filter(|w| args.runs_workload(w))
        .collect();
    if java_workloads.is_empty() {
        return skip("skipped (--workloads)".into());
    }
    let jars = Path::new("/usr/share/java");
    let mut classpath = Vec::new();
    for jar in CURATOR_JARS.lines() {
        let path = jars.join(format!("{jar}.jar"));
        if !path.exists() {
            return skip(format!(
                "not installed ({} missing; examples/bench-peers/run.sh installs \
                 libcurator-recipes-java)",
                path.display()
            ));
        }
        classpath.push(path.display().to_string());
    }
    let version = std::fs::read_link(jars.join("curator-recipes-5.4.0.jar"))
        .ok()
        .map(|_| "5.4.0".to_owned())
        .or_else(|| curator_version(jars));
    let source =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/bench-peers/CuratorBench.java");
    let out = match std::env::current_exe() {
        Ok(exe) => exe.with_file_name("bench-peers"),
        Err(e) => return skip(format!("current_exe: {e}")),
    };
    let class = out.join("CuratorBench.class");
    let stale = match (modified(&source), modified(&class)) {
        (Some(src), Some(cls)) => src > cls,
        _ => true,
    };
    if stale {
        let _ = std::fs::create_dir_all(&out);
        let javac = tokio::process::Command::new("javac")
            .arg("-d")
            .arg(&out)
            .arg("-cp")
            .arg(classpath.join(":"))
            .arg(&source)
            .output()
            .await;
        match javac {
            Err(e) => return skip(format!("not run: javac unavailable ({e})")),
            Ok(o) if !o.status.success() => {
                return skip(format!(
                    "not run: javac failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ))
            }
            Ok(_) => {}
        }
    }
    classpath.insert(0, out.display().to_string());
    let child = tokio::process::Command::new("java")
        .arg("-cp")
        .arg(classpath.join(":"))
        .arg("CuratorBench")
        .args(["--connect", connect, "--root", dir])
        .args(["--warmup-ms", &args.warmup.as_millis().to_string()])
        .args(["--measure-ms", &args.measure.as_millis().to_string()])
        .args(["--jit-warmup-ms", "2000"])
        .args(["--workloads", &java_workloads.join(",")])
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(Duration::from_secs(300), child).await {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => return skip(format!("not run: java unavailable ({e})")),
        Err(_) => return skip("the Java peer did not finish within 300 s".into()),
    };
    let mut run = CuratorRun {
        version,
        ..CuratorRun::default()
    };
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        if !line.starts_with('{') {
            continue;
        }
        let map = parse_flat_json(line);
        let num = |k: &str| map.get(k).and_then(Json::as_f64);
        let latency = |p50: &str, p99: &str, samples: &str| Latency {
            p50: num(p50).filter(|v| *v >= 0.0),
            p99: num(p99).filter(|v| *v >= 0.0),
            samples: num(samples).unwrap_or(0.0) as usize,
        };
        let Some(name) = map.get("workload").and_then(Json::as_str) else {
            continue;
        };
        run.workloads.insert(
            name.to_owned(),
            Figures {
                cycles: num("cycles").unwrap_or(0.0) as u64,
                seconds: num("seconds").unwrap_or(0.0),
                acquire: latency("acquire_p50_us", "acquire_p99_us", "acquire_samples"),
                handoff: latency("handoff_p50_us", "handoff_p99_us", "handoff_samples"),
                cpu_ms: num("cpu_ms").unwrap_or(0.0),
                violations: num("violations").unwrap_or(0.0) as u64,
                error: map.get("error").and_then(|e| e.as_str().map(str::to_owned)),
            },
        );
    }
    if run.workloads.is_empty() {
        return skip(format!(
            "the Java peer printed no results: {}",
            String::from_utf8_lossy(&output.stderr)
                .lines()
                .take(5)
                .collect::<Vec<_>>()
                .join(" / ")
        ));
    }
    run
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).ok()?.modified().ok()
}

/// Curator's version from a versioned jar name next to the unversioned one.
fn curator_version(jars: &Path) -> Option<String> {
    std::fs::read_dir(jars).ok()?.find_map(|e| {
        let name = e.ok()?.file_name().into_string().ok()?;
        let v = name
            .strip_prefix("curator-recipes-")?
            .strip_suffix(".jar")?;
        Some(v.to_owned())
    })
}

// ---------------------------------------------------------------------------------------------
// ZooKeeper helpers

/// Creates `path` and its parents as persistent nodes.
async fn mkdir(connect: &str, path: &str) -> Result<(), String> {
    let client = zkc::Client::connect(connect)
        .await
        .map_err(|e| format!("raw client: {e}"))?;
    let options = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    client
        .mkdir(path, &options)
        .await
        .map_err(|e| format!("mkdir {path}: {e}"))
}

/// Deletes `path` and everything under it (best effort).
async fn delete_tree(client: &zkc::Client, path: &str) {
    let mut stack = vec![(path.to_owned(), false)];
    while let Some((node, expanded)) = stack.pop() {
        if expanded {
            let _ = client.delete(&node, None).await;
            continue;
        }
        stack.push((node.clone(), true));
        if let Ok(children) = client.list_children(&node).await {
            for child in children {
                stack.push((format!("{node}/{child}"), false));
            }
        }
    }
}

/// The first `host:port` of a connect string.
fn first_server(connect: &str) -> String {
    let hosts = connect.split('/').next().unwrap_or(connect);
    hosts.split(',').next().unwrap_or(hosts).to_owned()
}

/// Sends a four-letter word to the first server of `connect`.
async fn four_letter(connect: &str, word: &str) -> Option<String> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(first_server(connect))
            .await
            .ok()?;
        stream.write_all(word.as_bytes()).await.ok()?;
        let mut reply = String::new();
        stream.read_to_string(&mut reply).await.ok()?;
        Some(reply)
    };
    tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .ok()
        .flatten()
        .filter(|r| !r.is_empty() && !r.contains("is not executed"))
}

/// The server's total watch count (`wchs`).
async fn total_watches(connect: &str) -> Option<u64> {
    let reply = four_letter(connect, "wchs").await?;
    reply
        .lines()
        .find_map(|l| l.strip_prefix("Total watches:"))
        .and_then(|v| v.trim().parse().ok())
}

// ---------------------------------------------------------------------------------------------
// JSON (written by hand: flat objects from the children, nested ones for the report)

/// A JSON value.
#[derive(Clone, Debug)]
enum Json {
    Null,
    Num(f64),
    Str(String),
    Obj(Vec<(String, Json)>),
}

impl Json {
    fn as_f64(&self) -> Option<f64> {
        match self {
            Json::Num(n) => Some(*n),
            _ => None,
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }

    fn opt(v: Option<f64>) -> Json {
        v.filter(|v| v.is_finite()).map_or(Json::Null, Json::Num)
    }

    fn write(&self, out: &mut String, indent: usize) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Num(n) if n.is_finite() => {
                if n.fract() == 0.0 && n.abs() < 1e15 {
                    let _ = write!(out, "{}", *n as i64);
                } else {
                    let _ = write!(out, "{:.3}", n);
                }
            }
            Json::Num(_) => out.push_str("null"),
            Json::Str(s) => {
                out.push('"');
                for c in s.chars() {
                    match c {
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        '\n' => out.push_str("\\n"),
                        c if (c as u32) < 0x20 => {
                            let _ = write!(out, "\\u{:04x}", c as u32);
                        }
                        c => out.push(c),
                    }
                }
                out.push('"');
            }
            Json::Obj(fields) => {
                out.push('{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    out.push_str(if i == 0 { "\n" } else { ",\n" });
                    out.push_str(&"  ".repeat(indent + 1));
                    Json::Str(k.clone()).write(out, 0);
                    out.push_str(": ");
                    v.write(out, indent + 1);
                }
                if !fields.is_empty() {
                    out.push('\n');
                    out.push_str(&"  ".repeat(indent));
                }
                out.push('}');
            }
        }
    }

    fn render(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, 0);
        out
    }

    /// One line, for the children's `RESULT` lines.
    fn render_compact(&self) -> String {
        self.render()
            .lines()
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Builds a JSON object.
fn obj(fields: Vec<(&str, Json)>) -> Json {
    Json::Obj(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// Parses a JSON object of numbers, strings, nulls and nested objects (what the children
/// print) into a flat map; nested keys are joined with dots (`"a": {"b": 1}` gives `a.b`).
fn parse_flat_json(line: &str) -> BTreeMap<String, Json> {
    let mut map = BTreeMap::new();
    let mut chars = line.trim().chars().peekable();
    if chars.next() == Some('{') {
        parse_object(&mut chars, "", &mut map);
    }
    map
}

/// Parses the members of an object whose `{` was consumed, up to its `}`.
fn parse_object(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    prefix: &str,
    map: &mut BTreeMap<String, Json>,
) {
    fn read_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> String {
        let mut s = String::new();
        while let Some(c) = chars.next() {
            match c {
                '"' => break,
                '\\' => match chars.next() {
                    Some('n') => s.push('\n'),
                    Some(other) => s.push(other),
                    None => break,
                },
                c => s.push(c),
            }
        }
        s
    }
    loop {
        while matches!(chars.peek(), Some(c) if *c != '"' && *c != '}') {
            chars.next();
        }
        if chars.next() != Some('"') {
            return;
        }
        let key = format!("{prefix}{}", read_string(chars));
        while matches!(chars.peek(), Some(c) if c.is_whitespace() || *c == ':') {
            chars.next();
        }
        match chars.peek() {
            Some('"') => {
                chars.next();
                map.insert(key, Json::Str(read_string(chars)));
            }
            Some('{') => {
                chars.next();
                parse_object(chars, &format!("{key}."), map);
            }
            _ => {
                let mut raw = String::new();
                while let Some(c) = chars.next_if(|c| *c != ',' && *c != '}') {
                    raw.push(c);
                }
                map.insert(key, raw.trim().parse::<f64>().map_or(Json::Null, Json::Num));
            }
        }
    }
}

fn latency_json(l: &Latency) -> Json {
    obj(vec![
        ("p50_us", Json::opt(l.p50)),
        ("p99_us", Json::opt(l.p99)),
        ("samples", Json::Num(l.samples as f64)),
    ])
}

fn figures_json(f: &Figures) -> Json {
    obj(vec![
        ("cycles", Json::Num(f.cycles as f64)),
        ("seconds", Json::Num(f.seconds)),
        ("cycles_per_s", Json::opt(f.cycles_per_s())),
        ("acquire", latency_json(&f.acquire)),
        ("handoff", latency_json(&f.handoff)),
        ("cpu_ms", Json::Num(f.cpu_ms)),
        ("cpu_ms_per_1000_cycles", Json::opt(f.cpu_ms_per_1000())),
        ("overlapping_holders", Json::Num(f.violations as f64)),
        ("error", f.error.clone().map_or(Json::Null, Json::Str)),
    ])
}

/// The breakdown as flat fields named `handoff_breakdown.*` (µs).
fn breakdown_fields(b: &Breakdown) -> Vec<(&'static str, Json)> {
    vec![
        ("handoff_breakdown.handoffs", Json::Num(b.handoffs as f64)),
        (
            "handoff_breakdown.release_to_event_us",
            Json::opt(b.release_to_event),
        ),
        (
            "handoff_breakdown.event_to_relist_us",
            Json::opt(b.event_to_relist),
        ),
        (
            "handoff_breakdown.relist_to_grant_us",
            Json::opt(b.relist_to_grant),
        ),
        (
            "handoff_breakdown.event_to_grant_direct_us",
            Json::opt(b.event_to_grant_direct),
        ),
        ("handoff_breakdown.total_us", Json::opt(b.total)),
        ("handoff_breakdown.total_p99_us", Json::opt(b.total_p99)),
        ("handoff_breakdown.delete_rtt_us", Json::opt(b.delete_rtt)),
    ]
}

/// The breakdown as a nested object (fields without the prefix).
fn breakdown_json(b: &Breakdown) -> Json {
    Json::Obj(
        breakdown_fields(b)
            .into_iter()
            .map(|(k, v)| (k.trim_start_matches("handoff_breakdown.").to_owned(), v))
            .collect(),
    )
}

/// The breakdown back from [`breakdown_fields`].
fn breakdown_from(map: &BTreeMap<String, Json>) -> Breakdown {
    let num = |k: &str| {
        map.get(&format!("handoff_breakdown.{k}"))
            .and_then(Json::as_f64)
    };
    Breakdown {
        handoffs: num("handoffs").unwrap_or(0.0) as usize,
        release_to_event: num("release_to_event_us"),
        event_to_relist: num("event_to_relist_us"),
        relist_to_grant: num("relist_to_grant_us"),
        event_to_grant_direct: num("event_to_grant_direct_us"),
        total: num("total_us"),
        total_p99: num("total_p99_us"),
        delete_rtt: num("delete_rtt_us"),
    }
}

fn waiter_json(w: &WaiterFigures) -> Json {
    let mut fields = vec![
        ("waiters", Json::Num(w.waiters as f64)),
        ("rss_before_kib", Json::Num(w.rss_before_kib as f64)),
        ("rss_waiting_kib", Json::Num(w.rss_waiting_kib as f64)),
        ("kib_per_waiter", Json::opt(w.kib_per_waiter)),
        ("wakeups_per_release", Json::opt(w.wakeups_per_release)),
        ("relists_per_handoff", Json::opt(w.relists_per_handoff)),
        ("enqueue_s", Json::Num(w.enqueue_s)),
        ("drain_handoffs_per_s", Json::opt(w.drain_handoffs_per_s)),
        ("error", w.error.clone().map_or(Json::Null, Json::Str)),
    ];
    if let Some(b) = &w.breakdown {
        fields.push(("handoff_breakdown", breakdown_json(b)));
    }
    obj(fields)
}

// ---------------------------------------------------------------------------------------------
// The report

/// Everything one run measured.
struct Report {
    date: String,
    machine: String,
    cores: usize,
    zookeeper: String,
    load_start: f64,
    load_end: f64,
    args: Args,
    floor: Floor,
    rust: BTreeMap<&'static str, LibRun>,
    round_trips: RoundTrips,
    curator: CuratorRun,
}

/// The figures of a library that was not run.
fn not_run() -> &'static LibRun {
    static NOT_RUN: OnceLock<LibRun> = OnceLock::new();
    NOT_RUN.get_or_init(LibRun::default)
}

/// A Rust library's figures.
#[derive(Default)]
struct LibRun {
    uncontended: Figures,
    contended: Figures,
    grid: Figures,
    waiters: WaiterFigures,
}

/// A target and whether this run met it.
struct Target {
    name: &'static str,
    wanted: String,
    ratio: Option<f64>,
    met: Option<bool>,
}

impl Report {
    /// One write round trip: the floor's `set_data` p50 (µs).
    fn write_rtt(&self) -> Option<f64> {
        Latency::of(self.floor.set_data.clone()).p50
    }

    fn ours(&self) -> &LibRun {
        self.rust.get("zk-recipes").unwrap_or(not_run())
    }

    fn client_lock(&self) -> &LibRun {
        self.rust.get("client-lock").unwrap_or(not_run())
    }

    fn curator(&self, workload: &str) -> Option<&Figures> {
        self.curator.workloads.get(workload)
    }

    fn targets(&self) -> Vec<Target> {
        let div = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => Some(a / b),
            _ => None,
        };
        let ours8 = self.ours().contended.cycles_per_s();
        let vs_curator = div(
            ours8,
            self.curator("contended8").and_then(Figures::cycles_per_s),
        );
        let vs_client = div(ours8, self.client_lock().contended.cycles_per_s());
        let acquire = div(self.ours().uncontended.acquire.p50, self.write_rtt());
        let handoff = div(self.ours().contended.handoff.p50, self.write_rtt());
        vec![
            Target {
                name: "8 contenders: cycles/s vs Curator",
                wanted: ">= 1.80x".into(),
                ratio: vs_curator,
                met: vs_curator.map(|r| r >= 1.8),
            },
            Target {
                name: "8 contenders: cycles/s vs Client::lock",
                wanted: ">= 1.25x".into(),
                ratio: vs_client,
                met: vs_client.map(|r| r >= 1.25),
            },
            Target {
                name: "uncontended acquire p50 vs one write",
                wanted: "<= 1.30x".into(),
                ratio: acquire,
                met: acquire.map(|r| r <= 1.3),
            },
            Target {
                name: "handoff p50 vs one write",
                wanted: "<= 1.50x".into(),
                ratio: handoff,
                met: handoff.map(|r| r <= 1.5),
            },
        ]
    }

    fn table(&self) -> String {
        let mut t = String::new();
        let (ms, num, dec) = (fmt_ms, fmt_num, fmt_dec);
        let curator_note = self.curator.skipped.clone();
        let cur = |w: &str, f: &fn(&Figures) -> String| -> String {
            match (&curator_note, self.curator(w)) {
                (Some(_), _) => "n/a".into(),
                (None, Some(fig)) if fig.error.is_some() => "error".into(),
                (None, Some(fig)) => f(fig),
                (None, None) => "-".into(),
            }
        };
        let floor_set = Latency::of(self.floor.set_data.clone());
        let floor_create = Latency::of(self.floor.create.clone());
        let floor_delete = Latency::of(self.floor.delete.clone());
        let floor_cycles =
            (self.floor.seconds > 0.0).then(|| self.floor.cycles as f64 / self.floor.seconds);
        let floor_cpu =
            (self.floor.cycles > 0).then(|| self.floor.cpu_ms * 1000.0 / self.floor.cycles as f64);
        let _ = writeln!(
            t,
            "zk-recipes lock benchmark, {} | {} ({} cores) | ZooKeeper {} | load avg {:.2} -> {:.2}",
            self.date, self.machine, self.cores, self.zookeeper, self.load_start, self.load_end
        );
        let _ = writeln!(
            t,
            "window {:.1} s after {:.1} s warm-up per workload; latencies in ms; client CPU in ms per 1,000 cycles",
            self.args.measure.as_secs_f64(),
            self.args.warmup.as_secs_f64()
        );
        let _ = writeln!(t);
        let _ = writeln!(
            t,
            "server floor (raw client, one request at a time): set_data p50 {} p99 {} | \
             get_children p50 {} | create p50 {} p99 {} | delete p50 {} | \
             create+get_children pipelined p50 {} | get_children+create pipelined p50 {} \
             ({:.0}% exact) | create+delete {} cycles/s, CPU {}",
            ms(floor_set.p50),
            ms(floor_set.p99),
            ms(Latency::of(self.floor.list.clone()).p50),
            ms(floor_create.p50),
            ms(floor_create.p99),
            ms(floor_delete.p50),
            ms(Latency::of(self.floor.create_list.clone()).p50),
            ms(Latency::of(self.floor.list_create.clone()).p50),
            100.0 * self.floor.list_create_exact as f64
                / self.floor.list_create.len().max(1) as f64,
            num(floor_cycles),
            dec(floor_cpu, 1),
        );
        let _ = writeln!(t);
        let (o, c) = (self.ours(), self.client_lock());
        // (workload label, Rust figures, Curator's workload, [(metric, how to show it)])
        type Show = fn(&Figures) -> String;
        type Pick = fn(&LibRun) -> &Figures;
        type Section<'a> = (&'a str, Pick, &'a str, Vec<(&'a str, Show)>);
        let sections: [Section<'_>; 3] = [
            (
                "uncontended",
                |r| &r.uncontended,
                "uncontended",
                vec![
                    ("cycles/s", |f| fmt_num(f.cycles_per_s())),
                    ("acquire p50", |f| fmt_ms(f.acquire.p50)),
                    ("acquire p99", |f| fmt_ms(f.acquire.p99)),
                    ("CPU/1k cycles", |f| fmt_dec(f.cpu_ms_per_1000(), 1)),
                ],
            ),
            (
                "8 contenders, 1 lock",
                |r| &r.contended,
                "contended8",
                vec![
                    ("cycles/s", |f| fmt_num(f.cycles_per_s())),
                    ("acquire p50", |f| fmt_ms(f.acquire.p50)),
                    ("acquire p99", |f| fmt_ms(f.acquire.p99)),
                    ("handoff p50", |f| fmt_ms(f.handoff.p50)),
                    ("handoff p99", |f| fmt_ms(f.handoff.p99)),
                    ("CPU/1k cycles", |f| fmt_dec(f.cpu_ms_per_1000(), 1)),
                ],
            ),
            (
                "64 locks x 4",
                |r| &r.grid,
                "locks64x4",
                vec![
                    ("cycles/s", |f| fmt_num(f.cycles_per_s())),
                    ("CPU/1k cycles", |f| fmt_dec(f.cpu_ms_per_1000(), 1)),
                ],
            ),
        ];
        let mut rows: Vec<(String, &str, String, String, String)> = Vec::new();
        for (label, pick, java, metrics) in &sections {
            for (i, (metric, show)) in metrics.iter().enumerate() {
                rows.push((
                    if i == 0 {
                        label.to_string()
                    } else {
                        String::new()
                    },
                    metric,
                    show(pick(o)),
                    show(pick(c)),
                    cur(java, show),
                ));
            }
        }
        let waiters = format!(
            "{} waiters, 1 lock",
            o.waiters.waiters.max(c.waiters.waiters)
        );
        let none = || "not measured".to_owned();
        rows.push((
            waiters,
            "KiB per waiter",
            fmt_dec(o.waiters.kib_per_waiter, 1),
            fmt_dec(c.waiters.kib_per_waiter, 1),
            none(),
        ));
        rows.push((
            String::new(),
            "wake-ups/release",
            fmt_dec(o.waiters.wakeups_per_release, 2),
            "not counted".into(),
            none(),
        ));
        rows.push((
            String::new(),
            "drain handoffs/s",
            fmt_num(o.waiters.drain_handoffs_per_s),
            fmt_num(c.waiters.drain_handoffs_per_s),
            none(),
        ));
        let _ = writeln!(
            t,
            "{:<22} {:<17} {:>12} {:>13} {:>13}",
            "workload", "metric", "zk-recipes", "Client::lock", "Curator"
        );
        let _ = writeln!(t, "{}", "-".repeat(81));
        for (w, m, a, b, c) in rows {
            let _ = writeln!(t, "{w:<22} {m:<17} {a:>12} {b:>13} {c:>13}");
        }
        let _ = writeln!(t);
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
            _ => "-".into(),
        };
        let cur_cps = |w: &str| self.curator(w).and_then(Figures::cycles_per_s);
        let _ = writeln!(
            t,
            "zk-recipes cycles/s ratios: uncontended {} vs Client::lock, {} vs Curator | \
             8 contenders {} vs Client::lock, {} vs Curator | 64x4 {} vs Client::lock, {} vs Curator",
            ratio(o.uncontended.cycles_per_s(), c.uncontended.cycles_per_s()),
            ratio(o.uncontended.cycles_per_s(), cur_cps("uncontended")),
            ratio(o.contended.cycles_per_s(), c.contended.cycles_per_s()),
            ratio(o.contended.cycles_per_s(), cur_cps("contended8")),
            ratio(o.grid.cycles_per_s(), c.grid.cycles_per_s()),
            ratio(o.grid.cycles_per_s(), cur_cps("locks64x4")),
        );
        let _ = writeln!(
            t,
            "vs the floor: uncontended cycles/s {} of create+delete; acquire p50 {} of set_data p50, \
             {} of create p50; handoff p50 {} of set_data p50",
            ratio(o.uncontended.cycles_per_s(), floor_cycles),
            ratio(o.uncontended.acquire.p50, floor_set.p50),
            ratio(o.uncontended.acquire.p50, floor_create.p50),
            ratio(o.contended.handoff.p50, floor_set.p50),
        );
        let rt = &self.round_trips;
        let _ = writeln!(
            t,
            "ZkMutex requests per grant, 8 contenders ({} grants): {:.2} create+list (pipelined), \
             {:.2} exists+watch, {:.2} wake-ups, {:.2} re-lists",
            rt.grants, rt.enqueues, rt.watches, rt.wakeups, rt.relists
        );
        let split = |b: &Breakdown| {
            format!(
                "release->watch event {}, event->re-list {}, re-list->grant {}, \
                 event->grant without re-list {}, total {} (p99 {}) \
                 (holder's delete round trip {}; {} handoffs)",
                ms(b.release_to_event),
                ms(b.event_to_relist),
                ms(b.relist_to_grant),
                ms(b.event_to_grant_direct),
                ms(b.total),
                ms(b.total_p99),
                ms(b.delete_rtt),
                b.handoffs
            )
        };
        let u = &rt.uncontended;
        let _ = writeln!(
            t,
            "ZkMutex uncontended lock() p50s: to \"enqueued\" (create+list pipelined) {}, \
             then to \"granted\" {}, then to return {}, total {} ({} acquires)",
            ms(u.to_enqueued),
            ms(u.enqueued_to_granted),
            ms(u.granted_to_return),
            ms(u.total),
            u.acquires
        );
        let _ = writeln!(
            t,
            "ZkMutex handoff p50s, 8 contenders: {}",
            split(&rt.breakdown)
        );
        if let Some(b) = &o.waiters.breakdown {
            let _ = writeln!(
                t,
                "ZkMutex handoff p50s, draining the waiters: {}",
                split(b)
            );
        }
        if let Some(why) = &curator_note {
            let _ = writeln!(t, "Curator: {why}");
        } else if let Some(v) = &self.curator.version {
            let _ = writeln!(
                t,
                "Curator {v} (Debian), InterProcessMutex, JVM process CPU"
            );
        }
        let mut problems = Vec::new();
        for (name, lib) in &self.rust {
            for (w, f) in [
                ("uncontended", &lib.uncontended),
                ("8 contenders", &lib.contended),
                ("64x4", &lib.grid),
            ] {
                if let Some(e) = &f.error {
                    problems.push(format!("{name} {w}: {e}"));
                }
                if f.violations > 0 {
                    problems.push(format!("{name} {w}: {} overlapping holders!", f.violations));
                }
            }
            if let Some(e) = &lib.waiters.error {
                problems.push(format!("{name} waiters: {e}"));
            }
        }
        for (w, f) in &self.curator.workloads {
            if let Some(e) = &f.error {
                problems.push(format!("Curator {w}: {e}"));
            }
            if f.violations > 0 {
                problems.push(format!(
                    "Curator {w}: {} overlapping holders!",
                    f.violations
                ));
            }
        }
        for p in &problems {
            let _ = writeln!(t, "PROBLEM: {p}");
        }
        let _ = writeln!(t);
        let _ = writeln!(t, "targets (ratios from this run):");
        for target in self.targets() {
            let verdict = match target.met {
                Some(true) => "met",
                Some(false) => "MISSED",
                None => "not measured",
            };
            let _ = writeln!(
                t,
                "  {:<40} {:>9}  wanted {}  {}",
                target.name,
                target.ratio.map_or("-".into(), |r| format!("{r:.2}x")),
                target.wanted,
                verdict
            );
        }
        t
    }

    fn json(&self) -> Json {
        let floor_set = Latency::of(self.floor.set_data.clone());
        let floor_create = Latency::of(self.floor.create.clone());
        let floor_delete = Latency::of(self.floor.delete.clone());
        let mut libs = Vec::new();
        for (name, lib) in &self.rust {
            libs.push((
                name.to_string(),
                obj(vec![
                    ("uncontended", figures_json(&lib.uncontended)),
                    ("contended8", figures_json(&lib.contended)),
                    ("locks64x4", figures_json(&lib.grid)),
                    ("waiters", waiter_json(&lib.waiters)),
                ]),
            ));
        }
        let curator = match &self.curator.skipped {
            Some(why) => obj(vec![("skipped", Json::Str(why.clone()))]),
            None => Json::Obj(
                std::iter::once((
                    "version".to_owned(),
                    self.curator.version.clone().map_or(Json::Null, Json::Str),
                ))
                .chain(
                    self.curator
                        .workloads
                        .iter()
                        .map(|(k, f)| (k.clone(), figures_json(f))),
                )
                .collect(),
            ),
        };
        libs.push(("curator".to_owned(), curator));
        let targets = self
            .targets()
            .into_iter()
            .map(|t| {
                (
                    t.name.to_owned(),
                    obj(vec![
                        ("wanted", Json::Str(t.wanted)),
                        ("ratio", Json::opt(t.ratio)),
                        (
                            "met",
                            t.met.map_or(Json::Null, |m| Json::Str(m.to_string())),
                        ),
                    ]),
                )
            })
            .collect();
        let rt = &self.round_trips;
        obj(vec![
            ("date", Json::Str(self.date.clone())),
            ("machine", Json::Str(self.machine.clone())),
            ("cores", Json::Num(self.cores as f64)),
            ("zookeeper", Json::Str(self.zookeeper.clone())),
            ("load_avg_start", Json::opt(Some(self.load_start))),
            ("load_avg_end", Json::opt(Some(self.load_end))),
            ("measure_s", Json::Num(self.args.measure.as_secs_f64())),
            ("warmup_s", Json::Num(self.args.warmup.as_secs_f64())),
            (
                "floor",
                obj(vec![
                    ("set_data", latency_json(&floor_set)),
                    (
                        "get_children",
                        latency_json(&Latency::of(self.floor.list.clone())),
                    ),
                    (
                        "create_and_get_children_pipelined",
                        latency_json(&Latency::of(self.floor.create_list.clone())),
                    ),
                    (
                        "get_children_and_create_pipelined",
                        latency_json(&Latency::of(self.floor.list_create.clone())),
                    ),
                    (
                        "get_children_and_create_exact",
                        Json::Num(self.floor.list_create_exact as f64),
                    ),
                    ("create", latency_json(&floor_create)),
                    ("delete", latency_json(&floor_delete)),
                    (
                        "create_delete_cycles_per_s",
                        Json::opt(
                            (self.floor.seconds > 0.0)
                                .then(|| self.floor.cycles as f64 / self.floor.seconds),
                        ),
                    ),
                    (
                        "cpu_ms_per_1000_cycles",
                        Json::opt(
                            (self.floor.cycles > 0)
                                .then(|| self.floor.cpu_ms * 1000.0 / self.floor.cycles as f64),
                        ),
                    ),
                ]),
            ),
            ("results", Json::Obj(libs)),
            (
                "zk_recipes_diagnostics",
                obj(vec![
                    (
                        "requests_per_grant_8_contenders",
                        obj(vec![
                            ("grants", Json::Num(rt.grants as f64)),
                            ("create_and_list", Json::Num(rt.enqueues)),
                            ("exists_watch", Json::Num(rt.watches)),
                            ("wakeups", Json::Num(rt.wakeups)),
                            ("relists", Json::Num(rt.relists)),
                        ]),
                    ),
                    (
                        "handoff_breakdown_8_contenders",
                        breakdown_json(&rt.breakdown),
                    ),
                    (
                        "uncontended_acquire_breakdown",
                        obj(vec![
                            ("acquires", Json::Num(rt.uncontended.acquires as f64)),
                            ("to_enqueued_us", Json::opt(rt.uncontended.to_enqueued)),
                            (
                                "enqueued_to_granted_us",
                                Json::opt(rt.uncontended.enqueued_to_granted),
                            ),
                            (
                                "granted_to_return_us",
                                Json::opt(rt.uncontended.granted_to_return),
                            ),
                            ("total_us", Json::opt(rt.uncontended.total)),
                        ]),
                    ),
                ]),
            ),
            ("targets", Json::Obj(targets)),
        ])
    }
}

/// Microseconds shown as milliseconds with two decimals, `-` when missing.
fn fmt_ms(v: Option<f64>) -> String {
    v.map_or("-".to_owned(), |v| format!("{:.2}", v / 1000.0))
}

/// A whole number, `-` when missing.
fn fmt_num(v: Option<f64>) -> String {
    v.map_or("-".to_owned(), |v| format!("{v:.0}"))
}

/// A number with `d` decimals, `-` when missing.
fn fmt_dec(v: Option<f64>, d: usize) -> String {
    v.map_or("-".to_owned(), |v| format!("{v:.d$}"))
}

// ---------------------------------------------------------------------------------------------
// Machine facts

/// `YYYY-MM-DD HH:MM UTC` of now.
fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        rest / 3600,
        rest % 3600 / 60
    )
}

/// The CPU model from `/proc/cpuinfo`.
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

// ---------------------------------------------------------------------------------------------

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let census = Census::default();
    census.install();
    if let Some(lib) = args.child {
        let connect = args.connect.clone().unwrap_or_else(|| usage("--connect"));
        let path = args.path.clone().unwrap_or_else(|| usage("--path"));
        child_waiters(lib, &connect, &path, args.waiters, &census).await;
        return;
    }
    let load_start = load_average();
    let date = utc_now();

    let external = std::env::var("ZK_CONNECT")
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty());
    let java_opts =
        std::env::var("BENCH_ZK_JAVA_OPTS").unwrap_or_else(|_| SERVER_JAVA_OPTS.to_owned());
    let (server, connect) = match external {
        Some(connect) => (None, connect),
        None => {
            eprintln!("bench: starting ZooKeeper in Docker (zk-testcontainers), JVM {java_opts}");
            let options = ServerOptions::default().with_env("ZK_JAVA_OPTS", &java_opts);
            match ZkServer::start_with(options).await {
                Ok(server) => {
                    let connect = server.connect_string();
                    (Some(server), connect)
                }
                Err(e) => {
                    eprintln!("bench: no ZooKeeper: {e}");
                    std::process::exit(1);
                }
            }
        }
    };
    let srvr = four_letter(&connect, "srvr").await.unwrap_or_default();
    let version = srvr
        .lines()
        .find_map(|l| l.strip_prefix("Zookeeper version:"))
        .map(|v| v.split([',', '-']).next().unwrap_or(v).trim().to_owned())
        .unwrap_or_else(|| "3.8 (version not reported)".into());
    let mode = srvr
        .lines()
        .find_map(|l| l.strip_prefix("Mode:"))
        .map(|m| m.trim().to_owned())
        .unwrap_or_else(|| "?".into());
    let zookeeper = match &server {
        Some(_) => format!("{version} ({mode}, Docker, JVM {java_opts})"),
        None => format!("{version} ({mode}, ZK_CONNECT)"),
    };
    eprintln!("bench: ZooKeeper {zookeeper} at {connect}");

    let root = format!(
        "/zk-recipes-bench/run-{}-{}",
        std::process::id(),
        now_ns()
            ^ SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0)
    );
    if let Err(e) = mkdir(&connect, &root).await {
        eprintln!("bench: {e}");
        std::process::exit(1);
    }

    let floor_secs = Duration::from_secs_f64((args.measure.as_secs_f64() / 3.0).max(0.5));
    eprintln!("bench: server floor...");
    let mut floor = match measure_floor(&connect, &root, floor_secs).await {
        Ok(f) => f,
        Err(e) => {
            eprintln!("bench: floor: {e}");
            std::process::exit(1);
        }
    };

    let libs: Vec<Lib> = [Lib::Ours, Lib::ClientLock]
        .into_iter()
        .filter(|lib| args.runs(lib.key()))
        .collect();
    // A freshly started server is slower for its first seconds (JIT, caches): churn a little
    // with every library first, so that the one measured first does not pay for it.
    let warm = Args {
        warmup: Duration::from_millis(200),
        measure: Duration::from_secs(1),
        ..args.clone()
    };
    eprintln!("bench: warming the server up...");
    for &lib in &libs {
        let dir = format!("{root}/warm-up/{}", lib.key());
        run_locks(lib, &connect, &dir, (1, CONTENDERS), &warm, None).await;
    }
    let mut rust: BTreeMap<&'static str, LibRun> = BTreeMap::new();
    // Workload by workload, the libraries take turns going first (drift hurts neither).
    for (i, workload) in ["uncontended", "contended8", "locks64x4", "waiters"]
        .into_iter()
        .enumerate()
    {
        if !args.runs_workload(workload) {
            continue;
        }
        let mut order = libs.clone();
        if i % 2 == 1 {
            order.reverse();
        }
        for lib in order {
            let dir = format!("{root}/{}/{workload}", lib.key());
            eprintln!("bench: {}: {workload}...", lib.key());
            let run = rust.entry(lib.key()).or_default();
            match workload {
                "uncontended" => {
                    run.uncontended = run_locks(lib, &connect, &dir, (1, 1), &args, None).await
                }
                "contended8" => {
                    run.contended =
                        run_locks(lib, &connect, &dir, (1, CONTENDERS), &args, None).await
                }
                "locks64x4" => run.grid = run_locks(lib, &connect, &dir, GRID, &args, None).await,
                _ => run.waiters = run_waiters(lib, &connect, &dir, args.waiters).await,
            }
        }
    }
    eprintln!("bench: ZkMutex round-trip census...");
    let round_trips = census_rounds(&connect, &format!("{root}/census"), &census, &args).await;

    eprintln!("bench: Curator (Java)...");
    let curator = run_curator(&connect, &format!("{root}/curator"), &args).await;

    eprintln!("bench: server floor again...");
    match measure_floor(&connect, &root, floor_secs).await {
        Ok(f) => floor.merge(f),
        Err(e) => eprintln!("bench: second floor: {e}"),
    }

    let report = Report {
        date,
        machine: cpu_model(),
        cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
        zookeeper,
        load_start,
        load_end: load_average(),
        args: args.clone(),
        floor,
        rust,
        round_trips,
        curator,
    };
    println!("{}", report.table());
    let json = report.json().render();
    println!("{json}");
    if let Some(path) = &args.json {
        if let Err(e) = std::fs::write(path, format!("{json}\n")) {
            eprintln!("bench: cannot write {}: {e}", path.display());
        }
    }
    if let Ok(client) = zkc::Client::connect(&connect).await {
        delete_tree(&client, &root).await;
    }
}
