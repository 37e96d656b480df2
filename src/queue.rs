//! The contender queue every recipe stands on (DESIGN.md, "The core algorithm").
//!
//! A contender creates `{root}/_c_{uuid}-{name}` as EPHEMERAL_SEQUENTIAL, lists the children,
//! orders those matching the recipe's names by sequence, and asks the recipe's [`Rule`] whether
//! it holds or which single node it must watch. When the watched node goes, it decides again on
//! what it already knows before listing again: removing nodes ahead of a contender can only let
//! it proceed, and nodes created later sort behind it, so a "hold" reached from the old listing
//! minus the deleted node is true now (the second in line after the first goes holds without a
//! read).
//!
//! **Head releases.** A contender that knows it is the head of the queue (nothing live ahead of
//! it) releases with one transaction that changes its node's data and deletes it
//! ([`delete_contender`]). Its watcher's exists-watch is a data watch, so it fires once, with
//! `NodeDataChanged`, and that event says "the node you watch was the head and is gone": every
//! node ahead of it is gone too, so the waiter decides on its listing minus all of them and
//! (for every rule here) holds without a read, however far back it was when it listed. A plain
//! `NodeDeleted` (a cancelled waiter, an expired session, a peer such as Curator) says nothing
//! about the nodes ahead, and the waiter lists again. Nothing else in this crate changes a
//! contender's data; a change by someone else (an operator, Curator's `Revoker`) is read as a
//! release, so it ends the grant like a deletion does (`lost()` reports
//! [`LossReason::NodeChanged`](crate::LossReason::NodeChanged)). Peers keep working: Curator's
//! lock recipes and `Client::lock` list again on any event. Leader election has no head
//! releases ([`Rule::head_release`]), because Curator's `LeaderLatch` acts on `NodeDeleted`
//! only.

use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use tokio::time::Instant;
use tracing::{debug, info, info_span, warn, Instrument};
use zookeeper_client as zk;

use crate::error::{connection_lost, Error, Result, RootKind};
use crate::grant::Grant;
use crate::path::{new_uuid, protected_prefix, sorted_contenders, Contender, ZkPath};
use crate::session::{delete_node, Epoch, Session};

/// What a contender does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// It holds.
    Hold,
    /// It waits for the node at this index of the queue to go.
    Watch(usize),
}

/// The recipe-specific part: node names and who holds / whom to watch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rule {
    /// The names this recipe's nodes carry (after the protected prefix), e.g. `["lock-"]`.
    pub names: &'static [&'static str],
    /// Decides for the contender at `ours` in the ordered queue (wrapped nodes removed).
    pub decide: fn(queue: &[Contender], ours: usize) -> Decision,
    /// Whether a head releases with a head release (see the module docs). Off where a peer
    /// waits for `NodeDeleted` only (Curator's `LeaderLatch` ignores `NodeDataChanged`, and its
    /// watch, spent on that event, would never see the deletion).
    pub head_release: bool,
}

/// The mutex rule: the first holds; everyone else watches its immediate predecessor.
pub(crate) fn exclusive(_queue: &[Contender], ours: usize) -> Decision {
    if ours == 0 {
        Decision::Hold
    } else {
        Decision::Watch(ours - 1)
    }
}

/// Index of the writers' name in a read/write lock's `names` (`["__READ__", "__WRIT__"]`).
pub(crate) const WRITER: usize = 1;

/// The read/write rule: a writer holds alone (first in the queue) and watches its immediate
/// predecessor; a reader holds when no writer is ahead of it and otherwise watches the closest
/// writer ahead, so a writer's release wakes exactly the readers that can now proceed.
pub(crate) fn read_write(queue: &[Contender], ours: usize) -> Decision {
    if queue[ours].kind == WRITER {
        return exclusive(queue, ours);
    }
    match queue[..ours].iter().rposition(|c| c.kind == WRITER) {
        None => Decision::Hold,
        Some(writer) => Decision::Watch(writer),
    }
}

/// How long an acquisition may wait.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Wait {
    /// Not at all (`try_*`).
    No,
    /// Until this instant (`*_timeout`).
    Until(Instant),
    /// As long as it takes.
    Forever,
}

