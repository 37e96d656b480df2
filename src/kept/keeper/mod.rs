//! The task that keeps a node: it looks at the node (a watch on it), makes it when it is not
//! there as ours, deletes an earlier session's node of ours in the way, stays out while a
//! namesake is there, and deletes the node when stopped. The one implementation behind
//! [`ZkKeptNode`](super::ZkKeptNode) and the group's members. `look.rs` tells whose a node at
//! the path is; `make.rs` makes it.

mod look;
mod make;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;
use tracing::{debug, info, warn};
use zookeeper_client as zk;

use super::{Claim, KeptMode, KeptState, Options};
use crate::error::{connection_lost, Error, Result};
use crate::grant::LossReason;
use crate::layout::names::PROTECTED_PREFIX;
use crate::path::ZkPath;
use crate::session::{Epoch, Session};
use look::{Look, Owner};

/// How often one creation is tried before its error is returned (a parent reaped between
/// its create and ours, an old node of ours deleted, a lost reply).
const ATTEMPTS: u32 = 8;

/// What the handle and the keeper share.
pub(crate) struct Shared {
    pub session: Session,
    pub path: ZkPath,
    pub mode: KeptMode,
    pub what: &'static str,
    parent_data: Vec<u8>,
    patient: bool,
    /// The protected mode's name without its sequence, `_c_{uuid}-{name}`.
    protected: String,
    data: Mutex<Vec<u8>>,
    /// Bumped by every `set_data`: a create that sent older data writes the new data after.
    generation: AtomicU64,
    ours: Mutex<Ours>,
    failed: Mutex<Option<Error>>,
    created_once: AtomicBool,
    state: watch::Sender<KeptState>,
    /// The node's lapses: how many times it stopped being ours (the state left `Created`),
    /// and why the last time. A count, not the state, so that a lapse the keeper mended at
    /// once (a new session's node made a moment later) is still seen by whoever waits.
    lapses: watch::Sender<(u64, LossReason)>,
}

/// What tells our nodes from others'.
#[derive(Default)]
struct Ours {
    /// The sessions an ephemeral node of ours was made in.
    sessions: Vec<i64>,
    /// The creation zxids of the persistent nodes we made.
    czxids: Vec<i64>,
    /// A persistent create whose outcome is not known yet: the parent's last child change
    /// read before sending it, and the data sent.
    pending: Option<(i64, Vec<u8>)>,
    /// The protected node's path, once known.
    current: Option<String>,
}

/// What one pass of the keeper's loop ended with.
enum Step {
    Again,
    Failed(Error),
    Stopped,
    Closed,
}

impl Shared {
    pub(super) fn new(
        session: Session,
        path: ZkPath,
        mode: KeptMode,
        data: &[u8],
        options: Options,
        state: watch::Sender<KeptState>,
    ) -> Shared {
        let name = path.as_str().rsplit('/').next().unwrap_or_default();
        let protected = format!("{PROTECTED_PREFIX}{}-{name}", crate::path::new_uuid());
        Shared {
            session,
            path,
            mode,
            what: options.what,
            parent_data: options.parent_data,
            patient: options.patient,
            protected,
            data: Mutex::new(data.to_vec()),
            generation: AtomicU64::new(0),
            ours: Mutex::new(Ours::default()),
            failed: Mutex::new(None),
            created_once: AtomicBool::new(false),
            state,
            lapses: watch::Sender::new((0, LossReason::NodeDeleted)),
        }
    }

    pub(super) fn data(&self) -> Vec<u8> {
        lock(&self.data).clone()
    }

