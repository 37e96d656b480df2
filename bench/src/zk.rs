//! ZooKeeper helpers: directories, clean-up and four-letter words.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zookeeper_client as zkc;

/// Creates `path` and its parents as persistent nodes.
pub async fn mkdir(connect: &str, path: &str) -> Result<(), String> {
    let client = zkc::Client::connect(connect)
        .await
        .map_err(|e| format!("raw client: {e}"))?;
    let options = zkc::CreateMode::Persistent.with_acls(zkc::Acls::anyone_all());
    client
        .mkdir(path, &options)
        .await
        .map_err(|e| format!("mkdir {path}: {e}"))
}

/// Deletes `path` and everything under it (best effort).
pub async fn delete_tree(client: &zkc::Client, path: &str) {
    let mut stack = vec![(path.to_owned(), false)];
    while let Some((node, expanded)) = stack.pop() {
        if expanded {
            let _ = client.delete(&node, None).await;
            continue;
        }
        stack.push((node.clone(), true));
        if let Ok(children) = client.list_children(&node).await {
            for child in children {
                stack.push((format!("{node}/{child}"), false));
            }
        }
    }
}

/// How many znodes are under `path` (itself not counted; 0 when it is gone).
pub async fn count_tree(client: &zkc::Client, path: &str) -> Result<u64, String> {
    let mut count = 0;
    let mut stack = vec![path.to_owned()];
    while let Some(node) = stack.pop() {
        let children = match client.list_children(&node).await {
            Ok(children) => children,
            Err(zkc::Error::NoNode) => continue,
            Err(e) => return Err(format!("list {node}: {e}")),
        };
        count += children.len() as u64;
        stack.extend(children.into_iter().map(|c| format!("{node}/{c}")));
    }
    Ok(count)
}

/// The first `host:port` of a connect string.
fn first_server(connect: &str) -> String {
    let hosts = connect.split('/').next().unwrap_or(connect);
    hosts.split(',').next().unwrap_or(hosts).to_owned()
}

/// Sends a four-letter word to the first server of `connect`.
pub async fn four_letter(connect: &str, word: &str) -> Option<String> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(first_server(connect))
            .await
            .ok()?;
        stream.write_all(word.as_bytes()).await.ok()?;
        let mut reply = String::new();
        stream.read_to_string(&mut reply).await.ok()?;
        Some(reply)
    };
    tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .ok()
        .flatten()
        .filter(|r| !r.is_empty() && !r.contains("is not executed"))
}

/// The server's total watch count (`wchs`).
pub async fn total_watches(connect: &str) -> Option<u64> {
    let reply = four_letter(connect, "wchs").await?;
    reply
        .lines()
        .find_map(|l| l.strip_prefix("Total watches:"))
        .and_then(|v| v.trim().parse().ok())
}

/// The server's transaction-log counters at one moment: how many times its sync thread has
/// flushed the log (`zk_cnt_sync_processor_batch_size` of `mntr`: one fsync each), and its last
/// zxid (`srvr`), which counts the writes (one per transaction, within an epoch); and the
/// packets it has taken in (`zk_packets_received`: requests, pings included) and sent out
/// (`zk_packets_sent`: replies and watch events).
#[derive(Clone, Copy, Debug)]
pub struct LogCounters {
    pub syncs: u64,
    pub zxid: u64,
    pub received: u64,
    pub sent: u64,
}

/// The log's counters now; `None` when the server does not answer `mntr` and `srvr`.
pub async fn log_counters(connect: &str) -> Option<LogCounters> {
    let (mntr, srvr) = tokio::join!(four_letter(connect, "mntr"), four_letter(connect, "srvr"));
    let mntr = mntr?;
    let counter = |name: &str| {
        mntr.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
    };
    let syncs = counter("zk_cnt_sync_processor_batch_size")?;
    let received = counter("zk_packets_received")?;
    let sent = counter("zk_packets_sent")?;
    let zxid = srvr?.lines().find_map(|l| {
        l.strip_prefix("Zxid: 0x")
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
    })?;
    Some(LogCounters {
        syncs,
        zxid,
        received,
        sent,
    })
}

/// Log syncs and writes between two readings.
pub fn log_delta(before: Option<LogCounters>, after: Option<LogCounters>) -> Option<(u64, u64)> {
    let (b, a) = (before?, after?);
    Some((a.syncs.checked_sub(b.syncs)?, a.zxid.checked_sub(b.zxid)?))
}

/// Packets the server took in and sent out between two readings.
pub fn packet_delta(before: Option<LogCounters>, after: Option<LogCounters>) -> Option<(u64, u64)> {
    let (b, a) = (before?, after?);
    Some((
        a.received.checked_sub(b.received)?,
        a.sent.checked_sub(b.sent)?,
    ))
}
