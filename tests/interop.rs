//! Interoperability with Apache Curator: a Java worker on `InterProcessMutex` and Rust workers on
//! `ZkMutex` share one lock path and exclude each other.
//!
//! The Java worker is `examples/bench-peers/CuratorInterop.java`, compiled with `javac` against
//! Debian's Curator jars in /usr/share/java (`apt-get install -y --no-install-recommends
//! openjdk-17-jdk-headless libcurator-recipes-java libcurator-framework-java`). Without `javac`
//! or the jars the test prints why and passes without running.

mod support;

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::{contenders, within, Zk};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use zk_recipes::{FencingToken, ZkMutex};
use zk_testcontainers::scaled;
use zookeeper_client as zkc;

/// The lock path both sides use (created persistent by the test, so Curator creates nothing).
const ROOT: &str = "/interop/lock";
/// The shared "resource": an ephemeral node each holder creates on entry and deletes on exit.
const INSIDE: &str = "/interop-inside";
/// Acquisitions by the Java worker, and by each of the two Rust workers.
const ROUNDS: usize = 40;
const RUST_WORKERS: usize = 2;
/// How long each holder stays inside.
const HOLD: Duration = Duration::from_millis(2);
/// The anchor this library keeps under each root.
const ANCHOR: &str = "~zk-recipes-anchor";

/// The jars the Java peers need (in /usr/share/java, from Debian's packages): one list for
/// the benchmark and the Rust/Curator interop test.
const CURATOR_JARS: &str = include_str!("../examples/bench-peers/classpath.txt");

/// Compiles `CuratorInterop.java` into `out`; the classpath to run it with, or why it cannot run.
async fn compile_java(out: &Path) -> Result<String, String> {
    let jars = Path::new("/usr/share/java");
    let mut classpath = vec![out.display().to_string()];
    for jar in CURATOR_JARS.lines() {
        let path = jars.join(format!("{jar}.jar"));
        if !path.exists() {
            return Err(format!(
                "{} missing (apt-get install libcurator-recipes-java libcurator-framework-java)",
                path.display()
            ));
        }
        classpath.push(path.display().to_string());
    }
    let classpath = classpath.join(":");
    let source =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/bench-peers/CuratorInterop.java");
    let javac = tokio::process::Command::new("javac")
        .arg("-d")
        .arg(out)
        .arg("-cp")
        .arg(&classpath)
        .arg(&source)
        .output()
        .await;
    match javac {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!("no javac ({e})")),
        Err(e) => panic!("javac: {e}"),
        Ok(o) if !o.status.success() => panic!(
            "javac failed on {}: {}",
            source.display(),
            String::from_utf8_lossy(&o.stderr)
        ),
        Ok(_) => Ok(classpath),
    }
}

