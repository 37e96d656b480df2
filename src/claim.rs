//! A recipe's root, checked and marked once per recipe value: one path serves one recipe kind
//! ([`layout::kind`](crate::layout::kind) has the marks and the rule). The root is created when
//! missing (its parents as persistent nodes), an ephemeral one is refused, and the kind's mark
//! is written (the anchor's data, or a group's root data) or checked.

use tracing::debug;
use zookeeper_client as zk;

use crate::error::{Error, Result, RootKind};
use crate::layout::kind::{admit, Admit, RecipeKind};
use crate::layout::ANCHOR;
use crate::ops::{self, OrMissing};
use crate::path::ZkPath;
use crate::session::{Epoch, Session};

/// How often the reads are made again after someone else changed the root between our reads
/// and our write (a concurrent first use, a root deleted meanwhile).
const ROUNDS: u32 = 4;

/// What is there: the root's data and stat (`None`: missing), its anchor's data and version,
/// and the parent's anchor's data.
struct Found {
    root: Option<(Vec<u8>, zk::Stat)>,
    anchor: Option<(Vec<u8>, i32)>,
    parent_anchor: Option<Vec<u8>>,
}

/// How a missing root is made.
#[derive(Clone, Copy)]
pub(crate) enum Make<'a> {
    /// A persistent node with this data.
    Persistent(&'a [u8]),
    /// A container (reaped by the server once it has no children) with this data.
    Container(&'a [u8]),
    /// Nothing: a missing root is left missing (a reader's check).
    Nothing,
}

/// Makes sure `root` exists (made as `make` when missing) and is `kind`'s, marking it if it
/// carries no mark yet. Returns the root's stat (its czxid tells a root made again); `None`
/// when the root is missing and `make` is [`Make::Nothing`].
///
/// # Errors
///
/// [`Error::UnsuitableRoot`] for an ephemeral root, another kind's root, or a key's directory
/// in a lock space; the session's errors otherwise.
pub(crate) async fn claim(
    epoch: &Epoch,
    session: &Session,
    root: &ZkPath,
    kind: RecipeKind,
    make: Make<'_>,
) -> Result<Option<zk::Stat>> {
    let path = root.as_str();
    let anchor = root.child(ANCHOR);
    let (anchor, parent) = (anchor.as_str(), root.parent());
    session.check_size("the recipe root's path", anchor.len())?;
    let mark = kind.mark();
    let mark = mark.as_slice();
    let refuse = |kind| Error::UnsuitableRoot {
        path: path.to_owned(),
        kind,
    };
    for _ in 0..ROUNDS {
        let found = read(epoch, path, anchor, parent).await?;
        let Some((data, stat)) = found.root else {
            // Refused before anything is made (a key's directory in a lock space).
            admit(kind, None, &[], found.parent_anchor.as_deref()).map_err(refuse)?;
            if matches!(make, Make::Nothing) {
                return Ok(None);
            }
            let (data, mode) = match make {
                Make::Persistent(data) => (data, zk::CreateMode::Persistent),
                Make::Container(data) => (data, zk::CreateMode::Container),
                Make::Nothing => unreachable!("returned above"),
            };
            ops::ensure_node(epoch, session, path, data, mode).await?;
            continue;
        };
        if stat.ephemeral_owner != 0 {
            return Err(refuse(RootKind::Ephemeral));
        }
        let anchor_data = found.anchor.as_ref().map(|(d, _)| d.as_slice());
        let admitted =
            admit(kind, anchor_data, &data, found.parent_anchor.as_deref()).map_err(refuse)?;
        let done = match admitted {
            Admit::Marked => true,
            // A group marks its root's data, and only empty data (never a user's).
            Admit::Anchor if kind.marks_root_data() => {
                !data.is_empty() || set(epoch, path, mark, stat.version).await?
            }
            Admit::Anchor => {
                let options = &zk::CreateMode::Persistent.with_acls(session.acls());
                epoch
                    .retry(anchor, |c| async move {
                        match c.create(anchor, mark, options).await {
                            Ok(_) => Ok(true),
                            // Someone's first: read its mark. Or the root went: make it again.
                            Err(zk::Error::NodeExists | zk::Error::NoNode) => Ok(false),
                            Err(e) => Err(e),
                        }
                    })
                    .await?
            }
            Admit::Claim => {
                let version = found.anchor.map_or(0, |(_, v)| v);
                set(epoch, anchor, mark, version).await?
            }
        };
        if done {
            debug!(root = path, kind = kind.name(), ?admitted, "root checked");
            return Ok(Some(stat));
        }
    }
    // Changed under us on every round: made and deleted over and over.
    Err(Error::RootReplaced {
        path: path.to_owned(),
    })
}

/// The three reads, sent back to back (one round trip).
async fn read(epoch: &Epoch, root: &str, anchor: &str, parent: &str) -> Result<Found> {
    epoch
        .retry(root, |c| async move {
            let parent_anchor = format!("{parent}/{ANCHOR}");
            let (root_read, anchor_read) = (c.get_data(root), c.get_data(anchor));
            let parent_read = (parent != "/").then(|| c.get_data(&parent_anchor));
            let root = root_read.await.or_missing()?;
            let anchor = anchor_read.await.or_missing()?.map(|(d, s)| (d, s.version));
            let parent_anchor = match parent_read {
                Some(read) => read.await.or_missing()?.map(|(d, _)| d),
                None => None,
            };
            Ok(Found {
                root,
                anchor,
                parent_anchor,
            })
        })
        .await
}

/// A compare-and-set of `path`'s data; `false` when someone changed or deleted it first.
async fn set(epoch: &Epoch, path: &str, data: &[u8], version: i32) -> Result<bool> {
    epoch
        .retry(path, |c| async move {
            match c.set_data(path, data, Some(version)).await {
                Ok(_) => Ok(true),
                Err(zk::Error::BadVersion | zk::Error::NoNode) => Ok(false),
                Err(e) => Err(e),
            }
        })
        .await
}
