//! Putting a contender node in a queue: the create and the listing leave back to back, a
//! create whose reply was lost is recovered by its uuid and owner, and a node nobody took over
//! deletes itself in the background ([`OwnedNode`]).

use std::sync::Arc;

use tokio::sync::oneshot;
use tracing::debug;
use zookeeper_client as zk;

use super::root::ANCHOR;
use super::{Queue, RootMode};
use crate::error::{connection_lost, Error, Result, RootKind};
use crate::fence::FencingToken;
use crate::grant::{Grant, OnChange};
use crate::path::{
    is_record_of, new_uuid, owner_record, sorted_contenders, Contender, Naming, ZkPath,
};
use crate::session::{Deleted, Epoch, Release, Session};

/// A node just put in a queue, with the children listed right after.
pub(crate) struct Created {
    pub node: OwnedNode,
    pub contender: Contender,
    /// The token a grant of this node carries.
    pub token: FencingToken,
    pub czxid: i64,
    pub children: Vec<String>,
}

impl Created {
    /// The node holds: hand it out, to be deleted as `release` says, and ended by a data
    /// change as `on_change` says.
    pub fn into_grant(self, release: Release, on_change: OnChange) -> Grant {
        let (session, epoch, path) = self.node.disarm();
        Grant::new(
            session, epoch, path, self.token, self.czxid, release, on_change,
        )
    }
}

