//! [`SessionOptions`] and [`LossPolicy`]: how a [`Session`](super::Session) connects and when
//! its grants count as lost.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use tracing::debug;
use zookeeper_client as zk;

use crate::error::{Error, Result};
use crate::nodelay::{self, Connections};

/// ZooKeeper's default `jute.maxbuffer`: 0xfffff bytes.
const DEFAULT_MAX_PACKET: usize = 0xfffff;

/// What a request adds to its path and data on the wire, at most (header, lengths, ACLs, flags).
const REQUEST_OVERHEAD: usize = 256;

/// When a granted lock or leadership counts as lost. See the [module docs](crate::session).
///
/// ```
/// use zk_recipes::{LossPolicy, SessionOptions};
/// let opts = SessionOptions::new("127.0.0.1:2181").loss_policy(LossPolicy::Suspension);
/// # let _ = opts;
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum LossPolicy {
    /// Lost on session expiry, node deletion, or a disconnect that lasted a session timeout.
    #[default]
    Expiry,
    /// Also lost as soon as the connection is suspended (disconnected), for good: on
    /// reconnection the grant's node is deleted and the recipe must be acquired again.
    Suspension,
}

/// How to connect: the connect string (`host:port,host:port/optional/chroot`), timeouts,
/// authentication and the loss policy.
///
/// ```
/// use std::time::Duration;
/// use zk_recipes::SessionOptions;
///
/// let opts = SessionOptions::new("zk1:2181,zk2:2181,zk3:2181/app")
///     .session_timeout(Duration::from_secs(6))
///     .connection_timeout(Duration::from_secs(3))
///     .digest_auth("worker", "secret");
/// # let _ = opts;
/// ```
#[derive(Clone)]
pub struct SessionOptions {
    pub(super) connect: String,
    session_timeout: Duration,
    pub(super) connection_timeout: Duration,
    auth: Vec<(String, Vec<u8>)>,
    pub(super) loss_policy: LossPolicy,
    tcp_nodelay: bool,
    pub(super) owner: String,
    pub(super) max_packet: usize,
}

impl fmt::Debug for SessionOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionOptions")
            .field("connect", &self.connect)
            .field("session_timeout", &self.session_timeout)
            .field("connection_timeout", &self.connection_timeout)
            .field(
                "auth_schemes",
                &self.auth.iter().map(|(s, _)| s).collect::<Vec<_>>(),
            )
            .field("loss_policy", &self.loss_policy)
            .field("tcp_nodelay", &self.tcp_nodelay)
            .field("owner", &self.owner)
            .field("max_packet", &self.max_packet)
            .finish()
    }
}

impl SessionOptions {
    /// Options with defaults: 10 s session timeout, 5 s connection timeout, no auth,
    /// [`LossPolicy::Expiry`], `TCP_NODELAY` set (Nagle's algorithm off), owner label
    /// `{hostname}/{pid}`.
    ///
    /// ```
    /// let opts = zk_recipes::SessionOptions::new("127.0.0.1:2181");
    /// # let _ = opts;
    /// ```
    pub fn new(connect: impl Into<String>) -> SessionOptions {
        SessionOptions {
            connect: connect.into(),
            session_timeout: Duration::from_secs(10),
            connection_timeout: Duration::from_secs(5),
            auth: Vec::new(),
            loss_policy: LossPolicy::Expiry,
            tcp_nodelay: true,
            owner: crate::path::default_owner(),
            max_packet: DEFAULT_MAX_PACKET,
        }
    }

    /// The largest request the servers accept, their `jute.maxbuffer` (default: 1 MiB, the
    /// servers' default). A request that would be larger (a long root path, large election
    /// info) is refused with [`Error::TooLarge`] before anything is sent: a server closes the
    /// connection on such a packet, and a client that sent it again on every reconnect would
    /// hammer the ensemble.
    ///
    /// ```
    /// let opts = zk_recipes::SessionOptions::new("127.0.0.1:2181").max_packet_bytes(4 << 20);
    /// # let _ = opts;
    /// ```
    pub fn max_packet_bytes(mut self, bytes: usize) -> Self {
        self.max_packet = bytes;
        self
    }

    /// The label the contender nodes of the mutex, keyed lock, read/write lock and semaphore
    /// carry in their data (`owner=...`), so that people (and `zkr inspect`) can tell who
    /// holds and who waits; an election's nodes carry the candidate's info instead. Default:
    /// `{hostname}/{pid}`. Line breaks are replaced by spaces.
    ///
    /// ```
    /// let opts = zk_recipes::SessionOptions::new("127.0.0.1:2181").owner("billing-worker-3");
    /// # let _ = opts;
    /// ```
    pub fn owner(mut self, label: impl Into<String>) -> Self {
        self.owner = label.into().replace(['\n', '\r'], " ");
        self
    }

