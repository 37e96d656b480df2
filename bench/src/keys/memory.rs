//! `keys-memory` (once per run, in a child process): the client's memory over many distinct
//! keys.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::locks::{Conn, Lib, Parents};
use crate::measure::rss_kib;

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
pub(super) async fn run_key_memory(
    connect: &str,
    path: &str,
    n: u64,
    limit: Duration,
) -> MemoryFigures {
    let keys = n.to_string();
    let args = [
        "--child-keys",
        "--connect",
        connect,
        "--path",
        path,
        "--keys",
        &keys,
    ];
    crate::child::run(&args, limit)
        .await
        .unwrap_or_else(|error| MemoryFigures {
            keys: n,
            error: Some(error),
            ..MemoryFigures::default()
        })
}
