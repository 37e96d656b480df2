//! The command line (clap): flags, their environment-variable defaults, and `--help`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::locks::Lib;

/// Benchmarks zk-recipes' `ZkMutex` and `ZkLockSpace` (a lock per key) against
/// zookeeper-client's `Client::lock` and Apache Curator's `InterProcessMutex`, and its
/// `ZkLeaderElection` against Curator's `LeaderLatch`, on one ZooKeeper server (a fresh ZooKeeper
/// 3.8 container, or the ensemble of `--connect` / `ZK_CONNECT`), and prints a table and the
/// same figures as JSON.
///
/// Workloads of the rounds: uncontended, contended8, locks64x4, keys64x4, fresh-keys, handover,
/// waiters. Once per run, after the rounds: keys-left (znodes left per key once the server's
/// container reaper ran, on a second, small server of its own whose reaper runs every 100 ms)
/// and keys-memory (client RSS while locking --keys distinct keys one after another, in a child
/// process, on that second server; three writes per key, 1 to 3 ms: 100,000 took 4.6 minutes
/// on a busy 2-core machine, so it is not repeated per round).
#[derive(Parser, Clone, Debug)]
#[command(
    name = "bench",
    after_help = "Examples:\n  \
        bench/run.sh --json bench.json        (installs Curator when missing, then runs this)\n  \
        cargo run --release -p zk-recipes-bench -- --json bench.json\n  \
        ZK_CONNECT=127.0.0.1:2181 cargo run --release -p zk-recipes-bench -- --no-java\n  \
        cargo run --release -p zk-recipes-bench -- --measure 10 --warmup 2 --waiters 5000\n  \
        cargo run --release -p zk-recipes-bench -- --workloads keys64x4,fresh-keys,keys-left \
        --no-java\n  \
        cargo run --release -p zk-recipes-bench -- --workloads keys-memory --keys 1000000"
)]
pub struct Args {
    /// Also write the JSON report to PATH, and its plots next to it (`{stem}-cycles.svg`,
    /// `{stem}-acquire.svg`, `{stem}-handoff.svg`).
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,

    /// Measure nothing: draw the plots of an earlier JSON report, next to it.
    #[arg(long, value_name = "PATH")]
    pub plot_from: Option<PathBuf>,

    /// Measurement window of each workload, in seconds.
    #[arg(
        long,
        value_name = "SECS",
        env = "BENCH_MEASURE_SECS",
        default_value = "5",
        value_parser = parse_secs
    )]
    pub measure: Duration,

    /// Warm-up before each measurement window (sessions, first nodes), in seconds.
    #[arg(
        long,
        value_name = "SECS",
        env = "BENCH_WARMUP_SECS",
        default_value = "1",
        value_parser = parse_secs
    )]
    pub warmup: Duration,

    /// Rounds: each runs every workload's window for every library in turn (ours,
    /// Client::lock, Curator, then the next workload), who goes first rotating from round to
    /// round; each figure is the median over the rounds, shown with its spread (min-max), and the
    /// targets are judged on the medians.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 3,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub rounds: u32,

    /// Instead of the rounds: the hot-lock experiment, zk-recipes with this many waiters on
    /// one lock (comma-separated), each run on a fresh server of its own.
    #[arg(long, value_name = "N,...", value_delimiter = ',')]
    pub hot_lock: Vec<usize>,

    /// The hot-lock experiment: zk-recipes' waiters spread over this many sessions (each
    /// number a run of its own).
    #[arg(
        long,
        value_name = "S,...",
        value_delimiter = ',',
        default_value = "1,100"
    )]
    pub hot_sessions: Vec<usize>,

    /// The hot-lock experiment: Client::lock with this many waiters (one session).
    #[arg(
        long,
        value_name = "N,...",
        value_delimiter = ',',
        default_value = "1000,10000"
    )]
    pub hot_client_lock: Vec<usize>,

    /// Waiters on the one lock of the memory / wake-up workload.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub waiters: usize,

    /// Never-seen keys each library locks and releases one after another in each round's
    /// fresh-keys window (then locks again at once, for the relocked figures). At most 4,096
    /// for the relock to find every key in ZkLockSpace's memory of recent keys.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 500,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub fresh_keys: u64,

    /// Distinct keys the keys-memory workload locks and releases one after another, once per
    /// run, in a child process (RSS after the first 1,000 and after all of them; 1 to 3 ms per
    /// key).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 100_000,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub keys: u64,

    /// Skip the Curator peer (no Java).
    #[arg(long)]
    pub no_java: bool,

    /// Keep the server's data and transaction log on a tmpfs instead of a volume: a write then
    /// waits for no disk, which is not how a production server runs but shows the clients'
    /// own costs (no effect with --connect).
    #[arg(long)]
    pub data_in_memory: bool,

    /// Only these libraries (comma-separated); all by default.
    #[arg(long, value_name = "LIBS", value_delimiter = ',', value_enum)]
    pub only: Vec<Peer>,

    /// Only these workloads (comma-separated); all by default.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_enum)]
    pub workloads: Vec<Workload>,

    /// Use this ZooKeeper ensemble instead of starting a container.
    #[arg(long, value_name = "HOST:PORT[,...]", env = "ZK_CONNECT")]
    pub connect: Option<String>,

    /// Internal: run the waiters workload of this library in this (child) process.
    #[arg(long, value_name = "LIB", hide = true, value_enum)]
    pub child_waiters: Option<Peer>,

    /// Internal: run the keys-memory workload in this (child) process.
    #[arg(long, hide = true)]
    pub child_keys: bool,

    /// Internal (child): the lock path.
    #[arg(long, hide = true)]
    pub path: Option<String>,
}

