//! The keyed-lock workloads (issue #14): never-seen keys locked one after another, locked
//! again at once, and once more by a client that forgot them (`fresh-keys`, in the rounds), the znodes a key leaves once the server's
//! container reaper ran (`keys-left`) and the client's memory over many distinct keys
//! (`keys-memory`, in a child process), both once per run on a server of their own.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use zookeeper_client as zkc;

use crate::locks::{Conn, Lib, Locker, Parents, Space};
use crate::measure::{now_ns, rss_kib, Latency};
use crate::zk::{count_tree, delete_tree, log_counters, log_delta, mkdir};

/// How long `ZkLockSpace` remembers a key (its `RECENT`): a relock later than this creates the
/// directory in its burst again.
const KEY_MEMORY: Duration = Duration::from_secs(10);

/// Never-seen keys locked before the measured ones (the space's own creation, the session's
/// first requests).
const WARM_KEYS: u64 = 20;

/// What the fresh-keys workload measured for one library in one round.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct FreshFigures {
    pub keys: u64,
    /// Acquiring a never-seen key (its directory made on demand).
    pub fresh: Latency,
    /// Acquiring the same keys again right after, in the same order.
    pub relock: Latency,
    /// Lock + release cycles per second of each pass.
    pub fresh_cycles_per_s: Option<f64>,
    pub relock_cycles_per_s: Option<f64>,
    /// Acquiring the same keys once more through a new value of the space, which remembers
    /// none of them, while their directories are still there (issue #27: a key the client
    /// forgot, locked again before the server's reaper ran).
    #[serde(default)]
    pub forgotten: Latency,
    /// The server's log syncs and writes (failed transactions included: each takes a zxid)
    /// during the forgotten pass.
    #[serde(default)]
    pub forgotten_log: Option<(u64, u64)>,
    /// The longest time from a key's first acquire to its relock (s): past 10 s `ZkLockSpace`
    /// no longer remembers the key.
    pub relock_age_max_s: f64,
    /// The server's log syncs and writes during each pass, when it reports them.
    pub fresh_log: Option<(u64, u64)>,
    pub relock_log: Option<(u64, u64)>,
    /// A third pass over the same keys, each relock beside the requests it is compared with,
    /// taken in turn on the same connection (so that every ratio compares the same moments).
    pub side: SideBySide,
    pub error: Option<String>,
}

/// The side-by-side pass: per key, one `set_data`, one lock + release of the library's single
/// lock (a `ZkMutex` root, or `Client::lock` on one directory), one raw create and listing
/// pipelined (then its delete), and the key's relock + release, all on one connection.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SideBySide {
    /// One write round trip.
    pub write: Latency,
    /// The library's uncontended single lock's acquire.
    pub single: Latency,
    /// A raw create (ephemeral sequential) and a listing of its parent sent back to back, until
    /// both answered: the least any acquire that lists after its create can take.
    pub burst: Latency,
    /// The same two the other way round, the listing first: an acquire that listed before its
    /// create (ZooKeeper starts a session's write only once its reads ahead are answered).
    pub list_first: Latency,
    /// The key's relock acquire.
    pub relock: Latency,
    /// Why the pass stopped, if it did.
    pub error: Option<String>,
}

/// Locks and releases `n` never-seen keys of the space `{dir}/space` one after another on one
/// session, then the same keys again; deletes the keys' directories afterwards (unmeasured), so
/// that the server's reaper does not do it during a later window.
pub async fn run_fresh_keys(lib: Lib, connect: &str, dir: &str, n: u64) -> FreshFigures {
    let result = fresh_keys(lib, connect, dir, n).await;
    if let Ok(client) = zkc::Client::connect(connect).await {
        delete_tree(&client, dir).await;
    }
    result.unwrap_or_else(|error| FreshFigures {
        error: Some(error),
        ..FreshFigures::default()
    })
}

