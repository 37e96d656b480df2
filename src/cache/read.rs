//! Reading the tree from the server: the whole tree level by level in pipelined bursts (every
//! request of a burst sent before the first answer is awaited), and a set of single nodes the
//! same way.

use std::collections::BTreeMap;

use tracing::{debug, warn};
use zookeeper_client as zk;

use super::tree::CachedNode;
use super::Shared;
use crate::error::{connection_lost, Result};
use crate::session::Epoch;

/// How many nodes one burst reads (each one or two requests).
pub(crate) const BURST: usize = 512;

/// One node as read: `None` when it is not there (or not readable: NoAuth, logged).
type Read = Option<(CachedNode, Option<Vec<String>>)>;

/// Sends the reads of `paths` (data or stat, and the children when `children`) in one burst
/// and awaits them in order. A broken connection fails the burst (`Err`): the caller waits
/// for the reconnect and reads again.
async fn burst(
    shared: &Shared,
    client: &zk::Client,
    paths: &[String],
    children: bool,
) -> std::result::Result<Vec<Read>, zk::Error> {
    enum Pending<D, K, S> {
        Data(D),
        Kids(K),
        Stat(S),
    }
    let mut pending = Vec::with_capacity(paths.len());
    for path in paths {
        // Each call sends its request at once; the futures only await the answers.
        pending.push(match (shared.data, children) {
            (true, _) => Pending::Data(client.get_data(path)),
            (false, true) => Pending::Kids(client.get_children(path)),
            (false, false) => Pending::Stat(client.check_stat(path)),
        });
    }
    let mut reads = Vec::with_capacity(paths.len());
    for p in pending {
        reads.push(match p {
            Pending::Data(data) => data
                .await
                .map(|(data, stat)| Some((CachedNode::new(stat, Some(data)), None))),
            Pending::Kids(kids) => kids
                .await
                .map(|(kids, stat)| Some((CachedNode::new(stat, None), Some(kids)))),
            Pending::Stat(stat) => stat
                .await
                .map(|stat| stat.map(|stat| (CachedNode::new(stat, None), None))),
        });
    }
    // Data mode: the children only of the nodes whose stat says they have some (a leaf costs
    // one request; a child made after the stat was read is an event of the watch).
    if shared.data && children {
        let listings: Vec<_> = paths
            .iter()
            .zip(&reads)
            .map(|(path, read)| match read {
                Ok(Some((node, _))) if node.stat().num_children > 0 => {
                    Some(client.get_children(path))
                }
                _ => None,
            })
            .collect();
        for (read, listing) in reads.iter_mut().zip(listings) {
            let kids = match listing {
                Some(listing) => match listing.await {
                    Ok((kids, _)) => kids,
                    // Deleted between the two reads: the event will tell.
                    Err(zk::Error::NoNode) => {
                        *read = Ok(None);
                        continue;
                    }
                    Err(e) => {
                        *read = Err(e);
                        continue;
                    }
                },
                None => Vec::new(),
            };
            if let Ok(Some((_, slot))) = read {
                *slot = Some(kids);
            }
        }
    }
    let mut out = Vec::with_capacity(paths.len());
    for (path, read) in paths.iter().zip(reads) {
        out.push(match read {
            Ok(read) => read,
            Err(zk::Error::NoNode) => None,
            Err(zk::Error::NoAuth) => {
                warn!(path = %path, "cannot read a node of the cached tree (NoAuth): left out");
                None
            }
            Err(e) => return Err(e),
        });
    }
    Ok(out)
}

/// Reads the whole tree under the cache's root (the root included), level by level, each
/// level in bursts of [`BURST`] nodes; what the filter refuses is left out with everything
/// below it.
pub(crate) async fn tree(shared: &Shared, epoch: &Epoch) -> Result<BTreeMap<String, CachedNode>> {
    let mut losses = 0;
    'again: loop {
        let client = epoch.client()?;
        let mut tree = BTreeMap::new();
        let mut level = vec![shared.root.as_str().to_owned()];
        while !level.is_empty() {
            let mut next = Vec::new();
            for chunk in level.chunks(BURST) {
                let reads = match burst(shared, &client, chunk, true).await {
                    Ok(reads) => reads,
                    Err(e) if connection_lost(&e) => {
                        epoch.after_loss(&mut losses).await?;
                        continue 'again;
                    }
                    Err(e) => return Err(epoch.error(e, chunk[0].as_str())),
                };
                for (path, read) in chunk.iter().zip(reads) {
                    let Some((node, kids)) = read else { continue };
                    for kid in kids.unwrap_or_default() {
                        let child = if path == "/" {
                            format!("/{kid}")
                        } else {
                            format!("{path}/{kid}")
                        };
                        if shared.admits(&child) {
                            next.push(child);
                        }
                    }
                    tree.insert(path.clone(), node);
                }
            }
            level = next;
        }
        debug!(nodes = tree.len(), "tree read");
        return Ok(tree);
    }
}

/// Reads the nodes at `paths` afresh (their data or stat only), in bursts.
pub(crate) async fn nodes(
    shared: &Shared,
    epoch: &Epoch,
    paths: &[String],
) -> Result<Vec<Option<CachedNode>>> {
    let mut losses = 0;
    'again: loop {
        let client = epoch.client()?;
        let mut out = Vec::with_capacity(paths.len());
        for chunk in paths.chunks(BURST) {
            match burst(shared, &client, chunk, false).await {
                Ok(reads) => out.extend(reads.into_iter().map(|r| r.map(|(node, _)| node))),
                Err(e) if connection_lost(&e) => {
                    epoch.after_loss(&mut losses).await?;
                    continue 'again;
                }
                Err(e) => return Err(epoch.error(e, chunk[0].as_str())),
            }
        }
        return Ok(out);
    }
}
