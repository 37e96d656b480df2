//! The command line: flags, their environment-variable defaults, and the usage.

use std::path::PathBuf;
use std::time::Duration;

use crate::locks::Lib;

/// What the command line asks for.
#[derive(Clone, Debug)]
pub struct Args {
    /// Where to write the JSON report too.
    pub json: Option<PathBuf>,
    /// Measurement window of each throughput workload.
    pub measure: Duration,
    /// Warm-up before each window.
    pub warmup: Duration,
    /// Waiters of the memory / wake-up workload.
    pub waiters: usize,
    /// Skip the Curator peer.
    pub no_java: bool,
    /// The server keeps its data (and transaction log) in memory, not on a volume.
    pub data_in_memory: bool,
    /// Only these libraries (`zk-recipes`, `client-lock`, `curator`); all when empty.
    pub only: Vec<String>,
    /// Only these workloads (`uncontended`, `contended8`, `locks64x4`, `waiters`); all when
    /// empty.
    pub workloads: Vec<String>,
    /// Internal: run the waiters workload of this library in this (child) process.
    pub child: Option<Lib>,
    /// Internal (child): the connect string.
    pub connect: Option<String>,
    /// Internal (child): the lock path.
    pub path: Option<String>,
}

impl Args {
    pub fn parse() -> Args {
        let env_secs = |name: &str, default: f64| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(default)
        };
        let mut args = Args {
            json: None,
            measure: Duration::from_secs_f64(env_secs("BENCH_MEASURE_SECS", 5.0)),
            warmup: Duration::from_secs_f64(env_secs("BENCH_WARMUP_SECS", 1.0)),
            waiters: 1000,
            no_java: false,
            data_in_memory: false,
            only: Vec::new(),
            workloads: Vec::new(),
            child: None,
            connect: None,
            path: None,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let mut value = || {
                it.next()
                    .unwrap_or_else(|| usage(&format!("{flag} needs a value")))
            };
            match flag.as_str() {
                "--json" => args.json = Some(PathBuf::from(value())),
                "--measure" => args.measure = Duration::from_secs_f64(parse(&value(), &flag)),
                "--warmup" => args.warmup = Duration::from_secs_f64(parse(&value(), &flag)),
                "--waiters" => args.waiters = parse(&value(), &flag),
                "--no-java" => args.no_java = true,
                "--data-in-memory" => args.data_in_memory = true,
                "--only" => args.only = value().split(',').map(str::to_owned).collect(),
                "--workloads" => args.workloads = value().split(',').map(str::to_owned).collect(),
                "--child-waiters" => {
                    args.child = Some(match value().as_str() {
                        "zk-recipes" => Lib::Ours,
                        "client-lock" => Lib::ClientLock,
                        other => usage(&format!("unknown library {other}")),
                    })
                }
                "--connect" => args.connect = Some(value()),
                "--path" => args.path = Some(value()),
                "-h" | "--help" => usage(""),
                other => usage(&format!("unknown argument {other}")),
            }
        }
        args
    }
}

impl Args {
    /// Whether the library named `key` is to be measured.
    pub fn runs(&self, key: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == key)
    }

    /// Whether the workload named `key` is to be run.
    pub fn runs_workload(&self, key: &str) -> bool {
        self.workloads.is_empty() || self.workloads.iter().any(|w| w == key)
    }
}

/// Parses a flag's value or exits with the usage.
fn parse<T: std::str::FromStr>(value: &str, flag: &str) -> T {
    value
        .parse()
        .unwrap_or_else(|_| usage(&format!("bad value {value:?} for {flag}")))
}

/// Prints the usage (and a complaint) and exits.
pub fn usage(complaint: &str) -> ! {
    if !complaint.is_empty() {
        eprintln!("bench: {complaint}");
    }
    eprintln!(
        "usage: cargo run --release -p zk-recipes-bench -- [--json PATH] [--measure SECS] \
         [--warmup SECS] [--waiters N] [--no-java] [--data-in-memory] [--only zk-recipes,client-lock,curator] \
         [--workloads uncontended,contended8,locks64x4,waiters]"
    );
    std::process::exit(2)
}