async fn fresh_keys(lib: Lib, connect: &str, dir: &str, n: u64) -> Result<FreshFigures, String> {
    let conn = Conn::open(lib, connect).await?;
    let path = format!("{dir}/space");
    if lib == Lib::ClientLock {
        // Client::lock creates every missing ancestor with the same mode: make the space itself
        // persistent, like ZkLockSpace's, so that only the keys' directories are containers.
        mkdir(connect, &path).await?;
    }
    let space = conn.space(&path, Parents::Container);
    for k in 0..WARM_KEYS {
        cycle(&space.locker(&format!("warm-{k}"))).await?;
    }
    let keys: Vec<String> = (0..n).map(|k| format!("key-{k}")).collect();
    let mut first = Vec::with_capacity(keys.len());
    let mut fresh = Vec::with_capacity(keys.len());
    let log0 = log_counters(connect).await;
    let started = Instant::now();
    for key in &keys {
        let (asked, acquire) = cycle(&space.locker(key)).await?;
        first.push(asked);
        fresh.push(acquire);
    }
    let fresh_s = started.elapsed().as_secs_f64();
    let log1 = log_counters(connect).await;
    let mut relock = Vec::with_capacity(keys.len());
    let mut age_max = 0;
    let started = Instant::now();
    for (key, first) in keys.iter().zip(&first) {
        let (asked, acquire) = cycle(&space.locker(key)).await?;
        age_max = age_max.max(asked - first);
        relock.push(acquire);
    }
    let relock_s = started.elapsed().as_secs_f64();
    let log2 = log_counters(connect).await;
    // Forgotten: a new value of the space remembers no key; the directories are still there
    // (the reaper runs every 60 s by default, and each was used a moment ago).
    let forgetful = conn.space(&path, Parents::Container);
    let mut forgotten = Vec::with_capacity(keys.len());
    for key in &keys {
        let (_, acquire) = cycle(&forgetful.locker(key)).await?;
        forgotten.push(acquire);
    }
    let log3 = log_counters(connect).await;
    // A failed side-by-side pass leaves the passes before it standing.
    let (side, side_age_max) = side_by_side(&conn, &space, &keys, &first, dir)
        .await
        .unwrap_or_else(|error| {
            let failed = SideBySide {
                error: Some(error),
                ..SideBySide::default()
            };
            (failed, 0)
        });
    let age_max = age_max.max(side_age_max);
    conn.close().await;
    let per_s = |secs: f64| (secs > 0.0).then(|| n as f64 / secs);
    Ok(FreshFigures {
        keys: n,
        fresh: Latency::of(fresh),
        relock: Latency::of(relock),
        fresh_cycles_per_s: per_s(fresh_s),
        relock_cycles_per_s: per_s(relock_s),
        relock_age_max_s: age_max as f64 / 1e9,
        fresh_log: log_delta(log0, log1),
        relock_log: log_delta(log1, log2),
        forgotten: Latency::of(forgotten),
        forgotten_log: log_delta(log2, log3),
        side,
        error: None,
    })
}

/// The side-by-side pass (see [`SideBySide`]) over `keys` (first locked at `first`), relocked
/// once more; with the longest time from a key's first lock to this relock (ns).
async fn side_by_side(
    conn: &Conn,
    space: &Space,
    keys: &[String],
    first: &[u64],
    dir: &str,
) -> Result<(SideBySide, u64), String> {
    let raw = conn.raw_client().await?;
    let open = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    let (written, burst_dir) = (format!("{dir}/side-written"), format!("{dir}/side-burst"));
    let single_dir = format!("{dir}/side-single");
    for path in [&written, &burst_dir, &single_dir] {
        match raw.create(path, b"", &open).await {
            Ok(_) | Err(zkc::Error::NodeExists) => {}
            Err(e) => return Err(format!("create {path}: {e}")),
        }
    }
    let single = conn.locker(&single_dir);
    let prefix = format!("{burst_dir}/lock-");
    let (mut write, mut single_acquire, mut burst, mut list_first, mut relock) =
        (vec![], vec![], vec![], vec![], vec![]);
    let mut age_max = 0;
    for (i, (key, first)) in keys.iter().zip(first).enumerate() {
        let asked = now_ns();
        raw.set_data(&written, b"x", None)
            .await
            .map_err(|e| format!("set_data: {e}"))?;
        write.push(now_ns() - asked);
        let (_, acquire) = cycle(&single).await?;
        single_acquire.push(acquire);
        // The two raw bursts take turns at going first, so that neither gains by its place.
        for listing_first in [i % 2 == 0, i % 2 == 1] {
            let took = pipelined(&raw, &burst_dir, &prefix, listing_first).await?;
            if listing_first {
                list_first.push(took);
            } else {
                burst.push(took);
            }
        }
        let (asked, acquire) = cycle(&space.locker(key)).await?;
        age_max = age_max.max(asked - first);
        relock.push(acquire);
    }
    let side = SideBySide {
        write: Latency::of(write),
        single: Latency::of(single_acquire),
        burst: Latency::of(burst),
        list_first: Latency::of(list_first),
        relock: Latency::of(relock),
        error: None,
    };
    Ok((side, age_max))
}