/// One recipe root and its queue.
pub(crate) struct Queue {
    session: Session,
    root: ZkPath,
    /// The root's czxid, once checked: a root with another czxid was deleted and created
    /// again, and its sequence restarted.
    root_czxid: Mutex<Option<i64>>,
    /// Whether the root gets an [`ANCHOR`]. An unanchored root may be a container that the
    /// server deletes whenever it is empty (Curator creates a semaphore's leases directory so):
    /// such a queue follows its root to the next incarnation instead of refusing it.
    anchored: bool,
}

/// A persistent child that keeps the root from ever being empty. ZooKeeper reports a
/// container's or TTL node's `ephemeralOwner` as 0 to clients, so no client can tell such a
/// root from a persistent one; but the server deletes those only when they have no children,
/// so with this child in place the root (and its sequence counter) stays. Its name sorts after
/// every `lock-NNNNNNNNNN` suffix, so Curator, which sorts all children, never sees it ahead of
/// a contender.
pub(crate) const ANCHOR: &str = "~zk-recipes-anchor";

/// Persistent nodes readable and writable by anyone, like Curator's default.
const ROOT_OPTIONS: zk::CreateOptions<'static> =
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
const NODE_OPTIONS: zk::CreateOptions<'static> =
    zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());

impl Queue {
    pub fn new(session: &Session, root: &str) -> Result<Queue> {
        Ok(Queue {
            session: session.clone(),
            root: ZkPath::new(root)?,
            root_czxid: Mutex::new(None),
            anchored: true,
        })
    }

    /// A queue whose root gets no anchor child: for directories whose every child Curator
    /// counts (a semaphore's leases), where an anchor would take a permit. Its sequence
    /// restarts whenever the server reaps the emptied root, so its tokens are no fencing tokens.
    pub fn unanchored(session: &Session, root: &str) -> Result<Queue> {
        Ok(Queue {
            anchored: false,
            ..Queue::new(session, root)?
        })
    }

    pub fn root(&self) -> &ZkPath {
        &self.root
    }

    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Enqueues a node of kind `names[kind]` carrying `data` and waits, as `wait` allows, until
    /// `rule` says it holds. `Ok(None)`: not granted in time (its node is removed).
    ///
    /// Cancel safe: dropping the future at any await point removes the node in the background.
    pub async fn acquire(
        &self,
        rule: Rule,
        kind: usize,
        data: &[u8],
        wait: Wait,
    ) -> Result<Option<Grant>> {
        let span = info_span!("acquire", path = %self.root, name = rule.names[kind], session_id = tracing::field::Empty);
        async {
            loop {
                let epoch = self.session.epoch().await?;
                tracing::Span::current().record("session_id", format_args!("{:#x}", epoch.id()));
                let attempt = self.attempt(&epoch, rule, kind, data, wait).await;
                match attempt {
                    // A session that expires while we wait took our node with it; a blocking
                    // acquire enqueues again on the new session (at the back of the queue).
                    Err(Error::SessionExpired) if !matches!(wait, Wait::No) => {
                        warn!("session expired while waiting; enqueueing again on a new session");
                        // The client reports expiry a moment before the supervisor ends the
                        // epoch; wait for that so the next round gets the new session.
                        epoch.ended().await;
                        continue;
                    }
                    other => return other,
                }
            }
        }
        .instrument(span)
        .await
    }

    async fn attempt(
        &self,
        epoch: &Arc<Epoch>,
        rule: Rule,
        kind: usize,
        data: &[u8],
        wait: Wait,
    ) -> Result<Option<Grant>> {
        let mut created = self.enqueue(epoch, rule.names[kind], data).await?;
        let children = std::mem::take(&mut created.children);
        match self
            .wait_turn(epoch, rule, &created.contender, children, wait)
            .await?
        {
            Turn::Held { head } => {
                info!(node = %created.node.path, sequence = created.contender.sequence, head, "granted");
                Ok(Some(
                    created.into_grant(head && rule.head_release, rule.head_release),
                ))
            }
            Turn::TimedOut => {
                debug!(node = %created.node.path, "not granted in time; withdrawing");
                Ok(None)
            }
        }
    }

