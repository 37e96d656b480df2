//! Paths and contender node names: validation, the protected `_c_{uuid}-` and plain forms,
//! owner records, sequence parsing and queue order. Pure logic (reading the host name aside).

use std::cmp::Ordering;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use crate::error::{Error, Result};
use crate::layout::names::{parse_sequence, strip_protected, PROTECTED_PREFIX};

/// A validated absolute ZooKeeper path usable as a recipe root: what
/// [`layout::check_path`](crate::layout::check_path) accepts, kept as checked. Refused: empty
/// or relative paths, `/` itself, trailing or doubled slashes, `.` and `..` components,
/// characters ZooKeeper forbids (NUL, other control characters, non-characters) and
/// ZooKeeper's reserved `/zookeeper` subtree.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ZkPath(String);

impl ZkPath {
    /// Validates `path`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPath`] with the reason.
    pub fn new(path: impl Into<String>) -> Result<ZkPath> {
        let path = path.into();
        match invalid_reason(&path) {
            None => Ok(ZkPath(path)),
            Some(reason) => Err(Error::InvalidPath { path, reason }),
        }
    }

    /// The path as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The parent's path (`/` for a top-level node).
    pub(crate) fn parent(&self) -> &str {
        match self.0.rfind('/') {
            Some(0) | None => "/",
            Some(i) => &self.0[..i],
        }
    }

    /// `self/child`.
    pub(crate) fn child(&self, name: &str) -> String {
        format!("{}/{}", self.0, name)
    }
}

impl fmt::Display for ZkPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for ZkPath {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

fn invalid_reason(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        return Some("empty");
    }
    if !path.starts_with('/') {
        return Some("not absolute (must start with '/')");
    }
    if path == "/" {
        return Some("the root node cannot be a recipe root");
    }
    if path.ends_with('/') {
        return Some("trailing slash");
    }
    if path.contains("//") {
        return Some("empty component (doubled slash)");
    }
    if path.chars().any(forbidden_char) {
        return Some("contains a character ZooKeeper forbids (NUL, control or non-character)");
    }
    if path[1..].split('/').any(|c| c == "." || c == "..") {
        return Some("relative component '.' or '..'");
    }
    if path == "/zookeeper" || path.starts_with("/zookeeper/") {
        return Some("/zookeeper is reserved by ZooKeeper");
    }
    None
}

/// The characters ZooKeeper's `PathUtils.validatePath` refuses.
fn forbidden_char(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{f000}'..='\u{f8ff}' | '\u{fff0}'..='\u{ffff}')
}

/// A fresh random id in the textual UUID form (version 4 layout), as Curator puts in protected
/// names. Unique enough to find our own node among the children; it is no secret.
pub(crate) fn new_uuid() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, AtomicOrdering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let word = |salt: u64| {
        // RandomState carries per-process random keys.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(salt);
        h.write_u64(n);
        h.write_u128(nanos);
        h.write_u32(std::process::id());
        h.finish()
    };
    let bits = (u128::from(word(1)) << 64) | u128::from(word(2));
    // Set the version (4) and variant (10xx) bits.
    let bits = (bits & !(0xf << 76) | (0x4 << 76)) & !(0x3 << 62) | (0x2 << 62);
    let hex = format!("{bits:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The name prefix this library creates: `_c_{uuid}-{lock_name}`; ZooKeeper appends the
/// ten-digit sequence.
pub(crate) fn protected_prefix(uuid: &str, lock_name: &str) -> String {
    format!("{PROTECTED_PREFIX}{uuid}-{lock_name}")
}

/// How a recipe names its contender nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Naming {
    /// Curator's protected form, `_c_{uuid}-{name}NNNNNNNNNN`: a node whose create reply was
    /// lost is found again by the uuid in its name. For the recipes whose Curator peers create
    /// such names (read/write lock, election, semaphore leases).
    Protected,
    /// `{name}NNNNNNNNNN`, the uuid in the node's data (the [owner record](crate::layout::owner)): a contender's
    /// predecessor has a name that can be computed from its sequence. For the mutex family
    /// (`lock-`), which Curator orders by the suffix after `lock-` whatever comes before.
    Plain,
}

