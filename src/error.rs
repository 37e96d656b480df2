//! The one error type of the crate, and the one place ZooKeeper's errors are mapped to it.

use std::time::Duration;

use zookeeper_client as zk;

pub use crate::layout::kind::RootKind;

/// Errors of every recipe and of [`Session`](crate::Session).
///
/// `try_*` methods return `Ok(None)` when the lock was simply not free; that is no error. For
/// a time limit, wrap any acquisition in [`tokio::time::timeout`]: every acquire future is
/// cancel safe.
///
/// [`is_retryable`](Error::is_retryable) tells a worker loop which errors call for another
/// attempt (usually after a pause) and which for a fix by a person.
///
/// # Example
///
/// ```
/// use zk_recipes::{layout::check_path, Error};
///
/// let err = check_path("locks/relative").unwrap_err();
/// assert!(matches!(err, Error::InvalidPath { .. }));
/// assert!(!err.is_retryable());
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The path is not a valid ZooKeeper path for a recipe root. Not retryable: fix the path.
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// The connect string is not `host:port[,host:port...][/chroot]`. Not retryable: fix it.
    #[error("invalid connect string {connect:?}: {reason}")]
    InvalidConnectString {
        /// The connect string as given.
        connect: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A request would be larger than the server accepts (its `jute.maxbuffer`, 1 MiB by
    /// default; [`SessionOptions::max_packet_bytes`](crate::SessionOptions::max_packet_bytes)
    /// for servers that raise it). Nothing was sent: a server closes the connection on such a
    /// packet. Not retryable: make the path or data smaller.
    #[error("{what} would be {size} bytes on the wire, over the server's limit of {limit}")]
    TooLarge {
        /// What was too large.
        what: &'static str,
        /// Its size, estimated from above.
        size: usize,
        /// The limit.
        limit: usize,
    },

    /// A [`ZkLockSpace`](crate::ZkLockSpace) key that cannot name a lock: empty, or longer
    /// than the limit once encoded. Not retryable: fix the key.
    #[error("invalid lock key {key:?}: {reason}")]
    InvalidKey {
        /// The key as given.
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// No server of the ensemble answered within the connection timeout (also when none of the
    /// connect string's host names resolves). Retryable: the ensemble may come back.
    #[error("could not connect to ZooKeeper at {connect:?} within {timeout:?} (no server answered, or no host name resolved)")]
    Unreachable {
        /// The connect string.
        connect: String,
        /// How long we tried.
        timeout: Duration,
    },

    /// The server refused the operation for want of permission (ACL). Not retryable: grant
    /// the session's identity access, or authenticate (`SessionOptions::digest_auth`).
    #[error("not authorized for {path:?} (ACL)")]
    NoAuth {
        /// The node the refused operation was on.
        path: String,
    },

    /// The recipe root exists but is a kind of node that cannot hold a queue. Not retryable:
    /// use another path.
    #[error("{path:?} cannot be a recipe root: it is {kind}")]
    UnsuitableRoot {
        /// The root path.
        path: String,
        /// What kind of node it is.
        kind: RootKind,
    },

    /// The root was deleted (and perhaps created again) after this recipe first checked it:
    /// its sequence counter restarted, so tokens from it would not be ordered after the ones
    /// already handed out. Not retryable with this value: make a new recipe value (or use a
    /// new path) once that is understood.
    #[error("{path:?} was deleted or replaced; its sequence restarted")]
    RootReplaced {
        /// The root path.
        path: String,
    },

    /// The connect string's chroot (`/app` of `zk1:2181/app`) does not exist on the servers:
    /// every path would be refused under it. Not retryable: create it (`zkCli: create /app`,
    /// parents first) or fix the connect string.
    #[error("the chroot {chroot:?} of the connect string does not exist: create it (zkCli: create {chroot}) or fix the connect string")]
    NoChroot {
        /// The chroot.
        chroot: String,
    },

    /// A semaphore was constructed with a permit count other than the one stored at its root
    /// by the contenders before it. Not retryable.
    #[error("{path:?} stores {stored:?} permits; this semaphore was made with {ours}")]
    PermitMismatch {
        /// The semaphore's root.
        path: String,
        /// What the root stores.
        stored: String,
        /// The count given to [`ZkSemaphore::new`](crate::ZkSemaphore::new).
        ours: u32,
    },

    /// A [`ZkSharedCount`](crate::ZkSharedCount)'s node holds something other than a 4-byte
    /// count, or an addition would not fit an `i32`; nothing was written. The same for a
    /// [`ZkAtomicLong`](crate::ZkAtomicLong): its node holds neither 8 bytes nor none, or the
    /// sum would not fit an `i64`. Not retryable: fix the node's data, or the delta.
    #[error("{path:?} is no usable count: {reason}")]
    BadCount {
        /// The count's path.
        path: String,
        /// What is wrong.
        reason: String,
    },

    /// A [`ZkGroup`](crate::ZkGroup) member with this id is already in the group, through
    /// another session (or a [`ZkDoubleBarrier`](crate::ZkDoubleBarrier) member with this id
    /// is already inside the barrier, through another session or another entry of this one). Not retryable as such: two processes should not share an id (wait for
    /// the other to leave, or pick another id).
    #[error("{path:?} is another session's group member (session {session_id:#x})")]
    MemberIdTaken {
        /// The member's node.
        path: String,
        /// The session whose node it is.
        session_id: i64,
    },

    /// A [`ZkDoubleBarrier`](crate::ZkDoubleBarrier) needs at least one member. Not retryable.
    #[error("a double barrier needs at least one member, not {members}")]
    InvalidMemberCount {
        /// The count given.
        members: u32,
    },

    /// A wait with a time limit (a barrier's `wait_timeout`, a double barrier's
    /// `enter_timeout` or `leave_timeout`) ran out first; `reason` says what was still
    /// missing. Whatever the call had made in ZooKeeper is undone (a double barrier's member
    /// node is deleted). Retryable: call again, or find out why the others are late.
    #[error("{path:?}: gave up after {waited:?}: {reason}")]
    TimedOut {
        /// The recipe's path.
        path: String,
        /// The time limit.
        waited: Duration,
        /// What was still missing when it ran out.
        reason: String,
    },

    /// A semaphore needs at least one permit. Not retryable.
    #[error("a semaphore needs at least one permit, not {permits}")]
    InvalidPermits {
        /// The count given.
        permits: u32,
    },

    /// A set a recipe was given cannot be used: a [`ZkMultiLock`](crate::ZkMultiLock) of no
    /// lock or of one lock twice (it would wait for itself), a
    /// [`ZkPartitioner`](crate::ZkPartitioner) of no partition or of one partition twice.
    /// Nothing was sent. Not retryable: fix the set.
    #[error("invalid {what}: {reason}")]
    InvalidSet {
        /// What the set is (`"multi-lock"`, `"partition set"`).
        what: &'static str,
        /// What is wrong with it (the duplicate, or that it is empty).
        reason: String,
    },

    /// The root's sequence counter is used up: it reached `i32::MAX`, which ZooKeeper (3.8,
    /// tested) then gives to every later child as well, or it wrapped to negative numbers.
    /// Such a node is not ordered after the previous ones and its number is not a unique
    /// token, so it is refused (and deleted) every time. Not retryable: use a fresh root path.
    #[error("sequence counter of {path:?} is used up (got {sequence}); use a new root")]
    SequenceWrapped {
        /// The root path.
        path: String,
        /// The sequence ZooKeeper gave.
        sequence: i64,
    },

    /// Nodes someone else made under a lock's root stand at every name its counter would give
    /// next, more than the library steps over (it moves the counter past a few on its own).
    /// Not retryable: someone must delete them (`zkr inspect` lists them).
    #[error("foreign nodes under {path:?} stand where its counter goes next (first: {node:?})")]
    ForeignNode {
        /// The root path.
        path: String,
        /// The first foreign node in the way.
        node: String,
    },

    /// A [`ZkKeptNode`](crate::ZkKeptNode) with [`KeptMode::Ttl`](crate::KeptMode::Ttl): the
    /// TTL is out of ZooKeeper's range, or the server takes no TTL nodes (they need
    /// `zookeeper.extendedTypesEnabled=true` on every server). Not retryable: fix the TTL or
    /// the servers' configuration, or keep a persistent node.
    #[error("{path:?}: TTL node refused: {reason}")]
    TtlRefused {
        /// The kept node's path.
        path: String,
        /// Why.
        reason: &'static str,
    },

    /// The servers lack what the operation needs: a [`ZkTreeCache`](crate::ZkTreeCache) needs
    /// persistent recursive watches (`addWatch`, ZooKeeper 3.6 and later). Not retryable: use
    /// newer servers.
    #[error("{path:?}: the server does not support this: {reason}")]
    Unsupported {
        /// The path the operation was on.
        path: String,
        /// What is missing.
        reason: &'static str,
    },

    /// A service instance (service discovery on Curator's layout) that cannot be registered or
    /// read as one: its node's data is not a `ServiceInstance` JSON, or an instance's name or
    /// id is not one node name. Not retryable: fix the instance (or the node someone wrote).
    #[error("{path:?} is no usable service instance: {reason}")]
    InvalidInstance {
        /// The instance's node (or where it would be).
        path: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The ZooKeeper session this operation or grant belonged to has expired, or was given up
    /// under the session's [`LossPolicy`](crate::LossPolicy). Retryable: the
    /// [`Session`](crate::Session) opens a new ZooKeeper session by itself; acquire again.
    #[error("ZooKeeper session expired")]
    SessionExpired,

    /// [`Session::close`](crate::Session::close) was called (or every handle dropped): the
    /// session, and everything granted on it, is over. Not retryable on this session.
    #[error("session closed")]
    SessionClosed,

    /// The lock, lease or leadership is no longer held: its node is gone (someone deleted it),
    /// so whatever the operation guarded was not done. Retryable: acquire again.
    #[error("{path} is no longer held")]
    Lost {
        /// The contender node that was lost.
        path: String,
    },

    /// The connection broke before the reply came: the operation may or may not have taken
    /// effect (a [`FencedWrite`](crate::FencedWrite) commit, for example). Retryable, but read
    /// back before repeating a write that is not idempotent.
    #[error("connection to ZooKeeper lost; the outcome is unknown")]
    ConnectionLost,

    /// The server refused the session's authentication, or requires one the session did not
    /// offer (`enforce.auth.enabled`, `sessionRequireClientSASLAuth`: SASL). With SASL
    /// configured, a refusal is [`SaslFailed`](Error::SaslFailed) instead. Not retryable: fix
    /// the credentials.
    #[error("authentication failed: the server refused this session's credentials, or requires an authentication it did not offer (a server with enforce.auth.enabled wants SASL: SessionOptions::sasl_digest_md5, features sasl-digest-md5)")]
    AuthFailed,

    /// SASL authentication was refused (feature `sasl-digest-md5` or `sasl-gssapi`): for
    /// DIGEST-MD5, the user is unknown to the server or the password is wrong; for GSSAPI, the
    /// Kerberos ticket or the server's principal. Not retryable: fix the credentials.
    #[error("SASL {mechanism} authentication as {user:?} was refused by the server: check the user and password against the server's JAAS `Server` section (user_NAME=\"password\"), or the Kerberos ticket and principal for GSSAPI")]
    SaslFailed {
        /// `DIGEST-MD5` or `GSSAPI`.
        mechanism: &'static str,
        /// The user name given (GSSAPI: the ticket cache's).
        user: String,
    },

    /// The TLS settings cannot be used (feature `tls`): no CA certificate in the PEM, a
    /// client key that is not valid PEM or does not belong to its certificate, a file that
    /// cannot be read. Nothing was sent. Not retryable: fix the settings.
    #[error("invalid TLS settings: {reason}")]
    InvalidTls {
        /// What is wrong.
        reason: String,
    },

    /// The server's TLS certificate is not trusted (feature `tls`): it is not signed by a CA
    /// of `TlsConfig`, it has expired, or it does not name the host as the
    /// connect string does. No session was opened. Not retryable: give the CA that signed the
    /// servers' certificates, or fix the certificate or the host name.
    #[error("the TLS certificate of the ZooKeeper server at {server} is not trusted ({reason}): give TlsConfig the CA certificate that signed it, and name the host in the connect string as the certificate does")]
    TlsUntrustedServer {
        /// The server (`host:port`).
        server: String,
        /// What the certificate check said.
        reason: String,
    },

    /// The server refused our TLS client certificate, or its absence (feature `tls`): the
    /// server requires one (`ssl.clientAuth=need`, ZooKeeper's default) signed by a CA of its
    /// `ssl.trustStore`. No session was opened. Not retryable: give
    /// `TlsConfig::with_client_cert` a certificate the
    /// server trusts.
    #[error("the ZooKeeper server at {server} refused our TLS client certificate ({reason}): give TlsConfig::with_client_cert a certificate signed by a CA in the server's ssl.trustStore")]
    TlsClientCertRefused {
        /// The server (`host:port`).
        server: String,
        /// What the server answered.
        reason: String,
    },

    /// A TLS handshake with the server failed for another reason (feature `tls`): most often
    /// the port is the plain `clientPort`, not the `secureClientPort`, or the two sides share
    /// no protocol version. No session was opened. Not retryable: check the port.
    #[error("TLS handshake with the ZooKeeper server at {server} failed: {reason}")]
    TlsHandshake {
        /// The server (`host:port`).
        server: String,
        /// What failed.
        reason: String,
    },

    /// Any other ZooKeeper error (for example a [`FencedWrite`](crate::FencedWrite)
    /// operation that failed: `NodeExists`, `BadVersion`). Not retryable as such: look at the
    /// inner error.
    #[error("ZooKeeper: {0}")]
    Zk(zk::Error),

    /// A server answered something this library holds impossible (a node of ours owned by
    /// another session, a name it did not create). Not retryable; please report it.
    #[error("internal error: {0}")]
    Internal(String),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether the same call may succeed if made again (after a pause, on the same
    /// [`Session`](crate::Session)): `true` for [`SessionExpired`](Error::SessionExpired),
    /// [`Lost`](Error::Lost), [`ConnectionLost`](Error::ConnectionLost),
    /// [`Unreachable`](Error::Unreachable) and [`TimedOut`](Error::TimedOut); `false` for errors that need a fix (a path, an
    /// ACL, a permit count, a closed session).
    ///
    /// ```
    /// assert!(zk_recipes::Error::SessionExpired.is_retryable());
    /// assert!(!zk_recipes::Error::SessionClosed.is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::SessionExpired
                | Error::Lost { .. }
                | Error::ConnectionLost
                | Error::Unreachable { .. }
                | Error::TimedOut { .. }
        )
    }

    /// Maps a ZooKeeper error about `path` to the typed variant users match on: the one
    /// conversion from `zookeeper_client::Error` in the crate. Where a session is involved,
    /// `Epoch::error` calls this and tells a closed session from an
    /// expired one.
    pub(crate) fn zk(err: zk::Error, path: &str) -> Error {
        use zk::Error as Z;
        match err {
            Z::NoAuth => Error::NoAuth {
                path: path.to_owned(),
            },
            Z::SessionExpired | Z::ClientClosed => Error::SessionExpired,
            Z::NoChildrenForEphemerals => Error::UnsuitableRoot {
                path: path.to_owned(),
                kind: RootKind::UnderEphemeral,
            },
            Z::AuthFailed => Error::AuthFailed,
            other if connection_lost(&other) => Error::ConnectionLost,
            other => Error::Zk(other),
        }
    }

    /// An internal invariant did not hold (a server answered something that cannot be).
    pub(crate) fn internal(what: String) -> Error {
        Error::Internal(what)
    }
}

/// Whether a ZooKeeper error means "the connection broke; the outcome is unknown". Besides
/// `ConnectionLoss`, zookeeper-client hands in-flight requests the error that ended the
/// connection (an I/O error, "no response from connection in ...").
pub(crate) fn connection_lost(err: &zk::Error) -> bool {
    use zk::Error as Z;
    matches!(err, Z::ConnectionLoss | Z::Custom(_) | Z::Timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_errors_are_the_transient_ones() {
        assert!(Error::Lost { path: "/a".into() }.is_retryable());
        assert!(Error::ConnectionLost.is_retryable());
        assert!(!Error::AuthFailed.is_retryable());
        assert!(!Error::zk(zk::Error::NoAuth, "/a").is_retryable());
        assert!(matches!(
            Error::zk(zk::Error::ConnectionLoss, "/a"),
            Error::ConnectionLost
        ));
    }

    #[test]
    fn messages_read_as_prose() {
        let err = Error::UnsuitableRoot {
            path: "/eph".into(),
            kind: RootKind::Ephemeral,
        };
        assert_eq!(
            err.to_string(),
            "\"/eph\" cannot be a recipe root: it is an ephemeral node"
        );
    }
}
