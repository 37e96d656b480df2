//! A group member's handle, and the session's claims: one member per node on a session.

use std::fmt;
use std::sync::Arc;

use tokio::sync::watch;
use tracing::{debug, info};

use crate::error::{Error, Result};
use crate::session::Session;

use super::keeper::{lock, Keeper};

/// This process's membership of a group, from [`ZkGroup::join`](crate::ZkGroup::join): its node is kept until
/// [`leave`](ZkGroupMember::leave), or until the member is dropped (the node is then deleted in
/// the background).
///
/// Kept means: after a session expiry, the node is made again in the next ZooKeeper session;
/// after someone deletes it, it is made again at once. A node of an earlier session of ours
/// still in the way (a session this process gave up after a long disconnection, which may
/// live on at the server until it times out) is deleted first. Another process's member with the same id is never deleted: this member
/// stays out (a WARN event says so) until that node goes.
///
/// ```no_run
/// # async fn demo(group: zk_recipes::ZkGroup) -> Result<(), zk_recipes::Error> {
/// let me = group.join("worker-7", b"10.0.0.7:8080").await?;
/// me.set_payload(b"10.0.0.7:9090").await?;
/// me.leave().await?;
/// # Ok(()) }
/// ```
pub struct ZkGroupMember {
    pub(super) keeper: Arc<Keeper>,
    pub(super) id: String,
    pub(super) stop: watch::Sender<bool>,
    pub(super) registered: watch::Receiver<bool>,
    pub(super) task: Option<tokio::task::JoinHandle<Result<()>>>,
}

impl fmt::Debug for ZkGroupMember {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkGroupMember")
            .field("node", &self.keeper.node)
            .field("registered", &*self.registered.borrow())
            .finish()
    }
}

impl ZkGroupMember {
    /// The member's id.
    ///
    /// ```no_run
    /// # fn demo(me: zk_recipes::ZkGroupMember) {
    /// assert_eq!(me.id(), "worker-7");
    /// # }
    /// ```
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The member's node, `{group}/{id}`.
    ///
    /// ```no_run
    /// # fn demo(me: zk_recipes::ZkGroupMember) {
    /// assert_eq!(me.path(), "/services/billing/worker-7");
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        &self.keeper.node
    }

    /// Whether the member's node exists as this session's right now, as far as the keeper
    /// knows (`false` between a session expiry or a deletion and the node being made again).
    ///
    /// ```no_run
    /// # fn demo(me: zk_recipes::ZkGroupMember) {
    /// if !me.is_registered() { println!("out of the group for now"); }
    /// # }
    /// ```
    pub fn is_registered(&self) -> bool {
        *self.registered.borrow()
    }

    /// Changes the member's payload: the node's data now, and the payload its node is made
    /// with from now on.
    ///
    /// # Errors
    ///
    /// [`Error::TooLarge`], and as [`ZkGroup::members`](crate::ZkGroup::members). While the node is not ours (after a
    /// session expiry, before the keeper made it again, or while another session's member
    /// holds the id) only the kept payload changes, and the node is made with it.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe in effect: a write already sent may still land after the future is
    /// dropped; the kept payload is the new one either way.
    ///
    /// ```no_run
    /// # async fn demo(me: zk_recipes::ZkGroupMember) -> Result<(), zk_recipes::Error> {
    /// me.set_payload(b"draining").await?;
    /// # Ok(()) }
    /// ```
    pub async fn set_payload(&self, payload: &[u8]) -> Result<()> {
        let node = self.keeper.node.as_str();
        self.keeper
            .session
            .check_size("a group member's node", node.len() + payload.len())?;
        *lock(&self.keeper.payload) = payload.to_vec();
        let epoch = self.keeper.session.epoch().await?;
        self.keeper.write_payload(&epoch).await?;
        debug!(node, "member payload set");
        Ok(())
    }

    /// Leaves the group: stops keeping the node and deletes it.
    ///
    /// # Errors
    ///
    /// [`Error::SessionClosed`], [`Error::ConnectionLost`] (the node is then deleted in the
    /// background, or goes with the session).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the member is already stopped; a dropped future leaves the delete to the
    /// background.
    ///
    /// ```no_run
    /// # async fn demo(me: zk_recipes::ZkGroupMember) -> Result<(), zk_recipes::Error> {
    /// me.leave().await?;
    /// # Ok(()) }
    /// ```
    pub async fn leave(mut self) -> Result<()> {
        let _ = self.stop.send(true);
        let left = match self.task.take() {
            Some(task) => task
                .await
                .unwrap_or_else(|e| Err(Error::unexpected(format!("the keeper failed: {e}")))),
            None => Ok(()),
        };
        info!(id = self.id, "left the group");
        left
    }
}

impl Drop for ZkGroupMember {
    fn drop(&mut self) {
        // The keeper deletes the node (if it is ours) as it stops, in the background.
        let _ = self.stop.send(true);
    }
}

/// The group members' nodes kept on one session (in its slots): one member per node.
#[derive(Default)]
struct Claims(std::sync::Mutex<std::collections::HashSet<String>>);

impl Claims {
    fn members(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A group member's node claimed on its session: one member per node (given up on drop).
pub(super) struct Claim {
    claims: std::sync::Arc<Claims>,
    node: String,
}

impl Claim {
    pub(super) fn new(session: &Session, node: &str) -> Result<Claim> {
        let claims = session.slot::<Claims>();
        if !claims.members().insert(node.to_owned()) {
            return Err(Error::MemberIdTaken {
                path: node.to_owned(),
                session_id: session.session_id().unwrap_or(0),
            });
        }
        Ok(Claim {
            claims,
            node: node.to_owned(),
        })
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.claims.members().remove(&self.node);
    }
}
