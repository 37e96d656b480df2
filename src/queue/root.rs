//! A queue's root, checked once per recipe value: it exists as a persistent node (created with
//! its parents when missing), it is no ephemeral node, it is anchored, and its czxid is noted
//! so that a root deleted and created again is noticed (`RootReplaced`).

use zookeeper_client as zk;

use super::{Queue, RootMode};
use crate::claim::{claim, Make};
use crate::error::{Error, Result, RootKind};
use crate::session::Epoch;

impl Queue {
    /// Once per queue: makes sure the root exists as a persistent node (creating it and its
    /// parents when missing), refuses an ephemeral one, checks and writes the kind's mark (an
    /// anchored root: [`claim`]; the persistent anchor child keeps the server from reaping
    /// the root, a container or TTL node reading as persistent to clients, so its sequence
    /// never restarts), and notes its czxid.
    pub(super) async fn ensure_root(&self, epoch: &Epoch) -> Result<i64> {
        if let Some(czxid) = *self.root_czxid.lock().unwrap() {
            return Ok(czxid);
        }
        let stat = match self.mode {
            RootMode::Anchored(kind) => claim(
                epoch,
                &self.session,
                &self.root,
                kind,
                Make::Persistent(&[]),
            )
            .await?
            .ok_or_else(|| Error::RootReplaced {
                path: self.root.to_string(),
            })?,
            _ => self.plain_root(epoch).await?,
        };
        Ok(*self.root_czxid.lock().unwrap().get_or_insert(stat.czxid))
    }

    /// An unanchored root (a semaphore's leases): made when missing, refused when ephemeral.
    async fn plain_root(&self, epoch: &Epoch) -> Result<zk::Stat> {
        let root = self.root.as_str();
        self.session
            .check_size("the recipe root's path", root.len())?;
        let replaced = || Error::RootReplaced {
            path: root.to_owned(),
        };
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
        Ok(stat)
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
