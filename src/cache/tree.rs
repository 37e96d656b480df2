//! The cached tree as data, and the pure logic on it: a [`TreeSnapshot`] (one immutable view),
//! the differences between two views as [`TreeEvent`]s (`diff`), and one node's fresh read
//! applied to a view (`apply`). No I/O here: the task (`task.rs`) reads, these decide.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use zookeeper_client as zk;

/// One cached node: its stat and, in data mode, its data.
///
/// The stat is the one read with the node's data: its data fields (`mzxid`, `version`,
/// `data_length`) are current, while the children's fields (`cversion`, `num_children`,
/// `pzxid`) are as of the node's last read (a child's creation does not read its parent
/// again; use [`TreeSnapshot::children`]).
///
/// ```no_run
/// # fn demo(cache: &zk_recipes::ZkTreeCache) {
/// if let Some(node) = cache.get("/config/flags") {
///     println!("version {}: {:?}", node.stat().version, node.data());
/// }
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedNode {
    stat: zk::Stat,
    data: Option<Arc<[u8]>>,
}

impl CachedNode {
    pub(crate) fn new(stat: zk::Stat, data: Option<Vec<u8>>) -> CachedNode {
        CachedNode {
            stat,
            data: data.map(Arc::from),
        }
    }

    /// The node's stat (see the type's docs on which fields are current).
    ///
    /// ```no_run
    /// # fn demo(node: zk_recipes::CachedNode) {
    /// let created_by_zxid = node.stat().czxid;
    /// # }
    /// ```
    pub fn stat(&self) -> &zk::Stat {
        &self.stat
    }

    /// The node's data; `None` in stat-only mode.
    ///
    /// ```no_run
    /// # fn demo(node: zk_recipes::CachedNode) {
    /// let text = node.data().map(String::from_utf8_lossy);
    /// # }
    /// ```
    pub fn data(&self) -> Option<&[u8]> {
        self.data.as_deref()
    }

    /// Whether `other` is the same node (same creation) with the same data version.
    fn same_as(&self, other: &CachedNode) -> bool {
        self.stat.czxid == other.stat.czxid && self.stat.mzxid == other.stat.mzxid
    }
}

/// A change of the cached tree, in the order the cache applied it.
///
/// Replayed over the [`TreeSnapshot`] it was subscribed with
/// ([`ZkTreeCache::subscribe`](crate::ZkTreeCache::subscribe)), the events give the cache's
/// tree: no change is reported twice and none is left out, across reconnections and session
/// expiries (a resynchronisation reports one event per difference it finds).
///
/// ```
/// use zk_recipes::TreeEvent;
///
/// fn describe(event: &TreeEvent) -> String {
///     match event {
///         TreeEvent::Created { path, .. } => format!("+ {path}"),
///         TreeEvent::Changed { path, .. } => format!("~ {path}"),
///         TreeEvent::Deleted { path, .. } => format!("- {path}"),
///         TreeEvent::Initialized => "initialized".into(),
///         _ => "?".into(),
///     }
/// }
/// assert_eq!(describe(&TreeEvent::Initialized), "initialized");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TreeEvent {
    /// A node came into the cache (parents before their children).
    Created {
        /// Its path.
        path: String,
        /// The node as read.
        node: CachedNode,
    },
    /// A cached node's data changed (a new `mzxid`).
    Changed {
        /// Its path.
        path: String,
        /// The node as it was cached.
        old: CachedNode,
        /// The node as read now.
        node: CachedNode,
    },
    /// A node left the cache (children before their parents).
    Deleted {
        /// Its path.
        path: String,
        /// The node as it was cached.
        node: CachedNode,
    },
    /// The first full view is in the cache: every node of it was reported as `Created`
    /// before this. Sent once, to the subscribers from before it.
    Initialized,
}