/// A raw create (ephemeral sequential under `prefix`) and a listing of `parent` sent back to
/// back, the listing first or second; the time until both answered (ns). The node is deleted
/// afterwards, unmeasured.
async fn pipelined(
    raw: &zkc::Client,
    parent: &str,
    prefix: &str,
    listing_first: bool,
) -> Result<u64, String> {
    let node = zkc::CreateMode::EphemeralSequential.with_acls(zkc::Acls::anyone_all());
    let asked = now_ns();
    let (created, listed) = if listing_first {
        let list = raw.get_children(parent);
        let create = raw.create(prefix, OWNER_LIKE, &node);
        let listed = list.await;
        (create.await, listed)
    } else {
        let create = raw.create(prefix, OWNER_LIKE, &node);
        let list = raw.get_children(parent);
        (create.await, list.await)
    };
    let took = now_ns() - asked;
    let (_, sequence) = created.map_err(|e| format!("create {prefix}: {e}"))?;
    listed.map_err(|e| format!("get_children {parent}: {e}"))?;
    raw.delete(&format!("{prefix}{sequence}"), None)
        .await
        .map_err(|e| format!("delete: {e}"))?;
    Ok(took)
}

/// Data the size of a contender's owner record (`id={uuid}\nowner={label}`).
const OWNER_LIKE: &[u8] = b"id=0123456789abcdef0123456789abcdef\nowner=bench";

impl FreshFigures {
    /// The server's log syncs and writes per lock + release cycle of a pass.
    fn per_cycle(&self, log: Option<(u64, u64)>) -> Option<(f64, f64)> {
        let (syncs, writes) = log?;
        (self.keys > 0 && self.error.is_none()).then(|| {
            (
                syncs as f64 / self.keys as f64,
                writes as f64 / self.keys as f64,
            )
        })
    }

    pub fn fresh_syncs_per_cycle(&self) -> Option<f64> {
        self.per_cycle(self.fresh_log).map(|(s, _)| s)
    }

    pub fn fresh_writes_per_cycle(&self) -> Option<f64> {
        self.per_cycle(self.fresh_log).map(|(_, w)| w)
    }

    pub fn relock_syncs_per_cycle(&self) -> Option<f64> {
        self.per_cycle(self.relock_log).map(|(s, _)| s)
    }

    pub fn relock_writes_per_cycle(&self) -> Option<f64> {
        self.per_cycle(self.relock_log).map(|(_, w)| w)
    }

    pub fn forgotten_syncs_per_cycle(&self) -> Option<f64> {
        self.per_cycle(self.forgotten_log).map(|(s, _)| s)
    }

    pub fn forgotten_writes_per_cycle(&self) -> Option<f64> {
        self.per_cycle(self.forgotten_log).map(|(_, w)| w)
    }
}

/// One acquire + release: when it was asked for and how long the acquire took (ns).
async fn cycle(locker: &Locker) -> Result<(u64, u64), String> {
    let asked = now_ns();
    let held = locker.acquire().await?;
    let acquire = now_ns() - asked;
    held.release().await?;
    Ok((asked, acquire))
}

/// The ways of locking per key whose leftovers `keys-left` counts.
#[derive(Clone, Copy, Debug)]
enum Leaver {
    /// `ZkLockSpace`.
    Space,
    /// A `ZkMutex` per key, on `{space}/{key}` (what a keyed lock took before `ZkLockSpace`).
    MutexPerKey,
    /// `Client::lock` on `{space}/{key}`, the key's directory made persistent on demand.
    ClientPersistent,
    /// The same with the directory made as a container.
    ClientContainer,
}

