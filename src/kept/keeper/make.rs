//! Making the kept node: a plain create (ephemeral, persistent or TTL, a lost reply recognised
//! by the data and a creation zxid after the parent's last change) or a protected sequential
//! one (never sent again: found by its uuid), its parent made where missing.

use std::sync::atomic::Ordering;

use tracing::debug;
use zookeeper_client as zk;

use super::look::Owner;
use super::{connection_lost_error, lock, Shared, ATTEMPTS};
use crate::error::{Error, Result};
use crate::kept::KeptMode;
use crate::session::Epoch;

/// What one create did.
enum Made {
    Done,
    NoParent,
    Look,
}

impl Shared {
    /// Makes the node on `epoch` (its parent too).
    pub(super) async fn make(&self, epoch: &Epoch) -> Result<()> {
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
        Err(Error::internal(format!(
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
            return Err(Error::internal(format!("no root for {}", self.path)));
        }
        let mode = zk::CreateMode::Container;
        crate::ops::ensure_node(epoch, &self.session, parent, &self.parent_data, mode).await
    }
}
