//! [`Session`]: one ZooKeeper session at a time, its state for every recipe to follow, and a
//! fresh session after expiry.
//!
//! How to react to connection loss is [`LossPolicy`]'s to say.

mod cleanup;
mod epoch;
mod lease;
mod options;
mod slots;
mod supervisor;

use std::fmt;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tracing::{info, info_span, Instrument};
use zookeeper_client as zk;

use crate::error::{Error, Result};
use cleanup::{janitor, Cleanup};
pub(crate) use cleanup::{Deleted, Release};
pub(crate) use epoch::Epoch;
pub(crate) use lease::{now as lease_now, Interest as LeaseInterest};
pub use options::{LossPolicy, SessionOptions};

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

struct Inner {
    options: SessionOptions,
    current: watch::Receiver<Option<Arc<Epoch>>>,
    state: watch::Receiver<SessionState>,
    janitor: mpsc::UnboundedSender<Cleanup>,
    // `true` after `close()`; dropped with the last `Session`: either stops the supervisor,
    // which closes the ZooKeeper session.
    shutdown: watch::Sender<bool>,
    /// The layers above's own state, per session, by type (see `slots.rs`).
    slots: slots::Slots,
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
    /// [`Error::InvalidConnectString`] for a malformed connect string, [`Error::Unreachable`]
    /// when no server answers within the connection timeout (or no host name resolves),
    /// [`Error::AuthFailed`] (also when the servers require SASL and none is configured). With
    /// SASL, [`Error::SaslFailed`]. With TLS (feature `tls`), [`Error::TlsUntrustedServer`],
    /// [`Error::TlsClientCertRefused`] or [`Error::TlsHandshake`] instead of `Unreachable` when
    /// a handshake fails, within one more connection timeout, and [`Error::InvalidTls`].
    /// [`Error::NoChroot`] when the connect string's chroot does not exist.
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
        // A chroot that is missing would refuse every path under it with a bare NoNode.
        if let Some(chroot) = crate::nodelay::chroot(&options.connect) {
            let stat =
                tokio::time::timeout(options.connection_timeout, client.check_stat("/")).await;
            if let Ok(Ok(None)) = stat {
                return Err(Error::NoChroot {
                    chroot: chroot.to_owned(),
                });
            }
        }
        let epoch = Arc::new(Epoch::new(client, options.loss_policy, options.max_packet));
        info!(session_id = format_args!("{:#x}", epoch.id), timeout = ?epoch.timeout, "session connected");
        let (state_tx, state_rx) = watch::channel(SessionState::Connected {
            session_id: epoch.id,
        });
        let (current_tx, current_rx) = watch::channel(Some(epoch.clone()));
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let (janitor_tx, janitor_rx) = mpsc::unbounded_channel();
        tokio::spawn(lease::heartbeat(epoch.clone()));
        tokio::spawn(supervisor::supervise(
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
                slots: slots::Slots::default(),
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

    /// Refuses a request of `payload` bytes that would not fit the servers' packet limit.
    pub(crate) fn check_size(&self, what: &'static str, payload: usize) -> Result<()> {
        self.inner.options.check_size(what, payload)
    }

    /// This session's value of type `T` (made with `T::default()` on first use): the state a
    /// layer above keeps per session, which the session itself never names.
    pub(crate) fn slot<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        self.inner.slots.get::<T>()
    }

    /// The ACLs of the nodes recipes create ([`SessionOptions::node_acls`]).
    pub(crate) fn acls(&self) -> zk::Acls<'_> {
        self.inner.options.acls()
    }

    /// The owner label of the lock nodes made on this session (see [`SessionOptions::owner`]).
    pub(crate) fn owner(&self) -> &str {
        &self.inner.options.owner
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
    /// The handle shares the session's connection. zookeeper-client has no close of its own
    /// and ends a ZooKeeper session only when every handle of its client is gone, so while you
    /// keep one, [`close`](Session::close) (or the last `Session` dropped) closes the session
    /// over a second connection instead, after a grace of 0.1 s (0.1 to 0.7 s in all in the
    /// tests: the first client may take the session back a few times before the close lands,
    /// and the second one attaches again at once). The handle then answers `SessionExpired`:
    /// at once as a rule, or, if its connection is one the server stopped answering, once
    /// zookeeper-client gives up on it (its connection timeout, at most 2/5 of the session
    /// timeout; until then the request waits, and it may first answer a connection error).
    /// After an expiry the handle answers `SessionExpired` too; ask again for the new
    /// session's.
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
    /// # async fn demo(session: zk_recipes::Session) -> Result<(), Box<dyn std::error::Error>> {
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
    pub(crate) fn clean_up(&self, epoch: Arc<Epoch>, path: String, how: Release) {
        if !epoch.is_lost() {
            let _ = self.inner.janitor.send(Cleanup { epoch, path, how });
        }
    }

    /// Closes the ZooKeeper session: its ephemeral nodes (every lock and candidacy held
    /// through it) are deleted at once, and every guard reports itself lost. Returns once the
    /// server confirmed the close (bounded by the connection timeout), in a round trip, or
    /// in 0.1 s or more while someone keeps a [`client`](Session::client) handle (see there).
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
