//! A group member's handle: a [`ZkKeptNode`] (ephemeral, at `{group}/{id}`) with the group's
//! names for its methods.

use std::fmt;

use tracing::info;

use crate::error::Result;
use crate::kept::{KeptState, ZkKeptNode};

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
    pub(super) node: ZkKeptNode,
    pub(super) id: String,
}

impl fmt::Debug for ZkGroupMember {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZkGroupMember")
            .field("node", &self.node.path())
            .field("registered", &self.is_registered())
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
        self.node.path()
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
        matches!(self.node.state(), KeptState::Created(_))
    }

    /// The kept node under the member: its state to watch, its wait until made.
    ///
    /// ```no_run
    /// # fn demo(me: zk_recipes::ZkGroupMember) {
    /// let mut state = me.node().watch_state();
    /// # }
    /// ```
    pub fn node(&self) -> &ZkKeptNode {
        &self.node
    }

    /// Changes the member's payload: the node's data now, and the payload its node is made
    /// with from now on.
    ///
    /// # Errors
    ///
    /// [`Error::TooLarge`](crate::Error::TooLarge), and as [`ZkGroup::members`](crate::ZkGroup::members). While the node is not ours (after a
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
        self.node.set_data(payload).await
    }

    /// Leaves the group: stops keeping the node and deletes it.
    ///
    /// # Errors
    ///
    /// [`Error::SessionClosed`](crate::Error::SessionClosed), [`Error::ConnectionLost`](crate::Error::ConnectionLost) (the node is then deleted in the
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
    pub async fn leave(self) -> Result<()> {
        let left = self.node.close().await;
        info!(id = self.id, "left the group");
        left
    }
}