impl Leaver {
    const ALL: [Leaver; 4] = [
        Leaver::Space,
        Leaver::MutexPerKey,
        Leaver::ClientPersistent,
        Leaver::ClientContainer,
    ];

    fn key(self) -> &'static str {
        match self {
            Leaver::Space => "zk_lock_space",
            Leaver::MutexPerKey => "zk_mutex_per_key",
            Leaver::ClientPersistent => "client_lock_persistent_parents",
            Leaver::ClientContainer => "client_lock_container_parents",
        }
    }

    fn lib(self) -> Lib {
        match self {
            Leaver::Space | Leaver::MutexPerKey => Lib::Ours,
            Leaver::ClientPersistent | Leaver::ClientContainer => Lib::ClientLock,
        }
    }
}

/// One way of locking per key and what it left.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Left {
    pub nodes: u64,
    pub per_key: f64,
}

/// What `keys-left` counted: the znodes under each way's space once every key was used once
/// and the reaper had scanned since.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LeftFigures {
    pub keys: u64,
    /// The server's reaper interval (`znode.container.checkIntervalMs`), when it is ours.
    pub reaper_interval_ms: Option<u64>,
    pub zk_lock_space: Option<Left>,
    pub zk_mutex_per_key: Option<Left>,
    pub client_lock_persistent_parents: Option<Left>,
    pub client_lock_container_parents: Option<Left>,
    /// From the last key's release to the count (two reaper scans).
    pub waited_s: f64,
    pub error: Option<String>,
}

/// Uses `keys` keys once each in four ways under `dir`, waits for two scans of the server's
/// container reaper (each observed as the deletion of an emptied container of our own made after
/// the keys were released, within `bound`), and counts what is left.
pub async fn run_keys_left(
    connect: &str,
    dir: &str,
    keys: u64,
    reaper_interval_ms: Option<u64>,
    bound: Duration,
) -> LeftFigures {
    let mut figures = LeftFigures {
        keys,
        reaper_interval_ms,
        ..LeftFigures::default()
    };
    if let Err(e) = keys_left(connect, dir, bound, &mut figures).await {
        figures.error = Some(e);
    }
    figures
}

async fn keys_left(
    connect: &str,
    dir: &str,
    bound: Duration,
    figures: &mut LeftFigures,
) -> Result<(), String> {
    let raw = zkc::Client::connect(connect)
        .await
        .map_err(|e| format!("raw client: {e}"))?;
    for leaver in Leaver::ALL {
        let conn = Conn::open(leaver.lib(), connect).await?;
        let path = format!("{dir}/{}", leaver.key());
        if leaver.lib() == Lib::ClientLock {
            mkdir(connect, &path).await?;
        }
        let space = match leaver {
            Leaver::ClientPersistent => conn.space(&path, Parents::Persistent),
            _ => conn.space(&path, Parents::Container),
        };
        for k in 0..figures.keys {
            let key = format!("key-{k}");
            let locker = match leaver {
                Leaver::MutexPerKey => conn.locker(&format!("{path}/{key}")),
                _ => space.locker(&key),
            };
            locker.acquire().await?.release().await?;
        }
        conn.close().await;
    }
    let idle = Instant::now();
    let deadline = idle + bound;
    for scan in 0..2 {
        reaper_scan(&raw, &format!("{dir}/sentinel-{scan}"), deadline).await?;
    }
    figures.waited_s = idle.elapsed().as_secs_f64();
    for leaver in Leaver::ALL {
        let nodes = count_tree(&raw, &format!("{dir}/{}", leaver.key())).await?;
        let left = Some(Left {
            nodes,
            per_key: nodes as f64 / figures.keys.max(1) as f64,
        });
        match leaver {
            Leaver::Space => figures.zk_lock_space = left,
            Leaver::MutexPerKey => figures.zk_mutex_per_key = left,
            Leaver::ClientPersistent => figures.client_lock_persistent_parents = left,
            Leaver::ClientContainer => figures.client_lock_container_parents = left,
        }
    }
    Ok(())
}