    /// Puts a node named `name` carrying `data` in the queue (checking the root first) and
    /// returns it with the children listed right after its creation. Dropping the result
    /// deletes the node in the background.
    pub async fn enqueue(
        &self,
        epoch: &Arc<Epoch>,
        name: &'static str,
        data: &[u8],
    ) -> Result<Created> {
        let mut replaced = 0;
        let created = loop {
            let root_czxid = self.ensure_root(epoch).await?;
            match self.create(epoch, name, data, root_czxid).await {
                // An emptied container root reaped (and perhaps created again) since we looked:
                // follow it, a few times at most.
                Err(Error::RootReplaced { .. }) if !self.anchored && replaced < 3 => {
                    replaced += 1;
                    info!(root = %self.root, "the root was replaced; following it");
                    *self.root_czxid.lock().unwrap() = None;
                }
                created => break created?,
            }
        };
        debug!(node = %created.node.path, sequence = created.contender.sequence, "enqueued");
        if created.contender.is_wrapped() {
            let sequence = created.contender.sequence;
            // Delete the refused node before answering, so that the caller finds no trace of
            // it; should that fail (or this future be dropped), it deletes itself in the
            // background.
            let node = created.node;
            if delete_node(node.epoch.clone(), node.path.clone(), false)
                .await
                .is_ok()
            {
                drop(node.disarm());
            }
            return Err(Error::SequenceWrapped {
                path: self.root.to_string(),
                sequence,
            });
        }
        Ok(created)
    }

    /// Once per queue: makes sure the root exists as a persistent node (creating it and its
    /// parents when missing), refuses an ephemeral one, anchors it, and notes its czxid.
    async fn ensure_root(&self, epoch: &Epoch) -> Result<i64> {
        if let Some(czxid) = *self.root_czxid.lock().unwrap() {
            return Ok(czxid);
        }
        let root = self.root.as_str();
        let replaced = || Error::RootReplaced {
            path: root.to_owned(),
        };
        let stat = match epoch
            .retry(root, |c| async move { c.check_stat(root).await })
            .await?
        {
            Some(stat) => stat,
            None => {
                epoch
                    .retry(root, |c| async move { c.mkdir(root, &ROOT_OPTIONS).await })
                    .await?;
                // Someone may have created it first, as something else.
                epoch
                    .retry(root, |c| async move { c.check_stat(root).await })
                    .await?
                    .ok_or_else(replaced)?
            }
        };
        if let Some(kind) = root_kind(stat.ephemeral_owner) {
            return Err(Error::UnsuitableRoot {
                path: root.to_owned(),
                kind,
            });
        }
        if self.anchored {
            let anchor = self.root.child(ANCHOR);
            let anchor = anchor.as_str();
            let created = epoch
                .retry(root, |c| async move {
                    match c.create(anchor, &[], &ROOT_OPTIONS).await {
                        Ok(_) | Err(zk::Error::NodeExists) => Ok(()),
                        Err(e) => Err(e),
                    }
                })
                .await;
            match created {
                Err(Error::Zk(zk::Error::NoNode)) => return Err(replaced()),
                other => other?,
            }
        }
        Ok(*self.root_czxid.lock().unwrap().get_or_insert(stat.czxid))
    }

    /// Creates our node and lists the children in one go: both requests leave back to back on
    /// the same session (ZooKeeper answers a session's requests in order), so the listing
    /// includes our node and costs no extra round trip.
    ///
    /// The work runs in its own task, which hands the node over as an [`OwnedNode`]: if the
    /// caller was cancelled meanwhile, the node is dropped and deleted in the background.
    async fn create(
        &self,
        epoch: &Arc<Epoch>,
        name: &'static str,
        data: &[u8],
        root_czxid: i64,
    ) -> Result<Created> {
        let (tx, rx) = oneshot::channel();
        let task = CreateTask {
            session: self.session.clone(),
            epoch: epoch.clone(),
            root: self.root.clone(),
            prefix: self.root.child(&protected_prefix(&new_uuid(), name)),
            name,
            data: data.to_vec(),
            root_czxid,
        };
        tokio::spawn(async move {
            // A failed send drops the `Created`, whose node deletes itself.
            let _ = tx.send(task.run().await);
        });
        rx.await.unwrap_or(Err(Error::SessionClosed))
    }

