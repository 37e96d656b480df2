//! The report of two fixed runs (`fixture.rs`) against the text and JSON it printed when the
//! renderer was written by hand (`testdata/`), so that a change of the renderer that changes
//! what it prints shows in a diff. `BENCH_BLESS=1 cargo test -p zk-recipes-bench report` writes
//! the files anew from today's renderer (then read the diff before committing it).

use std::path::Path;

use super::fixture;

/// Compares `actual` with `testdata/{name}` (`expected`, its text), or writes it there.
fn check(name: &str, expected: &str, actual: &str) {
    if std::env::var_os("BENCH_BLESS").is_some() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/report/testdata")
            .join(name);
        std::fs::write(&path, actual).expect("testdata is writable");
        return;
    }
    if expected == actual {
        return;
    }
    let (e, a): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let line = e.iter().zip(&a).take_while(|(e, a)| e == a).count();
    panic!(
        "{name} differs from line {}:\nexpected: {:?}\nactual:   {:?}\n(BENCH_BLESS=1 writes it \
         anew)",
        line + 1,
        e.get(line).copied().unwrap_or("(end)"),
        a.get(line).copied().unwrap_or("(end)"),
    );
}

fn json(report: &super::Report) -> String {
    serde_json::to_string_pretty(&report.json()).expect("the report serializes") + "\n"
}

#[test]
fn a_full_run_prints_its_table_and_targets_as_before() {
    let report = fixture::full();
    check(
        "full.txt",
        include_str!("testdata/full.txt"),
        &report.table(),
    );
    check(
        "full.json",
        include_str!("testdata/full.json"),
        &json(&report),
    );
}

#[test]
fn a_partial_run_prints_its_gaps_as_before() {
    let report = fixture::partial();
    check(
        "partial.txt",
        include_str!("testdata/partial.txt"),
        &report.table(),
    );
    check(
        "partial.json",
        include_str!("testdata/partial.json"),
        &json(&report),
    );
}
