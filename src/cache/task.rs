//! The cache's task: one persistent recursive watch per ZooKeeper session, a full read after
//! it is set (the first view; again after a reconnection, since events during one can be lost,
//! ZOOKEEPER-4698; again in each new session), and each node event answered by a fresh read
//! of that node. Every read is compared with the cache (`tree::diff`, `tree::apply`): what
//! differs is published, once.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::{debug, warn};
use zookeeper_client as zk;

use super::{read, tree, Shared};
use crate::error::{Error, Result};
use crate::session::Epoch;

/// What one event from the watch asks for.
enum Next {
    /// Read these paths again (gathered in `dirty`).
    Read,
    /// The connection broke: events may be lost until it is back.
    Disconnected,
    /// Connected again: read everything.
    Reconnected,
    /// The ZooKeeper session is over; the watch delivers nothing more.
    Over,
}

/// Follows the tree until stopped (told, or the handle dropped) or the session closes.
pub(super) async fn follow(shared: Arc<Shared>, mut stopped: watch::Receiver<bool>) {
    let mut pause = Duration::from_millis(100);
    loop {
        let round = tokio::select! {
            biased;
            _ = until_stopped(&mut stopped) => break,
            round = one_session(&shared) => round,
        };
        match round {
            Ok(()) => pause = Duration::from_millis(100),
            Err(Error::SessionClosed) => break,
            Err(e) if !shared.is_initialized() && !retried(&e) => {
                debug!(error = %e, "tree cache not started");
                shared.fail(e);
                return;
            }
            Err(e) => {
                warn!(path = %shared.root, error = %e, "tree cache cannot follow the tree; trying again");
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = until_stopped(&mut stopped) => break,
                }
                pause = (pause * 2).min(Duration::from_secs(10));
            }
        }
    }
    shared.stop();
}

/// The errors the cache waits out: a server out of reach, a session ending.
fn retried(e: &Error) -> bool {
    e.is_retryable()
}

/// One ZooKeeper session: the watch, the full read, then the events, until the session ends.
async fn one_session(shared: &Shared) -> Result<()> {
    let epoch = shared.session.epoch().await?;
    let root = shared.root.as_str();
    let mut watcher = epoch
        .retry(root, |c| async move {
            c.watch(root, zk::AddWatchMode::PersistentRecursive).await
        })
        .await
        .map_err(|e| match e {
            Error::Zk(zk::Error::Unimplemented) => Error::Unsupported {
                path: root.to_owned(),
                reason: "a tree cache needs persistent recursive watches (ZooKeeper 3.6+)",
            },
            e => e,
        })?;
    // Set before the read: whatever changes after the read saw a node is an event.
    resync(shared, &epoch).await?;
    let mut dirty = BTreeSet::new();
    let mut connected = true;
    let mut lost_events = false;
    loop {
        let event = tokio::select! {
            _ = epoch.ended() => return Ok(()),
            event = watcher.changed() => event,
        };
        let mut next = vec![take(event, &mut dirty)];
        // Whatever else is there already, in the same round.
        while !next.iter().any(|n| matches!(n, Next::Over)) {
            tokio::select! {
                biased;
                event = watcher.changed() => next.push(take(event, &mut dirty)),
                _ = std::future::ready(()) => break,
            }
        }
        for n in next {
            match n {
                Next::Read => {}
                Next::Disconnected => (connected, lost_events) = (false, true),
                // Connected again after a break, seen or not: read everything.
                Next::Reconnected => (connected, lost_events) = (true, true),
                // No `changed()` after a terminal event (it would panic).
                Next::Over => return Ok(()),
            }
        }
        if !connected {
            continue;
        }
        if lost_events {
            debug!("reconnected: reading the tree again");
            resync(shared, &epoch).await?;
            (lost_events, dirty) = (false, BTreeSet::new());
        } else if !dirty.is_empty() {
            let paths: Vec<String> = std::mem::take(&mut dirty).into_iter().collect();
            refresh(shared, &epoch, &paths).await?;
        }
    }
}

/// Files a watch event: a node's path into `dirty`, or what the session did.
fn take(event: zk::WatchedEvent, dirty: &mut BTreeSet<String>) -> Next {
    match event.event_type {
        zk::EventType::Session => match event.session_state {
            zk::SessionState::Disconnected => Next::Disconnected,
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                Next::Reconnected
            }
            _ => Next::Over,
        },
        zk::EventType::NodeChildrenChanged => Next::Read,
        _ => {
            dirty.insert(event.path);
            Next::Read
        }
    }
}

/// Reads the whole tree and publishes its differences from the cache; the first time, then
/// `Initialized`.
async fn resync(shared: &Shared, epoch: &Epoch) -> Result<()> {
    // The read is handed over before `Initialized`: nothing of it is left over.
    shared.replace(read::tree(shared, epoch).await?);
    shared.initialize();
    Ok(())
}

/// Reads `paths` again and publishes each one's difference from the cache, in path order.
async fn refresh(shared: &Shared, epoch: &Epoch, paths: &[String]) -> Result<()> {
    let paths: Vec<String> = paths.iter().filter(|p| shared.admits(p)).cloned().collect();
    let reads = read::nodes(shared, epoch, &paths).await?;
    for (path, node) in paths.iter().zip(reads) {
        shared.publish(|cached| tree::apply(cached, path, node));
    }
    Ok(())
}

/// Resolves once the cache is to stop (or its handle is gone).
async fn until_stopped(stopped: &mut watch::Receiver<bool>) {
    let _ = stopped.wait_for(|s| *s).await.is_ok();
}
