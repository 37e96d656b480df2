//! Shared helpers of the integration tests: a server per test (or `ZK_CONNECT`), sessions in
//! a fresh chroot, a counter of the library's tracing events per test, and waits on ZooKeeper
//! events.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;
use zk_recipes::{Session, SessionOptions};
use zk_testcontainers::{chroot, scaled, test_server, TestZk};

pub mod bed;
pub mod history;
pub mod nemesis;
pub mod sockets;

/// A ZooKeeper for one test and a chroot of its own on it.
pub struct Zk {
    pub server: TestZk,
    /// `host:port/zk-tests/<name>-<unique>`.
    pub connect: String,
}

impl Zk {
    pub async fn start(name: &str) -> Zk {
        init_tracing();
        let server = test_server()
            .await
            .expect("a ZooKeeper server for the test");
        let connect = chroot(&server.connect_string(), name)
            .await
            .expect("a chroot");
        Zk { server, connect }
    }

    pub fn options(&self) -> SessionOptions {
        SessionOptions::new(self.connect.clone())
            .session_timeout(Duration::from_secs(4))
            .connection_timeout(scaled(Duration::from_secs(10)))
    }

    pub async fn session(&self) -> Session {
        Session::connect(self.options()).await.expect("session")
    }

    /// A raw client in the test's chroot, for checks made behind the library's back.
    pub async fn raw(&self) -> zookeeper_client::Client {
        zookeeper_client::Client::connect(&self.connect)
            .await
            .expect("raw client")
    }
}

/// Waits until `path` has exactly `n` contender children (the library's `~` anchor aside), on
/// watch events (no polling loop with sleeps).
pub async fn wait_children(client: &zookeeper_client::Client, path: &str, n: usize) {
    let wait = async {
        loop {
            match client.get_and_watch_children(path).await {
                Ok((children, _, watcher)) => {
                    if children.iter().filter(|c| !c.starts_with('~')).count() == n {
                        return;
                    }
                    watcher.changed().await;
                }
                Err(zookeeper_client::Error::NoNode) => {
                    let (stat, watcher) = client.check_and_watch_stat(path).await.expect("exists");
                    if stat.is_none() {
                        if n == 0 {
                            return;
                        }
                        watcher.changed().await;
                    }
                }
                Err(err) => panic!("list {path}: {err}"),
            }
        }
    };
    tokio::time::timeout(scaled(Duration::from_secs(30)), wait)
        .await
        .unwrap_or_else(|_| panic!("{path} never had {n} children"));
}