/// One consistent view of the cached tree: nodes by path (relative to the session's chroot),
/// in path order. Cheap to take and to keep (shared, never changed: the cache makes a new one
/// when it changes while you hold this).
///
/// ```no_run
/// # fn demo(cache: &zk_recipes::ZkTreeCache) {
/// let view = cache.snapshot();
/// for name in view.children("/config") {
///     println!("{name}: {:?}", view.get(&format!("/config/{name}")).map(|n| n.stat().version));
/// }
/// println!("{} nodes", view.len());
/// # }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeSnapshot(pub(crate) Arc<BTreeMap<String, CachedNode>>);

impl TreeSnapshot {
    /// The node at `path`, if cached.
    ///
    /// ```no_run
    /// # fn demo(view: zk_recipes::TreeSnapshot) {
    /// let flags = view.get("/config/flags");
    /// # }
    /// ```
    pub fn get(&self, path: &str) -> Option<&CachedNode> {
        self.0.get(path)
    }

    /// The names of `path`'s cached children, in order.
    ///
    /// ```no_run
    /// # fn demo(view: zk_recipes::TreeSnapshot) {
    /// let names: Vec<&str> = view.children("/config").collect();
    /// # }
    /// ```
    pub fn children<'a>(&'a self, path: &str) -> impl Iterator<Item = &'a str> + 'a {
        let prefix = if path == "/" {
            "/".to_owned()
        } else {
            format!("{path}/")
        };
        let skip = prefix.len();
        descendants(&self.0, path)
            .map(move |(p, _)| &p[skip..])
            .filter(|rest| !rest.contains('/'))
    }

    /// Every cached node, in path order (a parent before its children).
    ///
    /// ```no_run
    /// # fn demo(view: zk_recipes::TreeSnapshot) {
    /// for (path, node) in view.iter() {
    ///     println!("{path} {}", node.stat().data_length);
    /// }
    /// # }
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = (&str, &CachedNode)> {
        self.0.iter().map(|(p, n)| (p.as_str(), n))
    }

    /// How many nodes are cached.
    ///
    /// ```no_run
    /// # fn demo(view: zk_recipes::TreeSnapshot) {
    /// println!("{}", view.len());
    /// # }
    /// ```
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether nothing is cached (the root is missing, or not read yet).
    ///
    /// ```no_run
    /// # fn demo(view: zk_recipes::TreeSnapshot) {
    /// assert!(!view.is_empty());
    /// # }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Whether `path` is cached by a cache at `root` with `filter`: under the root, and it and
/// each of its ancestors from the root down accepted.
pub(crate) fn admitted(
    root: &str,
    filter: Option<&(dyn Fn(&str) -> bool + Send + Sync)>,
    path: &str,
) -> bool {
    let under = path == root
        || (root == "/" && path.starts_with('/'))
        || path
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'));
    if !under {
        return false;
    }
    let Some(keep) = filter else {
        return true;
    };
    // The root, then each ancestor below it, then the path itself.
    let below = if root == "/" { 1 } else { root.len() + 1 };
    keep(root)
        && path
            .char_indices()
            .skip(below)
            .filter(|(_, c)| *c == '/')
            .map(|(i, _)| &path[..i])
            .chain((path != root).then_some(path))
            .all(keep)
}

/// The nodes strictly below `path`, in path order: `{path}/` up to `{path}0` (`'0'` follows
/// `'/'`).
pub(crate) fn descendants<'a>(
    tree: &'a BTreeMap<String, CachedNode>,
    path: &str,
) -> impl Iterator<Item = (&'a String, &'a CachedNode)> + 'a {
    let (low, high) = if path == "/" {
        ("/".to_owned(), "0".to_owned())
    } else {
        (format!("{path}/"), format!("{path}0"))
    };
    tree.range::<String, _>((Bound::Excluded(low), Bound::Excluded(high)))
}

