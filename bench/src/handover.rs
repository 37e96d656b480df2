//! The leader-handover workload: two sessions, each a candidate of one election. The follower
//! campaigns; once ZooKeeper reports its watch on the leader's node, the leader resigns; a
//! handover is the time from the `resign()` call to the follower's `campaign()` returning.
//! Then the roles swap. Curator's `LeaderLatch` runs the same protocol in the Java peer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::census::Census;
use crate::locks::{Conn, Lib};
use crate::measure::{now_ns, Latency};
use crate::zk::total_watches;

/// What a handover window measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct HandoverFigures {
    /// Handovers in the window.
    pub handovers: usize,
    pub seconds: f64,
    /// From the leader calling resign to the follower's campaign returning.
    pub handover: Latency,
    pub error: Option<String>,
}

/// Waits until the server holds more watches than `before` (the follower watches the leader's
/// node), or, when it does not report them, a moment.
pub async fn wait_watching(connect: &str, before: Option<u64>) -> Result<(), String> {
    let Some(before) = before else {
        tokio::time::sleep(Duration::from_millis(5)).await;
        return Ok(());
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if total_watches(connect).await.is_some_and(|now| now > before) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err("the follower set no watch within 10 s".into());
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
}

/// Runs handovers on the election at `path` for `warmup`, then measures them for `measure`.
/// With a census, marks each `"resign"` call and each `"campaigned"` return in it.
pub async fn run_handover(
    connect: &str,
    path: &str,
    warmup: Duration,
    measure: Duration,
    census: Option<&Census>,
) -> HandoverFigures {
    let failed = |error: String| HandoverFigures {
        error: Some(error),
        ..HandoverFigures::default()
    };
    let mut conns = Vec::new();
    let mut candidates = Vec::new();
    for i in 0..2 {
        let conn = match Conn::open(Lib::Ours, connect).await {
            Ok(conn) => conn,
            Err(e) => return failed(e),
        };
        let candidate = conn
            .candidate(path, &format!("candidate-{i}"))
            .expect("zk-recipes has elections");
        candidates.push(Arc::new(candidate));
        conns.push(conn);
    }
    let mark = |label: &str| {
        if let Some(census) = census {
            census.mark(label);
        }
    };
    let mut figures = HandoverFigures {
        seconds: measure.as_secs_f64(),
        ..HandoverFigures::default()
    };
    let mut samples = Vec::new();
    let result: Result<(), String> = async {
        let mut leader = candidates[0].campaign().await?;
        let mut l = 0;
        let start = now_ns() + warmup.as_nanos() as u64;
        let end = start + measure.as_nanos() as u64;
        while now_ns() < end {
            let f = 1 - l;
            let before = total_watches(connect).await;
            let follower = candidates[f].clone();
            let census = census.cloned();
            let campaign = tokio::spawn(async move {
                let leading = follower.campaign().await;
                let returned = now_ns();
                if let Some(census) = census {
                    census.mark("campaigned");
                }
                leading.map(|leading| (leading, returned))
            });
            if let Err(e) = wait_watching(connect, before).await {
                campaign.abort();
                return Err(e);
            }
            mark("resign");
            let resigned = now_ns();
            leader.resign().await?;
            let (leading, returned) = tokio::time::timeout(Duration::from_secs(30), campaign)
                .await
                .map_err(|_| "the follower was not elected within 30 s".to_owned())?
                .map_err(|e| format!("campaign task: {e}"))??;
            if resigned >= start && returned < end {
                samples.push(returned - resigned);
            }
            (leader, l) = (leading, f);
        }
        leader.resign().await
    }
    .await;
    figures.error = result.err();
    figures.handovers = samples.len();
    figures.handover = Latency::of(samples);
    for conn in conns {
        conn.close().await;
    }
    figures
}
