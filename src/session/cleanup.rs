//! Node deletion, in one place: a release, a cancelled acquisition's node, a dropped guard, a
//! grant lost to a suspension. Each goes through [`Epoch::delete`]; the ones nobody awaits go
//! through the session's janitor ([`Session::clean_up`](super::Session::clean_up)).

use std::sync::Arc;

use tokio::sync::mpsc;
use tracing::debug;
use zookeeper_client as zk;

use super::epoch::Epoch;
use crate::error::{connection_lost, Result};

/// How a contender node of ours goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Release {
    /// A plain delete.
    Plain,
    /// The node is the first live one of its queue: it goes in one transaction that also
    /// writes its name into its parent's data, which a waiter reads as the proof of a head
    /// release (see the `queue` module). Only the node's owner may ask for it, and only while
    /// that is true.
    AsHead,
}

/// What a delete found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Deleted {
    /// Our request deleted it (possibly a retry after a lost reply).
    ByUs,
    /// It was already gone before our first request: someone else deleted it.
    Before,
}

/// A node to delete in the background (cancelled acquisitions, dropped guards).
pub(super) struct Cleanup {
    pub epoch: Arc<Epoch>,
    pub path: String,
    pub how: Release,
}

impl Epoch {
    /// Deletes a contender node of ours on this session, retrying across disconnects for as
    /// long as the session lives (a node left behind would block its queue for the session's
    /// lifetime; a delete is small, so no server refuses it by closing the connection). Once
    /// the session is over there is nothing to do: the server deletes ephemeral nodes with it,
    /// and this answers the session's end.
    pub async fn delete(&self, path: &str, how: Release) -> Result<Deleted> {
        let mut losses = 0u32;
        loop {
            let client = self.client()?;
            match delete_contender(&client, path, how).await {
                Ok(()) => {
                    debug!(%path, "contender node deleted");
                    return Ok(Deleted::ByUs);
                }
                // After a broken connection our first delete may well have gone through.
                Err(zk::Error::NoNode) if losses > 0 => return Ok(Deleted::ByUs),
                Err(zk::Error::NoNode) => return Ok(Deleted::Before),
                Err(e) if connection_lost(&e) => {
                    drop(client);
                    losses += 1;
                    self.until_reconnected().await;
                }
                Err(err) => return Err(self.error(err, path)),
            }
        }
    }
}

/// One delete (or head release) request.
async fn delete_contender(
    client: &zk::Client,
    path: &str,
    how: Release,
) -> std::result::Result<(), zk::Error> {
    let Some((parent, name)) = path.rsplit_once('/').filter(|_| how == Release::AsHead) else {
        return client.delete(path, None).await;
    };
    let parent = if parent.is_empty() { "/" } else { parent };
    let mut writer = client.new_multi_writer();
    writer.add_set_data(parent, name.as_bytes(), None)?;
    writer.add_delete(path, None)?;
    match writer.commit().await {
        Ok(_) => Ok(()),
        // The parent refuses our write (its ACL): a plain delete, which waiters read as such.
        Err(zk::MultiWriteError::OperationFailed { index: 0, source })
            if !connection_lost(&source) =>
        {
            debug!(%path, %source, "head release refused on the parent; deleting plainly");
            client.delete(path, None).await
        }
        Err(zk::MultiWriteError::RequestFailed { source })
        | Err(zk::MultiWriteError::OperationFailed { source, .. }) => Err(source),
    }
}

/// Deletes abandoned contender nodes, each in its own task so one slow delete holds up none.
pub(super) async fn janitor(mut rx: mpsc::UnboundedReceiver<Cleanup>) {
    while let Some(job) = rx.recv().await {
        tokio::spawn(async move {
            if let Err(err) = job.epoch.delete(&job.path, job.how).await {
                debug!(path = %job.path, %err, "background delete not done");
            }
        });
    }
}
