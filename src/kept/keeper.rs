//! The task that keeps a node: it looks at the node (a watch on it), makes it when it is not
//! there as ours, deletes an earlier session's node of ours in the way, stays out while a
//! namesake is there, and deletes the node when stopped. The one implementation behind
//! [`ZkKeptNode`](super::ZkKeptNode) and the group's members.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;
use tracing::{debug, info, warn};
use zookeeper_client as zk;

use super::{Claim, KeptMode, KeptState, Options};
use crate::error::{connection_lost, Error, Result};
use crate::layout::names::PROTECTED_PREFIX;
use crate::ops::OrMissing;
use crate::path::ZkPath;
use crate::session::{Epoch, Session};

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

/// Whose a node at our path is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    /// Ours, on this session (or persistent and made by us).
    Live,
    /// Ours, of an earlier session that may live on at the server: deleted.
    Stale,
    /// Someone else's: never touched.
    Foreign,
}

/// What a look at the node found.
enum Look {
    Ours(String, zk::OneshotWatcher),
    Foreign(i64, zk::OneshotWatcher),
    Gone,
    /// Something changed (an old node of ours deleted, ours found by its name): look again.
    Again,
}

/// What one pass of the keeper's loop ended with.
enum Step {
    Again,
    Failed(Error),
    Stopped,
    Closed,
}

/// What one create did.
enum Made {
    Done,
    NoParent,
    Look,
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

