//! The hot-lock experiment (`--hot-lock 10000,100000`): that many waiters on one lock, spread
//! over `--hot-sessions` sessions of this process, each target on a fresh server of its own
//! (512 MiB heap), every target once per round (`--rounds`, who goes first rotating). Does the
//! server survive the enqueue, how long do the enqueue and the drain take, how many names does
//! an enqueue list, and what does the server spend (CPU, per handoff while draining, the heap
//! left after each collection)? The summary gives each target's medians over the rounds with
//! their spread, and the drain rate at the deepest queue against the shallowest.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use zk_testcontainers::{ServerOptions, ZkServer};
use zookeeper_client as zkc;

use crate::census::Census;
use crate::locks::{Conn, Lib};
use crate::measure::rss_kib;
use crate::stats::{ratio, Spread};
use crate::zk::{four_letter, mkdir, total_watches};

/// One target: a library, a number of waiters, a number of sessions.
#[derive(Clone, Copy, Debug)]
pub struct HotTarget {
    pub lib: Lib,
    pub waiters: usize,
    pub sessions: usize,
}

/// What one target measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct HotFigures {
    /// The round it ran in (from 1).
    pub round: u32,
    pub lib: &'static str,
    pub waiters: usize,
    pub sessions: usize,
    /// From the first waiter's start until every waiter's node is in the queue and watched.
    pub enqueue_s: Option<f64>,
    /// From the holder's release until the last waiter released.
    pub drain_s: Option<f64>,
    pub handoffs_per_s: Option<f64>,
    /// Child names the library's listings returned, per waiter (zk-recipes only).
    pub names_listed_per_waiter: Option<f64>,
    /// Whether the server still answered `srvr` at the end.
    pub server_alive: bool,
    /// Whether its log has an `OutOfMemoryError`.
    pub out_of_memory: bool,
    /// The most heap left in use after a collection (`-Xlog:gc`), MiB.
    pub heap_after_gc_max_mib: Option<f64>,
    /// The server container's CPU time over the enqueue and the drain, seconds.
    pub server_cpu_s: Option<f64>,
    /// The server container's CPU time over the drain alone, milliseconds per handoff.
    pub server_drain_cpu_ms_per_handoff: Option<f64>,
    /// This process's RSS with every waiter queued, minus before, per waiter (KiB).
    pub client_kib_per_waiter: Option<f64>,
    pub error: Option<String>,
}

/// Runs every target once per round, each on its own server, who goes first rotating from
/// round to round.
pub async fn run(
    targets: &[HotTarget],
    rounds: u32,
    java_opts: &str,
    census: &Census,
) -> Vec<HotFigures> {
    let mut all = Vec::new();
    for round in 1..=rounds {
        let first = (round as usize - 1) % targets.len().max(1);
        for &target in targets[first..].iter().chain(&targets[..first]) {
            eprintln!(
                "bench: hot lock, round {round}/{rounds}: {} with {} waiters over {} sessions...",
                target.lib.key(),
                target.waiters,
                target.sessions
            );
            let mut figures = one(target, java_opts, census).await;
            figures.round = round;
            eprintln!("bench: hot lock: {figures:?}");
            all.push(figures);
        }
    }
    all
}

async fn one(target: HotTarget, java_opts: &str, census: &Census) -> HotFigures {
    let mut figures = HotFigures {
        round: 1,
        lib: target.lib.key(),
        waiters: target.waiters,
        sessions: target.sessions,
        ..HotFigures::default()
    };
    let options =
        ServerOptions::default().with_env("JVMFLAGS", format!("{java_opts} -Xlog:gc:stdout"));
    let server = match ZkServer::start_with(options).await {
        Ok(server) => server,
        Err(e) => {
            figures.error = Some(format!("no server: {e}"));
            return figures;
        }
    };
    let connect = server.connect_string();
    let cpu_before = server_cpu_us(server.container_id()).await;
    if let Err(e) = queue_and_drain(
        target,
        &connect,
        server.container_id(),
        census,
        &mut figures,
    )
    .await
    {
        figures.error = Some(e);
    }
    let cpu_after = server_cpu_us(server.container_id()).await;
    figures.server_cpu_s = cpu_before
        .zip(cpu_after)
        .map(|(b, a)| a.saturating_sub(b) as f64 / 1e6);
    figures.server_alive = four_letter(&connect, "srvr").await.is_some();
    if let Ok(logs) = server.logs().await {
        figures.out_of_memory = logs.contains("OutOfMemoryError");
        figures.heap_after_gc_max_mib = heap_after_gc_max(&logs);
    }
    figures
}

