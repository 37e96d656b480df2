//! The one error type of the crate.

use std::time::Duration;

/// What kind of node a recipe root turned out to be, when it cannot serve as one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RootKind {
    /// A container node: ZooKeeper deletes it once it has no children, and a re-created root
    /// restarts its sequence counter, so fencing tokens could repeat. (Servers report
    /// containers to clients as persistent nodes; the library keeps any root non-empty with an
    /// anchor child instead, which stops a container from being deleted.)
    Container,
    /// A TTL node: it can vanish like a container (and is anchored the same way).
    Ttl,
    /// An ephemeral node: it cannot have children and dies with its session.
    Ephemeral,
}

/// Errors of every recipe and of [`Session`](crate::Session).
///
/// Timeouts of the `*_timeout` and `try_*` forms are not errors: those methods return
/// `Ok(None)` when the lock was simply not free.
///
/// # Example
///
/// ```
/// use zk_recipes::{Error, ZkPath};
///
/// let err = ZkPath::new("locks/relative").unwrap_err();
/// assert!(matches!(err, Error::InvalidPath { .. }));
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The path is not a valid ZooKeeper path for a recipe root.
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// No server of the ensemble answered within the connection timeout.
    #[error("no ZooKeeper server at {connect:?} answered within {timeout:?}")]
    Unreachable {
        /// The connect string.
        connect: String,
        /// How long we tried.
        timeout: Duration,
    },

    /// The server refused the operation for want of permission (ACL).
    #[error("not authorized for {path:?} (ACL)")]
    NoAuth {
        /// The node the refused operation was on.
        path: String,
    },

    /// The recipe root exists but is a kind of node whose sequence numbers could restart.
    #[error("{path:?} is a {kind:?} node and cannot be a recipe root: its sequence could restart")]
    UnsuitableRoot {
        /// The root path.
        path: String,
        /// What kind of node it is.
        kind: RootKind,
    },

    /// The root was deleted (and perhaps created again) after this recipe first checked it:
    /// its sequence counter restarted, so tokens from it would not be ordered after the ones
    /// already handed out. Make a new recipe value (or use a new path) once that is understood.
    #[error("{path:?} was deleted or replaced; its sequence restarted")]
    RootReplaced {
        /// The root path.
        path: String,
    },

    /// A semaphore was constructed with a permit count other than the one stored at its root
    /// by the contenders before it.
    #[error("{path:?} stores {stored:?} permits; this semaphore was made with {ours}")]
    PermitMismatch {
        /// The semaphore's root.
        path: String,
        /// What the root stores.
        stored: String,
        /// The count given to [`ZkSemaphore::new`](crate::ZkSemaphore::new).
        ours: u32,
    },

    /// A semaphore needs at least one permit.
    #[error("a semaphore needs at least one permit, not {permits}")]
    InvalidPermits {
        /// The count given.
        permits: u32,
    },

    /// The root's sequence counter is used up: it reached `i32::MAX`, which ZooKeeper (3.8,
    /// tested) then gives to every later child as well, or it wrapped to negative numbers.
    /// Such a node is not ordered after the previous ones and its number is not a unique
    /// token, so it is refused (and deleted) every time. Use a fresh root path.
    #[error("sequence counter of {path:?} is used up (got {sequence}); use a new root")]
    SequenceWrapped {
        /// The root path.
        path: String,
        /// The sequence ZooKeeper gave.
        sequence: i64,
    },

    /// The ZooKeeper session this operation or grant belonged to has expired, or was declared
    /// lost by the session's [`LossPolicy`](crate::LossPolicy).
    #[error("ZooKeeper session expired")]
    SessionExpired,

    /// The [`Session`](crate::Session) was closed.
    #[error("session closed")]
    SessionClosed,

    /// The lock, lease or leadership is no longer held: its node is gone (session expiry or
    /// someone deleted it), so whatever the operation guarded was not done.
    #[error("{path} is no longer held")]
    Lost {
        /// The contender node that was lost.
        path: String,
    },

    /// The connection broke before the reply came: the operation may or may not have taken
    /// effect (a [`FencedWrite`](crate::FencedWrite) commit, for example). Read back before
    /// retrying a write that is not idempotent.
    #[error("connection to ZooKeeper lost; the outcome is unknown")]
    ConnectionLost,

    /// Authentication with the server failed.
    #[error("authentication failed")]
    AuthFailed,

    /// Any other ZooKeeper error.
    #[error("ZooKeeper: {0}")]
    Zk(#[from] zookeeper_client::Error),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Maps a ZooKeeper error about `path` to the typed variant users match on.
    pub(crate) fn zk(err: zookeeper_client::Error, path: &str) -> Error {
        use zookeeper_client::Error as Z;
        match err {
            Z::NoAuth => Error::NoAuth {
                path: path.to_owned(),
            },
            // Our epoch owns the only long-lived client handle: it is closed when the session
            // ends (expired, given up, or closed by `Session::close`, which `Session::epoch`
            // reports as `SessionClosed` on the next call).
            Z::SessionExpired | Z::ClientClosed => Error::SessionExpired,
            Z::AuthFailed => Error::AuthFailed,
            other if connection_lost(&other) => Error::ConnectionLost,
            other => Error::Zk(other),
        }
    }
}

/// Whether a ZooKeeper error means "the connection broke; the outcome is unknown". Besides
/// `ConnectionLoss`, zookeeper-client hands in-flight requests the error that ended the
/// connection (an I/O error, "no response from connection in ...").
pub(crate) fn connection_lost(err: &zookeeper_client::Error) -> bool {
    use zookeeper_client::Error as Z;
    matches!(err, Z::ConnectionLoss | Z::Custom(_) | Z::Timeout)
}
