//! [`Session`]: one ZooKeeper session at a time, its state for every recipe to follow, and a
//! fresh session after expiry.
//!
//! # Reacting to connection loss
//!
//! A ZooKeeper session survives short disconnects: while the client reconnects (to the same or
//! another server) within the session timeout, every ephemeral node, lock and leadership stays.
//! The session state goes [`SessionState::Suspended`] meanwhile; whether that already counts as
//! "lost" for guards is the [`LossPolicy`] you choose:
//!
//! - [`LossPolicy::Expiry`] (the default): a grant is lost when its session expires, when its node
//!   is deleted, or when the client stayed disconnected for a whole session timeout (then the
//!   server has expired the session or is about to, so the client gives it up itself, closes it
//!   and opens a new one). Between a disconnect and that moment another worker may already hold
//!   the lock: storage must check the [`FencingToken`](crate::FencingToken).
//! - [`LossPolicy::Suspension`]: a grant is lost as soon as the connection is suspended, and
//!   stays lost even if the session reconnects (its node is then deleted, so the queue moves
//!   on). Stricter, like Curator's standard error policy: a holder learns it must stop before
//!   the ensemble can expire its session and grant anyone else.
//!
//! Nothing here depends on the client's clock for safety; the fencing token does.

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tracing::{debug, info, info_span, warn, Instrument};
use zookeeper_client as zk;

use crate::error::{connection_lost, Error, Result};
use crate::nodelay::{self, Connections};
use crate::queue::delete_contender;

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

/// The state of a [`Session`], as published by [`Session::state`] and [`Session::watch_state`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionState {
    /// Connected; `session_id` is ZooKeeper's id of the current session.
    Connected {
        /// ZooKeeper's session id.
        session_id: i64,
    },
    /// Disconnected from every server; the session may still be alive on the ensemble.
    Suspended {
        /// ZooKeeper's session id.
        session_id: i64,
    },
    /// The session expired (or was given up after a long suspension); a new one is being
    /// opened, and everything granted on the old one is lost.
    Expired {
        /// The id of the session that expired.
        session_id: i64,
    },
    /// [`Session::close`] was called or the last handle was dropped.
    Closed,
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
    connect: String,
    session_timeout: Duration,
    connection_timeout: Duration,
    auth: Vec<(String, Vec<u8>)>,
    loss_policy: LossPolicy,
    tcp_nodelay: bool,
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
            .finish()
    }
}

impl SessionOptions {
    /// Options with defaults: 10 s session timeout, 5 s connection timeout, no auth,
    /// [`LossPolicy::Expiry`], `TCP_NODELAY` on.
    pub fn new(connect: impl Into<String>) -> SessionOptions {
        SessionOptions {
            connect: connect.into(),
            session_timeout: Duration::from_secs(10),
            connection_timeout: Duration::from_secs(5),
            auth: Vec::new(),
            loss_policy: LossPolicy::Expiry,
            tcp_nodelay: true,
        }
    }