    /// Waits until `rule` grants `ours`, or until `wait` runs out.
    ///
    /// A waiter keeps no listing while it waits: the things the listing can still tell once
    /// the watched node goes (whether `ours` then holds, and whether it is then the head) are
    /// decided before waiting. So a waiter costs the same memory however long the queue ahead
    /// of it (keeping the listings made 1,000 waiters on one lock cost about 100 KiB each).
    async fn wait_turn(
        &self,
        epoch: &Epoch,
        rule: Rule,
        ours: &Contender,
        mut children: Vec<String>,
        wait: Wait,
    ) -> Result<Turn> {
        loop {
            let queue = live(sorted_contenders(
                &std::mem::take(&mut children),
                rule.names,
            ));
            let Some(at) = queue.iter().position(|c| c.name == ours.name) else {
                // Our node is gone while we waited: the session ended, or someone deleted it.
                return Err(self.gone(epoch, &ours.name));
            };
            let i = match (rule.decide)(&queue, at) {
                Decision::Hold => return Ok(Turn::Held { head: at == 0 }),
                Decision::Watch(i) => i,
            };
            if matches!(wait, Wait::No) {
                return Ok(Turn::TimedOut);
            }
            let OnceGone {
                watched,
                plainly: if_gone,
                head_release: if_released,
            } = once_gone(rule, queue, at, i);
            let turn = match self
                .wait_gone(epoch, &watched, wait, rule.head_release)
                .await?
            {
                WaitOutcome::TimedOut => return Ok(Turn::TimedOut),
                WaitOutcome::ReleasedAsHead => if_released,
                WaitOutcome::Gone => if_gone,
            };
            if let Some(turn) = turn {
                return Ok(turn);
            }
            debug!("listing again");
            children = self.list(epoch).await?;
        }
    }

    /// Waits for `watched` to go (or for the deadline), telling a head release (see the
    /// module docs) from any other deletion where the recipe has them (`head_releases`).
    async fn wait_gone(
        &self,
        epoch: &Epoch,
        watched: &Contender,
        wait: Wait,
        head_releases: bool,
    ) -> Result<WaitOutcome> {
        let path = self.root.child(&watched.name);
        let span = info_span!("wait", watched = %watched.name);
        async {
            loop {
                let client = epoch.client()?;
                let watcher = match client.check_and_watch_stat(&path).await {
                    Ok((None, _)) => return Ok(WaitOutcome::Gone),
                    Ok((Some(_), watcher)) => watcher,
                    Err(e) if connection_lost(&e) => {
                        drop(client);
                        epoch.wait_reconnect().await;
                        continue;
                    }
                    Err(err) => return Err(Error::zk(err, &path)),
                };
                drop(client);
                let deadline = async {
                    match wait {
                        Wait::Until(t) => tokio::time::sleep_until(t).await,
                        Wait::No | Wait::Forever => std::future::pending().await,
                    }
                };
                let event = tokio::select! {
                    event = watcher.changed() => event,
                    _ = epoch.ended() => return Err(Error::SessionExpired),
                    _ = deadline => return Ok(WaitOutcome::TimedOut),
                };
                debug!(event = ?event.event_type, "watch fired");
                match (event.event_type, event.session_state) {
                    (zk::EventType::NodeDataChanged, _) if head_releases => {
                        return Ok(WaitOutcome::ReleasedAsHead)
                    }
                    (zk::EventType::NodeDeleted, _) => return Ok(WaitOutcome::Gone),
                    (zk::EventType::Session, state) if state.is_terminated() => {
                        return Err(Error::SessionExpired)
                    }
                    // A session event we outlive, or a data change that means nothing here:
                    // keep watching.
                    _ => continue,
                }
            }
        }
        .instrument(span)
        .await
    }

    /// Lists the root's children, waiting out disconnects.
    async fn list(&self, epoch: &Epoch) -> Result<Vec<String>> {
        let root = self.root.as_str();
        epoch
            .retry(root, |c| async move { c.list_children(root).await })
            .await
    }

    /// The error for a node of ours that disappeared.
    fn gone(&self, epoch: &Epoch, name: &str) -> Error {
        if epoch.is_lost() {
            Error::SessionExpired
        } else {
            Error::Lost {
                path: self.root.child(name),
            }
        }
    }
}

/// How a wait for the turn ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Turn {
    /// Granted; `head`: known to be the first live node of the queue.
    Held { head: bool },
    /// The wait ran out (or there was to be none).
    TimedOut,
}

