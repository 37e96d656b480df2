//! `inspect`'s output: a table per queue for people, or the same report as JSON.

use std::fmt::Write;

use super::marks::Mark;
use super::model::{Contender, Queue, SessionState};
use super::Report;
use crate::time;

/// The widest owner label shown in a table (JSON has it whole).
const OWNER_WIDTH: usize = 40;

/// The report as JSON: indented for `inspect`, one line for `watch`.
pub fn json(report: &Report, pretty: bool) -> String {
    let written = if pretty {
        serde_json::to_string_pretty(report)
    } else {
        serde_json::to_string(report)
    };
    written.unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// The report as tables.
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    if report.queues.is_empty() {
        let _ = writeln!(
            out,
            "no lock queues under {}{}",
            report.path,
            if report.recursive {
                ""
            } else {
                " (add --recursive to look deeper)"
            }
        );
    }
    for (i, queue) in report.queues.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        queue_table(&mut out, queue);
    }
    out.push('\n');
    for note in &report.notes {
        let _ = writeln!(out, "note: {note}");
    }
    let _ = writeln!(
        out,
        "as of {} ({}); ages by this machine's clock",
        report.at,
        if report.sessions_checked {
            "sessions checked with cons/dump"
        } else {
            "sessions not checked"
        }
    );
    out
}

