//! [`ZkKeptNode`]: a node the library keeps, as Curator's `PersistentNode` does: made again
//! in each new ZooKeeper session (for the ephemeral modes) and after anyone deletes it, with
//! the latest data set on it; deleted when the handle closes or drops. This file: the handle
//! and its modes; `keeper/`: the task that keeps the node; `claims.rs`: one kept node per
//! path on a session.
//!
//! Ownership. The library deletes and writes only a node it made: an ephemeral node whose
//! `ephemeralOwner` is one of the sessions this handle made it in, a persistent (or TTL) node
//! whose creation zxid is the one its create returned. A node someone else made at the path
//! (a namesake) is never touched: the kept node stays out (a WARN event says so) until it goes.
//! A persistent create whose reply was lost is recognised by its data and by a creation zxid
//! later than the parent's last child change read just before sending: a namesake made by
//! someone else in that instant with the very same data would be taken for ours.

mod claims;
mod keeper;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::{debug, debug_span, Instrument};

use crate::error::{Error, Result};
use crate::path::ZkPath;
use crate::session::Session;

use claims::Claim;
use keeper::Shared;

/// The largest TTL ZooKeeper takes (its `EphemeralType` TTL field, 40 bits of milliseconds).
const TTL_MAX: Duration = Duration::from_millis(0x00FF_FFFF_FFFF);

/// What kind of node a [`ZkKeptNode`] keeps (Curator's `CreateMode` for a `PersistentNode`).
///
/// ```
/// use std::time::Duration;
/// use zk_recipes::KeptMode;
///
/// let modes = [
///     KeptMode::Ephemeral,
///     KeptMode::ProtectedEphemeralSequential,
///     KeptMode::Persistent,
///     KeptMode::Ttl(Duration::from_secs(60)),
/// ];
/// assert!(modes[0].is_ephemeral() && !modes[2].is_ephemeral());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeptMode {
    /// An ephemeral node at the path: gone with its session, made again in the next.
    Ephemeral,
    /// An ephemeral sequential node in Curator's protected form, `{parent}/_c_{uuid}-{name}NNNNNNNNNN`
    /// (the path's last component is the name): its path changes with each re-creation.
    ProtectedEphemeralSequential,
    /// A persistent node at the path: it outlives sessions; made again when deleted.
    Persistent,
    /// A persistent node with a time to live (ZooKeeper 3.5.3+ with
    /// `zookeeper.extendedTypesEnabled=true`, else [`Error::TtlRefused`]): the server deletes
    /// it once it has had no children and no change for the TTL; made again when it goes.
    Ttl(Duration),
}

impl KeptMode {
    /// Whether the node goes with its session.
    ///
    /// ```
    /// assert!(zk_recipes::KeptMode::Ephemeral.is_ephemeral());
    /// ```
    pub fn is_ephemeral(self) -> bool {
        matches!(
            self,
            KeptMode::Ephemeral | KeptMode::ProtectedEphemeralSequential
        )
    }
}

/// Where a [`ZkKeptNode`] is, as its keeper knows.
///
/// ```
/// use zk_recipes::KeptState;
///
/// let state = KeptState::Created("/services/a".into());
/// assert_eq!(state.path(), Some("/services/a"));
/// assert_eq!(KeptState::Missing.path(), None);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeptState {
    /// The node exists as ours, at this path (the protected mode's changes with each
    /// re-creation).
    Created(String),
    /// The node is not there as ours right now: not made yet, deleted, its session expired,
    /// or another session's node is at the path.
    Missing,
    /// The keeper has stopped: closed, dropped, its session closed, or it failed before its
    /// first creation (see [`ZkKeptNode::created`]).
    Stopped,
}

impl KeptState {
    /// The node's path while it exists as ours.
    ///
    /// ```
    /// assert_eq!(zk_recipes::KeptState::Stopped.path(), None);
    /// ```
    pub fn path(&self) -> Option<&str> {
        match self {
            KeptState::Created(path) => Some(path),
            _ => None,
        }
    }
}

