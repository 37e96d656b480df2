//! One create, as a unit of work that runs to its answer even if its caller goes
//! (`crate::detach`): the create and the listing leave back to back (a keyed lock's directory
//! taken not to exist with the node in one transaction), a create whose reply was lost is recovered by
//! its uuid and owner, names someone else took are stepped over.

use std::sync::Arc;

use tracing::debug;
use zookeeper_client as zk;

use crate::error::{connection_lost, Error, Result, RootKind};
use crate::layout::{owner, STEP_PREFIX};
use crate::path::{sorted_contenders, Contender, Naming, ZkPath};
use crate::session::{Epoch, Session};

use super::create::Listing;
use super::guess::DirGuess;
use super::owned::OwnedNode;

/// Our node, parsed, its czxid, and the children listed (or counted) right after its creation.
pub(super) type Found = (OwnedNode, Contender, i64, Listing);

#[derive(Clone)]
pub(super) struct CreateTask {
    pub(super) session: Session,
    pub(super) epoch: Arc<Epoch>,
    pub(super) root: ZkPath,
    /// `{root}/_c_{uuid}-{name}` or `{root}/{name}`: ZooKeeper appends the sequence.
    pub(super) prefix: String,
    /// This attempt's id: in the name, or in the data.
    pub(super) uuid: String,
    pub(super) naming: Naming,
    pub(super) name: &'static str,
    pub(super) data: Vec<u8>,
    /// What the root's czxid must be: another means the root was replaced (`None` for a
    /// keyed lock's directory, whose incarnations do not matter: its tokens are zxids).
    pub(super) root_czxid: Option<i64>,
    /// Create the root (a container) in one transaction with the node: a keyed lock's
    /// directory not known to exist.
    pub(super) make_dir: bool,
    /// The root is a keyed lock's container directory.
    pub(super) container: bool,
    /// The directory is not known: the guess that chose `make_dir`, to learn from the first
    /// answer whether the directory was there (then taken, so it learns once).
    pub(super) learn: Option<Arc<DirGuess>>,
    /// List the children after the create (else count them: the queue may be deep).
    pub(super) list: bool,
}

/// A request's answer, whichever of two forms it was sent in.
type BoxFuture<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// What a burst's create said.
enum Made {
    /// Our node was made: its stat and path.
    Node(zk::Stat, String),
    /// The directory's create failed (and the transaction with it: nothing was made).
    Dir(zk::Error),
    /// The node's create failed, or the request (a lost connection: it may have been made).
    Failed(zk::Error),
}

/// How many times a keyed lock's directory may vanish under a create (reaped between the
/// directory's create and the contender's) before the caller hears of it.
const MAX_REAPED: u32 = 20;

