//! What the census shows of `ZkMutex` and `ZkLeaderElection`: requests per grant, and where an
//! uncontended acquire's, a handoff's and a leader handover's time goes.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::args::Args;
use crate::census::{counts, Census};
use crate::handover::run_handover;
use crate::locks::Lib;
use crate::measure::Latency;
use crate::stats::median;
use crate::throughput::{run_locks, Layout};
use crate::CONTENDERS;

/// Where the time of a `ZkMutex` handoff goes, from a census log of one lock (medians, µs).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Breakdown {
    /// Handoffs with a wake-up.
    pub handoffs: usize,
    /// From the holder calling release to the next waiter's watch event.
    #[serde(rename = "release_to_event_us")]
    pub release_to_event: Option<f64>,
    /// From the watch event to the waiter asking for the children again.
    #[serde(rename = "event_to_relist_us")]
    pub event_to_relist: Option<f64>,
    /// From asking for the children again to the grant (a read round trip and the decision).
    #[serde(rename = "relist_to_grant_us")]
    pub relist_to_grant: Option<f64>,
    /// From the watch event to the grant, for handoffs without a re-list.
    #[serde(rename = "event_to_grant_direct_us")]
    pub event_to_grant_direct: Option<f64>,
    /// From the holder calling release to the next grant.
    #[serde(rename = "total_us")]
    pub total: Option<f64>,
    /// Its 99th percentile.
    #[serde(rename = "total_p99_us")]
    pub total_p99: Option<f64>,
    /// The holder's delete round trip (release called to `"released"`).
    #[serde(rename = "delete_rtt_us")]
    pub delete_rtt: Option<f64>,
}

/// Splits each handoff of a one-lock census log at the waiter's watch event and re-list.
/// A handoff starts at the `"release"` mark (or, without one, the previous grant).
pub fn breakdown(log: &[(u64, String)]) -> Breakdown {
    let (mut to_event, mut to_relist, mut relist_to_grant, mut direct, mut total, mut delete) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut last_grant, mut release) = (None::<u64>, None::<u64>);
    // Release calls whose delete is not answered yet, oldest first: one holder at a time, so
    // the answers come in this order (an answer may come after the next handoff's release).
    let mut unanswered = std::collections::VecDeque::new();
    let (mut watch, mut relist) = (None::<u64>, None::<u64>);
    for (t, label) in log {
        let t = *t;
        match label.as_str() {
            "release" => {
                release.get_or_insert(t);
                unanswered.push_back(t);
            }
            "released" => {
                if let Some(r) = unanswered.pop_front() {
                    delete.push(t.saturating_sub(r));
                }
            }
            "watch fired" => {
                watch.get_or_insert(t);
            }
            "listing again" => relist = Some(t),
            "granted" => {
                if let (Some(start), Some(w)) = (release.or(last_grant), watch) {
                    to_event.push(w.saturating_sub(start));
                    total.push(t.saturating_sub(start));
                    match relist {
                        Some(r) if r >= w => {
                            to_relist.push(r - w);
                            relist_to_grant.push(t.saturating_sub(r));
                        }
                        _ => direct.push(t.saturating_sub(w)),
                    }
                }
                last_grant = Some(t);
                (release, watch, relist) = (None, None, None);
            }
            _ => {}
        }
    }
    Breakdown {
        handoffs: total.len(),
        release_to_event: Latency::of(to_event).p50,
        event_to_relist: Latency::of(to_relist).p50,
        relist_to_grant: Latency::of(relist_to_grant).p50,
        event_to_grant_direct: Latency::of(direct).p50,
        total: Latency::of(total.clone()).p50,
        total_p99: Latency::of(total).p99,
        delete_rtt: Latency::of(delete).p50,
    }
}

impl Breakdown {
    /// Each part's median over several breakdowns (the rounds'), their handoffs summed.
    pub fn median_of(all: &[&Breakdown]) -> Breakdown {
        let m = |part: fn(&Breakdown) -> Option<f64>| median(all.iter().map(|b| part(b)));
        Breakdown {
            handoffs: all.iter().map(|b| b.handoffs).sum(),
            release_to_event: m(|b| b.release_to_event),
            event_to_relist: m(|b| b.event_to_relist),
            relist_to_grant: m(|b| b.relist_to_grant),
            event_to_grant_direct: m(|b| b.event_to_grant_direct),
            total: m(|b| b.total),
            total_p99: m(|b| b.total_p99),
            delete_rtt: m(|b| b.delete_rtt),
        }
    }
}

