//! A group member's handle: a [`Guard`] of a [`ZkGroup`], on a [`ZkKeptNode`] (ephemeral, at
//! `{group}/{id}`) with the group's names for its methods.

use std::future::Future;

use tracing::info;

use super::ZkGroup;
use crate::error::Result;
use crate::grant::LossReason;
use crate::guard::{Guard, Holding};
use crate::kept::{KeptState, ZkKeptNode};

/// This process's membership of a group, from [`ZkGroup::join`]: a [`Guard`] of the group,
/// with the same [`is_held`](Guard::is_held), [`lost`](Guard::lost) and
/// [`release`](Guard::release) as a lock's guard, and the member's own methods. Its node is
/// kept until [`release`](Guard::release) (leaving the group), or until the member is dropped
/// (the node is then deleted in the background).
///
/// Kept means: after a session expiry, the node is made again in the next ZooKeeper session;
/// after someone deletes it, it is made again at once. So [`lost`](Guard::lost) resolves each
/// time the membership lapses (the session expired, the node deleted), and
/// [`is_held`](Guard::is_held) is true again once the node is back. A node of an earlier
/// session of ours still in the way (a session this process gave up after a long
/// disconnection, which may live on at the server until it times out) is deleted first.
/// Another process's member with the same id is never deleted: this member stays out (a WARN
/// event says so) until that node goes.
///
/// ```no_run
/// # async fn demo(group: zk_recipes::ZkGroup) -> Result<(), zk_recipes::Error> {
/// let me = group.join("worker-7", b"10.0.0.7:8080").await?;
/// me.set_payload(b"10.0.0.7:9090").await?;
/// me.release().await?; // leaves the group
/// # Ok(()) }
/// ```
pub type ZkGroupMember = Guard<ZkGroup>;

/// What a group member keeps: its kept node and its id. Not for use outside the library (see
/// [`Recipe`](crate::Recipe)).
#[doc(hidden)]
#[derive(Debug)]
pub struct Membership {
    node: ZkKeptNode,
    id: String,
}

impl crate::guard::Sealed for ZkGroup {}
impl crate::guard::Recipe for ZkGroup {
    type Held = Membership;
}

impl Holding for Membership {
    fn holding_is_held(&self) -> bool {
        matches!(self.node.state(), KeptState::Created(_))
    }

    fn holding_lost(&self) -> impl Future<Output = LossReason> + Send + '_ {
        // The lapses are counted, so that one the keeper mended at once (the node made again
        // in a new session a moment later) is not missed between two looks at the state.
        // The keeper counts a lapse while it holds the state's lock, so the two are read
        // together here under that lock.
        let mut lapses = self.node.lapses();
        let state = self.node.watch_state();
        let (seen, last, out_now) = {
            let state = state.borrow();
            let (seen, last) = *lapses.borrow_and_update();
            (seen, last, !matches!(*state, KeptState::Created(_)))
        };
        async move {
            if out_now {
                return last;
            }
            match lapses.wait_for(|(n, _)| *n > seen).await {
                Ok(lapse) => lapse.1,
                Err(_) => LossReason::SessionClosed,
            }
        }
    }

    async fn holding_release(self) -> Result<()> {
        let left = self.node.close().await;
        info!(id = self.id, "left the group");
        left
    }
}

impl Guard<ZkGroup> {
    pub(crate) fn member(node: ZkKeptNode, id: String) -> Self {
        Guard::new(Membership { node, id })
    }

    /// The member's id.
    ///
    /// ```no_run
    /// # fn demo(me: zk_recipes::ZkGroupMember) {
    /// assert_eq!(me.id(), "worker-7");
    /// # }
    /// ```
    pub fn id(&self) -> &str {
        &self.held().id
    }

    /// The member's node, `{group}/{id}`.
    ///
    /// ```no_run
    /// # fn demo(me: zk_recipes::ZkGroupMember) {
    /// assert_eq!(me.path(), "/services/billing/worker-7");
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        self.held().node.path()
    }

    /// Whether the member's node exists as this session's right now, as far as the keeper
    /// knows (`false` between a session expiry or a deletion and the node being made again):
    /// [`is_held`](Guard::is_held) under the group's name.
    ///
    /// ```no_run
    /// # fn demo(me: zk_recipes::ZkGroupMember) {
    /// if !me.is_registered() { println!("out of the group for now"); }
    /// # }
    /// ```
    pub fn is_registered(&self) -> bool {
        self.is_held()
    }

    /// The kept node under the member: its state to watch, its wait until made.
    ///
    /// ```no_run
    /// # fn demo(me: zk_recipes::ZkGroupMember) {
    /// let mut state = me.node().watch_state();
    /// # }
    /// ```
    pub fn node(&self) -> &ZkKeptNode {
        &self.held().node
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
        self.held().node.set_data(payload).await
    }

    /// Leaves the group: [`release`](Guard::release) under its old name.
    ///
    /// # Errors
    ///
    /// As [`release`](Guard::release).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the member is already stopped; a dropped future leaves the delete to the
    /// background.
    ///
    /// ```no_run
    /// # async fn demo(me: zk_recipes::ZkGroupMember) -> Result<(), zk_recipes::Error> {
    /// me.release().await?; // was `me.leave().await?`
    /// # Ok(()) }
    /// ```
    #[deprecated(note = "use `release`, the one name every guard has")]
    pub async fn leave(self) -> Result<()> {
        self.release().await
    }
}
