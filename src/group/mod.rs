//! [`ZkGroup`] and [`ZkGroupMember`]: group membership on Curator's `GroupMember` layout, a
//! member's node kept across session expiries. This file: the group and its reader (one
//! pipelined burst of reads, the watches of `changed`); `member.rs`: the member's handle, on
//! a [`ZkKeptNode`](crate::ZkKeptNode) (`src/kept/`, which keeps the node and the session's
//! claims: one member per node).

mod member;

pub use member::ZkGroupMember;

use std::collections::BTreeMap;
use std::fmt;

use tracing::{debug, debug_span, info, Instrument};
use zookeeper_client as zk;

use crate::claim::{claim, Make};
use crate::error::{Error, Result};
use crate::kept::{KeptMode, Options, ZkKeptNode};
use crate::layout::kind::RecipeKind;
use crate::path::ZkPath;
use crate::session::{Epoch, Session};

/// The members of a group as read at one moment: each member's id (its node's name) and
/// payload (its node's data).
///
/// ```no_run
/// # async fn demo(group: zk_recipes::ZkGroup) -> Result<(), zk_recipes::Error> {
/// for (id, payload) in group.members().await?.iter() {
///     println!("{id}: {}", String::from_utf8_lossy(payload));
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Members {
    members: BTreeMap<String, Entry>,
}

/// One member's node: its payload, and what tells a new node or a new payload from the old.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    payload: Vec<u8>,
    czxid: i64,
    version: i32,
}

impl Members {
    /// The members' ids and payloads, in id order.
    ///
    /// ```no_run
    /// # fn demo(members: zk_recipes::Members) {
    /// let ids: Vec<&str> = members.iter().map(|(id, _)| id).collect();
    /// # }
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.members
            .iter()
            .map(|(id, e)| (id.as_str(), e.payload.as_slice()))
    }

    /// The payload of member `id`, if it is in the group.
    ///
    /// ```no_run
    /// # fn demo(members: zk_recipes::Members) {
    /// if let Some(address) = members.payload("worker-7") { println!("{address:?}"); }
    /// # }
    /// ```
    pub fn payload(&self, id: &str) -> Option<&[u8]> {
        self.members.get(id).map(|e| e.payload.as_slice())
    }

    /// Whether member `id` is in the group.
    ///
    /// ```no_run
    /// # fn demo(members: zk_recipes::Members) {
    /// assert!(members.contains("worker-7"));
    /// # }
    /// ```
    pub fn contains(&self, id: &str) -> bool {
        self.members.contains_key(id)
    }

    /// How many members there are.
    ///
    /// ```no_run
    /// # fn demo(members: zk_recipes::Members) {
    /// println!("{} members", members.len());
    /// # }
    /// ```
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the group is empty.
    ///
    /// ```no_run
    /// # fn demo(members: zk_recipes::Members) {
    /// if members.is_empty() { println!("nobody"); }
    /// # }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }
}

/// A group of processes on a ZooKeeper path: each member an ephemeral node `{path}/{id}` whose
/// data is the member's payload, as Curator's `GroupMember` makes them, so Rust and Java
/// processes share a group. The directory is created as a container when missing (the server
/// reaps it once the group is empty), its parents as persistent nodes.
///
/// [`join`](ZkGroup::join) makes this process a member for as long as the returned
/// [`ZkGroupMember`] lives: its node is made again in every new ZooKeeper session after an
/// expiry, and again if someone deletes it. [`members`](ZkGroup::members) reads the group and
/// [`changed`](ZkGroup::changed) waits, on watches, until it differs.
///
/// # Example
///
/// ```no_run
/// use zk_recipes::{Session, SessionOptions, ZkGroup};
///
/// # async fn demo() -> Result<(), zk_recipes::Error> {
/// let session = Session::connect(SessionOptions::new("127.0.0.1:2181")).await?;
/// let group = ZkGroup::new(&session, "/services/billing")?;
/// let me = group.join("worker-7", b"10.0.0.7:8080").await?;
///
/// let mut members = group.members().await?;
/// loop {
///     println!("{} members", members.len());
///     members = group.changed(&members).await?;
/// #   break;
/// }
/// me.release().await?;
/// # Ok(()) }
/// ```
pub struct ZkGroup {
    session: Session,
    path: ZkPath,
    /// Set once the directory is known to be a group's (marked, see `crate::claim`).
    checked: tokio::sync::OnceCell<()>,
}

impl fmt::Debug for ZkGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkGroup")
            .field("path", &self.path.as_str())
            .finish()
    }
}

