//! The Curator peer: `bench/java/CuratorBench.java`, compiled with `javac` and run as one
//! subprocess for the whole run, which takes one window per command on its stdin and answers
//! each with one line of JSON (so that its windows interleave with the Rust libraries').

use std::collections::VecDeque;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::args::{Args, Peer, Workload};
use crate::handover::HandoverFigures;
use crate::measure::Latency;
use crate::throughput::Figures;

/// The jars the Java peers need (in /usr/share/java, from Debian's packages): one list for
/// the benchmark and the Rust/Curator interop test.
const CURATOR_JARS: &str = include_str!("../../examples/bench-peers/classpath.txt");

/// How long the JVM churns before its first window, so that the JIT has compiled the hot paths.
const JIT_WARMUP: Duration = Duration::from_secs(2);

/// The workloads the Java peer has.
pub fn supports(workload: Workload) -> bool {
    matches!(
        workload,
        Workload::Uncontended | Workload::Contended8 | Workload::Locks64x4 | Workload::Handover
    )
}

/// The running Java peer.
pub struct CuratorPeer {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    /// Its last lines on stderr, for the report when it fails.
    stderr: Arc<Mutex<VecDeque<String>>>,
    /// Why it can take no more windows.
    dead: Option<String>,
    /// Curator's version, from the jars' names.
    pub version: Option<String>,
}

/// Compiles (when needed) and starts `CuratorBench.java`, and waits until its JIT warm-up is
/// done; `Err` says why there is no Curator column.
pub async fn start(connect: &str, root: &str, args: &Args) -> Result<CuratorPeer, String> {
    if !args.runs(Peer::Curator) {
        return Err("skipped (--only)".into());
    }
    if args.no_java {
        return Err("skipped (--no-java)".into());
    }
    if !Workload::ALL
        .into_iter()
        .any(|w| supports(w) && args.runs_workload(w))
    {
        return Err("skipped (--workloads)".into());
    }
    let jars = Path::new("/usr/share/java");
    let mut classpath = Vec::new();
    for jar in CURATOR_JARS.lines() {
        let path = jars.join(format!("{jar}.jar"));
        if !path.exists() {
            return Err(format!(
                "not installed ({} missing; bench/run.sh installs libcurator-recipes-java)",
                path.display()
            ));
        }
        classpath.push(path.display().to_string());
    }
    let version = curator_version(jars);
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("java/CuratorBench.java");
    let out = std::env::current_exe()
        .map_err(|e| format!("current_exe: {e}"))?
        .with_file_name("bench-java");
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
            Err(e) => return Err(format!("not run: javac unavailable ({e})")),
            Ok(o) if !o.status.success() => {
                return Err(format!(
                    "not run: javac failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ))
            }
            Ok(_) => {}
        }
    }
    classpath.insert(0, out.display().to_string());
    let mut child = tokio::process::Command::new("java")
        .arg("-cp")
        .arg(classpath.join(":"))
        .arg("CuratorBench")
        .args(["--connect", connect, "--root", root])
        .args(["--jit-warmup-ms", &JIT_WARMUP.as_millis().to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("not run: java unavailable ({e})"))?;
    let stdin = child.stdin.take().expect("piped stdin");
    let stdout = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
    let stderr = Arc::new(Mutex::new(VecDeque::new()));
    let mut errors = BufReader::new(child.stderr.take().expect("piped stderr")).lines();
    let kept = stderr.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = errors.next_line().await {
            let mut kept = kept.lock().unwrap();
            if kept.len() == 5 {
                kept.pop_front();
            }
            kept.push_back(line);
        }
    });
    let mut peer = CuratorPeer {
        child,
        stdin,
        stdout,
        stderr,
        dead: None,
        version,
    };
    let ready = peer.answer(JIT_WARMUP + Duration::from_secs(60)).await?;
    if !ready.contains("\"ready\"") {
        return Err(format!("the Java peer did not start: {ready}"));
    }
    Ok(peer)
}

impl CuratorPeer {
    /// The next line the peer prints, within `timeout`.
    async fn answer(&mut self, timeout: Duration) -> Result<String, String> {
        let line = tokio::time::timeout(timeout, async {
            loop {
                match self.stdout.next_line().await {
                    Ok(Some(line)) if line.starts_with('{') => return Ok(line),
                    Ok(Some(_)) => continue,
                    Ok(None) => return Err("the Java peer exited".to_owned()),
                    Err(e) => return Err(format!("reading the Java peer: {e}")),
                }
            }
        })
        .await
        .unwrap_or_else(|_| Err(format!("the Java peer did not answer within {timeout:?}")));
        line.map_err(|e| {
            let stderr = self.stderr.lock().unwrap();
            if stderr.is_empty() {
                e
            } else {
                format!("{e}: {}", Vec::from(stderr.clone()).join(" / "))
            }
        })
    }

