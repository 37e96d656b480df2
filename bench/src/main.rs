//! Benchmarks of `ZkMutex` and `ZkLockSpace` against their peers on one ZooKeeper server
//! (issues #7, #13 and #14).
//!
//! ```text
//! bench/run.sh --json bench.json     # installs Curator if missing, then runs:
//! cargo run --release -p zk-recipes-bench -- --json bench.json
//! ZK_CONNECT=127.0.0.1:2181 cargo run --release -p zk-recipes-bench    # an existing server
//! cargo run --release -p zk-recipes-bench -- --measure 10 --warmup 2 --waiters 5000   # longer
//! ```
//!
//! Flags (`--help` describes them): `--json PATH` (and the plots next to it, `plots.rs`),
//! `--plot-from PATH` (the plots of an earlier report, nothing measured), `--measure SECS`, `--warmup SECS`,
//! `--rounds N`, `--waiters N`, `--fresh-keys N`, `--keys N`, `--no-java`, `--data-in-memory`,
//! `--only LIBS`, `--workloads LIST` (uncontended, contended8, locks64x4, keys64x4, fresh-keys,
//! handover, waiters, keys-left, keys-memory), and `--connect HOST:PORT` for an existing
//! ensemble.
//! `BENCH_MEASURE_SECS`, `BENCH_WARMUP_SECS` and `ZK_CONNECT` do the same as `--measure`,
//! `--warmup` and `--connect`.
//!
//! What runs, in one process against one server (a fresh ZooKeeper 3.8 container from
//! `zk-testcontainers`, or `--connect` / `ZK_CONNECT`), a few minutes by default:
//!
//! - `--rounds` rounds (3 by default). Each measures the server's floor, then runs every
//!   workload's window for every library in turn (ours, `Client::lock`, Curator; then the next
//!   workload), who goes first rotating from round to round. Every figure of the table is its
//!   median over the rounds with the spread, `median [min-max]`; the JSON has the same and
//!   every round's own figures; the targets are judged on the medians.
//! - **server floor**, with the raw `zookeeper_client::Client`, one request at a time:
//!   `set_data` (one write round trip: the yardstick of the targets), `get_children` (one
//!   read), ephemeral sequential `create` + `delete` (the two writes of every lock cycle), and
//!   `create` and `get_children` pipelined in both orders (what a one-round-trip acquire can at
//!   best cost);
//! - for `zk-recipes`' `ZkMutex`, zookeeper-client's own `Client::lock` (Curator-style prefix)
//!   and, where Java and Debian's Curator are installed, Curator's `InterProcessMutex` (our Java
//!   harness `bench/java/CuratorBench.java`, compiled with `javac` and run as one subprocess for
//!   the whole run, which takes one window per command on stdin and answers each with a line of
//!   JSON):
//!   - uncontended acquire + release on one session: cycles/s, acquire latency p50/p99;
//!   - 8 contenders on one lock, each on its own session: cycles/s, acquire latency p50/p99,
//!     handoff latency (from the holder calling release to the next holder's grant, both
//!     timestamps taken in this process);
//!   - 64 locks x 4 contenders (4 sessions, each contending on all 64 locks): cycles/s;
//!   - 64 keys x 4 contenders (`keys64x4`): the same on 64 keys of one `ZkLockSpace` (each
//!     session its own space value), and for `Client::lock` on `{space}/key-N` with
//!     `LockOptions::with_ancestor_options` making the key's directory on demand as a
//!     container (the space made beforehand); no Curator; cycles/s;
//!   - client CPU per 1,000 cycles (`/proc/self/stat` around the measurement window; for the
//!     Java peer, the JVM's process CPU time, JIT and GC included);
//!   - the server's transaction-log syncs per cycle and writes per sync in the window (the
//!     sync count of `mntr`, `zk_cnt_sync_processor_batch_size`, and the zxid of `srvr`, read
//!     around the window on both sides): the server syncs its log on one thread, so a cycle
//!     costs at least its syncs, and the 8-contender cycle is printed against them;
//! - fresh keys (`fresh-keys`, `ZkLockSpace` and `Client::lock` as in `keys64x4`): one session
//!   locks and releases `--fresh-keys` (500) never-seen keys one after another (new names every
//!   round), then the same keys again at once, in the same order (a few seconds later: within
//!   `ZkLockSpace`'s 10 s memory of recent keys and the server's 60 s reaping interval); acquire
//!   p50/p99 of each pass ("fresh", "relock"), cycles/s, and the server's writes and log syncs
//!   per cycle; then a side-by-side pass over the same keys (per key, in turn on one
//!   connection: one `set_data`, the library's uncontended single lock, a raw create + listing
//!   pipelined both ways round, taking turns at going first, the key's relock), on which the relock target is judged. The
//!   keys' directories are deleted afterwards, unmeasured, so that the server's reaper does not
//!   delete them during a later window;
//! - 1,000 waiters on one lock, on one session, in a fresh child process each (so one
//!   workload's freed memory does not flatter the next): RSS delta per waiter
//!   (`/proc/self/status`) once ZooKeeper reports every waiter's watch (`wchs`), and for
//!   `ZkMutex` the wake-ups per release, counted from the library's `"watch fired"` debug events
//!   while the queue drains, and the drain rate;
//! - a census of `ZkMutex`'s requests per grant and where an uncontended acquire's and a
//!   handoff's time goes, from the library's tracing events with timestamps (a separate short
//!   run with a layer of its own that takes every level; DEBUG events such as `"watch fired"`
//!   are among them).
//!
//! - once per run, after the rounds and the census, on a second server of their own (a small
//!   ZooKeeper container whose container reaper runs every 100 ms,
//!   `-Dznode.container.checkIntervalMs=100`, started for them and stopped after; the main
//!   server keeps the default 60 s, because a fast reaper deletes the keys' directories between
//!   the fresh and the relock pass and adds its deletes to every window's writes):
//!   - znodes left per key (`keys-left`): 200 keys used once in each of four layouts
//!     (`ZkLockSpace`, a `ZkMutex` per key, `Client::lock` with persistent and with container
//!     directories), then two reaper scans awaited on watch events (an emptied container of
//!     our own, made after the last release, deleted by the reaper, twice: the second scan
//!     started after the first had sent all its deletes), then the znodes under each layout's
//!     space counted; skipped with `--connect`;
//!   - client memory (`keys-memory`): a fresh child process locks and releases `--keys`
//!     (100,000) distinct keys of one `ZkLockSpace` one after another on one session: RSS after
//!     the first 1,000 and after all of them, and every tenth of the way. Three writes a key,
//!     1 to 3 ms (100,000 took 4.6 minutes on a busy 2-core machine), which is why it runs once
//!     per run and not in every round; with `--connect` it runs on that ensemble (and leaves its
//!     reaper that many empty containers).
//!
//! Tracing: every run has the subscriber a service would have, a `tracing_subscriber` `fmt`
//! layer at INFO writing to `std::io::sink`, so the figures include what the library's events
//! and spans cost its users; the census's layer has its own filter and is off outside its run.
//!
//! Fairness: the server churns unmeasured with both Rust libraries first (a fresh server is
//! slower for its first seconds), and the JVM churns unmeasured for 2 s before the first round
//! (JIT). Every workload releases with a delete whose reply is awaited
//! (`ZkMutexGuard::release`, an explicit `delete` for `Client::lock`, whose guard otherwise
//! deletes in the background on drop, and Curator's `release()`), holds for no time, and checks
//! that no two holders overlap.
//!
//! Linux only (`/proc`). Each window opens its own sessions.

