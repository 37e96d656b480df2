//! What an operator must act on: the warnings of a queue, from its root's mark (an anchor in
//! a lock space's key, contenders the mark's recipe does not hold), its sequence counter and
//! its contenders (persistent nodes, sessions without a connection, gone or silent).

use zk_recipes::layout::kind::RecipeKind;
use zk_recipes::layout::names::Family;

use super::marks::{self, Mark, Space};
use super::{family_name, Counter, Dir, Parent, Queue, SessionState, Warning};

/// Warn when fewer than this share of a root's counter is left.
const NEAR_END_SHARE: f64 = 0.10;

/// The mark's fields of a queue, and its warnings: an anchor in a lock space's key
/// (`anchored-key`), contenders the mark's recipe does not hold (`mark-mismatch`).
pub(super) fn with_marks(
    queue: &mut Queue,
    dir: &Dir,
    parent: Parent<'_>,
    families: &[Family],
    busy: bool,
) {
    let mark = dir.mark();
    queue.mark = marks::mark_text(dir.anchor.as_deref(), &dir.data);
    queue.marked_as = mark.kind().map(RecipeKind::type_name);
    let space = parent.space();
    if space.is_space() {
        queue.lock_space = parent.path.map(str::to_owned);
        if queue.key.is_none() {
            queue.key = zk_recipes::ZkLockSpace::key_of(dir.name());
        }
        if dir.anchored() {
            queue
                .warnings
                .push(anchored_key(dir, &space, mark, families, busy));
        }
    }
    let strangers: Vec<Family> = families
        .iter()
        .copied()
        .filter(|f| !mark.admits(*f))
        .collect();
    if !strangers.is_empty() {
        queue.warnings.push(Warning {
            kind: "mark-mismatch",
            node: None,
            message: format!(
                "{}, but it holds {}: a client uses this path as another recipe, whose \
                 contenders {} does not see; one path serves one recipe kind, so move one of \
                 them to another path",
                match mark.kind() {
                    Some(kind) => format!(
                        "marked as a {} root ({})",
                        kind.type_name(),
                        queue.mark.as_deref().unwrap_or_default()
                    ),
                    None => "anchored as a ZkMutex, ZkRwLock or ZkLeaderElection root by an \
                             earlier version"
                        .to_owned(),
                },
                strangers
                    .iter()
                    .map(|f| format!("{} contenders", family_name(*f)))
                    .collect::<Vec<_>>()
                    .join(" and "),
                mark.kind().map_or("that recipe", RecipeKind::type_name)
            ),
        });
    }
}

/// The warning for an anchor in a lock space's key: the operator slip of taking the key's
/// directory as another recipe's root (`zkr lock SPACE/KEY` without `--key`).
fn anchored_key(dir: &Dir, space: &Space, mark: Mark, families: &[Family], busy: bool) -> Warning {
    let key = zk_recipes::ZkLockSpace::key_of(dir.name()).unwrap_or_else(|| dir.name().to_owned());
    // An anchor without a mark: an earlier version's lock or election; its contenders say which.
    let kind = mark.kind().unwrap_or_else(|| {
        families
            .iter()
            .find_map(|f| marks::kind_of_family(*f))
            .unwrap_or(RecipeKind::Mutex)
    });
    let slip = if kind == RecipeKind::Mutex {
        " (`zkr lock` without --key?)"
    } else {
        ""
    };
    let fix = match mark.repairable() {
        true if busy => format!(
            "fix, once its holders and waiters are gone: zkr repair {}",
            dir.path
        ),
        true => format!("fix: zkr repair {}", dir.path),
        false => format!(
            "zkr repair does not remove a {} root's anchor (that recipe keeps data of its own \
             there): move that recipe to another path, then delete {} and its anchor",
            kind.type_name(),
            dir.path
        ),
    };
    let told = match space {
        Space::KeysInUse { key: other } => format!(
            " (the space carries no mark, as an earlier version made it; its key {other:?} in \
             use shows it to be a lock space)"
        ),
        _ => String::new(),
    };
    Warning {
        kind: "anchored-key",
        node: None,
        message: format!(
            "key {key}: anchored as a {} root{slip}: ZkLockSpace workers refuse it; {fix}{told}",
            kind.type_name()
        ),
    }
}