/// What the Java worker printed, in order.
#[derive(Debug, PartialEq, Eq)]
enum Marker {
    In(usize),
    Out(usize),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_and_curator_workers_exclude_each_other() {
    let classes = tempfile::tempdir().unwrap();
    let classpath = match compile_java(classes.path()).await {
        Ok(classpath) => classpath,
        Err(why) => {
            println!("not run: {why}");
            return;
        }
    };

    let zk = Zk::start("interop").await;
    let raw = zk.raw().await;
    let persistent = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    raw.create("/interop", &[], &persistent).await.unwrap();
    raw.create(ROOT, &[], &persistent).await.unwrap();

    // The Java worker: started first, as the JVM takes a while; the Rust workers start once it
    // says it is connected, so that both sides contend for the whole run.
    let timeout = scaled(Duration::from_secs(15));
    let mut java = tokio::process::Command::new("java")
        .arg("-cp")
        .arg(&classpath)
        .arg("CuratorInterop")
        .args(["--connect", &zk.connect, "--root", ROOT, "--inside", INSIDE])
        .args(["--rounds", &ROUNDS.to_string()])
        .args(["--hold-ms", &HOLD.as_millis().to_string()])
        .args(["--timeout-ms", &timeout.as_millis().to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("java");
    let mut stderr = java.stderr.take().unwrap();
    let stderr = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text).await;
        text
    });
    let mut lines = BufReader::new(java.stdout.take().unwrap()).lines();
    let ready = within("the Java worker to connect", 30, lines.next_line()).await;
    assert_eq!(
        ready.unwrap().as_deref(),
        Some("JAVA READY"),
        "the Java worker did not start; stderr: {}",
        stderr.await.unwrap()
    );
    let java_out = tokio::spawn(async move {
        let mut markers = Vec::new();
        let mut entries = Vec::new();
        let mut rest = Vec::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            let mut words = line.split_whitespace();
            match (words.next(), words.next(), words.next()) {
                (Some("JAVA"), Some("IN"), Some(t)) => {
                    entries.push(Instant::now());
                    markers.push(Marker::In(t.parse().unwrap()))
                }
                (Some("JAVA"), Some("OUT"), Some(t)) => {
                    markers.push(Marker::Out(t.parse().unwrap()))
                }
                _ => rest.push(line),
            }
        }
        (markers, entries, rest)
    });

    // The Rust workers, each with a session of its own, checking exclusion through the same
    // ephemeral node (created with that session's own raw client).
    let grants: Arc<Mutex<Vec<FencingToken>>> = Arc::default();
    let mut tasks = Vec::new();
    let rust_start = Instant::now();
    for _ in 0..RUST_WORKERS {
        let session = zk.session().await;
        let check = zk.raw().await;
        let grants = grants.clone();
        tasks.push(tokio::spawn(async move {
            let ephemeral = zkc::CreateMode::Ephemeral.with_acls(zkc::Acls::anyone_all());
            let mutex = ZkMutex::new(&session, ROOT).unwrap();
            for round in 0..ROUNDS {
                let guard = mutex.lock().await.unwrap();
                match check.create(INSIDE, &[], &ephemeral).await {
                    Ok(_) => {}
                    Err(zkc::Error::NodeExists) => {
                        panic!("round {round}: Rust got the lock while another holder was inside")
                    }
                    Err(e) => panic!("create {INSIDE}: {e}"),
                }
                grants.lock().unwrap().push(guard.token());
                tokio::time::sleep(HOLD).await;
                check.delete(INSIDE, None).await.unwrap();
                guard.release().await.unwrap();
            }
            session.close().await;
        }));
    }
    within("the Rust workers", 15, async {
        for t in tasks {
            t.await.unwrap();
        }
    })
    .await;
    let rust_end = Instant::now();
    let status = within("the Java worker to exit", 15, java.wait())
        .await
        .unwrap();
    let (markers, entries, rest) = java_out.await.unwrap();
    let stderr = stderr.await.unwrap();
    assert!(
        status.success(),
        "the Java worker failed ({status}): stdout {rest:?}, stderr: {stderr}"
    );

    // Java: every round entered and left in order, and it finished.
    let expected: Vec<Marker> = (0..ROUNDS)
        .flat_map(|t| [Marker::In(t), Marker::Out(t)])
        .collect();
    assert_eq!(markers, expected, "Java's IN/OUT markers");
    assert_eq!(rest, vec![format!("JAVA DONE {ROUNDS}")]);

    // Rust: every round granted, tokens strictly increasing in grant order.
    let grants = grants.lock().unwrap().clone();
    assert_eq!(grants.len(), RUST_WORKERS * ROUNDS);
    assert!(
        grants.windows(2).all(|w| w[0] < w[1]),
        "tokens in grant order must strictly increase: {grants:?}"
    );

    // The two sides really contended: Java entered while the Rust workers were running.
    let java_during_rust = entries
        .iter()
        .filter(|&&t| (rust_start..rust_end).contains(&t))
        .count();
    println!(
        "Java entered {java_during_rust} of {ROUNDS} times while the Rust workers ran ({:?})",
        rust_end - rust_start
    );
    assert!(
        java_during_rust > 0,
        "no Java acquisition while the Rust workers ran"
    );

    // Nothing left behind: no holder inside, no lock node; only our anchor under the root.
    assert!(raw.check_stat(INSIDE).await.unwrap().is_none());
    assert_eq!(contenders(&raw, ROOT).await, Vec::<String>::new());
    assert_eq!(raw.list_children(ROOT).await.unwrap(), vec![ANCHOR]);
}
