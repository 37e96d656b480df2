//! The waiters workload: many waiters on one lock in a child process, for memory per waiter,
//! wake-ups per release and the drain rate.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use zookeeper_client as zkc;

use crate::census::{counts, Census};
use crate::diagnostics::{breakdown, Breakdown};
use crate::locks::{Conn, Lib};
use crate::measure::rss_kib;
use crate::zk::{mkdir, total_watches};

/// What the waiters workload measured (in a child process, which prints it as JSON).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct WaiterFigures {
    pub waiters: usize,
    pub rss_before_kib: u64,
    pub rss_waiting_kib: u64,
    pub kib_per_waiter: Option<f64>,
    /// `"watch fired"` events per release that had a waiter (ZkMutex only).
    pub wakeups_per_release: Option<f64>,
    /// Extra listings (`"listing again"`) per handoff (ZkMutex only).
    pub relists_per_handoff: Option<f64>,
    pub enqueue_s: f64,
    pub drain_handoffs_per_s: Option<f64>,
    /// Where the drain's handoffs spend their time (ZkMutex only).
    #[serde(
        rename = "handoff_breakdown",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub breakdown: Option<Breakdown>,
    pub error: Option<String>,
}

/// Runs `--child-waiters`: one session, a holder, `n` waiters; prints `RESULT {json}`.
pub async fn child_waiters(lib: Lib, connect: &str, path: &str, n: usize, census: &Census) {
    let result = waiters(lib, connect, path, n, census).await;
    let figures = result.unwrap_or_else(|error| WaiterFigures {
        error: Some(error),
        ..WaiterFigures::default()
    });
    let line = serde_json::to_string(&figures).expect("figures serialize");
    println!("RESULT {line}");
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
        // The root's stat counts the children (the holder's and the waiters' nodes, and
        // zk-recipes' anchor); a listing would add the load under test.
        let queued = raw
            .check_stat(path)
            .await
            .map_err(|e| format!("stat: {e}"))?
            .map_or(0, |s| s.num_children.max(0) as usize);
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
pub async fn run_waiters(lib: Lib, connect: &str, path: &str, n: usize) -> WaiterFigures {
    let waiters = n.to_string();
    let args = [
        "--child-waiters",
        lib.key(),
        "--connect",
        connect,
        "--path",
        path,
        "--waiters",
        &waiters,
    ];
    crate::child::run(&args, Duration::from_secs(300))
        .await
        .unwrap_or_else(|error| WaiterFigures {
            error: Some(error),
            ..WaiterFigures::default()
        })
}
