//! The atomic long on a real server: Curator's 8 big-endian bytes, its operations, a malformed
//! value refused with a typed error, and concurrent increments from several sessions, exact
//! (`ZK_ATOMIC_INCREMENTS` per worker, default 1,000 over 16 workers: 8 Rust workers and 8
//! Java threads on Curator's `DistributedAtomicLong` at once, both promoted to one lock path;
//! `tests/java/AtomicIncrements.java`, compiled against /usr/share/java, or 16 Rust workers
//! when Java cannot run).

mod support;

use std::time::{Duration, Instant};

use support::Zk;
use zk_recipes::{Error, PromotedToLock, RetryPolicy, ZkAtomicLong};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_and_bad_values() {
    let zk = Zk::start("atomic-ops").await;
    let session = zk.session().await;
    let raw = zk.raw().await;
    let long = ZkAtomicLong::new(&session, "/counters/a", RetryPolicy::default()).unwrap();
    assert_eq!(long.get().await.unwrap().post_value(), 0);
    let r = long.add(5).await.unwrap();
    assert!(r.succeeded());
    assert_eq!((r.pre_value(), r.post_value()), (0, 5));
    assert_eq!(long.decrement().await.unwrap().post_value(), 4);
    assert_eq!(long.subtract(10).await.unwrap().post_value(), -6);
    assert!(!long.compare_and_set(7, 1).await.unwrap().succeeded());
    assert!(long.compare_and_set(-6, 1).await.unwrap().succeeded());
    long.force_set(41).await.unwrap();
    assert_eq!(long.increment().await.unwrap().post_value(), 42);
    let (data, _) = raw.get_data("/counters/a").await.unwrap();
    assert_eq!(data, 42i64.to_be_bytes());
    assert!(!long.initialize(3).await.unwrap());
    let err = long.subtract(i64::MIN).await.unwrap_err();
    assert!(matches!(err, Error::BadCount { .. }), "{err}");
    long.force_set(i64::MAX).await.unwrap();
    assert!(matches!(
        long.increment().await.unwrap_err(),
        Error::BadCount { .. }
    ));

    // Not 8 bytes: a typed error, nothing written.
    raw.set_data("/counters/a", b"12345", None).await.unwrap();
    let err = long.increment().await.unwrap_err();
    assert!(matches!(err, Error::BadCount { .. }), "{err}");
    assert_eq!(raw.get_data("/counters/a").await.unwrap().0, b"12345");

    // Promotion: the lock path is checked.
    let lock = PromotedToLock::new("/counters/a/lock", Duration::from_secs(1)).unwrap();
    let again = ZkAtomicLong::new(&session, "/counters/a", RetryPolicy::new(1)).unwrap();
    assert!(matches!(
        again.with_promotion(lock).unwrap_err(),
        Error::InvalidPath { .. }
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_workers_increment_exactly() {
    let per_worker: u64 = std::env::var("ZK_ATOMIC_INCREMENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    let classes = tempfile::tempdir().unwrap();
    let jars: Vec<&str> = include_str!("../examples/bench-peers/classpath.txt")
        .lines()
        .collect();
    let java = support::compile_java(
        "tests/java/AtomicIncrements.java",
        &jars,
        "libcurator-recipes-java libcurator-framework-java",
        classes.path(),
    )
    .await;
    let zk = Zk::start("atomic-many").await;
    let (java_threads, workers) = match &java {
        Ok(_) => (8u64, 8u64),
        Err(why) => {
            println!("Java not run: {why}");
            (0, 16)
        }
    };
    let start = Instant::now();
    let java = match java {
        Ok(classpath) => Some(
            tokio::process::Command::new("java")
                .arg("-cp")
                .arg(classpath)
                .arg("AtomicIncrements")
                .arg(&zk.connect)
                .arg("/counters/many")
                .arg("/counters/lock")
                .arg(java_threads.to_string())
                .arg(per_worker.to_string())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap(),
        ),
        Err(_) => None,
    };
    let mut tasks = Vec::new();
    for w in 0..workers {
        let session = zk.session().await;
        tasks.push(tokio::spawn(async move {
            let lock = PromotedToLock::new("/counters/lock", Duration::from_secs(5)).unwrap();
            let retry = RetryPolicy::new(5)
                .with_backoff(Duration::from_millis(1), Duration::from_millis(20));
            let long = ZkAtomicLong::new(&session, "/counters/many", retry)
                .unwrap()
                .with_promotion(lock)
                .unwrap();
            let mut tries = 0u64;
            for _ in 0..per_worker {
                loop {
                    let r = long.increment().await.unwrap();
                    tries += u64::from(r.stats().optimistic_tries() + r.stats().promoted_tries());
                    if r.succeeded() {
                        break;
                    }
                }
            }
            let _ = w;
            tries
        }));
    }
    let mut tries = 0;
    for t in tasks {
        tries += t.await.unwrap();
    }
    if let Some(java) = java {
        let out = java.wait_with_output().await.unwrap();
        assert!(out.status.success(), "the Java workers failed");
        let out = String::from_utf8_lossy(&out.stdout);
        let java_tries: u64 = out
            .trim()
            .strip_prefix("tries ")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("Java said {out:?}"));
        tries += java_tries;
    }
    let session = zk.session().await;
    let long = ZkAtomicLong::new(&session, "/counters/many", RetryPolicy::default()).unwrap();
    let total = (workers + java_threads) * per_worker;
    assert_eq!(long.get().await.unwrap().post_value(), total as i64);
    println!(
        "{total} increments in {:?}, {:.2} tries per increment",
        start.elapsed(),
        tries as f64 / total as f64
    );
}
