//! `zkr repair PATH`: a lock space's key that someone took as another recipe's root (`zkr lock
//! SPACE/KEY -- CMD`, `--key` forgotten) keeps that recipe's anchor, and every `ZkLockSpace`
//! worker then refuses the key (`RootKind::AnchoredKey`). Repair deletes the anchor and the
//! key's directory in one transaction: the keyed lock makes the directory again, as a
//! container, at its next lock (a persistent directory left by the slip would never be
//! reaped).
//!
//! Nothing is touched unless every check holds (see [`decide`]): PATH is a persistent node
//! with an anchor of a lock's or an election's root, nobody holds or waits there, and its
//! parent is a lock space (`inspect::marks` has the rule). The transaction checks what the
//! checks read: the anchor's and PATH's versions, and the parent's mark's; a contender that
//! comes in between makes it fail (`NotEmpty`) and is reported like one found before.

use serde_json::json;
use zk_recipes::layout::kind::RecipeKind;
use zk_recipes::layout::names;
use zk_recipes::layout::owner::OwnerRecord;
use zk_recipes::layout::ANCHOR;
use zk_recipes::zookeeper_client as zk;

use crate::args::{Policy, RepairArgs, ZkArgs};
use crate::connect;
use crate::exit::{self, Failure, Result};
use crate::inspect::marks::{self, Mark, NotSpace, Space};
use crate::inspect::read::{join, parent_of};

/// At most this many of the parent's other children are looked at for a key in use (a space
/// made before the marks carries none); the first found ends the search.
const SIBLINGS_LOOKED_AT: usize = 1000;
/// How many siblings are read at once.
const BURST: usize = 64;

/// What was read at PATH and around it.
#[derive(Clone, Debug, Default)]
pub struct Found {
    pub path: String,
    pub ephemeral: bool,
    pub data: Vec<u8>,
    /// PATH's data version.
    pub version: i32,
    /// The anchor's data and version.
    pub anchor: Option<(Vec<u8>, i32)>,
    /// The parent's anchor's data and version.
    pub parent_anchor: Option<(Vec<u8>, i32)>,
    /// Another child of the parent that is a lock space's key in use (looked for only when
    /// the parent carries no anchor).
    pub key_sibling: Option<String>,
    /// PATH's children, the anchor aside.
    pub children: Vec<Occupant>,
}

/// A child of PATH: a contender (its owner and session) or anything else.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Occupant {
    pub name: String,
    pub contender: bool,
    pub owner: Option<String>,
    /// `None` for a persistent node.
    pub session: Option<i64>,
}

impl Occupant {
    fn json(&self) -> serde_json::Value {
        json!({
            "node": self.name,
            "owner": self.owner,
            "session": self.session.map(|s| format!("{s:#x}")),
        })
    }

    fn describe(&self) -> String {
        let session = match self.session {
            Some(s) => format!("session {s:#x}"),
            None => "persistent".to_owned(),
        };
        match &self.owner {
            Some(owner) => format!("{} (owner {owner}, {session})", self.name),
            None => format!("{} ({session})", self.name),
        }
    }
}

/// What repair does once every check holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub mark: Mark,
    pub space: Space,
    pub lock_space: String,
    pub key: Option<String>,
}