    /// One window of `workload` with its nodes under `path`: the peer's answer.
    async fn window(
        &mut self,
        workload: Workload,
        path: &str,
        warmup: Duration,
        measure: Duration,
    ) -> Result<JavaWindow, String> {
        if let Some(why) = &self.dead {
            return Err(why.clone());
        }
        let command = format!(
            "run {} {path} {} {}\n",
            workload.key(),
            warmup.as_millis(),
            measure.as_millis()
        );
        let answer = match self.stdin.write_all(command.as_bytes()).await {
            Err(e) => Err(format!("writing to the Java peer: {e}")),
            Ok(()) => {
                self.answer(warmup + measure + Duration::from_secs(120))
                    .await
            }
        };
        let line = answer.inspect_err(|e| self.dead = Some(e.clone()))?;
        serde_json::from_str::<JavaWindow>(&line)
            .map_err(|e| format!("unreadable line from the Java peer ({e}): {line}"))
    }

    /// One window of a lock workload (`InterProcessMutex`).
    pub async fn locks(
        &mut self,
        workload: Workload,
        path: &str,
        warmup: Duration,
        measure: Duration,
    ) -> Figures {
        match self.window(workload, path, warmup, measure).await {
            Ok(window) => window.figures(),
            Err(e) => Figures {
                error: Some(e),
                ..Figures::default()
            },
        }
    }

    /// One window of leader handovers (`LeaderLatch`).
    pub async fn handover(
        &mut self,
        path: &str,
        warmup: Duration,
        measure: Duration,
    ) -> HandoverFigures {
        match self.window(Workload::Handover, path, warmup, measure).await {
            Ok(window) => window.handover(),
            Err(e) => HandoverFigures {
                error: Some(e),
                ..HandoverFigures::default()
            },
        }
    }

    /// Asks the peer to exit, and makes sure it does.
    pub async fn quit(mut self) {
        let _ = self.stdin.write_all(b"quit\n").await;
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// One window's figures as the Java peer prints them (a percentile is -1 without samples; an
/// error line may carry nothing else).
#[derive(Deserialize, Default)]
#[serde(default)]
struct JavaWindow {
    cycles: u64,
    seconds: f64,
    acquire_p50_us: Option<f64>,
    acquire_p99_us: Option<f64>,
    acquire_samples: usize,
    handoff_p50_us: Option<f64>,
    handoff_p99_us: Option<f64>,
    handoff_samples: usize,
    acquire_q_us: Vec<f64>,
    handoff_q_us: Vec<f64>,
    cpu_ms: f64,
    log_syncs: Option<i64>,
    log_writes: Option<i64>,
    log_requests: Option<i64>,
    log_replies: Option<i64>,
    violations: u64,
    handovers: usize,
    handover_p50_us: Option<f64>,
    handover_p99_us: Option<f64>,
    handover_samples: usize,
    handover_q_us: Vec<f64>,
    error: Option<String>,
}

/// A latency as the Java peer prints it.
fn latency(p50: Option<f64>, p99: Option<f64>, samples: usize, quantiles: &[f64]) -> Latency {
    Latency {
        p50: p50.filter(|v| *v >= 0.0),
        p99: p99.filter(|v| *v >= 0.0),
        samples,
        quantiles_us: quantiles.to_vec(),
    }
}

impl JavaWindow {
    fn handover(&self) -> HandoverFigures {
        HandoverFigures {
            handovers: self.handovers,
            seconds: self.seconds,
            handover: latency(
                self.handover_p50_us,
                self.handover_p99_us,
                self.handover_samples,
                &self.handover_q_us,
            ),
            error: self.error.clone(),
        }
    }

    fn figures(&self) -> Figures {
        Figures {
            cycles: self.cycles,
            seconds: self.seconds,
            acquire: latency(
                self.acquire_p50_us,
                self.acquire_p99_us,
                self.acquire_samples,
                &self.acquire_q_us,
            ),
            handoff: latency(
                self.handoff_p50_us,
                self.handoff_p99_us,
                self.handoff_samples,
                &self.handoff_q_us,
            ),
            cpu_ms: self.cpu_ms,
            log: self
                .log_syncs
                .zip(self.log_writes)
                .and_then(|(s, w)| Some((u64::try_from(s).ok()?, u64::try_from(w).ok()?))),
            packets: self
                .log_requests
                .zip(self.log_replies)
                .and_then(|(r, s)| Some((u64::try_from(r).ok()?, u64::try_from(s).ok()?))),
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