pub(super) fn counter_warnings(queue: &mut Queue, wrapped: bool) {
    let Counter { next, left } = queue.counter;
    let end = i64::from(i32::MAX);
    if left == 0 || wrapped {
        queue.warnings.push(Warning {
            kind: "counter-used-up",
            node: None,
            message: format!(
                "the sequence counter of {} is at its end (next {next}): every new contender \
                 fails (zk-recipes: SequenceWrapped); move the lock to a new root",
                queue.path
            ),
        });
    } else if (left as f64) < end as f64 * NEAR_END_SHARE {
        queue.warnings.push(Warning {
            kind: "counter-near-end",
            node: None,
            message: format!(
                "{left} tokens left: the sequence counter is at {next} of {end}; once used up \
                 every acquisition fails; plan a move to a new root"
            ),
        });
    }
}

/// Persistent nodes in the queue, and sessions the servers say have no connection or are
/// gone.
pub(super) fn contender_warnings(queue: &mut Queue) {
    let mut warnings = Vec::new();
    for c in &queue.contenders {
        let holds = c.role == "holder";
        match (&c.session, c.session_state) {
            (None, _) => {
                warnings.push(Warning {
                    kind: "persistent-node",
                    node: Some(c.node.clone()),
                    message: format!(
                    "{} is a persistent node, nobody's contender: zk-recipes contenders pass it \
                     over, but for Curator and Client::lock it {} and everyone behind it waits \
                     forever; delete it if nobody owns it (zkCli: delete {}/{})",
                    c.node,
                    if holds { "holds the lock" } else { "will hold the lock once first" },
                    queue.path,
                    c.node
                ),
                })
            }
            (Some(sid), Some(SessionState::Disconnected)) => warnings.push(Warning {
                kind: "session-disconnected",
                node: Some(c.node.clone()),
                message: format!(
                    "session {sid} of {} has no connection to any server: its client is gone \
                     or cut off; the node stays until the session expires{}{}",
                    c.node,
                    match c.session_expires_in_ms {
                        Some(ms) => format!(" (in about {})", crate::time::age(ms.max(0))),
                        None => String::new(),
                    },
                    if holds {
                        ", holding the lock for nobody"
                    } else {
                        ""
                    }
                ),
            }),
            (Some(sid), Some(SessionState::Gone)) => warnings.push(Warning {
                kind: "session-gone",
                node: Some(c.node.clone()),
                message: format!(
                    "the server tracks no session {sid}, yet {} exists: it should be deleted \
                     any moment (inspect again)",
                    c.node
                ),
            }),
            _ => {}
        }
        if let (Some(sid), Some(silent), Some(timeout)) =
            (&c.session, c.silent_ms, c.session_timeout_ms)
        {
            if silent_too_long(silent, timeout) {
                warnings.push(Warning {
                    kind: "session-silent",
                    node: Some(c.node.clone()),
                    message: format!(
                        "no ping for {} of {} {} session: frozen or cut off? (session {sid} of \
                         {}{}; its server expires it once it has heard nothing for the whole \
                         timeout, and {} then)",
                        seconds(silent),
                        article(&seconds(timeout)),
                        seconds(timeout),
                        c.node,
                        c.server
                            .as_deref()
                            .map_or_else(String::new, |s| format!(", connected to {s}")),
                        if holds {
                            "the lock goes to the next in line"
                        } else {
                            "its place in the queue goes"
                        }
                    ),
                });
            }
        }
    }
    queue.warnings.extend(warnings);
}

/// Past half its timeout without an answer from its server: a live client hears from its
/// server at least every third of the timeout (its pings: the Java client's after a third of
/// the timeout idle, zookeeper-client's after 3/20; zk-recipes' heartbeat while it holds).
pub fn silent_too_long(silent_ms: i64, timeout_ms: i64) -> bool {
    timeout_ms > 0 && silent_ms * 2 > timeout_ms
}

/// `a` or `an` before a number as it is said (`an 8 s`, `an 11 s`, `a 4 s`).
pub(super) fn article(number: &str) -> &'static str {
    let whole: String = number.chars().take_while(char::is_ascii_digit).collect();
    let eleven_or_eighteen =
        matches!(whole.len() % 3, 2) && (whole.starts_with("11") || whole.starts_with("18"));
    if whole.starts_with('8') || eleven_or_eighteen {
        "an"
    } else {
        "a"
    }
}

/// `3.1 s`, `4 s`, `850 ms`.
fn seconds(ms: i64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms % 1000 == 0 {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}
