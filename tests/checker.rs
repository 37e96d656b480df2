//! The history checker of the fault tests, on made-up histories: a clean one passes, and a
//! history that breaks each invariant is caught. No ZooKeeper needed.

#[path = "support/history.rs"]
mod history;

use std::time::{Duration, Instant};

use history::{
    check, Entry, Events, Grant, Outcome, Probe, Report, Sharing, Store, Violation, Write, ANCHOR,
};

const BOUND: Duration = Duration::from_secs(10);

/// Milliseconds after a fixed origin.
fn at(origin: Instant, ms: u64) -> Option<Instant> {
    Some(origin + Duration::from_millis(ms))
}

fn grant(lock: &str, token: u64, session: i64, t: Option<Instant>) -> Grant {
    Grant {
        lock: lock.into(),
        token,
        session,
        worker: format!("w{session}"),
        at: t,
    }
}

fn write(
    op: &str,
    token: u64,
    session: i64,
    sent: Option<Instant>,
    done: Option<Instant>,
    outcome: Outcome,
) -> Write {
    Write {
        lock: "a".into(),
        token,
        session,
        worker: format!("w{session}"),
        op: op.into(),
        believed_held: true,
        sent,
        done,
        outcome,
    }
}

fn entry(op: &str, token: u64) -> Entry {
    Entry {
        op: op.into(),
        token,
        shared: false,
    }
}

fn reader(op: &str, token: u64) -> Entry {
    Entry {
        shared: true,
        ..entry(op, token)
    }
}

/// Lock `a` shared as `sharing`, with one grant per token (session = token) and one accepted
/// write per entry of `log` (sent and acknowledged in log order, 10 ms apart).
fn shared_history(sharing: Sharing, log: Vec<Entry>) -> Events {
    let o = Instant::now();
    let mut e = Events::default();
    let mut tokens: Vec<u64> = log.iter().map(|x| x.token).collect();
    tokens.sort();
    tokens.dedup();
    e.grants = tokens
        .iter()
        .map(|t| grant("a", *t, *t as i64, at(o, 0)))
        .collect();
    e.writes = log
        .iter()
        .enumerate()
        .map(|(i, x)| {
            let t = 10 * i as u64 + 1;
            write(
                &x.op,
                x.token,
                x.token as i64,
                at(o, t),
                at(o, t + 1),
                Outcome::Accepted,
            )
        })
        .collect();
    e.stores.insert(
        "a".into(),
        Store {
            counter: log.len() as u64,
            log,
        },
    );
    e.probes = vec![Probe {
        lock: "a".into(),
        healed_at: o,
        acquired_at: at(o, 1),
    }];
    e.leftovers.insert("a".into(), vec![ANCHOR.into()]);
    e.sharing.insert("a".into(), sharing);
    e
}

/// Lock `a`: session 1 holds token 41 and writes a1, a2; it freezes; session 2 is granted 42
/// and writes b1; session 1 wakes, still believing it holds, and its write a3 is refused.
fn clean(o: Instant) -> Events {
    let mut e = Events {
        grants: vec![grant("a", 41, 1, at(o, 0)), grant("a", 42, 2, at(o, 100))],
        writes: vec![
            write("a1", 41, 1, at(o, 1), at(o, 2), Outcome::Accepted),
            write("a2", 41, 1, at(o, 3), at(o, 4), Outcome::Accepted),
            write("b1", 42, 2, at(o, 101), at(o, 102), Outcome::Accepted),
            write(
                "a3",
                41,
                1,
                at(o, 200),
                at(o, 201),
                Outcome::Refused("session expired".into()),
            ),
        ],
        ..Events::default()
    };
    e.stores.insert(
        "a".into(),
        Store {
            counter: 3,
            log: vec![entry("a1", 41), entry("a2", 41), entry("b1", 42)],
        },
    );
    e.probes = vec![Probe {
        lock: "a".into(),
        healed_at: o + Duration::from_millis(300),
        acquired_at: at(o, 400),
    }];
    e.leftovers.insert("a".into(), vec![ANCHOR.into()]);
    e
}

fn violations(e: &Events) -> Vec<Violation> {
    check(e, BOUND).violations
}

#[test]
fn a_clean_history_passes_and_a_stale_belief_is_no_violation() {
    let report: Report = check(&clean(Instant::now()), BOUND);
    assert_eq!(report.violations, vec![]);
    assert_eq!(
        (report.accepted, report.refused, report.applied()),
        (3, 1, 3)
    );
    assert_eq!(report.stale_beliefs, 1, "a3 was sent believing, after 42");
    assert_eq!(report.lost, 0);
    assert_eq!(report.recovery, Some(Duration::from_millis(100)));
}

