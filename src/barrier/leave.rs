//! A double barrier's leave, the ZooKeeper recipe's (as Curator runs it): list the members;
//! the lowest waits for the highest to go, every other deletes its node and waits for the
//! lowest; done when no member is left. Each member watches one node, and the lowest leaves
//! last, so a release wakes the others once.

use std::time::Duration;

use tokio::time::Instant;
use tracing::debug;
use zookeeper_client as zk;

use super::double::{sleep_until, DoubleBarrierEntry, READY};
use crate::error::{Error, Result};
use crate::ops::OrMissing;

/// What a leaving member does next, from the members' names (sorted, `ready` left out).
#[derive(Debug, PartialEq, Eq)]
enum Step<'a> {
    /// Nobody is left.
    Done,
    /// Our node should be there and is not: someone deleted it, or our session ended.
    Missing,
    /// Ours is the only node: delete it and be done.
    Last,
    /// We are the lowest: wait for this (the highest) to go.
    WaitFor(&'a str),
    /// Delete our node (if still there), then wait for this (the lowest) to go.
    DeleteAndWaitFor(&'a str),
}

/// The recipe's rule. `ours`: our node's name while it should still exist.
fn step<'a>(members: &'a [String], ours: Option<&str>) -> Step<'a> {
    let (Some(lowest), Some(highest)) = (members.first(), members.last()) else {
        return Step::Done;
    };
    let Some(ours) = ours else {
        return Step::DeleteAndWaitFor(lowest);
    };
    match members.iter().position(|m| m == ours) {
        None => Step::Missing,
        Some(_) if members.len() == 1 => Step::Last,
        Some(0) => Step::WaitFor(highest),
        Some(_) => Step::DeleteAndWaitFor(lowest),
    }
}

/// Leaves `entry`'s barrier (see [`DoubleBarrierEntry::leave`]).
pub(super) async fn leave(
    entry: &mut DoubleBarrierEntry,
    deadline: Option<(Instant, Duration)>,
) -> Result<()> {
    let epoch = entry.epoch.clone();
    let root = entry.root.as_str().to_owned();
    let root = root.as_str();
    let ours = entry
        .node
        .rsplit_once('/')
        .map_or(String::new(), |(_, name)| name.to_owned());
    loop {
        let children = epoch
            .retry(
                root,
                |c| async move { c.list_children(root).await.or_missing() },
            )
            .await?
            .unwrap_or_default();
        let mut members: Vec<String> = children.into_iter().filter(|c| c != READY).collect();
        members.sort();
        let watched = match step(&members, entry.ours.then_some(ours.as_str())) {
            Step::Done => break,
            Step::Missing => {
                entry.ours = false;
                return Err(if epoch.is_lost() {
                    epoch.over()
                } else {
                    Error::Lost {
                        path: entry.node.clone(),
                    }
                });
            }
            Step::Last => {
                entry.delete().await?;
                break;
            }
            Step::WaitFor(node) => node,
            Step::DeleteAndWaitFor(node) => {
                entry.delete().await?;
                node
            }
        };
        let watched = &entry.root.child(watched);
        let (stat, watcher) = epoch
            .retry(
                watched,
                |c| async move { c.check_and_watch_stat(watched).await },
            )
            .await?;
        if stat.is_none() {
            continue;
        }
        debug!(inside = members.len(), %watched, "waiting for the members to leave");
        tokio::select! {
            event = watcher.changed() => debug!(event = ?event.event_type, "member watch fired"),
            () = epoch.ended() => {
                entry.ours = false;
                return Err(epoch.over());
            }
            () = sleep_until(deadline) => {
                entry.delete().await?;
                delete_ready(entry).await?;
                let (names, more) = (members.iter().take(3).cloned().collect::<Vec<_>>(), members.len().saturating_sub(3));
                let more = if more > 0 { format!(" and {more} more") } else { String::new() };
                return Err(Error::TimedOut {
                    path: root.to_owned(),
                    waited: deadline.map_or(Duration::ZERO, |(_, limit)| limit),
                    reason: format!("{} members still inside ({}{more})", members.len(), names.join(", ")),
                });
            }
        }
    }
    delete_ready(entry).await?;
    debug!("every member left");
    Ok(())
}

/// Deletes `ready`, so that the next round waits for its members again (someone else's
/// delete first is as good).
async fn delete_ready(entry: &DoubleBarrierEntry) -> Result<()> {
    let ready = &entry.root.child(READY);
    entry
        .epoch
        .retry(ready, |c| async move {
            match c.delete(ready, None).await {
                Ok(()) | Err(zk::Error::NoNode) => Ok(()),
                Err(e) => Err(e),
            }
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_lowest_leaves_last_and_the_others_watch_it() {
        let three = names(&["a", "b", "c"]);
        assert_eq!(step(&three, Some("a")), Step::WaitFor("c"));
        assert_eq!(step(&three, Some("b")), Step::DeleteAndWaitFor("a"));
        assert_eq!(step(&three, Some("c")), Step::DeleteAndWaitFor("a"));
        // Ours deleted already: wait for the lowest whoever it is.
        assert_eq!(step(&names(&["a", "c"]), None), Step::DeleteAndWaitFor("a"));
    }

    #[test]
    fn alone_or_empty_is_done() {
        assert_eq!(step(&names(&["a"]), Some("a")), Step::Last);
        assert_eq!(step(&[], Some("a")), Step::Done);
        assert_eq!(step(&[], None), Step::Done);
    }

    #[test]
    fn our_node_gone_is_told() {
        assert_eq!(step(&names(&["a", "c"]), Some("b")), Step::Missing);
        assert_eq!(step(&names(&["c"]), Some("b")), Step::Missing);
    }
}