impl CreateTask {
    pub(super) async fn run(mut self) -> Result<Found> {
        // The lease is kept from the create on (its answer feeds it).
        let _lease = self.epoch.lease_interest();
        let root = self.root.as_str().to_owned();
        let root = root.as_str();
        let names = [self.name];
        let mut losses = 0;
        let mut reaped = 0;
        let mut stepped = 0;
        loop {
            let sent = crate::session::lease_now();
            let client = self.epoch.client()?;
            // Both leave back to back; ZooKeeper answers them in order.
            let (made, listed) = {
                let made = self.burst_create(&client)?;
                let look = self.look(&client);
                (made.await, look.await)
            };
            drop(client);
            self.learn_from(&made);
            match made {
                Made::Node(stat, path) => {
                    // A create goes through the leader: the session lived when it was sent.
                    self.epoch.renew_lease(sent);
                    let node = OwnedNode::new(self.session.clone(), self.epoch.clone(), path);
                    let czxid = match (&listed, stat.is_invalid()) {
                        (_, false) => {
                            self.check_owner(&node.path, &stat)?;
                            stat.czxid
                        }
                        // A server that answers a create inside a transaction without the
                        // node's stat (ZOOKEEPER-4026, 3.8.0 does): the node was made in one
                        // transaction with its directory, so both carry that transaction's
                        // zxid, and the directory, which cannot be reaped while our node is
                        // in it, is the listing's parent. No read needed.
                        (Ok((_, parent)), true) => {
                            debug!("the transaction's create came without its stat; its directory's zxid is the node's");
                            parent.czxid
                        }
                        (Err(_), true) => {
                            debug!("the transaction's create came without its stat; reading it");
                            let stat = self.stat_of(&node.path).await?;
                            self.check_owner(&node.path, &stat)?;
                            stat.czxid
                        }
                    };
                    let name = node.path[root.len() + 1..].to_owned();
                    let contender = Contender::parse(&name, &names)
                        .ok_or_else(|| Error::internal(format!("unparsable node name {name}")))?;
                    let listing = match listed {
                        Ok((listing, parent)) => {
                            self.check_root(&parent)?;
                            listing
                        }
                        // The listing shares the create's fate only on a broken connection.
                        Err(_) => self.look_again().await?,
                    };
                    return Ok((node, contender, czxid, listing));
                }
                // A keyed lock's directory that someone else made: create in it.
                Made::Dir(zk::Error::NodeExists) => {
                    debug!(dir = %root, "the key's directory is there; creating in it");
                    self.make_dir = false;
                }
                // The space itself is missing: make it (and its parents).
                Made::Dir(zk::Error::NoNode) if reaped < MAX_REAPED => {
                    reaped += 1;
                    let space = self.root.parent();
                    let open = &zk::CreateMode::Persistent.with_acls(self.session.acls());
                    self.epoch
                        .retry(space, |c| async move { c.mkdir(space, open).await })
                        .await?;
                }
                Made::Dir(zk::Error::NoChildrenForEphemerals) => {
                    return Err(Error::UnsuitableRoot {
                        path: self.root.parent().to_owned(),
                        kind: RootKind::Ephemeral,
                    })
                }
                Made::Dir(e) => return Err(self.epoch.error(e, root)),
                // A keyed lock's directory believed there but reaped: make it again, with the
                // contender, in one transaction.
                Made::Failed(zk::Error::NoNode) if self.container && reaped < MAX_REAPED => {
                    reaped += 1;
                    debug!(dir = %root, "the key's directory is gone; creating it again");
                    self.make_dir = true;
                }
                Made::Failed(zk::Error::NoChildrenForEphemerals) => {
                    return Err(Error::UnsuitableRoot {
                        path: root.to_owned(),
                        kind: RootKind::Ephemeral,
                    })
                }
                Made::Failed(zk::Error::NoNode) => {
                    return Err(Error::RootReplaced {
                        path: root.to_owned(),
                    })
                }
                // A plain name collides where the counter is used up (ZooKeeper 3.8 gives
                // `i32::MAX` to every child once it gets there) or where someone made a node at
                // the name it gives next: step over those.
                Made::Failed(zk::Error::NodeExists) if self.naming == Naming::Plain => {
                    stepped += 1;
                    self.step_over(stepped).await?;
                }
                Made::Failed(e) if connection_lost(&e) => {
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
                Made::Failed(err) => return Err(self.epoch.error(err, root)),
            }
        }
    }

    /// Teaches the guess, once, what this answer says of an unknown directory.
    fn learn_from(&mut self, made: &Made) {
        let existed = match made {
            Made::Node(..) => !self.make_dir,
            Made::Dir(zk::Error::NodeExists) => true,
            Made::Failed(zk::Error::NoNode) => false,
            // Says nothing of the directory (a lost connection: the next answer will).
            _ => return,
        };
        if let Some(guess) = self.learn.take() {
            guess.learn(existed);
        }
    }

    /// Sends this attempt's create: with its keyed lock's directory in one transaction where
    /// the directory is not known to exist (one log write for both, and no empty directory
    /// left should the session end between them), else the node's create alone.
    fn burst_create<'c>(&'c self, client: &'c zk::Client) -> Result<BoxFuture<'c, Made>> {
        if !self.make_dir {
            let node = zk::CreateMode::EphemeralSequential.with_acls(self.session.acls());
            let create = client.create(&self.prefix, &self.data, &node);
            let prefix = self.prefix.clone();
            return Ok(Box::pin(async move {
                match create.await {
                    Ok((stat, sequence)) => Made::Node(stat, format!("{prefix}{sequence}")),
                    Err(e) => Made::Failed(e),
                }
            }));
        }
        let root = self.root.as_str();
        // The session's node ACLs (default: anyone, as Curator's); a key's directory is a
        // container, as Curator's `creatingParentContainersIfNeeded` makes them.
        let acls = self.session.acls();
        let dir = zk::CreateMode::Container.with_acls(acls);
        let node = zk::CreateMode::EphemeralSequential.with_acls(acls);
        let mut multi = client.new_multi_writer();
        multi
            .add_create(root, &[], &dir)
            .and_then(|()| multi.add_create(&self.prefix, &self.data, &node))
            .map_err(|e| self.epoch.error(e, root))?;
        let commit = multi.commit();
        Ok(Box::pin(async move {
            match commit.await {
                Ok(mut results) => match results.pop() {
                    Some(zk::MultiWriteResult::Create { path, stat }) => Made::Node(stat, path),
                    other => Made::Failed(zk::Error::UnexpectedError(format!(
                        "a transaction of two creates answered {other:?} last"
                    ))),
                },
                Err(zk::MultiWriteError::OperationFailed { index: 0, source }) => Made::Dir(source),
                Err(zk::MultiWriteError::OperationFailed { source, .. }) => Made::Failed(source),
                Err(zk::MultiWriteError::RequestFailed { source }) => Made::Failed(source),
            }
        }))
    }

    /// After a plain create found its name taken: moves the root's counter past the nodes
    /// someone made at the names it gives next. ZooKeeper names a sequential child after the
    /// number of children ever created under its parent (which clients see as
    /// `(cversion + numChildren) / 2`: their `cversion` counts deletions too), and a create that
    /// fails counts nothing; so one transaction that creates and deletes an ephemeral child as
    /// many times as there are names to pass leaves nothing and passes no contender.
    async fn step_over(&self, round: u32) -> Result<()> {
        let root = self.root.as_str();
        let (children, parent) = self
            .epoch
            .retry(root, |c| async move { c.get_children(root).await })
            .await?;
        let next = (i64::from(parent.cversion) + i64::from(parent.num_children)) / 2;
        let taken = taken_numbers(&children, self.name);
        let Some(to) = first_free(next, &taken) else {
            return Err(Error::SequenceWrapped {
                path: root.to_owned(),
                sequence: i64::from(i32::MAX),
            });
        };
        let steps = to - next;
        if round > MAX_STEPS || steps > MAX_PAIRS {
            return Err(Error::ForeignNode {
                path: root.to_owned(),
                node: self.root.child(&format!("{}{next:010}", self.name)),
            });
        }
        if steps == 0 {
            // Moved on (or the node deleted) since: just create again.
            return Ok(());
        }
        tracing::warn!(
            root,
            from = next,
            to,
            "nodes someone else made stand where the counter goes next; moving it past them"
        );
        let step = self.root.child(&format!("{STEP_PREFIX}{}", self.uuid));
        let mode = zk::CreateMode::Ephemeral.with_acls(self.session.acls());
        let step = step.as_str();
        let mode = &mode;
        self.epoch
            .retry(root, |c| async move {
                let mut multi = c.new_multi_writer();
                for _ in 0..steps {
                    multi.add_create(step, &[], mode)?;
                    multi.add_delete(step, None)?;
                }
                match multi.commit().await {
                    Ok(_) => Ok(()),
                    Err(zk::MultiWriteError::RequestFailed { source })
                    | Err(zk::MultiWriteError::OperationFailed { source, .. }) => Err(source),
                }
            })
            .await
    }

    /// A grant stands for the session it was made on, and only that one.
    fn check_owner(&self, path: &str, stat: &zk::Stat) -> Result<()> {
        if stat.ephemeral_owner != self.epoch.id() {
            return Err(Error::internal(format!(
                "{path} is owned by session {:#x}, not ours",
                stat.ephemeral_owner
            )));
        }
        Ok(())
    }

    /// The stat of our node at `path`.
    async fn stat_of(&self, path: &str) -> Result<zk::Stat> {
        let stat = self
            .epoch
            .retry(path, |c| async move { c.check_stat(path).await })
            .await?;
        stat.ok_or_else(|| Error::Lost {
            path: path.to_owned(),
        })
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

    /// The burst's second request: list the children, or count them.
    fn look<'c>(
        &'c self,
        client: &'c zk::Client,
    ) -> BoxFuture<'c, std::result::Result<(Listing, zk::Stat), zk::Error>> {
        if self.list {
            let list = client.get_children(self.root.as_str());
            Box::pin(async move {
                let (children, parent) = list.await?;
                Ok((Listing::Children(children), parent))
            })
        } else {
            let stat = client.check_stat(self.root.as_str());
            Box::pin(async move {
                let parent = stat.await?.ok_or(zk::Error::NoNode)?;
                Ok((Listing::Count(count(&parent)), parent))
            })
        }
    }