/// How a wait for a watched node ended.
enum WaitOutcome {
    /// Deleted by a head release: every node ahead of it is gone too.
    ReleasedAsHead,
    /// Deleted some other way (cancelled, expired, a peer's release): nothing more is known.
    Gone,
    TimedOut,
}

/// The turn of a waiter once the node it watches goes, decided before it waits (so that it
/// keeps no listing): `None` where the listing cannot tell (list again).
struct OnceGone {
    watched: Contender,
    /// After a plain deletion.
    plainly: Option<Turn>,
    /// After a head release.
    head_release: Option<Turn>,
}

/// [`OnceGone`] for the contender at `at` of `queue`, told to watch the node at `watched`
/// (ahead of it). Removing nodes ahead of a contender can only let it proceed, and nodes
/// created later sort behind it: a hold decided on the listing minus the nodes known to be
/// gone is true once they are gone. A plain deletion removes the watched node; a head release
/// removes it and every node ahead of it.
fn once_gone(rule: Rule, mut queue: Vec<Contender>, at: usize, watched: usize) -> OnceGone {
    let held_if = |queue: &[Contender], at: usize| {
        ((rule.decide)(queue, at) == Decision::Hold).then_some(Turn::Held { head: at == 0 })
    };
    let node = queue.remove(watched);
    let at = at - 1;
    OnceGone {
        watched: node,
        plainly: held_if(&queue, at),
        head_release: held_if(&queue[watched..], at - watched),
    }
}

/// Deletes a contender node of ours. `head`: it is the first live node of its queue, and goes
/// in one transaction with a data change, which its watcher reads as a head release (see the
/// module docs). Only the node's owner may pass `head`, and only while that is true.
pub(crate) async fn delete_contender(
    client: &zk::Client,
    path: &str,
    head: bool,
) -> std::result::Result<(), zk::Error> {
    if !head {
        return client.delete(path, None).await;
    }
    let mut writer = client.new_multi_writer();
    writer.add_set_data(path, &[], None)?;
    writer.add_delete(path, None)?;
    match writer.commit().await {
        Ok(_) => Ok(()),
        Err(zk::MultiWriteError::RequestFailed { source })
        | Err(zk::MultiWriteError::OperationFailed { source, .. }) => Err(source),
    }
}

/// Nodes of a wrapped counter are refused by their creators (and deleted); they take no part.
fn live(mut queue: Vec<Contender>) -> Vec<Contender> {
    queue.retain(|c| !c.is_wrapped());
    queue
}

/// What the root's `ephemeralOwner` says about it: `None` for a plain persistent node.
/// ZooKeeper marks containers with `Long.MIN_VALUE` and TTL nodes with `0xFF` in the top byte
/// internally.
pub(crate) fn root_kind(ephemeral_owner: i64) -> Option<RootKind> {
    match ephemeral_owner {
        0 => None,
        // Servers report containers and TTL nodes as 0 (see `ANCHOR`); were one to report
        // them, these are their markers.
        i64::MIN => Some(RootKind::Container),
        owner if (owner as u64) >> 56 == 0xff => Some(RootKind::Ttl),
        _ => Some(RootKind::Ephemeral),
    }
}

/// A contender node we created and have not yet handed out: dropping it deletes it in the
/// background (a cancelled or failed acquisition).
pub(crate) struct OwnedNode {
    pub session: Session,
    pub epoch: Arc<Epoch>,
    pub path: String,
    armed: bool,
}

impl OwnedNode {
    fn new(session: Session, epoch: Arc<Epoch>, path: String) -> OwnedNode {
        OwnedNode {
            session,
            epoch,
            path,
            armed: true,
        }
    }

    /// Hands the node on (to a grant, which takes over its deletion).
    fn disarm(mut self) -> OwnedNode {
        self.armed = false;
        self
    }

    pub fn is_armed(&self) -> bool {
        self.armed
    }
}

impl Drop for OwnedNode {
    fn drop(&mut self) {
        if self.armed {
            debug!(node = %self.path, "abandoned contender node; deleting in the background");
            self.session
                .clean_up(self.epoch.clone(), std::mem::take(&mut self.path), false);
        }
    }
}

/// A node just put in a queue, with the children listed right after.
pub(crate) struct Created {
    pub node: OwnedNode,
    pub contender: Contender,
    pub czxid: i64,
    pub children: Vec<String>,
}