fn queue_table(out: &mut String, q: &Queue) {
    let mut head = format!("{}  {} ({})", q.path, q.kind, q.libraries.join(", "));
    if let Some(mark) = q.mark.as_deref().map(mark_of).and_then(Mark::describe) {
        let _ = write!(head, "  {mark}");
    }
    if let Some(key) = &q.key {
        let _ = write!(head, "  key {key:?}");
    }
    if let Some(p) = q.permits {
        let _ = write!(head, "  permits {p}");
    }
    match q.tokens {
        "none" => head.push_str("  no tokens"),
        "czxid" => head.push_str("  tokens: creation zxids"),
        _ => head.push_str("  tokens: sequence"),
    }
    let _ = write!(
        head,
        "  counter {} ({} left)",
        thousands(q.counter.next),
        thousands(q.counter.left)
    );
    let _ = writeln!(out, "{head}");
    if q.contenders.is_empty() && q.cut.is_none() {
        let _ = writeln!(out, "  nobody holds or waits");
    } else if !q.contenders.is_empty() {
        let show_wants = q.kind == "rwlock";
        let mut rows = vec![row_header(show_wants)];
        rows.extend(q.contenders.iter().map(|c| row(c, q.tokens, show_wants)));
        let widths: Vec<usize> = (0..rows[0].len())
            .map(|col| {
                rows.iter()
                    .map(|r| r[col].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for r in &rows {
            let mut line = String::from(" ");
            for (col, cell) in r.iter().enumerate() {
                let last = col + 1 == r.len();
                let pad = widths[col].saturating_sub(cell.chars().count());
                line.push(' ');
                // Numbers right-aligned, text left-aligned.
                if col == 0 || (col == token_column(show_wants) && cell != "TOKEN") {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    if !last {
                        line.push_str(&" ".repeat(pad));
                    }
                }
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
    if let Some(cut) = q.cut {
        let _ = writeln!(
            out,
            "  … cut: {} of {} children read (--max-nodes); the head of the queue is shown, {} \
             more not read",
            thousands(cut.shown as i64),
            thousands(cut.of as i64),
            thousands((cut.of - cut.shown) as i64)
        );
    }
    for w in &q.warnings {
        let _ = writeln!(out, "  ! {}: {}", w.kind, w.message);
    }
}

/// The mark a queue's JSON text names (the anchor's data; `""`: an earlier version's).
fn mark_of(text: &str) -> Mark {
    Mark::of(Some(text.as_bytes()), b"")
}

fn token_column(show_wants: bool) -> usize {
    if show_wants {
        4
    } else {
        3
    }
}

fn row_header(show_wants: bool) -> Vec<String> {
    let mut h = vec!["#", "ROLE", "NODE"];
    if show_wants {
        h.push("WANTS");
    }
    h.extend(["TOKEN", "SESSION", "SILENT", "AGE", "OWNER", "WAITS FOR"]);
    h.into_iter().map(str::to_owned).collect()
}

fn row(c: &Contender, tokens: &str, show_wants: bool) -> Vec<String> {
    let mut r = vec![c.position.to_string(), c.role.to_owned(), short(&c.node)];
    if show_wants {
        r.push(c.wants.to_owned());
    }
    // Decimal, as `ZK_LOCK_TOKEN` has it (a keyed lock's zxid too).
    let token = match (c.token, tokens) {
        (_, "none") | (None, _) => "-".to_owned(),
        (Some(t), _) => t.to_string(),
    };
    let session = match (&c.session, c.session_state) {
        (None, _) => "persistent".to_owned(),
        (Some(s), Some(SessionState::Disconnected)) => format!("{s} (no connection)"),
        (Some(s), Some(SessionState::Gone)) => format!("{s} (gone)"),
        (Some(s), _) => s.clone(),
    };
    let owner = c.owner.as_deref().unwrap_or("-");
    let owner = if owner.chars().count() > OWNER_WIDTH {
        let cut: String = owner.chars().take(OWNER_WIDTH - 1).collect();
        format!("{cut}…")
    } else {
        owner.to_owned()
    };
    // How long ago its server last answered it, of its timeout (`!` past half of it).
    let heard = match (c.silent_ms, c.session_timeout_ms) {
        (Some(silent), Some(timeout)) => format!(
            "{}/{}{}",
            time::span(silent),
            time::span(timeout),
            if super::model::silent_too_long(silent, timeout) {
                " !"
            } else {
                ""
            }
        ),
        _ => "-".to_owned(),
    };
    r.extend([
        token,
        session,
        heard,
        time::age(c.age_ms),
        owner,
        c.waits_for.as_deref().map_or_else(|| "-".to_owned(), short),
    ]);
    r
}

/// A node name with its uuid cut to 8 digits (`_c_9f70f7e8…-__READ__0000000001`, kazoo's
/// `3f2a9c0d…__lock__0000000000`); other text as it is. JSON keeps names whole.
pub fn short(text: &str) -> String {
    let (dir, name) = match text.rsplit_once('/') {
        Some((dir, name)) => (format!("{dir}/"), name),
        None => (String::new(), text),
    };
    let is_hex = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    // Curator's protected prefix and a 36-character UUID.
    let p = zk_recipes::layout::names::PROTECTED_PREFIX;
    let uuid_end = p.len() + 36;
    let cut = match name.get(..uuid_end) {
        Some(head) if head.starts_with(p) && is_hex(&head[p.len()..]) => Some(format!(
            "{p}{}…{}",
            &name[p.len()..p.len() + 8],
            &name[uuid_end..]
        )),
        _ => match name.get(..32) {
            Some(head) if is_hex(head) && name[32..].starts_with("__") => {
                Some(format!("{}…{}", &name[..8], &name[32..]))
            }
            _ => None,
        },
    };
    match cut {
        Some(cut) => format!("{dir}{cut}"),
        None => text.to_owned(),
    }
}

/// `2147483647` as `2,147,483,647`.
fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    if n < 0 {
        out.insert(0, '-');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_cut() {
        assert_eq!(
            short("_c_9f70f7e8-fee7-4037-b490-389beea82677-__READ__0000000001"),
            "_c_9f70f7e8…-__READ__0000000001"
        );
        assert_eq!(
            short("leases/_c_8f0873fc-3542-4397-8642-bc9c200df487-lease-0000000000"),
            "leases/_c_8f0873fc…-lease-0000000000"
        );
        assert_eq!(
            short("3f2a9c0d5e6b4f718293a4b5c6d7e8f9__lock__0000000000"),
            "3f2a9c0d…__lock__0000000000"
        );
        assert_eq!(short("lock-0000000001"), "lock-0000000001");
        assert_eq!(
            short("a free lease (2 of 2 taken)"),
            "a free lease (2 of 2 taken)"
        );
    }

    #[test]
    fn numbers_get_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(2_147_483_647), "2,147,483,647");
        assert_eq!(thousands(-1234), "-1,234");
    }
}
