//! Putting a contender node in a queue: `enqueue` checks the root, runs the create (the
//! burst and its recovery are `task.rs`), chooses the token and refuses what cannot be a
//! grant; the node is an [`OwnedNode`] (`owned.rs`) until it becomes one.

use std::sync::Arc;

use tracing::debug;

use super::{Queue, RootMode};
use crate::detach::Detach;
use crate::error::{Error, Result, RootKind};
use crate::fence::FencingToken;
use crate::grant::{Grant, NodeWatch, OnChange};
use crate::layout::{owner, ANCHOR};
use crate::path::{new_uuid, Contender, Naming};
use crate::session::{Deleted, Epoch, Release};

pub(crate) use super::owned::OwnedNode;
use super::task::{CreateTask, Found};

/// What an enqueue learnt of the queue right after its create.
pub(crate) enum Listing {
    /// The children.
    Children(Vec<String>),
    /// Only how many there are (a queue that may be deep, see `deep.rs`).
    Count(usize),
}

/// A node just put in a queue, with the children listed (or counted) right after.
pub(crate) struct Created {
    pub node: OwnedNode,
    pub contender: Contender,
    /// The token a grant of this node carries.
    pub token: FencingToken,
    pub czxid: i64,
    pub listing: Listing,
}

impl Created {
    /// The children listed right after the create (none where they were only counted).
    pub fn children(&self) -> &[String] {
        match &self.listing {
            Listing::Children(children) => children,
            Listing::Count(_) => &[],
        }
    }

    /// The watch of this node, not set yet.
    pub fn node_watch(&self) -> NodeWatch {
        NodeWatch::new(&self.node.path, self.czxid)
    }

    /// The node holds: hand it out, to be deleted as `release` says, and ended by a data
    /// change as `on_change` says, its node followed from `watch` (the waiter's, or none).
    pub fn into_grant(
        self,
        release: Release,
        on_change: OnChange,
        watch: Option<NodeWatch>,
    ) -> Grant {
        let watch = watch.unwrap_or_else(|| self.node_watch());
        // The lease stays kept across the handover (with no interest it would start afresh).
        let _kept = self.node.epoch.lease_interest();
        let (session, epoch, path) = self.node.disarm();
        Grant::new(
            session, epoch, path, self.token, self.czxid, release, on_change, watch,
        )
    }
}

impl Queue {
    /// Puts a node named `name` carrying `data` (`None`: the owner record, see
    /// [owner record](crate::layout::owner)) in the queue (checking the root first) and returns it with the
    /// children listed (`list`) or counted right after its creation. Dropping the result
    /// deletes the node in the background.
    pub async fn enqueue(
        &self,
        epoch: &Arc<Epoch>,
        name: &'static str,
        naming: Naming,
        data: Option<&[u8]>,
        list: bool,
    ) -> Result<Created> {
        let mut replaced = 0;
        let mut incarnation;
        let (node, contender, czxid, listing) = loop {
            let root_czxid = match self.mode {
                RootMode::Container { .. } => None,
                RootMode::Anchored(_) | RootMode::Unanchored => {
                    Some(self.ensure_root(epoch).await?)
                }
            };
            incarnation = root_czxid.unwrap_or(0);
            match self
                .create(epoch, name, naming, data, root_czxid, list)
                .await
            {
                // An emptied container root reaped (and perhaps created again) since we looked:
                // follow it, a few times at most.
                Err(Error::RootReplaced { .. })
                    if self.mode == RootMode::Unanchored && replaced < 3 =>
                {
                    replaced += 1;
                    debug!(root = %self.root, "the root was replaced; following it");
                    *self.root_czxid.lock().unwrap() = None;
                }
                created => break created?,
            }
        };
        debug!(node = %node.path, sequence = contender.sequence, "enqueued");
        let token = match self.mode {
            // Sequences order the queue whatever the root; a used-up counter orders nothing.
            _ if contender.is_wrapped() => None,
            RootMode::Container { .. } => u64::try_from(czxid).ok().map(FencingToken::new),
            RootMode::Anchored(_) | RootMode::Unanchored => {
                FencingToken::from_sequence(contender.sequence, incarnation)
            }
        };
        let refusal = match token {
            None => Some(Error::SequenceWrapped {
                path: self.root.to_string(),
                sequence: contender.sequence,
            }),
            // A ZkMutex's anchor in a keyed lock's directory: that mutex hands out sequence
            // numbers for the same resource, which a store fenced with zxids would mix up.
            Some(_)
                if matches!(self.mode, RootMode::Container { .. })
                    && matches!(&listing, Listing::Children(c) if c.iter().any(|c| c == ANCHOR)) =>
            {
                Some(Error::UnsuitableRoot {
                    path: self.root.to_string(),
                    kind: RootKind::AnchoredKey,
                })
            }
            Some(_) => None,
        };
        if let Some(err) = refusal {
            // Delete the refused node before answering, so that the caller finds no trace of
            // it; should that fail (or this future be dropped), it deletes itself in the
            // background.
            if let Ok(Deleted::ByUs | Deleted::Before) =
                node.epoch.delete(&node.path, Release::Plain).await
            {
                drop(node.disarm());
            }
            return Err(err);
        }
        Ok(Created {
            node,
            contender,
            token: token.unwrap_or_default(),
            czxid,
            listing,
        })
    }

    /// Creates our node and lists (`list`) or counts the children in one go: both requests
    /// leave back to back on the same session (ZooKeeper answers a session's requests in
    /// order), so the listing includes our node and costs no extra round trip.
    ///
    /// The work hands the node over as an [`OwnedNode`]; if the caller is cancelled meanwhile,
    /// the work goes on as a task of its own ([`Detach`]), and the node it makes is dropped
    /// and deleted in the background.
    async fn create(
        &self,
        epoch: &Arc<Epoch>,
        name: &'static str,
        naming: Naming,
        data: Option<&[u8]>,
        root_czxid: Option<i64>,
        list: bool,
    ) -> Result<Found> {
        let uuid = new_uuid();
        // Plain names need the record (a lost create reply is recovered by its id); the other
        // recipes carry it too, for people and `zkr inspect`, unless they bring data of their
        // own (an election's candidate info).
        let data = match (naming, data) {
            (Naming::Protected, Some(data)) => data.to_vec(),
            _ => owner::bytes(&uuid, self.session.owner()),
        };
        let prefix = self.root.child(&naming.prefix(&uuid, name));
        // The create carries the node's path and data; the directory's create and the listing
        // its path (the listing's answer is bounded by the server).
        self.session.check_size(
            "a contender node (path and data)",
            prefix.len() + 10 + data.len(),
        )?;
        let task = CreateTask {
            session: self.session.clone(),
            epoch: epoch.clone(),
            root: self.root.clone(),
            prefix,
            uuid,
            naming,
            name,
            data,
            root_czxid,
            make_dir: matches!(self.mode, RootMode::Container { fresh: true }),
            container: matches!(self.mode, RootMode::Container { .. }),
            learn: self.unknown_dir.clone(),
            list,
        };
        // In the caller's task; a caller gone half way leaves the rest to a task of its own,
        // which drops the node it made, and the node deletes itself.
        Detach::new(task.run()).await
    }
}
