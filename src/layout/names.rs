//! Contender node names: what each recipe (ours and its peers') calls its nodes, and their
//! parsing.
//!
//! | name | written by | [`Family`] |
//! |---|---|---|
//! | `lock-N` (data: an [owner record](super::owner)) | zk-recipes `ZkMutex`, a semaphore's internal lock | `Mutex` |
//! | `_c_{uuid}-lock-N` | Curator `InterProcessMutex`, `LeaderSelector`; zk-recipes `ZkLockSpace`; zookeeper-client `Client::lock` with Curator's prefix | `Mutex` |
//! | `_c_{uuid}-__READ__N`, `_c_{uuid}-__WRIT__N` | Curator `InterProcessReadWriteLock`, zk-recipes `ZkRwLock` | `RwLock` |
//! | `_c_{uuid}-latch-N` | Curator `LeaderLatch`, zk-recipes `ZkLeaderElection` | `Election` |
//! | `_c_{uuid}-lease-N` (in `{root}/leases`) | Curator `InterProcessSemaphoreV2`, zk-recipes `ZkSemaphore` | `Lease` |
//! | `{32 hex}__lock__N`, `{32 hex}__rlock__N` | kazoo `Lock`, `WriteLock`, `Election`; `ReadLock` | `Kazoo` |
//! | `x-{session}-N` | ZooKeeper's own `WriteLock` recipe | `ZkLock` |
//! | `n-N` | ZooKeeper's `LeaderElectionSupport` | `ZkElection` |
//!
//! Contenders of different families in one directory do not see each other.

/// The prefix of Curator's protected names: `_c_{uuid}-{name}N`.
///
/// ```
/// assert_eq!(zk_recipes::layout::names::PROTECTED_PREFIX, "_c_");
/// ```
pub const PROTECTED_PREFIX: &str = "_c_";

/// The mutex family's name (`ZkMutex`, `ZkLockSpace`, Curator's `InterProcessMutex`).
///
/// ```
/// assert_eq!(zk_recipes::layout::names::LOCK, "lock-");
/// ```
pub const LOCK: &str = "lock-";
/// A read/write lock's reader.
///
/// ```
/// assert_eq!(zk_recipes::layout::names::READ, "__READ__");
/// ```
pub const READ: &str = "__READ__";
/// A read/write lock's writer.
///
/// ```
/// assert_eq!(zk_recipes::layout::names::WRITE, "__WRIT__");
/// ```
pub const WRITE: &str = "__WRIT__";
/// A leader election's candidate (Curator's `LeaderLatch`).
///
/// ```
/// assert_eq!(zk_recipes::layout::names::LATCH, "latch-");
/// ```
pub const LATCH: &str = "latch-";
/// A semaphore's lease.
///
/// ```
/// assert_eq!(zk_recipes::layout::names::LEASE, "lease-");
/// ```
pub const LEASE: &str = "lease-";

/// The length of the uuid in a protected name.
pub(crate) const UUID_LEN: usize = 36;

/// Who writes names of this shape.
///
/// ```
/// use zk_recipes::layout::names::{parse, Style};
/// assert_eq!(parse("lock-0000000001").unwrap().style, Style::Plain);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Style {
    /// `lock-N`: zk-recipes' mutex.
    Plain,
    /// `_c_{uuid}-{name}N`: Curator's protected names (and zk-recipes' other recipes).
    Curator,
    /// `{uuid hex}__lock__N`: kazoo.
    Kazoo,
    /// `x-{session}-N`, `n-N`: ZooKeeper's Java recipes.
    ZooKeeper,
}

/// Which contenders order themselves together (and so exclude each other).
///
/// ```
/// use zk_recipes::layout::names::{parse, Family};
/// let a = parse("lock-0000000001").unwrap();
/// let b = parse("_c_0f8fad5b-d9cb-469f-a165-70867728950e-lock-0000000002").unwrap();
/// assert_eq!((a.family, b.family), (Family::Mutex, Family::Mutex));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// `lock-`, plain or protected.
    Mutex,
    /// `__READ__` and `__WRIT__`.
    RwLock,
    /// `latch-`.
    Election,
    /// `lease-`.
    Lease,
    /// kazoo's `__lock__` and `__rlock__`.
    Kazoo,
    /// ZooKeeper's `WriteLock` (`x-{session}-N`).
    ZkLock,
    /// ZooKeeper's `LeaderElectionSupport` (`n-N`).
    ZkElection,
}

/// What a contender asks for.
///
/// ```
/// use zk_recipes::layout::names::Wants;
/// assert!(Wants::Write.is_exclusive());
/// assert!(!Wants::Read.is_exclusive());
/// assert_eq!(Wants::Leadership.as_str(), "leadership");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Wants {
    /// An exclusive lock.
    Lock,
    /// A read/write lock's shared side.
    Read,
    /// A read/write lock's exclusive side.
    Write,
    /// Leadership.
    Leadership,
    /// A semaphore's lease (shared, up to the permits).
    Lease,
}

