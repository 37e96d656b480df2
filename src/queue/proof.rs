//! How a waiter proves that the node it watched went in a head release (see the module docs
//! of `queue`): by the node's own events where the server names their transaction (3.9), else
//! by one read of the root's data.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};

use tracing::debug;
use zookeeper_client as zk;

use super::wait::Gone;
use super::Queue;
use crate::error::Result;
use crate::path::Contender;
use crate::session::Epoch;

impl Queue {
    /// How `watched`, now gone, went: a head release writes the name of the node it deletes
    /// into the root's data in the same transaction, so with `proof` one read of the root
    /// tells. A head release it is where the data names the node and was written after our
    /// node (`ours`: its czxid) was made (the watched node went after that: we listed it), and,
    /// where the server says which transaction deleted it (3.9: `zxid`), by that very
    /// transaction. Anything else counts as a plain deletion (or a head release since
    /// overwritten by a later one), which only costs a listing.
    pub(super) async fn how_gone(
        &self,
        epoch: &Epoch,
        watched: &Contender,
        ours: i64,
        proof: bool,
        zxid: Option<i64>,
    ) -> Result<Gone> {
        if !proof {
            return Ok(Gone::Plainly);
        }
        let root = self.root.as_str();
        let read = crate::ops::read(epoch, root).await?;
        let head = read.is_some_and(|(data, stat)| {
            data == watched.name.as_bytes()
                && stat.mzxid > ours
                && zxid.is_none_or(|z| z == stat.mzxid)
        });
        debug!(head, "read how the watched node went");
        Ok(if head { Gone::AsHead } else { Gone::Plainly })
    }
}

/// Whether this session's server names each event's transaction (ZooKeeper 3.9 does; 3.8
/// sends no zxid): assumed until a deletion a waiter sees says otherwise, and kept in the
/// session's slots. So on 3.8 only a session's first proof sets a data watch that proves
/// nothing (one request), and none after.
#[derive(Default)]
pub(super) struct EventZxids {
    /// Set once a deletion came without a zxid (cleared again by one with a zxid, as a
    /// session may move to another server).
    unnamed: AtomicBool,
}

impl EventZxids {
    pub fn named(&self) -> bool {
        !self.unnamed.load(Ordering::Relaxed)
    }

    pub fn saw(&self, named: bool) {
        self.unnamed.store(!named, Ordering::Relaxed);
    }
}

/// The data watch on the node a waiter watches, while it may still prove a head release.
#[derive(Default)]
pub(super) struct Changed {
    /// Set and not fired yet.
    armed: Option<EventFuture>,
    /// The zxid of the change it saw, when it fired on one, and the session's suspension
    /// count when it was set (after a reconnect the server fires re-registered watches with
    /// zxids of its own choosing, which prove nothing).
    seen: Option<i64>,
    armed_at: u64,
}

type EventFuture = Pin<Box<dyn Future<Output = zk::WatchedEvent> + Send>>;

impl Changed {
    pub fn arm(&mut self, watcher: zk::OneshotWatcher, suspensions: u64) {
        self.armed = Some(Box::pin(watcher.changed()));
        self.armed_at = suspensions;
    }

    /// Resolves when the watch fires (pends when it is not set); notes a data change's zxid.
    pub async fn next(&mut self) {
        let Some(armed) = self.armed.as_mut() else {
            return std::future::pending().await;
        };
        let event = armed.await;
        self.armed = None;
        if event.event_type == zk::EventType::NodeDataChanged
            && event.zxid != zk::WatchedEvent::NO_ZXID
        {
            self.seen = Some(event.zxid);
        }
    }

    /// Whether the change it saw came from the transaction `zxid`, with no reconnect since the
    /// watch was set. (Its event came first: ZooKeeper sends a transaction's events in order,
    /// the node's write before its delete, and the wait polls this watch before the deletion's.)
    pub fn by(&mut self, zxid: Option<i64>, suspensions: u64) -> bool {
        if let Some(armed) = self.armed.as_mut() {
            // Fired with the deletion's event but not polled yet: look without waiting.
            if let Some(event) = now_or_never(armed) {
                self.armed = None;
                if event.event_type == zk::EventType::NodeDataChanged {
                    self.seen = (event.zxid != zk::WatchedEvent::NO_ZXID).then_some(event.zxid);
                }
            }
        }
        self.armed_at == suspensions && self.seen.is_some() && self.seen == zxid
    }

    /// A data watch still set on a deleted node fires on the deletion (already sent): dropped
    /// unfired, zookeeper-client would ask the server to remove it. Nothing to wait for once the
    /// deletion was seen, as the server sends the node's events together.
    pub fn settle(&mut self) {
        if let Some(armed) = self.armed.take() {
            tokio::spawn(armed);
        }
    }
}

/// The output of `future` if it is ready now.
fn now_or_never<F: Future + Unpin>(future: &mut F) -> Option<F::Output> {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    match Pin::new(future).poll(&mut cx) {
        std::task::Poll::Ready(out) => Some(out),
        std::task::Poll::Pending => None,
    }
}
