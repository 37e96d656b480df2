//! The recipe-kind marks as `inspect` and `repair` read them (the library's
//! [`layout::kind`](zk_recipes::layout::kind) names them): what a root's mark says, which
//! contenders a root of that kind may hold, and whether a directory is a key's directory in a
//! lock space. Pure: the reads are elsewhere.
//!
//! A lock space is told by its parent's mark (`zk-recipes:lock-space`). A space made before the
//! marks carries none; its keys' directories do not either, but one of them in use is
//! recognisable: an unanchored directory holding a keyed lock's contender (a Curator-protected
//! `_c_{uuid}-lock-N` node with zk-recipes' owner record). So a directory is taken to be a
//! key's directory when its parent is marked as a lock space, or when its parent carries no
//! anchor at all and another child of the parent is such a key in use. A parent with an anchor
//! of any other kind, or an unmarked parent with no key in use, is no lock space: nothing else
//! (a name, a depth) tells a space from a plain directory of `ZkMutex` roots, whose sequences
//! are their tokens.

use zk_recipes::layout::kind::{RecipeKind, MARK_PREFIX};
use zk_recipes::layout::names::{self, Family, Style};
use zk_recipes::layout::owner::OwnerRecord;

/// What a root's mark says: its anchor's data, or (a group) its own data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// No anchor, and no group's mark in the data.
    None,
    /// An anchor with no data: a version before the marks wrote it (a `ZkMutex`, `ZkRwLock` or
    /// `ZkLeaderElection` root, or a semaphore's `locks/`).
    Before,
    /// The kind the mark names.
    Kind(RecipeKind),
    /// An anchor whose data is no mark.
    Foreign,
}

impl Mark {
    /// From the root's anchor data (`None`: no anchor) and its own data.
    pub fn of(anchor: Option<&[u8]>, root_data: &[u8]) -> Mark {
        if RecipeKind::from_mark(root_data) == Some(RecipeKind::Group) {
            return Mark::Kind(RecipeKind::Group);
        }
        match anchor {
            None => Mark::None,
            Some([]) => Mark::Before,
            Some(data) => RecipeKind::from_mark(data).map_or(Mark::Foreign, Mark::Kind),
        }
    }

    pub fn kind(self) -> Option<RecipeKind> {
        match self {
            Mark::Kind(kind) => Some(kind),
            _ => None,
        }
    }

    /// Whether a root so marked may hold contenders of `family` (a family of another recipe, or
    /// of another client that does not see the marked recipe's nodes, disagrees with the mark).
    /// `None` and `Before` say nothing against a family that anchored roots used to hold.
    pub fn admits(self, family: Family) -> bool {
        match self {
            Mark::None => true,
            Mark::Before | Mark::Foreign => {
                matches!(family, Family::Mutex | Family::RwLock | Family::Election)
            }
            Mark::Kind(kind) => match kind {
                RecipeKind::Mutex => family == Family::Mutex,
                RecipeKind::RwLock => family == Family::RwLock,
                RecipeKind::Election => family == Family::Election,
                // Its root holds `locks/` (a mutex queue) and `leases/`.
                RecipeKind::Semaphore => matches!(family, Family::Mutex | Family::Lease),
                _ => false,
            },
        }
    }

    /// What `inspect` prints of it: `marked ZkMutex`, `anchored, no mark (an earlier version)`.
    pub fn describe(self) -> Option<String> {
        match self {
            Mark::None => None,
            Mark::Before => Some("anchored, no mark (an earlier version)".to_owned()),
            Mark::Kind(kind) => Some(format!("marked {}", kind.type_name())),
            Mark::Foreign => Some("anchored, not by zk-recipes (no mark in it)".to_owned()),
        }
    }

