//! [`ZkDoubleBarrier`]: N members enter together and leave together, on Curator's
//! `DistributedDoubleBarrier` layout (an ephemeral node per member under the root, the
//! persistent `ready` node once N have arrived).

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, debug_span, Instrument};
use zookeeper_client as zk;

use crate::claim::{claim, Make};
use crate::error::{Error, Result};
use crate::layout::kind::RecipeKind;
use crate::ops::OrMissing;
use crate::path::ZkPath;
use crate::session::{Epoch, Release, Session};

/// The node the member that completes the barrier creates, as Curator names it.
pub(super) const READY: &str = "ready";

/// How often an enter makes the root again when the server reaped it (a container) between
/// the check and the member's create.
const ROOT_ROUNDS: u32 = 3;

/// A double barrier (the ZooKeeper recipe, Curator's `DistributedDoubleBarrier`): members
/// [`enter`](ZkDoubleBarrier::enter) and wait until `members` of them have arrived, work, then
/// [`leave`](DoubleBarrierEntry::leave) and wait until every one of them has left. `members`
/// is a threshold, as in Curator: more may enter.
///
/// Each member is an ephemeral node `{path}/{id}` (Curator names its members by a random
/// UUID, as [`new`](ZkDoubleBarrier::new) does; [`with_id`](ZkDoubleBarrier::with_id) takes
/// a name), so Java and Rust members count each other. The member whose arrival makes the
/// count reach `members` creates `{path}/ready`, which releases everyone waiting in `enter`;
/// the last to leave deletes it. The root is a container, as Curator makes it, marked as a
/// double barrier in its data.
///
/// # When a member dies inside
///
/// A member's node lives as long as its session. A member whose process dies, or whose
/// session is closed or expires, has left as far as the others can tell once its node is gone:
/// [`leave`](DoubleBarrierEntry::leave) waits for the nodes of the others, so it returns once
/// the dead member's node goes (at once for a closed session, after the session timeout for a
/// crashed process). Before `ready`, a dead member counts until its node goes; once it is gone,
/// `members` cannot be reached without a newcomer, and
/// [`enter_timeout`](ZkDoubleBarrier::enter_timeout) ends with [`Error::TimedOut`] saying how
/// many arrived. A member whose own session ends is told so ([`Error::SessionExpired`] from
/// `enter` or `leave`) rather than waiting on watches that died with it. A member frozen with
/// its session alive keeps everyone waiting: only the timeout variants give up then.
///
/// # Example
///
/// ```no_run
/// use std::time::Duration;
/// use zk_recipes::{Session, SessionOptions, ZkDoubleBarrier};
///
/// # async fn demo() -> Result<(), zk_recipes::Error> {
/// let session = Session::connect(SessionOptions::new("127.0.0.1:2181")).await?;
/// let barrier = ZkDoubleBarrier::new(&session, "/jobs/nightly/barrier", 8)?;
/// let inside = barrier.enter_timeout(Duration::from_secs(60)).await?; // all 8 are in
/// // ... the computation ...
/// inside.leave_timeout(Duration::from_secs(60)).await?; // all 8 are out
/// # Ok(()) }
/// ```
pub struct ZkDoubleBarrier {
    session: Session,
    path: ZkPath,
    members: u32,
    id: String,
}

impl fmt::Debug for ZkDoubleBarrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkDoubleBarrier")
            .field("path", &self.path.as_str())
            .field("members", &self.members)
            .field("id", &self.id)
            .finish()
    }
}

impl ZkDoubleBarrier {
    /// A double barrier of `members` on `path` (relative to the session's chroot), this
    /// member named by a random UUID as Curator names its members. Nothing is sent to
    /// ZooKeeper here.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidMemberCount`] for 0 members, [`Error::InvalidPath`] for a malformed
    /// path, [`Error::TooLarge`] for one longer than the server takes.
    ///
    /// ```no_run
    /// # fn demo(session: &zk_recipes::Session) -> Result<(), zk_recipes::Error> {
    /// let barrier = zk_recipes::ZkDoubleBarrier::new(session, "/jobs/nightly/barrier", 8)?;
    /// # Ok(()) }
    /// ```
    pub fn new(session: &Session, path: &str, members: u32) -> Result<ZkDoubleBarrier> {
        ZkDoubleBarrier::with_id(session, path, members, &crate::path::new_uuid())
    }

