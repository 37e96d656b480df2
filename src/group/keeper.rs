//! The task that keeps a member's node: made in each new session and after a deletion,
//! deleted when the member stops.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tracing::{debug, info, warn};
use zookeeper_client as zk;

use crate::error::{Error, Result};
use crate::layout::kind::RecipeKind;
use crate::path::ZkPath;
use crate::session::{Epoch, Session};

use super::member::Claim;
use super::ATTEMPTS;

/// What keeps a member's node.
pub(super) struct Keeper {
    pub(super) session: Session,
    pub(super) group: ZkPath,
    pub(super) node: String,
    pub(super) payload: Mutex<Vec<u8>>,
    /// The ids of the sessions this member's node was made in.
    pub(super) ours: Mutex<Vec<i64>>,
}

impl Keeper {
    pub(super) fn is_ours(&self, owner: i64) -> bool {
        lock(&self.ours).contains(&owner)
    }

    /// Makes the member's node on `epoch` (its parents too), unless it is there as ours.
    pub(super) async fn register(&self, epoch: &Epoch) -> Result<()> {
        let node = self.node.as_str();
        let ephemeral = &zk::CreateMode::Ephemeral.with_acls(self.session.acls());
        {
            let mut ours = lock(&self.ours);
            if !ours.contains(&epoch.id()) {
                ours.push(epoch.id());
            }
        }
        for _ in 0..ATTEMPTS {
            let payload = lock(&self.payload).clone();
            let sent = payload.as_slice();
            let made = epoch
                .retry(node, |c| async move {
                    match c.create(node, sent, ephemeral).await {
                        Ok(_) => Ok(Ok(())),
                        Err(e @ (zk::Error::NodeExists | zk::Error::NoNode)) => Ok(Err(e)),
                        Err(e) => Err(e),
                    }
                })
                .await?;
            match made {
                Ok(()) => {
                    debug!(node, "member node made");
                    // A payload set while the create was on its way: write it now.
                    if *lock(&self.payload) != payload {
                        self.write_payload(epoch).await?;
                    }
                    return Ok(());
                }
                Err(zk::Error::NoNode) => self.make_group(epoch).await?,
                Err(_) => {
                    let Some(stat) = epoch
                        .retry(node, |c| async move { c.check_stat(node).await })
                        .await?
                    else {
                        continue;
                    };
                    let owner = stat.ephemeral_owner;
                    if owner == epoch.id() {
                        // Ours (the claim rules out another member of this session): a create
                        // whose reply was lost.
                        if *lock(&self.payload) != payload
                            || stat.data_length as usize != payload.len()
                        {
                            self.write_payload(epoch).await?;
                        }
                        return Ok(());
                    }
                    if !self.is_ours(owner) {
                        return Err(Error::MemberIdTaken {
                            path: node.to_owned(),
                            session_id: owner,
                        });
                    }
                    debug!(
                        node,
                        owner = format_args!("{owner:#x}"),
                        "deleting our earlier session's node"
                    );
                    self.delete_version(epoch, stat.version).await?;
                }
            }
        }
        Err(Error::unexpected(format!(
            "{node} could not be made in {ATTEMPTS} attempts"
        )))
    }

    /// Writes the kept payload into the node if it is this session's (never into another
    /// session's member); nothing when it is not.
    pub(super) async fn write_payload(&self, epoch: &Epoch) -> Result<()> {
        let node = self.node.as_str();
        for _ in 0..ATTEMPTS {
            let Some(stat) = epoch
                .retry(node, |c| async move { c.check_stat(node).await })
                .await?
            else {
                return Ok(());
            };
            if stat.ephemeral_owner != epoch.id() {
                return Ok(());
            }
            let payload = lock(&self.payload).clone();
            let payload = payload.as_slice();
            let version = Some(stat.version);
            let written = epoch
                .retry(node, |c| async move {
                    match c.set_data(node, payload, version).await {
                        Ok(_) => Ok(true),
                        // Written meanwhile (a resent write of ours, or a later payload).
                        Err(zk::Error::BadVersion) => Ok(false),
                        Err(zk::Error::NoNode) => Ok(true),
                        Err(e) => Err(e),
                    }
                })
                .await?;
            if written {
                return Ok(());
            }
        }
        Err(Error::unexpected(format!(
            "the payload of {node} could not be written in {ATTEMPTS} attempts"
        )))
    }

    /// Deletes the node at `version` (an earlier session's of ours, or ours); gone already is
    /// as good.
    pub(super) async fn delete_version(&self, epoch: &Epoch, version: i32) -> Result<()> {
        crate::ops::delete_where(epoch, self.node.as_str(), version)
            .await
            .map(drop)
    }