async fn queue_and_drain(
    target: HotTarget,
    connect: &str,
    container: &str,
    census: &Census,
    figures: &mut HotFigures,
) -> Result<(), String> {
    let path = "/hot/lock";
    mkdir(connect, path).await?;
    let raw = zkc::Client::connect(connect)
        .await
        .map_err(|e| format!("raw client: {e}"))?;
    let mut conns = Vec::new();
    for _ in 0..target.sessions.max(1) {
        conns.push(Conn::open(target.lib, connect).await?);
    }
    let lockers: Vec<_> = conns.iter().map(|c| Arc::new(c.locker(path))).collect();
    for locker in &lockers {
        locker.acquire().await?.release().await?;
    }
    let holder = lockers[0].acquire().await?;
    let children_before = children(&raw, path).await?;
    let watches_before = total_watches(connect).await.unwrap_or(0);
    let rss_before = rss_kib();

    census.start();
    let done = Arc::new(AtomicU64::new(0));
    let (err_tx, mut err_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(target.waiters);
    for i in 0..target.waiters {
        let locker = lockers[i % lockers.len()].clone();
        let (done, err_tx) = (done.clone(), err_tx.clone());
        tasks.push(tokio::spawn(async move {
            let result = match locker.acquire().await {
                Ok(held) => held.release().await,
                Err(e) => Err(e),
            };
            if let Err(e) = result {
                let _ = err_tx.send(e);
            }
            done.fetch_add(1, Ordering::SeqCst);
        }));
    }
    // Queued: every waiter's node is there and the server holds a watch for each.
    let deadline = started + Duration::from_secs(600);
    loop {
        if let Ok(e) = err_rx.try_recv() {
            return Err(format!("a waiter failed while queueing: {e}"));
        }
        if Instant::now() > deadline {
            return Err("the waiters did not all queue within 600 s".into());
        }
        // A server busy with the crowd may answer late, or drop the connection: ask again
        // until the deadline.
        let Ok(now) = children(&raw, path).await else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        if now >= children_before + target.waiters {
            let watches = total_watches(connect).await.unwrap_or(0);
            if watches >= watches_before + target.waiters as u64 {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    figures.enqueue_s = Some(started.elapsed().as_secs_f64());
    figures.client_kib_per_waiter =
        Some((rss_kib() as f64 - rss_before as f64) / target.waiters as f64);

    let drain_cpu = server_cpu_us(container).await;
    let drain = Instant::now();
    holder.release().await?;
    for task in tasks {
        match tokio::time::timeout_at((deadline + Duration::from_secs(600)).into(), task).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(format!("waiter task: {e}")),
            Err(_) => return Err("the queue did not drain in time".into()),
        }
    }
    let drain_s = drain.elapsed().as_secs_f64();
    figures.drain_s = Some(drain_s);
    figures.handoffs_per_s = Some(target.waiters as f64 / drain_s);
    let drained_cpu = server_cpu_us(container).await;
    figures.server_drain_cpu_ms_per_handoff = drain_cpu
        .zip(drained_cpu)
        .map(|(b, a)| a.saturating_sub(b) as f64 / 1e3 / target.waiters as f64);
    let listed = census.stop_listed();
    if target.lib == Lib::Ours {
        figures.names_listed_per_waiter = Some(listed as f64 / target.waiters as f64);
    }
    if let Ok(e) = err_rx.try_recv() {
        return Err(e);
    }
    for conn in conns {
        conn.close().await;
    }
    Ok(())
}

/// The number of children of `path`, from its stat (a listing would be the very load under
/// test).
async fn children(raw: &zkc::Client, path: &str) -> Result<usize, String> {
    let stat = raw
        .check_stat(path)
        .await
        .map_err(|e| format!("stat of {path}: {e}"))?
        .ok_or_else(|| format!("{path} is gone"))?;
    Ok(stat.num_children.max(0) as usize)
}

/// The container's CPU time so far, microseconds: cgroup v2's `cpu.stat`, or v1's
/// `cpuacct.usage` (nanoseconds), read inside the container.
async fn server_cpu_us(container: &str) -> Option<u64> {
    let read = |file: &'static str| {
        tokio::process::Command::new("docker")
            .args(["exec", container, "cat", file])
            .output()
    };
    if let Ok(out) = read("/sys/fs/cgroup/cpu.stat").await {
        let v2 = String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("usage_usec "))
            .and_then(|v| v.trim().parse().ok());
        if v2.is_some() {
            return v2;
        }
    }
    let out = read("/sys/fs/cgroup/cpuacct/cpuacct.usage").await.ok()?;
    let ns: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().ok()?;
    Some(ns / 1000)
}

/// The largest heap in use after a collection in a `-Xlog:gc` log: lines such as
/// `[gc] GC(3) Pause Young (Allocation Failure) 80M->12M(247M) 4.2ms`.
pub fn heap_after_gc_max(logs: &str) -> Option<f64> {
    logs.lines()
        .filter(|l| l.contains("[gc]") && l.contains("->"))
        .filter_map(|l| {
            let after = l.split("->").nth(1)?;
            let end = after.find(|c: char| !c.is_ascii_digit())?;
            let value: f64 = after[..end].parse().ok()?;
            let unit = after[end..].chars().next()?;
            Some(match unit {
                'K' => value / 1024.0,
                'M' => value,
                'G' => value * 1024.0,
                _ => return None,
            })
        })
        .reduce(f64::max)
}

/// The experiment's table.
pub fn table(all: &[HotFigures]) -> String {
    let mut out = String::from(
        "| round | library | waiters | sessions | server survived | enqueue s | drain s | handoffs/s \
         | names listed per waiter | server heap after GC, max MiB | server CPU s \
         | server CPU ms per handoff (drain) | client KiB per waiter |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let f = |v: Option<f64>, digits: usize| match v {
        Some(v) => format!("{v:.digits$}"),
        None => "–".into(),
    };
    for h in all {
        let survived = match (h.server_alive, h.out_of_memory) {
            (true, false) => "yes".to_owned(),
            (_, true) => "no: OutOfMemoryError".to_owned(),
            (false, false) => "no: stopped answering".to_owned(),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            h.round,
            h.lib,
            h.waiters,
            h.sessions,
            survived,
            f(h.enqueue_s, 1),
            f(h.drain_s, 1),
            f(h.handoffs_per_s, 0),
            f(h.names_listed_per_waiter, 1),
            f(h.heap_after_gc_max_mib, 0),
            f(h.server_cpu_s, 1),
            f(h.server_drain_cpu_ms_per_handoff, 2),
            f(h.client_kib_per_waiter, 1),
        ));
        if let Some(e) = &h.error {
            out.push_str(&format!("|  |  | ({}: {e}) |||||||||||\n", h.lib));
        }
    }
    out
}

