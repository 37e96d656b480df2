//! The owner record: the data zk-recipes writes in each contender node it creates (but an
//! election candidate's, whose data is the user's), one `key=value` per line:
//!
//! ```text
//! id={uuid}
//! owner={label}
//! ```
//!
//! `id` is the attempt's uuid, by which a lost create reply of a plain-named node is recovered;
//! `owner` a label for people (`{hostname}/{pid}` unless the session was given another with
//! [`SessionOptions::owner`](crate::SessionOptions::owner)).

/// A parsed owner record.
///
/// ```
/// use zk_recipes::layout::owner::OwnerRecord;
/// let record = OwnerRecord::new("0f8fad5b-d9cb-469f-a165-70867728950e", "web-1/4242");
/// let parsed = OwnerRecord::parse(&record.to_bytes()).unwrap();
/// assert_eq!(parsed, record);
/// assert_eq!(parsed.owner, "web-1/4242");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct OwnerRecord {
    /// The attempt's uuid.
    pub id: String,
    /// Its owner's label.
    pub owner: String,
}

impl OwnerRecord {
    /// A record of attempt `id` by `owner`.
    ///
    /// ```
    /// let r = zk_recipes::layout::owner::OwnerRecord::new("id", "me");
    /// assert_eq!(r.to_bytes(), b"id=id\nowner=me\n");
    /// ```
    pub fn new(id: &str, owner: &str) -> OwnerRecord {
        OwnerRecord {
            id: id.to_owned(),
            owner: owner.to_owned(),
        }
    }

    /// The node data.
    ///
    /// ```
    /// let r = zk_recipes::layout::owner::OwnerRecord::new("a", "b");
    /// assert_eq!(r.to_bytes(), b"id=a\nowner=b\n");
    /// ```
    pub fn to_bytes(&self) -> Vec<u8> {
        bytes(&self.id, &self.owner)
    }

    /// Reads a node's data; `None` for data that is no owner record (another client's node).
    ///
    /// ```
    /// use zk_recipes::layout::owner::OwnerRecord;
    /// assert!(OwnerRecord::parse(b"192.168.0.7").is_none());
    /// ```
    pub fn parse(data: &[u8]) -> Option<OwnerRecord> {
        let text = std::str::from_utf8(data).ok()?;
        let mut lines = text.lines();
        let id = lines.next()?.strip_prefix("id=")?;
        let owner = lines.find_map(|l| l.strip_prefix("owner="))?;
        Some(OwnerRecord::new(id, owner.trim()))
    }
}

/// The record's bytes without building one.
pub(crate) fn bytes(id: &str, owner: &str) -> Vec<u8> {
    format!("id={id}\nowner={owner}\n").into_bytes()
}

/// Whether `data` is the owner record of attempt `id`.
pub(crate) fn is_record_of(data: &[u8], id: &str) -> bool {
    data.strip_prefix(b"id=")
        .and_then(|rest| rest.strip_prefix(id.as_bytes()))
        .is_some_and(|rest| rest.starts_with(b"\n"))
}

/// The default owner label: `{hostname}/{pid}`.
///
/// ```
/// assert!(zk_recipes::layout::owner::default_label().contains('/'));
/// ```
pub fn default_label() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned());
    format!("{host}/{}", std::process::id())
}
