//! Node deletion for every layer above: a release, a cancelled acquisition's node, a dropped guard, a
//! grant lost to a suspension. Each goes through [`Epoch::delete`]; the ones nobody awaits go
//! through the session's janitor ([`Session::clean_up`](super::Session::clean_up)).

use std::sync::Arc;

use tokio::sync::mpsc;
use tracing::debug;
use zookeeper_client as zk;

use super::epoch::Epoch;
use crate::error::{connection_lost, Result};

/// How a node of ours goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Release {
    /// A plain delete.
    Plain,
    /// One transaction that writes the node's name into its parent's data (any version), writes
    /// the node itself (empty data: its watchers see a change and the deletion with the one
    /// transaction's zxid) and deletes it; where the parent refuses the write (its ACL), a
    /// plain delete. What the note means is the caller's (the queue's head release,
    /// `queue/mod.rs`).
    NoteInParent,
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
    /// Deletes a node of ours on this session, retrying across disconnects for as long as the
    /// session lives (an ephemeral node left behind stays for the session's lifetime; a delete
    /// is small, so no server refuses it by closing the connection). Once
    /// the session is over there is nothing to do: the server deletes ephemeral nodes with it,
    /// and this answers the session's end.
    pub async fn delete(&self, path: &str, how: Release) -> Result<Deleted> {
        let mut losses = 0u32;
        loop {
            let client = self.client()?;
            match delete_node(&client, path, how).await {
                Ok(()) => {
                    debug!(%path, "node deleted");
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

/// One delete (or delete with a note in the parent) request.
async fn delete_node(
    client: &zk::Client,
    path: &str,
    how: Release,
) -> std::result::Result<(), zk::Error> {
    let Some((parent, name)) = path
        .rsplit_once('/')
        .filter(|_| how == Release::NoteInParent)
    else {
        return client.delete(path, None).await;
    };
    let parent = if parent.is_empty() { "/" } else { parent };
    let mut writer = client.new_multi_writer();
    writer.add_set_data(parent, name.as_bytes(), None)?;
    writer.add_set_data(path, &[], None)?;
    writer.add_delete(path, None)?;
    match writer.commit().await {
        Ok(_) => Ok(()),
        // The parent refuses our write (its ACL): a plain delete, without the note.
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

/// Deletes abandoned nodes, each in its own task so one slow delete holds up none.
pub(super) async fn janitor(mut rx: mpsc::UnboundedReceiver<Cleanup>) {
    while let Some(job) = rx.recv().await {
        tokio::spawn(async move {
            if let Err(err) = job.epoch.delete(&job.path, job.how).await {
                debug!(path = %job.path, %err, "background delete not done");
            }
        });
    }
}