/// The checks, in order: PATH persistent, anchored, its anchor a lock's or an election's, its
/// parent a lock space, nobody at PATH. A refusal names what failed and what to do.
pub fn decide(found: &Found) -> Result<Plan> {
    let path = found.path.as_str();
    let refuse = |message: String| {
        Err(Failure::new(
            exit::ZOOKEEPER,
            format!("{path}: {message}; nothing touched"),
        )
        .event("refused")
        .with("path", path))
    };
    if found.ephemeral {
        return refuse("an ephemeral node (a contender?), not a key's directory".to_owned());
    }
    let Some((anchor, _)) = &found.anchor else {
        return refuse(format!("carries no {ANCHOR}: nothing to repair"));
    };
    let mark = Mark::of(Some(anchor), &found.data);
    if !mark.repairable() {
        return refuse(match mark.kind() {
            Some(kind) => format!(
                "its mark says it is a {} root: repair removes only a lock's or an election's \
                 anchor, whose only state is its contenders ({})",
                kind.type_name(),
                match kind {
                    RecipeKind::LockSpace => "this is a lock space itself, not one of its keys",
                    RecipeKind::Count => "a ZkSharedCount keeps its count in the root's data",
                    RecipeKind::Semaphore => "a ZkSemaphore keeps its permits and queues there",
                    RecipeKind::Group => "a ZkGroup's members are its children",
                    _ => "a recipe that keeps state of its own there",
                }
            ),
            None => "its anchor holds data that is no zk-recipes mark: not ours to remove".into(),
        });
    }
    let parent = parent_of(path).unwrap_or("/");
    let parent_mark = Mark::of(found.parent_anchor.as_ref().map(|(d, _)| d.as_slice()), b"");
    let space = marks::space_of(parent_mark, found.key_sibling.as_deref());
    match &space {
        Space::Not(NotSpace::OtherMark(m)) => {
            return refuse(format!(
                "its parent {parent} is no lock space ({}), so PATH is no key's directory; a \
                 ZkMutex root is never repaired (its sequence is its tokens)",
                m.describe().unwrap_or_default()
            ))
        }
        Space::Not(NotSpace::NoEvidence) => {
            return refuse(format!(
                "its parent {parent} carries no mark and none of its other children is a key in \
                 use, so it cannot be told from a plain directory of ZkMutex roots (whose \
                 sequences are their tokens); if it is a lock space of an earlier version, lock \
                 any key of it with this one (`zkr lock {parent} --key KEY -- true` marks the \
                 space) and run repair again"
            ))
        }
        Space::Marked | Space::KeysInUse { .. } => {}
    }
    let contenders: Vec<&Occupant> = found.children.iter().filter(|c| c.contender).collect();
    if !contenders.is_empty() {
        return Err(busy(path, &contenders));
    }
    if !found.children.is_empty() {
        let names: Vec<&str> = found.children.iter().map(|c| c.name.as_str()).collect();
        return refuse(format!(
            "it has children that are no contenders ({}): not a key's directory with only an \
             anchor",
            names.join(", ")
        ));
    }
    Ok(Plan {
        mark,
        space,
        lock_space: parent.to_owned(),
        key: zk_recipes::ZkLockSpace::key_of(path.rsplit('/').next().unwrap_or(path)),
    })
}

/// The refusal for a PATH someone holds or waits at.
fn busy(path: &str, contenders: &[&Occupant]) -> Failure {
    let list: Vec<String> = contenders.iter().map(|c| c.describe()).collect();
    Failure::new(
        exit::BUSY,
        format!(
            "{path} is in use: {} there: {}; nothing touched: run repair again once they are \
             gone (their commands end, or their sessions do)",
            match contenders.len() {
                1 => "1 contender holds or waits".to_owned(),
                n => format!("{n} contenders hold or wait"),
            },
            list.join(", ")
        ),
    )
    .event("refused")
    .with("path", path)
    .with("reason", "busy")
    .with(
        "contenders",
        contenders.iter().map(|c| c.json()).collect::<Vec<_>>(),
    )
}

/// `zkr repair PATH [--dry-run]`.
pub async fn repair(zk: &ZkArgs, args: &RepairArgs) -> Result<i32> {
    zk_recipes::layout::check_path(args.path.as_str())?;
    let session = connect::session(zk, Policy::Expiry, None).await?;
    // The client handle goes before the close (a session closes once every handle is gone).
    let result = match session.client().await {
        Ok(client) => run(&client, args).await,
        Err(err) => Err(err.into()),
    };
    session.close().await;
    let (plan, done) = result?;
    let path = args.path.as_str();
    let anchor = join(path, ANCHOR);
    let what = match plan.mark {
        Mark::Kind(kind) => format!("marked {}", kind.type_name()),
        _ => "no mark: an earlier version's".to_owned(),
    };
    let told = match &plan.space {
        Space::KeysInUse { key } => {
            format!(" (an unmarked space of an earlier version, told by its key {key:?} in use)")
        }
        _ => String::new(),
    };
    if args.json {
        let (space, evidence) = match &plan.space {
            Space::KeysInUse { key } => ("key-in-use", Some(key.as_str())),
            _ => ("marked", None),
        };
        let event = if done { "repaired" } else { "would-repair" };
        println!(
            "{}",
            json!({
                "event": event,
                "path": path,
                "key": plan.key,
                "lock_space": plan.lock_space,
                "space": space,
                "space_key_in_use": evidence,
                "anchor_mark": plan.mark.kind().map(|k| String::from_utf8_lossy(&k.mark()).into_owned()).unwrap_or_default(),
                "deleted": if done { vec![anchor.clone(), path.to_owned()] } else { Vec::new() },
                "dry_run": !done,
            })
        );
    } else {
        let key = plan
            .key
            .as_ref()
            .map_or_else(String::new, |k| format!("key {k:?} of "));
        if done {
            println!(
                "repaired {path} ({key}lock space {}{told}): deleted {anchor} ({what}) and \
                 {path} in one transaction; the key's next lock makes its directory again, as \
                 a container",
                plan.lock_space
            );
        } else {
            println!(
                "would repair {path} ({key}lock space {}{told}): delete {anchor} ({what}) and \
                 {path} in one transaction (--dry-run: nothing deleted)",
                plan.lock_space
            );
        }
    }
    Ok(0)
}

