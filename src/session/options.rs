//! [`SessionOptions`] and [`LossPolicy`]: how a [`Session`](super::Session) connects and when
//! its grants count as lost.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use tracing::debug;
use zookeeper_client as zk;

use crate::error::{Error, Result};
use crate::nodelay::{self, Connections};
#[cfg(feature = "tls")]
use crate::tls::{self, TlsConfig};

/// ZooKeeper's default `jute.maxbuffer`: 0xfffff bytes.
const DEFAULT_MAX_PACKET: usize = 0xfffff;

/// What a request adds to its path and data on the wire, at most (header, lengths, the default
/// ACL, flags).
const REQUEST_OVERHEAD: usize = 256;

/// One ACL on the wire: its permissions, and the lengths of its scheme and id.
const ACL_OVERHEAD: usize = 12;

/// The default ACL on the wire (`world:anyone`), which the overhead covers.
const DEFAULT_ACL_BYTES: usize = ACL_OVERHEAD + "world".len() + "anyone".len();

/// A SASL mechanism and its credentials.
#[cfg(any(feature = "sasl-digest-md5", feature = "sasl-gssapi"))]
#[derive(Clone)]
enum Sasl {
    #[cfg(feature = "sasl-digest-md5")]
    DigestMd5 { user: String, password: String },
    #[cfg(feature = "sasl-gssapi")]
    Gssapi {
        service: String,
        hostname: Option<String>,
    },
}

#[cfg(any(feature = "sasl-digest-md5", feature = "sasl-gssapi"))]
impl Sasl {
    fn mechanism(&self) -> &'static str {
        match self {
            #[cfg(feature = "sasl-digest-md5")]
            Sasl::DigestMd5 { .. } => "DIGEST-MD5",
            #[cfg(feature = "sasl-gssapi")]
            Sasl::Gssapi { .. } => "GSSAPI",
        }
    }

    fn user(&self) -> String {
        match self {
            #[cfg(feature = "sasl-digest-md5")]
            Sasl::DigestMd5 { user, .. } => user.clone(),
            #[cfg(feature = "sasl-gssapi")]
            Sasl::Gssapi { .. } => "(the Kerberos ticket cache's principal)".to_owned(),
        }
    }

    fn options(&self) -> zk::SaslOptions {
        match self {
            #[cfg(feature = "sasl-digest-md5")]
            Sasl::DigestMd5 { user, password } => {
                zk::SaslOptions::digest_md5(user.clone(), password.clone()).into()
            }
            #[cfg(feature = "sasl-gssapi")]
            Sasl::Gssapi { service, hostname } => {
                let options = zk::SaslOptions::gssapi().with_username(service.clone());
                match hostname {
                    Some(host) => options.with_hostname(host.clone()).into(),
                    None => options.into(),
                }
            }
        }
    }
}

/// When a granted lock or leadership counts as lost.
///
/// # Reacting to connection loss
///
/// A ZooKeeper session survives short disconnects: while the client reconnects (to the same or
/// another server) within the session timeout, every ephemeral node, lock and leadership stays.
/// The session state goes [`SessionState::Suspended`](crate::SessionState::Suspended) meanwhile; whether that already counts as
/// "lost" for guards is the [`LossPolicy`] you choose:
///
/// - [`LossPolicy::Expiry`] (the default): a grant is lost when its session expires, when its node
///   is deleted, or when the client stayed disconnected for a whole session timeout (then the
///   server has expired the session or is about to, so the client gives it up itself, closes it
///   and opens a new one). Between a disconnect and that moment another worker may already hold
///   the lock: storage must check the [`FencingToken`](crate::FencingToken).
/// - [`LossPolicy::Suspension`]: a grant is lost as soon as the connection is suspended, and
///   stays lost even if the session reconnects (its node is then deleted, so the queue moves
///   on). Stricter, like Curator's standard error policy: a holder learns it must stop before
///   the ensemble can expire its session and grant anyone else.
///
/// Which to choose:
///
/// - A job that writes only through fenced storage (every write carries the token, the store
///   refuses older ones) is safe under either; `Expiry` rides out short disconnects without
///   handing the lock over.
/// - A job that acts on the world in ways no store can fence (sends e-mail, calls an API, runs a
///   process) and must stop before anyone else starts needs `Suspension`: under `Expiry` the
///   ensemble can expire the session and grant the next contender (or elect the next leader)
///   while the old holder, cut off, has not yet heard of it, so its `lost()` resolves only a
///   session timeout after the disconnect, when someone else may already be at work. Under
///   `Suspension`, `lost()` resolves as soon as the connection goes, which is always before the
///   session can expire.
///
/// Nothing here depends on the client's clock for safety; the fencing token does.
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
/// authentication (digest; SASL and TLS behind their features), the ACLs of the nodes recipes
/// create, and the loss policy.
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
    node_acls: Vec<zk::Acl>,
    #[cfg(feature = "tls")]
    tls: Option<TlsConfig>,
    #[cfg(any(feature = "sasl-digest-md5", feature = "sasl-gssapi"))]
    sasl: Option<Sasl>,
}

