//! A queue that may be deep: finding the node ahead by name instead of listing.
//!
//! A listing returns every child, so when thousands wait on one lock every enqueue that lists
//! costs the server a reply the size of the queue, and all of them together its square (10,000
//! waiters listing at once ran a 512 MiB server out of heap). Plain names (`lock-NNNNNNNNNN`,
//! the mutex's) make the node ahead computable from our own sequence: an enqueue that may meet a
//! deep queue counts the children instead of listing them (the root's stat, in the same burst
//! as the create), asks for `lock-{ours - 1}` and the few numbers below it, and watches the
//! nearest that exists. Its cost does not depend on the depth. (A count, however small, is
//! no licence to list afterwards: the nodes created meanwhile would be in the listing, and
//! when hundreds enqueue at once they are.)
//!
//! **Why it is right.** A sequence number is given once: a name `lock-{s}` that does not exist
//! now never will, so the nearest plain node found below ours has no plain node between it and
//! us. Not every number was a plain node, though: ZooKeeper also counts deletions, and a peer
//! (Curator) names its nodes `_c_{uuid}-lock-{s}`, which no probe can find. So the waiter
//! remembers whether it skipped a number it could not account for: if it did not, the node it
//! watches is its immediate predecessor and a head release lets it hold without a read, as in a
//! listed queue; if it did, it lists once when that node goes (by then the queue ahead of it is
//! at most the numbers it skipped). A plain deletion of the watched node (a cancelled waiter)
//! sends it looking further down, again by name. Where none of the numbers just below ours is
//! a plain node (a short queue, whose earlier nodes are gone), it lists.
//!
//! **When it is used.** Only plain names can be probed, and a listing is cheaper where the
//! queue is short (one request instead of a count and then a probe): a session remembers the
//! depth it last saw of each root (a bounded, short-lived memory, shared by every recipe value
//! made from it, so that a `ZkMutex` made per request does as well as one kept), and an
//! enqueue lists in its first burst where that was short a moment ago and the session is not
//! putting many nodes in that queue at once. A root it knows nothing of is counted.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::debug;

use super::wait::Gone;
use super::{Queue, Rule, Wait};
use crate::error::Result;
use crate::grant::NodeWatch;
use crate::path::{Contender, Naming};
use crate::session::Epoch;

/// A queue seen with at most this many children is listed in the burst: a reply of about
/// 1 KiB.
const SHORT: usize = 64;

/// How long a depth seen stays a guide for the next enqueue.
const HINT_FOR: Duration = Duration::from_secs(10);

/// At most this many enqueues of one session on one root list in their first burst at a
/// time: the depth they will see is not known until the answer comes back, and a crowd on
/// many sessions sends one each.
const MAX_BLIND: usize = 1;

/// How many numbers below a point one probe asks for, in one burst.
const WINDOW: i64 = 8;

/// The roots a session remembers at most; beyond, the idle ones are forgotten.
const ROOTS: usize = 1024;

/// What a session knows of its queues' depths, by root.
#[derive(Debug, Default)]
pub(crate) struct Depths(Mutex<HashMap<String, DepthHint>>);

impl Depths {
    fn hints(&self) -> std::sync::MutexGuard<'_, HashMap<String, DepthHint>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts an enqueue on `root`: whether it lists in its burst.
    fn begin(&self, root: &str) -> bool {
        let mut hints = self.hints();
        if hints.len() >= ROOTS && !hints.contains_key(root) {
            hints.retain(|_, h| h.enqueuing > 0 || h.fresh());
            if hints.len() >= ROOTS {
                hints.retain(|_, h| h.enqueuing > 0);
            }
        }
        let hint = hints.entry(root.to_owned()).or_default();
        let lists = hint.lists();
        hint.enqueuing += 1;
        lists
    }

    fn end(&self, root: &str) {
        if let Some(hint) = self.hints().get_mut(root) {
            hint.enqueuing = hint.enqueuing.saturating_sub(1);
        }
    }

    fn saw(&self, root: &str, depth: usize) {
        let mut hints = self.hints();
        if let Some(hint) = hints.get_mut(root) {
            hint.seen = Some((depth, Instant::now()));
        }
    }
}

/// What a session knows of one queue's depth.
#[derive(Debug, Default)]
struct DepthHint {
    /// The number of children last seen, and when.
    seen: Option<(usize, Instant)>,
    /// Enqueues under way.
    enqueuing: usize,
}

impl DepthHint {
    fn fresh(&self) -> bool {
        self.seen.is_some_and(|(_, at)| at.elapsed() < HINT_FOR)
    }

    fn lists(&self) -> bool {
        self.enqueuing < MAX_BLIND && self.fresh() && self.seen.is_some_and(|(d, _)| d <= SHORT)
    }
}

/// An enqueue under way (see [`Queue::begin_enqueue`]); dropping it ends it.
pub(super) struct Enqueuing<'a> {
    queue: &'a Queue,
    counted: bool,
}

impl Drop for Enqueuing<'_> {
    fn drop(&mut self) {
        if self.counted {
            self.queue.depths.end(self.queue.root().as_str());
        }
    }
}