impl Wants {
    /// A lower-case word for people and JSON.
    ///
    /// ```
    /// assert_eq!(zk_recipes::layout::names::Wants::Lock.as_str(), "lock");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Wants::Lock => "lock",
            Wants::Read => "read",
            Wants::Write => "write",
            Wants::Leadership => "leadership",
            Wants::Lease => "lease",
        }
    }

    /// Whether it holds alone (a writer, and every exclusive recipe's contender).
    ///
    /// ```
    /// assert!(zk_recipes::layout::names::Wants::Lock.is_exclusive());
    /// ```
    pub fn is_exclusive(self) -> bool {
        !matches!(self, Wants::Read | Wants::Lease)
    }

    /// What a zk-recipes or Curator node named `{name}N` asks for (`"lock-"`, `"__READ__"`, ...).
    pub(crate) fn of_name(name: &str) -> Option<Wants> {
        match name {
            LOCK => Some(Wants::Lock),
            READ => Some(Wants::Read),
            WRITE => Some(Wants::Write),
            LATCH => Some(Wants::Leadership),
            LEASE => Some(Wants::Lease),
            _ => None,
        }
    }
}

/// A parsed contender name.
///
/// ```
/// use zk_recipes::layout::names::{parse, Wants};
/// let name = parse("_c_0f8fad5b-d9cb-469f-a165-70867728950e-__WRIT__0000000007").unwrap();
/// assert_eq!((name.wants, name.sequence), (Wants::Write, 7));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeName {
    /// Who writes names of this shape.
    pub style: Style,
    /// Which queue it joins.
    pub family: Family,
    /// What it asks for.
    pub wants: Wants,
    /// The sequence ZooKeeper appended (negative once a counter wrapped).
    pub sequence: i64,
}

impl NodeName {
    /// Whether the sequence is the end of the counter or past it: ZooKeeper 3.8 gives
    /// `i32::MAX` to every child once there, so it orders nothing (zk-recipes refuses such a
    /// node with `SequenceWrapped`).
    ///
    /// ```
    /// let name = zk_recipes::layout::names::parse("lock-2147483647").unwrap();
    /// assert!(name.is_wrapped());
    /// ```
    pub fn is_wrapped(&self) -> bool {
        self.sequence < 0 || self.sequence >= i64::from(i32::MAX)
    }
}

/// Parses a child's name; `None` for names of no recognised recipe (the [anchor](super::ANCHOR),
/// a user's own node).
///
/// ```
/// use zk_recipes::layout::names::{parse, Family};
/// assert_eq!(parse("n-0000000003").unwrap().family, Family::ZkElection);
/// assert!(parse("config").is_none());
/// ```
pub fn parse(name: &str) -> Option<NodeName> {
    if let Some(rest) = strip_protected(name) {
        let (family, wants, digits) = [
            (LOCK, Family::Mutex),
            (READ, Family::RwLock),
            (WRITE, Family::RwLock),
            (LATCH, Family::Election),
            (LEASE, Family::Lease),
        ]
        .into_iter()
        .find_map(|(prefix, f)| {
            let digits = rest.strip_prefix(prefix)?;
            Some((f, Wants::of_name(prefix)?, digits))
        })?;
        return named(Style::Curator, family, wants, digits);
    }
    if name.starts_with(PROTECTED_PREFIX) {
        return None;
    }
    if let Some(digits) = name.strip_prefix(LOCK) {
        return named(Style::Plain, Family::Mutex, Wants::Lock, digits);
    }
    if let Some(digits) = name.strip_prefix("n-") {
        return named(
            Style::ZooKeeper,
            Family::ZkElection,
            Wants::Leadership,
            digits,
        );
    }
    if let Some(rest) = name.strip_prefix("x-") {
        let (session, digits) = rest.split_once('-')?;
        if session.is_empty() || !session.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        return named(Style::ZooKeeper, Family::ZkLock, Wants::Lock, digits);
    }
    let hex = name.get(..32)?;
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let rest = &name[32..];
    if let Some(digits) = rest.strip_prefix("__lock__") {
        return named(Style::Kazoo, Family::Kazoo, Wants::Write, digits);
    }
    if let Some(digits) = rest.strip_prefix("__rlock__") {
        return named(Style::Kazoo, Family::Kazoo, Wants::Read, digits);
    }
    None
}

