//! Reading the snapshot `inspect` classifies: PATH, its children, and below them what the
//! options ask for, each directory's requests sent back to back. With `watch`, every listing
//! leaves a watch behind, so the next change of any queue (a contender in or out) wakes the
//! caller.
//!
//! A directory's kind never depends on how much of its listing was read: its anchor (the mark)
//! is read by path, and PATH's parent's anchor too (a key's directory is told by its parent).
//! Where `--max-nodes` cuts a listing, what is kept is the head of the queue (the children in
//! queue order, after the other children), and the directory says how many of how many
//! children were read.

use std::future::Future;
use std::pin::Pin;

use zk_recipes::zookeeper_client as zk;

use zk_recipes::layout::{names, ANCHOR};

use super::model::{Child, Cut, Dir, Stat};

/// What was read.
pub struct Snapshot {
    /// `None` when PATH does not exist.
    pub root: Option<Dir>,
    /// The data of the anchor of PATH's parent (`None`: none, or PATH is `/`).
    pub parent_anchor: Option<Vec<u8>>,
    /// Whether `--max-nodes` stopped the walk.
    pub truncated: bool,
    /// The watches left behind (with `watch`): one per directory listed, or one on PATH's
    /// existence.
    pub watchers: Vec<zk::OneshotWatcher>,
}

struct Reader<'c> {
    client: &'c zk::Client,
    recursive: bool,
    budget: usize,
    truncated: bool,
    watch: bool,
    watchers: Vec<zk::OneshotWatcher>,
}

/// Reads `path` and below: its children always, everything with `recursive`, a semaphore's
/// `locks` and `leases` wherever it is seen; at most `max_nodes` nodes.
pub async fn read(
    client: &zk::Client,
    path: &str,
    recursive: bool,
    max_nodes: usize,
    watch: bool,
) -> Result<Snapshot, zk::Error> {
    let mut reader = Reader {
        client,
        recursive,
        budget: max_nodes.max(1),
        truncated: false,
        watch,
        watchers: Vec::new(),
    };
    let parent_anchor = match parent_of(path) {
        Some(parent) => data_or_none(client.get_data(&join(parent, ANCHOR)).await)?,
        None => None,
    };
    let root = reader.dir(path.to_owned(), 0).await?;
    if root.is_none() && watch {
        // Wake up when PATH appears.
        let (stat, watcher) = client.check_and_watch_stat(path).await?;
        reader.watchers.push(watcher);
        if stat.is_some() {
            // Created meanwhile: the watch fires at its next change; read again now.
            return Box::pin(read(client, path, recursive, max_nodes, watch)).await;
        }
    }
    Ok(Snapshot {
        root,
        parent_anchor,
        truncated: reader.truncated,
        watchers: reader.watchers,
    })
}

/// The parent of an absolute path; `None` for `/`.
pub fn parent_of(path: &str) -> Option<&str> {
    match path.rsplit_once('/') {
        _ if path == "/" => None,
        Some(("", _)) => Some("/"),
        Some((parent, _)) => Some(parent),
        None => None,
    }
}