    /// The session timeout to ask for (the server clamps it to its min/max).
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// How long [`Session::connect`] (and each reconnect after expiry) waits for a server.
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }

    /// Adds `digest` authentication (`user:password`), applied to every session opened.
    pub fn digest_auth(mut self, user: &str, password: &str) -> Self {
        self.auth.push((
            "digest".to_owned(),
            format!("{user}:{password}").into_bytes(),
        ));
        self
    }

    /// Chooses when grants count as lost.
    pub fn loss_policy(mut self, policy: LossPolicy) -> Self {
        self.loss_policy = policy;
        self
    }

    /// Whether to turn Nagle's algorithm off on the session's connections (default: on, as
    /// Java's ZooKeeper client does). zookeeper-client leaves it on, which makes every pair of
    /// requests sent back to back (an acquire's create and listing) cost two round trips.
    /// It has no option for it, so on Linux the session finds its sockets by the servers'
    /// addresses among those that appeared while it connected, or since its last connect when
    /// it reconnects (see `src/nodelay.rs`); another client's connection to the same servers
    /// opened in that time gets it too. Elsewhere it does nothing.
    ///
    /// ```
    /// let opts = zk_recipes::SessionOptions::new("127.0.0.1:2181").tcp_nodelay(false);
    /// # let _ = opts;
    /// ```
    pub fn tcp_nodelay(mut self, on: bool) -> Self {
        self.tcp_nodelay = on;
        self
    }

    /// The servers' addresses, when their connections get `TCP_NODELAY`.
    async fn nodelay_servers(&self) -> Option<Vec<SocketAddr>> {
        if self.tcp_nodelay {
            Some(nodelay::servers(&self.connect, self.connection_timeout).await)
        } else {
            None
        }
    }

    async fn open(&self) -> Result<zk::Client> {
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
            Ok(Err(err)) => Err(Error::Zk(err)),
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

/// The life of one ZooKeeper session as seen by the grants made on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EpochState {
    Live,
    Suspended,
    Lost,
}

/// One ZooKeeper session. Grants remember the epoch they were made on and are lost with it.
pub(crate) struct Epoch {
    id: i64,
    timeout: Duration,
    client: StdMutex<Option<zk::Client>>,
    state: watch::Sender<EpochState>,
    policy: LossPolicy,
    /// How many times this session was suspended. Under [`LossPolicy::Suspension`] a grant
    /// made before a suspension is lost for good, even when the session reconnects.
    suspensions: AtomicU64,
    /// Live grants' nodes, with the suspension count at grant time: under the strict policy
    /// the nodes of grants lost to a suspension are deleted when the session reconnects, so a
    /// guard kept after `lost()` never blocks the queue.
    grants: StdMutex<HashMap<String, u64>>,
}

impl Epoch {
    /// ZooKeeper's session id.
    pub fn id(&self) -> i64 {
        self.id
    }

    /// A client handle, unless this session is over.
    pub fn client(&self) -> Result<zk::Client> {
        match *self.state.borrow() {
            EpochState::Lost => return Err(Error::SessionExpired),
            EpochState::Live | EpochState::Suspended => {}
        }
        self.client
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or(Error::SessionExpired)
    }

    /// Registers a grant's node; returns the suspension count the grant is made under.
    pub fn register(&self, path: &str) -> u64 {
        let mut grants = self.grants.lock().unwrap_or_else(|e| e.into_inner());
        let since = self.suspensions.load(AtomicOrdering::SeqCst);
        grants.insert(path.to_owned(), since);
        since
    }

    pub fn unregister(&self, path: &str) {
        self.grants
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(path);
    }

    /// Under the strict policy: the nodes of grants made before the latest suspension.
    fn take_suspended_grants(&self) -> Vec<String> {
        if self.policy != LossPolicy::Suspension {
            return Vec::new();
        }
        let now = self.suspensions.load(AtomicOrdering::SeqCst);
        let mut grants = self.grants.lock().unwrap_or_else(|e| e.into_inner());
        let stale: Vec<String> = grants
            .iter()
            .filter(|(_, &at)| at < now)
            .map(|(p, _)| p.clone())
            .collect();
        for path in &stale {
            grants.remove(path);
        }
        stale
    }

    /// Whether a grant made under suspension count `since` still holds under the policy.
    pub fn holds(&self, since: u64) -> bool {
        let state = *self.state.borrow();
        match self.policy {
            _ if state == EpochState::Lost => false,
            LossPolicy::Expiry => true,
            LossPolicy::Suspension => {
                state == EpochState::Live && self.suspensions.load(AtomicOrdering::SeqCst) == since
            }
        }
    }

    pub fn is_lost(&self) -> bool {
        *self.state.borrow() == EpochState::Lost
    }