/// How a kept node is made, besides its mode (the group's members are made strictly).
pub(crate) struct Options {
    /// The data of the parent, made as a container when missing (its own parents persistent).
    pub parent_data: Vec<u8>,
    /// Whether retryable errors before the first creation are retried (`false`: the first
    /// error ends the keeper, and [`ZkKeptNode::created`] returns it).
    pub patient: bool,
    /// What the node is, for [`Error::TooLarge`].
    pub what: &'static str,
}

/// A node kept by the library (Curator's `PersistentNode`): an ephemeral, protected
/// ephemeral-sequential, persistent or TTL node at a path, made again in each new ZooKeeper
/// session (the ephemeral modes) and after anyone deletes it, with the data last given to
/// [`set_data`](ZkKeptNode::set_data). Its parent is made as a container when missing, as
/// Curator makes it.
///
/// [`created`](ZkKeptNode::created) waits until the node exists; [`watch_state`](ZkKeptNode::watch_state)
/// follows it ([`KeptState`]). [`close`](ZkKeptNode::close) (or dropping the handle, in the
/// background) stops keeping it and deletes it if it is still ours: a node someone else made at
/// the path is never written or deleted (see the module docs on ownership).
///
/// # Example
///
/// ```no_run
/// use zk_recipes::{KeptMode, Session, SessionOptions, ZkKeptNode};
///
/// # async fn demo() -> Result<(), zk_recipes::Error> {
/// let session = Session::connect(SessionOptions::new("127.0.0.1:2181")).await?;
/// let node = ZkKeptNode::start(&session, "/workers/w-7", KeptMode::Ephemeral, b"idle")?;
/// node.created().await?;
/// node.set_data(b"busy").await?;
/// node.close().await?;
/// # Ok(()) }
/// ```
pub struct ZkKeptNode {
    shared: Arc<Shared>,
    state: watch::Receiver<KeptState>,
    /// Dropped (or sent `true`): the keeper stops and deletes the node if it is ours.
    stop: watch::Sender<bool>,
    task: Option<tokio::task::JoinHandle<Result<()>>>,
}

impl fmt::Debug for ZkKeptNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkKeptNode")
            .field("path", &self.shared.path.as_str())
            .field("mode", &self.shared.mode)
            .field("state", &*self.state.borrow())
            .finish()
    }
}

impl ZkKeptNode {
    /// Starts keeping a node at `path` (relative to the session's chroot) as `mode` with
    /// `data`: the keeper, a task of its own, makes it at once and again whenever it goes.
    /// Returns without waiting for the node ([`created`](ZkKeptNode::created) waits). Must be
    /// called within a Tokio runtime.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`] for a malformed path (or `/`), [`Error::TooLarge`] for data over
    /// the server's limit, [`Error::TtlRefused`] for a TTL of zero or over ZooKeeper's
    /// largest, [`Error::MemberIdTaken`] when another kept node of this session keeps the
    /// path (one per path and session). Nothing is sent on an error.
    ///
    /// ```no_run
    /// # fn demo(session: &zk_recipes::Session) -> Result<(), zk_recipes::Error> {
    /// use zk_recipes::{KeptMode, ZkKeptNode};
    /// let node = ZkKeptNode::start(session, "/workers/w-", KeptMode::ProtectedEphemeralSequential, b"")?;
    /// # Ok(()) }
    /// ```
    pub fn start(session: &Session, path: &str, mode: KeptMode, data: &[u8]) -> Result<ZkKeptNode> {
        let options = Options {
            parent_data: Vec::new(),
            patient: true,
            what: "a kept node",
        };
        ZkKeptNode::start_with(session, ZkPath::new(path)?, mode, data, options)
    }