/// Waits for a scan of the server's container reaper that started after now: makes a container
/// at `path`, gives it a child and deletes the child (the reaper takes only containers that had
/// children), and waits, on watch events, for the reaper to delete it.
async fn reaper_scan(raw: &zkc::Client, path: &str, deadline: Instant) -> Result<(), String> {
    let container = zkc::CreateMode::Container.with_acls(zkc::Acls::anyone_all());
    let persistent = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    raw.create(path, b"", &container)
        .await
        .map_err(|e| format!("create {path}: {e}"))?;
    let child = format!("{path}/x");
    raw.create(&child, b"", &persistent)
        .await
        .map_err(|e| format!("create {child}: {e}"))?;
    raw.delete(&child, None)
        .await
        .map_err(|e| format!("delete {child}: {e}"))?;
    let gone = async {
        loop {
            match raw.check_and_watch_stat(path).await {
                Ok((None, _)) => return Ok(()),
                Ok((Some(_), watcher)) => {
                    watcher.changed().await;
                }
                Err(e) => return Err(format!("exists {path}: {e}")),
            }
        }
    };
    let left = deadline.saturating_duration_since(Instant::now());
    tokio::time::timeout(left, gone)
        .await
        .map_err(|_| format!("the server's reaper did not delete {path} in time"))?
}

/// What `keys-memory` measured (in a child process, which prints it as JSON).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct MemoryFigures {
    pub keys: u64,
    /// RSS after the first 1,000 keys (or all of them, when fewer).
    pub rss_first_1000_kib: u64,
    pub rss_all_kib: u64,
    /// `rss_all_kib - rss_first_1000_kib`.
    pub growth_kib: i64,
    /// RSS every tenth of the way: (keys done, KiB).
    pub curve: Vec<(u64, u64)>,
    pub seconds: f64,
    pub cycles_per_s: Option<f64>,
    pub error: Option<String>,
}

/// Keys after which the baseline RSS is taken.
const BASELINE_KEYS: u64 = 1000;

/// Runs `--child-keys`: one session, `n` distinct keys locked and released one after another
/// under `path`; prints `RESULT {json}`.
pub async fn child_keys(connect: &str, path: &str, n: u64) {
    let figures = key_memory(connect, path, n)
        .await
        .unwrap_or_else(|error| MemoryFigures {
            error: Some(error),
            ..MemoryFigures::default()
        });
    let line = serde_json::to_string(&figures).expect("figures serialize");
    println!("RESULT {line}");
}

async fn key_memory(connect: &str, path: &str, n: u64) -> Result<MemoryFigures, String> {
    let conn = Conn::open(Lib::Ours, connect).await?;
    let space = conn.space(path, Parents::Container);
    let baseline_at = BASELINE_KEYS.min(n);
    let step = (n / 10).max(1);
    let mut figures = MemoryFigures {
        keys: n,
        ..MemoryFigures::default()
    };
    let started = Instant::now();
    for k in 0..n {
        space
            .locker(&format!("key-{k}"))
            .acquire()
            .await?
            .release()
            .await?;
        let done = k + 1;
        if done == baseline_at {
            figures.rss_first_1000_kib = rss_kib();
        }
        if done % step == 0 || done == n {
            figures.curve.push((done, rss_kib()));
        }
    }
    figures.seconds = started.elapsed().as_secs_f64();
    figures.rss_all_kib = rss_kib();
    figures.growth_kib = figures.rss_all_kib as i64 - figures.rss_first_1000_kib as i64;
    figures.cycles_per_s = (figures.seconds > 0.0).then(|| n as f64 / figures.seconds);
    conn.close().await;
    Ok(figures)
}