/// The events that turn `old` into `new`: deletions first (deepest first), then creations and
/// changes in path order (parents first).
pub(crate) fn diff(
    old: &BTreeMap<String, CachedNode>,
    new: &BTreeMap<String, CachedNode>,
) -> Vec<TreeEvent> {
    let mut events = Vec::new();
    // Deleted: in old and not in new, or in new as another node (created again).
    for (path, node) in old.iter().rev() {
        match new.get(path) {
            Some(now) if now.stat.czxid == node.stat.czxid => {}
            _ => events.push(TreeEvent::Deleted {
                path: path.clone(),
                node: node.clone(),
            }),
        }
    }
    for (path, node) in new {
        match old.get(path) {
            Some(was) if was.stat.czxid == node.stat.czxid => {
                if !was.same_as(node) {
                    events.push(TreeEvent::Changed {
                        path: path.clone(),
                        old: was.clone(),
                        node: node.clone(),
                    });
                }
            }
            _ => events.push(TreeEvent::Created {
                path: path.clone(),
                node: node.clone(),
            }),
        }
    }
    events
}

/// Applies `tree`'s changes from `events` (as `diff` or `apply` made them).
pub(crate) fn replay(tree: &mut BTreeMap<String, CachedNode>, events: &[TreeEvent]) {
    for event in events {
        match event {
            TreeEvent::Created { path, node } | TreeEvent::Changed { path, node, .. } => {
                tree.insert(path.clone(), node.clone());
            }
            TreeEvent::Deleted { path, .. } => {
                tree.remove(path);
            }
            TreeEvent::Initialized => {}
        }
    }
}