/// Runs this test binary again as a child process, running only the test `name` (a "mode"
/// test that does nothing without its environment), with `env` set. Killed when dropped.
pub fn spawn_self(name: &str, env: &[(&str, String)]) -> tokio::process::Child {
    tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// In a child's mode test: the session the parent asked for through `{prefix}_CONNECT` and
/// `{prefix}_TIMEOUT_MS` (see [`spawn_self`]); `None` when not run as a child.
pub async fn child_session(prefix: &str) -> Option<Session> {
    let connect = std::env::var(format!("{prefix}_CONNECT")).ok()?;
    let ms: u64 = std::env::var(format!("{prefix}_TIMEOUT_MS"))
        .unwrap()
        .parse()
        .unwrap();
    let options = SessionOptions::new(connect).session_timeout(Duration::from_millis(ms));
    Some(Session::connect(options).await.unwrap())
}

/// The contender nodes under `path`: its children but the library's `~` anchor.
pub async fn contenders(client: &zookeeper_client::Client, path: &str) -> Vec<String> {
    let children = client.list_children(path).await.expect("list children");
    children
        .into_iter()
        .filter(|c| !c.starts_with('~'))
        .collect()
}

/// Runs `fut` with the scaled default test timeout.
pub async fn within<T>(what: &str, secs: u64, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(scaled(Duration::from_secs(secs)), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out: {what}"))
}

/// Counts the library's tracing events by message, for tests that count wake-ups. Each test
/// that counts has a counter of its own (see [`counting_events`]).
#[derive(Clone)]
pub struct EventCounter(
    Arc<Mutex<HashMap<String, usize>>>,
    Arc<tokio::sync::watch::Sender<u64>>,
);

impl Default for EventCounter {
    fn default() -> Self {
        EventCounter(Arc::default(), Arc::new(tokio::sync::watch::channel(0).0))
    }
}

impl EventCounter {
    pub fn get(&self, message: &str) -> usize {
        self.0.lock().unwrap().get(message).copied().unwrap_or(0)
    }

    /// The sum of the counts of `messages`.
    pub fn sum(&self, messages: &[&str]) -> usize {
        messages.iter().map(|m| self.get(m)).sum()
    }

    /// Waits (on the events themselves) until `messages` have been counted `n` times in all.
    pub async fn wait_for_sum(&self, messages: &[&str], n: usize) {
        let mut rx = self.1.subscribe();
        within(&format!("{n} x {messages:?}"), 30, async {
            while self.sum(messages) < n {
                rx.changed().await.unwrap();
            }
        })
        .await;
    }

    /// Waits (on the events themselves) until `message` has been counted `n` times.
    pub async fn wait_for(&self, message: &str, n: usize) {
        let mut rx = self.1.subscribe();
        within(&format!("{n} x {message:?}"), 30, async {
            while self.get(message) < n {
                rx.changed().await.unwrap();
            }
        })
        .await;
    }

    fn record(&self, message: String) {
        self.add_owned(message, 1);
    }

    fn add(&self, key: &str, n: usize) {
        self.add_owned(key.to_owned(), n);
    }

    fn add_owned(&self, key: String, n: usize) {
        *self.0.lock().unwrap().entry(key).or_default() += n;
        self.1.send_modify(|n| *n += 1);
    }
}

/// The counter of the test running on this thread: the one [`counting_events`] made for it.
/// Anywhere else it panics: a process-wide count would also count the other tests of the
/// binary, which `cargo test` runs in the same process (nextest runs each in its own).
pub fn events() -> EventCounter {
    tracing::dispatcher::get_default(|d| d.downcast_ref::<CountLayer>().map(|c| c.0.clone()))
        .expect("support::events() counts only in a test run by support::counting_events")
}

thread_local! {
    /// A runtime thread's default subscriber, set when the thread starts and dropped when it
    /// stops (see [`counting_events`]).
    static RUNTIME_THREAD_SUBSCRIBER: std::cell::RefCell<Option<tracing::subscriber::DefaultGuard>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `test` as `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]` does, with a
/// subscriber of its own that [`events`] reads: the default subscriber of every thread of its
/// runtime (the test's own, the two workers, the blocking pool), so it sees the events of
/// the tasks the test and the library spawn, and only those, whether the binary's other tests
/// run in the same process (`cargo test`) or not (nextest). It counts every level of the
/// `zk_recipes` target, so a message moved between INFO, DEBUG and TRACE is still counted.
pub fn counting_events(test: impl std::future::Future<Output = ()>) {
    let subscriber = tracing_subscriber::registry().with(fmt_layer()).with(
        CountLayer(EventCounter::default()).with_filter(
            tracing_subscriber::filter::Targets::new()
                .with_target("zk_recipes", tracing::Level::TRACE),
        ),
    );
    let dispatch = tracing::Dispatch::new(subscriber);
    let for_threads = dispatch.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || {
            let guard = tracing::dispatcher::set_default(&for_threads);
            RUNTIME_THREAD_SUBSCRIBER.with(|s| *s.borrow_mut() = Some(guard));
        })
        .on_thread_stop(|| RUNTIME_THREAD_SUBSCRIBER.with(|s| drop(s.borrow_mut().take())))
        .build()
        .expect("a runtime for the test");
    tracing::dispatcher::with_default(&dispatch, || {
        runtime.block_on(test);
        drop(runtime); // its threads stop here, under the test's subscriber too
    });
}

struct CountLayer(EventCounter);

/// An event's message and its `children` field (the library's `"listed"` events carry how
/// many names a listing returned: counted as `"listed children"`).
struct MessageVisitor(Option<String>, Option<u64>);

impl Visit for MessageVisitor {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "children" {
            self.1 = Some(value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for CountLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut visitor = MessageVisitor(None, None);
        event.record(&mut visitor);
        if let (Some("listed"), Some(n)) = (visitor.0.as_deref(), visitor.1) {
            self.0.add("listed children", n as usize);
        }
        if let Some(message) = visitor.0 {
            self.0.record(message);
        }
    }
}

/// The library's events on the test's output, at the level `RUST_LOG` says (`warn` if unset).
fn fmt_layer<S>() -> impl Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    // zookeeper_client warns at every failed reconnect; a test that expires sessions or kills
    // servers makes hundreds of those lines, and a failing test's panic message comes after
    // all of them (CI's excerpt of the output then shows only the lines). RUST_LOG brings
    // them back.
    tracing_subscriber::fmt::layer()
        .with_test_writer()
        .with_filter(
            tracing_subscriber::EnvFilter::try_from_env("RUST_LOG")
                .unwrap_or_else(|_| "warn,zookeeper_client=error".into()),
        )
}

/// The process-wide subscriber: the library's events on the test's output (tests that count
/// events have a subscriber of their own, [`counting_events`]).
pub fn init_tracing() {
    static INIT: OnceLock<()> = OnceLock::new();
    INIT.get_or_init(|| {
        let _ = tracing_subscriber::registry().with(fmt_layer()).try_init();
    });
}

/// A server of the test's own whose container reaper runs every 100 ms, and a raw client on
/// it; `None` (saying why) where no such server can be started.
pub async fn fast_reaper_server() -> Option<(zk_testcontainers::ZkServer, zookeeper_client::Client)>
{
    if let Some(reason) = zk_testcontainers::ensemble_unavailable_reason() {
        println!("not run: needs its own server with a fast container reaper ({reason})");
        return None;
    }
    let server = zk_testcontainers::ZkServer::start_with(
        zk_testcontainers::ServerOptions::default().with_env(
            "JVMFLAGS",
            "-Xmx256m -XX:+UseSerialGC -Dznode.container.checkIntervalMs=100",
        ),
    )
    .await
    .unwrap();
    let raw = zookeeper_client::Client::connect(&server.connect_string())
        .await
        .unwrap();
    Some((server, raw))
}

/// Waits, on its watch events, until `path` is gone.
pub async fn wait_deleted(client: &zookeeper_client::Client, path: &str) {
    within(&format!("{path} to be deleted"), 20, async {
        loop {
            let (stat, watcher) = client.check_and_watch_stat(path).await.unwrap();
            if stat.is_none() {
                return;
            }
            watcher.changed().await;
        }
    })
    .await;
}

/// Compiles the Java file `source` (relative to the crate) into `out` against the named jars of
/// /usr/share/java (Debian's packages; `package` names what installs them); the classpath to
/// run it with, or why it cannot run (no `javac`, a jar missing). A compile error panics.
pub async fn compile_java(
    source: &str,
    jars: &[&str],
    package: &str,
    out: &std::path::Path,
) -> Result<String, String> {
    let mut classpath = vec![out.display().to_string()];
    for jar in jars {
        let path = std::path::Path::new("/usr/share/java").join(format!("{jar}.jar"));
        if !path.exists() {
            return Err(format!(
                "{} missing (apt-get install {package})",
                path.display()
            ));
        }
        classpath.push(path.display().to_string());
    }
    let classpath = classpath.join(":");
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(source);
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

/// Waits (on the node's watches) until `path`'s stat (`None`: no node) satisfies `until`, and
/// returns it.
pub async fn stat_until(
    raw: &zookeeper_client::Client,
    what: &str,
    path: &str,
    until: impl Fn(Option<&zookeeper_client::Stat>) -> bool,
) -> Option<zookeeper_client::Stat> {
    within(what, 30, async {
        loop {
            let (stat, watcher) = raw.check_and_watch_stat(path).await.unwrap();
            if until(stat.as_ref()) {
                return stat;
            }
            watcher.changed().await;
        }
    })
    .await
}
