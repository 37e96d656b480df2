//! The README's code and docs/recipes.md's, compiled: each ```rust block is in a function here, as
//! written there, and a test checks that every line of every block is in this file in order, so
//! the README cannot show code that does not build. (The snippets name servers such as `zk1`;
//! they are compiled, not run: the recipe tests run the same calls against real servers.)
#![allow(
    dead_code,
    unused_variables,
    unreachable_code,
    clippy::diverging_sub_expression
)]

use std::error::Error as StdError;
use std::ops::ControlFlow;
use std::time::Duration;

use zk_recipes::discovery::{ServiceInstance, Strategy, ZkServiceDiscovery};
use zk_recipes::{
    FencingToken, KeptMode, LockRef, LossPolicy, RetryPolicy, Session, SessionOptions,
    TreeCacheOptions, ZkAtomicLong, ZkDoubleBarrier, ZkGroup, ZkKeptNode, ZkLeaderElection,
    ZkMultiLock, ZkMutex, ZkPartitioner, ZkSharedCount, ZkTreeCache,
};

type R = Result<(), Box<dyn StdError>>;

async fn do_the_work(_token: FencingToken) -> Result<(), zk_recipes::Error> {
    Ok(())
}

async fn run_scheduler(_term: FencingToken) {}

async fn lock_a_resource() -> R {
    use zk_recipes::{Session, SessionOptions, ZkLockSpace};

    let session = Session::connect(SessionOptions::new("zk1:2181,zk2:2181,zk3:2181")).await?;
    let orders = ZkLockSpace::new(&session, "/locks/orders")?; // nothing sent yet
    let guard = orders.lock("order-42").await?; // waits, FIFO
    let token = guard.token(); // the fencing token
                               // ... the critical section: every write carries `token` ...
    guard.release().await?;
    Ok(())
}

async fn one_long_lived_lock(session: Session) -> R {
    let mutex = ZkMutex::new(&session, "/locks/nightly-report")?;
    let guard = mutex.lock().await?;
    // Write with the token:
    let client = guard.client()?;
    let mut write = guard.fenced_write(&client)?;
    write.add_set_data("/app/balance", b"10400000", None)?;
    write.commit().await?; // Error::Lost if the lock is gone: nothing was written
    Ok(())
}

async fn react_to_losing_the_lock(mutex: ZkMutex) -> R {
    let guard = mutex.lock().await?;
    let token = guard.token();
    tokio::select! {
        reason = guard.lost() => eprintln!("lost the lock ({reason:?}); stopping"),
        result = do_the_work(token) => result?,
    }
    Ok(())
}

fn choose_a_loss_policy() {
    let options = SessionOptions::new("zk1:2181").loss_policy(LossPolicy::Suspension);
}

async fn run_a_leader_only_job(session: Session) -> R {
    let election = ZkLeaderElection::new(&session, "/election/scheduler", "worker-7@10.0.0.7")?;
    election
        .lead(|leadership| async move {
            run_scheduler(leadership.term()).await; // fence every write with the term
            ControlFlow::<()>::Continue(()) // resign, campaign again
        })
        .await?;
    Ok(())
}