impl Created {
    /// The node holds: hand it out. `head`: it is known to be the first live node of its
    /// queue and releases as a head (see [`delete_contender`]); `changes_release`: the recipe's
    /// waiters read a change of its data as its release.
    pub fn into_grant(self, head: bool, changes_release: bool) -> Grant {
        let sequence = self.contender.sequence;
        Grant::new(
            self.node.disarm(),
            sequence,
            self.czxid,
            head,
            changes_release,
        )
    }
}

struct CreateTask {
    session: Session,
    epoch: Arc<Epoch>,
    root: ZkPath,
    /// `{root}/_c_{uuid}-{name}`: ZooKeeper appends the sequence.
    prefix: String,
    name: &'static str,
    data: Vec<u8>,
    /// What the root's czxid must be: another means the root was replaced.
    root_czxid: i64,
}

impl CreateTask {
    async fn run(self) -> Result<Created> {
        let root = self.root.as_str();
        let names = [self.name];
        loop {
            let client = self.epoch.client()?;
            let create = client.create(&self.prefix, &self.data, &NODE_OPTIONS);
            let list = client.get_children(root);
            let (created, listed) = (create.await, list.await);
            drop(client);
            match created {
                Ok((stat, sequence)) => {
                    let path = format!("{}{}", self.prefix, sequence);
                    let node = OwnedNode::new(self.session.clone(), self.epoch.clone(), path);
                    // A grant stands for the session it was made on, and only that one.
                    if stat.ephemeral_owner != self.epoch.id() {
                        return Err(Error::Zk(zk::Error::UnexpectedError(format!(
                            "{} is owned by session {:#x}, not ours",
                            node.path, stat.ephemeral_owner
                        ))));
                    }
                    let name = node.path[root.len() + 1..].to_owned();
                    let contender = Contender::parse(&name, &names).ok_or_else(|| {
                        Error::Zk(zk::Error::UnexpectedError(format!(
                            "unparsable node name {name}"
                        )))
                    })?;
                    let children = match listed {
                        Ok((children, parent)) => {
                            self.check_root(&parent)?;
                            children
                        }
                        // The listing shares the create's fate only on a broken connection.
                        Err(_) => self.list_again().await?,
                    };
                    return Ok(Created {
                        node,
                        contender,
                        czxid: stat.czxid,
                        children,
                    });
                }
                Err(zk::Error::NoNode) => {
                    return Err(Error::RootReplaced {
                        path: root.to_owned(),
                    })
                }
                Err(e) if connection_lost(&e) => {
                    // The create may have happened with its reply lost: look for our uuid.
                    self.epoch.wait_reconnect().await;
                    if let Some(found) = self.find_ours(&names).await? {
                        return Ok(found);
                    }
                }
                Err(err) => return Err(Error::zk(err, root)),
            }
        }
    }

    async fn list_again(&self) -> Result<Vec<String>> {
        let root = self.root.as_str();
        let (children, parent) = self
            .epoch
            .retry(root, |c| async move { c.get_children(root).await })
            .await?;
        self.check_root(&parent)?;
        Ok(children)
    }

    /// A root with another czxid than the one checked was deleted and created again: its
    /// sequence restarted, and tokens from it would not be ordered after earlier ones.
    fn check_root(&self, parent: &zk::Stat) -> Result<()> {
        if parent.czxid == self.root_czxid {
            Ok(())
        } else {
            Err(Error::RootReplaced {
                path: self.root.to_string(),
            })
        }
    }