#[test]
fn interleaved_tokens_are_overlapping_critical_sections() {
    let o = Instant::now();
    let mut e = clean(o);
    // The frozen holder's a3 is accepted between 42's writes: 41, 42, 41, 42.
    e.writes[3].outcome = Outcome::Accepted;
    e.writes.push(write(
        "b2",
        42,
        2,
        at(o, 300),
        at(o, 301),
        Outcome::Accepted,
    ));
    e.stores.get_mut("a").unwrap().log = vec![
        entry("a1", 41),
        entry("b1", 42),
        entry("a3", 41),
        entry("b2", 42),
    ];
    e.stores.get_mut("a").unwrap().counter = 4;
    e.writes.retain(|w| w.op != "a2");
    let v = violations(&e);
    assert!(
        v.iter().any(
            |x| matches!(x, Violation::Overlap { token: 41, after_token: 42, op, .. } if op == "a3")
        ),
        "{v:?}"
    );
    assert!(
        v.iter().any(|x| matches!(
            x,
            Violation::Overlap {
                token: 42,
                after_token: 41,
                ..
            }
        )),
        "{v:?}"
    );
}

#[test]
fn a_write_sent_after_a_newer_tokens_write_was_acknowledged_must_not_be_accepted() {
    let o = Instant::now();
    let mut e = clean(o);
    // The store's order is clean (41, 41, 41, 42) but real time says a3 left after b1 had
    // been acknowledged: the store's log cannot be right, or a stale write got through.
    e.writes[3].outcome = Outcome::Accepted;
    let store = e.stores.get_mut("a").unwrap();
    store.log = vec![
        entry("a1", 41),
        entry("a2", 41),
        entry("a3", 41),
        entry("b1", 42),
    ];
    store.counter = 4;
    assert_eq!(
        violations(&e),
        vec![Violation::StaleAfterNewer {
            lock: "a".into(),
            op: "a3".into(),
            token: 41,
            newer_op: "b1".into(),
            newer_token: 42,
        }]
    );
}

#[test]
fn tokens_that_go_back_are_caught() {
    let o = Instant::now();
    let mut e = clean(o);
    // Contiguous runs, but 42's run comes before 41's: the later grant had the smaller token.
    e.stores.get_mut("a").unwrap().log = vec![entry("b1", 42), entry("a1", 41), entry("a2", 41)];
    for w in &mut e.writes {
        w.sent = None;
        w.done = None;
    }
    assert_eq!(
        violations(&e),
        vec![Violation::TokenWentBack {
            lock: "a".into(),
            token: 41,
            op: "a1".into(),
            after_token: 42,
        }]
    );
}

#[test]
fn a_token_granted_twice_and_a_write_under_a_token_never_granted_are_caught() {
    let o = Instant::now();
    let mut e = clean(o);
    e.grants.push(grant("a", 42, 3, at(o, 150)));
    assert_eq!(
        violations(&e),
        vec![Violation::TokenGrantedTwice {
            lock: "a".into(),
            token: 42,
            sessions: vec![2, 3],
        }]
    );

    let mut e = clean(o);
    e.writes.push(write(
        "c1",
        43,
        3,
        at(o, 250),
        at(o, 251),
        Outcome::Accepted,
    ));
    let store = e.stores.get_mut("a").unwrap();
    store.log.push(entry("c1", 43));
    store.counter = 4;
    assert_eq!(
        violations(&e),
        vec![Violation::NotGranted {
            lock: "a".into(),
            op: "c1".into(),
            token: 43,
            session: 3,
        }]
    );
}

#[test]
fn lost_and_doubled_updates_are_caught() {
    let o = Instant::now();
    // Lost: b1 was acknowledged but the store does not have it.
    let mut e = clean(o);
    let store = e.stores.get_mut("a").unwrap();
    store.log.pop();
    store.counter = 2;
    let report = check(&e, BOUND);
    assert_eq!(
        report.violations,
        vec![Violation::AcceptedButMissing {
            lock: "a".into(),
            op: "b1".into()
        }]
    );
    assert_eq!(report.lost, 1);

    // Doubled: three operations, and the counter says four.
    let mut e = clean(o);
    e.stores.get_mut("a").unwrap().counter = 4;
    assert_eq!(
        violations(&e),
        vec![Violation::CounterMismatch {
            lock: "a".into(),
            counter: 4,
            accepted: 3,
        }]
    );

    // Applied twice, or applied without anyone asking.
    let mut e = clean(o);
    let store = e.stores.get_mut("a").unwrap();
    store.log.push(entry("b1", 42));
    store.log.push(entry("zz", 42));
    store.counter = 5;
    assert_eq!(
        violations(&e),
        vec![
            Violation::Phantom {
                lock: "a".into(),
                op: "b1".into()
            },
            Violation::Phantom {
                lock: "a".into(),
                op: "zz".into()
            },
        ]
    );

    // Refused, the client was told, yet the store has it.
    let mut e = clean(o);
    let store = e.stores.get_mut("a").unwrap();
    store.log.push(entry("a3", 41));
    store.counter = 4;
    let v = violations(&e);
    assert!(
        v.contains(&Violation::RefusedButApplied {
            lock: "a".into(),
            op: "a3".into(),
            error: "session expired".into(),
        }),
        "{v:?}"
    );
}

