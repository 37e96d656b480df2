//! The Curator peer: `bench/java/CuratorBench.java`, compiled and run as a
//! subprocess that prints JSON.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

use serde::Deserialize;

use crate::args::Args;
use crate::measure::Latency;
use crate::throughput::Figures;

/// The Curator peer's figures, or why there are none.
#[derive(Clone, Debug, Default)]
pub struct CuratorRun {
    pub skipped: Option<String>,
    pub version: Option<String>,
    pub workloads: BTreeMap<String, Figures>,
}

/// The jars the Java peers need (in /usr/share/java, from Debian's packages): one list for
/// the benchmark and the Rust/Curator interop test.
const CURATOR_JARS: &str = include_str!("../../examples/bench-peers/classpath.txt");

/// Compiles (when needed) and runs `CuratorBench.java`.
pub async fn run_curator(connect: &str, dir: &str, args: &Args) -> CuratorRun {
    let skip = |why: String| CuratorRun {
        skipped: Some(why),
        ..CuratorRun::default()
    };
    if !args.runs("curator") {
        return skip("skipped (--only)".into());
    }
    if args.no_java {
        return skip("skipped (--no-java)".into());
    }
    let java_workloads: Vec<&str> = ["uncontended", "contended8", "locks64x4"]
        .into_iter()
        .filter(|w| args.runs_workload(w))
        .collect();
    if java_workloads.is_empty() {
        return skip("skipped (--workloads)".into());
    }
    let jars = Path::new("/usr/share/java");
    let mut classpath = Vec::new();
    for jar in CURATOR_JARS.lines() {
        let path = jars.join(format!("{jar}.jar"));
        if !path.exists() {
            return skip(format!(
                "not installed ({} missing; bench/run.sh installs \
                 libcurator-recipes-java)",
                path.display()
            ));
        }
        classpath.push(path.display().to_string());
    }
    let version = std::fs::read_link(jars.join("curator-recipes-5.4.0.jar"))
        .ok()
        .map(|_| "5.4.0".to_owned())
        .or_else(|| curator_version(jars));
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("java/CuratorBench.java");
    let out = match std::env::current_exe() {
        Ok(exe) => exe.with_file_name("bench-java"),
        Err(e) => return skip(format!("current_exe: {e}")),
    };
    let class = out.join("CuratorBench.class");
    let stale = match (modified(&source), modified(&class)) {
        (Some(src), Some(cls)) => src > cls,
        _ => true,
    };
    if stale {
        let _ = std::fs::create_dir_all(&out);
        let javac = tokio::process::Command::new("javac")
            .arg("-d")
            .arg(&out)
            .arg("-cp")
            .arg(classpath.join(":"))
            .arg(&source)
            .output()
            .await;
        match javac {
            Err(e) => return skip(format!("not run: javac unavailable ({e})")),
            Ok(o) if !o.status.success() => {
                return skip(format!(
                    "not run: javac failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ))
            }
            Ok(_) => {}
        }
    }
    classpath.insert(0, out.display().to_string());
    let child = tokio::process::Command::new("java")
        .arg("-cp")
        .arg(classpath.join(":"))
        .arg("CuratorBench")
        .args(["--connect", connect, "--root", dir])
        .args(["--warmup-ms", &args.warmup.as_millis().to_string()])
        .args(["--measure-ms", &args.measure.as_millis().to_string()])
        .args(["--jit-warmup-ms", "2000"])
        .args(["--workloads", &java_workloads.join(",")])
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(Duration::from_secs(300), child).await {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => return skip(format!("not run: java unavailable ({e})")),
        Err(_) => return skip("the Java peer did not finish within 300 s".into()),
    };
    let mut run = CuratorRun {
        version,
        ..CuratorRun::default()
    };
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        if !line.starts_with('{') {
            continue;
        }
        match serde_json::from_str::<JavaWindow>(line) {
            Ok(window) => {
                run.workloads
                    .insert(window.workload.clone(), window.figures());
            }
            Err(e) => eprintln!("bench: unreadable line from the Java peer ({e}): {line}"),
        }
    }
    if run.workloads.is_empty() {
        return skip(format!(
            "the Java peer printed no results: {}",
            String::from_utf8_lossy(&output.stderr)
                .lines()
                .take(5)
                .collect::<Vec<_>>()
                .join(" / ")
        ));
    }
    run
}

/// One workload's figures as the Java peer prints them (a percentile is -1 without samples).
#[derive(Deserialize)]
struct JavaWindow {
    workload: String,
    cycles: u64,
    seconds: f64,
    acquire_p50_us: f64,
    acquire_p99_us: f64,
    acquire_samples: usize,
    handoff_p50_us: f64,
    handoff_p99_us: f64,
    handoff_samples: usize,
    cpu_ms: f64,
    log_syncs: Option<i64>,
    log_writes: Option<i64>,
    violations: u64,
    error: Option<String>,
}

impl JavaWindow {
    fn figures(&self) -> Figures {
        let latency = |p50: f64, p99: f64, samples| Latency {
            p50: (p50 >= 0.0).then_some(p50),
            p99: (p99 >= 0.0).then_some(p99),
            samples,
        };
        Figures {
            cycles: self.cycles,
            seconds: self.seconds,
            acquire: latency(
                self.acquire_p50_us,
                self.acquire_p99_us,
                self.acquire_samples,
            ),
            handoff: latency(
                self.handoff_p50_us,
                self.handoff_p99_us,
                self.handoff_samples,
            ),
            cpu_ms: self.cpu_ms,
            log: self
                .log_syncs
                .zip(self.log_writes)
                .and_then(|(s, w)| Some((u64::try_from(s).ok()?, u64::try_from(w).ok()?))),
            violations: self.violations,
            error: self.error.clone(),
        }
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).ok()?.modified().ok()
}

/// Curator's version from a versioned jar name next to the unversioned one.
fn curator_version(jars: &Path) -> Option<String> {
    std::fs::read_dir(jars).ok()?.find_map(|e| {
        let name = e.ok()?.file_name().into_string().ok()?;
        let v = name
            .strip_prefix("curator-recipes-")?
            .strip_suffix(".jar")?;
        Some(v.to_owned())
    })
}
