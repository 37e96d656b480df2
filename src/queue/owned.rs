//! A contender node nobody holds yet: it deletes itself in the background when dropped.

use std::sync::Arc;

use tracing::debug;

use crate::session::{Epoch, LeaseInterest, Release, Session};

/// A contender node we created and have not yet handed out: dropping it deletes it in the
/// background (a cancelled or failed acquisition).
pub(crate) struct OwnedNode {
    pub session: Session,
    pub epoch: Arc<Epoch>,
    pub path: String,
    armed: bool,
    /// A queued node keeps its session's lease fed (see `session/lease.rs`).
    _lease: LeaseInterest,
}

impl OwnedNode {
    pub(super) fn new(session: Session, epoch: Arc<Epoch>, path: String) -> OwnedNode {
        OwnedNode {
            _lease: epoch.lease_interest(),
            session,
            epoch,
            path,
            armed: true,
        }
    }

    /// Hands the node on (to a grant, which takes over its deletion).
    pub(super) fn disarm(mut self) -> (Session, Arc<Epoch>, String) {
        self.armed = false;
        (
            self.session.clone(),
            self.epoch.clone(),
            std::mem::take(&mut self.path),
        )
    }
}

impl Drop for OwnedNode {
    fn drop(&mut self) {
        if self.armed {
            debug!(node = %self.path, "abandoned contender node; deleting in the background");
            self.session.clean_up(
                self.epoch.clone(),
                std::mem::take(&mut self.path),
                Release::Plain,
            );
        }
    }
}