#[test]
fn unknown_outcomes_are_resolved_by_the_store() {
    let o = Instant::now();
    let mut e = clean(o);
    e.writes[2].outcome = Outcome::Unknown("connection lost".into()); // b1: in the store
    e.writes.push(write(
        "b2",
        42,
        2,
        at(o, 103),
        None,
        Outcome::Unknown("connection lost".into()),
    ));
    let report = check(&e, BOUND);
    assert_eq!(report.violations, vec![]);
    assert_eq!((report.unknown_done, report.unknown_not_done), (1, 1));
    assert_eq!(report.applied(), 3);
}

#[test]
fn a_lock_not_acquirable_after_the_heal_is_caught() {
    let o = Instant::now();
    let mut e = clean(o);
    e.probes[0].acquired_at = Some(e.probes[0].healed_at + BOUND + Duration::from_millis(1));
    assert!(matches!(
        violations(&e).as_slice(),
        [Violation::NotRecovered { took: Some(_), .. }]
    ));
    e.probes[0].acquired_at = None;
    assert!(matches!(
        violations(&e).as_slice(),
        [Violation::NotRecovered { took: None, .. }]
    ));
    e.probes.clear();
    assert!(matches!(
        violations(&e).as_slice(),
        [Violation::Missing {
            what: "a probe after the heal",
            ..
        }]
    ));
}

#[test]
fn a_lock_node_left_behind_is_caught_and_the_anchor_is_not_one() {
    let o = Instant::now();
    let mut e = clean(o);
    let node = "_c_0f8e3a41-2b7c-4d0e-9a55-1c2d3e4f5a6b-lock-0000000042";
    e.leftovers
        .insert("a".into(), vec![ANCHOR.into(), node.into()]);
    assert_eq!(
        violations(&e),
        vec![Violation::LeftoverNode {
            lock: "a".into(),
            node: node.into()
        }]
    );
    e.leftovers.clear();
    assert!(matches!(
        violations(&e).as_slice(),
        [Violation::Missing { .. }]
    ));
}

#[test]
fn a_lock_without_a_store_reading_is_not_passed() {
    let mut e = clean(Instant::now());
    e.stores.clear();
    assert!(matches!(
        violations(&e).as_slice(),
        [Violation::Missing {
            what: "the store's final state",
            ..
        }]
    ));
}

#[test]
fn readers_share_a_read_write_lock_but_never_with_a_writer() {
    let clean = vec![
        entry("w1", 10),
        reader("r1", 11),
        reader("r2", 12),
        reader("r3", 11),
        entry("w2", 13),
        reader("r4", 14),
    ];
    assert_eq!(
        violations(&shared_history(Sharing::ReadWrite, clean)),
        vec![]
    );

    // A reader granted behind writer 10 wrote before it was done.
    let v = violations(&shared_history(
        Sharing::ReadWrite,
        vec![entry("w1", 10), reader("r1", 11), entry("w2", 10)],
    ));
    assert!(
        matches!(
            &v[..],
            [
                Violation::Overlap {
                    token: 10,
                    after_token: 11,
                    ..
                },
                ..
            ]
        ),
        "{v:?}"
    );
    // A reader ahead of writer 13 wrote after it.
    let v = violations(&shared_history(
        Sharing::ReadWrite,
        vec![reader("r1", 11), entry("w1", 13), reader("r2", 11)],
    ));
    assert!(
        matches!(
            &v[..],
            [
                Violation::Overlap {
                    token: 11,
                    after_token: 13,
                    ..
                },
                ..
            ]
        ),
        "{v:?}"
    );
    // The same log as an exclusive lock's is an overlap (readers 11 and 12 interleave).
    let v = violations(&shared_history(
        Sharing::Exclusive,
        vec![reader("r1", 11), reader("r2", 12), reader("r3", 11)],
    ));
    assert!(matches!(&v[..], [Violation::Overlap { .. }, ..]), "{v:?}");
}

#[test]
fn a_semaphore_never_has_more_leases_writing_than_permits() {
    // Two permits: leases 1 and 2 interleave, then 3 after 1 is done.
    let clean = vec![
        entry("a1", 1),
        entry("b1", 2),
        entry("a2", 1),
        entry("c1", 3),
        entry("b2", 2),
        entry("c2", 3),
    ];
    assert_eq!(
        violations(&shared_history(Sharing::Permits(2), clean)),
        vec![]
    );
    // Three leases spanning one stretch of the log.
    let v = violations(&shared_history(
        Sharing::Permits(2),
        vec![
            entry("a1", 1),
            entry("b1", 2),
            entry("c1", 3),
            entry("a2", 1),
            entry("b2", 2),
        ],
    ));
    assert_eq!(
        v,
        vec![Violation::TooManyHolders {
            lock: "a".into(),
            op: "c1".into(),
            tokens: vec![1, 2, 3],
            permits: 2,
        }]
    );
}