    /// Whether `zkr repair` removes such an anchor from a key's directory: one a lock's or an
    /// election's root got (by an earlier version, or marked so), whose only state is its
    /// contenders. The other kinds keep data of their own in their root (a count, a
    /// semaphore's permits) or are lock spaces themselves.
    pub fn repairable(self) -> bool {
        match self {
            Mark::Before => true,
            Mark::Kind(kind) => matches!(
                kind,
                RecipeKind::Mutex | RecipeKind::RwLock | RecipeKind::Election
            ),
            Mark::None | Mark::Foreign => false,
        }
    }
}

/// The text of a mark for JSON: the mark itself, `""` for an anchor without one, the data as
/// text for someone else's; `None` without an anchor (or a group's mark).
pub fn mark_text(anchor: Option<&[u8]>, root_data: &[u8]) -> Option<String> {
    if RecipeKind::from_mark(root_data) == Some(RecipeKind::Group) {
        return Some(format!("{MARK_PREFIX}{}", RecipeKind::Group.name()));
    }
    anchor.map(|data| String::from_utf8_lossy(data).into_owned())
}

/// Whether a directory is a key's directory in a lock space, and how that is known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Space {
    /// The parent carries the lock space's mark.
    Marked,
    /// The parent carries no anchor (a space made before the marks), and `key` (another child
    /// of it) is a key in use.
    KeysInUse { key: String },
    /// The parent is no lock space: it carries another mark, or nothing shows it to be one.
    Not(NotSpace),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotSpace {
    /// The parent's anchor says it is another recipe's root (or an earlier version's).
    OtherMark(Mark),
    /// The parent carries no mark, and none of its other children is a key in use.
    NoEvidence,
}

impl Space {
    pub fn is_space(&self) -> bool {
        matches!(self, Space::Marked | Space::KeysInUse { .. })
    }
}

/// The rule of the module docs: the parent's mark, else (for an unmarked parent) a sibling
/// that is a key in use (see [`key_in_use`]).
pub fn space_of(parent: Mark, key_sibling: Option<&str>) -> Space {
    match parent {
        Mark::Kind(RecipeKind::LockSpace) => Space::Marked,
        Mark::None => match key_sibling {
            Some(key) => Space::KeysInUse {
                key: key.to_owned(),
            },
            None => Space::Not(NotSpace::NoEvidence),
        },
        other => Space::Not(NotSpace::OtherMark(other)),
    }
}

/// Whether a directory looks like a lock space's key in use: no anchor, and at least one
/// child that is a keyed lock's contender (a Curator-protected `_c_{uuid}-lock-N` with
/// zk-recipes' owner record in its data). A `ZkMutex` root is anchored and its nodes are plain
/// `lock-N`; Curator's own lock has protected names but no owner record.
pub fn key_in_use<'a>(
    anchor: Option<&[u8]>,
    mut children: impl Iterator<Item = (&'a str, &'a [u8])>,
) -> bool {
    anchor.is_none()
        && children.any(|(name, data)| {
            names::parse(name)
                .is_some_and(|n| n.style == Style::Curator && n.family == Family::Mutex)
                && OwnerRecord::parse(data).is_some()
        })
}

