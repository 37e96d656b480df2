//! The kept nodes' paths claimed on one session (in its slots): one kept node per path, since
//! two would each take the other's node, made in the same session, for their own.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::session::Session;

/// The paths kept on one session.
#[derive(Default)]
struct Claims(Mutex<HashSet<String>>);

impl Claims {
    fn paths(&self) -> MutexGuard<'_, HashSet<String>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A path claimed on its session (given up on drop).
pub(crate) struct Claim {
    claims: Arc<Claims>,
    path: String,
}

impl Claim {
    /// Claims `path` on `session`: [`Error::MemberIdTaken`] when another kept node of the
    /// session has it.
    pub(crate) fn new(session: &Session, path: &str) -> Result<Claim> {
        let claims = session.slot::<Claims>();
        if !claims.paths().insert(path.to_owned()) {
            return Err(Error::MemberIdTaken {
                path: path.to_owned(),
                session_id: session.session_id().unwrap_or(0),
            });
        }
        Ok(Claim {
            claims,
            path: path.to_owned(),
        })
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.claims.paths().remove(&self.path);
    }
}
