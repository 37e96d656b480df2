//! What the recipes leave in ZooKeeper, public so that tools (`zkr inspect`, an operator's
//! script, another client) read it the way the library writes it: the node names and their
//! parsing ([`names`]), the owner record in a contender's data ([`owner`]), each recipe's rule
//! as a pure function ([`rules`]), and the reserved children below.
//!
//! | recipe | root's children | name | data | token |
//! |---|---|---|---|---|
//! | [`ZkMutex`](crate::ZkMutex) | [`ANCHOR`], contenders | `lock-N` | [`owner::OwnerRecord`] | `N` at the root's czxid |
//! | [`ZkLockSpace`](crate::ZkLockSpace) | [`ANCHOR`], one container per key ([`ZkLockSpace::key_of`](crate::ZkLockSpace::key_of)) | `_c_{uuid}-lock-N` | owner record | the node's czxid |
//! | [`ZkRwLock`](crate::ZkRwLock) | [`ANCHOR`], contenders | `_c_{uuid}-__READ__N`, `_c_{uuid}-__WRIT__N` | owner record | `N` |
//! | [`ZkLeaderElection`](crate::ZkLeaderElection) | [`ANCHOR`], candidates | `_c_{uuid}-latch-N` | the user's | `N` |
//! | [`ZkSemaphore`](crate::ZkSemaphore) | [`ANCHOR`], `locks/` (a mutex), `leases/` | `_c_{uuid}-lease-N` | owner record | none |
//! | [`ZkSharedCount`](crate::ZkSharedCount) | [`ANCHOR`] | | (the node's: 4 bytes) | |
//! | [`ZkGroup`](crate::ZkGroup) | members (its mark is the root's data) | the member's id | the payload | |
//!
//! The anchor's data names the recipe kind ([`kind`]): one path serves one kind.
//!
//! Contender nodes are ephemeral and sequential; `N` is ZooKeeper's `%010d` of the root's
//! counter. A head release writes the released node's name into the root's data in the same
//! transaction as the delete (see `ARCHITECTURE.md`).
//!
//! # Example
//!
//! ```
//! use zk_recipes::layout::{self, names::{self, Wants}, rules::{self, Decision}};
//!
//! let children = ["lock-0000000004", layout::ANCHOR, "lock-0000000003"];
//! let mut queue: Vec<names::NodeName> = children.iter().filter_map(|c| names::parse(c)).collect();
//! queue.sort_by_key(|n| n.sequence);
//! assert_eq!(queue[0].wants, Wants::Lock);
//! assert_eq!(rules::exclusive(&queue, 0), Decision::Hold);
//! assert_eq!(rules::exclusive(&queue, 1), Decision::Watch(0));
//! ```

pub mod kind;
pub mod names;
pub mod owner;
pub mod rules;

/// Checks a path the way every recipe checks the path it is given (a root, a key space, a
/// group): absolute, not `/` itself, no trailing or doubled slashes, no `.` or `..`
/// components, none of the characters ZooKeeper forbids (NUL, other control characters,
/// non-characters), and outside ZooKeeper's reserved `/zookeeper` subtree.
///
/// # Errors
///
/// [`Error::InvalidPath`](crate::Error::InvalidPath) with the reason.
///
/// ```
/// use zk_recipes::layout::check_path;
///
/// assert!(check_path("/locks/orders-42").is_ok());
/// assert!(check_path("/locks//orders").is_err());
/// assert!(check_path("/zookeeper/quota").is_err());
/// ```
pub fn check_path(path: &str) -> crate::Result<()> {
    crate::path::ZkPath::new(path).map(|_| ())
}

/// The persistent child every recipe root but a group's gets, its data the kind's mark
/// ([`kind::RecipeKind::mark`]): it keeps the server from reaping the root (a container or TTL
/// node reads as persistent to clients), so the root's sequence never restarts, and it tells
/// every recipe which kind owns the path. It sorts after every contender, in Curator's order
/// too.
///
/// ```
/// assert!(zk_recipes::layout::names::parse(zk_recipes::layout::ANCHOR).is_none());
/// ```
pub const ANCHOR: &str = "~zk-recipes-anchor";

/// The name prefix of the short-lived persistent node a contender creates and deletes in one
/// transaction to move a root's counter past a name someone else took (`{STEP_PREFIX}{uuid}`).
///
/// ```
/// assert!(zk_recipes::layout::STEP_PREFIX.starts_with('~'));
/// ```
pub const STEP_PREFIX: &str = "~zk-recipes-step-";

/// A semaphore root's child holding its internal lock's queue (Curator's
/// `InterProcessSemaphoreV2` layout).
///
/// ```
/// assert_eq!(zk_recipes::layout::SEMAPHORE_LOCKS, "locks");
/// ```
pub const SEMAPHORE_LOCKS: &str = "locks";

/// A semaphore root's child holding its leases.
///
/// ```
/// assert_eq!(zk_recipes::layout::SEMAPHORE_LEASES, "leases");
/// ```
pub const SEMAPHORE_LEASES: &str = "leases";

/// The data Curator's `Revoker` writes on a contender's node to ask its holder to let go. The
/// library reports it as a request ([`Grant::is_revoke_requested`](crate::Grant::is_revoke_requested)),
/// never as a loss.
///
/// ```
/// assert_eq!(zk_recipes::layout::REVOKE, b"__REVOKE__");
/// ```
pub const REVOKE: &[u8] = b"__REVOKE__";

/// A semaphore's permit count as its root's data stores it (decimal text), `None` for anything
/// else.
///
/// ```
/// assert_eq!(zk_recipes::layout::semaphore_permits(b"3"), Some(3));
/// assert_eq!(zk_recipes::layout::semaphore_permits(b"x"), None);
/// ```
pub fn semaphore_permits(data: &[u8]) -> Option<u32> {
    std::str::from_utf8(data).ok()?.trim().parse().ok()
}