/// Each target's medians over the rounds, `median (min-max)`, and for each library and
/// number of sessions the drain rate at its deepest queue against its shallowest (issue #27
/// wants at least 0.8x from 10,000 to 100,000 waiters).
pub fn summary(all: &[HotFigures]) -> String {
    let mut targets: Vec<(&str, usize, usize)> = Vec::new();
    for h in all {
        let key = (h.lib, h.waiters, h.sessions);
        if !targets.contains(&key) {
            targets.push(key);
        }
    }
    let mut out = String::from(
        "| library | waiters | sessions | rounds (server survived) | enqueue s | drain s \
         | handoffs/s | server CPU ms per handoff (drain) |\n|---|---|---|---|---|---|---|---|\n",
    );
    let spread =
        |of: &[&HotFigures], f: fn(&HotFigures) -> Option<f64>, digits: usize| match Spread::of(
            of.iter().map(|h| f(h)),
        ) {
            Some(s) if s.rounds > 1 => format!(
                "{:.digits$} ({:.digits$}-{:.digits$})",
                s.median, s.min, s.max
            ),
            Some(s) => format!("{:.digits$}", s.median),
            None => "–".into(),
        };
    let of = |key: (&str, usize, usize)| -> Vec<&HotFigures> {
        all.iter()
            .filter(|h| (h.lib, h.waiters, h.sessions) == key && h.error.is_none())
            .collect()
    };
    for &key in &targets {
        let (lib, waiters, sessions) = key;
        let ran = all
            .iter()
            .filter(|h| (h.lib, h.waiters, h.sessions) == key)
            .count();
        let survived = all
            .iter()
            .filter(|h| (h.lib, h.waiters, h.sessions) == key)
            .filter(|h| h.server_alive && !h.out_of_memory)
            .count();
        let done = of(key);
        out.push_str(&format!(
            "| {lib} | {waiters} | {sessions} | {ran} ({survived}) | {} | {} | {} | {} |\n",
            spread(&done, |h| h.enqueue_s, 1),
            spread(&done, |h| h.drain_s, 1),
            spread(&done, |h| h.handoffs_per_s, 0),
            spread(&done, |h| h.server_drain_cpu_ms_per_handoff, 2),
        ));
    }
    let mut groups: Vec<(&str, usize)> = Vec::new();
    for &(lib, _, sessions) in &targets {
        if !groups.contains(&(lib, sessions)) {
            groups.push((lib, sessions));
        }
    }
    for (lib, sessions) in groups {
        let depths: Vec<usize> = targets
            .iter()
            .filter(|t| (t.0, t.2) == (lib, sessions))
            .map(|t| t.1)
            .collect();
        let (Some(&low), Some(&high)) = (depths.iter().min(), depths.iter().max()) else {
            continue;
        };
        if low == high {
            continue;
        }
        let rate = |waiters| {
            Spread::of(
                of((lib, waiters, sessions))
                    .iter()
                    .map(|h| h.handoffs_per_s),
            )
            .map(|s| s.median)
        };
        let line = match ratio(rate(high), rate(low)) {
            Some(r) => format!("{r:.2}x"),
            None => "– (a depth has no finished round)".into(),
        };
        out.push_str(&format!(
            "\n{lib}, {sessions} session(s): drain handoffs/s at {high} waiters vs {low}, medians: {line}"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(round: u32, waiters: usize, rate: Option<f64>) -> HotFigures {
        HotFigures {
            round,
            lib: "zk-recipes",
            waiters,
            sessions: 100,
            drain_s: rate.map(|r| waiters as f64 / r),
            handoffs_per_s: rate,
            server_alive: rate.is_some(),
            error: rate.is_none().then(|| "did not queue".to_owned()),
            ..HotFigures::default()
        }
    }

    #[test]
    fn the_summary_takes_medians_over_finished_rounds_and_compares_the_depths() {
        let all = [
            figures(1, 10_000, Some(1000.0)),
            figures(1, 100_000, Some(700.0)),
            figures(2, 100_000, Some(900.0)),
            figures(2, 10_000, Some(1200.0)),
            figures(3, 10_000, Some(1100.0)),
            figures(3, 100_000, None),
        ];
        let text = summary(&all);
        assert!(
            text.contains(
                "| zk-recipes | 10000 | 100 | 3 (3) | – | 9.1 (8.3-10.0) | 1100 (1000-1200) | – |"
            ),
            "{text}"
        );
        assert!(
            text.contains("| zk-recipes | 100000 | 100 | 3 (2) | – | 127.0 (111.1-142.9) | 800 (700-900) | – |"),
            "{text}"
        );
        // 800 / 1100, by the medians of the finished rounds.
        assert!(
            text.contains("drain handoffs/s at 100000 waiters vs 10000, medians: 0.73x"),
            "{text}"
        );
    }

    #[test]
    fn reads_the_heap_left_after_each_collection() {
        let logs = "[0.5s][info][gc] GC(0) Pause Young (Allocation Failure) 68M->9M(247M) 3.1ms\n\
                    noise -> here\n\
                    [9.1s][info][gc] GC(7) Pause Full (Allocation Failure) 490M->301M(494M) 812.0ms\n\
                    [9.9s][info][gc] GC(8) Pause Young (Allocation Failure) 400M->2048K(494M) 1ms\n";
        assert_eq!(heap_after_gc_max(logs), Some(301.0));
        assert_eq!(heap_after_gc_max("nothing"), None);
    }
}
