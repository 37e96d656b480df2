//! One path, one recipe kind: the mark each recipe leaves on its root, and the pure rule that
//! decides whether a recipe may take a path that already carries marks.
//!
//! Every recipe but the group marks its root with the [`ANCHOR`](super::ANCHOR) child, whose
//! data names the kind ([`RecipeKind::mark`]): `zk-recipes:mutex`, `zk-recipes:lock-space`, ...
//! A group's children are all members (Curator's `GroupMember` counts every child), so a
//! group marks its root's data instead, and so do the barriers (Curator deletes a barrier's
//! node, which a child would stop, and counts every child of a double barrier's root as a
//! member). An anchor with no data was left by a version before
//! the marks (a `ZkMutex`, `ZkRwLock` or `ZkLeaderElection` root, or a semaphore's lock):
//! those kinds claim it (the first writes its mark, compare-and-set on the anchor's version
//! 0), the others refuse it. A path whose parent is marked as a lock space is a key's
//! directory: only the space's own keyed lock takes it.
//!
//! ```
//! use zk_recipes::layout::kind::{admit, Admit, RecipeKind};
//! use zk_recipes::RootKind;
//!
//! let mutex = RecipeKind::Mutex;
//! assert_eq!(admit(mutex, None, b"", None), Ok(Admit::Anchor));
//! assert_eq!(admit(mutex, Some(&mutex.mark()), b"", None), Ok(Admit::Marked));
//! let space = RecipeKind::LockSpace.mark();
//! assert_eq!(admit(mutex, None, b"", Some(&space)), Err(RootKind::InLockSpace));
//! assert_eq!(
//!     admit(RecipeKind::LockSpace, Some(&mutex.mark()), b"", None),
//!     Err(RootKind::Taken(RecipeKind::Mutex))
//! );
//! ```

use std::fmt;

/// The prefix of every mark, before the kind's name.
pub const MARK_PREFIX: &str = "zk-recipes:";

/// A recipe kind, as its mark names it.
///
/// ```
/// use zk_recipes::layout::kind::RecipeKind;
/// assert_eq!(RecipeKind::LockSpace.mark(), b"zk-recipes:lock-space");
/// assert_eq!(RecipeKind::from_mark(b"zk-recipes:election"), Some(RecipeKind::Election));
/// assert_eq!(RecipeKind::Mutex.type_name(), "ZkMutex");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RecipeKind {
    /// [`ZkMutex`](crate::ZkMutex).
    Mutex,
    /// [`ZkRwLock`](crate::ZkRwLock).
    RwLock,
    /// [`ZkLeaderElection`](crate::ZkLeaderElection).
    Election,
    /// [`ZkSemaphore`](crate::ZkSemaphore) (its root and its `locks/` queue).
    Semaphore,
    /// [`ZkLockSpace`](crate::ZkLockSpace) (the space; its keys' directories are unmarked).
    LockSpace,
    /// [`ZkSharedCount`](crate::ZkSharedCount).
    Count,
    /// [`ZkGroup`](crate::ZkGroup) (marked in the root's data, not by an anchor).
    Group,
    /// [`ZkBarrier`](crate::ZkBarrier) (marked in the node's data: Curator deletes the node,
    /// which a child would stop).
    Barrier,
    /// [`ZkDoubleBarrier`](crate::ZkDoubleBarrier) (marked in the root's data: Curator counts
    /// every child as a member).
    DoubleBarrier,
    /// [`ZkAtomicLong`](crate::ZkAtomicLong).
    AtomicLong,
}

impl RecipeKind {
    /// Every kind.
    ///
    /// ```
    /// assert_eq!(zk_recipes::layout::kind::RecipeKind::ALL.len(), 10);
    /// ```
    pub const ALL: [RecipeKind; 10] = [
        RecipeKind::Mutex,
        RecipeKind::RwLock,
        RecipeKind::Election,
        RecipeKind::Semaphore,
        RecipeKind::LockSpace,
        RecipeKind::Count,
        RecipeKind::Group,
        RecipeKind::Barrier,
        RecipeKind::DoubleBarrier,
        RecipeKind::AtomicLong,
    ];