/// The events for one node read afresh: `read` is what the server has at `path` now (`None`:
/// no node). A node gone takes its cached descendants with it; a node made again (another
/// czxid) too, since they were deleted before it could be.
pub(crate) fn apply(
    tree: &BTreeMap<String, CachedNode>,
    path: &str,
    read: Option<CachedNode>,
) -> Vec<TreeEvent> {
    let mut events = Vec::new();
    let cached = tree.get(path);
    let replaced = match (cached, &read) {
        (Some(was), Some(now)) => was.stat.czxid != now.stat.czxid,
        (Some(_), None) => true,
        (None, _) => false,
    };
    if replaced {
        for (p, node) in descendants(tree, path)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
        {
            events.push(TreeEvent::Deleted {
                path: p.clone(),
                node: node.clone(),
            });
        }
        if let Some(was) = cached {
            events.push(TreeEvent::Deleted {
                path: path.to_owned(),
                node: was.clone(),
            });
        }
    }
    match (cached, read) {
        (Some(was), Some(now)) if !replaced => {
            if !was.same_as(&now) {
                events.push(TreeEvent::Changed {
                    path: path.to_owned(),
                    old: was.clone(),
                    node: now,
                });
            }
        }
        (_, Some(now)) => events.push(TreeEvent::Created {
            path: path.to_owned(),
            node: now,
        }),
        (_, None) => {}
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(czxid: i64, mzxid: i64, data: &str) -> CachedNode {
        let stat = zk::Stat {
            czxid,
            mzxid,
            ctime: 0,
            mtime: 0,
            version: 0,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: 0,
            data_length: data.len() as i32,
            num_children: 0,
            pzxid: czxid,
        };
        CachedNode::new(stat, Some(data.as_bytes().to_vec()))
    }

    fn tree(nodes: &[(&str, CachedNode)]) -> BTreeMap<String, CachedNode> {
        nodes
            .iter()
            .map(|(p, n)| (p.to_string(), n.clone()))
            .collect()
    }

    fn paths(events: &[TreeEvent]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                TreeEvent::Created { path, .. } => format!("+{path}"),
                TreeEvent::Changed { path, .. } => format!("~{path}"),
                TreeEvent::Deleted { path, .. } => format!("-{path}"),
                TreeEvent::Initialized => "init".into(),
            })
            .collect()
    }

    #[test]
    fn the_filter_prunes_a_refused_path_with_everything_below_it() {
        let no_tmp = |p: &str| !p.ends_with("/tmp");
        let f: Option<&(dyn Fn(&str) -> bool + Send + Sync)> = Some(&no_tmp);
        assert!(admitted("/cfg", f, "/cfg"));
        assert!(admitted("/cfg", f, "/cfg/a/b"));
        assert!(!admitted("/cfg", f, "/cfg/tmp"));
        assert!(!admitted("/cfg", f, "/cfg/tmp/x/y"));
        assert!(!admitted("/cfg", f, "/cfgx"), "not under the root");
        assert!(!admitted("/cfg", None, "/other"));
        assert!(admitted("/", f, "/a/b"));
        assert!(!admitted("/", f, "/tmp/b"));
        assert!(admitted("/", None, "/"));
    }

    #[test]
    fn descendants_are_exactly_the_nodes_below_not_their_namesakes_with_a_suffix() {
        let t = tree(&[
            ("/a", node(1, 1, "")),
            ("/a-b", node(2, 2, "")),
            ("/a/b", node(3, 3, "")),
            ("/a/b/c", node(4, 4, "")),
            ("/a0", node(5, 5, "")),
            ("/ab", node(6, 6, "")),
        ]);
        let below: Vec<&str> = descendants(&t, "/a").map(|(p, _)| p.as_str()).collect();
        assert_eq!(below, ["/a/b", "/a/b/c"]);
        let all: Vec<&str> = descendants(&t, "/").map(|(p, _)| p.as_str()).collect();
        assert_eq!(all.len(), 6);
        let snapshot = TreeSnapshot(Arc::new(t));
        assert_eq!(snapshot.children("/a").collect::<Vec<_>>(), ["b"]);
        assert_eq!(snapshot.children("/").count(), 4);
    }

    #[test]
    fn diff_reports_each_difference_once_deletions_deepest_first_creations_parents_first() {
        let old = tree(&[
            ("/r", node(1, 1, "")),
            ("/r/gone", node(2, 2, "")),
            ("/r/gone/deep", node(3, 3, "")),
            ("/r/same", node(4, 4, "x")),
            ("/r/changed", node(5, 5, "a")),
            ("/r/again", node(6, 6, "")),
        ]);
        let new = tree(&[
            ("/r", node(1, 1, "")),
            ("/r/same", node(4, 4, "x")),
            ("/r/changed", node(5, 9, "b")),
            ("/r/again", node(10, 10, "")),
            ("/r/new", node(11, 11, "")),
            ("/r/new/kid", node(12, 12, "")),
        ]);
        let events = diff(&old, &new);
        assert_eq!(
            paths(&events),
            [
                "-/r/gone/deep",
                "-/r/gone",
                "-/r/again",
                "+/r/again",
                "~/r/changed",
                "+/r/new",
                "+/r/new/kid"
            ]
        );
        let mut replayed = old.clone();
        replay(&mut replayed, &events);
        assert_eq!(replayed, new);
        assert!(diff(&new, &new).is_empty());
    }

    #[test]
    fn a_fresh_read_of_one_node_gives_its_one_difference() {
        let t = tree(&[
            ("/r", node(1, 1, "")),
            ("/r/a", node(2, 2, "v1")),
            ("/r/a/b", node(3, 3, "")),
        ]);
        // The same read again: nothing.
        assert!(apply(&t, "/r/a", Some(node(2, 2, "v1"))).is_empty());
        // New data.
        assert_eq!(paths(&apply(&t, "/r/a", Some(node(2, 7, "v2")))), ["~/r/a"]);
        // Gone: its subtree with it, children first.
        assert_eq!(paths(&apply(&t, "/r/a", None)), ["-/r/a/b", "-/r/a"]);
        // Made again: the old one and its subtree out, the new one in.
        assert_eq!(
            paths(&apply(&t, "/r/a", Some(node(8, 8, "")))),
            ["-/r/a/b", "-/r/a", "+/r/a"]
        );
        // Unknown and missing: nothing; unknown and there: created.
        assert!(apply(&t, "/r/x", None).is_empty());
        assert_eq!(paths(&apply(&t, "/r/x", Some(node(9, 9, "")))), ["+/r/x"]);
    }
}