/// A node's data, `None` when it does not exist.
fn data_or_none(
    read: Result<(Vec<u8>, zk::Stat), zk::Error>,
) -> Result<Option<Vec<u8>>, zk::Error> {
    match read {
        Ok((data, _)) => Ok(Some(data)),
        Err(zk::Error::NoNode) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The order a listing is kept in when cut: the children that are no contenders (the
/// semaphore's `locks` and `leases`, keys' directories, ...) by name, then the contenders in
/// queue order, so that what is kept is the head of the queue.
fn listing_order(name: &str) -> (bool, i64, &str) {
    match names::parse(name) {
        Some(n) => (true, n.sequence, name),
        None => (false, 0, name),
    }
}

pub fn join(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

fn stat_of(s: &zk::Stat) -> Stat {
    Stat {
        czxid: s.czxid,
        ctime: s.ctime,
        ephemeral_owner: s.ephemeral_owner,
        cversion: s.cversion,
        num_children: s.num_children,
    }
}

type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

impl Reader<'_> {
    fn dir(&mut self, path: String, depth: usize) -> Boxed<'_, Result<Option<Dir>, zk::Error>> {
        Box::pin(async move {
            let data = self.client.get_data(&path);
            let anchor = self.client.get_data(&join(&path, ANCHOR));
            let listed = if self.watch {
                let list = self.client.get_and_watch_children(&path);
                match list.await {
                    Ok((children, stat, watcher)) => {
                        self.watchers.push(watcher);
                        Ok((children, stat))
                    }
                    Err(e) => Err(e),
                }
            } else {
                self.client.get_children(&path).await
            };
            let (names_listed, stat) = match listed {
                Ok(listed) => listed,
                Err(zk::Error::NoNode) => return Ok(None),
                Err(e) => return Err(e),
            };
            let data = match data.await {
                Ok((data, _)) => data,
                Err(zk::Error::NoNode) => return Ok(None),
                Err(e) => return Err(e),
            };
            let anchor = data_or_none(anchor.await)?;
            // The anchor was read by path: it is no child to show.
            let mut names_listed: Vec<String> =
                names_listed.into_iter().filter(|n| n != ANCHOR).collect();
            names_listed.sort_by(|a, b| listing_order(a).cmp(&listing_order(b)));
            let of = names_listed.len();
            let cut = (of > self.budget).then(|| {
                names_listed.truncate(self.budget);
                self.truncated = true;
                Cut {
                    shown: self.budget,
                    of,
                }
            });
            self.budget -= names_listed.len();
            // Contenders' data (owner labels), the others' stats only: all sent at once.
            let requests: Vec<_> = names_listed
                .iter()
                .map(|name| {
                    let at = join(&path, name);
                    let contender = names::parse(name).is_some() || names::is_kazoo_lease(name);
                    if contender {
                        Request::Data(Box::pin(self.client.get_data(&at)))
                    } else {
                        Request::Stat(Box::pin(self.client.check_stat(&at)))
                    }
                })
                .collect();
            let mut children = Vec::with_capacity(requests.len());
            for (name, request) in names_listed.into_iter().zip(requests) {
                let (stat, data) = match request {
                    Request::Data(f) => match f.await {
                        Ok((data, stat)) => (stat, data),
                        Err(zk::Error::NoNode) => continue,
                        Err(e) => return Err(e),
                    },
                    Request::Stat(f) => match f.await? {
                        Some(stat) => (stat, Vec::new()),
                        None => continue,
                    },
                };
                children.push(Child {
                    name,
                    stat: stat_of(&stat),
                    data,
                    dir: None,
                });
            }
            let semaphore = children
                .iter()
                .any(|c| c.name == "leases" || c.name == "locks");
            for child in &mut children {
                let part = semaphore && (child.name == "leases" || child.name == "locks");
                let wanted = self.recursive || depth == 0 || part;
                let at = join(&path, &child.name);
                // Watching, an empty persistent child is listed too: a queue may start there.
                let may_grow = self.watch
                    && child.stat.ephemeral_owner == 0
                    && names::parse(&child.name).is_none();
                if (child.stat.num_children == 0 && !may_grow) || !wanted || at == "/zookeeper" {
                    continue;
                }
                if self.budget == 0 {
                    self.truncated = true;
                    break;
                }
                self.budget -= 1;
                child.dir = self.dir(at, depth + 1).await?;
            }
            Ok(Some(Dir {
                path,
                stat: stat_of(&stat),
                data,
                anchor,
                children,
                cut,
            }))
        })
    }
}

enum Request {
    Data(Boxed<'static, Result<(Vec<u8>, zk::Stat), zk::Error>>),
    Stat(Boxed<'static, Result<Option<zk::Stat>, zk::Error>>),
}
