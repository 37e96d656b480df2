//! Measuring in this process: the handoff clock, client CPU time, memory, latency percentiles.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Nanoseconds since the first call: the process-wide clock of handoff timestamps.
pub fn now_ns() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64 + 1
}

/// Client CPU time of this process (user + system, every thread), from `/proc/self/stat`.
pub fn cpu_time() -> Duration {
    static TICKS: OnceLock<f64> = OnceLock::new();
    let ticks = *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100.0)
    });
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) in parentheses: utime is the 14th
    // field of the line, the 12th after ")".
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Duration::from_secs_f64((field(11) + field(12)) / ticks)
}

/// Resident set size of this process, in KiB (`VmRSS` of `/proc/self/status`).
pub fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Nearest-rank percentile of nanosecond samples, in microseconds (`None` without samples).
/// The Java peer uses the same rule.
fn percentile_us(sorted: &[u64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).max(1);
    Some(sorted[rank - 1] as f64 / 1000.0)
}

/// The points of a latency's distribution kept for its CDF plot (`quantiles_us`): 1 % to
/// 99.9 %. The Java peer prints the same points (`CuratorBench.QUANTILES`).
pub const QUANTILES: [f64; 14] = [
    0.01, 0.05, 0.10, 0.20, 0.30, 0.40, 0.50, 0.60, 0.70, 0.80, 0.90, 0.95, 0.99, 0.999,
];

/// Latency summary (µs).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Latency {
    #[serde(rename = "p50_us")]
    pub p50: Option<f64>,
    #[serde(rename = "p99_us")]
    pub p99: Option<f64>,
    pub samples: usize,
    /// The latency at each of [`QUANTILES`] (µs), for the CDF plots; empty without samples
    /// (and in reports from before 2026-12-07).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quantiles_us: Vec<f64>,
}

impl Latency {
    pub fn of(mut samples: Vec<u64>) -> Latency {
        samples.sort_unstable();
        Latency {
            p50: percentile_us(&samples, 0.50),
            p99: percentile_us(&samples, 0.99),
            samples: samples.len(),
            quantiles_us: QUANTILES
                .iter()
                .filter_map(|&q| percentile_us(&samples, q))
                .collect(),
        }
    }
}