    /// As [`new`](ZkDoubleBarrier::new), this member named `id` (its node is `{path}/{id}`).
    ///
    /// # Errors
    ///
    /// As [`new`](ZkDoubleBarrier::new), and [`Error::InvalidPath`] for an id that is not one
    /// node name or is `ready`, the barrier's own node.
    ///
    /// ```no_run
    /// # fn demo(session: &zk_recipes::Session) -> Result<(), zk_recipes::Error> {
    /// let barrier =
    ///     zk_recipes::ZkDoubleBarrier::with_id(session, "/jobs/nightly/barrier", 8, "worker-3")?;
    /// # Ok(()) }
    /// ```
    pub fn with_id(
        session: &Session,
        path: &str,
        members: u32,
        id: &str,
    ) -> Result<ZkDoubleBarrier> {
        if members == 0 {
            return Err(Error::InvalidMemberCount { members });
        }
        let path = ZkPath::new(path)?;
        let node = path.child(id);
        let reason = if id.contains('/') {
            Some("a member id is one node name (no '/')")
        } else if id == READY {
            Some("`ready` is the barrier's own node, not a member id")
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(Error::InvalidPath { path: node, reason });
        }
        let node = ZkPath::new(node)?;
        let mark = RecipeKind::DoubleBarrier.mark().len();
        let size = node.as_str().len() + session.owner().len() + mark;
        session.check_size("the double barrier's member node", size)?;
        Ok(ZkDoubleBarrier {
            session: session.clone(),
            path,
            members,
            id: id.to_owned(),
        })
    }

