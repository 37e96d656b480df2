//! The flash sale: `buyers` concurrent buyers (tasks of this process, sharing one Redis
//! connection per node, one ZooKeeper session and a pool of PostgreSQL connections) for
//! `products` products of `stock` seats each, one lock per product, the stock decremented
//! inside the lock in PostgreSQL with the order recorded in the same statement. Optionally one
//! more buyer (its own process) is frozen inside the lock of product 0 while the crowd buys.
//! A run's rounds are kept as a [`Report`], written as JSON with `--json` (plots.rs draws it).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::kinds::{self, Attempt, Kind};
use crate::Addrs;

#[derive(Clone, Copy, Debug)]
pub struct Plan {
    pub buyers: usize,
    pub products: usize,
    pub stock: i64,
    pub pool: usize,
    /// Freeze one buyer inside product 0's lock for this long (None: no frozen buyer).
    pub frozen: Option<Duration>,
}

/// One round's measurements.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Round {
    pub sold: i64,
    pub oversold: i64,
    /// Seats the stock column still offers after every buyer has had its answer (0 when right).
    pub offered: i64,
    /// Sold seats per second, from the start to the last sale.
    pub per_sec: f64,
    /// Each buyer's time to its answer (bought or sold out), ms.
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub retries: u64,
    pub failed: u64,
    /// Every buyer's time to its answer, ms, sorted (what p50 and p99 are taken from).
    pub latencies_ms: Vec<f64>,
}

/// A sale run as the JSON keeps it: the plan, and every round of every kind.
#[derive(Debug, Serialize, Deserialize)]
pub struct Report {
    /// The day the run started (UTC), `YYYY-MM-DD`.
    pub date: String,
    /// The command line's arguments after the binary.
    pub args: Vec<String>,
    pub cores: usize,
    pub buyers: usize,
    pub products: usize,
    pub stock: i64,
    pub pool: usize,
    pub ttl_ms: u64,
    pub variants: Vec<Variant>,
}

/// One variant of the sale (no pause, or one buyer frozen).
#[derive(Debug, Serialize, Deserialize)]
pub struct Variant {
    pub name: String,
    /// How long the frozen buyer is frozen, ms (None: nobody is).
    pub frozen_ms: Option<u64>,
    pub kinds: Vec<KindRounds>,
}

/// One lock kind's rounds, in the order they ran.
#[derive(Debug, Serialize, Deserialize)]
pub struct KindRounds {
    pub kind: String,
    pub rounds: Vec<Round>,
}

/// `YYYY-MM-DD` of a time `secs` seconds after the Unix epoch, UTC (the proleptic Gregorian
/// calendar, counted in 400-year eras of 146097 days from 0000-03-01).
pub fn utc_date(secs: u64) -> String {
    let days = (secs / 86_400) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let doe = days.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

pub async fn run(kind: Kind, addrs: &Addrs, plan: Plan, nonce: &str) -> Result<Round, String> {
    let items: Vec<String> = (0..plan.products)
        .map(|p| format!("sale-{kind}-{nonce}-{p}"))
        .collect();
    let db = crate::store::connect(&addrs.pg).await?;
    for item in &items {
        crate::store::create_item(&db, item, plan.stock).await?;
    }
    let ctx = Arc::new(addrs.ctx(kind, plan.pool).await?);

    // The frozen buyer: its own process, stopped between its read and its write.
    let mut frozen = None;
    if let Some(pause) = plan.frozen {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let args = crate::pause::WorkerArgs {
            kind,
            name: "frozen buyer".into(),
            item: items[0].clone(),
            amount: 1,
            pause: true,
            retry: true,
            addrs: addrs.clone(),
        };
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut child = tokio::process::Command::new(exe)
            .arg("--worker")
            .args(args.to_pairs())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| e.to_string())?;
        let stdout = child.stdout.take().expect("piped");
        tokio::spawn(async move {
            use tokio::io::AsyncBufReadExt;
            let mut lines = tokio::io::BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let _ = tx.send(line);
            }
        });
        loop {
            let line = tokio::time::timeout(Duration::from_secs(30), rx.recv())
                .await
                .map_err(|_| "the frozen buyer never computed")?
                .ok_or("the frozen buyer exited")?;
            if line.starts_with(&format!("{}computed", crate::PREFIX)) {
                break;
            }
        }
        let pid = child.id().ok_or("no pid")?;
        crate::pause::signal(pid, "STOP")?;
        frozen = Some((child, pid, Instant::now() + pause, rx));
    }

    let start = Instant::now();
    let deadline = start + Duration::from_secs(120);
    let mut tasks = Vec::new();
    for b in 0..plan.buyers {
        let ctx = ctx.clone();
        let item = items[b % plan.products].clone();
        tasks.push(tokio::spawn(async move {
            let name = format!("buyer-{b}");
            let mut retries = 0u64;
            loop {
                let quiet = |_: &str, _: String| {};
                match kinds::attempt(&ctx, &item, 1, &name, deadline, &quiet, None).await {
                    Ok(Attempt::Done { .. }) => return (start.elapsed(), true, retries, false),
                    Ok(Attempt::SoldOut) => return (start.elapsed(), false, retries, false),
                    Ok(Attempt::Refused(_)) => retries += 1,
                    Err(_) => return (start.elapsed(), false, retries, true),
                }
            }
        }));
    }
    if let Some((mut child, pid, until, mut rx)) = frozen {
        tokio::time::sleep_until(until.into()).await;
        crate::pause::signal(pid, "CONT")?;
        use tokio::io::AsyncWriteExt;
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        stdin.write_all(b"go\n").await.map_err(|e| e.to_string())?;
        let _ = tokio::time::timeout(Duration::from_secs(60), child.wait()).await;
        while rx.try_recv().is_ok() {}
    }
    let mut latencies = Vec::new();
    let (mut last_sale, mut retries, mut failed) = (Duration::ZERO, 0, 0);
    for t in tasks {
        let (at, bought, r, err) = t.await.map_err(|e| e.to_string())?;
        latencies.push(at.as_micros() as f64 / 1000.0);
        if bought {
            last_sale = last_sale.max(at);
        }
        retries += r;
        failed += u64::from(err);
    }
    latencies.sort_by(|a, b| a.total_cmp(b));
    let (mut sold, mut oversold, mut offered) = (0, 0, 0);
    for item in &items {
        let (left, orders) = crate::store::tally(&db, item).await?;
        sold += orders;
        offered += left;
        oversold += (orders - plan.stock).max(0);
    }
    if let Some((session, _)) = &ctx.zk {
        session.close().await;
    }
    Ok(Round {
        sold,
        oversold,
        offered,
        per_sec: sold.min(plan.stock * plan.products as i64) as f64
            / last_sale.as_secs_f64().max(1e-6),
        p50_ms: percentile(&latencies, 0.5),
        p99_ms: percentile(&latencies, 0.99),
        retries,
        failed,
        latencies_ms: latencies,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc_date(0), "1970-01-01");
        assert_eq!(utc_date(951_782_400), "2000-02-29");
        assert_eq!(utc_date(951_868_800), "2000-03-01");
        // 2026-12-07 23:59:59 UTC.
        assert_eq!(utc_date(1_796_687_999), "2026-12-07");
        assert_eq!(utc_date(1_796_688_000), "2026-12-08");
    }
}