    /// The kind's name in its mark.
    ///
    /// ```
    /// assert_eq!(zk_recipes::layout::kind::RecipeKind::RwLock.name(), "rwlock");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            RecipeKind::Mutex => "mutex",
            RecipeKind::RwLock => "rwlock",
            RecipeKind::Election => "election",
            RecipeKind::Semaphore => "semaphore",
            RecipeKind::LockSpace => "lock-space",
            RecipeKind::Count => "count",
            RecipeKind::Group => "group",
            RecipeKind::Barrier => "barrier",
            RecipeKind::DoubleBarrier => "double-barrier",
            RecipeKind::AtomicLong => "atomic-long",
        }
    }

    /// The library type that owns such a root.
    ///
    /// ```
    /// assert_eq!(zk_recipes::layout::kind::RecipeKind::Count.type_name(), "ZkSharedCount");
    /// ```
    pub const fn type_name(self) -> &'static str {
        match self {
            RecipeKind::Mutex => "ZkMutex",
            RecipeKind::RwLock => "ZkRwLock",
            RecipeKind::Election => "ZkLeaderElection",
            RecipeKind::Semaphore => "ZkSemaphore",
            RecipeKind::LockSpace => "ZkLockSpace",
            RecipeKind::Count => "ZkSharedCount",
            RecipeKind::Group => "ZkGroup",
            RecipeKind::Barrier => "ZkBarrier",
            RecipeKind::DoubleBarrier => "ZkDoubleBarrier",
            RecipeKind::AtomicLong => "ZkAtomicLong",
        }
    }

    /// The mark: the anchor's data (the root's data for a group).
    ///
    /// ```
    /// assert_eq!(zk_recipes::layout::kind::RecipeKind::Group.mark(), b"zk-recipes:group");
    /// ```
    pub fn mark(self) -> Vec<u8> {
        format!("{MARK_PREFIX}{}", self.name()).into_bytes()
    }

    /// The kind a mark names; `None` for anything else (an empty anchor included).
    ///
    /// ```
    /// use zk_recipes::layout::kind::RecipeKind;
    /// assert_eq!(RecipeKind::from_mark(b"zk-recipes:count"), Some(RecipeKind::Count));
    /// assert_eq!(RecipeKind::from_mark(b""), None);
    /// ```
    pub fn from_mark(data: &[u8]) -> Option<RecipeKind> {
        let name = std::str::from_utf8(data).ok()?.strip_prefix(MARK_PREFIX)?;
        RecipeKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether the kind marks its root's data rather than an anchor child (the group and the
    /// barriers).
    ///
    /// ```
    /// use zk_recipes::layout::kind::RecipeKind;
    /// assert!(RecipeKind::Group.marks_root_data());
    /// assert!(RecipeKind::DoubleBarrier.marks_root_data());
    /// assert!(!RecipeKind::Mutex.marks_root_data());
    /// ```
    pub const fn marks_root_data(self) -> bool {
        matches!(
            self,
            RecipeKind::Group | RecipeKind::Barrier | RecipeKind::DoubleBarrier
        )
    }

    /// Whether the kind anchored its roots before the marks existed, and so claims an empty
    /// anchor as its own.
    const fn anchored_before(self) -> bool {
        matches!(
            self,
            RecipeKind::Mutex | RecipeKind::RwLock | RecipeKind::Election | RecipeKind::Semaphore
        )
    }
}

impl fmt::Display for RecipeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.type_name())
    }
}

/// What kind of node a recipe root turned out to be, when it cannot serve as one.
///
/// ```
/// assert_eq!(zk_recipes::RootKind::Ephemeral.to_string(), "an ephemeral node");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RootKind {
    /// An ephemeral node: it cannot have children and dies with its session.
    Ephemeral,
    /// The root of another recipe kind (its mark says which): one path serves one kind,
    /// since each kind's tokens, data and children mean something else (see
    /// [`layout::kind`](crate::layout::kind)).
    Taken(RecipeKind),
    /// A root anchored by an earlier version of the library (an anchor with no mark): a
    /// `ZkMutex`, `ZkRwLock` or `ZkLeaderElection` root, which those kinds take and other kinds
    /// refuse.
    AnchoredBefore,
    /// A key's directory inside a [`ZkLockSpace`](crate::ZkLockSpace) (its parent is marked as
    /// the space): only the space locks it, by key.
    InLockSpace,
    /// A key's directory in a lock space that carries an anchor: someone took it as another
    /// kind's root (a `ZkMutex`, or `zkr lock` without `--key`), whose tokens are sequence
    /// numbers, not zxids. `zkr repair` removes the anchor once nobody holds or waits there.
    AnchoredKey,
    /// A path below an ephemeral node, which cannot have children.
    UnderEphemeral,
}

impl fmt::Display for RootKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RootKind::Ephemeral => "an ephemeral node",
            RootKind::Taken(kind) => {
                return write!(
                    f,
                    "the root of a {} (its mark says so); one path serves one recipe kind, so use \
                     another path for this one",
                    kind.type_name()
                )
            }
            RootKind::AnchoredBefore => {
                "a root anchored by an earlier version (a ZkMutex, ZkRwLock or ZkLeaderElection), \
                 which other kinds do not take: use another path"
            }
            RootKind::InLockSpace => {
                "a key's directory inside a ZkLockSpace (its parent): lock the key through the \
                 space, ZkLockSpace::lock(key) or `zkr lock SPACE --key KEY`"
            }
            RootKind::AnchoredKey => {
                "a key's directory that was taken as another kind's root (a ZkMutex, or `zkr \
                 lock` without --key): once nothing uses it so, `zkr repair PATH` removes the \
                 anchor (it refuses while anyone holds or waits there)"
            }
            RootKind::UnderEphemeral => "below an ephemeral node, which cannot have children",
        })
    }
}