    /// [`start`](ZkKeptNode::start) with the crate's own options (a group's marked parent,
    /// a strict first creation).
    pub(crate) fn start_with(
        session: &Session,
        path: ZkPath,
        mode: KeptMode,
        data: &[u8],
        options: Options,
    ) -> Result<ZkKeptNode> {
        if path.as_str() == "/" {
            return Err(Error::InvalidPath {
                path: path.as_str().to_owned(),
                reason: "the root cannot be a kept node",
            });
        }
        if let KeptMode::Ttl(ttl) = mode {
            if ttl.is_zero() || ttl > TTL_MAX {
                return Err(Error::TtlRefused {
                    path: path.as_str().to_owned(),
                    reason: "a TTL is at least 1 ms and at most 2^40 - 1 ms",
                });
            }
        }
        // The protected name adds `_c_{uuid}-` and ten digits.
        let extra = if mode == KeptMode::ProtectedEphemeralSequential {
            50
        } else {
            0
        };
        session.check_size(options.what, path.as_str().len() + extra + data.len())?;
        // One kept node per path on a session: a second would take the first's node for its own.
        let claim = match mode {
            KeptMode::ProtectedEphemeralSequential => None,
            _ => Some(Claim::new(session, path.as_str())?),
        };
        let (state_tx, state) = watch::channel(KeptState::Missing);
        let (stop, stopped) = watch::channel(false);
        let shared = Arc::new(Shared::new(
            session.clone(),
            path,
            mode,
            data,
            options,
            state_tx,
        ));
        let span = debug_span!("kept_node", path = %shared.path);
        let task = tokio::spawn(keeper::keep(shared.clone(), stopped, claim).instrument(span));
        debug!(path = %shared.path, ?mode, "keeping a node");
        Ok(ZkKeptNode {
            shared,
            state,
            stop,
            task: Some(task),
        })
    }

    /// The node's lapses so far (how many times it stopped being ours) and why the last one
    /// happened, for a group member's `lost()`.
    pub(crate) fn lapses(&self) -> watch::Receiver<(u64, crate::grant::LossReason)> {
        self.shared.lapses()
    }

