//! The one watch on a contender node of ours: set when the node starts to wait (or when it is
//! granted at once), handed from the waiter to its grant, and followed until the grant goes.
//!
//! A waiter polls it before it acts on the node it watches, so a deletion of our node that
//! happened first (ZooKeeper delivers a session's events in the order of its transactions) is
//! seen first: no grant is returned for a node that is gone. The grant's task keeps following
//! it, so [`Grant::is_held`](super::Grant::is_held) turns false once the node is seen deleted or
//! changed, without anyone calling `lost()`.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use tokio::sync::watch;
use tracing::{debug, info};
use zookeeper_client as zk;

use super::{LossReason, OnChange};
use crate::error::{Error, Result};
use crate::ops::OrMissing;
use crate::session::Epoch;

/// What Curator's `Revoker.attemptRevoke` writes into a lock node: a request to the holder to
/// release, not a release.
use crate::layout::REVOKE;

type EventFuture = Pin<Box<dyn Future<Output = zk::WatchedEvent> + Send>>;

/// The watch on one node of ours.
pub(crate) struct NodeWatch {
    path: String,
    czxid: i64,
    /// The watcher, once set, until it fires.
    armed: Option<EventFuture>,
    /// Whether it was ever set: from then on, a watch not set (it fired and was not set again,
    /// because the caller dropped the future on the way) is set again with a read before
    /// anything is concluded from it.
    ever: bool,
    /// The session's suspension count when it was set: after a reconnect, the server fires
    /// the watches it re-registers in an order of its own, so the watch is read again.
    armed_at: u64,
    /// The node's data version as last read (0 until someone else writes to it).
    version: i32,
    /// Whether its data was last seen as a revocation request.
    revoke: bool,
}

/// What a watch that fired saw.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Seen {
    /// Nothing yet.
    Nothing,
    /// The node (this one: same czxid) is gone.
    Gone,
    /// Someone else changed its data; the watch is set again.
    Changed,
    /// The session ended.
    Ended,
}

impl NodeWatch {
    pub fn new(path: &str, czxid: i64) -> NodeWatch {
        NodeWatch {
            path: path.to_owned(),
            czxid,
            armed: None,
            ever: false,
            armed_at: 0,
            version: 0,
            revoke: false,
        }
    }

    /// The node's czxid.
    pub fn czxid(&self) -> i64 {
        self.czxid
    }

