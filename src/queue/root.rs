//! A queue's root, checked once per recipe value: it exists as a persistent node (created with
//! its parents when missing), it is no ephemeral node, it is anchored, and its czxid is noted
//! so that a root deleted and created again is noticed (`RootReplaced`).

use zookeeper_client as zk;

use super::{Queue, RootMode};
use crate::error::{Error, Result, RootKind};
use crate::session::Epoch;

/// A persistent child that keeps the root from ever being empty. ZooKeeper reports a
/// container's or TTL node's `ephemeralOwner` as 0 to clients, so no client can tell such a
/// root from a persistent one; but the server deletes those only when they have no children,
/// so with this child in place the root (and its sequence counter) stays. Its name sorts after
/// every `lock-NNNNNNNNNN` suffix, so Curator, which sorts all children, never sees it ahead of
/// a contender.
use crate::layout::ANCHOR;

impl Queue {
    /// Once per queue: makes sure the root exists as a persistent node (creating it and its
    /// parents when missing), refuses an ephemeral one, anchors it, and notes its czxid.
    pub(super) async fn ensure_root(&self, epoch: &Epoch) -> Result<i64> {
        if let Some(czxid) = *self.root_czxid.lock().unwrap() {
            return Ok(czxid);
        }
        let root = self.root.as_str();
        self.session
            .check_size("the recipe root's path", root.len() + ANCHOR.len() + 1)?;
        let replaced = || Error::RootReplaced {
            path: root.to_owned(),
        };
        // Persistent, with the session's node ACLs (default: anyone, as Curator's).
        let options = &zk::CreateMode::Persistent.with_acls(self.session.acls());
        let stat = match epoch
            .retry(root, |c| async move { c.check_stat(root).await })
            .await?
        {
            Some(stat) => stat,
            None => {
                epoch
                    .retry(root, |c| async move { c.mkdir(root, options).await })
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
        if self.mode == RootMode::Anchored {
            let anchor = self.root.child(ANCHOR);
            let anchor = anchor.as_str();
            let created = epoch
                .retry(root, |c| async move {
                    match c.create(anchor, &[], options).await {
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
}

/// What the root's `ephemeralOwner` says about it: `None` for a node that can be a root.
/// (Servers report containers and TTL nodes to clients as persistent, 0; the anchor keeps
/// those from being reaped.)
fn root_kind(ephemeral_owner: i64) -> Option<RootKind> {
    (ephemeral_owner != 0).then_some(RootKind::Ephemeral)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ephemeral_roots_are_refused() {
        assert_eq!(root_kind(0), None);
        assert_eq!(root_kind(0x1234), Some(RootKind::Ephemeral));
    }
}