    /// The path as given (for the protected mode: its parent and the name; the node's own path
    /// is in [`state`](ZkKeptNode::state)).
    ///
    /// ```no_run
    /// # fn demo(node: zk_recipes::ZkKeptNode) {
    /// assert_eq!(node.path(), "/workers/w-7");
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        self.shared.path.as_str()
    }

    /// The kept data: what the node is made with from now on.
    ///
    /// ```no_run
    /// # fn demo(node: zk_recipes::ZkKeptNode) {
    /// println!("{} bytes", node.data().len());
    /// # }
    /// ```
    pub fn data(&self) -> Vec<u8> {
        self.shared.data()
    }

    /// Where the node is now, as the keeper knows.
    ///
    /// ```no_run
    /// # fn demo(node: zk_recipes::ZkKeptNode) {
    /// if let Some(path) = node.state().path() { println!("at {path}"); }
    /// # }
    /// ```
    pub fn state(&self) -> KeptState {
        self.state.borrow().clone()
    }

    /// A receiver of every change of [`state`](ZkKeptNode::state).
    ///
    /// ```no_run
    /// # async fn demo(node: zk_recipes::ZkKeptNode) {
    /// let mut state = node.watch_state();
    /// while state.changed().await.is_ok() {
    ///     println!("{:?}", *state.borrow());
    /// }
    /// # }
    /// ```
    pub fn watch_state(&self) -> watch::Receiver<KeptState> {
        self.state.clone()
    }

    /// Waits until the node exists as ours and returns its path; at once if it does.
    ///
    /// # Errors
    ///
    /// What ended the keeper before the node was ever made: a non-retryable error
    /// ([`Error::NoAuth`], [`Error::UnsuitableRoot`], [`Error::TtlRefused`],
    /// [`Error::MemberIdTaken`] when another session's node is at the path, ...), or
    /// [`Error::SessionClosed`]. Retryable errors are retried (with a growing pause, a WARN
    /// event each time): without a server this waits on, so bound it with
    /// [`created_within`](ZkKeptNode::created_within).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    ///
    /// ```no_run
    /// # async fn demo(node: zk_recipes::ZkKeptNode) -> Result<(), zk_recipes::Error> {
    /// let path = node.created().await?;
    /// # Ok(()) }
    /// ```
    pub async fn created(&self) -> Result<String> {
        let mut state = self.state.clone();
        let seen = state
            .wait_for(|s| *s != KeptState::Missing)
            .await
            .map(|s| s.clone());
        match seen {
            Ok(KeptState::Created(path)) => Ok(path),
            _ => Err(self.shared.failure().unwrap_or(Error::SessionClosed)),
        }
    }

    /// [`created`](ZkKeptNode::created) for at most `timeout`: `Ok(None)` when the node was
    /// not made in time (the keeper goes on trying).
    ///
    /// # Errors
    ///
    /// As [`created`](ZkKeptNode::created).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    ///
    /// ```no_run
    /// # async fn demo(node: zk_recipes::ZkKeptNode) -> Result<(), zk_recipes::Error> {
    /// if node.created_within(std::time::Duration::from_secs(5)).await?.is_none() {
    ///     println!("not there yet");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn created_within(&self, timeout: Duration) -> Result<Option<String>> {
        match tokio::time::timeout(timeout, self.created()).await {
            Ok(created) => created.map(Some),
            Err(_) => Ok(None),
        }
    }

    /// Changes the data: the node's now (when it is ours), and the data it is made with from
    /// now on.
    ///
    /// # Errors
    ///
    /// [`Error::TooLarge`] (nothing changes), [`Error::NoAuth`], [`Error::SessionExpired`],
    /// [`Error::SessionClosed`], [`Error::ConnectionLost`] or [`Error::Unreachable`]: the
    /// kept data is the new one even then, and the keeper writes it when it makes the node.
    /// While the node is not ours (missing, or a namesake at the path) only the kept data
    /// changes.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: a write already sent may land after the future is dropped;
    /// the kept data is the new one either way.
    ///
    /// ```no_run
    /// # async fn demo(node: zk_recipes::ZkKeptNode) -> Result<(), zk_recipes::Error> {
    /// node.set_data(b"draining").await?;
    /// # Ok(()) }
    /// ```
    pub async fn set_data(&self, data: &[u8]) -> Result<()> {
        let shared = &self.shared;
        let extra = if shared.mode == KeptMode::ProtectedEphemeralSequential {
            50
        } else {
            0
        };
        shared
            .session
            .check_size(shared.what, shared.path.as_str().len() + extra + data.len())?;
        shared.set_kept_data(data);
        let epoch = shared.session.epoch().await?;
        shared.write_data(&epoch).await?;
        debug!(path = %shared.path, "kept node's data set");
        Ok(())
    }

    /// Stops keeping the node and deletes it if it is ours (an ephemeral node of a session
    /// that is over went with it).
    ///
    /// # Errors
    ///
    /// [`Error::ConnectionLost`], [`Error::NoAuth`], [`Error::SessionClosed`] (a persistent
    /// node then stays), or the error that ended the keeper earlier.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the keeper is already told to stop; a dropped future leaves the delete to
    /// it, in the background.
    ///
    /// ```no_run
    /// # async fn demo(node: zk_recipes::ZkKeptNode) -> Result<(), zk_recipes::Error> {
    /// node.close().await?;
    /// # Ok(()) }
    /// ```
    pub async fn close(mut self) -> Result<()> {
        let _ = self.stop.send(true);
        match self.task.take() {
            Some(task) => task
                .await
                .unwrap_or_else(|e| Err(Error::internal(format!("the keeper failed: {e}")))),
            None => Ok(()),
        }
    }
}

impl Drop for ZkKeptNode {
    fn drop(&mut self) {
        // The keeper deletes the node (if it is ours) as it stops, in the background.
        let _ = self.stop.send(true);
    }
}
