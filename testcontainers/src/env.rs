//! Environment knobs shared by every test: `ZK_CONNECT`, `ZK_TEST_TIMEOUT_SCALE`.

use std::sync::OnceLock;
use std::time::Duration;

use crate::{HarnessError, ZkServer};

/// Name of the variable that points tests at an existing ZooKeeper instead of Docker.
///
/// ```
/// assert_eq!(zk_testcontainers::ZK_CONNECT_VAR, "ZK_CONNECT");
/// ```
pub const ZK_CONNECT_VAR: &str = "ZK_CONNECT";
/// Name of the variable that multiplies every test timeout (see [`scaled`]).
///
/// ```
/// assert_eq!(zk_testcontainers::TIMEOUT_SCALE_VAR, "ZK_TEST_TIMEOUT_SCALE");
/// ```
pub const TIMEOUT_SCALE_VAR: &str = "ZK_TEST_TIMEOUT_SCALE";

/// Scales a test timeout by `ZK_TEST_TIMEOUT_SCALE` (a positive float, default `1.0`).
///
/// Every timeout of the harness goes through this function, and tests should route theirs
/// through it too, so that one variable slows everything down on a loaded CI machine:
/// `ZK_TEST_TIMEOUT_SCALE=3 cargo nextest run`. An unparsable or non-positive value is
/// reported once (via `tracing`) and ignored.
///
/// ```
/// use std::time::Duration;
/// use zk_testcontainers::scaled;
///
/// // 1.0 unless ZK_TEST_TIMEOUT_SCALE says otherwise.
/// let deadline = scaled(Duration::from_secs(10));
/// assert!(deadline > Duration::ZERO);
/// ```
pub fn scaled(d: Duration) -> Duration {
    d.mul_f64(timeout_scale())
}

fn timeout_scale() -> f64 {
    static SCALE: OnceLock<f64> = OnceLock::new();
    *SCALE.get_or_init(|| match std::env::var(TIMEOUT_SCALE_VAR) {
        Err(_) => 1.0,
        Ok(raw) => match raw.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v > 0.0 => v,
            _ => {
                tracing::warn!("ignoring {TIMEOUT_SCALE_VAR}={raw:?}: not a positive number");
                1.0
            }
        },
    })
}

/// The `ZK_CONNECT` connect string, if set and not empty.
fn external_connect() -> Option<String> {
    std::env::var(ZK_CONNECT_VAR)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// The ZooKeeper a test runs against: an existing server named by `ZK_CONNECT`, or a fresh
/// container owned by this value (removed when it is dropped).
///
/// ```no_run
/// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
/// let zk = zk_testcontainers::test_server().await?;
/// let client = zookeeper_client::Client::connect(&zk.connect_string()).await.unwrap();
/// if let Some(server) = zk.server() {
///     // Fault injection is only possible on a container we own.
///     server.pause().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // one per test; boxing would only complicate matching
pub enum TestZk {
    /// `ZK_CONNECT` was set: the connect string, nothing is owned.
    External(String),
    /// A container started for this test.
    Container(ZkServer),
}

impl TestZk {
    /// The connect string to hand to a client.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let zk = zk_testcontainers::test_server().await?;
    /// println!("testing against {}", zk.connect_string());
    /// # Ok(()) }
    /// ```
    pub fn connect_string(&self) -> String {
        match self {
            TestZk::External(s) => s.clone(),
            TestZk::Container(server) => server.connect_string(),
        }
    }

    /// The container, when there is one (fault injection is only possible then).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
    /// let zk = zk_testcontainers::test_server().await?;
    /// let Some(server) = zk.server() else {
    ///     eprintln!("not run: needs a container to kill (ZK_CONNECT is set)");
    ///     return Ok(());
    /// };
    /// server.kill().await?;
    /// # Ok(()) }
    /// ```
    pub fn server(&self) -> Option<&ZkServer> {
        match self {
            TestZk::External(_) => None,
            TestZk::Container(server) => Some(server),
        }
    }
}

/// The server a test should use: `ZK_CONNECT` if set, else a fresh container
/// ([`ZkServer::start`]).
///
/// ```no_run
/// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
/// let zk = zk_testcontainers::test_server().await?;
/// let root = zk_testcontainers::chroot(&zk.connect_string(), "my-test").await?;
/// let client = zookeeper_client::Client::connect(&root).await.unwrap();
/// # Ok(()) }
/// ```
pub async fn test_server() -> Result<TestZk, HarnessError> {
    match external_connect() {
        Some(connect) => Ok(TestZk::External(connect)),
        None => Ok(TestZk::Container(ZkServer::start().await?)),
    }
}

/// Why ensemble tests cannot run here, if they cannot: `ZK_CONNECT` points at one external
/// server, and ensembles need Docker containers of their own. The same holds for tests that
/// break their own server ([`ZkServer`]).
///
/// Tests should print the reason and return, so that the output says plainly that they were
/// not run and why (rather than passing silently):
///
/// ```no_run
/// # async fn demo() -> Result<(), zk_testcontainers::HarnessError> {
/// if let Some(reason) = zk_testcontainers::ensemble_unavailable_reason() {
///     eprintln!("NOT RUN: {reason}");
///     return Ok(());
/// }
/// let ensemble = zk_testcontainers::ZkEnsemble::start(3).await?;
/// # Ok(()) }
/// ```
pub fn ensemble_unavailable_reason() -> Option<String> {
    external_connect().map(|connect| {
        format!(
            "{ZK_CONNECT_VAR}={connect} is set, so tests use that external server; this test \
             needs ZooKeeper containers of its own (an ensemble, or a server to break) and was \
             not run (unset {ZK_CONNECT_VAR} to run it)"
        )
    })
}