    fn set_state(&self, state: KeptState) {
        if matches!(state, KeptState::Created(_)) {
            self.created_once.store(true, Ordering::SeqCst);
        }
        self.state.send_if_modified(|s| {
            let changed = *s != state && *s != KeptState::Stopped;
            if changed {
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

    fn owner_of(&self, epoch: &Epoch, stat: &zk::Stat) -> Owner {
        let ours = lock(&self.ours);
        if self.mode.is_ephemeral() {
            match stat.ephemeral_owner {
                owner if !ours.sessions.contains(&owner) => Owner::Foreign,
                owner if owner == epoch.id() => Owner::Live,
                _ => Owner::Stale,
            }
        } else if ours.czxids.contains(&stat.czxid) {
            Owner::Live
        } else {
            Owner::Foreign
        }
    }

    /// A persistent create whose reply we did not see: ours when the node at the path has the
    /// data sent and was made after the parent's last child change read before sending.
    async fn resolve_pending(&self, epoch: &Epoch) -> Result<()> {
        let Some((before, sent)) = lock(&self.ours).pending.clone() else {
            return Ok(());
        };
        let found = crate::ops::read(epoch, self.path.as_str()).await?;
        let mut ours = lock(&self.ours);
        if let Some((data, stat)) = found {
            if stat.czxid > before && data == sent && !ours.czxids.contains(&stat.czxid) {
                debug!(path = %self.path, "a create whose reply was lost made our node");
                ours.czxids.push(stat.czxid);
            }
        }
        ours.pending = None;
        Ok(())
    }

    /// Looks at the node, with a watch on it.
    async fn look(&self, epoch: &Epoch) -> Result<Look> {
        if self.mode == KeptMode::ProtectedEphemeralSequential {
            return self.look_protected(epoch).await;
        }
        self.resolve_pending(epoch).await?;
        let path = self.path.as_str();
        let (stat, watcher) = epoch
            .retry(path, |c| async move { c.check_and_watch_stat(path).await })
            .await?;
        let Some(stat) = stat else {
            return Ok(Look::Gone);
        };
        match self.owner_of(epoch, &stat) {
            Owner::Live => Ok(Look::Ours(path.to_owned(), watcher)),
            Owner::Foreign => Ok(Look::Foreign(stat.ephemeral_owner, watcher)),
            Owner::Stale => {
                debug!(
                    path,
                    owner = format_args!("{:#x}", stat.ephemeral_owner),
                    "deleting our earlier session's node"
                );
                crate::ops::delete_where(epoch, path, stat.version).await?;
                Ok(Look::Again)
            }
        }
    }

    /// The protected node: at the path last known, or found among the parent's children by
    /// the uuid in its name (a create whose reply was lost, a new session).
    async fn look_protected(&self, epoch: &Epoch) -> Result<Look> {
        let current = lock(&self.ours).current.clone();
        if let Some(path) = current.as_deref() {
            let (stat, watcher) = epoch
                .retry(path, |c| async move { c.check_and_watch_stat(path).await })
                .await?;
            if stat.is_some_and(|s| self.owner_of(epoch, &s) == Owner::Live) {
                return Ok(Look::Ours(path.to_owned(), watcher));
            }
        }
        let mut found = None;
        for (path, stat) in self.ours_in_parent(epoch).await? {
            match self.owner_of(epoch, &stat) {
                Owner::Live if found.is_none() => found = Some(path),
                Owner::Foreign => {}
                // An earlier session's, or a second of this session's (cannot be): deleted.
                _ => {
                    debug!(%path, "deleting an older node of ours");
                    crate::ops::delete_where(epoch, &path, stat.version).await?;
                }
            }
        }
        let again = found.is_some();
        lock(&self.ours).current = found;
        Ok(if again { Look::Again } else { Look::Gone })
    }

    /// The parent's children whose names carry our uuid, with their stats.
    async fn ours_in_parent(&self, epoch: &Epoch) -> Result<Vec<(String, zk::Stat)>> {
        let parent = self.parent();
        let children = epoch
            .retry(parent, |c| async move {
                c.list_children(parent).await.or_missing()
            })
            .await?
            .unwrap_or_default();
        let mut found = Vec::new();
        for name in children {
            let Some(sequence) = name.strip_prefix(self.protected.as_str()) else {
                continue;
            };
            if sequence.is_empty() || !sequence.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let path = self.in_parent(&name);
            let p = path.as_str();
            if let Some(stat) = epoch
                .retry(p, |c| async move { c.check_stat(p).await })
                .await?
            {
                found.push((path, stat));
            }
        }
        Ok(found)
    }

    /// Makes the node on `epoch` (its parent too).
    async fn make(&self, epoch: &Epoch) -> Result<()> {
        if self.mode.is_ephemeral() {
            let mut ours = lock(&self.ours);
            if !ours.sessions.contains(&epoch.id()) {
                ours.sessions.push(epoch.id());
            }
        }
        for _ in 0..ATTEMPTS {
            let generation = self.generation.load(Ordering::SeqCst);
            let data = self.data();
            let made = match self.mode {
                KeptMode::ProtectedEphemeralSequential => {
                    self.create_protected(epoch, &data).await?
                }
                _ => self.create_plain(epoch, &data).await?,
            };
            match made {
                Made::Done => {
                    if self.generation.load(Ordering::SeqCst) != generation {
                        self.write_data(epoch).await?;
                    }
                    return Ok(());
                }
                Made::NoParent => self.make_parent(epoch).await?,
                Made::Look => return Ok(()),
            }
        }
        Err(Error::unexpected(format!(
            "{} could not be made in {ATTEMPTS} attempts",
            self.path
        )))
    }

    async fn create_plain(&self, epoch: &Epoch, data: &[u8]) -> Result<Made> {
        let path = self.path.as_str();
        let acls = self.session.acls();
        let options = match self.mode {
            KeptMode::Ttl(ttl) => zk::CreateMode::Persistent.with_acls(acls).with_ttl(ttl),
            KeptMode::Persistent => zk::CreateMode::Persistent.with_acls(acls),
            _ => zk::CreateMode::Ephemeral.with_acls(acls),
        };
        let options = &options;
        if !self.mode.is_ephemeral() {
            let parent = self.parent();
            let Some(stat) = epoch
                .retry(parent, |c| async move { c.check_stat(parent).await })
                .await?
            else {
                return Ok(Made::NoParent);
            };
            lock(&self.ours).pending = Some((stat.pzxid, data.to_vec()));
        }
        let made = epoch
            .retry(path, |c| async move {
                match c.create(path, data, options).await {
                    Ok((stat, _)) => Ok(Ok(stat)),
                    Err(
                        e @ (zk::Error::NodeExists | zk::Error::NoNode | zk::Error::Unimplemented),
                    ) => Ok(Err(e)),
                    Err(e) => Err(e),
                }
            })
            .await;
        let made = match made {
            Ok(made) => made,
            Err(e) => {
                // Sent perhaps: the next look reads the node to know.
                return if connection_lost_error(&e) {
                    Ok(Made::Look)
                } else {
                    Err(e)
                };
            }
        };
        match made {
            Ok(stat) => {
                let mut ours = lock(&self.ours);
                ours.pending = None;
                if !self.mode.is_ephemeral() {
                    ours.czxids.push(stat.czxid);
                }
                debug!(path, "kept node made");
                Ok(Made::Done)
            }
            Err(zk::Error::NoNode) => {
                lock(&self.ours).pending = None;
                Ok(Made::NoParent)
            }
            Err(zk::Error::Unimplemented) => {
                lock(&self.ours).pending = None;
                Err(Error::TtlRefused {
                    path: path.to_owned(),
                    reason: "the server does not take TTL nodes (zookeeper.extendedTypesEnabled=true enables them)",
                })
            }
            // There already: ours from a lost reply (written with the latest data), an earlier
            // session's of ours, or a namesake; the next look decides.
            Err(_) => {
                self.resolve_pending(epoch).await?;
                let stat = epoch
                    .retry(path, |c| async move { c.check_stat(path).await })
                    .await?;
                if let Some(stat) = stat.filter(|s| self.owner_of(epoch, s) == Owner::Live) {
                    if stat.data_length as usize != data.len() || self.data() != data {
                        self.write_data(epoch).await?;
                    }
                }
                Ok(Made::Look)
            }
        }
    }

    async fn create_protected(&self, epoch: &Epoch, data: &[u8]) -> Result<Made> {
        let base = self.in_parent(&self.protected);
        let base = base.as_str();
        let options = &zk::CreateMode::EphemeralSequential.with_acls(self.session.acls());
        // A sequential create is not sent again: after a broken connection the next look
        // finds the node (if it was made) by the uuid in its name.
        let made = crate::ops::send_once(epoch, base, |c| async move {
            match c.create(base, data, options).await {
                Ok((_, sequence)) => Ok(Some(sequence)),
                Err(zk::Error::NoNode) => Ok(None),
                Err(e) => Err(e),
            }
        })
        .await;
        match made {
            Ok(Some(sequence)) => {
                let path = format!("{base}{sequence}");
                debug!(%path, "kept node made");
                lock(&self.ours).current = Some(path);
                Ok(Made::Done)
            }
            Ok(None) => Ok(Made::NoParent),
            Err(Error::ConnectionLost) => {
                epoch.until_reconnected().await;
                Ok(Made::Look)
            }
            Err(e) => Err(e),
        }
    }

    /// The parent as a container with its data, its own parents persistent.
    async fn make_parent(&self, epoch: &Epoch) -> Result<()> {
        let parent = self.parent();
        if parent == "/" {
            return Err(Error::unexpected(format!("no root for {}", self.path)));
        }
        let mode = zk::CreateMode::Container;
        crate::ops::ensure_node(epoch, &self.session, parent, &self.parent_data, mode).await
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
        Err(Error::unexpected(format!(
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
                    self.set_state(KeptState::Missing);
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
                self.set_state(KeptState::Missing);
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
        self.set_state(KeptState::Missing);
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