    /// The barrier's root path.
    ///
    /// ```no_run
    /// # fn demo(barrier: zk_recipes::ZkDoubleBarrier) {
    /// assert_eq!(barrier.path(), "/jobs/nightly/barrier");
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        self.path.as_str()
    }

    /// This member's id, the name of its node under the root.
    ///
    /// ```no_run
    /// # fn demo(barrier: zk_recipes::ZkDoubleBarrier) {
    /// println!("entering as {}", barrier.id());
    /// # }
    /// ```
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Enters: makes this member's node and waits until the barrier's `members` have arrived
    /// (returns at once when `ready` exists: the barrier is complete already). Waits for as
    /// long as it takes: [`enter_timeout`](ZkDoubleBarrier::enter_timeout) gives up.
    ///
    /// # Errors
    ///
    /// [`Error::MemberIdTaken`] when a node of another session has this member's id, or this
    /// session is inside under the id already (an entry not yet dropped),
    /// [`Error::SessionExpired`] (or [`Error::SessionClosed`]) when the session ends while
    /// waiting (its node went with it), [`Error::Lost`] when someone deleted our node while
    /// we waited, [`Error::UnsuitableRoot`] when another recipe kind uses the path, and the
    /// session's other errors. On every error our node is deleted (or gone).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future deletes our node in the background, and nothing is
    /// entered.
    ///
    /// ```no_run
    /// # async fn demo(barrier: zk_recipes::ZkDoubleBarrier) -> Result<(), zk_recipes::Error> {
    /// let inside = barrier.enter().await?;
    /// # Ok(()) }
    /// ```
    pub async fn enter(&self) -> Result<DoubleBarrierEntry> {
        self.enter_until(None).await
    }

    /// [`enter`](ZkDoubleBarrier::enter), giving up after `limit`.
    ///
    /// # Errors
    ///
    /// [`Error::TimedOut`] when fewer than `members` arrived within `limit` (its reason says
    /// how many); our node is deleted before it returns. As
    /// [`enter`](ZkDoubleBarrier::enter) otherwise.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`enter`](ZkDoubleBarrier::enter).
    ///
    /// ```no_run
    /// # async fn demo(barrier: zk_recipes::ZkDoubleBarrier) -> Result<(), zk_recipes::Error> {
    /// use std::time::Duration;
    /// match barrier.enter_timeout(Duration::from_secs(30)).await {
    ///     Ok(inside) => inside.leave().await?,
    ///     Err(zk_recipes::Error::TimedOut { reason, .. }) => println!("not all came: {reason}"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn enter_timeout(&self, limit: Duration) -> Result<DoubleBarrierEntry> {
        self.enter_until(Some((Instant::now() + limit, limit)))
            .await
    }

    async fn enter_until(
        &self,
        deadline: Option<(Instant, Duration)>,
    ) -> Result<DoubleBarrierEntry> {
        let node = self.path.child(&self.id);
        let span = debug_span!("double_barrier_enter", %node, members = self.members);
        let timed_out = |reason: String| Error::TimedOut {
            path: self.path.as_str().to_owned(),
            waited: deadline.map_or(Duration::ZERO, |(_, limit)| limit),
            reason,
        };
        let not_in = || timed_out("this member's node was not made in time".to_owned());
        async {
            let claimed = Claimed::new(&self.session, &node)?;
            let epoch = until(deadline, self.session.epoch()).await.ok_or_else(not_in)??;
            // Ours from the create's send on: dropped before its reply, the entry deletes
            // whatever the create made.
            let mut entry = DoubleBarrierEntry {
                session: self.session.clone(),
                epoch: epoch.clone(),
                root: self.path.clone(),
                node: node.clone(),
                ours: true,
                _claimed: claimed,
            };
            match until(deadline, self.make_member(&epoch, &node)).await {
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    // Another session's node is not ours to delete; any other failure left
                    // none of ours, or one the entry deletes.
                    if matches!(e, Error::MemberIdTaken { .. }) {
                        entry.ours = false;
                    }
                    return Err(e);
                }
                None => return Err(not_in()),
            }
            let root = self.path.as_str();
            let ready = &self.path.child(READY);
            loop {
                let (ready_stat, watcher, children) = epoch
                    .retry(root, |c| async move {
                        let ready_read = c.check_and_watch_stat(ready);
                        let listing = c.list_children(root);
                        let (stat, watcher) = ready_read.await?;
                        let children = listing.await.or_missing()?.unwrap_or_default();
                        Ok((stat, watcher, children))
                    })
                    .await?;
                if ready_stat.is_some() {
                    debug!("the barrier is complete; entered");
                    return Ok(entry);
                }
                if !children.contains(&self.id) {
                    entry.ours = false;
                    return Err(Error::Lost { path: entry.node.clone() });
                }
                // Curator counts every child (before `ready` exists, the members).
                let arrived = children.len();
                if arrived >= self.members as usize {
                    let options = &zk::CreateMode::Persistent.with_acls(self.session.acls());
                    epoch
                        .retry(ready, |c| async move {
                            match c.create(ready, &[], options).await {
                                Ok(_) | Err(zk::Error::NodeExists) => Ok(()),
                                Err(e) => Err(e),
                            }
                        })
                        .await?;
                    debug!(arrived, "the barrier is complete with us; ready made");
                    return Ok(entry);
                }
                debug!(arrived, "waiting for the barrier's members");
                tokio::select! {
                    event = watcher.changed() => debug!(event = ?event.event_type, "ready watch fired"),
                    () = epoch.ended() => {
                        entry.ours = false;
                        return Err(epoch.over());
                    }
                    () = sleep_until(deadline) => {
                        entry.delete().await?;
                        let members = self.members;
                        return Err(timed_out(format!("{arrived} of {members} members arrived")));
                    }
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Makes this member's ephemeral node, the root (a marked container) too when missing.
    async fn make_member(&self, epoch: &Epoch, node: &str) -> Result<()> {
        let mark = RecipeKind::DoubleBarrier.mark();
        let options = &zk::CreateMode::Ephemeral.with_acls(self.session.acls());
        let data = self.session.owner().as_bytes();
        let us = epoch.id();
        for _ in 0..ROOT_ROUNDS {
            let kind = RecipeKind::DoubleBarrier;
            claim(
                epoch,
                &self.session,
                &self.path,
                kind,
                Make::Container(&mark),
            )
            .await?;
            // A create sent again after a lost reply finds our own node: ours all the same.
            let made = epoch
                .retry(node, |c| async move {
                    match c.create(node, data, options).await {
                        Ok(_) => Ok(Made::Ours),
                        Err(zk::Error::NoNode) => Ok(Made::NoRoot),
                        Err(zk::Error::NodeExists) => Ok(match c.check_stat(node).await? {
                            Some(stat) if stat.ephemeral_owner == us => Made::Ours,
                            Some(stat) => Made::Taken(stat.ephemeral_owner),
                            None => Made::NoRoot,
                        }),
                        Err(e) => Err(e),
                    }
                })
                .await?;
            match made {
                Made::Ours => {
                    debug!("member node made");
                    return Ok(());
                }
                Made::Taken(session_id) => {
                    return Err(Error::MemberIdTaken {
                        path: node.to_owned(),
                        session_id,
                    })
                }
                // Reaped (a container) or gone meanwhile: make the root again.
                Made::NoRoot => debug!("the barrier's root went; making it again"),
            }
        }
        Err(Error::RootReplaced {
            path: self.path.as_str().to_owned(),
        })
    }
}

/// What a member's create found.
enum Made {
    Ours,
    NoRoot,
    /// Another session's node (its id).
    Taken(i64),
}

/// A member inside a [`ZkDoubleBarrier`]: [`leave`](DoubleBarrierEntry::leave) when done.
/// Dropped without leaving, it deletes its node in the background (it leaves without waiting
/// for the others).
///
/// ```no_run
/// # async fn demo(barrier: zk_recipes::ZkDoubleBarrier) -> Result<(), zk_recipes::Error> {
/// let inside = barrier.enter().await?;
/// println!("inside as {}", inside.node());
/// inside.leave().await?;
/// # Ok(()) }
/// ```
pub struct DoubleBarrierEntry {
    pub(super) session: Session,
    pub(super) epoch: Arc<Epoch>,
    pub(super) root: ZkPath,
    pub(super) node: String,
    /// Whether our node is (as far as we know) still there, ours to delete.
    pub(super) ours: bool,
    _claimed: Claimed,
}

impl fmt::Debug for DoubleBarrierEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DoubleBarrierEntry")
            .field("node", &self.node)
            .finish()
    }
}

