//! Whom a waiting `zkr lock` (or `elect`) waits behind: its own node (found among its
//! session's ephemeral nodes, since the library hands out no node before the grant), the node
//! the library's rule makes it wait for, and the queue's holder, each with its owner label and
//! session. The same rules as the library's (`layout::rules`, persistent nodes passed over);
//! read again whenever the node waited for goes while zkr still waits.

use serde_json::{json, Value};
use zk_recipes::layout::names::{self, Family, NodeName, Wants};
use zk_recipes::layout::owner::OwnerRecord;
use zk_recipes::layout::rules;
use zk_recipes::zookeeper_client as zk;

/// At most this many persistent nodes ahead are passed over before giving up.
const PASSES: usize = 16;

/// A node of the queue: its name, owner and session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    pub owner: Option<String>,
    pub session: i64,
}

impl Node {
    pub fn json(&self) -> Value {
        json!({"node": self.name, "owner": self.owner, "session": format!("{:#x}", self.session)})
    }

    fn describe(&self) -> String {
        let owner = self.owner.as_deref().unwrap_or("no owner label");
        format!("{} ({owner}, session {:#x})", self.name, self.session)
    }
}

/// Where our node stands.
#[derive(Clone, Debug)]
pub struct Behind {
    /// Our node's name.
    pub ours: String,
    /// 1-based place in the queue (persistent nodes aside).
    pub position: usize,
    /// The node we wait for.
    pub behind: Node,
    /// The queue's first node, when it is not the one we wait for (an exclusive lock's
    /// holder).
    pub holder: Option<Node>,
}

impl Behind {
    /// `behind lock-0000000003 (web-1/42, session 0x...), 3rd in line; held by ...`.
    pub fn describe(&self) -> String {
        let mut text = format!(
            "behind {}, {} in line",
            self.behind.describe(),
            ordinal(self.position)
        );
        if let Some(holder) = &self.holder {
            text.push_str(&format!("; held by {}", holder.describe()));
        }
        text
    }

    pub fn json(&self) -> Value {
        json!({
            "node": self.ours,
            "position": self.position,
            "behind": self.behind.json(),
            "holder": self.holder.as_ref().map(Node::json),
        })
    }
}

fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// The node a contender at `at` in `queue` (wants, in queue order) waits for, by the library's
/// rule for `family`; `None` when it holds.
pub fn waits_for(family: Family, queue: &[Wants], at: usize) -> Option<usize> {
    let decision = match family {
        Family::RwLock | Family::Kazoo => rules::read_write(queue, at),
        _ => rules::exclusive(queue, at),
    };
    decision.watched()
}

/// Reads where our session's node in `root` stands, and a watch that fires when the node we
/// wait for goes. `None` when it cannot be told (no node of ours there yet, or it holds).
pub async fn read(client: &zk::Client, root: &str) -> Option<(Behind, zk::OneshotWatcher)> {
    let ours = client
        .list_ephemerals(root)
        .await
        .ok()?
        .into_iter()
        .filter_map(|path| {
            let (parent, name) = path.rsplit_once('/')?;
            let parent = if parent.is_empty() { "/" } else { parent };
            (parent == root).then(|| name.to_owned())
        })
        .filter_map(|name| names::parse(&name).map(|n| (n, name)))
        .max_by_key(|(n, _)| n.sequence)?;
    let (children, _) = client.get_children(root).await.ok()?;
    let mut queue: Vec<(NodeName, String)> = children
        .into_iter()
        .filter_map(|name| names::parse(&name).map(|n| (n, name)))
        .filter(|(n, _)| n.family == ours.0.family)
        .collect();
    queue.sort_by(|a, b| (a.0.sequence, &a.1).cmp(&(b.0.sequence, &b.1)));
    let at_path = |name: &str| {
        if root == "/" {
            format!("/{name}")
        } else {
            format!("{root}/{name}")
        }
    };
    // Persistent nodes are nobody's contenders: the library passes them over. Read the node
    // the rule names; one found persistent leaves the queue and the rule is asked again.
    for _ in 0..PASSES {
        let at = queue.iter().position(|(_, name)| *name == ours.1)?;
        let wants: Vec<Wants> = queue.iter().map(|(n, _)| n.wants).collect();
        let watched = waits_for(ours.0.family, &wants, at)?;
        let first = 0;
        let (behind, watcher) = match node(client, &at_path(&queue[watched].1), true).await {
            Lookup::Live(node, watcher) => (node, watcher),
            Lookup::Persistent => {
                queue.remove(watched);
                continue;
            }
            // Gone meanwhile: the library decides again; so do we, once.
            Lookup::Gone => return None,
        };
        let holder = match (watched == first, ours.0.family) {
            (false, Family::Mutex | Family::Election) => {
                match node(client, &at_path(&queue[first].1), false).await {
                    Lookup::Live(node, _) => Some(node),
                    _ => None,
                }
            }
            _ => None,
        };
        let behind = Behind {
            ours: ours.1.clone(),
            position: at + 1,
            behind,
            holder,
        };
        return Some((behind, watcher?));
    }
    None
}