    /// Resolves when a grant made under suspension count `since` must count as lost.
    pub async fn lost(&self, since: u64) {
        let mut rx = self.state.subscribe();
        let _ = rx.wait_for(|_| !self.holds(since)).await;
    }

    /// Resolves when the ZooKeeper session is over (expired, given up or closed).
    pub async fn ended(&self) {
        let mut rx = self.state.subscribe();
        let _ = rx.wait_for(|s| *s == EpochState::Lost).await;
    }

    /// Runs an idempotent request on this session, again after each reconnect while the
    /// connection breaks, mapping other errors about `path` to typed ones.
    pub async fn retry<T, F, Fut>(&self, path: &str, mut request: F) -> Result<T>
    where
        F: FnMut(zk::Client) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<T, zk::Error>>,
    {
        loop {
            match request(self.client()?).await {
                Ok(value) => return Ok(value),
                Err(e) if connection_lost(&e) => self.wait_reconnect().await,
                Err(e) => return Err(Error::zk(e, path)),
            }
        }
    }

    /// After a `ConnectionLoss`: waits until the session is connected again or over. The
    /// state watcher may not have seen the disconnect yet, hence the short pause first.
    pub async fn wait_reconnect(&self) {
        tokio::time::sleep(Duration::from_millis(10)).await;
        let mut rx = self.state.subscribe();
        let _ = rx.wait_for(|s| *s != EpochState::Suspended).await;
    }

    fn set(&self, state: EpochState) {
        self.state.send_if_modified(|s| {
            let changed = *s != state && *s != EpochState::Lost;
            if changed {
                if state == EpochState::Suspended {
                    self.suspensions.fetch_add(1, AtomicOrdering::SeqCst);
                }
                *s = state;
            }
            changed
        });
    }

    /// Marks the session over and drops our client handle; once in-flight operations finish,
    /// zookeeper-client closes the session, which deletes its ephemeral nodes.
    fn end(&self) {
        self.set(EpochState::Lost);
        self.client.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

impl fmt::Debug for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Epoch({:#x}, {:?})", self.id, *self.state.borrow())
    }
}

/// A node to delete in the background (cancelled acquisitions, dropped guards).
pub(crate) struct Cleanup {
    pub epoch: Arc<Epoch>,
    pub path: String,
    /// Whether the node is the head of its queue (see `queue::delete_contender`).
    pub head: bool,
}

struct Inner {
    options: SessionOptions,
    current: watch::Receiver<Option<Arc<Epoch>>>,
    state: watch::Receiver<SessionState>,
    janitor: mpsc::UnboundedSender<Cleanup>,
    // `true` after `close()`; dropped with the last `Session`: either stops the supervisor,
    // which closes the ZooKeeper session.
    shutdown: watch::Sender<bool>,
}

/// A ZooKeeper session shared by every recipe made from it, with its state published and a
/// fresh ZooKeeper session opened after expiry.
///
/// Cheap to clone: clones share the session. The ZooKeeper session is closed by
/// [`close`](Session::close) or when the last clone (and every guard made from it) is dropped.
///
/// # Example
///
/// ```no_run
/// use zk_recipes::{Session, SessionOptions, SessionState};
///
/// # async fn demo() -> Result<(), zk_recipes::Error> {
/// let session = Session::connect(SessionOptions::new("127.0.0.1:2181")).await?;
/// assert!(matches!(session.state(), SessionState::Connected { .. }));
/// session.close().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Session {
    inner: Arc<Inner>,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("connect", &self.inner.options.connect)
            .field("state", &self.state())
            .finish()
    }
}