/// Reads, decides, and (unless `--dry-run`) deletes: the plan, and whether it was carried out.
async fn run(client: &zk::Client, args: &RepairArgs) -> Result<(Plan, bool)> {
    let path = args.path.as_str();
    let found = look(client, path).await?;
    let plan = decide(&found)?;
    if args.dry_run {
        return Ok((plan, false));
    }
    let anchor = join(path, ANCHOR);
    let parent_anchor = join(&plan.lock_space, ANCHOR);
    let mut multi = client.new_multi_writer();
    let mut ops = Vec::new();
    if let (Space::Marked, Some((_, version))) = (&plan.space, &found.parent_anchor) {
        multi
            .add_check_version(&parent_anchor, *version)
            .map_err(|e| failure(&parent_anchor, e))?;
        ops.push(parent_anchor.as_str());
    }
    let anchor_version = found.anchor.as_ref().map(|(_, v)| *v);
    multi
        .add_delete(&anchor, anchor_version)
        .map_err(|e| failure(&anchor, e))?;
    ops.push(anchor.as_str());
    multi
        .add_delete(path, Some(found.version))
        .map_err(|e| failure(path, e))?;
    ops.push(path);
    match multi.commit().await {
        Ok(_) => Ok((plan, true)),
        Err(zk::MultiWriteError::OperationFailed { index, source }) => {
            let at = ops.get(index).copied().unwrap_or(path);
            match source {
                // Someone came in after our checks: say who.
                zk::Error::NotEmpty => {
                    let again = look(client, path).await?;
                    let contenders: Vec<&Occupant> =
                        again.children.iter().filter(|c| c.contender).collect();
                    if contenders.is_empty() {
                        Err(changed(path, at, "it has children now"))
                    } else {
                        Err(busy(path, &contenders))
                    }
                }
                zk::Error::BadVersion | zk::Error::NoNode => {
                    Err(changed(path, at, &source.to_string()))
                }
                other => Err(failure(at, other)),
            }
        }
        Err(zk::MultiWriteError::RequestFailed { source }) => Err(failure(path, source)),
    }
}

/// The refusal for a PATH that changed between the checks and the transaction (which then
/// did nothing: it is one transaction).
fn changed(path: &str, at: &str, why: &str) -> Failure {
    Failure::new(
        exit::ZOOKEEPER,
        format!("{path} changed after the checks ({at}: {why}); nothing touched: run repair again"),
    )
    .event("refused")
    .with("path", path)
    .with("reason", "changed")
}

fn failure(path: &str, err: zk::Error) -> Failure {
    let code = match err {
        zk::Error::ConnectionLoss | zk::Error::SessionExpired | zk::Error::ClientClosed => {
            exit::UNREACHABLE
        }
        _ => exit::ZOOKEEPER,
    };
    Failure::new(code, format!("{path}: {err}")).with("path", path)
}