impl DoubleBarrierEntry {
    /// This member's node.
    ///
    /// ```no_run
    /// # async fn demo(barrier: zk_recipes::ZkDoubleBarrier) -> Result<(), zk_recipes::Error> {
    /// let inside = barrier.enter().await?;
    /// assert!(inside.node().starts_with(barrier.path()));
    /// # Ok(()) }
    /// ```
    pub fn node(&self) -> &str {
        &self.node
    }

    /// Leaves: deletes this member's node (the ZooKeeper recipe's order: the lowest member
    /// last) and waits until every member's node is gone, then deletes `ready`. Waits for as
    /// long as it takes: [`leave_timeout`](DoubleBarrierEntry::leave_timeout) gives up.
    ///
    /// # Errors
    ///
    /// [`Error::SessionExpired`] (or [`Error::SessionClosed`]) when our session ended (our node
    /// went with it: we left, but cannot tell when the others do), [`Error::Lost`] when
    /// someone else deleted our node, and the session's other errors.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future deletes our node in the background if it is still
    /// there (we left, without waiting for the others).
    ///
    /// ```no_run
    /// # async fn demo(barrier: zk_recipes::ZkDoubleBarrier) -> Result<(), zk_recipes::Error> {
    /// let inside = barrier.enter().await?;
    /// inside.leave().await?;
    /// # Ok(()) }
    /// ```
    pub async fn leave(mut self) -> Result<()> {
        let span = debug_span!("double_barrier_leave", node = %self.node);
        super::leave::leave(&mut self, None).instrument(span).await
    }

