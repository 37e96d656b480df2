//! Curator's side: `bench/java/CacheBench.java` (compiled with `javac` against Debian's jars),
//! one process for the run, one JSON line per command.

use std::path::Path;
use std::process::Stdio;

use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::{quantile, Round, ROOT};

const JARS: &str = include_str!("../../../examples/bench-peers/classpath.txt");

pub struct CuratorPeer {
    _child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

#[derive(Deserialize)]
struct View {
    ms: f64,
    nodes: usize,
    heap_bytes: f64,
}

#[derive(Deserialize)]
struct Events {
    event_us: Vec<f64>,
    write_us: Vec<f64>,
}

impl CuratorPeer {
    /// Compiles and starts the peer; `Err` says why there is no Curator column.
    pub async fn start(connect: &str) -> Result<CuratorPeer, String> {
        let jars = Path::new("/usr/share/java");
        let mut classpath = Vec::new();
        for jar in JARS.lines() {
            let path = jars.join(format!("{jar}.jar"));
            if !path.exists() {
                return Err(format!("not installed ({} missing)", path.display()));
            }
            classpath.push(path.display().to_string());
        }
        let out = std::env::current_exe()
            .map_err(|e| format!("current_exe: {e}"))?
            .with_file_name("cache-bench-java");
        let _ = std::fs::create_dir_all(&out);
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("java/CacheBench.java");
        let javac = tokio::process::Command::new("javac")
            .arg("-d")
            .arg(&out)
            .arg("-cp")
            .arg(classpath.join(":"))
            .arg(&source)
            .output()
            .await
            .map_err(|e| format!("not run: javac unavailable ({e})"))?;
        if !javac.status.success() {
            return Err(format!(
                "javac failed: {}",
                String::from_utf8_lossy(&javac.stderr).trim()
            ));
        }
        classpath.insert(0, out.display().to_string());
        let mut child = tokio::process::Command::new("java")
            .args(["-Xmx1g", "-XX:+UseSerialGC", "-cp"])
            .arg(classpath.join(":"))
            .arg("CacheBench")
            .arg(connect)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("not run: java unavailable ({e})"))?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = BufReader::new(child.stdout.take().expect("piped")).lines();
        Ok(CuratorPeer {
            _child: child,
            stdin,
            stdout,
        })
    }

    async fn ask(&mut self, command: &str) -> Result<String, String> {
        self.stdin
            .write_all(format!("{command}\n").as_bytes())
            .await
            .map_err(|e| format!("peer gone: {e}"))?;
        match tokio::time::timeout(std::time::Duration::from_secs(120), self.stdout.next_line())
            .await
        {
            Ok(Ok(Some(line))) => Ok(line),
            _ => Err("the peer did not answer".into()),
        }
    }
}

pub async fn round(peer: &mut Result<CuratorPeer, String>, paths: &[String]) -> Round {
    let mut out = Round::default();
    let Ok(java) = peer else {
        return out;
    };
    let view: View = match java
        .ask(&format!("view {ROOT}"))
        .await
        .and_then(|l| serde_json::from_str(&l).map_err(|e| format!("{e}: {l}")))
    {
        Ok(view) => view,
        Err(e) => {
            eprintln!("cache-bench: Curator: {e}");
            *peer = Err(e);
            return out;
        }
    };
    out.view_ms = Some(view.ms);
    out.nodes = Some(view.nodes);
    out.bytes_per_node = Some(view.heap_bytes / view.nodes.max(1) as f64);
    let events: Events = match java
        .ask(&format!("events {}", paths.join(" ")))
        .await
        .and_then(|l| serde_json::from_str(&l).map_err(|e| format!("{e}: {l}")))
    {
        Ok(events) => events,
        Err(e) => {
            eprintln!("cache-bench: Curator: {e}");
            *peer = Err(e);
            return out;
        }
    };
    let (mut e, mut w) = (events.event_us, events.write_us);
    out.event_p50_us = quantile(&mut e, 0.5);
    out.event_p99_us = quantile(&mut e, 0.99);
    out.write_p50_us = quantile(&mut w, 0.5);
    out
}
