//! The algorithm: enqueue, ask the recipe's rule, watch one node, decide again when it goes.
//!
//! A contender's node is created and the children listed in one burst ([`Queue::enqueue`]).
//! The rule says "hold" or "watch node i". A waiter decides, before it waits, what it will do
//! once the watched node goes ([`once_gone`]): removing nodes ahead of a contender can only let
//! it proceed, and nodes created later sort behind it, so a "hold" reached from the old listing
//! minus the gone nodes is true then. A plain deletion removes the watched node; a head release
//! (proven by the root's data, see the module docs) removes it and every node ahead of it. So
//! the second in line holds without a read, and after a head release anyone else after one
//! read. Only when neither can tell does the waiter list again. A waiter watches its own node
//! too, and acts on nothing it saw after a deletion of its own node.
//!
//! Where the queue may be deep, the enqueue counts the children instead of listing them, and
//! the waiter finds the node ahead by name (`deep.rs`); it comes back here for a listing only
//! where names cannot tell.

use std::sync::Arc;

use tracing::{debug, debug_span, Instrument};
use zookeeper_client as zk;

use super::create::Listing;
use super::proof::{Changed, EventZxids};
use super::{Decision, Queue, Rule, Wait};
use crate::error::{Error, Result};
use crate::grant::{Grant, NodeWatch, OnChange, Seen};
use crate::ops::OrMissing;
use crate::path::{sorted_contenders, Contender};
use crate::session::{Epoch, Release};

