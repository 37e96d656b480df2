//! The flash sale: `buyers` concurrent buyers (tasks of this process, sharing one Redis
//! connection per node, one ZooKeeper session and a pool of PostgreSQL connections) for
//! `products` products of `stock` seats each, one lock per product, the stock decremented
//! inside the lock in PostgreSQL with the order recorded in the same statement. Optionally one
//! more buyer (its own process) is frozen inside the lock of product 0 while the crowd buys.

use std::sync::Arc;
use std::time::{Duration, Instant};

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
#[derive(Clone, Debug)]
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
        latencies.push(at.as_secs_f64() * 1000.0);
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
    })
}