/// What a recipe does with a root that [`admit`] lets it take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Admit {
    /// The root carries this kind's mark already.
    Marked,
    /// No mark yet: create the anchor with the kind's mark (or, for a group, write the mark
    /// into the root's empty data).
    Anchor,
    /// An empty anchor of an earlier version: write the mark into it if it is still at
    /// version 0.
    Claim,
}

/// Whether a recipe of kind `wanted` may take a root, from what is there: the root's anchor
/// data (`None`: no anchor), the root's own data (a group's mark lives there), and the
/// anchor data of the root's parent (`None`: none, or the root is `/`'s child). `Err` names
/// what the root is, for [`Error::UnsuitableRoot`](crate::Error::UnsuitableRoot).
///
/// ```
/// use zk_recipes::layout::kind::{admit, Admit, RecipeKind};
/// use zk_recipes::RootKind;
///
/// // An anchor of an earlier version: the anchored kinds claim it, the others refuse it.
/// assert_eq!(admit(RecipeKind::Election, Some(b""), b"", None), Ok(Admit::Claim));
/// assert_eq!(admit(RecipeKind::Count, Some(b""), b"", None), Err(RootKind::AnchoredBefore));
/// // A group's mark is its root's data.
/// let group = RecipeKind::Group.mark();
/// assert_eq!(admit(RecipeKind::Mutex, None, &group, None), Err(RootKind::Taken(RecipeKind::Group)));
/// assert_eq!(admit(RecipeKind::Group, None, &group, None), Ok(Admit::Marked));
/// ```
pub fn admit(
    wanted: RecipeKind,
    anchor: Option<&[u8]>,
    root_data: &[u8],
    parent_anchor: Option<&[u8]>,
) -> Result<Admit, RootKind> {
    if parent_anchor.and_then(RecipeKind::from_mark) == Some(RecipeKind::LockSpace) {
        return Err(RootKind::InLockSpace);
    }
    if let Some(other) = RecipeKind::from_mark(root_data) {
        if other != wanted && other.marks_root_data() {
            return Err(RootKind::Taken(other));
        }
    }
    match anchor {
        None if wanted.marks_root_data() => Ok(match RecipeKind::from_mark(root_data) {
            Some(k) if k == wanted => Admit::Marked,
            _ => Admit::Anchor,
        }),
        None => Ok(Admit::Anchor),
        Some([]) if wanted.anchored_before() => Ok(Admit::Claim),
        Some([]) => Err(RootKind::AnchoredBefore),
        Some(mark) => match RecipeKind::from_mark(mark) {
            Some(k) if k == wanted => Ok(Admit::Marked),
            Some(k) => Err(RootKind::Taken(k)),
            None => Err(RootKind::AnchoredBefore),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_round_trip_and_nothing_else_reads_as_one() {
        for kind in RecipeKind::ALL {
            assert_eq!(RecipeKind::from_mark(&kind.mark()), Some(kind));
        }
        for other in [
            &b""[..],
            b"zk-recipes:",
            b"zk-recipes:Mutex",
            b"mutex",
            b"\xff",
        ] {
            assert_eq!(RecipeKind::from_mark(other), None, "{other:?}");
        }
    }

    /// Every pair of kinds, both ways round: a root marked by one is refused by every other,
    /// and taken again by its own.
    #[test]
    fn one_path_serves_one_kind() {
        for first in RecipeKind::ALL {
            let (anchor, data) = if first.marks_root_data() {
                (None, first.mark())
            } else {
                (Some(first.mark()), Vec::new())
            };
            for then in RecipeKind::ALL {
                let got = admit(then, anchor.as_deref(), &data, None);
                if then == first {
                    assert_eq!(got, Ok(Admit::Marked), "{first} then {then}");
                } else {
                    assert_eq!(got, Err(RootKind::Taken(first)), "{first} then {then}");
                }
            }
        }
    }

    #[test]
    fn nothing_but_the_space_takes_a_key_directory() {
        let space = RecipeKind::LockSpace.mark();
        for kind in RecipeKind::ALL {
            assert_eq!(
                admit(kind, None, b"", Some(&space)),
                Err(RootKind::InLockSpace),
                "{kind}"
            );
        }
        // Another kind's parent says nothing about the child.
        let mutex = RecipeKind::Mutex.mark();
        assert_eq!(
            admit(RecipeKind::Mutex, None, b"", Some(&mutex)),
            Ok(Admit::Anchor)
        );
    }

    #[test]
    fn empty_and_foreign_anchors() {
        for kind in RecipeKind::ALL {
            let empty = admit(kind, Some(b""), b"", None);
            let foreign = admit(kind, Some(b"something else"), b"", None);
            assert_eq!(foreign, Err(RootKind::AnchoredBefore), "{kind}");
            if kind.anchored_before() {
                assert_eq!(empty, Ok(Admit::Claim), "{kind}");
            } else {
                assert_eq!(empty, Err(RootKind::AnchoredBefore), "{kind}");
            }
        }
    }
}