impl Queue {
    /// Enqueues a node named `name` (one of `rule.names`) carrying `data` (`None`: the owner
    /// record) and waits, as `wait`
    /// allows, until `rule` says it holds. `Ok(None)`: not granted without waiting (its node is
    /// removed).
    ///
    /// Cancel safe: dropping the future at any await point removes the node in the background.
    pub async fn acquire(
        &self,
        rule: Rule,
        name: &'static str,
        data: Option<&[u8]>,
        wait: Wait,
    ) -> Result<Option<Grant>> {
        let span =
            debug_span!("acquire", path = %self.root, name, session_id = tracing::field::Empty);
        async {
            loop {
                let epoch = self.session.epoch().await?;
                tracing::Span::current().record("session_id", format_args!("{:#x}", epoch.id()));
                match self.attempt(&epoch, rule, name, data, wait).await {
                    // A session that expires while we wait took our node with it; a blocking
                    // acquire enqueues again on the new session (at the back of the queue).
                    Err(Error::SessionExpired) if wait == Wait::Forever => {
                        debug!("session expired while waiting; enqueueing again on a new session");
                        // The client reports expiry a moment before the supervisor ends the
                        // epoch; wait for that so the next round gets the new session.
                        epoch.ended().await;
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
        name: &'static str,
        data: Option<&[u8]>,
        wait: Wait,
    ) -> Result<Option<Grant>> {
        let (list, enqueuing) = self.begin_enqueue(rule);
        let mut created = self.enqueue(epoch, name, rule.naming, data, list).await?;
        drop(enqueuing);
        let ours = &created.contender;
        // Set once this node waits, and handed to its grant.
        let mut node = created.node_watch();
        let turn = match std::mem::replace(&mut created.listing, Listing::Count(0)) {
            Listing::Children(children) => {
                self.saw_depth(children.len());
                debug!(children = children.len(), "listed");
                self.wait_turn(epoch, rule, ours, &mut node, children, wait)
                    .await?
            }
            // Counted: the queue may have grown since (a listing now could be long), so the
            // node ahead is looked for by name, which lists only where names cannot tell.
            Listing::Count(n) => {
                self.saw_depth(n);
                debug!(children = n, "counted; looking for the node ahead by name");
                self.wait_by_name(epoch, rule, ours, &mut node, wait)
                    .await?
            }
        };
        let Some(head) = turn else {
            debug!(node = %created.node.path, "not free; withdrawing");
            return Ok(None);
        };
        debug!(node = %created.node.path, sequence = created.contender.sequence, head, "granted");
        let (release, on_change) = match rule.head_release {
            true if head => (Release::NoteInParent, OnChange::Lost),
            true => (Release::Plain, OnChange::Lost),
            false => (Release::Plain, OnChange::Ignore),
        };
        Ok(Some(created.into_grant(release, on_change, Some(node))))
    }

    /// Waits until `rule` grants `ours`: `Some(head)`, where `head` says it is known to be the
    /// first live node; `None` when it does not hold and `wait` is [`Wait::No`].
    ///
    /// A waiter keeps no listing while it waits: what the listing can still tell once the
    /// watched node goes is decided before waiting ([`once_gone`]), so a waiter costs the same
    /// memory however long the queue ahead of it.
    async fn wait_turn(
        &self,
        epoch: &Epoch,
        rule: Rule,
        ours: &Contender,
        node: &mut NodeWatch,
        mut children: Vec<String>,
        wait: Wait,
    ) -> Result<Option<bool>> {
        // Persistent nodes in the queue: nobody's contenders, passed over for good.
        let mut foreign: Vec<String> = Vec::new();
        loop {
            let mut queue = live(sorted_contenders(
                &std::mem::take(&mut children),
                rule.names,
            ));
            queue.retain(|c| !foreign.contains(&c.name));
            let (at, i) = loop {
                let Some(at) = queue.iter().position(|c| c.name == ours.name) else {
                    // Our node is gone while we waited: the session ended, or someone deleted it.
                    return Err(self.gone(epoch, &ours.name));
                };
                let i = match (rule.decide)(&queue, at) {
                    Decision::Hold => return self.holds(epoch, ours, node, at == 0).await,
                    Decision::Watch(i) => i,
                };
                if wait == Wait::Forever {
                    break (at, i);
                }
                // Not free, unless what stands in the way is nobody's contender (a persistent
                // node someone made): one read, on this path only.
                if !self.is_foreign(epoch, &queue[i]).await? {
                    return Ok(None);
                }
                foreign.push(queue.remove(i).name);
            };
            let next = once_gone(rule, queue, at, i);
            // Only where a head release would tell more than a deletion is it worth proving.
            let proof = rule.head_release && next.after_head_release != next.after_deletion;
            let turn = match self
                .wait_gone(epoch, &next.watched, ours, node, proof)
                .await?
            {
                Gone::AsHead => next.after_head_release,
                Gone::Plainly => next.after_deletion,
                Gone::Foreign => {
                    foreign.push(next.watched.name.clone());
                    next.after_deletion
                }
            };
            if let Some(head) = turn {
                return self.holds(epoch, ours, node, head).await;
            }
            debug!("listing again");
            children = self.list(epoch).await?;
        }
    }

    /// Whether `node` is no contender: a persistent node (`ephemeralOwner` 0), or gone.
    pub(super) async fn is_foreign(&self, epoch: &Epoch, node: &Contender) -> Result<bool> {
        let path = self.root.child(&node.name);
        let at = path.as_str();
        let stat = epoch
            .retry(at, |c| async move { c.check_stat(at).await })
            .await?;
        Ok(stat.is_none_or(|s| s.ephemeral_owner == 0))
    }

    /// `ours` holds, unless its watch saw it go first: no grant for a node that is gone.
    pub(super) async fn holds(
        &self,
        epoch: &Epoch,
        ours: &Contender,
        node: &mut NodeWatch,
        head: bool,
    ) -> Result<Option<bool>> {
        match node.now(epoch).await? {
            Seen::Gone => Err(self.own_gone(epoch, &ours.name).await),
            Seen::Ended => Err(epoch.over()),
            Seen::Nothing | Seen::Changed => Ok(Some(head)),
        }
    }

    /// Lists the children and waits as [`Self::wait_turn`] does.
    pub(super) async fn wait_listed(
        &self,
        epoch: &Epoch,
        rule: Rule,
        ours: &Contender,
        node: &mut NodeWatch,
        wait: Wait,
    ) -> Result<Option<bool>> {
        let children = self.list(epoch).await?;
        self.wait_turn(epoch, rule, ours, node, children, wait)
            .await
    }

    async fn list(&self, epoch: &Epoch) -> Result<Vec<String>> {
        let root = self.root.as_str();
        let children = epoch
            .retry(root, |c| async move { c.list_children(root).await })
            .await?;
        self.saw_depth(children.len());
        debug!(children = children.len(), "listed");
        Ok(children)
    }

    /// Waits for `watched` to be deleted, watching our own node `ours` too (a deletion of ours
    /// seen first ends the wait with [`Error::Lost`]); with `proof`, tells a head release from
    /// any other deletion.
    ///
    /// The watch on `watched` is a child watch: the node is ephemeral and has no children, so
    /// it fires on the deletion and on nothing else. Nobody's write to the node (an operator,
    /// Curator's `Revoker`) wakes the waiter, and on a node already gone it leaves nothing on
    /// the server. A persistent node in the queue (`ephemeralOwner` 0) is nobody's contender:
    /// it is passed as if gone.
    ///
    /// With `proof`, on a server whose events name their transaction (3.9), a data watch on
    /// `watched` goes in the same burst: a head release writes the node in the transaction
    /// that deletes it, so a change and a deletion with one zxid prove it without a read
    /// ([`how_gone`](Self::how_gone)). Someone else's write fires the data watch with a zxid
    /// of its own, and only then does the proof cost the root's read.
    pub(super) async fn wait_gone(
        &self,
        epoch: &Epoch,
        watched: &Contender,
        ours: &Contender,
        node: &mut NodeWatch,
        proof: bool,
    ) -> Result<Gone> {
        let path = self.root.child(&watched.name);
        let span = debug_span!("wait", watched = %watched.name);
        let zxids = proof.then(|| self.session.slot::<EventZxids>());
        async {
            // The data watch is set once: after it fired, the root's read proves instead.
            let mut by_event = zxids.as_ref().is_some_and(|z| z.named());
            let mut changed = Changed::default();
            loop {
                let at = path.as_str();
                let data = std::mem::take(&mut by_event);
                // Our node's watch (when not set yet) and this one leave back to back, ours
                // first: its answer, and any event of it, comes before the watched node's.
                let (mine, theirs) = tokio::join!(
                    node.arm(epoch),
                    epoch.retry(at, |c| async move {
                        let listed = c.get_and_watch_children(at);
                        let read = data.then(|| c.get_and_watch_data(at));
                        let read = async move {
                            match read {
                                Some(read) => read.await.map(|(_, _, w)| Some(w)).or_missing(),
                                None => Ok(None),
                            }
                        };
                        let (listed, read) = tokio::join!(listed, read);
                        let listed = listed.map(|(_, stat, watcher)| (stat, watcher)).or_missing()?;
                        Ok((listed, read?.flatten()))
                    })
                );
                if !mine? {
                    return Err(self.own_gone(epoch, &ours.name).await);
                }
                let (listed, data) = theirs?;
                if let Some(watcher) = data {
                    changed.arm(watcher, epoch.suspensions());
                }
                let watcher = match listed {
                    None => {
                        return self
                            .how_gone(epoch, watched, node.czxid(), proof, None)
                            .await
                    }
                    Some((stat, _)) if stat.ephemeral_owner == 0 => {
                        debug!("a persistent node in the queue is nobody's contender; passing it");
                        return Ok(Gone::Foreign);
                    }
                    Some((_, watcher)) => watcher,
                };
                debug!("watching");
                let mut fired = Box::pin(watcher.changed());
                let event = loop {
                    tokio::select! {
                        // Ours first: ZooKeeper sends events in the order of its transactions,
                        // so a deletion of ours that came first is seen first. The data watch
                        // next: a head release's change comes before its deletion.
                        biased;
                        seen = node.next(epoch) => match seen? {
                            Seen::Gone => return Err(self.own_gone(epoch, &ours.name).await),
                            Seen::Ended => return Err(epoch.over()),
                            Seen::Nothing | Seen::Changed => continue,
                        },
                        () = changed.next() => continue,
                        event = &mut fired => break event,
                        _ = epoch.ended() => return Err(epoch.over()),
                    }
                };
                debug!(event = ?event.event_type, "watch fired");
                match (event.event_type, event.session_state) {
                    (zk::EventType::NodeDeleted, _) => {
                        let zxid = (event.zxid != zk::WatchedEvent::NO_ZXID).then_some(event.zxid);
                        if let Some(zxids) = &zxids {
                            zxids.saw(zxid.is_some());
                        }
                        if zxid.is_some() && changed.by(zxid, epoch.suspensions()) {
                            debug!("the node ahead was changed and deleted in one transaction: a head release");
                            return Ok(Gone::AsHead);
                        }
                        changed.settle();
                        return self
                            .how_gone(epoch, watched, node.czxid(), proof, zxid)
                            .await;
                    }
                    (zk::EventType::Session, state) if state.is_terminated() => {
                        return Err(epoch.over())
                    }
                    // Anything else (a child of a node that cannot have any): watch again.
                    _ => continue,
                }
            }
        }
        .instrument(span)
        .await
    }

    /// The error for a node of ours seen deleted: by someone else ([`Error::Lost`]), unless
    /// the session's end did it (the server deletes an expired session's ephemeral nodes, and
    /// may tell this connection so before it says the session is over). One request tells: a
    /// live session answers it.
    async fn own_gone(&self, epoch: &Epoch, name: &str) -> Error {
        let path = self.root.child(name);
        let at = path.as_str();
        match epoch
            .retry(at, |c| async move { c.check_stat(at).await })
            .await
        {
            Ok(_) => self.gone(epoch, name),
            Err(err) => err,
        }
    }

    /// The error for a node of ours that disappeared.
    fn gone(&self, epoch: &Epoch, name: &str) -> Error {
        if epoch.is_lost() {
            epoch.over()
        } else {
            Error::Lost {
                path: self.root.child(name),
            }
        }
    }
}

/// How a watched node went.
pub(super) enum Gone {
    /// By a head release (proven by the root's data): every node ahead of it is gone too.
    AsHead,
    /// Some other way (cancelled, expired, a peer's release, someone's delete), or not
    /// proven otherwise: nothing more is known.
    Plainly,
    /// It is a persistent node, nobody's contender (someone made it): as if deleted, for good.
    Foreign,
}

/// A waiter's turn once the node it watches goes, decided before it waits (so that it keeps
/// no listing): `Some(head)` when it will hold, `None` where the listing cannot tell (list
/// again).
struct OnceGone {
    watched: Contender,
    after_deletion: Option<bool>,
    after_head_release: Option<bool>,
}

/// [`OnceGone`] for the contender at `at` of `queue`, told to watch the node at `watched`
/// (ahead of it).
fn once_gone(rule: Rule, mut queue: Vec<Contender>, at: usize, watched: usize) -> OnceGone {
    let held_if = |queue: &[Contender], at: usize| {
        ((rule.decide)(queue, at) == Decision::Hold).then_some(at == 0)
    };
    let node = queue.remove(watched);
    let at = at - 1;
    OnceGone {
        watched: node,
        after_deletion: held_if(&queue, at),
        after_head_release: held_if(&queue[watched..], at - watched),
    }
}

/// Nodes of a used-up counter are refused by their creators (and deleted); they take no part.
fn live(mut queue: Vec<Contender>) -> Vec<Contender> {
    queue.retain(|c| !c.is_wrapped());
    queue
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::exclusive;

    fn queue(seqs: &[i64]) -> Vec<Contender> {
        seqs.iter()
            .map(|&s| Contender {
                name: format!("lock-{s:010}"),
                kind: "lock-",
                sequence: s,
            })
            .collect()
    }

    const MUTEX: Rule = crate::mutex::RULE;

    #[test]
    fn a_head_release_lets_any_waiter_hold_and_a_plain_deletion_only_the_second() {
        let third = once_gone(MUTEX, queue(&[1, 2, 3]), 2, 1);
        assert_eq!(third.watched.sequence, 2);
        assert_eq!(third.after_deletion, None, "1 may still hold");
        assert_eq!(third.after_head_release, Some(true));
        let second = once_gone(MUTEX, queue(&[1, 2, 3]), 1, 0);
        assert_eq!(second.after_deletion, Some(true));
        assert_eq!(second.after_head_release, Some(true));
    }

    #[test]
    fn readers_behind_a_released_writer_hold_and_only_the_first_is_the_head() {
        let rw = crate::rwlock::RULE;
        let q = |kinds: &str| crate::rwlock::tests::queue(kinds);
        // R0 W1 R2 R3: R3 watches W1.
        let r3 = once_gone(rw, q("RWRR"), 3, 1);
        // Whichever way W1 goes, no writer is left ahead of R3; R0 or R2 still are.
        assert_eq!(r3.after_deletion, Some(false));
        assert_eq!(r3.after_head_release, Some(false), "R2 is ahead");
        let r2 = once_gone(rw, q("RWRR"), 2, 1);
        assert_eq!(r2.after_head_release, Some(true));
        // W0 R1 W2: W2 watches R1, which is no head; after a plain deletion W0 is left.
        let w2 = once_gone(rw, q("WRW"), 2, 1);
        assert_eq!(w2.after_deletion, None);
        assert_eq!(w2.after_head_release, Some(true));
    }

    #[test]
    fn wrapped_nodes_take_no_part() {
        let q = live(queue(&[-2147483648, 7, 8]));
        assert_eq!(q.iter().map(|c| c.sequence).collect::<Vec<_>>(), [7, 8]);
        assert_eq!(exclusive(&q, 0), Decision::Hold);
    }
}
