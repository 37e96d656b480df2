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
