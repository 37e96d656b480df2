//! `keys-left` (once per run, on a server of its own whose container reaper runs every 100 ms):
//! the znodes a key leaves once the reaper ran, for each way of locking per key.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use zookeeper_client as zkc;

use crate::locks::{Conn, Lib, Parents};
use crate::zk::{count_tree, mkdir};

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
pub(super) async fn run_keys_left(
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

/// Keys of each way that `keys-left` uses.
pub const LEFT_KEYS: u64 = 200;

/// The reaper interval of the keyed workloads' own server.
pub(super) const REAPER_INTERVAL_MS: u64 = 100;