impl fmt::Debug for SessionOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut f = f.debug_struct("SessionOptions");
        f.field("connect", &self.connect)
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
            .field("node_acls", &self.node_acls);
        #[cfg(feature = "tls")]
        f.field("tls", &self.tls);
        #[cfg(any(feature = "sasl-digest-md5", feature = "sasl-gssapi"))]
        f.field(
            "sasl",
            &self.sasl.as_ref().map(|s| (s.mechanism(), s.user())),
        );
        f.finish()
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
            owner: crate::layout::owner::default_label(),
            max_packet: DEFAULT_MAX_PACKET,
            node_acls: zk::Acls::anyone_all().to_vec(),
            #[cfg(feature = "tls")]
            tls: None,
            #[cfg(any(feature = "sasl-digest-md5", feature = "sasl-gssapi"))]
            sasl: None,
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

    /// Connects by TLS (feature `tls`), trusting the CAs of `config` and presenting its client
    /// certificate, if it has one. Every host of the connect string is then a TLS endpoint
    /// (the servers' `secureClientPort`, often 2281); a host written `tcp://host:port` stays
    /// plaintext, and `tcp+tls://host:port` says TLS explicitly.
    ///
    /// When no session can be opened, [`Session::connect`](super::Session::connect) tells why
    /// the handshake failed: [`Error::TlsUntrustedServer`], [`Error::TlsClientCertRefused`],
    /// [`Error::TlsHandshake`] (zookeeper-client reports every handshake failure as a
    /// connection that timed out, so the session makes one handshake of its own to see what
    /// failed, within one more connection timeout). `TCP_NODELAY` works as over plaintext.
    ///
    /// zookeeper-client uses rustls with the process's default crypto provider: unless the
    /// program installed one (`rustls::crypto::CryptoProvider::install_default`), the first TLS
    /// session installs aws-lc-rs's, which zookeeper-client builds in.
    ///
    /// ```
    /// # fn demo(ca_pem: &str) -> Result<(), zk_recipes::Error> {
    /// use zk_recipes::{SessionOptions, TlsConfig};
    /// let opts = SessionOptions::new("zk1:2281,zk2:2281").tls(TlsConfig::new(ca_pem)?);
    /// # let _ = opts; Ok(()) }
    /// ```
    #[cfg(feature = "tls")]
    pub fn tls(mut self, config: TlsConfig) -> Self {
        self.tls = Some(config);
        self
    }

    /// Authenticates every session by SASL DIGEST-MD5 as `user` (feature `sasl-digest-md5`):
    /// the servers' JAAS `Server` section names the users (`user_bob="secret"`), and
    /// ZooKeeper's ACLs know the session as `sasl:{user}`. A refusal (unknown user, wrong
    /// password) is [`Error::SaslFailed`]. DIGEST-MD5 proves the password without sending it,
    /// but nothing else on the connection is encrypted: use TLS (`SessionOptions::tls`) as well where
    /// the network is not trusted. The realm is the one the server offers (ZooKeeper's
    /// `zk-sasl-md5`); zookeeper-client 0.11 has no option to choose another.
    ///
    /// ```
    /// let opts = zk_recipes::SessionOptions::new("zk1:2181").sasl_digest_md5("bob", "bob-secret");
    /// # let _ = opts;
    /// ```
    #[cfg(feature = "sasl-digest-md5")]
    pub fn sasl_digest_md5(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.sasl = Some(Sasl::DigestMd5 {
            user: user.into(),
            password: password.into(),
        });
        self
    }

    /// Authenticates every session by SASL GSSAPI, Kerberos (feature `sasl-gssapi`, which
    /// needs the system's GSSAPI library): with the ticket in the process's credential cache
    /// (`kinit`), to the service principal `{service}/{hostname}` (`zookeeper`, and each
    /// server's host name from the connect string, unless `hostname` says otherwise).
    ///
    /// ```ignore
    /// let opts = zk_recipes::SessionOptions::new("zk1.example.com:2181")
    ///     .sasl_gssapi("zookeeper", None);
    /// ```
    #[cfg(feature = "sasl-gssapi")]
    pub fn sasl_gssapi(mut self, service: impl Into<String>, hostname: Option<String>) -> Self {
        self.sasl = Some(Sasl::Gssapi {
            service: service.into(),
            hostname,
        });
        self
    }

    /// The ACL of every node the recipes create: roots and their parents, a keyed lock's
    /// directories, anchors and contender nodes. Default: [`zk::Acls::anyone_all`], as
    /// Curator's default. [`zk::Acls::creator_all`] (ZooKeeper's `auth` scheme) grants
    /// everything to the identities the session authenticated as (SASL `sasl:{user}`,
    /// `digest_auth`'s `digest:{user}:{hash}`, a TLS client certificate's `x509:{subject}`) and
    /// nothing to anyone else; a session with no such identity gets `Zk(InvalidAcl)` from its
    /// first create.
    ///
    /// What ZooKeeper's ACLs protect, and what not:
    ///
    /// - An ACL belongs to one node, is set when the node is created and is not inherited:
    ///   nodes that existed before (a root made by someone else, with another ACL) keep theirs.
    /// - **Deleting a node is governed by its parent's ACL** (the parent's DELETE permission),
    ///   never by the node's own. A contender node with a creator-only ACL below a root anyone
    ///   may write is still deletable by anyone, which breaks the lock for its holder. To keep
    ///   others from deleting contenders, the root must deny them DELETE: let this setting
    ///   create the root (and its parents), or create it yourself with the ACL you want.
    /// - Creating a child needs CREATE on the parent: a creator-only root keeps other
    ///   identities out of the queue altogether (their acquisitions fail with
    ///   [`Error::NoAuth`] and leave no node).
    /// - Reading data and listing children need READ. Whether a node exists, and its stat (its
    ///   `ephemeralOwner`, times, child count), may not be protected: ZooKeeper 3.8.0 answers
    ///   `exists` to anyone who knows the path; 3.9.3 asks READ for it too (both tested).
    /// - Ephemeral nodes end with their session whatever the ACL; a `super` user (or a server
    ///   started with `skipACL`) bypasses every ACL.
    /// - The identities are only as safe as the connection: digest and DIGEST-MD5 credentials
    ///   and the data itself travel in clear without TLS (`SessionOptions::tls`, feature `tls`).
    ///
    /// ```
    /// use zk_recipes::{zookeeper_client::Acls, SessionOptions};
    /// let opts = SessionOptions::new("zk1:2181")
    ///     .digest_auth("billing", "secret")
    ///     .node_acls(Acls::creator_all());
    /// # let _ = opts;
    /// ```
    pub fn node_acls(mut self, acls: zk::Acls<'_>) -> Self {
        self.node_acls = acls.to_vec();
        self
    }

    /// The ACLs of the nodes recipes create.
    pub(crate) fn acls(&self) -> zk::Acls<'_> {
        zk::Acls::new(&self.node_acls)
    }

    /// Chooses when grants count as lost (see [`LossPolicy`]).
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
        // ACLs beyond the default's size (which the overhead covers).
        let acls: usize = self
            .node_acls
            .iter()
            .map(|acl| ACL_OVERHEAD + acl.scheme().len() + acl.id().len())
            .sum();
        let size = payload + REQUEST_OVERHEAD + acls.saturating_sub(DEFAULT_ACL_BYTES);
        within_limit(what, size, self.max_packet)
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
        let hosts = nodelay::hosts(&self.connect);
        if hosts.len() == 1 && hosts[0].1.is_empty() {
            return invalid("no host (expected host:port[,host:port...][/chroot])");
        }
        if hosts.iter().any(|(_, h)| h.is_empty()) {
            return invalid("an empty host between commas");
        }
        for (scheme, host) in hosts {
            let tls = match scheme {
                None => self.uses_tls(),
                Some("tcp") => false,
                Some("tcp+tls") => true,
                Some(_) => return invalid("unknown scheme (tcp:// or tcp+tls://)"),
            };
            // zookeeper-client panics on a TLS host that is no valid server name.
            #[cfg(feature = "tls")]
            if tls && !tls::valid_server_name(host) {
                return invalid("a TLS host must be a DNS name or an IP address");
            }
            #[cfg(not(feature = "tls"))]
            let _ = (tls, host);
            match scheme {
                None | Some("tcp") => {}
                Some("tcp+tls") if self.uses_tls() => {}
                Some("tcp+tls") => {
                    return invalid(
                        "tcp+tls:// needs TLS settings (SessionOptions::tls, feature tls)",
                    )
                }
                Some(_) => return invalid("unknown scheme (tcp:// or tcp+tls://)"),
            }
        }
        Ok(())
    }

    fn uses_tls(&self) -> bool {
        #[cfg(feature = "tls")]
        {
            self.tls.is_some()
        }
        #[cfg(not(feature = "tls"))]
        {
            false
        }
    }

    /// The error for a refused authentication.
    fn auth_failed(&self) -> Error {
        #[cfg(any(feature = "sasl-digest-md5", feature = "sasl-gssapi"))]
        if let Some(sasl) = &self.sasl {
            return Error::SaslFailed {
                mechanism: sasl.mechanism(),
                user: sasl.user(),
            };
        }
        Error::AuthFailed
    }

    /// Why no session could be opened within the connection timeout: with TLS, what a
    /// handshake of our own says; else (or if it tells nothing) [`Error::Unreachable`].
    async fn unreachable(&self) -> Error {
        #[cfg(feature = "tls")]
        if let Some(config) = &self.tls {
            let hosts = nodelay::hosts(&self.connect)
                .into_iter()
                .filter(|(scheme, _)| *scheme != Some("tcp"))
                .map(|(_, host)| host.to_owned())
                .collect();
            if let Some(err) = config.diagnose(hosts, self.connection_timeout).await {
                return err;
            }
        }
        Error::Unreachable {
            connect: self.connect.clone(),
            timeout: self.connection_timeout,
        }
    }

    /// zookeeper-client's connector with these options (timeouts, credentials, TLS).
    fn connector(&self) -> Result<zk::Connector> {
        let mut connector = zk::Client::connector()
            .with_session_timeout(self.session_timeout)
            .with_connection_timeout(self.connection_timeout);
        for (scheme, auth) in &self.auth {
            connector = connector.with_auth(scheme, auth);
        }
        #[cfg(any(feature = "sasl-digest-md5", feature = "sasl-gssapi"))]
        if let Some(sasl) = &self.sasl {
            connector = connector.with_sasl(sasl.options());
        }
        #[cfg(feature = "tls")]
        if let Some(config) = &self.tls {
            tls::ensure_provider();
            connector = connector.with_tls(config.zk_options()?);
        }
        Ok(connector)
    }

    /// Connects `connector` to the connect string (TLS for hosts without a scheme when TLS
    /// is set).
    async fn connect_with(
        &self,
        connector: zk::Connector,
    ) -> std::result::Result<zk::Client, zk::Error> {
        #[cfg(feature = "tls")]
        if self.uses_tls() {
            return connector.secure_connect(&self.connect).await;
        }
        connector.connect(&self.connect).await
    }

    /// A second client on the existing session `session` (with the same credentials), which
    /// takes the session over from the connection that has it: `close()` closes a session
    /// through it while someone else still holds a handle of the first client. One try per
    /// host (no backoff: the caller tries again at once), bounded by the connection timeout;
    /// [`Error::SessionExpired`] when the session is already over on the server.
    pub(super) async fn reattach(&self, session: zk::SessionInfo) -> Result<zk::Client> {
        let connector = self.connector()?.with_session(session).with_fail_eagerly();
        match tokio::time::timeout(self.connection_timeout, self.connect_with(connector)).await {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(err)) => Err(Error::zk(err, "/")),
            Err(_) => Err(Error::Unreachable {
                connect: self.connect.clone(),
                timeout: self.connection_timeout,
            }),
        }
    }

    pub(super) async fn open(&self) -> Result<zk::Client> {
        self.check_connect()?;
        let before = self.tcp_nodelay.then(Connections::now);
        let connector = self.connector()?;
        let connecting = self.connect_with(connector);
        match tokio::time::timeout(self.connection_timeout, connecting).await {
            Err(_) | Ok(Err(zk::Error::Timeout | zk::Error::NoHosts)) => {
                Err(self.unreachable().await)
            }
            Ok(Err(zk::Error::AuthFailed)) => Err(self.auth_failed()),
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

/// `Error::TooLarge` for a request of `size` bytes over the servers' `limit`: the one size
/// check, for every estimate of a request's size.
pub(crate) fn within_limit(what: &'static str, size: usize, limit: usize) -> Result<()> {
    if size > limit {
        return Err(Error::TooLarge { what, size, limit });
    }
    Ok(())
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
        assert!(SessionOptions::new("tcp://zk1:2181,zk2:2181/app")
            .check_connect()
            .is_ok());
        for bad in ["tcp+tls://zk1:2281", "http://zk1:2181"] {
            let err = SessionOptions::new(bad).check_connect().unwrap_err();
            assert!(
                matches!(err, Error::InvalidConnectString { .. }),
                "{bad:?}: {err}"
            );
        }
    }

    #[test]
    fn longer_acls_count_against_the_packet_limit() {
        let limit = 4096;
        let plain = SessionOptions::new("zk1:2181").max_packet_bytes(limit);
        let payload = limit - REQUEST_OVERHEAD;
        assert!(plain.check_size("data", payload).is_ok());
        assert!(plain
            .clone()
            .node_acls(zk::Acls::creator_all())
            .check_size("data", payload)
            .is_ok());
        let id = "x".repeat(100);
        let acls = [zk::Acl::new(
            zk::Permission::ALL,
            zk::AuthId::new("digest", &id),
        )];
        let long = plain.node_acls(zk::Acls::new(&acls));
        assert!(matches!(
            long.check_size("data", payload),
            Err(Error::TooLarge { .. })
        ));
    }
}
