//! Whose a node at the kept path is: ours on this session, ours of an earlier session (deleted),
//! or someone else's (never touched); the look sets the watch the keeper waits on.

use tracing::debug;
use zookeeper_client as zk;

use super::{lock, Shared};
use crate::error::Result;
use crate::kept::KeptMode;
use crate::ops::OrMissing;
use crate::session::Epoch;

/// Whose a node at our path is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Owner {
    /// Ours, on this session (or persistent and made by us).
    Live,
    /// Ours, of an earlier session that may live on at the server: deleted.
    Stale,
    /// Someone else's: never touched.
    Foreign,
}

/// What a look at the node found.
pub(super) enum Look {
    Ours(String, zk::OneshotWatcher),
    Foreign(i64, zk::OneshotWatcher),
    Gone,
    /// Something changed (an old node of ours deleted, ours found by its name): look again.
    Again,
}

impl Shared {
    pub(super) fn owner_of(&self, epoch: &Epoch, stat: &zk::Stat) -> Owner {
        let ours = lock(&self.ours);
        if self.mode.is_ephemeral() {
            match stat.ephemeral_owner {
                owner if !ours.sessions.contains(&owner) => Owner::Foreign,
                owner if owner == epoch.id() => Owner::Live,
                _ => Owner::Stale,
            }
        } else if ours.czxids.contains(&stat.czxid) {
            Owner::Live
        } else {
            Owner::Foreign
        }
    }

    /// A persistent create whose reply we did not see: ours when the node at the path has the
    /// data sent and was made after the parent's last child change read before sending.
    pub(super) async fn resolve_pending(&self, epoch: &Epoch) -> Result<()> {
        let Some((before, sent)) = lock(&self.ours).pending.clone() else {
            return Ok(());
        };
        let found = crate::ops::read(epoch, self.path.as_str()).await?;
        let mut ours = lock(&self.ours);
        if let Some((data, stat)) = found {
            if stat.czxid > before && data == sent && !ours.czxids.contains(&stat.czxid) {
                debug!(path = %self.path, "a create whose reply was lost made our node");
                ours.czxids.push(stat.czxid);
            }
        }
        ours.pending = None;
        Ok(())
    }

    /// Looks at the node, with a watch on it.
    pub(super) async fn look(&self, epoch: &Epoch) -> Result<Look> {
        if self.mode == KeptMode::ProtectedEphemeralSequential {
            return self.look_protected(epoch).await;
        }
        self.resolve_pending(epoch).await?;
        let path = self.path.as_str();
        let (stat, watcher) = epoch
            .retry(path, |c| async move { c.check_and_watch_stat(path).await })
            .await?;
        let Some(stat) = stat else {
            return Ok(Look::Gone);
        };
        match self.owner_of(epoch, &stat) {
            Owner::Live => Ok(Look::Ours(path.to_owned(), watcher)),
            Owner::Foreign => Ok(Look::Foreign(stat.ephemeral_owner, watcher)),
            Owner::Stale => {
                debug!(
                    path,
                    owner = format_args!("{:#x}", stat.ephemeral_owner),
                    "deleting our earlier session's node"
                );
                crate::ops::delete_where(epoch, path, stat.version).await?;
                Ok(Look::Again)
            }
        }
    }

    /// The protected node: at the path last known, or found among the parent's children by
    /// the uuid in its name (a create whose reply was lost, a new session).
    async fn look_protected(&self, epoch: &Epoch) -> Result<Look> {
        let current = lock(&self.ours).current.clone();
        if let Some(path) = current.as_deref() {
            let (stat, watcher) = epoch
                .retry(path, |c| async move { c.check_and_watch_stat(path).await })
                .await?;
            if stat.is_some_and(|s| self.owner_of(epoch, &s) == Owner::Live) {
                return Ok(Look::Ours(path.to_owned(), watcher));
            }
        }
        let mut found = None;
        for (path, stat) in self.ours_in_parent(epoch).await? {
            match self.owner_of(epoch, &stat) {
                Owner::Live if found.is_none() => found = Some(path),
                Owner::Foreign => {}
                // An earlier session's, or a second of this session's (cannot be): deleted.
                _ => {
                    debug!(%path, "deleting an older node of ours");
                    crate::ops::delete_where(epoch, &path, stat.version).await?;
                }
            }
        }
        let again = found.is_some();
        lock(&self.ours).current = found;
        Ok(if again { Look::Again } else { Look::Gone })
    }

    /// The parent's children whose names carry our uuid, with their stats.
    pub(super) async fn ours_in_parent(&self, epoch: &Epoch) -> Result<Vec<(String, zk::Stat)>> {
        let parent = self.parent();
        let children = epoch
            .retry(parent, |c| async move {
                c.list_children(parent).await.or_missing()
            })
            .await?
            .unwrap_or_default();
        let mut found = Vec::new();
        for name in children {
            let Some(sequence) = name.strip_prefix(self.protected.as_str()) else {
                continue;
            };
            if sequence.is_empty() || !sequence.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let path = self.in_parent(&name);
            let p = path.as_str();
            if let Some(stat) = epoch
                .retry(p, |c| async move { c.check_stat(p).await })
                .await?
            {
                found.push((path, stat));
            }
        }
        Ok(found)
    }
}
