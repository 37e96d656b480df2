//! Times for people: UTC timestamps (RFC 3339) and short ages, without a calendar crate.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, by this machine's clock.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Now as `2026-12-01T09:07:22.123Z`.
pub fn iso_now() -> String {
    iso(now_ms())
}

/// `ms` since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC).
pub fn iso(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (the inverse of `civil_from_days`).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// A short age: `850ms`, `42s`, `3m12s`, `5h03m`, `2d04h`.
pub fn age(ms: i64) -> String {
    if ms < 0 {
        return "0s".to_owned();
    }
    let s = ms / 1000;
    match s {
        _ if ms < 1000 => format!("{ms}ms"),
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// A short span with a tenth of a second below a minute: `645ms`, `1.4s`, `10s`, `3m12s`.
pub fn span(ms: i64) -> String {
    match ms {
        ..0 => "0ms".to_owned(),
        0..1000 => format!("{ms}ms"),
        1000..60_000 if ms % 1000 == 0 => format!("{}s", ms / 1000),
        1000..60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        _ => age(ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_rfc3339() {
        assert_eq!(iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso(1_796_116_042_123), "2026-12-01T09:07:22.123Z");
        assert_eq!(iso(-1), "1969-12-31T23:59:59.999Z");
        for days in [-1000, 0, 11_016, 20_788, 60_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn spans_keep_a_tenth_of_a_second() {
        let got: Vec<String> = [-1, 645, 1000, 1449, 4_700, 10_000, 192_000]
            .into_iter()
            .map(span)
            .collect();
        assert_eq!(got, ["0ms", "645ms", "1s", "1.4s", "4.7s", "10s", "3m12s"]);
    }

    #[test]
    fn ages_are_short() {
        assert_eq!(age(-5), "0s");
        assert_eq!(age(850), "850ms");
        assert_eq!(age(42_000), "42s");
        assert_eq!(age(192_000), "3m12s");
        assert_eq!(age(5 * 3_600_000 + 3 * 60_000), "5h03m");
        assert_eq!(age(2 * 86_400_000 + 4 * 3_600_000), "2d04h");
    }
}
