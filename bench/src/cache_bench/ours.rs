//! Our side of a round: a `ZkTreeCache` on its own session, its first view timed and its
//! heap counted (the live bytes this process allocated while the cache holds the tree), then
//! changes made by another client timed until the cache reports each.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Instant;

use zk_recipes::{Session, SessionOptions, TreeCacheOptions, TreeEvent, ZkTreeCache};
use zookeeper_client as zkc;

use crate::{quantile, Round, ROOT};

/// The system allocator, counting the bytes live at any moment (the figure that compares
/// with a JVM's used heap after a GC).
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

pub async fn round(connect: &str, raw: &zkc::Client, paths: &[String]) -> Round {
    let mut out = Round::default();
    let session = match Session::connect(SessionOptions::new(connect)).await {
        Ok(session) => session,
        Err(e) => {
            eprintln!("cache-bench: no session: {e}");
            return out;
        }
    };
    let before = LIVE.load(Ordering::Relaxed);
    let started = Instant::now();
    let cache = ZkTreeCache::start(&session, ROOT, TreeCacheOptions::new()).unwrap();
    if let Err(e) = cache.initialized().await {
        eprintln!("cache-bench: our cache: {e}");
        return out;
    }
    out.view_ms = Some(started.elapsed().as_secs_f64() * 1e3);
    let (view, mut events) = cache.subscribe();
    let nodes = view.len();
    drop(view);
    // Let the first view's burst buffers go before counting.
    tokio::task::yield_now().await;
    let grown = LIVE.load(Ordering::Relaxed) - before;
    out.nodes = Some(nodes);
    out.bytes_per_node = Some(grown as f64 / nodes.max(1) as f64);

    let mut event_us = Vec::new();
    let mut write_us = Vec::new();
    for (i, path) in paths.iter().enumerate() {
        let data = format!("r{i}-{:?}", Instant::now());
        let started = Instant::now();
        if let Err(e) = raw.set_data(path, data.as_bytes(), None).await {
            eprintln!("cache-bench: write {path}: {e}");
            return out;
        }
        write_us.push(started.elapsed().as_secs_f64() * 1e6);
        loop {
            match tokio::time::timeout(std::time::Duration::from_secs(10), events.recv()).await {
                Ok(Some(TreeEvent::Changed { path: p, .. })) if p == *path => break,
                Ok(Some(_)) => {}
                _ => {
                    eprintln!("cache-bench: no event for {path}");
                    return out;
                }
            }
        }
        event_us.push(started.elapsed().as_secs_f64() * 1e6);
    }
    out.event_p50_us = quantile(&mut event_us, 0.5);
    out.event_p99_us = quantile(&mut event_us, 0.99);
    out.write_p50_us = quantile(&mut write_us, 0.5);
    cache.close().await;
    session.close().await;
    out
}