    /// Sets the watch unless it is set (one read): `false` when the node is gone (or another
    /// node stands at its path).
    pub async fn arm(&mut self, epoch: &Epoch) -> Result<bool> {
        if self.armed.is_some() {
            return Ok(true);
        }
        self.ever = true;
        self.armed_at = epoch.suspensions();
        let path = self.path.as_str();
        let read = epoch
            .retry(path, |c| async move {
                c.get_and_watch_data(path).await.or_missing()
            })
            .await?;
        match read {
            Some((data, stat, watcher)) if stat.czxid == self.czxid => {
                self.version = stat.version;
                self.revoke = data == REVOKE;
                self.armed = Some(Box::pin(watcher.changed()));
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Waits for the watch to fire (pends while it was never set), and sets it again after a
    /// change.
    ///
    /// Cancel safe: dropped after the watch fired, the next call (or [`now`](Self::now)) reads
    /// the node again.
    pub async fn next(&mut self, epoch: &Epoch) -> Result<Seen> {
        if self.armed.is_none() && self.ever {
            match self.again(epoch).await? {
                Seen::Nothing => {}
                seen => return Ok(seen),
            }
        }
        let Some(armed) = self.armed.as_mut() else {
            return std::future::pending().await;
        };
        let event = armed.await;
        self.armed = None;
        self.seen(epoch, event).await
    }

    /// What the watch has seen so far, without waiting for it (a read where it cannot tell:
    /// it fired and was not set again, or the session reconnected since it was set).
    pub async fn now(&mut self, epoch: &Epoch) -> Result<Seen> {
        if self.armed.is_some() && self.armed_at != epoch.suspensions() {
            self.armed = None;
        }
        let event = match self.armed.as_mut() {
            None if self.ever => return self.again(epoch).await,
            None => return Ok(Seen::Nothing),
            Some(armed) => tokio::select! {
                biased;
                event = armed => event,
                _ = std::future::ready(()) => return Ok(Seen::Nothing),
            },
        };
        self.armed = None;
        self.seen(epoch, event).await
    }

    /// Sets the watch again with a read: gone, changed (its version moved) or nothing.
    async fn again(&mut self, epoch: &Epoch) -> Result<Seen> {
        let version = self.version;
        Ok(match self.arm(epoch).await? {
            false => Seen::Gone,
            true if self.version != version => Seen::Changed,
            true => Seen::Nothing,
        })
    }

    async fn seen(&mut self, epoch: &Epoch, event: zk::WatchedEvent) -> Result<Seen> {
        match event.event_type {
            zk::EventType::NodeDeleted => Ok(Seen::Gone),
            zk::EventType::Session => Ok(Seen::Ended),
            _ => match self.arm(epoch).await? {
                true => Ok(Seen::Changed),
                false => Ok(Seen::Gone),
            },
        }
    }

    pub fn revoke_requested(&self) -> bool {
        self.revoke
    }

    pub fn version(&self) -> i32 {
        self.version
    }

    /// Waits, sending nothing, for a set watch to fire before it is dropped: the release's
    /// delete fires it (so does the session's end). Dropped unfired, zookeeper-client would
    /// send a `RemoveWatches` that the server, having fired it on the delete, answers with
    /// `NoWatcher`: a request a cycle for nothing.
    async fn settle(&mut self) {
        if let Some(armed) = self.armed.take() {
            let _ = armed.await;
        }
    }
}

/// What a grant's task publishes about its node.
pub(crate) struct Fate {
    /// `Some(reason)` once the node is seen gone or changed.
    pub loss: watch::Receiver<Option<LossReason>>,
    /// Whether a revocation request was seen.
    pub revoke: watch::Receiver<bool>,
    /// The data version the node must be at for a fenced write (-1: any, where the data is
    /// the user's).
    pub version: Arc<AtomicI32>,
    /// Set (by [`Fate::stop`]) or dropped (with the grant) to end the task.
    stop: watch::Sender<bool>,
}

impl Fate {
    /// Ends the task before the grant's own release, so that the release's event costs it
    /// nothing (no read after its node's deletion): it stops reading and waits for its watch
    /// to fire on the release's delete.
    pub fn stop(&mut self) {
        self.stop.send_replace(true);
    }
}

/// Starts the task that follows a grant's node from `watch` (set or not); it ends when the
/// grant drops the returned [`Fate`].
pub(crate) fn follow(epoch: Arc<Epoch>, mut watch: NodeWatch, on_change: OnChange) -> Fate {
    let (loss_tx, loss) = watch::channel(None);
    let (revoke_tx, revoke) = watch::channel(watch.revoke_requested());
    let version = Arc::new(AtomicI32::new(match on_change {
        OnChange::Ignore => -1,
        OnChange::Lost => watch.version(),
    }));
    let (stop, mut stopped) = watch::channel(false);
    let fate = Fate {
        loss,
        revoke,
        version: version.clone(),
        stop,
    };
    tokio::spawn(async move {
        tokio::select! {
            biased;
            _ = loss_tx.closed() => {}
            reason = taken(&epoch, &mut watch, on_change, &revoke_tx, &version, &mut stopped) => {
                if let Some(reason) = reason {
                    let _ = loss_tx.send(Some(reason));
                }
            }
        }
        // Stopped between two reads, the watch is set: its own node's delete (the release's,
        // or the janitor's after a dropped grant) or the session's end fires it.
        watch.settle().await;
    });
    fate
}

/// Resolves when the node is observed deleted (or changed, where that ends the grant), or with
/// `None` once `stopped` is set or its sender dropped; pends forever once the session is over
/// (the caller races it against the session's own signal).
///
/// A read that sets the watch is never cut short by the stop (the stop is looked at once it
/// is answered): dropped half way, its watcher would be dropped unfired, and zookeeper-client
/// would send a `RemoveWatches` for it.
async fn taken(
    epoch: &Epoch,
    watch: &mut NodeWatch,
    on_change: OnChange,
    revoke: &watch::Sender<bool>,
    version: &AtomicI32,
    stopped: &mut watch::Receiver<bool>,
) -> Option<LossReason> {
    // Set, or its sender dropped with the grant.
    let stop =
        |stopped: &watch::Receiver<bool>| *stopped.borrow() || stopped.has_changed().is_err();
    loop {
        let armed = watch.arm(epoch).await;
        if stop(stopped) {
            return None;
        }
        let seen = match armed {
            Ok(false) => Seen::Gone,
            Ok(true) => {
                publish(watch, revoke, version, on_change);
                if on_change == OnChange::Lost && watch.version() != 0 && !watch.revoke_requested()
                {
                    return Some(LossReason::NodeChanged);
                }
                let next = tokio::select! {
                    biased;
                    _ = stopped.wait_for(|s| *s) => return None,
                    next = watch.next(epoch) => next,
                };
                match next {
                    Ok(seen) => seen,
                    Err(err) => match after_error(epoch, err, stopped).await? {
                        // Read again once the connection is back.
                        LossReason::Suspended => continue,
                        reason => return Some(reason),
                    },
                }
            }
            Err(err) => match after_error(epoch, err, stopped).await? {
                // Set the watch again once the connection is back.
                LossReason::Suspended => continue,
                reason => return Some(reason),
            },
        };
        match seen {
            Seen::Gone => return Some(deleted_or_ended(epoch, &watch.path).await),
            Seen::Ended => return std::future::pending().await,
            Seen::Nothing | Seen::Changed => continue,
        }
    }
}

/// Publishes what the node's data says now.
fn publish(
    watch: &NodeWatch,
    revoke: &watch::Sender<bool>,
    version: &AtomicI32,
    on_change: OnChange,
) {
    if watch.revoke_requested() && !*revoke.borrow() {
        info!(node = %watch.path, "revocation requested (Curator's Revoker): release when done");
    }
    revoke.send_if_modified(|r| std::mem::replace(r, watch.revoke_requested()) != *r);
    if on_change == OnChange::Lost && (watch.revoke_requested() || watch.version() == 0) {
        version.store(watch.version(), Ordering::Release);
    }
}

/// After a failed read: a run of broken connections on a session that lives on is waited out
/// (`Suspended` here means "try again"; `None`: stopped meanwhile); anything else pends (the
/// session's end is the caller's other signal).
async fn after_error(
    epoch: &Epoch,
    err: Error,
    stopped: &mut watch::Receiver<bool>,
) -> Option<LossReason> {
    if let Error::ConnectionLost = err {
        tokio::select! {
            biased;
            _ = stopped.wait_for(|s| *s) => return None,
            _ = epoch.until_reconnected() => {}
        }
        if !epoch.is_lost() {
            return Some(LossReason::Suspended);
        }
    }
    debug!(%err, "the grant's watch ends with its session");
    std::future::pending().await
}

/// Our node deleted: by someone else, unless the session's end did it (the server deletes an
/// expired session's ephemeral nodes and may tell this connection so before it says the
/// session is over, as 3.9 did in a release storm). One request tells: on a live session it
/// is answered; on an ended one it fails, and this pends so that the caller reports the
/// session's end.
async fn deleted_or_ended(epoch: &Epoch, path: &str) -> LossReason {
    match epoch
        .retry(path, |c| async move { c.check_stat(path).await })
        .await
    {
        Ok(_) => LossReason::NodeDeleted,
        Err(_) => std::future::pending().await,
    }
}