/// Requests per grant of `ZkMutex` with 8 contenders, from its spans and events.
#[derive(Clone, Debug, Default)]
pub struct RoundTrips {
    pub grants: u64,
    /// `create` + `getChildren`, pipelined: one round trip.
    pub enqueues: f64,
    /// `exists` + watch on the predecessor.
    pub watches: f64,
    /// Watch events received.
    pub wakeups: f64,
    /// `getChildren` after a wake-up (the waiter could not decide from what it knew).
    pub relists: f64,
    /// Where the handoffs' time goes.
    pub breakdown: Breakdown,
    /// Where an uncontended acquire's time goes.
    pub uncontended: AcquireBreakdown,
    /// Where a leader handover's time goes.
    pub handover: HandoverBreakdown,
}

/// Where the time of a `ZkLeaderElection` handover goes (medians, µs): from the leader calling
/// `resign()` to the follower's `campaign()` returning, split at the follower's events.
#[derive(Clone, Debug, Default, Serialize)]
pub struct HandoverBreakdown {
    pub handovers: usize,
    /// The leader's delete round trip (`resign()` called to `"released"`).
    #[serde(rename = "resign_delete_rtt_us")]
    pub delete_rtt: Option<f64>,
    /// From `resign()` called to the follower's `"watch fired"`.
    #[serde(rename = "resign_to_event_us")]
    pub resign_to_event: Option<f64>,
    /// From the watch event to `"listing again"` (the follower asks for the children).
    #[serde(rename = "event_to_relist_us")]
    pub event_to_relist: Option<f64>,
    /// From asking for the children to `"granted"` (a read round trip and the decision).
    #[serde(rename = "relist_to_grant_us")]
    pub relist_to_grant: Option<f64>,
    /// From the watch event to `"granted"`, for handovers without a re-list.
    #[serde(rename = "event_to_grant_direct_us")]
    pub event_to_grant_direct: Option<f64>,
    /// From `"granted"` to `campaign()` returning.
    #[serde(rename = "grant_to_return_us")]
    pub grant_to_return: Option<f64>,
    /// The whole handover.
    #[serde(rename = "total_us")]
    pub total: Option<f64>,
    #[serde(rename = "total_p99_us")]
    pub total_p99: Option<f64>,
}

/// Splits each handover of a census log of the handover workload: from the `"resign"` mark to
/// the `"campaigned"` mark, at the follower's `"watch fired"`, `"listing again"` and
/// `"granted"`; the leader's `"released"` answers the oldest unanswered resign.
fn handover_breakdown(log: &[(u64, String)]) -> HandoverBreakdown {
    let (mut delete, mut to_event, mut to_relist, mut relist_to_grant) =
        (vec![], vec![], vec![], vec![]);
    let (mut direct, mut to_return, mut total) = (vec![], vec![], vec![]);
    let mut unanswered = std::collections::VecDeque::new();
    let (mut resign, mut watch, mut relist, mut granted) =
        (None::<u64>, None::<u64>, None::<u64>, None::<u64>);
    for (t, label) in log {
        let t = *t;
        match label.as_str() {
            "resign" => {
                (resign, watch, relist, granted) = (Some(t), None, None, None);
                unanswered.push_back(t);
            }
            "released" => {
                if let Some(r) = unanswered.pop_front() {
                    delete.push(t.saturating_sub(r));
                }
            }
            "watch fired" if resign.is_some() => {
                watch.get_or_insert(t);
            }
            "listing again" if watch.is_some() => relist = Some(t),
            "granted" if resign.is_some() => granted = Some(t),
            "campaigned" => {
                if let (Some(r), Some(w), Some(g)) = (resign, watch, granted) {
                    to_event.push(w.saturating_sub(r));
                    match relist {
                        Some(l) => {
                            to_relist.push(l.saturating_sub(w));
                            relist_to_grant.push(g.saturating_sub(l));
                        }
                        None => direct.push(g.saturating_sub(w)),
                    }
                    to_return.push(t.saturating_sub(g));
                    total.push(t.saturating_sub(r));
                }
                resign = None;
            }
            _ => {}
        }
    }
    HandoverBreakdown {
        handovers: total.len(),
        delete_rtt: Latency::of(delete).p50,
        resign_to_event: Latency::of(to_event).p50,
        event_to_relist: Latency::of(to_relist).p50,
        relist_to_grant: Latency::of(relist_to_grant).p50,
        event_to_grant_direct: Latency::of(direct).p50,
        grant_to_return: Latency::of(to_return).p50,
        total: Latency::of(total.clone()).p50,
        total_p99: Latency::of(total).p99,
    }
}