impl Session {
    /// Connects and opens a ZooKeeper session. Must be called inside a tokio runtime.
    ///
    /// # Errors
    ///
    /// [`Error::Unreachable`] when no server answers within the connection timeout,
    /// [`Error::AuthFailed`], or [`Error::Zk`] for a malformed connect string.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future before it completes opens no session (one that was
    /// being established is closed when its handle drops).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_recipes::Error> {
    /// use zk_recipes::{Session, SessionOptions};
    /// let session = Session::connect(SessionOptions::new("127.0.0.1:2181/app")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(options: SessionOptions) -> Result<Session> {
        let span = info_span!("session_connect", connect = %options.connect);
        let client = options.open().instrument(span).await?;
        let epoch = new_epoch(client, options.loss_policy);
        info!(session_id = format_args!("{:#x}", epoch.id), timeout = ?epoch.timeout, "session connected");
        let (state_tx, state_rx) = watch::channel(SessionState::Connected {
            session_id: epoch.id,
        });
        let (current_tx, current_rx) = watch::channel(Some(epoch.clone()));
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let (janitor_tx, janitor_rx) = mpsc::unbounded_channel();
        tokio::spawn(supervise(
            options.clone(),
            epoch,
            state_tx,
            current_tx,
            shutdown_rx,
        ));
        tokio::spawn(janitor(janitor_rx));
        Ok(Session {
            inner: Arc::new(Inner {
                options,
                current: current_rx,
                state: state_rx,
                janitor: janitor_tx,
                shutdown: shutdown_tx,
            }),
        })
    }

    /// The current state.
    ///
    /// ```no_run
    /// # async fn demo(session: zk_recipes::Session) {
    /// use zk_recipes::SessionState;
    /// if let SessionState::Suspended { .. } = session.state() {
    ///     eprintln!("ZooKeeper unreachable; holding on");
    /// }
    /// # }
    /// ```
    pub fn state(&self) -> SessionState {
        *self.inner.state.borrow()
    }

    /// A receiver of state changes, for as many followers as you like.
    ///
    /// ```no_run
    /// # async fn demo(session: zk_recipes::Session) {
    /// let mut states = session.watch_state();
    /// while states.changed().await.is_ok() {
    ///     println!("session is now {:?}", *states.borrow());
    /// }
    /// # }
    /// ```
    pub fn watch_state(&self) -> watch::Receiver<SessionState> {
        self.inner.state.clone()
    }

    /// The id of the current ZooKeeper session, if one is open.
    ///
    /// ```no_run
    /// # fn demo(session: zk_recipes::Session) {
    /// println!("session {:#x?}", session.session_id());
    /// # }
    /// ```
    pub fn session_id(&self) -> Option<i64> {
        self.inner.current.borrow().as_ref().map(|e| e.id)
    }

    /// The connect string this session uses.
    ///
    /// ```no_run
    /// # fn demo(session: zk_recipes::Session) {
    /// println!("{}", session.connect_string());
    /// # }
    /// ```
    pub fn connect_string(&self) -> &str {
        &self.inner.options.connect
    }

    /// The underlying `zookeeper_client::Client` of the current ZooKeeper session, for
    /// operations the recipes do not cover. Waits (up to the connection timeout) while a new
    /// session is being opened after an expiry.
    ///
    /// # Errors
    ///
    /// [`Error::SessionClosed`] after [`close`](Session::close); [`Error::Unreachable`] when no
    /// new session could be opened in time.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    ///
    /// ```no_run
    /// # async fn demo(session: zk_recipes::Session) -> Result<(), zk_recipes::Error> {
    /// let client = session.client().await?;
    /// let children = client.list_children("/").await?;
    /// # Ok(()) }
    /// ```
    pub async fn client(&self) -> Result<zk::Client> {
        self.epoch().await?.client()
    }

    /// The current epoch (ZooKeeper session), waiting for one after an expiry.
    pub(crate) async fn epoch(&self) -> Result<Arc<Epoch>> {
        if *self.inner.shutdown.borrow() {
            return Err(Error::SessionClosed);
        }
        let mut current = self.inner.current.clone();
        let wait = async move {
            current
                .wait_for(|e| e.as_ref().is_some_and(|e| !e.is_lost()))
                .await
                .map(|e| e.clone())
        };
        match tokio::time::timeout(self.inner.options.connection_timeout, wait).await {
            Ok(Ok(epoch)) => Ok(epoch.expect("checked by wait_for")),
            Ok(Err(_)) => Err(Error::SessionClosed),
            Err(_) => Err(Error::Unreachable {
                connect: self.inner.options.connect.clone(),
                timeout: self.inner.options.connection_timeout,
            }),
        }
    }

    /// Queues a node for deletion in the background. Never blocks, never panics, needs no
    /// runtime on the calling thread.
    /// `head`: the node is the first live one of its queue (see `queue::delete_contender`).
    pub(crate) fn clean_up(&self, epoch: Arc<Epoch>, path: String, head: bool) {
        if !epoch.is_lost() {
            let _ = self.inner.janitor.send(Cleanup { epoch, path, head });
        }
    }

    /// Closes the ZooKeeper session: its ephemeral nodes (every lock and candidacy held
    /// through it) are deleted at once, and every guard reports itself lost.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the close is initiated before the first await; the future only waits for
    /// the supervisor to finish.
    ///
    /// ```no_run
    /// # async fn demo(session: zk_recipes::Session) {
    /// session.close().await;
    /// assert_eq!(session.state(), zk_recipes::SessionState::Closed);
    /// # }
    /// ```
    pub async fn close(&self) {
        self.inner.shutdown.send_replace(true);
        let mut state = self.inner.state.clone();
        let _ = state.wait_for(|s| *s == SessionState::Closed).await;
    }
}