    /// Deletes the member's node if it is one of our sessions' (looking again after a broken
    /// connection for as long as the session lives, as every delete of ours does).
    pub(super) async fn delete_if_ours(&self, epoch: &Epoch) -> Result<()> {
        let node = self.node.as_str();
        loop {
            let stat = match epoch.client()?.check_stat(node).await {
                Ok(stat) => stat,
                Err(e) if crate::error::connection_lost(&e) => {
                    epoch.until_reconnected().await;
                    continue;
                }
                Err(e) => return Err(epoch.error(e, node)),
            };
            let Some(stat) = stat.filter(|s| self.is_ours(s.ephemeral_owner)) else {
                return Ok(());
            };
            match epoch.client()?.delete(node, Some(stat.version)).await {
                Ok(()) | Err(zk::Error::NoNode) => {
                    debug!(node, "member node deleted");
                    return Ok(());
                }
                // Changed since we looked (a payload of ours written late): look again.
                Err(zk::Error::BadVersion) => {}
                Err(e) if crate::error::connection_lost(&e) => epoch.until_reconnected().await,
                Err(e) => return Err(epoch.error(e, node)),
            }
        }
    }

    /// The group's directory as a container with the group's mark, its parents persistent.
    pub(super) async fn make_group(&self, epoch: &Epoch) -> Result<()> {
        let mark = &RecipeKind::Group.mark();
        let group = self.group.as_str();
        crate::ops::ensure_node(epoch, &self.session, group, mark, zk::CreateMode::Container).await
    }

    /// Stops keeping: deletes the node if it is ours. A session that is over took the node
    /// with it.
    pub(super) async fn stop(&self, epoch: &Epoch, registered: &watch::Sender<bool>) -> Result<()> {
        let _ = registered.send(false);
        match self.delete_if_ours(epoch).await {
            Err(Error::SessionExpired | Error::SessionClosed) => Ok(()),
            other => other,
        }
    }

    /// Keeps the node until stopped: watches it, and makes it again when it is deleted or its
    /// session ends. Stopped, it deletes the node if it is ours.
    pub(super) async fn keep(
        self: Arc<Self>,
        mut epoch: Arc<Epoch>,
        mut stopped: watch::Receiver<bool>,
        registered: watch::Sender<bool>,
        _claim: Claim,
    ) -> Result<()> {
        let node = self.node.as_str();
        let mut pause = Duration::from_millis(100);
        loop {
            let step = async {
                if epoch.is_lost() {
                    let _ = registered.send(false);
                    match self.session.epoch().await {
                        Ok(next) => epoch = next,
                        Err(Error::SessionClosed) => return Step::Closed,
                        // No new session yet: ask again.
                        Err(_) => return Step::Again,
                    }
                }
                // Watch our node on this session until it goes (or the session does).
                let watched = epoch
                    .retry(node, |c| async move { c.check_and_watch_stat(node).await })
                    .await;
                match watched {
                    Ok((Some(stat), watcher)) if stat.ephemeral_owner == epoch.id() => {
                        let _ = registered.send(true);
                        pause = Duration::from_millis(100);
                        tokio::select! {
                            event = watcher.changed() => debug!(event = ?event.event_type, "member watch fired"),
                            _ = epoch.ended() => {}
                        }
                        return Step::Again;
                    }
                    Ok((Some(stat), watcher)) if !self.is_ours(stat.ephemeral_owner) => {
                        // Another process's member has the id: stay out until its node goes.
                        let _ = registered.send(false);
                        warn!(
                            node,
                            owner = format_args!("{:#x}", stat.ephemeral_owner),
                            "another session's member has this id; waiting for it to leave"
                        );
                        tokio::select! {
                            _ = watcher.changed() => {}
                            _ = epoch.ended() => {}
                        }
                        return Step::Again;
                    }
                    // Missing, or an earlier session's of ours: make it (below).
                    Ok(_) => {}
                    Err(e) if !epoch.is_lost() => {
                        warn!(node, error = %e, "cannot watch the group member's node; trying again");
                        return Step::Pause;
                    }
                    Err(_) => return Step::Again,
                }
                let _ = registered.send(false);
                match self.register(&epoch).await {
                    Ok(()) => {
                        info!(node, "group member registered again");
                        Step::Again
                    }
                    Err(Error::MemberIdTaken { .. }) => Step::Again,
                    Err(e) => {
                        warn!(node, error = %e, "group member not registered; trying again");
                        Step::Pause
                    }
                }
            };
            let step = tokio::select! {
                step = step => step,
                _ = until_stopped(&mut stopped) => Step::Stopped,
            };
            match step {
                Step::Again => {}
                Step::Pause => {
                    tokio::select! {
                        _ = tokio::time::sleep(pause) => {}
                        _ = until_stopped(&mut stopped) => return self.stop(&epoch, &registered).await,
                    }
                    pause = (pause * 2).min(Duration::from_secs(10));
                }
                Step::Stopped => return self.stop(&epoch, &registered).await,
                Step::Closed => return Ok(()),
            }
        }
    }
}

/// What one pass of the keeper's loop ended with.
enum Step {
    /// Look at the node again.
    Again,
    /// Look again after a pause (an error).
    Pause,
    /// Leave: delete the node if it is ours.
    Stopped,
    /// The session was closed: the node went with it.
    Closed,
}

/// Resolves once the member is told to stop (or its handle is gone).
async fn until_stopped(stopped: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns is not `Send`: not kept.
    let _ = stopped.wait_for(|s| *s).await.is_ok();
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