/// Where the time of an uncontended `ZkMutex::lock` goes (medians, µs).
#[derive(Clone, Debug, Default, Serialize)]
pub struct AcquireBreakdown {
    pub acquires: usize,
    /// From calling `lock` to `"enqueued"` (create and list answered, back in the caller).
    #[serde(rename = "to_enqueued_us")]
    pub to_enqueued: Option<f64>,
    /// From `"enqueued"` to `"granted"` (deciding on the listing).
    #[serde(rename = "enqueued_to_granted_us")]
    pub enqueued_to_granted: Option<f64>,
    /// From `"granted"` to `lock` returning (building the guard).
    #[serde(rename = "granted_to_return_us")]
    pub granted_to_return: Option<f64>,
    /// The whole `lock` call.
    #[serde(rename = "total_us")]
    pub total: Option<f64>,
}

/// Splits each uncontended acquire of a census log at the library's events.
fn acquire_breakdown(log: &[(u64, String)]) -> AcquireBreakdown {
    let (mut a, mut b, mut c, mut total) = (vec![], vec![], vec![], vec![]);
    let (mut asked, mut enqueued, mut granted) = (None::<u64>, None::<u64>, None::<u64>);
    for (t, label) in log {
        match label.as_str() {
            "acquire" => (asked, enqueued, granted) = (Some(*t), None, None),
            "enqueued" => enqueued = Some(*t),
            "granted" => granted = Some(*t),
            "acquired" => {
                if let (Some(s), Some(e), Some(g)) = (asked, enqueued, granted) {
                    a.push(e.saturating_sub(s));
                    b.push(g.saturating_sub(e));
                    c.push(t.saturating_sub(g));
                    total.push(t.saturating_sub(s));
                }
                asked = None;
            }
            _ => {}
        }
    }
    AcquireBreakdown {
        acquires: total.len(),
        to_enqueued: Latency::of(a).p50,
        enqueued_to_granted: Latency::of(b).p50,
        granted_to_return: Latency::of(c).p50,
        total: Latency::of(total).p50,
    }
}

/// Runs one contender, 8 contenders and leader handovers, each for a second with the census
/// on.
pub async fn census_rounds(connect: &str, dir: &str, census: &Census, args: &Args) -> RoundTrips {
    let short = Args {
        warmup: Duration::from_millis(300),
        measure: Duration::from_secs(1),
        ..args.clone()
    };
    census.start();
    run_locks(
        Lib::Ours,
        connect,
        &format!("{dir}/one"),
        (1, 1),
        Layout::Roots,
        &short,
        Some(census),
    )
    .await;
    let solo = census.stop();
    census.start();
    run_locks(
        Lib::Ours,
        connect,
        &format!("{dir}/eight"),
        (1, CONTENDERS),
        Layout::Roots,
        &short,
        Some(census),
    )
    .await;
    let log = census.stop();
    census.start();
    run_handover(
        connect,
        &format!("{dir}/handover"),
        short.warmup,
        short.measure,
        Some(census),
    )
    .await;
    let handovers = census.stop();
    let counts = counts(&log);
    let grants = counts.get("granted").copied().unwrap_or(0);
    let per = |k: &str| counts.get(k).copied().unwrap_or(0) as f64 / grants.max(1) as f64;
    RoundTrips {
        breakdown: breakdown(&log),
        uncontended: acquire_breakdown(&solo),
        handover: handover_breakdown(&handovers),
        grants,
        enqueues: per("enqueued"),
        watches: per("span:wait"),
        wakeups: per("watch fired"),
        relists: per("listing again"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(events: &[(u64, &str)]) -> Vec<(u64, String)> {
        events.iter().map(|&(t, l)| (t, l.to_owned())).collect()
    }

    #[test]
    fn a_handover_splits_at_the_followers_events_and_its_delete_answers_the_resign() {
        // The first campaign's grant comes before any resign and is no handover; the second
        // handover lists again; the first delete is answered after the follower returned.
        let log = log(&[
            (0, "granted"),
            (10, "campaigning"),
            (20, "enqueued"),
            (1_000, "resign"),
            (1_600, "watch fired"),
            (1_610, "granted"),
            (1_615, "campaigned"),
            (1_700, "released"),
            (5_000, "resign"),
            (5_600, "released"),
            (5_700, "watch fired"),
            (5_710, "listing again"),
            (6_010, "granted"),
            (6_020, "campaigned"),
        ]);
        let b = handover_breakdown(&log);
        assert_eq!(b.handovers, 2);
        // Nearest-rank p50 of two samples is the smaller one, in µs.
        assert_eq!(b.delete_rtt, Some(0.6));
        assert_eq!(b.resign_to_event, Some(0.6));
        assert_eq!(b.event_to_relist, Some(0.01));
        assert_eq!(b.relist_to_grant, Some(0.3));
        assert_eq!(b.event_to_grant_direct, Some(0.01));
        assert_eq!(b.total, Some(0.615));
        assert_eq!(b.total_p99, Some(1.02));
    }
}