fn new_epoch(client: zk::Client, policy: LossPolicy) -> Arc<Epoch> {
    Arc::new(Epoch {
        id: client.session_id().0,
        timeout: client.session_timeout(),
        client: StdMutex::new(Some(client)),
        state: watch::channel(EpochState::Live).0,
        policy,
        suspensions: AtomicU64::new(0),
        grants: StdMutex::new(HashMap::new()),
    })
}

/// Follows the current ZooKeeper session's state, publishes it, gives up a session that stayed
/// disconnected for a whole session timeout, and opens a new session after expiry.
async fn supervise(
    options: SessionOptions,
    mut epoch: Arc<Epoch>,
    state: watch::Sender<SessionState>,
    current: watch::Sender<Option<Arc<Epoch>>>,
    mut shutdown: watch::Receiver<bool>,
) {
    // Resolved once (bounded): a reconnect must not wait for a name server.
    let nodelay_servers = options.nodelay_servers().await;
    loop {
        let span = info_span!("session", session_id = format_args!("{:#x}", epoch.id));
        let Ok(client) = epoch.client() else { return };
        let mut watcher = client.state_watcher();
        drop(client);
        let servers = nodelay_servers.as_deref();
        let closing = follow(&epoch, &mut watcher, &state, &mut shutdown, servers)
            .instrument(span)
            .await;
        epoch.end();
        if closing {
            // With our handle gone, zookeeper-client sends closeSession once the last request
            // in flight is done: wait (bounded) for the server's answer, so that a process
            // exiting right after `close().await` leaves no ephemeral node behind.
            let closed = async {
                while !watcher.peek_state().is_terminated() {
                    watcher.changed().await;
                }
            };
            if tokio::time::timeout(options.connection_timeout, closed)
                .await
                .is_err()
            {
                warn!(
                    "the server did not confirm the close in time (a client handle still in use?)"
                );
            }
            current.send_replace(None);
            state.send_replace(SessionState::Closed);
            info!(
                session_id = format_args!("{:#x}", epoch.id),
                "session closed"
            );
            return;
        }
        warn!(
            session_id = format_args!("{:#x}", epoch.id),
            "session expired; opening a new one"
        );
        state.send_replace(SessionState::Expired {
            session_id: epoch.id,
        });
        let mut backoff = Duration::from_millis(50);
        epoch = loop {
            tokio::select! {
                biased;
                _ = closed(&mut shutdown) => {
                    current.send_replace(None);
                    state.send_replace(SessionState::Closed);
                    return;
                }
                opened = options.open() => match opened {
                    Ok(client) => break new_epoch(client, options.loss_policy),
                    Err(err) => {
                        debug!(%err, "reconnect failed; retrying");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(2));
                    }
                },
            }
        };
        info!(
            session_id = format_args!("{:#x}", epoch.id),
            "new session connected"
        );
        current.send_replace(Some(epoch.clone()));
        state.send_replace(SessionState::Connected {
            session_id: epoch.id,
        });
    }
}

