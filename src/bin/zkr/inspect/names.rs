//! Contender node names of the recipes `inspect` recognises, and which protocol each follows.
//!
//! | name | written by | protocol |
//! |---|---|---|
//! | `lock-NNNNNNNNNN` (data `id=..`, `owner=..`) | zk-recipes `ZkMutex`, `ZkLockSpace`, a semaphore's internal lock | mutex |
//! | `_c_{uuid}-lock-NNNNNNNNNN` | Curator `InterProcessMutex`, `LeaderSelector`, a semaphore's lock; zookeeper-client `Client::lock` with Curator's prefix | mutex |
//! | `_c_{uuid}-__READ__N`, `_c_{uuid}-__WRIT__N` | Curator `InterProcessReadWriteLock`, zk-recipes `ZkRwLock` | read/write lock |
//! | `_c_{uuid}-latch-N` | Curator `LeaderLatch`, zk-recipes `LeaderElection` | election |
//! | `_c_{uuid}-lease-N` (in `{root}/leases`) | Curator `InterProcessSemaphoreV2`, zk-recipes `ZkSemaphore` | semaphore |
//! | `{32 hex}__lock__N`, `{32 hex}__rlock__N` | kazoo `Lock`, `WriteLock`, `Election`; `ReadLock` | kazoo lock |
//! | `x-{session}-N` | ZooKeeper's own `WriteLock` recipe (also zookeeper-client custom prefixes) | ZooKeeper lock |
//! | `n-N` | ZooKeeper's `LeaderElectionSupport` (also zookeeper-client shared prefixes) | ZooKeeper election |
//!
//! Contenders of different protocols in one directory do not see each other.

/// Who writes names of this shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Style {
    /// `lock-N`: zk-recipes' mutex family.
    Plain,
    /// `_c_{uuid}-{name}N`: Curator's protected names (and zk-recipes' other recipes).
    Curator,
    /// `{uuid hex}__lock__N`: kazoo.
    Kazoo,
    /// `x-{session}-N`, `n-N`: ZooKeeper's Java recipes.
    ZooKeeper,
}

/// Which contenders order themselves together (and so exclude each other).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    Mutex,
    RwLock,
    Election,
    Lease,
    Kazoo,
    ZkLock,
    ZkElection,
}

/// What a contender asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wants {
    Lock,
    Read,
    Write,
    Leadership,
    Lease,
}

impl Wants {
    pub fn as_str(self) -> &'static str {
        match self {
            Wants::Lock => "lock",
            Wants::Read => "read",
            Wants::Write => "write",
            Wants::Leadership => "leadership",
            Wants::Lease => "lease",
        }
    }

    /// Whether it holds alone (a writer of a read/write lock, and every exclusive recipe).
    pub fn exclusive(self) -> bool {
        !matches!(self, Wants::Read | Wants::Lease)
    }
}

/// A parsed contender name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Name {
    pub style: Style,
    pub family: Family,
    pub wants: Wants,
    /// The sequence ZooKeeper appended (negative once a counter wrapped).
    pub sequence: i64,
}

impl Name {
    /// Whether the sequence is the end of the counter or past it: ZooKeeper 3.8 gives
    /// `i32::MAX` to every child once there, so it orders nothing.
    pub fn is_wrapped(&self) -> bool {
        self.sequence < 0 || self.sequence >= i64::from(i32::MAX)
    }
}

const UUID_LEN: usize = 36;

/// Parses `name`; `None` for names of no recognised recipe.
pub fn parse(name: &str) -> Option<Name> {
    if let Some(rest) = name.strip_prefix("_c_") {
        let uuid = rest.get(..UUID_LEN)?;
        if !uuid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
            return None;
        }
        let rest = rest[UUID_LEN..].strip_prefix('-')?;
        let (family, wants, digits) = [
            ("lock-", Family::Mutex, Wants::Lock),
            ("__READ__", Family::RwLock, Wants::Read),
            ("__WRIT__", Family::RwLock, Wants::Write),
            ("latch-", Family::Election, Wants::Leadership),
            ("lease-", Family::Lease, Wants::Lease),
        ]
        .into_iter()
        .find_map(|(prefix, f, w)| rest.strip_prefix(prefix).map(|d| (f, w, d)))?;
        return named(Style::Curator, family, wants, digits);
    }
    if let Some(digits) = name.strip_prefix("lock-") {
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

fn named(style: Style, family: Family, wants: Wants, digits: &str) -> Option<Name> {
    Some(Name {
        style,
        family,
        wants,
        sequence: parse_sequence(digits)?,
    })
}

/// ZooKeeper's `%010d` of the parent's signed 32-bit counter.
pub fn parse_sequence(digits: &str) -> Option<i64> {
    let unsigned = digits.strip_prefix('-').unwrap_or(digits);
    if digits.len() < 10 || unsigned.len() > 10 || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value: i64 = digits.parse().ok()?;
    (i64::from(i32::MIN)..=i64::from(i32::MAX))
        .contains(&value)
        .then_some(value)
}

/// A kazoo semaphore's lease: a 32-hex-digit name without a sequence.
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