/// Runs the keys-memory workload in a child process (this program again), within `limit`.
pub async fn run_key_memory(connect: &str, path: &str, n: u64, limit: Duration) -> MemoryFigures {
    let failed = |error: String| MemoryFigures {
        keys: n,
        error: Some(error),
        ..MemoryFigures::default()
    };
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return failed(format!("current_exe: {e}")),
    };
    let output = tokio::process::Command::new(exe)
        .args(["--child-keys", "--connect", connect, "--path", path])
        .args(["--keys", &n.to_string()])
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(limit, output).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => return failed(format!("child: {e}")),
        Err(_) => return failed(format!("child did not finish within {limit:?}")),
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let Some(line) = stdout.lines().find_map(|l| l.strip_prefix("RESULT ")) else {
        return failed(format!(
            "child printed no result: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    };
    serde_json::from_str(line)
        .unwrap_or_else(|e| failed(format!("child's result unreadable ({e}): {line}")))
}

/// Whether a relock at `age` still found the key in `ZkLockSpace`'s memory.
pub fn remembered(age_s: f64) -> bool {
    age_s < KEY_MEMORY.as_secs_f64()
}

/// Keys of each way that `keys-left` uses.
pub const LEFT_KEYS: u64 = 200;

/// The reaper interval of the keyed workloads' own server.
const REAPER_INTERVAL_MS: u64 = 100;

/// The once-per-run keyed workloads and where they ran.
#[derive(Clone, Debug, Default)]
pub struct KeyedOnce {
    /// The server they ran on.
    pub server: Option<String>,
    pub left: Option<LeftFigures>,
    pub memory: Option<MemoryFigures>,
}

/// Runs `keys-left` and `keys-memory` (those of them `args` asks for) on a server of their own
/// whose container reaper runs every 100 ms, started here and stopped once they are done (with
/// `--connect`, `keys-memory` runs on that ensemble and `keys-left`, which needs the short
/// reaper, is skipped).
pub async fn run_once(args: &crate::args::Args, root: &str) -> KeyedOnce {
    use crate::args::Workload;
    use zk_testcontainers::{ServerOptions, ZkServer};

    let (left, memory) = (
        args.runs_workload(Workload::KeysLeft),
        args.runs_workload(Workload::KeysMemory),
    );
    let mut once = KeyedOnce::default();
    if !left && !memory {
        return once;
    }
    let skipped = |error: String| LeftFigures {
        keys: LEFT_KEYS,
        error: Some(error),
        ..LeftFigures::default()
    };
    let (server, connect) = match args.external() {
        Some(connect) => {
            once.server = Some(format!("{connect} (--connect)"));
            if left {
                once.left = Some(skipped(
                    "needs a server of its own with a short reaper interval (not with --connect)"
                        .into(),
                ));
            }
            (None, connect)
        }
        None => {
            let opts = format!(
                "-Xmx256m -XX:+UseSerialGC -Dznode.container.checkIntervalMs={REAPER_INTERVAL_MS}"
            );
            eprintln!("bench: keyed workloads: starting a second ZooKeeper, JVM {opts}");
            let options = ServerOptions::default()
                .with_env("JVMFLAGS", &opts)
                .with_data_in_memory(args.data_in_memory);
            match ZkServer::start_with(options).await {
                Ok(server) => {
                    let connect = server.connect_string();
                    once.server = Some(format!("a second container, JVM {opts}"));
                    (Some(server), connect)
                }
                Err(e) => {
                    let why = format!("no second ZooKeeper: {e}");
                    eprintln!("bench: {why}");
                    once.left = left.then(|| skipped(why.clone()));
                    once.memory = memory.then(|| MemoryFigures {
                        keys: args.keys,
                        error: Some(why),
                        ..MemoryFigures::default()
                    });
                    return once;
                }
            }
        }
    };
    let dir = format!("{root}/keyed-once");
    if let Err(e) = mkdir(&connect, &dir).await {
        once.left = left.then(|| skipped(e.clone()));
        once.memory = memory.then(|| MemoryFigures {
            keys: args.keys,
            error: Some(e),
            ..MemoryFigures::default()
        });
        return once;
    }
    if left && server.is_some() {
        eprintln!("bench: keys-left: {LEFT_KEYS} keys in each of 4 ways, then two reaper scans...");
        once.left = Some(
            run_keys_left(
                &connect,
                &format!("{dir}/left"),
                LEFT_KEYS,
                Some(REAPER_INTERVAL_MS),
                Duration::from_secs(60),
            )
            .await,
        );
    }
    if memory {
        eprintln!(
            "bench: keys-memory: {} distinct keys one after another, in a child process...",
            args.keys
        );
        let limit = Duration::from_secs(300).max(Duration::from_millis(10 * args.keys));
        once.memory =
            Some(run_key_memory(&connect, &format!("{dir}/memory"), args.keys, limit).await);
    }
    drop(server);
    once
}