mod args;
mod census;
mod child;
mod curator;
mod diagnostics;
mod floor;
mod handover;
mod hotlock;
mod keys;
mod locks;
mod machine;
mod measure;
mod plots;
mod report;
mod rounds;
mod stats;
mod throughput;
mod waiters;
mod zk;

use std::time::{Duration, SystemTime};

use clap::Parser;
use zk_testcontainers::{ServerOptions, ZkServer};
use zookeeper_client as zkc;

use args::{Args, Peer};
use census::Census;
use diagnostics::census_rounds;
use keys::child_keys;
use machine::{cpu_model, load_average, utc_now};
use measure::now_ns;
use report::Report;
use rounds::{run_round, Setup};
use throughput::{run_locks, Layout};
use waiters::child_waiters;
use zk::{delete_tree, four_letter, mkdir};

/// The server's JVM options (`JVMFLAGS` of the image; `BENCH_ZK_JAVA_OPTS` overrides): the
/// image's default stops the JIT at C1 and keeps the heap small for fast test start-up, which
/// is not how a production server runs.
const SERVER_JAVA_OPTS: &str = "-Xms256m -Xmx512m -XX:+UseSerialGC";

/// Contenders on the single contended lock.
const CONTENDERS: usize = 8;
/// Locks and contenders per lock of the many-locks workload.
const GRID: (usize, usize) = (64, 4);

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if let Some(path) = &args.plot_from {
        let report = std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|text| serde_json::from_str(&text).map_err(|e| e.to_string()));
        match report.and_then(|report| plots::draw(&report, path)) {
            Ok(written) => written
                .iter()
                .for_each(|p| eprintln!("bench: drew {}", p.display())),
            Err(e) => {
                eprintln!("bench: cannot draw {}: {e}", path.display());
                std::process::exit(2);
            }
        }
        return;
    }
    let census = Census::default();
    census.install();
    if let Some(peer) = args.child_waiters {
        let (Some(lib), Some(connect), Some(path)) = (peer.lib(), args.external(), &args.path)
        else {
            eprintln!("bench: --child-waiters needs a Rust library, --connect and --path");
            std::process::exit(2);
        };
        child_waiters(lib, &connect, path, args.waiters, &census).await;
        return;
    }
    if args.child_keys {
        let (Some(connect), Some(path)) = (args.external(), &args.path) else {
            eprintln!("bench: --child-keys needs --connect and --path");
            std::process::exit(2);
        };
        child_keys(&connect, path, args.keys).await;
        return;
    }
    let load_start = load_average();
    let date = utc_now();
    if !args.hot_lock.is_empty() {
        hot_lock(&args, &census, &date).await;
        return;
    }

    let external = args.external();
    let java_opts =
        std::env::var("BENCH_ZK_JAVA_OPTS").unwrap_or_else(|_| SERVER_JAVA_OPTS.to_owned());
    let (server, connect) = match external {
        Some(connect) => {
            if args.data_in_memory {
                eprintln!("bench: --data-in-memory has no effect with ZK_CONNECT");
            }
            (None, connect)
        }
        None => {
            eprintln!("bench: starting ZooKeeper in Docker (zk-testcontainers), JVM {java_opts}");
            let options = ServerOptions::default()
                .with_env("JVMFLAGS", &java_opts)
                .with_data_in_memory(args.data_in_memory);
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
    let data = if args.data_in_memory {
        "data in memory (tmpfs)"
    } else {
        "data on a volume"
    };
    let zookeeper = match &server {
        Some(_) => format!("{version} ({mode}, Docker, {data}, JVM {java_opts})"),
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

    let rust: Vec<Peer> = [Peer::ZkRecipes, Peer::ClientLock]
        .into_iter()
        .filter(|&p| args.runs(p))
        .collect();

    // The JVM first: its JIT warm-up churns on the server too.
    eprintln!("bench: Curator (Java): compiling and warming up...");
    let mut curator = curator::start(&connect, &format!("{root}/curator"), &args).await;
    if let Err(why) = &curator {
        eprintln!("bench: Curator: {why}");
    }
    // A freshly started server is slower for its first seconds (JIT, caches): churn a little
    // with every library first, so that the one measured first does not pay for it.
    let warm = Args {
        warmup: Duration::from_millis(200),
        measure: Duration::from_secs(1),
        ..args.clone()
    };
    eprintln!("bench: warming the server up...");
    for lib in rust.iter().filter_map(|p| p.lib()) {
        let dir = format!("{root}/warm-up/{}", lib.key());
        run_locks(
            lib,
            &connect,
            &dir,
            (1, CONTENDERS),
            Layout::Roots,
            &warm,
            None,
        )
        .await;
    }

    let setup = Setup {
        connect: &connect,
        root: &root,
        args: &args,
        rust: rust.clone(),
    };
    let mut rounds = Vec::new();
    for r in 0..args.rounds as usize {
        match run_round(r, &setup, curator.as_mut().ok()).await {
            Ok(round) => rounds.push(round),
            Err(e) => {
                eprintln!("bench: round {}: {e}", r + 1);
                std::process::exit(1);
            }
        }
    }

    eprintln!("bench: ZkMutex round-trip census...");
    let round_trips = census_rounds(&connect, &format!("{root}/census"), &census, &args).await;

    let (curator_version, curator_skipped) = match curator {
        Ok(peer) => {
            let version = peer.version.clone();
            peer.quit().await;
            (version, None)
        }
        Err(why) => (None, Some(why)),
    };
    // Once per run, on a server of their own (its reaper runs every 100 ms) while this one idles.
    let keyed = keys::run_once(&args, &root).await;
    let report = Report {
        date,
        machine: cpu_model(),
        cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
        zookeeper,
        load_start,
        load_end: load_average(),
        args: args.clone(),
        rust,
        rounds,
        round_trips,
        keyed,
        curator_version,
        curator_skipped,
    };
    println!("{}", report.table());
    let value = report.json();
    let json = serde_json::to_string_pretty(&value).expect("the report serializes");
    println!("{json}");
    if let Some(path) = &args.json {
        if let Err(e) = std::fs::write(path, format!("{json}\n")) {
            eprintln!("bench: cannot write {}: {e}", path.display());
        }
        match plots::draw(&value, path) {
            Ok(written) => written
                .iter()
                .for_each(|p| eprintln!("bench: drew {}", p.display())),
            Err(e) => eprintln!("bench: cannot draw the plots: {e}"),
        }
    }
    if let Ok(client) = zkc::Client::connect(&connect).await {
        delete_tree(&client, &root).await;
    }
}

/// `--hot-lock`: the hot-lock experiment alone, each target on a fresh server.
async fn hot_lock(args: &Args, census: &Census, date: &str) {
    use hotlock::HotTarget;
    use locks::Lib;

    let java_opts =
        std::env::var("BENCH_ZK_JAVA_OPTS").unwrap_or_else(|_| SERVER_JAVA_OPTS.to_owned());
    let mut targets = Vec::new();
    for &waiters in &args.hot_lock {
        for &sessions in &args.hot_sessions {
            targets.push(HotTarget {
                lib: Lib::Ours,
                waiters,
                sessions,
            });
        }
    }
    if args.runs(Peer::ClientLock) {
        for &waiters in &args.hot_client_lock {
            targets.push(HotTarget {
                lib: Lib::ClientLock,
                waiters,
                sessions: 1,
            });
        }
    }
    let all = hotlock::run(&targets, args.rounds, &java_opts, census).await;
    println!(
        "Hot lock, {date}, {} ({} cores), load {:.1}; ZooKeeper on a fresh server per row, JVM {java_opts}\n",
        cpu_model(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average(),
    );
    println!("{}", hotlock::table(&all));
    println!(
        "Medians over {} round(s) (min-max); a round that failed is left out of the figures:\n",
        args.rounds
    );
    println!("{}\n", hotlock::summary(&all));
    let json = serde_json::to_string_pretty(&all).expect("the figures serialize");
    println!("{json}");
    if let Some(path) = &args.json {
        if let Err(e) = std::fs::write(path, format!("{json}\n")) {
            eprintln!("bench: cannot write {}: {e}", path.display());
        }
    }
}