/// Reads PATH, its anchor, its children, its parent's anchor and (an unmarked parent) a key in
/// use among its siblings. PATH missing: exit 66.
pub async fn look(client: &zk::Client, path: &str) -> Result<Found> {
    let parent = parent_of(path).unwrap_or("/");
    let anchor_path = join(path, ANCHOR);
    let parent_anchor_path = join(parent, ANCHOR);
    let (node, children, anchor, parent_anchor) = (
        client.get_data(path),
        client.get_children(path),
        client.get_data(&anchor_path),
        client.get_data(&parent_anchor_path),
    );
    let (data, stat) = match node.await {
        Ok(read) => read,
        Err(zk::Error::NoNode) => {
            return Err(
                Failure::new(exit::NO_NODE, format!("{path}: no such node")).with("path", path)
            )
        }
        Err(e) => return Err(failure(path, e)),
    };
    let names = match children.await {
        Ok((names, _)) => names,
        Err(zk::Error::NoNode) => Vec::new(),
        Err(e) => return Err(failure(path, e)),
    };
    let versioned = |read: std::result::Result<(Vec<u8>, zk::Stat), zk::Error>, at: &str| match read
    {
        Ok((data, stat)) => Ok(Some((data, stat.version))),
        Err(zk::Error::NoNode) => Ok(None),
        Err(e) => Err(failure(at, e)),
    };
    let anchor = versioned(anchor.await, &anchor_path)?;
    let parent_anchor = versioned(parent_anchor.await, &parent_anchor_path)?;
    let names: Vec<String> = names.into_iter().filter(|n| n != ANCHOR).collect();
    let reads: Vec<_> = names
        .iter()
        .map(|n| client.get_data(&join(path, n)))
        .collect();
    let mut occupants = Vec::new();
    for (name, read) in names.into_iter().zip(reads) {
        let (data, stat) = match read.await {
            Ok(read) => read,
            Err(zk::Error::NoNode) => continue,
            Err(e) => return Err(failure(path, e)),
        };
        occupants.push(Occupant {
            contender: names::parse(&name).is_some() || stat.ephemeral_owner != 0,
            owner: OwnerRecord::parse(&data).map(|r| r.owner),
            session: (stat.ephemeral_owner != 0).then_some(stat.ephemeral_owner),
            name,
        });
    }
    let key_sibling = if parent_anchor.is_none() && path != "/" {
        key_in_use(client, parent, path).await?
    } else {
        None
    };
    Ok(Found {
        path: path.to_owned(),
        ephemeral: stat.ephemeral_owner != 0,
        data,
        version: stat.version,
        anchor,
        parent_anchor,
        key_sibling,
        children: occupants,
    })
}