/// Follows one ZooKeeper session until it is over; returns whether we are closing.
async fn follow(
    epoch: &Arc<Epoch>,
    watcher: &mut zk::StateWatcher,
    state: &watch::Sender<SessionState>,
    shutdown: &mut watch::Receiver<bool>,
    nodelay_servers: Option<&[SocketAddr]>,
) -> bool {
    let id = epoch.id;
    let mut suspended_since: Option<tokio::time::Instant> = None;
    // The connections to the servers since ours was last set up: when the client is back
    // (it reconnects by itself, often before we hear it was gone), its new connection is
    // among those that appeared since.
    let mut known = nodelay_servers.map(|_| Connections::now());
    loop {
        let give_up = suspended_since.map(|t| t + epoch.timeout);
        tokio::select! {
            biased;
            _ = closed(shutdown) => return true,
            _ = sleep_until(give_up) => {
                warn!("disconnected for a whole session timeout; giving the session up");
                return false;
            }
            zk_state = watcher.changed() => match zk_state {
                zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                    info!("session reconnected");
                    if let (Some(before), Some(servers)) = (&known, nodelay_servers) {
                        let set = before.set_nodelay_on_new(servers);
                        debug!(connections = set, "TCP_NODELAY set");
                        known = Some(Connections::now());
                    }
                    suspended_since = None;
                    epoch.set(EpochState::Live);
                    for path in epoch.take_suspended_grants() {
                        info!(node = %path, "deleting a grant lost to the suspension");
                        tokio::spawn(delete_node(epoch.clone(), path, false));
                    }
                    state.send_replace(SessionState::Connected { session_id: id });
                }
                zk::SessionState::Disconnected => {
                    warn!("session suspended (disconnected)");
                    suspended_since.get_or_insert_with(tokio::time::Instant::now);
                    epoch.set(EpochState::Suspended);
                    state.send_replace(SessionState::Suspended { session_id: id });
                }
                // Closed without our close: treat like expiry (the reconnect loop notices a
                // shutdown first).
                zk::SessionState::Closed | zk::SessionState::Expired | zk::SessionState::AuthFailed => return false,
            },
        }
    }
}

/// Resolves on `close()` or when the last `Session` is dropped.
async fn closed(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|closed| *closed).await;
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// Deletes abandoned contender nodes, each in its own task so one slow delete holds up none.
async fn janitor(mut rx: mpsc::UnboundedReceiver<Cleanup>) {
    while let Some(job) = rx.recv().await {
        tokio::spawn(delete_node(job.epoch, job.path, job.head));
    }
}

/// Deletes `path` on `epoch`'s session, retrying across disconnects; nothing to do once the
/// session is over (the server deletes ephemeral nodes with it). `head` as for
/// `queue::delete_contender`.
pub(crate) async fn delete_node(epoch: Arc<Epoch>, path: String, head: bool) -> Result<()> {
    loop {
        let client = epoch.client()?;
        match delete_contender(&client, &path, head).await {
            Ok(()) | Err(zk::Error::NoNode) => {
                debug!(%path, "contender node deleted");
                return Ok(());
            }
            Err(e) if connection_lost(&e) => {
                drop(client);
                epoch.wait_reconnect().await;
            }
            Err(err) => return Err(Error::zk(err, &path)),
        }
    }
}