impl Queue {
    /// Starts an enqueue by `rule`: whether it lists the children in its first burst (else it
    /// counts them), and the ticket that ends it.
    pub(super) fn begin_enqueue(&self, rule: Rule) -> (bool, Enqueuing<'_>) {
        if rule.naming != Naming::Plain {
            // Only plain names can be found without a listing.
            return (
                true,
                Enqueuing {
                    queue: self,
                    counted: false,
                },
            );
        }
        (
            self.depths.begin(self.root().as_str()),
            Enqueuing {
                queue: self,
                counted: true,
            },
        )
    }

    /// Notes the number of children just seen.
    pub(super) fn saw_depth(&self, depth: usize) {
        self.depths.saw(self.root().as_str(), depth);
    }

    /// Waits for the turn of `ours` (plain-named, under the exclusive rule) in a queue that may
    /// be deep, as the module docs say: `Some(head)` once it holds, `None` when it does not
    /// and `wait` is [`Wait::No`].
    pub(super) async fn wait_by_name(
        &self,
        epoch: &Epoch,
        rule: Rule,
        ours: &Contender,
        node: &mut NodeWatch,
        wait: Wait,
    ) -> Result<Option<bool>> {
        let mut below = ours.sequence;
        // Whether a number between the watched node and ours may be a node no probe can name.
        let mut unsure = false;
        loop {
            let Some((ahead, skipped)) = self.probe(epoch, rule, below).await? else {
                debug!(below, "no plain node just below; listing");
                return self.wait_listed(epoch, rule, ours, node, wait).await;
            };
            unsure |= skipped;
            if wait == Wait::No {
                // Not free, unless what stands in the way is nobody's contender.
                if !self.is_foreign(epoch, &ahead).await? {
                    return Ok(None);
                }
                below = ahead.sequence;
                continue;
            }
            match self
                .wait_gone(epoch, &ahead, ours, node, rule.head_release)
                .await?
            {
                Gone::AsHead if !unsure => return self.holds(epoch, ours, node, true).await,
                Gone::AsHead => {
                    debug!("the node ahead released; listing once for the numbers skipped");
                    return self.wait_listed(epoch, rule, ours, node, wait).await;
                }
                Gone::Plainly | Gone::Foreign => {
                    debug!("the node ahead went; looking further down by name");
                    below = ahead.sequence;
                }
            }
        }
    }

    /// The nearest plain node below sequence `below` among the next [`WINDOW`] numbers, and
    /// whether numbers were skipped to find it; `None` where none of them is one. The number
    /// just below is asked for alone (in a crowd it is there), the rest in one burst.
    async fn probe(
        &self,
        epoch: &Epoch,
        rule: Rule,
        below: i64,
    ) -> Result<Option<(Contender, bool)>> {
        let kind = rule.names[0];
        let numbers: Vec<i64> = (1..=WINDOW)
            .map(|d| below - d)
            .take_while(|s| *s >= 0)
            .collect();
        let (first, rest) = match numbers.split_first() {
            Some(split) => split,
            None => return Ok(None),
        };
        let found = match self.first_existing(epoch, kind, &[*first]).await? {
            Some(_) => Some(*first),
            None => self.first_existing(epoch, kind, rest).await?,
        };
        Ok(found.map(|sequence| {
            (
                Contender {
                    name: format!("{kind}{sequence:010}"),
                    kind,
                    sequence,
                },
                sequence != *first,
            )
        }))
    }

    /// The first of `numbers` whose plain node exists, asked for all at once (no watches).
    async fn first_existing(
        &self,
        epoch: &Epoch,
        kind: &str,
        numbers: &[i64],
    ) -> Result<Option<i64>> {
        if numbers.is_empty() {
            return Ok(None);
        }
        let paths: Vec<String> = numbers
            .iter()
            .map(|s| self.root.child(&format!("{kind}{s:010}")))
            .collect();
        let paths = &paths;
        let found = epoch
            .retry(self.root.as_str(), |c| async move {
                let asked: Vec<_> = paths.iter().map(|p| c.check_stat(p)).collect();
                for (i, answer) in asked.into_iter().enumerate() {
                    if answer.await?.is_some() {
                        return Ok(Some(i));
                    }
                }
                Ok(None)
            })
            .await?;
        Ok(found.map(|i| numbers[i]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_a_bounded_number_of_roots() {
        let depths = Depths::default();
        for i in 0..ROOTS * 3 {
            let root = format!("/r{i}");
            assert!(!depths.begin(&root), "a root never seen is counted");
            depths.saw(&root, 1);
            depths.end(&root);
            assert!(depths.hints().len() <= ROOTS);
        }
        let busy = "/busy";
        depths.begin(busy);
        for i in 0..ROOTS * 2 {
            depths.begin(&format!("/s{i}"));
            depths.end(&format!("/s{i}"));
        }
        assert!(
            depths.hints().contains_key(busy),
            "a root with enqueues under way stays"
        );
    }

    #[test]
    fn lists_only_a_queue_seen_short_lately_and_not_many_at_once() {
        let mut hint = DepthHint::default();
        assert!(!hint.lists(), "never seen: count first");
        hint.seen = Some((SHORT, Instant::now()));
        assert!(hint.lists());
        hint.enqueuing = MAX_BLIND;
        assert!(!hint.lists(), "many under way: the depth may have grown");
        hint.enqueuing = 0;
        hint.seen = Some((SHORT + 1, Instant::now()));
        assert!(!hint.lists());
        if let Some(long_ago) = Instant::now().checked_sub(HINT_FOR) {
            hint.seen = Some((1, long_ago));
            assert!(!hint.lists(), "an old depth says nothing");
        }
    }
}
