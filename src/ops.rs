//! The operations under the recipes, each written once: an optional read, a node made when
//! missing (its parents persistent), a write sent once (never again after a broken
//! connection, whose outcome is unknown), and a delete on a version. Reads and idempotent
//! creates go through [`Epoch::retry`]; the write sent once is the one request that must not.

use zookeeper_client as zk;

use crate::error::{connection_lost, Error, Result};
use crate::session::{Epoch, Session};

/// `NodeExists` taken as success: a create whose node someone (or our lost reply) made first.
pub(crate) trait OrExisting {
    /// `Ok(())` for success and for `NodeExists`.
    fn or_existing(self) -> std::result::Result<(), zk::Error>;
}

impl<T> OrExisting for std::result::Result<T, zk::Error> {
    fn or_existing(self) -> std::result::Result<(), zk::Error> {
        match self {
            Ok(_) | Err(zk::Error::NodeExists) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// `NoNode` taken as `None`: a read of a node that may not be there.
pub(crate) trait OrMissing<T> {
    /// `Ok(None)` for `NoNode`.
    fn or_missing(self) -> std::result::Result<Option<T>, zk::Error>;
}

impl<T> OrMissing<T> for std::result::Result<T, zk::Error> {
    fn or_missing(self) -> std::result::Result<Option<T>, zk::Error> {
        match self {
            Ok(found) => Ok(Some(found)),
            Err(zk::Error::NoNode) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// A node's data and stat, `None` when it is missing (through [`Epoch::retry`]).
pub(crate) async fn read(epoch: &Epoch, path: &str) -> Result<Option<(Vec<u8>, zk::Stat)>> {
    epoch
        .retry(path, |c| async move { c.get_data(path).await.or_missing() })
        .await
}

/// Makes `path` with `data` as `mode` when missing, its parents as persistent nodes (all with
/// the session's node ACLs); someone else's node first is as good.
pub(crate) async fn ensure_node(
    epoch: &Epoch,
    session: &Session,
    path: &str,
    data: &[u8],
    mode: zk::CreateMode,
) -> Result<()> {
    let persistent = &zk::CreateMode::Persistent.with_acls(session.acls());
    let options = &mode.with_acls(session.acls());
    let parent = match path.rsplit_once('/') {
        Some(("", _)) | None => "/",
        Some((parent, _)) => parent,
    };
    if parent != "/" {
        epoch
            .retry(parent, |c| async move { c.mkdir(parent, persistent).await })
            .await?;
    }
    epoch
        .retry(path, |c| async move {
            c.create(path, data, options).await.or_existing()
        })
        .await
}

/// Sends `request` once: a broken connection is [`Error::ConnectionLost`] (the outcome is
/// unknown, so it is not sent again), other errors are the session's for `path`.
pub(crate) async fn send_once<T, Fut>(
    epoch: &Epoch,
    path: &str,
    request: impl FnOnce(zk::Client) -> Fut,
) -> Result<T>
where
    Fut: std::future::Future<Output = std::result::Result<T, zk::Error>>,
{
    match request(epoch.client()?).await {
        Ok(value) => Ok(value),
        Err(e) if connection_lost(&e) => Err(Error::ConnectionLost),
        Err(e) => Err(epoch.error(e, path)),
    }
}

/// Deletes `path` if its version is still `version`: `false` when it changed or is gone.
pub(crate) async fn delete_where(epoch: &Epoch, path: &str, version: i32) -> Result<bool> {
    epoch
        .retry(path, |c| async move {
            match c.delete(path, Some(version)).await {
                Ok(()) => Ok(true),
                Err(zk::Error::NoNode | zk::Error::BadVersion) => Ok(false),
                Err(e) => Err(e),
            }
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_existing_are_answers_not_errors() {
        let missing: std::result::Result<u8, zk::Error> = Err(zk::Error::NoNode);
        assert_eq!(missing.or_missing(), Ok(None));
        assert_eq!(Ok::<u8, zk::Error>(3).or_missing(), Ok(Some(3)));
        let other: std::result::Result<u8, zk::Error> = Err(zk::Error::NoAuth);
        assert_eq!(other.or_missing(), Err(zk::Error::NoAuth));
        let exists: std::result::Result<u8, zk::Error> = Err(zk::Error::NodeExists);
        assert_eq!(exists.or_existing(), Ok(()));
        let other: std::result::Result<u8, zk::Error> = Err(zk::Error::NoNode);
        assert_eq!(other.or_existing(), Err(zk::Error::NoNode));
    }
}