impl ZkGroup {
    /// A group on `path` (relative to the session's chroot). Nothing is sent to ZooKeeper here.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`] for a malformed path.
    ///
    /// ```no_run
    /// # fn demo(session: &zk_recipes::Session) -> Result<(), zk_recipes::Error> {
    /// let group = zk_recipes::ZkGroup::new(session, "/services/billing")?;
    /// # Ok(()) }
    /// ```
    pub fn new(session: &Session, path: &str) -> Result<ZkGroup> {
        Ok(ZkGroup {
            session: session.clone(),
            path: ZkPath::new(path)?,
            checked: tokio::sync::OnceCell::new(),
        })
    }

    /// The group's path.
    ///
    /// ```no_run
    /// # fn demo(group: zk_recipes::ZkGroup) {
    /// assert_eq!(group.path(), "/services/billing");
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        self.path.as_str()
    }

    /// Joins the group as `id` with `payload`: returns once the member's node exists. The node
    /// is kept (made again after a session expiry or a deletion) until
    /// [`release`](crate::Guard::release) or the member is dropped.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`] for an id that is not one node name,
    /// [`Error::TooLarge`] for a payload over the server's limit,
    /// [`Error::MemberIdTaken`] when another session's member has the id, or another member
    /// of this session (one member per id and session),
    /// [`Error::NoAuth`], [`Error::UnsuitableRoot`] (below an ephemeral node),
    /// [`Error::SessionExpired`], [`Error::SessionClosed`], [`Error::ConnectionLost`] or
    /// [`Error::Unreachable`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a node already made when the future is dropped is deleted in the
    /// background.
    ///
    /// ```no_run
    /// # async fn demo(group: zk_recipes::ZkGroup) -> Result<(), zk_recipes::Error> {
    /// let me = group.join("worker-7", b"10.0.0.7:8080").await?;
    /// # Ok(()) }
    /// ```
    pub async fn join(&self, id: &str, payload: &[u8]) -> Result<ZkGroupMember> {
        let node = ZkPath::new(self.path.child(id))?;
        if id.is_empty() || id.contains('/') || id == "." || id == ".." {
            return Err(Error::InvalidPath {
                path: node.as_str().to_owned(),
                reason: "a member id is one node name",
            });
        }
        self.session
            .check_size("a group member's node", node.as_str().len() + payload.len())?;
        let span = debug_span!("join", path = %node);
        async {
            let mark = RecipeKind::Group.mark();
            let epoch = self.session.epoch().await?;
            self.check(&epoch, Make::Container(&mark)).await?;
            let options = Options {
                parent_data: mark,
                patient: false,
                what: "a group member's node",
            };
            // From here on a dropped join drops the kept node, whose keeper deletes the node
            // it made (if any) as it stops: nothing is left behind.
            let node =
                ZkKeptNode::start_with(&self.session, node, KeptMode::Ephemeral, payload, options)?;
            node.created().await?;
            info!(id, "joined the group");
            Ok(ZkGroupMember::member(node, id.to_owned()))
        }
        .instrument(span)
        .await
    }

    /// Reads the group: every member's id and payload (one listing, then the members' data
    /// in one pipelined burst). An absent group has no members.
    ///
    /// # Errors
    ///
    /// [`Error::NoAuth`], [`Error::SessionExpired`], [`Error::SessionClosed`],
    /// [`Error::ConnectionLost`] or [`Error::Unreachable`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    ///
    /// ```no_run
    /// # async fn demo(group: zk_recipes::ZkGroup) -> Result<(), zk_recipes::Error> {
    /// let members = group.members().await?;
    /// # Ok(()) }
    /// ```
    pub async fn members(&self) -> Result<Members> {
        let span = debug_span!("members", path = %self.path);
        async {
            let epoch = self.session.epoch().await?;
            Ok(self.read(&epoch, false).await?.0)
        }
        .instrument(span)
        .await
    }

    /// Waits until the group is no longer as `since` read it (a member joined or left, or a
    /// payload changed, or a member's node was made again) and returns it. Returns at once
    /// when it already differs. Waits on watches (the listing and every member's data): nothing
    /// is sent while the group stays.
    ///
    /// # Errors
    ///
    /// As [`members`](ZkGroup::members). A session that expires meanwhile is followed to the
    /// next one; [`Error::SessionClosed`] ends the wait.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads (and leaves one-shot watches behind, which the server drops
    /// when they fire).
    ///
    /// ```no_run
    /// # async fn demo(group: zk_recipes::ZkGroup) -> Result<(), zk_recipes::Error> {
    /// let mut members = group.members().await?;
    /// loop {
    ///     members = group.changed(&members).await?;
    ///     println!("{} members now", members.len());
    /// }
    /// # }
    /// ```
    pub async fn changed(&self, since: &Members) -> Result<Members> {
        let span = debug_span!("group_changed", path = %self.path);
        async {
            loop {
                let epoch = self.session.epoch().await?;
                let (now, mut watches) = match self.read(&epoch, true).await {
                    Err(Error::SessionExpired) => {
                        epoch.ended().await;
                        continue;
                    }
                    other => other?,
                };
                if now != *since {
                    return Ok(now);
                }
                debug!(members = now.len(), "waiting for the group to change");
                tokio::select! {
                    fired = watches.join_next() => debug!(event = ?fired, "group watch fired"),
                    // A new session: read (and watch) again there.
                    _ = epoch.ended() => {}
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Once per value: the directory, if it exists (made as a container with the group's mark
    /// by `make`), is a group's and no other recipe's (one path, one kind; see `crate::claim`).
    async fn check(&self, epoch: &Epoch, make: Make<'_>) -> Result<()> {
        if self.checked.initialized() {
            return Ok(());
        }
        let found = claim(epoch, &self.session, &self.path, RecipeKind::Group, make).await?;
        if found.is_some() {
            let _ = self.checked.set(());
        }
        Ok(())
    }

    /// The group as it is, with a watch on the listing (or on the directory's creation) and on
    /// each member's data when `watch` is set.
    async fn read(&self, epoch: &Epoch, watch: bool) -> Result<(Members, Watches)> {
        self.check(epoch, Make::Nothing).await?;
        let path = self.path.as_str();
        let mut watches = Watches::new();
        let children = if watch {
            let listed = epoch
                .retry(path, |c| async move {
                    match c.get_and_watch_children(path).await {
                        Ok((children, _, watcher)) => Ok(Ok((children, watcher))),
                        Err(zk::Error::NoNode) => {
                            // Watch for the group's creation instead.
                            let (stat, watcher) = c.check_and_watch_stat(path).await?;
                            Ok(Err((stat.is_some(), watcher)))
                        }
                        Err(e) => Err(e),
                    }
                })
                .await?;
            match listed {
                Ok((children, watcher)) => {
                    watches.spawn(async move { watcher.changed().await.event_type });
                    children
                }
                Err((created_meanwhile, watcher)) => {
                    watches.spawn(async move { watcher.changed().await.event_type });
                    if created_meanwhile {
                        // Made between the two requests: read again (the watch fires too).
                        watches.spawn(async { zk::EventType::NodeCreated });
                    }
                    Vec::new()
                }
            }
        } else {
            epoch
                .retry(path, |c| async move {
                    match c.list_children(path).await {
                        Err(zk::Error::NoNode) => Ok(Vec::new()),
                        other => other,
                    }
                })
                .await?
        };
        let mut members = Members::default();
        if children.is_empty() {
            return Ok((members, watches));
        }
        let mut losses = 0;
        'read: loop {
            let client = epoch.client()?;
            let paths: Vec<String> = children.iter().map(|id| self.path.child(id)).collect();
            // zookeeper-client sends a request when it is called: every read is on its way
            // before the first reply is awaited.
            let mut replies = Vec::with_capacity(paths.len());
            for p in &paths {
                replies.push(if watch {
                    Reply::Watched(client.get_and_watch_data(p))
                } else {
                    Reply::Plain(client.get_data(p))
                });
            }
            for ((id, p), reply) in children.iter().zip(&paths).zip(replies) {
                let reply = match reply {
                    Reply::Watched(f) => f.await.map(|(d, s, w)| (d, s, Some(w))),
                    Reply::Plain(f) => f.await.map(|(d, s)| (d, s, None)),
                };
                match reply {
                    Ok((payload, stat, watcher)) => {
                        if let Some(watcher) = watcher {
                            watches.spawn(async move { watcher.changed().await.event_type });
                        }
                        members.members.insert(
                            id.clone(),
                            Entry {
                                payload,
                                czxid: stat.czxid,
                                version: stat.version,
                            },
                        );
                    }
                    // Gone since the listing: the listing's watch says so.
                    Err(zk::Error::NoNode) => {}
                    Err(e) if crate::error::connection_lost(&e) => {
                        epoch.after_loss(&mut losses).await?;
                        members = Members::default();
                        continue 'read;
                    }
                    Err(e) => return Err(epoch.error(e, p)),
                }
            }
            return Ok((members, watches));
        }
    }
}

/// A member's data on its way: with a watch, or without.
enum Reply<W, P> {
    Watched(W),
    Plain(P),
}

/// Watches waited on together; dropping the set stops waiting (the one-shot watches stay on
/// the server until they fire).
struct Watches(tokio::task::JoinSet<zk::EventType>);

impl Watches {
    fn new() -> Watches {
        Watches(tokio::task::JoinSet::new())
    }

    fn spawn(&mut self, watch: impl std::future::Future<Output = zk::EventType> + Send + 'static) {
        self.0.spawn(watch);
    }

    /// The first watch to fire (or nothing, forever, when there is none).
    async fn join_next(&mut self) -> Option<zk::EventType> {
        match self.0.join_next().await {
            Some(fired) => fired.ok(),
            None => std::future::pending().await,
        }
    }
}