/// A library under test, as `--only` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Peer {
    /// zk-recipes' ZkMutex, ZkLockSpace and ZkLeaderElection
    #[value(name = "zk-recipes")]
    ZkRecipes,
    /// zookeeper-client's Client::lock
    #[value(name = "client-lock")]
    ClientLock,
    /// Apache Curator's InterProcessMutex and LeaderLatch (Java)
    #[value(name = "curator")]
    Curator,
}

/// A workload, as `--workloads` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Workload {
    /// one contender on one session
    #[value(name = "uncontended")]
    Uncontended,
    /// 8 contenders on one lock, each on its own session
    #[value(name = "contended8")]
    Contended8,
    /// 64 locks x 4 contenders (4 sessions)
    #[value(name = "locks64x4")]
    Locks64x4,
    /// 64 keys of one lock space x 4 contenders (4 sessions): ZkLockSpace, Client::lock with
    /// its key directories made on demand
    #[value(name = "keys64x4")]
    Keys64x4,
    /// never-seen keys locked one after another on one session, then locked again at once
    #[value(name = "fresh-keys")]
    FreshKeys,
    /// many waiters on one lock and one session, in a child process
    #[value(name = "waiters")]
    Waiters,
    /// leader handover between two sessions (ZkLeaderElection, Curator's LeaderLatch)
    #[value(name = "handover")]
    Handover,
    /// once per run: znodes left per key after the container reaper ran (own server)
    #[value(name = "keys-left")]
    KeysLeft,
    /// once per run: client RSS over --keys distinct keys, in a child process (own server)
    #[value(name = "keys-memory")]
    KeysMemory,
}

impl Peer {
    /// Every library, in the order of the table's columns.
    pub const ALL: [Peer; 3] = [Peer::ZkRecipes, Peer::ClientLock, Peer::Curator];

    /// The Rust library it names (Curator is none).
    pub fn lib(self) -> Option<Lib> {
        match self {
            Peer::ZkRecipes => Some(Lib::Ours),
            Peer::ClientLock => Some(Lib::ClientLock),
            Peer::Curator => None,
        }
    }

    pub fn key(self) -> &'static str {
        match self {
            Peer::ZkRecipes => "zk-recipes",
            Peer::ClientLock => "client-lock",
            Peer::Curator => "curator",
        }
    }

    /// Its column heading.
    pub fn title(self) -> &'static str {
        match self {
            Peer::ZkRecipes => "zk-recipes",
            Peer::ClientLock => "Client::lock",
            Peer::Curator => "Curator",
        }
    }
}

impl Workload {
    /// Every workload of the rounds, in the order a round runs them.
    pub const ALL: [Workload; 7] = [
        Workload::Uncontended,
        Workload::Contended8,
        Workload::Locks64x4,
        Workload::Keys64x4,
        Workload::FreshKeys,
        Workload::Handover,
        Workload::Waiters,
    ];

    pub fn key(self) -> &'static str {
        match self {
            Workload::Uncontended => "uncontended",
            Workload::Contended8 => "contended8",
            Workload::Locks64x4 => "locks64x4",
            Workload::Keys64x4 => "keys64x4",
            Workload::FreshKeys => "fresh-keys",
            Workload::Waiters => "waiters",
            Workload::Handover => "handover",
            Workload::KeysLeft => "keys-left",
            Workload::KeysMemory => "keys-memory",
        }
    }
}

impl Args {
    /// The ensemble of `--connect` / `ZK_CONNECT`, when one is given.
    pub fn external(&self) -> Option<String> {
        self.connect
            .as_deref()
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_owned)
    }

    /// Whether `peer` is to be measured.
    pub fn runs(&self, peer: Peer) -> bool {
        self.only.is_empty() || self.only.contains(&peer)
    }

    /// Whether `workload` is to be run.
    pub fn runs_workload(&self, workload: Workload) -> bool {
        self.workloads.is_empty() || self.workloads.contains(&workload)
    }
}

/// A non-negative number of seconds.
fn parse_secs(value: &str) -> Result<Duration, String> {
    let secs: f64 = value
        .trim()
        .parse()
        .map_err(|_| format!("not a number of seconds: {value:?}"))?;
    Duration::try_from_secs_f64(secs).map_err(|_| format!("not a number of seconds: {value:?}"))
}
