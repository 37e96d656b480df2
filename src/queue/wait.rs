//! The algorithm: enqueue, ask the recipe's rule, watch one node, decide again when it goes.
//!
//! A contender's node is created and the children listed in one burst ([`Queue::enqueue`]).
//! The rule says "hold" or "watch node i". A waiter decides, before it waits, what it will do
//! once the watched node goes ([`once_gone`]): removing nodes ahead of a contender can only let
//! it proceed, and nodes created later sort behind it, so a "hold" reached from the old listing
//! minus the gone nodes is true then. A plain deletion removes the watched node; a head release
//! (the event `NodeDataChanged`, see the module docs) removes it and every node ahead of it. So
//! the second in line holds without a read, and after a head release so does anyone. Only when
//! the listing cannot tell does the waiter list again.
//!
//! Where the queue may be deep, the enqueue counts the children instead of listing them, and
//! the waiter finds the node ahead by name (`deep.rs`); it comes back here for a listing only
//! where names cannot tell.

use std::sync::Arc;

use tracing::{debug, debug_span, Instrument};
use zookeeper_client as zk;

use super::create::Listing;
use super::{Decision, Queue, Rule, Wait};
use crate::error::{Error, Result};
use crate::grant::{Grant, OnChange};
use crate::path::{sorted_contenders, Contender, Naming};
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
        let turn = match std::mem::replace(&mut created.listing, Listing::Count(0)) {
            Listing::Children(children) => {
                self.saw_depth(children.len());
                debug!(children = children.len(), "listed");
                self.wait_turn(epoch, rule, ours, children, wait).await?
            }
            // Counted: the queue may have grown since (a listing now could be long), so the
            // node ahead is looked for by name, which lists only where names cannot tell.
            Listing::Count(n) => {
                self.saw_depth(n);
                debug!(children = n, "counted; looking for the node ahead by name");
                self.wait_by_name(epoch, rule, ours, wait).await?
            }
        };
        let Some(head) = turn else {
            debug!(node = %created.node.path, "not free; withdrawing");
            return Ok(None);
        };
        debug!(node = %created.node.path, sequence = created.contender.sequence, head, "granted");
        let (release, on_change) = match rule.head_release {
            true if head => (Release::AsHead, OnChange::Lost),
            true => (Release::Plain, OnChange::Lost),
            false => (Release::Plain, OnChange::Ignore),
        };
        Ok(Some(created.into_grant(release, on_change)))
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
        mut children: Vec<String>,
        wait: Wait,
    ) -> Result<Option<bool>> {
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
                Decision::Hold => return Ok(Some(at == 0)),
                Decision::Watch(i) => i,
            };
            if wait == Wait::No {
                return Ok(None);
            }
            let next = once_gone(rule, queue, at, i);
            let turn = match self.wait_gone(epoch, &next.watched, rule).await? {
                Gone::AsHead => next.after_head_release,
                Gone::Plainly => next.after_deletion,
            };
            if let Some(head) = turn {
                return Ok(Some(head));
            }
            debug!("listing again");
            children = self.list(epoch).await?;
        }
    }

    /// Lists the children and waits as [`Self::wait_turn`] does.
    pub(super) async fn wait_listed(
        &self,
        epoch: &Epoch,
        rule: Rule,
        ours: &Contender,
        wait: Wait,
    ) -> Result<Option<bool>> {
        let children = self.list(epoch).await?;
        self.wait_turn(epoch, rule, ours, children, wait).await
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

    /// Waits for `watched` to go, telling a head release from any other deletion where the
    /// recipe has them.
    ///
    /// The watch is a data watch where the node's data is known to be small (plain names carry
    /// only the owner record): on a node already gone it leaves nothing on the server, where an
    /// exists-watch would stay registered, for a name that never comes back, until the session
    /// ends. Other nodes (an election candidate's data is the user's) get an exists-watch.
    pub(super) async fn wait_gone(
        &self,
        epoch: &Epoch,
        watched: &Contender,
        rule: Rule,
    ) -> Result<Gone> {
        let head_releases = rule.head_release;
        let by_data = rule.naming == Naming::Plain;
        let path = self.root.child(&watched.name);
        let span = debug_span!("wait", watched = %watched.name);
        async {
            loop {
                let at = path.as_str();
                let watch = epoch
                    .retry(at, |c| async move {
                        if !by_data {
                            return match c.check_and_watch_stat(at).await? {
                                (Some(stat), watcher) => Ok(Some((stat, watcher))),
                                (None, _) => Ok(None),
                            };
                        }
                        match c.get_and_watch_data(at).await {
                            Ok((_, stat, watcher)) => Ok(Some((stat, watcher))),
                            Err(zk::Error::NoNode) => Ok(None),
                            Err(e) => Err(e),
                        }
                    })
                    .await?;
                let watcher = match watch {
                    None => return Ok(Gone::Plainly),
                    // Changed before our watch was set: the change we would have been told of
                    // (our nodes are created at version 0, and a head release deletes its node
                    // in the same transaction, so only someone else's change is seen here).
                    Some((stat, _)) if head_releases && stat.version != 0 => {
                        return Ok(Gone::AsHead)
                    }
                    Some((_, watcher)) => watcher,
                };
                debug!("watching");
                let event = tokio::select! {
                    event = watcher.changed() => event,
                    _ = epoch.ended() => return Err(epoch.over()),
                };
                debug!(event = ?event.event_type, "watch fired");
                match (event.event_type, event.session_state) {
                    (zk::EventType::NodeDataChanged, _) if head_releases => {
                        return Ok(Gone::AsHead)
                    }
                    (zk::EventType::NodeDeleted, _) => return Ok(Gone::Plainly),
                    (zk::EventType::Session, state) if state.is_terminated() => {
                        return Err(epoch.over())
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
    /// By a head release: every node ahead of it is gone too.
    AsHead,
    /// Some other way (cancelled, expired, a peer's release): nothing more is known.
    Plainly,
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
