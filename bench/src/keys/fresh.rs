//! `fresh-keys` (in the rounds): never-seen keys locked one after another, locked again at
//! once, and once more by a client that forgot them, side by side with the peer.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use zookeeper_client as zkc;

use crate::locks::{Conn, Lib, Locker, Parents, Space};
use crate::measure::{now_ns, Latency};
use crate::zk::{delete_tree, log_counters, log_delta, mkdir};

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

/// Whether a relock at `age` still found the key in `ZkLockSpace`'s memory.
pub fn remembered(age_s: f64) -> bool {
    age_s < KEY_MEMORY.as_secs_f64()
}
