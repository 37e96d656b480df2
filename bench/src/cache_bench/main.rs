//! The tree-cache benchmark: `ZkTreeCache` beside Curator's `CuratorCache` on the same server
//! in the same run, in interleaved rounds, judged by the medians over the rounds (with their
//! spread):
//!
//! - **first view**: a cache started on a tree of `--nodes` nodes (100 per directory, 32 bytes
//!   each) until its first full view is in;
//! - **change to event**: one node's data set by a client, until the cache reports the change
//!   (p50 and p99 over `--events` changes a round), beside that write's own round trip;
//! - **memory per cached node**: ours, the growth of this process's resident memory while
//!   its cache holds the tree; Curator's, the growth of its JVM's used heap after a GC.
//!
//! `cargo run --release -p zk-recipes-bench --bin cache-bench -- --rounds 5`; `--no-java`
//! leaves Curator out. With `ZK_CONNECT` set it uses that server instead of starting one.

#[allow(dead_code)] // the lock benchmark's helpers, not all used here
#[path = "../stats.rs"]
mod stats;

mod curator;
mod ours;

use std::time::Duration;

use clap::Parser;
use stats::{ratio, Spread};
use zk_testcontainers::{ServerOptions, ZkServer};
use zookeeper_client as zkc;

/// The tree-cache benchmark: zk-recipes' ZkTreeCache against Curator's CuratorCache.
#[derive(Parser, Debug)]
struct Args {
    /// Interleaved rounds (each: our first view, Curator's, our events, Curator's).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Nodes in the tree.
    #[arg(long, default_value_t = 10_000)]
    nodes: usize,
    /// Changes timed per round and library.
    #[arg(long, default_value_t = 200)]
    events: usize,
    /// Leave Curator out.
    #[arg(long)]
    no_java: bool,
}

/// What one round measured for one library.
#[derive(Debug, Default, Clone)]
pub struct Round {
    pub view_ms: Option<f64>,
    pub nodes: Option<usize>,
    pub bytes_per_node: Option<f64>,
    pub event_p50_us: Option<f64>,
    pub event_p99_us: Option<f64>,
    pub write_p50_us: Option<f64>,
}