    /// [`Self::look`] again, on its own.
    async fn look_again(&self) -> Result<Listing> {
        if self.list {
            return Ok(Listing::Children(self.list_again().await?));
        }
        let root = self.root.as_str();
        let parent = self
            .epoch
            .retry(root, |c| async move { c.check_stat(root).await })
            .await?
            .ok_or_else(|| Error::RootReplaced {
                path: root.to_owned(),
            })?;
        self.check_root(&parent)?;
        Ok(Listing::Count(count(&parent)))
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
        // Protected names are found in the listing; plain ones by the session's own nodes,
        // so a queue that may be deep is only counted.
        let looked = match self.naming {
            Naming::Protected => self.list_again().await.map(Listing::Children),
            Naming::Plain => self.look_again().await,
        };
        let listing = match looked {
            // A keyed lock's directory that is not there holds no node of ours.
            Err(Error::Zk(zk::Error::NoNode)) if self.container => return Ok(None),
            other => other?,
        };
        let candidates: Vec<Contender> = match self.naming {
            Naming::Protected => sorted_contenders(
                match &listing {
                    Listing::Children(children) => children,
                    Listing::Count(_) => &[],
                },
                names,
            )
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
            let Some((data, stat)) = crate::ops::read(&self.epoch, at).await? else {
                continue;
            };
            let ours = stat.ephemeral_owner == self.epoch.id()
                && (self.naming == Naming::Protected || owner::is_record_of(&data, &self.uuid));
            if ours {
                debug!(node = %path, "recovered our node after a lost create reply");
                let node = OwnedNode::new(self.session.clone(), self.epoch.clone(), path);
                return Ok(Some((node, contender, stat.czxid, listing)));
            }
        }
        Ok(None)
    }
}

