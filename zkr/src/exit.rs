//! Exit codes, and the one error type of the binary: a message for stderr and its code.

use std::fmt;

/// Usage errors: bad arguments (clap's own code), a malformed path or key, no ensemble.
pub const USAGE: i32 = 2;
/// `inspect`/`watch`: PATH does not exist.
pub const NO_NODE: i32 = 66;
/// No ZooKeeper server answered within `--connect-timeout`, or the connection broke for good.
pub const UNREACHABLE: i32 = 69;
/// Any other ZooKeeper error (no permission, an unsuitable root, a used-up counter, ...), and
/// a `repair` refused (PATH is no anchored key of a lock space).
pub const ZOOKEEPER: i32 = 70;
/// `--try`: the lock is busy (or someone else leads); `repair`: someone holds or waits at PATH.
pub const BUSY: i32 = 75;
/// `--timeout` elapsed before the lock was granted.
pub const TIMEOUT: i32 = 124;
/// The lock or the leadership was lost while CMD ran; CMD was stopped.
pub const LOST: i32 = 125;
/// CMD exists but cannot be run (not executable).
pub const NOT_EXECUTABLE: i32 = 126;
/// CMD was not found.
pub const NOT_FOUND: i32 = 127;
/// 128 + N: CMD was killed by signal N, or `zkr` was interrupted by signal N before CMD ran.
pub const SIGNAL_BASE: i32 = 128;

/// The table printed by `zkr --help` (and kept in zkr/README.md).
pub const TABLE: &str = "\
Exit codes:
  0-255  lock, elect: CMD's own exit code (CMD ran holding the lock, or leading)
  128+N  CMD was killed by signal N (130 = SIGINT, 143 = SIGTERM), or zkr got signal N
         while waiting, before CMD started
  2      usage: bad arguments, no CMD, a malformed path or key, no ensemble given, an
         unreadable or invalid TLS file
  66     inspect, watch, repair: PATH does not exist
  69     ZooKeeper unreachable: no session within --connect-timeout, or the TLS handshake
         failed (an untrusted server, a refused client certificate)
  70     another ZooKeeper error (no permission, authentication refused, an unsuitable root,
         a used-up counter); repair refused: PATH is no anchored key of a lock space
  75     --try: the lock is busy, or someone else leads; repair: someone holds or waits at
         PATH
  124    --timeout elapsed before the lock was granted
  125    the lock (or leadership) was lost while CMD ran: CMD's process group got SIGTERM,
         then SIGKILL after --grace
  126    CMD is not executable
  127    CMD not found";

/// Why `zkr` stops: what to print on stderr (nothing when empty) and the exit code. With
/// `--json` it is printed as one object: `{"event": ..., "code": ..., "message": ...}` and the
/// fields of `detail`.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub message: String,
    /// The JSON object's `event`: `error` unless said (`busy`, `timeout`, `interrupted`,
    /// `stopped`, `refused`, ...).
    pub event: &'static str,
    /// More fields for the JSON object.
    pub detail: serde_json::Map<String, serde_json::Value>,
}

impl Failure {
    pub fn new(code: i32, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
            event: "error",
            detail: serde_json::Map::new(),
        }
    }

    /// The same, under another `event` name in JSON.
    pub fn event(mut self, event: &'static str) -> Failure {
        self.event = event;
        self
    }

    /// The same, with one more JSON field.
    pub fn with(mut self, key: &str, value: impl Into<serde_json::Value>) -> Failure {
        self.detail.insert(key.to_owned(), value.into());
        self
    }

    /// The JSON object printed for it with `--json`.
    pub fn json(&self) -> serde_json::Value {
        let mut object = serde_json::Map::new();
        object.insert("event".into(), self.event.into());
        object.insert("code".into(), self.code.into());
        object.insert("message".into(), self.message.clone().into());
        for (k, v) in &self.detail {
            object.insert(k.clone(), v.clone());
        }
        serde_json::Value::Object(object)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The exit code for a library error.
pub fn code_of(err: &zk_recipes::Error) -> i32 {
    use zk_recipes::Error as E;
    match err {
        E::InvalidPath { .. }
        | E::InvalidKey { .. }
        | E::InvalidConnectString { .. }
        | E::InvalidPermits { .. }
        | E::InvalidTls { .. }
        | E::TooLarge { .. } => USAGE,
        E::Unreachable { .. }
        | E::ConnectionLost
        | E::SessionExpired
        | E::SessionClosed
        | E::TlsUntrustedServer { .. }
        | E::TlsClientCertRefused { .. }
        | E::TlsHandshake { .. } => UNREACHABLE,
        _ => ZOOKEEPER,
    }
}

impl From<zk_recipes::Error> for Failure {
    fn from(err: zk_recipes::Error) -> Failure {
        Failure::new(code_of(&err), err.to_string())
    }
}

pub type Result<T, E = Failure> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_print_as_one_json_object() {
        let busy = Failure::new(BUSY, "/l is busy")
            .event("busy")
            .with("path", "/l");
        assert_eq!(
            busy.json(),
            serde_json::json!({"event": "busy", "code": 75, "message": "/l is busy", "path": "/l"})
        );
        assert_eq!(Failure::new(USAGE, "x").json()["event"], "error");
    }

    #[test]
    fn library_errors_map_to_documented_codes() {
        let path = zk_recipes::layout::check_path("relative").unwrap_err();
        assert_eq!(code_of(&path), USAGE);
        let unreachable = zk_recipes::Error::Unreachable {
            connect: "x".into(),
            timeout: std::time::Duration::from_secs(1),
        };
        assert_eq!(code_of(&unreachable), UNREACHABLE);
        assert_eq!(
            code_of(&zk_recipes::Error::NoAuth { path: "/a".into() }),
            ZOOKEEPER
        );
        for code in [
            USAGE,
            NO_NODE,
            UNREACHABLE,
            ZOOKEEPER,
            BUSY,
            TIMEOUT,
            LOST,
            NOT_EXECUTABLE,
            NOT_FOUND,
        ] {
            assert!(
                TABLE.contains(&format!("  {code:<3}")),
                "{code} missing from the table"
            );
        }
    }
}
