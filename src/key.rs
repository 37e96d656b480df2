//! Lock keys to znode names and back: pure logic, no I/O.
//!
//! A key (an order id, a UUID, an e-mail address) becomes one path component. Characters
//! ZooKeeper accepts in a name stay as they are, so ordinary keys read the same in ZooKeeper
//! (and a Curator worker locks `{space}/{key}` with the key itself); the rest are
//! percent-encoded as UTF-8 bytes: `%` and `/`, the characters ZooKeeper forbids (control
//! characters, non-characters), and the names `.` and `..`, which ZooKeeper refuses as
//! components. The encoding is reversible: [`decode`] gives the key back.

use crate::error::{Error, Result};

/// The longest encoded key accepted, in bytes. ZooKeeper has no limit of its own on a name
/// short of its packet limit (`jute.maxbuffer`); this keeps every request far below it.
pub(crate) const MAX_KEY_BYTES: usize = 1024;

/// The prefix of the names the library keeps for itself (`~zk-recipes-anchor`); a key that
/// starts so has its `~` encoded.
const RESERVED: &str = "~zk-recipes-";

/// The znode name for `key`.
pub(crate) fn encode(key: &str) -> Result<String> {
    let invalid = |reason| Error::InvalidKey {
        key: key.to_owned(),
        reason,
    };
    if key.is_empty() {
        return Err(invalid("empty"));
    }
    let mut name = String::with_capacity(key.len());
    if key == "." || key == ".." {
        // ZooKeeper refuses these as path components.
        for _ in 0..key.len() {
            name.push_str("%2E");
        }
        return Ok(name);
    }
    for c in key.chars() {
        if c == '%' || c == '/' || forbidden(c) {
            let mut bytes = [0; 4];
            for b in c.encode_utf8(&mut bytes).bytes() {
                name.push_str(&format!("%{b:02X}"));
            }
        } else {
            name.push(c);
        }
    }
    // The library's own names in a space (its anchor) start so: a key never reads as one.
    if name.starts_with(RESERVED) {
        name.replace_range(..1, "%7E");
    }
    if name.len() > MAX_KEY_BYTES {
        return Err(invalid("longer than 1024 bytes once encoded"));
    }
    Ok(name)
}

/// The key a znode name stands for; `None` for a name [`encode`] cannot have made.
pub(crate) fn decode(name: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(name.len());
    let mut rest = name.as_bytes();
    while let Some((&b, tail)) = rest.split_first() {
        if b == b'%' {
            let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = &tail[2..];
        } else {
            bytes.push(b);
            rest = tail;
        }
    }
    let key = String::from_utf8(bytes).ok()?;
    // Only the canonical form: decoding then encoding gives the name back.
    (encode(&key).ok()? == name).then_some(key)
}

/// The characters ZooKeeper's `PathUtils.validatePath` refuses in a path.
fn forbidden(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{f000}'..='\u{f8ff}' | '\u{fff0}'..='\u{ffff}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_keys_stay_as_they_are() {
        for key in [
            "order-42",
            "0f8fad5b-d9cb-469f-a165-70867728950e",
            "ana@example.com",
            "lock:product:17",
            "Zürich",
            "...",
            ".hidden",
            "~tilde",
        ] {
            assert_eq!(encode(key).unwrap(), key);
            assert_eq!(decode(key).as_deref(), Some(key));
        }
    }

    #[test]
    fn the_rest_is_percent_encoded_and_comes_back() {
        let cases = [
            ("a/b", "a%2Fb"),
            ("100%", "100%25"),
            (".", "%2E"),
            ("..", "%2E%2E"),
            ("nul\0here", "nul%00here"),
            ("tab\there", "tab%09here"),
            ("\u{f000}", "%EF%80%80"),
            ("/", "%2F"),
            ("~zk-recipes-anchor", "%7Ezk-recipes-anchor"),
        ];
        for (key, name) in cases {
            assert_eq!(encode(key).unwrap(), name, "{key:?}");
            assert_eq!(decode(name).as_deref(), Some(key), "{name:?}");
        }
    }

    #[test]
    fn bad_keys_get_a_typed_error() {
        assert!(matches!(encode(""), Err(Error::InvalidKey { .. })));
        let long = "k".repeat(MAX_KEY_BYTES + 1);
        assert!(matches!(encode(&long), Err(Error::InvalidKey { .. })));
        assert!(encode(&"k".repeat(MAX_KEY_BYTES)).is_ok());
        // Encoding can push a key over the limit.
        assert!(encode(&"/".repeat(MAX_KEY_BYTES / 3 + 1)).is_err());
    }

    #[test]
    fn names_encode_cannot_make_decode_to_none() {
        for name in [
            "%",
            "%2",
            "%zz",
            "%2f",
            "a%2",
            "%C3",
            "a/b",
            crate::layout::ANCHOR,
        ] {
            assert_eq!(decode(name), None, "{name:?}");
        }
    }

    #[test]
    fn every_encoded_name_is_a_valid_component() {
        for key in ["a/b", "..", "x\u{1}y", "%", "\u{7f}"] {
            let name = encode(key).unwrap();
            assert!(
                crate::path::ZkPath::new(format!("/space/{name}")).is_ok(),
                "{name:?}"
            );
        }
    }
}