    pub(super) fn set_kept_data(&self, data: &[u8]) {
        *lock(&self.data) = data.to_vec();
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    pub(super) fn failure(&self) -> Option<Error> {
        lock(&self.failed).clone()
    }

    /// The node's lapses so far and why the last one happened: the session's end, a deletion
    /// (someone else's, or a namesake in its place), or the keeper stopped.
    pub(super) fn lapses(&self) -> watch::Receiver<(u64, LossReason)> {
        self.lapses.subscribe()
    }

    /// The node is not there as ours, for this reason (a lapse if it was).
    fn set_missing(&self, why: LossReason) {
        self.set_state_because(KeptState::Missing, why);
    }

    fn set_state(&self, state: KeptState) {
        self.set_state_because(state, LossReason::SessionClosed);
    }

    /// Sets the state; one that leaves `Created` counts a lapse, for `why`.
    fn set_state_because(&self, state: KeptState, why: LossReason) {
        if matches!(state, KeptState::Created(_)) {
            self.created_once.store(true, Ordering::SeqCst);
        }
        self.state.send_if_modified(|s| {
            let changed = *s != state && *s != KeptState::Stopped;
            if changed {
                if matches!(s, KeptState::Created(_)) && !matches!(state, KeptState::Created(_)) {
                    // Counted under the state's lock: a reader that takes the state's lock
                    // and then the count sees the two agree.
                    self.lapses.send_modify(|(n, reason)| {
                        *n += 1;
                        *reason = why;
                    });
                }
                *s = state;
            }
            changed
        });
    }

    fn parent(&self) -> &str {
        self.path.parent()
    }

    fn in_parent(&self, name: &str) -> String {
        match self.parent() {
            "/" => format!("/{name}"),
            parent => format!("{parent}/{name}"),
        }
    }

    /// Writes the kept data into the node if it is ours on `epoch` (never into anyone
    /// else's); nothing when it is not.
    pub(super) async fn write_data(&self, epoch: &Epoch) -> Result<()> {
        let path = match self.mode {
            KeptMode::ProtectedEphemeralSequential => match lock(&self.ours).current.clone() {
                Some(path) => path,
                None => return Ok(()),
            },
            _ => self.path.as_str().to_owned(),
        };
        let path = path.as_str();
        for _ in 0..ATTEMPTS {
            let Some(stat) = epoch
                .retry(path, |c| async move { c.check_stat(path).await })
                .await?
            else {
                return Ok(());
            };
            if self.owner_of(epoch, &stat) != Owner::Live {
                return Ok(());
            }
            let data = self.data();
            let data = data.as_slice();
            let version = Some(stat.version);
            let written = epoch
                .retry(path, |c| async move {
                    match c.set_data(path, data, version).await {
                        Ok(_) => Ok(true),
                        // Written meanwhile (a resent write of ours, or later data).
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
        Err(Error::internal(format!(
            "the data of {path} could not be written in {ATTEMPTS} attempts"
        )))
    }

    /// Deletes our node (each of ours at the path, or with our uuid in its name), looking
    /// again after a broken connection for as long as the session lives, as every delete of
    /// ours does.
    async fn delete_if_ours(&self, epoch: &Epoch) -> Result<()> {
        let paths = match self.mode {
            KeptMode::ProtectedEphemeralSequential => {
                // A create whose reply never came may have made one more.
                let found = self.ours_in_parent(epoch).await?;
                found.into_iter().map(|(path, _)| path).collect()
            }
            _ => {
                self.resolve_pending(epoch).await?;
                vec![self.path.as_str().to_owned()]
            }
        };
        for path in &paths {
            self.delete_one(epoch, path).await?;
        }
        Ok(())
    }

    async fn delete_one(&self, epoch: &Epoch, path: &str) -> Result<()> {
        loop {
            let stat = match epoch.client()?.check_stat(path).await {
                Ok(stat) => stat,
                Err(e) if connection_lost(&e) => {
                    epoch.until_reconnected().await;
                    continue;
                }
                Err(e) => return Err(epoch.error(e, path)),
            };
            let Some(stat) = stat.filter(|s| self.owner_of(epoch, s) != Owner::Foreign) else {
                return Ok(());
            };
            match epoch.client()?.delete(path, Some(stat.version)).await {
                Ok(()) | Err(zk::Error::NoNode) => {
                    debug!(path, "kept node deleted");
                    return Ok(());
                }
                // Changed since we looked (our data written late): look again.
                Err(zk::Error::BadVersion) => {}
                Err(e) if connection_lost(&e) => epoch.until_reconnected().await,
                Err(e) => return Err(epoch.error(e, path)),
            }
        }
    }

    /// Stops keeping: deletes the node if it is ours. A session that is over took an
    /// ephemeral node with it; a persistent one is deleted on the session's next.
    async fn stop(&self, epoch: Option<Arc<Epoch>>) -> Result<()> {
        self.set_state(KeptState::Stopped);
        let made_any = {
            let ours = lock(&self.ours);
            !ours.czxids.is_empty() || ours.pending.is_some()
        };
        let epoch = match epoch.filter(|e| !e.is_lost()) {
            Some(epoch) => epoch,
            None if self.mode.is_ephemeral() || !made_any => return Ok(()),
            None => self.session.epoch().await?,
        };
        match self.delete_if_ours(&epoch).await {
            Err(Error::SessionExpired | Error::SessionClosed) if self.mode.is_ephemeral() => Ok(()),
            other => other,
        }
    }

    /// One pass: the node looked at and waited on while it is ours, made when it is missing.
    async fn step(&self, slot: &mut Option<Arc<Epoch>>) -> Step {
        let epoch = match slot.as_ref().filter(|e| !e.is_lost()) {
            Some(epoch) => epoch.clone(),
            None => {
                if self.mode.is_ephemeral() {
                    self.set_missing(LossReason::SessionExpired);
                }
                match self.session.epoch().await {
                    Ok(epoch) => {
                        *slot = Some(epoch.clone());
                        epoch
                    }
                    Err(Error::SessionClosed) => return Step::Closed,
                    Err(e) => return Step::Failed(e),
                }
            }
        };
        match self.look(&epoch).await {
            Ok(Look::Ours(path, watcher)) => {
                self.set_state(KeptState::Created(path));
                tokio::select! {
                    event = watcher.changed() => debug!(event = ?event.event_type, "kept node's watch fired"),
                    _ = epoch.ended() => {}
                }
                return Step::Again;
            }
            Ok(Look::Foreign(owner, watcher)) => {
                self.set_missing(LossReason::NodeDeleted);
                if !self.created_once.load(Ordering::SeqCst) {
                    return Step::Failed(Error::MemberIdTaken {
                        path: self.path.as_str().to_owned(),
                        session_id: owner,
                    });
                }
                warn!(
                    path = %self.path,
                    owner = format_args!("{owner:#x}"),
                    "another session's member has this id; waiting for it to leave"
                );
                tokio::select! {
                    _ = watcher.changed() => {}
                    _ = epoch.ended() => {}
                }
                return Step::Again;
            }
            Ok(Look::Again) => return Step::Again,
            Ok(Look::Gone) => {}
            Err(_) if epoch.is_lost() => return Step::Again,
            Err(e) => return Step::Failed(e),
        }
        self.set_missing(LossReason::NodeDeleted);
        match self.make(&epoch).await {
            Ok(()) => {
                if self.created_once.load(Ordering::SeqCst) {
                    info!(path = %self.path, "kept node made again");
                }
                Step::Again
            }
            Err(_) if epoch.is_lost() => Step::Again,
            Err(e) => Step::Failed(e),
        }
    }
}

/// An error that leaves a create's outcome unknown.
fn connection_lost_error(e: &Error) -> bool {
    matches!(e, Error::ConnectionLost)
}

/// Keeps the node until stopped (told, or the handle dropped): then deletes it if it is ours.
pub(super) async fn keep(
    shared: Arc<Shared>,
    mut stopped: watch::Receiver<bool>,
    _claim: Option<Claim>,
) -> Result<()> {
    let mut epoch: Option<Arc<Epoch>> = None;
    let mut pause = Duration::from_millis(100);
    loop {
        let step = tokio::select! {
            step = shared.step(&mut epoch) => step,
            _ = until_stopped(&mut stopped) => Step::Stopped,
        };
        match step {
            Step::Again => {
                if matches!(*shared.state.borrow(), KeptState::Created(_)) {
                    pause = Duration::from_millis(100);
                }
            }
            Step::Failed(e) => {
                let first = !shared.created_once.load(Ordering::SeqCst);
                if first && (!shared.patient || !e.is_retryable()) {
                    debug!(path = %shared.path, error = %e, "kept node not made; stopping");
                    *lock(&shared.failed) = Some(e.clone());
                    // A create may have landed before the error: the node must not stay.
                    let _ = shared.stop(epoch).await;
                    return Err(e);
                }
                warn!(path = %shared.path, error = %e, "kept node not made; trying again");
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = until_stopped(&mut stopped) => return shared.stop(epoch).await,
                }
                pause = (pause * 2).min(Duration::from_secs(10));
            }
            Step::Stopped => return shared.stop(epoch).await,
            Step::Closed => {
                shared.set_state(KeptState::Stopped);
                return Ok(());
            }
        }
    }
}

/// Resolves once the node is to stop (or its handle is gone).
async fn until_stopped(stopped: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns is not `Send`: not kept.
    let _ = stopped.wait_for(|s| *s).await.is_ok();
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