async fn the_other_recipes(session: Session) -> R {
    let workers = ZkSharedCount::new(&session, "/jobs/active-workers", 0)?;
    workers.add(1).await?;
    let now = workers.get().await?;
    let next = workers.changed(&now).await?; // someone joined or left

    let group = ZkGroup::new(&session, "/services/billing")?;
    let me = group.join("worker-7", b"10.0.0.7:8080").await?;
    let members = group.members().await?;
    let next = group.changed(&members).await?; // someone joined, left or changed its payload
    me.release().await?;

    let barrier = ZkDoubleBarrier::new(&session, "/jobs/nightly/barrier", 8)?;
    let inside = barrier.enter_timeout(Duration::from_secs(60)).await?;
    // ... the computation ...
    inside.leave_timeout(Duration::from_secs(60)).await?;

    let orders = ZkAtomicLong::new(&session, "/counters/orders", RetryPolicy::default())?;
    let result = orders.increment().await?;
    if result.succeeded() {
        println!("order {}", result.post_value());
    }

    let inventory = LockRef::mutex("/locks/inventory");
    let order = LockRef::key("/locks/orders", "order-42");
    let both = ZkMultiLock::new(&session, [inventory, order])?;
    let held = both.lock().await?; // all or none; a token per lock in held.tokens()
    held.release().await?;

    let queues: Vec<String> = (0..64).map(|i| format!("queue-{i}")).collect();
    let partitioner = ZkPartitioner::new(&session, "/work/queues", queues)?;
    let me = partitioner.join("worker-7").await?;
    let mine = me.acquired().await?; // mine.owned(): partition -> token
    me.leave().await?;

    let node = ZkKeptNode::start(&session, "/workers/w-7", KeptMode::Ephemeral, b"idle")?;
    node.created().await?;
    node.set_data(b"busy").await?; // kept across re-creations
    node.close().await?; // deleted

    let cache = ZkTreeCache::start(&session, "/config", TreeCacheOptions::new())?;
    cache.initialized().await?;
    let (view, mut changes) = cache.subscribe(); // view.get(path), view.children(path)
    while let Some(change) = changes.recv().await {
        println!("{change:?}"); // Created, Changed, Deleted
    }

    let discovery = ZkServiceDiscovery::new(&session, "/services")?;
    let instance = ServiceInstance::new("billing", "billing-7");
    let registration = discovery.register(&instance).await?;
    let provider = discovery.provider("billing", Strategy::RoundRobin).await?;
    let next = provider.instance(); // an instance to call, if any is up
    registration.unregister().await?;
    Ok(())
}

#[cfg(all(feature = "tls", feature = "sasl-digest-md5"))]
fn tls_and_sasl() -> R {
    use zk_recipes::{zookeeper_client::Acls, SessionOptions, TlsConfig};

    let tls = TlsConfig::from_ca_file("/etc/zk/ca.pem")? // whom to trust
        .with_client_cert_files("/etc/zk/client.pem", "/etc/zk/client.key")?; // if the servers ask
    let options = SessionOptions::new("zk1:2281,zk2:2281,zk3:2281") // secureClientPort
        .tls(tls)
        .sasl_digest_md5("billing", "secret") // the servers' JAAS `Server` section: user_billing="secret"
        .node_acls(Acls::creator_all()); // recipes' nodes for sasl:billing only
    Ok(())
}

/// Every line of every ```rust block of `text` (the file `name`) is in this file, in order
/// (runs of whitespace count as one space: rustfmt aligns comments its own way); returns how
/// many blocks there were.
fn in_this_file_in_order(name: &str, text: &str) -> usize {
    let squeeze = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let this = squeeze(include_str!("readme.rs"));
    let blocks: Vec<&str> = text
        .split("```rust\n")
        .skip(1)
        .map(|rest| rest.split("```").next().unwrap_or(""))
        .collect();
    let mut rest = this.as_str();
    for line in blocks.iter().flat_map(|b| b.lines()) {
        let line = squeeze(line);
        if line.is_empty() {
            continue;
        }
        let at = rest
            .find(&line)
            .unwrap_or_else(|| panic!("{name}'s line is not in tests/readme.rs, in order: {line}"));
        rest = &rest[at + line.len()..];
    }
    blocks.len()
}

/// The README's code and docs/recipes.md's, each block in its own order.
#[test]
fn the_readmes_code_is_in_this_file_in_order() {
    let guide = in_this_file_in_order("README.md", include_str!("../README.md"));
    assert!(guide >= 6, "the guide's blocks: {guide}");
    let recipes = in_this_file_in_order("docs/recipes.md", include_str!("../docs/recipes.md"));
    assert!(recipes >= 9, "docs/recipes.md's blocks: {recipes}");
}