/// The kind a family of contenders belongs to, for messages (`None`: another client's).
pub fn kind_of_family(family: Family) -> Option<RecipeKind> {
    match family {
        Family::Mutex => Some(RecipeKind::Mutex),
        Family::RwLock => Some(RecipeKind::RwLock),
        Family::Election => Some(RecipeKind::Election),
        Family::Lease => Some(RecipeKind::Semaphore),
        Family::Kazoo | Family::ZkLock | Family::ZkElection => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UUID: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";

    #[test]
    fn marks_are_read_from_the_anchor_or_a_groups_data() {
        let mutex = RecipeKind::Mutex.mark();
        assert_eq!(Mark::of(None, b""), Mark::None);
        assert_eq!(Mark::of(Some(b""), b""), Mark::Before);
        assert_eq!(
            Mark::of(Some(&mutex), b"lock-0000000001"),
            Mark::Kind(RecipeKind::Mutex)
        );
        assert_eq!(Mark::of(Some(b"hello"), b""), Mark::Foreign);
        let group = RecipeKind::Group.mark();
        assert_eq!(Mark::of(None, &group), Mark::Kind(RecipeKind::Group));
        assert_eq!(mark_text(None, &group).as_deref(), Some("zk-recipes:group"));
        assert_eq!(mark_text(Some(b""), b"").as_deref(), Some(""));
        assert_eq!(mark_text(None, b"x"), None);
    }

    #[test]
    fn a_mark_admits_its_own_recipes_contenders_only() {
        let kind = |k| Mark::Kind(k);
        assert!(kind(RecipeKind::Mutex).admits(Family::Mutex));
        assert!(!kind(RecipeKind::Mutex).admits(Family::RwLock));
        assert!(!kind(RecipeKind::Mutex).admits(Family::Kazoo));
        assert!(kind(RecipeKind::RwLock).admits(Family::RwLock));
        assert!(!kind(RecipeKind::Election).admits(Family::Mutex));
        assert!(kind(RecipeKind::Semaphore).admits(Family::Lease));
        for k in [RecipeKind::LockSpace, RecipeKind::Count, RecipeKind::Group] {
            assert!(!kind(k).admits(Family::Mutex), "{k}");
        }
        assert!(Mark::Before.admits(Family::Election));
        assert!(!Mark::Before.admits(Family::Lease));
        assert!(Mark::None.admits(Family::Kazoo));
    }

    #[test]
    fn only_a_locks_or_an_elections_anchor_is_repairable() {
        assert!(Mark::Before.repairable());
        for k in RecipeKind::ALL {
            let expected = matches!(
                k,
                RecipeKind::Mutex | RecipeKind::RwLock | RecipeKind::Election
            );
            assert_eq!(Mark::Kind(k).repairable(), expected, "{k}");
        }
        assert!(!Mark::None.repairable());
        assert!(!Mark::Foreign.repairable());
    }

    #[test]
    fn a_lock_space_is_told_by_its_mark_or_by_a_key_in_use() {
        let space = Mark::Kind(RecipeKind::LockSpace);
        assert_eq!(space_of(space, None), Space::Marked);
        assert_eq!(
            space_of(Mark::None, Some("order-2")),
            Space::KeysInUse {
                key: "order-2".into()
            }
        );
        assert_eq!(space_of(Mark::None, None), Space::Not(NotSpace::NoEvidence));
        // A parent that is another recipe's root is no space, whatever its children look like.
        let mutex = Mark::Kind(RecipeKind::Mutex);
        assert_eq!(
            space_of(mutex, Some("x")),
            Space::Not(NotSpace::OtherMark(mutex))
        );
        assert_eq!(
            space_of(Mark::Before, Some("x")),
            Space::Not(NotSpace::OtherMark(Mark::Before))
        );
    }

    #[test]
    fn a_key_in_use_is_an_unanchored_directory_with_a_keyed_contender() {
        let keyed = format!("_c_{UUID}-lock-0000000003");
        let record = b"id=x\nowner=w/1\n";
        let one = |name: &str, data: &'static [u8]| vec![(name.to_owned(), data)];
        let check = |anchor: Option<&[u8]>, children: &[(String, &[u8])]| {
            key_in_use(anchor, children.iter().map(|(n, d)| (n.as_str(), *d)))
        };
        assert!(check(None, &one(&keyed, record)));
        // Anchored: a ZkMutex root (or the slip itself).
        assert!(!check(Some(b""), &one(&keyed, record)));
        // A ZkMutex's plain names, Curator's own lock (no owner record), nothing at all.
        assert!(!check(None, &one("lock-0000000003", record)));
        assert!(!check(None, &one(&keyed, b"10.0.0.1")));
        assert!(!check(None, &[]));
        let read = format!("_c_{UUID}-__READ__0000000003");
        assert!(!check(None, &one(&read, record)));
    }
}