    /// After a lost reply: our node, if the create happened, recognised by our uuid and by an
    /// `ephemeralOwner` that is our session (a node from another session is not ours).
    async fn find_ours(&self, names: &[&str]) -> Result<Option<Created>> {
        let children = self.list_again().await?;
        let uuid = &self.prefix[self.root.as_str().len() + 1 + 3..][..36];
        for contender in sorted_contenders(&children, names) {
            if !contender.has_uuid(uuid) {
                continue;
            }
            let path = self.root.child(&contender.name);
            let at = path.as_str();
            let Some(stat) = self
                .epoch
                .retry(at, |c| async move { c.check_stat(at).await })
                .await?
            else {
                continue;
            };
            if stat.ephemeral_owner == self.epoch.id() {
                info!(node = %path, "recovered our node after a lost create reply");
                let node = OwnedNode::new(self.session.clone(), self.epoch.clone(), path);
                return Ok(Some(Created {
                    node,
                    contender,
                    czxid: stat.czxid,
                    children,
                }));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(seqs: &[i64]) -> Vec<Contender> {
        seqs.iter()
            .map(|&s| Contender {
                name: format!("lock-{s:010}"),
                kind: 0,
                sequence: s,
            })
            .collect()
    }

    #[test]
    fn exclusive_holds_first_and_watches_predecessor() {
        let q = queue(&[3, 5, 9]);
        assert_eq!(exclusive(&q, 0), Decision::Hold);
        assert_eq!(exclusive(&q, 1), Decision::Watch(0));
        assert_eq!(exclusive(&q, 2), Decision::Watch(1));
    }

    fn rw_queue(kinds: &str) -> Vec<Contender> {
        kinds
            .chars()
            .enumerate()
            .map(|(i, k)| Contender {
                name: format!("{k}{i:010}"),
                kind: usize::from(k == 'W'),
                sequence: i as i64,
            })
            .collect()
    }

    #[test]
    fn readers_share_until_a_writer_and_watch_the_closest_writer() {
        let q = rw_queue("RRWRRWR");
        let decisions: Vec<Decision> = (0..q.len()).map(|i| read_write(&q, i)).collect();
        use Decision::*;
        assert_eq!(
            decisions,
            [Hold, Hold, Watch(1), Watch(2), Watch(2), Watch(4), Watch(5)]
        );
        assert_eq!(read_write(&rw_queue("W"), 0), Hold);
        assert_eq!(read_write(&rw_queue("RW"), 1), Watch(0));
    }

    const MUTEX: Rule = Rule {
        names: &["lock-"],
        decide: exclusive,
        head_release: true,
    };
    const RW: Rule = Rule {
        names: &["__READ__", "__WRIT__"],
        decide: read_write,
        head_release: true,
    };

    #[test]
    fn a_head_release_lets_any_waiter_hold_and_a_plain_deletion_only_the_second() {
        use Turn::Held;
        let third = once_gone(MUTEX, queue(&[1, 2, 3]), 2, 1);
        assert_eq!(third.watched.sequence, 2);
        assert_eq!(third.plainly, None, "1 may still hold");
        assert_eq!(third.head_release, Some(Held { head: true }));
        let second = once_gone(MUTEX, queue(&[1, 2, 3]), 1, 0);
        assert_eq!(second.plainly, Some(Held { head: true }));
        assert_eq!(second.head_release, Some(Held { head: true }));
    }

    #[test]
    fn readers_behind_a_released_writer_hold_and_only_the_first_is_the_head() {
        use Turn::Held;
        // R0 W1 R2 R3: R3 watches W1.
        let r3 = once_gone(RW, rw_queue("RWRR"), 3, 1);
        // Whichever way W1 goes, no writer is left ahead of R3; R0 or R2 still are.
        assert_eq!(r3.plainly, Some(Held { head: false }));
        assert_eq!(r3.head_release, Some(Held { head: false }), "R2 is ahead");
        let r2 = once_gone(RW, rw_queue("RWRR"), 2, 1);
        assert_eq!(r2.head_release, Some(Held { head: true }));
        // W0 R1 W2: W2 watches R1, which is no head; after a plain deletion W0 is left.
        let w2 = once_gone(RW, rw_queue("WRW"), 2, 1);
        assert_eq!(w2.plainly, None);
        assert_eq!(w2.head_release, Some(Held { head: true }));
    }

    #[test]
    fn wrapped_nodes_take_no_part() {
        let q = live(queue(&[-2147483648, 7, 8]));
        assert_eq!(q.iter().map(|c| c.sequence).collect::<Vec<_>>(), [7, 8]);
        assert_eq!(exclusive(&q, 0), Decision::Hold);
    }

    #[test]
    fn classifies_roots() {
        assert_eq!(root_kind(0), None);
        assert_eq!(root_kind(i64::MIN), Some(RootKind::Container));
        assert_eq!(
            root_kind(0xff00_0000_0000_1000_u64 as i64),
            Some(RootKind::Ttl)
        );
        assert_eq!(root_kind(0x1234), Some(RootKind::Ephemeral));
    }
}