impl Naming {
    /// The name to create (ZooKeeper appends the sequence).
    pub fn prefix(self, uuid: &str, lock_name: &str) -> String {
        match self {
            Naming::Protected => protected_prefix(uuid, lock_name),
            Naming::Plain => lock_name.to_owned(),
        }
    }
}

/// One child of a recipe root that matches a recipe's name pattern:
/// `[_c_{uuid}-]{lock_name}{sequence}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Contender {
    /// The child's name (not the full path).
    pub name: String,
    /// Which of the recipe's lock names it carries (e.g. `__READ__` or `__WRIT__`).
    pub kind: &'static str,
    /// The sequence ZooKeeper appended; negative once the parent's counter has wrapped.
    pub sequence: i64,
}

impl Contender {
    /// Parses `name` against the recipe's lock names; `None` for children that do not match,
    /// which recipes ignore.
    pub fn parse(name: &str, lock_names: &[&'static str]) -> Option<Contender> {
        let rest = match name.starts_with(PROTECTED_PREFIX) {
            true => strip_protected(name)?,
            false => name,
        };
        let (kind, digits) = lock_names
            .iter()
            .find_map(|&lock| rest.strip_prefix(lock).map(|d| (lock, d)))?;
        Some(Contender {
            name: name.to_owned(),
            kind,
            sequence: parse_sequence(digits)?,
        })
    }

    /// Whether this node was created with our protected id.
    pub fn has_uuid(&self, uuid: &str) -> bool {
        self.name
            .strip_prefix(PROTECTED_PREFIX)
            .and_then(|rest| rest.strip_prefix(uuid))
            .is_some_and(|rest| rest.starts_with('-'))
    }

    /// Whether the root's counter was used up when this node was made: at `i32::MAX`, which
    /// ZooKeeper (3.8, tested) then gives to every later child as well, so the number no longer
    /// orders nodes or makes a unique token; or past it (negative), where a counter wraps.
    pub fn is_wrapped(&self) -> bool {
        self.sequence < 0 || self.sequence >= i64::from(i32::MAX)
    }
}

impl crate::layout::rules::Contends for Contender {
    fn wants(&self) -> crate::layout::names::Wants {
        // Every recipe's names are the layout's (`Rule::names`).
        crate::layout::names::Wants::of_name(self.kind).unwrap_or(crate::layout::names::Wants::Lock)
    }
}

/// Queue order: by sequence, then by name (sequences are unique under one parent, the name
/// only makes the order total). Wrapped (negative) sequences sort first, as numbers do; the
/// queue never lets a wrapped node hold (see `queue.rs`).
pub(crate) fn queue_order(a: &Contender, b: &Contender) -> Ordering {
    a.sequence
        .cmp(&b.sequence)
        .then_with(|| a.name.cmp(&b.name))
}

/// Parses and orders `children`, keeping those that match `lock_names`.
pub(crate) fn sorted_contenders(
    children: &[String],
    lock_names: &[&'static str],
) -> Vec<Contender> {
    let mut out: Vec<Contender> = children
        .iter()
        .filter_map(|c| Contender::parse(c, lock_names))
        .collect();
    out.sort_by(queue_order);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::names::UUID_LEN;
    use crate::layout::owner::{
        bytes as owner_record, default_label as default_owner, is_record_of,
    };

    const UUID: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";

    #[test]
    fn accepts_ordinary_paths() {
        for p in [
            "/a",
            "/locks/orders-42",
            "/a/b/c",
            "/zookeeperish",
            "/x/zookeeper",
            "/ü/日本",
        ] {
            assert_eq!(ZkPath::new(p).unwrap().as_str(), p);
        }
    }

    #[test]
    fn refuses_malformed_paths() {
        for p in [
            "",
            "relative",
            "/",
            "/a/",
            "/a//b",
            "//a",
            "/a\0b",
            "/a\u{1}",
            "/a/./b",
            "/a/..",
            "/zookeeper",
            "/zookeeper/quota",
            "/a\u{fff5}",
        ] {
            let err = ZkPath::new(p).unwrap_err();
            assert!(
                matches!(err, Error::InvalidPath { ref path, .. } if path == p),
                "{p:?}: {err}"
            );
        }
    }

    #[test]
    fn uuids_are_well_formed_and_distinct() {
        let a = new_uuid();
        let b = new_uuid();
        assert_ne!(a, b);
        assert_eq!(a.len(), UUID_LEN);
        assert_eq!(a.as_bytes()[14], b'4');
        let dashes: Vec<usize> = a.match_indices('-').map(|(i, _)| i).collect();
        assert_eq!(dashes, [8, 13, 18, 23]);
        let name = format!("{}0000000007", protected_prefix(&a, "lock-"));
        let c = Contender::parse(&name, &["lock-"]).unwrap();
        assert!(c.has_uuid(&a));
        assert!(!c.has_uuid(&b));
    }

    #[test]
    fn owner_records_name_their_attempt() {
        let record = owner_record(UUID, "web-1/4242");
        assert_eq!(
            String::from_utf8(record.clone()).unwrap(),
            format!("id={UUID}\nowner=web-1/4242\n")
        );
        assert!(is_record_of(&record, UUID));
        assert!(!is_record_of(&record, "0f8fad5b"));
        assert!(!is_record_of(b"", UUID));
        assert_eq!(Naming::Plain.prefix(UUID, "lock-"), "lock-");
        assert_eq!(
            Naming::Protected.prefix(UUID, "lock-"),
            format!("_c_{UUID}-lock-")
        );
        assert!(default_owner().contains('/'));
    }

    #[test]
    fn parses_protected_and_plain_names() {
        let c = Contender::parse(&format!("_c_{UUID}-lock-0000000042"), &["lock-"]).unwrap();
        assert_eq!((c.kind, c.sequence), ("lock-", 42));
        assert!(c.has_uuid(UUID));
        let plain = Contender::parse("lock-0000000003", &["lock-"]).unwrap();
        assert_eq!(plain.sequence, 3);
        assert!(!plain.has_uuid(UUID));
        let w = Contender::parse(
            &format!("_c_{UUID}-__WRIT__0000000009"),
            &["__READ__", "__WRIT__"],
        )
        .unwrap();
        assert_eq!((w.kind, w.sequence), ("__WRIT__", 9));
    }

    #[test]
    fn ignores_names_that_do_not_match() {
        for name in [
            "lock-",
            "lock-12",
            "lock-00000000001",
            "lock-000000000x",
            "latch-0000000001",
            "_c_short-lock-0000000001",
            &format!("_c_{UUID}lock-0000000001"),
            &format!("_c_{UUID}-lease-0000000001"),
            "leader",
        ] {
            assert_eq!(Contender::parse(name, &["lock-"]), None, "{name}");
        }
    }

    #[test]
    fn wrapped_sequences_parse_as_negative() {
        let c = Contender::parse("lock--2147483648", &["lock-"]).unwrap();
        assert_eq!(c.sequence, i64::from(i32::MIN));
        assert!(c.is_wrapped());
        let last = Contender::parse("lock-2147483647", &["lock-"]).unwrap();
        assert!(last.is_wrapped(), "i32::MAX repeats once reached");
        let before = Contender::parse("lock-2147483646", &["lock-"]).unwrap();
        assert!(!before.is_wrapped());
        assert_eq!(parse_sequence("2147483647"), Some(i64::from(i32::MAX)));
        assert_eq!(parse_sequence("-0000000001"), Some(-1));
        assert_eq!(parse_sequence("2147483648"), None);
        assert_eq!(parse_sequence("-2147483649"), None);
        assert_eq!(parse_sequence("+000000001"), None);
    }

    #[test]
    fn orders_numerically_not_lexically() {
        let names: Vec<String> = vec![
            format!("_c_{UUID}-lock-0000000010"),
            "lock-0000000002".into(),
            "junk".into(),
            format!(
                "_c_{}-lock-0000000009",
                "ffffffff-ffff-4fff-bfff-ffffffffffff"
            ),
            "lock--2147483647".into(),
        ];
        let seqs: Vec<i64> = sorted_contenders(&names, &["lock-"])
            .iter()
            .map(|c| c.sequence)
            .collect();
        assert_eq!(seqs, [-2147483647, 2, 9, 10]);
    }
}