    /// [`leave`](DoubleBarrierEntry::leave), giving up after `limit`.
    ///
    /// # Errors
    ///
    /// [`Error::TimedOut`] when members were still inside after `limit` (its reason names
    /// them); our node is deleted before it returns, and `ready` too (as Curator does, so
    /// that the next round does not find the barrier complete). As
    /// [`leave`](DoubleBarrierEntry::leave) otherwise.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`leave`](DoubleBarrierEntry::leave).
    ///
    /// ```no_run
    /// # async fn demo(barrier: zk_recipes::ZkDoubleBarrier) -> Result<(), zk_recipes::Error> {
    /// use std::time::Duration;
    /// let inside = barrier.enter().await?;
    /// inside.leave_timeout(Duration::from_secs(30)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn leave_timeout(mut self, limit: Duration) -> Result<()> {
        let span = debug_span!("double_barrier_leave", node = %self.node);
        let deadline = Some((Instant::now() + limit, limit));
        super::leave::leave(&mut self, deadline)
            .instrument(span)
            .await
    }

    /// Deletes our node now (if it is still ours) and forgets it.
    pub(super) async fn delete(&mut self) -> Result<()> {
        if self.ours {
            delete_ours(&self.epoch, &self.node).await?;
            self.ours = false;
        }
        Ok(())
    }
}

impl Drop for DoubleBarrierEntry {
    fn drop(&mut self) {
        if self.ours {
            debug!(node = %self.node, "member left without leave(); deleting in the background");
            let node = std::mem::take(&mut self.node);
            self.session
                .clean_up(self.epoch.clone(), node, Release::Plain);
        }
    }
}

/// Deletes `node` if it is our session's (a namesake of another session is left alone).
pub(super) async fn delete_ours(epoch: &Epoch, node: &str) -> Result<()> {
    let us = epoch.id();
    epoch
        .retry(node, |c| async move {
            match c.check_stat(node).await? {
                Some(stat) if stat.ephemeral_owner == us => {
                    match c.delete(node, Some(stat.version)).await {
                        Ok(()) | Err(zk::Error::NoNode) => Ok(()),
                        Err(e) => Err(e),
                    }
                }
                _ => Ok(()),
            }
        })
        .await?;
    debug!(node, "member node deleted");
    Ok(())
}

/// The member nodes entered on one session (in its slots): one entry per node.
#[derive(Default)]
struct Entered(Mutex<HashSet<String>>);

impl Entered {
    fn nodes(&self) -> MutexGuard<'_, HashSet<String>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A member node claimed on its session from the enter to the entry's drop.
struct Claimed {
    entered: Arc<Entered>,
    node: String,
}

impl Claimed {
    fn new(session: &Session, node: &str) -> Result<Claimed> {
        let entered = session.slot::<Entered>();
        if !entered.nodes().insert(node.to_owned()) {
            return Err(Error::MemberIdTaken {
                path: node.to_owned(),
                session_id: session.session_id().unwrap_or(0),
            });
        }
        Ok(Claimed {
            entered,
            node: node.to_owned(),
        })
    }
}

impl Drop for Claimed {
    fn drop(&mut self) {
        self.entered.nodes().remove(&self.node);
    }
}

/// `fut`'s output, or `None` once `deadline` passed first.
pub(super) async fn until<T>(
    deadline: Option<(Instant, Duration)>,
    fut: impl std::future::Future<Output = T>,
) -> Option<T> {
    match deadline {
        Some((at, _)) => tokio::time::timeout_at(at, fut).await.ok(),
        None => Some(fut.await),
    }
}

/// Resolves at `deadline`; never without one.
pub(super) async fn sleep_until(deadline: Option<(Instant, Duration)>) {
    match deadline {
        Some((at, _)) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