/// How many rounds of [`CreateTask::step_over`] one create may take.
const MAX_STEPS: u32 = 8;

/// How many names one step may pass (a create and a delete each, in one transaction).
const MAX_PAIRS: i64 = 500;

/// The sequence numbers of the plain `{name}NNNNNNNNNN` children.
fn taken_numbers(children: &[String], name: &str) -> std::collections::HashSet<i64> {
    children
        .iter()
        .filter_map(|c| c.strip_prefix(name))
        .filter(|n| n.len() == 10 && n.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// The first number from `next` on that no child takes; `None` where that reaches the
/// counter's end.
fn first_free(next: i64, taken: &std::collections::HashSet<i64>) -> Option<i64> {
    if !(0..i64::from(i32::MAX)).contains(&next) {
        return None;
    }
    let mut to = next;
    while taken.contains(&to) {
        to += 1;
    }
    (to < i64::from(i32::MAX)).then_some(to)
}

/// How many children a root's stat counts.
fn count(parent: &zk::Stat) -> usize {
    usize::try_from(parent.num_children).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_over_taken_names_and_stops_at_the_end() {
        let children: Vec<String> = [
            "lock-0000000004",
            "lock-0000000006",
            "_c_x-lock-0000000008",
            "lock-12",
            "~a",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let taken = taken_numbers(&children, "lock-");
        assert_eq!(taken, [4, 6].into_iter().collect());
        assert_eq!(first_free(4, &taken), Some(5));
        assert_eq!(first_free(6, &taken), Some(7));
        assert_eq!(first_free(3, &taken), Some(3));
        assert_eq!(first_free(i64::from(i32::MAX), &taken), None);
        assert_eq!(first_free(-5, &taken), None);
        let at_end: std::collections::HashSet<i64> =
            [i64::from(i32::MAX) - 1].into_iter().collect();
        assert_eq!(first_free(i64::from(i32::MAX) - 1, &at_end), None);
    }
}