impl Queue {
    /// Puts a node named `name` carrying `data` (`None`: the owner record, see
    /// [`owner_record`]) in the queue (checking the root first) and
    /// returns it with the children listed right after its creation. Dropping the result
    /// deletes the node in the background.
    pub async fn enqueue(
        &self,
        epoch: &Arc<Epoch>,
        name: &'static str,
        naming: Naming,
        data: Option<&[u8]>,
    ) -> Result<Created> {
        let mut replaced = 0;
        let (node, contender, czxid, children) = loop {
            let root_czxid = match self.mode {
                RootMode::Container { .. } => None,
                RootMode::Anchored | RootMode::Unanchored => Some(self.ensure_root(epoch).await?),
            };
            match self.create(epoch, name, naming, data, root_czxid).await {
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
            RootMode::Anchored | RootMode::Unanchored => {
                FencingToken::from_sequence(contender.sequence)
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
                    && children.iter().any(|c| c == ANCHOR) =>
            {
                Some(Error::UnsuitableRoot {
                    path: self.root.to_string(),
                    kind: RootKind::MutexRoot,
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
            children,
        })
    }

    /// Creates our node and lists the children in one go: both requests leave back to back on
    /// the same session (ZooKeeper answers a session's requests in order), so the listing
    /// includes our node and costs no extra round trip.
    ///
    /// The work runs in its own task, which hands the node over as an [`OwnedNode`]: if the
    /// caller was cancelled meanwhile, the node is dropped and deleted in the background.
    async fn create(
        &self,
        epoch: &Arc<Epoch>,
        name: &'static str,
        naming: Naming,
        data: Option<&[u8]>,
        root_czxid: Option<i64>,
    ) -> Result<Found> {
        let uuid = new_uuid();
        // Plain names need the record (a lost create reply is recovered by its id); the other
        // recipes carry it too, for people and `zkr inspect`, unless they bring data of their
        // own (an election's candidate info).
        let data = match (naming, data) {
            (Naming::Protected, Some(data)) => data.to_vec(),
            _ => owner_record(&uuid, self.session.owner()),
        };
        let prefix = self.root.child(&naming.prefix(&uuid, name));
        // The create carries the node's path and data; the directory's create and the listing
        // its path (the listing's answer is bounded by the server).
        self.session.check_size(
            "a contender node (path and data)",
            prefix.len() + 10 + data.len(),
        )?;
        let (tx, rx) = oneshot::channel();
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
        };
        tokio::spawn(async move {
            // A failed send drops the node, which deletes itself.
            let _ = tx.send(task.run().await);
        });
        rx.await.unwrap_or(Err(Error::SessionClosed))
    }
}

/// Our node, parsed, its czxid, and the children listed right after its creation.
type Found = (OwnedNode, Contender, i64, Vec<String>);

#[derive(Clone)]
struct CreateTask {
    session: Session,
    epoch: Arc<Epoch>,
    root: ZkPath,
    /// `{root}/_c_{uuid}-{name}` or `{root}/{name}`: ZooKeeper appends the sequence.
    prefix: String,
    /// This attempt's id: in the name, or in the data.
    uuid: String,
    naming: Naming,
    name: &'static str,
    data: Vec<u8>,
    /// What the root's czxid must be: another means the root was replaced (`None` for a
    /// keyed lock's directory, whose incarnations do not matter: its tokens are zxids).
    root_czxid: Option<i64>,
    /// Create the root (a container) in the same burst: a keyed lock's directory not known to
    /// exist.
    make_dir: bool,
    /// The root is a keyed lock's container directory.
    container: bool,
}

/// How many times a keyed lock's directory may vanish under a create (reaped between the
/// directory's create and the contender's) before the caller hears of it.
const MAX_REAPED: u32 = 20;

impl CreateTask {
    async fn run(mut self) -> Result<Found> {
        let root = self.root.as_str().to_owned();
        let root = root.as_str();
        let names = [self.name];
        let mut losses = 0;
        let mut reaped = 0;
        loop {
            let client = self.epoch.client()?;
            // The session's node ACLs (default: anyone, as Curator's); a key's directory is a
            // container, as Curator's `creatingParentContainersIfNeeded` makes them.
            let acls = self.session.acls();
            // All three leave back to back; ZooKeeper answers them in order.
            let (dir, created, listed) = {
                let dir = match self.make_dir {
                    true => {
                        Some(client.create(root, &[], &zk::CreateMode::Container.with_acls(acls)))
                    }
                    false => None,
                };
                let create = client.create(
                    &self.prefix,
                    &self.data,
                    &zk::CreateMode::EphemeralSequential.with_acls(acls),
                );
                let list = client.get_children(root);
                let dir = match dir {
                    Some(dir) => Some(dir.await),
                    None => None,
                };
                (dir, create.await, list.await)
            };
            drop(client);
            match created {
                Ok((stat, sequence)) => {
                    let path = format!("{}{}", self.prefix, sequence);
                    let node = OwnedNode::new(self.session.clone(), self.epoch.clone(), path);
                    // A grant stands for the session it was made on, and only that one.
                    if stat.ephemeral_owner != self.epoch.id() {
                        return Err(Error::unexpected(format!(
                            "{} is owned by session {:#x}, not ours",
                            node.path, stat.ephemeral_owner
                        )));
                    }
                    let name = node.path[root.len() + 1..].to_owned();
                    let contender = Contender::parse(&name, &names)
                        .ok_or_else(|| Error::unexpected(format!("unparsable node name {name}")))?;
                    let children = match listed {
                        Ok((children, parent)) => {
                            self.check_root(&parent)?;
                            children
                        }
                        // The listing shares the create's fate only on a broken connection.
                        Err(_) => self.list_again().await?,
                    };
                    return Ok((node, contender, stat.czxid, children));
                }
                // A keyed lock's directory that is not there: see what its create said.
                Err(zk::Error::NoNode) if self.container && reaped < MAX_REAPED => {
                    let space = self.root.parent();
                    match dir {
                        // The space itself is missing: make it (and its parents).
                        Some(Err(zk::Error::NoNode)) => {
                            let options = &zk::CreateMode::Persistent.with_acls(acls);
                            self.epoch
                                .retry(space, |c| async move { c.mkdir(space, options).await })
                                .await?;
                        }
                        Some(Err(zk::Error::NoChildrenForEphemerals)) => {
                            return Err(Error::UnsuitableRoot {
                                path: space.to_owned(),
                                kind: RootKind::Ephemeral,
                            })
                        }
                        Some(Err(e)) if e != zk::Error::NodeExists && !connection_lost(&e) => {
                            return Err(self.epoch.error(e, root))
                        }
                        // Reaped since it was made (or known): make it again.
                        _ => {
                            reaped += 1;
                            debug!(dir = %root, "the key's directory is gone; creating it again");
                            self.make_dir = true;
                        }
                    }
                }
                Err(zk::Error::NoChildrenForEphemerals) => {
                    return Err(Error::UnsuitableRoot {
                        path: root.to_owned(),
                        kind: RootKind::Ephemeral,
                    })
                }
                Err(zk::Error::NoNode) => {
                    return Err(Error::RootReplaced {
                        path: root.to_owned(),
                    })
                }
                // Plain names collide only where the counter is used up: ZooKeeper (3.8) gives
                // `i32::MAX` to every child once it gets there.
                Err(zk::Error::NodeExists) if self.naming == Naming::Plain => {
                    return Err(Error::SequenceWrapped {
                        path: root.to_owned(),
                        sequence: i64::from(i32::MAX),
                    })
                }
                Err(e) if connection_lost(&e) => {
                    // The create may have happened with its reply lost: look for our uuid.
                    let found = match self.epoch.after_loss(&mut losses).await {
                        Ok(()) => self.find_ours(&names).await,
                        Err(err) => Err(err),
                    };
                    match found {
                        Ok(Some(found)) => return Ok(found),
                        Ok(None) => {}
                        Err(err) => {
                            // We give up on the caller's behalf, but a node that was made
                            // must not stay for the session's lifetime ahead of everyone.
                            self.clone().abandon();
                            return Err(err);
                        }
                    }
                }
                Err(err) => return Err(self.epoch.error(err, root)),
            }
        }
    }

    /// In the background: finds the node this attempt may have made (once the connection is
    /// back) and deletes it; stops when it is known not to be there or the session is over.
    fn abandon(self) {
        tokio::spawn(async move {
            let names = [self.name];
            for _ in 0..100 {
                self.epoch.until_reconnected().await;
                if self.epoch.is_lost() {
                    return;
                }
                match self.find_ours(&names).await {
                    // Dropping it deletes it in the background.
                    Ok(Some(_found)) => return,
                    Ok(None) => return,
                    Err(_) => continue,
                }
            }
        });
    }

    async fn list_again(&self) -> Result<Vec<String>> {
        let root = self.root.as_str();
        let (children, parent) = self
            .epoch
            .retry(root, |c| async move { c.get_children(root).await })
            .await?;
        self.check_root(&parent)?;
        Ok(children)
    }

    /// A root with another czxid than the one checked was deleted and created again: its
    /// sequence restarted, and tokens from it would not be ordered after earlier ones.
    fn check_root(&self, parent: &zk::Stat) -> Result<()> {
        if self.root_czxid.is_none_or(|czxid| czxid == parent.czxid) {
            Ok(())
        } else {
            Err(Error::RootReplaced {
                path: self.root.to_string(),
            })
        }
    }

    /// After a lost reply: our node, if the create happened, recognised by our uuid (in its
    /// name, or in its data for plain names) and by an `ephemeralOwner` that is our session (a
    /// node from another session is not ours).
    async fn find_ours(&self, names: &[&'static str]) -> Result<Option<Found>> {
        // The server we reconnected to may not have applied our create yet (it went through
        // another one): catch up with the leader first.
        let root = self.root.as_str();
        let synced = self
            .epoch
            .retry(root, |c| async move { c.sync(root).await })
            .await;
        match synced {
            Err(Error::Zk(zk::Error::NoNode)) if self.container => return Ok(None),
            other => other?,
        }
        let children = match self.list_again().await {
            // A keyed lock's directory that is not there holds no node of ours.
            Err(Error::Zk(zk::Error::NoNode)) if self.container => return Ok(None),
            other => other?,
        };
        // Plain names: the server lists this session's own nodes with our prefix, so only
        // those are read; protected names carry the uuid themselves.
        let candidates: Vec<Contender> = match self.naming {
            Naming::Protected => sorted_contenders(&children, names)
                .into_iter()
                .filter(|c| c.has_uuid(&self.uuid))
                .collect(),
            Naming::Plain => {
                let prefix = self.prefix.as_str();
                let ours = self
                    .epoch
                    .retry(prefix, |c| async move { c.list_ephemerals(prefix).await })
                    .await?;
                let names: Vec<String> = ours
                    .iter()
                    .filter_map(|p| p.strip_prefix(self.root.as_str())?.strip_prefix('/'))
                    .map(str::to_owned)
                    .collect();
                sorted_contenders(&names, &[self.name])
            }
        };
        // Ours, if there, is among the last: look from the back.
        for contender in candidates.into_iter().rev() {
            let path = self.root.child(&contender.name);
            let at = path.as_str();
            let read = self
                .epoch
                .retry(at, |c| async move {
                    match c.get_data(at).await {
                        Err(zk::Error::NoNode) => Ok(None),
                        other => other.map(Some),
                    }
                })
                .await?;
            let Some((data, stat)) = read else { continue };
            let ours = stat.ephemeral_owner == self.epoch.id()
                && (self.naming == Naming::Protected || is_record_of(&data, &self.uuid));
            if ours {
                debug!(node = %path, "recovered our node after a lost create reply");
                let node = OwnedNode::new(self.session.clone(), self.epoch.clone(), path);
                return Ok(Some((node, contender, stat.czxid, children)));
            }
        }
        Ok(None)
    }
}

/// A contender node we created and have not yet handed out: dropping it deletes it in the
/// background (a cancelled or failed acquisition).
pub(crate) struct OwnedNode {
    pub session: Session,
    pub epoch: Arc<Epoch>,
    pub path: String,
    armed: bool,
}

impl OwnedNode {
    fn new(session: Session, epoch: Arc<Epoch>, path: String) -> OwnedNode {
        OwnedNode {
            session,
            epoch,
            path,
            armed: true,
        }
    }

    /// Hands the node on (to a grant, which takes over its deletion).
    fn disarm(mut self) -> (Session, Arc<Epoch>, String) {
        self.armed = false;
        (
            self.session.clone(),
            self.epoch.clone(),
            std::mem::take(&mut self.path),
        )
    }
}

impl Drop for OwnedNode {
    fn drop(&mut self) {
        if self.armed {
            debug!(node = %self.path, "abandoned contender node; deleting in the background");
            self.session.clean_up(
                self.epoch.clone(),
                std::mem::take(&mut self.path),
                Release::Plain,
            );
        }
    }
}
