//! The crate docs' quick start, runnable: `cargo run --example quick_start`.
//!
//! Uses `ZK_CONNECT` when set, otherwise starts ZooKeeper in Docker through zk-testcontainers.

use zk_recipes::{Session, SessionOptions, ZkMutex};
use zk_testcontainers::test_server;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // ZK_CONNECT, or a ZooKeeper of our own in Docker (removed when `zk` drops).
    let zk = test_server().await?;
    let connect = zk.connect_string();
    let session = Session::connect(SessionOptions::new(connect)).await?;
    let mutex = ZkMutex::new(&session, "/locks/orders-42")?;

    let guard = mutex.lock().await?;
    let token = guard.token();
    println!("holding {} with fencing token {token}", guard.path());
    tokio::select! {
        reason = guard.lost() => eprintln!("lost the lock ({reason:?}); stopping"),
        _ = async { /* write to storage with `token`; storage refuses a smaller one */ } => {}
    }
    guard.release().await?;

    let next = mutex.lock().await?;
    println!("next holder gets token {} (> {token})", next.token());
    next.release().await?;
    session.close().await;
    Ok(())
}