/// The rest of a protected name after `_c_{uuid}-`; `None` for other names.
pub(crate) fn strip_protected(name: &str) -> Option<&str> {
    let rest = name.strip_prefix(PROTECTED_PREFIX)?;
    let uuid = rest.get(..UUID_LEN)?;
    if !uuid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
        return None;
    }
    rest[UUID_LEN..].strip_prefix('-')
}

fn named(style: Style, family: Family, wants: Wants, digits: &str) -> Option<NodeName> {
    Some(NodeName {
        style,
        family,
        wants,
        sequence: parse_sequence(digits)?,
    })
}

/// ZooKeeper's `%010d` of the parent's signed 32-bit counter: ten digits, or a minus sign and
/// up to ten digits once it wraps; `None` for anything else.
///
/// ```
/// use zk_recipes::layout::names::parse_sequence;
/// assert_eq!(parse_sequence("0000000042"), Some(42));
/// assert_eq!(parse_sequence("-2147483648"), Some(-2147483648));
/// assert_eq!(parse_sequence("42"), None);
/// ```
pub fn parse_sequence(digits: &str) -> Option<i64> {
    let unsigned = digits.strip_prefix('-').unwrap_or(digits);
    if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if digits.len() < 10 || unsigned.len() > 10 {
        return None;
    }
    let value: i64 = digits.parse().ok()?;
    (i64::from(i32::MIN)..=i64::from(i32::MAX))
        .contains(&value)
        .then_some(value)
}

/// A kazoo semaphore's lease: a 32-hex-digit name without a sequence.
///
/// ```
/// assert!(zk_recipes::layout::names::is_kazoo_lease("0123456789abcdef0123456789abcdef"));
/// ```
pub fn is_kazoo_lease(name: &str) -> bool {
    name.len() == 32 && name.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    const UUID: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";

    fn parsed(name: &str) -> (Style, Family, Wants, i64) {
        let n = parse(name).unwrap_or_else(|| panic!("{name} not recognised"));
        (n.style, n.family, n.wants, n.sequence)
    }

    #[test]
    fn recognises_every_recipes_names() {
        use Family::*;
        assert_eq!(
            parsed("lock-0000000042"),
            (Style::Plain, Mutex, Wants::Lock, 42)
        );
        assert_eq!(
            parsed(&format!("_c_{UUID}-lock-0000000007")),
            (Style::Curator, Mutex, Wants::Lock, 7)
        );
        assert_eq!(
            parsed(&format!("_c_{UUID}-__READ__0000000001")),
            (Style::Curator, RwLock, Wants::Read, 1)
        );
        assert_eq!(
            parsed(&format!("_c_{UUID}-__WRIT__0000000002")),
            (Style::Curator, RwLock, Wants::Write, 2)
        );
        assert_eq!(
            parsed(&format!("_c_{UUID}-latch-0000000003")),
            (Style::Curator, Election, Wants::Leadership, 3)
        );
        assert_eq!(
            parsed(&format!("_c_{UUID}-lease-0000000004")),
            (Style::Curator, Lease, Wants::Lease, 4)
        );
        let kazoo = "6d1f0b7ab2c44a4fa0b1c2d3e4f5a6b7";
        assert_eq!(
            parsed(&format!("{kazoo}__lock__0000000005")),
            (Style::Kazoo, Kazoo, Wants::Write, 5)
        );
        assert_eq!(
            parsed(&format!("{kazoo}__rlock__0000000006")),
            (Style::Kazoo, Kazoo, Wants::Read, 6)
        );
        assert_eq!(
            parsed("x-72057594037927936-0000000008"),
            (Style::ZooKeeper, ZkLock, Wants::Lock, 8)
        );
        assert_eq!(
            parsed("n-0000000009"),
            (Style::ZooKeeper, ZkElection, Wants::Leadership, 9)
        );
        assert!(is_kazoo_lease(kazoo));
        assert!(!is_kazoo_lease("lock-0000000001"));
    }

    #[test]
    fn ignores_everything_else() {
        for name in [
            "~zk-recipes-anchor",
            "locks",
            "leases",
            "lock-",
            "lock-12",
            "lock-000000000x",
            "_c_short-lock-0000000001",
            &format!("_c_{UUID}-other-0000000001"),
            "x--0000000001",
            "x-abc-0000000001",
            "6d1f0b7ab2c44a4fa0b1c2d3e4f5a6b7__other__0000000001",
            "order-42",
        ] {
            assert_eq!(parse(name), None, "{name}");
        }
    }

    #[test]
    fn wrapped_counters() {
        assert!(parse("lock-2147483647").unwrap().is_wrapped());
        assert!(parse("lock--2147483648").unwrap().is_wrapped());
        assert!(!parse("lock-2147483646").unwrap().is_wrapped());
        assert_eq!(parse_sequence("2147483648"), None);
    }
}