/// The `q` quantile (0..=1) of `values` (sorted here).
pub fn quantile(values: &mut [f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let at = ((values.len() - 1) as f64 * q).round() as usize;
    Some(values[at])
}

pub const ROOT: &str = "/cache-bench";

/// The tree: `{ROOT}/dK/nM`, 100 nodes per directory, made in pipelined bursts.
async fn make_tree(client: &zkc::Client, nodes: usize) -> Vec<String> {
    let options = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    let _ = client.create(ROOT, b"", &options).await;
    let dirs = nodes.div_ceil(100);
    let mut paths: Vec<String> = (0..dirs).map(|d| format!("{ROOT}/d{d}")).collect();
    let leaves: Vec<String> = (0..nodes)
        .map(|n| format!("{ROOT}/d{}/n{n}", n / 100))
        .collect();
    paths.extend(leaves.iter().cloned());
    let data = [b'x'; 32];
    for chunk in paths.chunks(500) {
        let pending: Vec<_> = chunk
            .iter()
            .map(|p| client.create(p, &data, &options))
            .collect();
        for p in pending {
            match p.await {
                Ok(_) | Err(zkc::Error::NodeExists) => {}
                Err(e) => panic!("making the tree: {e}"),
            }
        }
    }
    leaves
}

fn show(what: &str, unit: &str, s: Option<Spread>) -> String {
    match s {
        Some(s) => format!(
            "{what}: {:.1} {unit} (median of {}; {:.1}..{:.1})",
            s.median, s.rounds, s.min, s.max
        ),
        None => format!("{what}: not measured"),
    }
}

fn spread(rounds: &[Round], f: impl Fn(&Round) -> Option<f64>) -> Option<Spread> {
    Spread::of(rounds.iter().map(f))
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    let (_server, connect) = match std::env::var("ZK_CONNECT") {
        Ok(connect) => (None, connect),
        Err(_) => {
            eprintln!("cache-bench: starting ZooKeeper in Docker (zk-testcontainers)");
            let options = ServerOptions::default().with_env("JVMFLAGS", "-Xmx1g -XX:+UseSerialGC");
            let server = ZkServer::start_with(options).await.unwrap_or_else(|e| {
                eprintln!("cache-bench: no ZooKeeper: {e}");
                std::process::exit(1)
            });
            let connect = server.connect_string();
            (Some(server), connect)
        }
    };
    let raw = zkc::Client::connect(&connect).await.expect("a client");
    let started = std::time::Instant::now();
    let leaves = make_tree(&raw, args.nodes).await;
    eprintln!(
        "cache-bench: {} nodes made in {:?}",
        leaves.len(),
        started.elapsed()
    );
    let mut java = if args.no_java {
        Err("skipped (--no-java)".to_owned())
    } else {
        curator::CuratorPeer::start(&connect).await
    };
    if let Err(why) = &java {
        eprintln!("cache-bench: Curator: {why}");
    }
    let mut rust_rounds = Vec::new();
    let mut curator_rounds = Vec::new();
    let mut rng_state = 0x9e37_79b9_7f4a_7c15u64;
    let mut pick = |n: usize| {
        // xorshift: the changed nodes, spread over the tree.
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        (rng_state % n as u64) as usize
    };
    for round in 0..args.rounds {
        let paths: Vec<String> = (0..args.events)
            .map(|_| leaves[pick(leaves.len())].clone())
            .collect();
        // Alternate who goes first.
        let (r, c) = if round % 2 == 0 {
            let r = ours::round(&connect, &raw, &paths).await;
            let c = curator::round(&mut java, &paths).await;
            (r, c)
        } else {
            let c = curator::round(&mut java, &paths).await;
            let r = ours::round(&connect, &raw, &paths).await;
            (r, c)
        };
        eprintln!(
            "cache-bench: round {}: ours {r:?}; Curator {c:?}",
            round + 1
        );
        rust_rounds.push(r);
        curator_rounds.push(c);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "# Tree cache: ZkTreeCache and Curator's CuratorCache, {} nodes, {} rounds, {} changes a round",
        leaves.len() + leaves.len().div_ceil(100) + 1,
        args.rounds,
        args.events
    );
    if let Err(why) = &java {
        println!("Curator: {why}");
    }
    for (name, rounds) in [
        ("ZkTreeCache", &rust_rounds),
        ("CuratorCache", &curator_rounds),
    ] {
        println!("{name}:");
        println!(
            "  {}",
            show("first view", "ms", spread(rounds, |r| r.view_ms))
        );
        println!(
            "  {}",
            show(
                "change to event p50",
                "us",
                spread(rounds, |r| r.event_p50_us)
            )
        );
        println!(
            "  {}",
            show(
                "change to event p99",
                "us",
                spread(rounds, |r| r.event_p99_us)
            )
        );
        println!(
            "  {}",
            show("one write p50", "us", spread(rounds, |r| r.write_p50_us))
        );
        println!(
            "  {}",
            show(
                "memory per node",
                "bytes",
                spread(rounds, |r| r.bytes_per_node)
            )
        );
    }
    let med = |rounds: &[Round], f: fn(&Round) -> Option<f64>| spread(rounds, f).map(|s| s.median);
    let line = |what: &str, value: Option<f64>, target: &str| match value {
        Some(v) => println!("{what}: {v:.2}x ({target})"),
        None => println!("{what}: not measured"),
    };
    line(
        "first view, ours / Curator's",
        ratio(
            med(&rust_rounds, |r| r.view_ms),
            med(&curator_rounds, |r| r.view_ms),
        ),
        "wanted < 1.0",
    );
    let per_round_ratio = |rounds: &[Round]| {
        Spread::of(rounds.iter().map(|r| ratio(r.event_p50_us, r.write_p50_us))).map(|s| s.median)
    };
    line(
        "change to event p50 / one write p50, ours",
        per_round_ratio(&rust_rounds),
        "wanted <= 1.2",
    );
    line(
        "change to event p50 / one write p50, Curator's",
        per_round_ratio(&curator_rounds),
        "for comparison",
    );
    line(
        "memory per node, ours / Curator's",
        ratio(
            med(&rust_rounds, |r| r.bytes_per_node),
            med(&curator_rounds, |r| r.bytes_per_node),
        ),
        "wanted < 1.0",
    );
}
