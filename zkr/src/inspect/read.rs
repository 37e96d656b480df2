//! Reading the snapshot `inspect` classifies: PATH, its children, and below them what the
//! options ask for, each directory's requests sent back to back. With `watch`, every listing
//! leaves a watch behind, so the next change of any queue (a contender in or out) wakes the
//! caller.

use std::future::Future;
use std::pin::Pin;

use zk_recipes::zookeeper_client as zk;

use zk_recipes::layout::{names, ANCHOR};

use super::model::{Child, Dir, Stat};

/// What was read.
pub struct Snapshot {
    /// `None` when PATH does not exist.
    pub root: Option<Dir>,
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
        truncated: reader.truncated,
        watchers: reader.watchers,
    })
}

fn join(parent: &str, name: &str) -> String {
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
            let mut names_listed = names_listed;
            names_listed.sort();
            if names_listed.len() > self.budget {
                names_listed.truncate(self.budget);
                self.truncated = true;
            }
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
                if child.name == ANCHOR {
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
                children,
            }))
        })
    }
}

enum Request {
    Data(Boxed<'static, Result<(Vec<u8>, zk::Stat), zk::Error>>),
    Stat(Boxed<'static, Result<Option<zk::Stat>, zk::Error>>),
}