enum Lookup {
    Live(Node, Option<zk::OneshotWatcher>),
    Persistent,
    Gone,
}

/// A node's owner and session, with a watch on its existence when `watch`.
async fn node(client: &zk::Client, path: &str, watch: bool) -> Lookup {
    let (read, watcher) = if watch {
        match client.get_and_watch_data(path).await {
            Ok((data, stat, watcher)) => (Ok((data, stat)), Some(watcher)),
            Err(e) => (Err(e), None),
        }
    } else {
        (client.get_data(path).await, None)
    };
    match read {
        Ok((_, stat)) if stat.ephemeral_owner == 0 => Lookup::Persistent,
        Ok((data, stat)) => Lookup::Live(
            Node {
                name: path.rsplit('/').next().unwrap_or(path).to_owned(),
                owner: OwnerRecord::parse(&data)
                    .map(|r| r.owner)
                    .or_else(|| text(&data)),
                session: stat.ephemeral_owner,
            },
            watcher,
        ),
        Err(_) => Lookup::Gone,
    }
}

/// Node data that is no owner record, as text (an election's candidate info).
fn text(data: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(data);
    let text = text.trim();
    (!text.is_empty()).then(|| text.chars().take(120).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_read_as_people_say_them() {
        let got: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111]
            .into_iter()
            .map(ordinal)
            .collect();
        assert_eq!(
            got,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st",
                "111th"
            ]
        );
    }

    #[test]
    fn the_rule_names_the_node_waited_for() {
        use Wants::*;
        assert_eq!(waits_for(Family::Mutex, &[Lock, Lock, Lock], 2), Some(1));
        assert_eq!(waits_for(Family::Mutex, &[Lock], 0), None);
        // A writer waits for the node just ahead; a reader for the nearest writer ahead.
        assert_eq!(waits_for(Family::RwLock, &[Write, Read, Read], 2), Some(0));
        assert_eq!(waits_for(Family::RwLock, &[Read, Read, Write], 2), Some(1));
        let behind = Behind {
            ours: "lock-0000000003".into(),
            position: 3,
            behind: Node {
                name: "lock-0000000002".into(),
                owner: Some("web-1/42".into()),
                session: 0x12,
            },
            holder: Some(Node {
                name: "lock-0000000001".into(),
                owner: None,
                session: 0x11,
            }),
        };
        assert_eq!(
            behind.describe(),
            "behind lock-0000000002 (web-1/42, session 0x12), 3rd in line; held by \
             lock-0000000001 (no owner label, session 0x11)"
        );
        assert_eq!(behind.json()["behind"]["owner"], "web-1/42");
        assert_eq!(behind.json()["holder"]["session"], "0x11");
    }
}
