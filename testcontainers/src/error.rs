//! The one error type of the harness.

/// Everything that can go wrong while running ZooKeeper in Docker for a test.
///
/// The messages are meant to be read by a person looking at a failed test: they name the
/// container, the image or the command involved and, where one helps, the remedy.
///
/// ```no_run
/// use zk_testcontainers::{HarnessError, ZkServer};
///
/// # async fn demo() {
/// match ZkServer::start().await {
///     Ok(server) => println!("ZooKeeper at {}", server.connect_string()),
///     Err(HarnessError::DockerUnavailable(why)) => eprintln!("no Docker here: {why}"),
///     Err(other) => panic!("{other}"),
/// }
/// # }
/// ```
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The Docker Engine cannot be reached (not installed, not running, no permission).
    #[error(
        "the Docker Engine is not available: {0} \
         (start Docker, or set ZK_CONNECT=host:port to test against an existing server)"
    )]
    DockerUnavailable(String),

    /// The image is not present locally and could not be obtained.
    #[error("ZooKeeper image {image} is not available: {reason}")]
    ImageMissing {
        /// The image reference, e.g. `zookeeper:3.8`.
        image: String,
        /// Why it could not be used or fetched.
        reason: String,
    },

    /// Building the default image with `image/build.sh` failed.
    #[error("building the ZooKeeper image failed: {0}")]
    ImageBuild(String),

    /// A Docker operation on a container or network failed.
    #[error("docker: {0}")]
    Container(String),

    /// Something did not happen in time (startup, quorum, a four-letter-word answer...).
    #[error("timed out: {0}")]
    Timeout(String),

    /// A ZooKeeper client operation failed; the string says what the harness was doing.
    #[error("ZooKeeper client error while {0}: {1}")]
    Zk(String, #[source] zookeeper_client::Error),

    /// A socket operation failed (e.g. a four-letter-word command to an unreachable server).
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),

    /// The ensemble is not in the expected shape: no leader, several leaders, no quorum.
    #[error("ensemble: {0}")]
    Quorum(String),

    /// Invalid input or environment (e.g. an ensemble size of 0, an unparsable variable).
    #[error("invalid configuration: {0}")]
    Config(String),
}

impl HarnessError {
    pub(crate) fn docker(action: impl std::fmt::Display, err: impl std::fmt::Display) -> Self {
        HarnessError::Container(format!("{action}: {err}"))
    }
}