/// The first other child of `parent` that is a lock space's key in use (`marks::key_in_use`),
/// among the first [`SIBLINGS_LOOKED_AT`].
async fn key_in_use(client: &zk::Client, parent: &str, path: &str) -> Result<Option<String>> {
    let ours = path.rsplit('/').next().unwrap_or(path);
    let siblings = match client.list_children(parent).await {
        Ok(names) => names,
        Err(zk::Error::NoNode) => return Ok(None),
        Err(e) => return Err(failure(parent, e)),
    };
    let siblings: Vec<String> = siblings
        .into_iter()
        .filter(|n| n != ours && n != ANCHOR)
        .take(SIBLINGS_LOOKED_AT)
        .collect();
    for burst in siblings.chunks(BURST) {
        let reads: Vec<_> = burst
            .iter()
            .map(|name| {
                let at = join(parent, name);
                (
                    client.list_children(&at),
                    client.check_stat(&join(&at, ANCHOR)),
                )
            })
            .collect();
        let mut candidates = Vec::new();
        for (name, (children, anchor)) in burst.iter().zip(reads) {
            let children = match children.await {
                Ok(children) => children,
                Err(zk::Error::NoNode) => continue,
                Err(e) => return Err(failure(parent, e)),
            };
            let anchored = anchor.await.map_err(|e| failure(parent, e))?.is_some();
            // A keyed contender's name, whose data tells whether it is zk-recipes'.
            let keyed = children.into_iter().find(|c| {
                names::parse(c).is_some_and(|n| {
                    n.style == names::Style::Curator && n.family == names::Family::Mutex
                })
            });
            if let (false, Some(child)) = (anchored, keyed) {
                candidates.push((name, child));
            }
        }
        let datas: Vec<_> = candidates
            .iter()
            .map(|(name, child)| client.get_data(&join(&join(parent, name), child)))
            .collect();
        for ((name, child), data) in candidates.iter().zip(datas) {
            let data = match data.await {
                Ok((data, _)) => data,
                Err(zk::Error::NoNode) => continue,
                Err(e) => return Err(failure(parent, e)),
            };
            if marks::key_in_use(None, std::iter::once((child.as_str(), data.as_slice()))) {
                return Ok(Some((*name).clone()));
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(anchor: Option<&[u8]>, parent: Option<&[u8]>) -> Found {
        Found {
            path: "/shop/orders/order-1".into(),
            anchor: anchor.map(|a| (a.to_vec(), 0)),
            parent_anchor: parent.map(|p| (p.to_vec(), 0)),
            ..Found::default()
        }
    }

    fn refused(found: &Found) -> Failure {
        decide(found).expect_err("refused")
    }

    #[test]
    fn an_anchored_key_of_a_marked_space_is_repaired() {
        let space = RecipeKind::LockSpace.mark();
        // An earlier version's empty anchor, and a ZkMutex's mark.
        for anchor in [Vec::new(), RecipeKind::Mutex.mark()] {
            let plan = decide(&found(Some(&anchor), Some(&space))).unwrap();
            assert_eq!(plan.space, Space::Marked);
            assert_eq!(plan.lock_space, "/shop/orders");
            assert_eq!(plan.key.as_deref(), Some("order-1"));
        }
        // An unmarked space of an earlier version, with a key in use.
        let mut old = found(Some(b""), None);
        old.key_sibling = Some("order-2".into());
        assert_eq!(
            decide(&old).unwrap().space,
            Space::KeysInUse {
                key: "order-2".into()
            }
        );
    }

    #[test]
    fn anything_else_is_refused_untouched() {
        let space = RecipeKind::LockSpace.mark();
        let mutex = RecipeKind::Mutex.mark();
        let cases: Vec<(&str, Found, i32, &str)> = vec![
            (
                "no anchor",
                found(None, Some(&space)),
                exit::ZOOKEEPER,
                "carries no ~zk-recipes-anchor",
            ),
            (
                "a plain ZkMutex root (its parent is a mutex's)",
                found(Some(b""), Some(&mutex)),
                exit::ZOOKEEPER,
                "a ZkMutex root is never repaired",
            ),
            (
                "an unmarked parent without a key in use",
                found(Some(b""), None),
                exit::ZOOKEEPER,
                "cannot be told from a plain directory",
            ),
            (
                "a count's root",
                found(Some(&RecipeKind::Count.mark()), Some(&space)),
                exit::ZOOKEEPER,
                "a ZkSharedCount root",
            ),
            (
                "a lock space inside a lock space",
                found(Some(&space), Some(&space)),
                exit::ZOOKEEPER,
                "a lock space itself",
            ),
            (
                "someone else's anchor",
                found(Some(b"theirs"), Some(&space)),
                exit::ZOOKEEPER,
                "no zk-recipes mark",
            ),
        ];
        for (what, f, code, message) in cases {
            let failure = refused(&f);
            assert_eq!(failure.code, code, "{what}: {}", failure.message);
            assert!(
                failure.message.contains(message) && failure.message.ends_with("nothing touched"),
                "{what}: {}",
                failure.message
            );
            assert_eq!(failure.event, "refused");
        }
        let mut ephemeral = found(Some(b""), Some(&space));
        ephemeral.ephemeral = true;
        assert!(refused(&ephemeral).message.contains("ephemeral"));
    }

    #[test]
    fn contenders_are_named_in_the_refusal() {
        let space = RecipeKind::LockSpace.mark();
        let mut busy = found(Some(b""), Some(&space));
        busy.children = vec![Occupant {
            name: "lock-0000000003".into(),
            contender: true,
            owner: Some("cron/7".into()),
            session: Some(0x1234),
        }];
        let failure = refused(&busy);
        assert_eq!(failure.code, exit::BUSY);
        assert!(
            failure.message.contains(
                "1 contender holds or waits there: lock-0000000003 (owner cron/7, session 0x1234)"
            ),
            "{}",
            failure.message
        );
        assert_eq!(
            failure.json()["contenders"],
            json!([{"node": "lock-0000000003", "owner": "cron/7", "session": "0x1234"}])
        );
        // Children that are no contenders: not a key's directory with only an anchor.
        busy.children[0].contender = false;
        assert_eq!(refused(&busy).code, exit::ZOOKEEPER);
    }
}