    /// The session timeout to ask for (the server clamps it to its min/max).
    ///
    /// ```
    /// let opts = zk_recipes::SessionOptions::new("127.0.0.1:2181")
    ///     .session_timeout(std::time::Duration::from_secs(4));
    /// # let _ = opts;
    /// ```
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// How long [`Session::connect`](super::Session::connect) (and each reconnect after
    /// expiry) waits for a server.
    ///
    /// ```
    /// let opts = zk_recipes::SessionOptions::new("127.0.0.1:2181")
    ///     .connection_timeout(std::time::Duration::from_secs(2));
    /// # let _ = opts;
    /// ```
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }

    /// Adds `digest` authentication (`user:password`), applied to every session opened.
    ///
    /// ```
    /// let opts = zk_recipes::SessionOptions::new("127.0.0.1:2181").digest_auth("worker", "secret");
    /// # let _ = opts;
    /// ```
    pub fn digest_auth(mut self, user: &str, password: &str) -> Self {
        self.auth.push((
            "digest".to_owned(),
            format!("{user}:{password}").into_bytes(),
        ));
        self
    }

    /// Chooses when grants count as lost (see the [module docs](crate::session)).
    ///
    /// ```
    /// use zk_recipes::{LossPolicy, SessionOptions};
    /// let opts = SessionOptions::new("127.0.0.1:2181").loss_policy(LossPolicy::Suspension);
    /// # let _ = opts;
    /// ```
    pub fn loss_policy(mut self, policy: LossPolicy) -> Self {
        self.loss_policy = policy;
        self
    }

    /// Whether to set `TCP_NODELAY` (turn Nagle's algorithm off) on the session's
    /// connections. Default: `true`, as Java's ZooKeeper client does; `false` leaves the
    /// sockets as zookeeper-client makes them (Nagle on), which makes every pair of requests
    /// sent back to back (an acquire's create and listing) cost two round trips.
    /// zookeeper-client has no option for it, so on Linux the session finds its sockets by the
    /// servers' addresses among those that appeared while it connected, or since its last
    /// connect when it reconnects (see `src/nodelay.rs`); another client's connection to the
    /// same servers opened in that time gets it too. Elsewhere it does nothing.
    ///
    /// ```
    /// let opts = zk_recipes::SessionOptions::new("127.0.0.1:2181").tcp_nodelay(false);
    /// # let _ = opts;
    /// ```
    pub fn tcp_nodelay(mut self, on: bool) -> Self {
        self.tcp_nodelay = on;
        self
    }

    /// Refuses a request of `payload` bytes (paths and data) that would not fit the servers'
    /// packet limit.
    pub(crate) fn check_size(&self, what: &'static str, payload: usize) -> Result<()> {
        let size = payload + REQUEST_OVERHEAD;
        if size > self.max_packet {
            return Err(Error::TooLarge {
                what,
                size,
                limit: self.max_packet,
            });
        }
        Ok(())
    }

    /// The servers' addresses, when their connections get `TCP_NODELAY`.
    pub(super) async fn nodelay_servers(&self) -> Option<Vec<SocketAddr>> {
        if self.tcp_nodelay {
            Some(nodelay::servers(&self.connect, self.connection_timeout).await)
        } else {
            None
        }
    }

    /// What is wrong with the connect string, if anything can be told without connecting.
    pub(super) fn check_connect(&self) -> Result<()> {
        let invalid = |reason: &str| {
            Err(Error::InvalidConnectString {
                connect: self.connect.clone(),
                reason: reason.to_owned(),
            })
        };
        let hosts = self.connect.split('/').next().unwrap_or_default();
        if hosts.trim().is_empty() {
            return invalid("no host (expected host:port[,host:port...][/chroot])");
        }
        if hosts.split(',').any(|h| h.trim().is_empty()) {
            return invalid("an empty host between commas");
        }
        Ok(())
    }

    pub(super) async fn open(&self) -> Result<zk::Client> {
        self.check_connect()?;
        let before = self.tcp_nodelay.then(Connections::now);
        let mut connector = zk::Client::connector()
            .with_session_timeout(self.session_timeout)
            .with_connection_timeout(self.connection_timeout);
        for (scheme, auth) in &self.auth {
            connector = connector.with_auth(scheme, auth);
        }
        let unreachable = || Error::Unreachable {
            connect: self.connect.clone(),
            timeout: self.connection_timeout,
        };
        match tokio::time::timeout(self.connection_timeout, connector.connect(&self.connect)).await
        {
            Err(_) | Ok(Err(zk::Error::Timeout | zk::Error::NoHosts)) => Err(unreachable()),
            Ok(Err(zk::Error::AuthFailed)) => Err(Error::AuthFailed),
            Ok(Err(zk::Error::BadArguments(reason))) => Err(Error::InvalidConnectString {
                connect: self.connect.clone(),
                reason: reason.to_string(),
            }),
            Ok(Err(err)) => Err(Error::zk(err, "/")),
            Ok(Ok(client)) => {
                if let (Some(before), Some(servers)) = (before, self.nodelay_servers().await) {
                    let set = before.set_nodelay_on_new(&servers);
                    debug!(connections = set, "TCP_NODELAY set");
                }
                Ok(client)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_connect_strings_without_hosts() {
        for bad in ["", "/chroot", "a:1,,b:2", " "] {
            let err = SessionOptions::new(bad).check_connect().unwrap_err();
            assert!(
                matches!(err, Error::InvalidConnectString { .. }),
                "{bad:?}: {err}"
            );
        }
        assert!(SessionOptions::new("zk1:2181,zk2:2181/app")
            .check_connect()
            .is_ok());
    }
}
