//! The flash sale's pictures, drawn from its JSON report (so an earlier run can be drawn again
//! with `--plot-from`): SVG files next to the JSON, `{stem}-throughput.svg` (purchases/s per
//! lock kind, the median over the rounds as a bar and the rounds' min-max as a whisker, without
//! and with a frozen buyer) and `{stem}-latency.svg` (CDFs of the buyers' time to their answer,
//! one line per lock kind over all its rounds, without and with a frozen buyer).

use std::path::{Path, PathBuf};

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::kinds::{self, Kind};
use crate::sale::{Report, Variant};

/// A kind's colour, the same in every plot: reds for the Redis kinds, blues for PostgreSQL's,
/// greens for ZooKeeper's.
fn colour(kind: &str) -> RGBColor {
    match Kind::parse(kind) {
        Some(Kind::Redis) => RGBColor(0xd6, 0x27, 0x28),
        Some(Kind::RedisIncr) => RGBColor(0xff, 0x7f, 0x0e),
        Some(Kind::Redlock) => RGBColor(0x8c, 0x56, 0x4b),
        Some(Kind::PgForUpdate) => RGBColor(0x1f, 0x77, 0xb4),
        Some(Kind::PgForUpdateIdle) => RGBColor(0x17, 0xbe, 0xcf),
        Some(Kind::PgVersion) => RGBColor(0x94, 0x67, 0xbd),
        Some(Kind::Zk) => RGBColor(0x2c, 0xa0, 0x2c),
        Some(Kind::ZkFenced) => RGBColor(0x6b, 0x6b, 0x00),
        None => RGBColor(0x7f, 0x7f, 0x7f),
    }
}

/// Whether a kind's line is dashed: the kinds that add a guard to another (the fences, the
/// idle timeout), so that a pair reads apart where their lines meet.
fn dashed(kind: &str) -> bool {
    matches!(
        Kind::parse(kind),
        Some(Kind::RedisIncr | Kind::PgForUpdateIdle | Kind::ZkFenced)
    )
}

/// Draws every plot of `report` next to `json_path`; the files written.
pub fn draw(report: &Report, json_path: &Path) -> Result<Vec<PathBuf>, String> {
    let stem = json_path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("sale");
    let dir = json_path.parent().unwrap_or(Path::new("."));
    let caption = caption(report);
    let mut written = Vec::new();
    let path = dir.join(format!("{stem}-throughput.svg"));
    throughput(report, &path, &caption).map_err(|e| format!("{}: {e}", path.display()))?;
    written.push(path);
    let path = dir.join(format!("{stem}-latency.svg"));
    latency(report, &path, &caption).map_err(|e| format!("{}: {e}", path.display()))?;
    written.push(path);
    Ok(written)
}

/// Reads a report written by `--json` and draws it.
pub fn redraw(json_path: &Path) -> Result<Vec<PathBuf>, String> {
    let text =
        std::fs::read_to_string(json_path).map_err(|e| format!("{}: {e}", json_path.display()))?;
    let report: Report =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", json_path.display()))?;
    draw(&report, json_path)
}

type Drawn = Result<(), Box<dyn std::error::Error>>;

/// What the run was, under every plot.
fn caption(report: &Report) -> String {
    format!(
        "{}, {} buyers, {} products x {} seats, pool {}, {} cores",
        report.date, report.buyers, report.products, report.stock, report.pool, report.cores
    )
}

/// A panel's title: the variant, and how many rounds it ran.
fn title(variant: &Variant) -> String {
    let rounds = variant
        .kinds
        .iter()
        .map(|k| k.rounds.len())
        .max()
        .unwrap_or(0);
    match variant.frozen_ms {
        None => format!("no pause ({rounds} rounds)"),
        Some(ms) => format!(
            "one buyer frozen {:.0} s inside product 0's lock ({rounds} rounds)",
            ms as f64 / 1000.0
        ),
    }
}

/// `(median, min, max)` of some values (NaN for none).
fn spread(values: &[f64]) -> (f64, f64, f64) {
    if values.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    crate::median(values.to_vec())
}

/// The CDF of some latencies: each value, sorted, with the fraction of values at or below it.
fn cdf(latencies: &[f64]) -> Vec<(f64, f64)> {
    let mut sorted = latencies.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let n = sorted.len() as f64;
    sorted
        .into_iter()
        .enumerate()
        .map(|(i, ms)| (ms, (i + 1) as f64 / n))
        .collect()
}

/// The kinds in the order of `kinds::ALL` (the doc's tables), then any the build does not know.
fn ordered(variant: &Variant) -> Vec<&crate::sale::KindRounds> {
    let rank = |name: &str| {
        kinds::ALL
            .iter()
            .position(|k| k.name() == name)
            .unwrap_or(usize::MAX)
    };
    let mut v: Vec<_> = variant.kinds.iter().collect();
    v.sort_by_key(|k| rank(&k.kind));
    v
}

fn throughput(report: &Report, path: &Path, caption: &str) -> Drawn {
    let panels = report.variants.len().max(1);
    let root = SVGBackend::new(path, (900, 40 + 300 * panels as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        &format!(
            "Flash sale: purchases/s per lock kind, median over rounds (whiskers: min-max); {caption}"
        ),
        ("sans-serif", 15),
    )?;
    for (area, variant) in root.split_evenly((panels, 1)).iter().zip(&report.variants) {
        let rows: Vec<(String, (f64, f64, f64))> = ordered(variant)
            .into_iter()
            .map(|k| {
                let per_sec: Vec<f64> = k.rounds.iter().map(|r| r.per_sec).collect();
                (k.kind.clone(), spread(&per_sec))
            })
            .collect();
        let n = rows.len();
        let top = rows
            .iter()
            .map(|r| r.1 .2)
            .filter(|v| v.is_finite())
            .fold(0.0_f64, f64::max)
            .max(1.0)
            * 1.15;
        let names: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
        // Row i (the tables' order, top down) spans y = n-1-i .. n-i.
        let label = move |y: &f64| {
            let from_bottom = y.floor();
            if (y - from_bottom - 0.5).abs() < 0.01 && from_bottom >= 0.0 {
                let i = n as f64 - 1.0 - from_bottom;
                names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        let mut chart = ChartBuilder::on(area)
            .caption(title(variant), ("sans-serif", 14))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(190)
            .build_cartesian_2d(0.0..top, 0.0..n as f64)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .max_light_lines(4)
            .y_labels(n * 2 + 1)
            .y_label_formatter(&label)
            .x_desc("purchases/s (seats sold from the start to the last sale)")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .draw()?;
        for (i, (kind, (median, min, max))) in rows.iter().enumerate() {
            if !median.is_finite() {
                continue;
            }
            let y = (n - 1 - i) as f64;
            let c = colour(kind);
            chart.draw_series([Rectangle::new(
                [(0.0, y + 0.2), (*median, y + 0.8)],
                c.filled(),
            )])?;
            chart.draw_series([ErrorBar::new_horizontal(
                y + 0.5,
                *min,
                *median,
                *max,
                BLACK.stroke_width(1),
                8,
            )])?;
            let text = TextStyle::from(("sans-serif", 12).into_font())
                .pos(Pos::new(HPos::Left, VPos::Center));
            chart.draw_series([Text::new(
                format!("{median:.0}"),
                (max + top * 0.01, y + 0.5),
                text,
            )])?;
        }
    }
    root.present()?;
    Ok(())
}

fn latency(report: &Report, path: &Path, caption: &str) -> Drawn {
    let panels = report.variants.len().max(1);
    let root = SVGBackend::new(path, (560 * panels as u32, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        &format!(
            "Flash sale: each buyer's time from the start to its answer (a seat or sold out), \
             all rounds; {caption}"
        ),
        ("sans-serif", 15),
    )?;
    for (area, variant) in root.split_evenly((1, panels)).iter().zip(&report.variants) {
        let lines: Vec<(&str, Vec<(f64, f64)>)> = ordered(variant)
            .into_iter()
            .map(|k| {
                let all: Vec<f64> = k
                    .rounds
                    .iter()
                    .flat_map(|r| r.latencies_ms.iter().copied())
                    .filter(|ms| ms.is_finite() && *ms > 0.0)
                    .collect();
                (k.kind.as_str(), cdf(&all))
            })
            .filter(|(_, points)| !points.is_empty())
            .collect();
        let (lo, hi) = lines
            .iter()
            .flat_map(|(_, p)| p.iter().map(|pt| pt.0))
            .fold((f64::MAX, 0.0_f64), |(lo, hi), ms| (lo.min(ms), hi.max(ms)));
        let (lo, hi) = if lo <= hi {
            (lo * 0.8, hi * 1.25)
        } else {
            (1.0, 1000.0)
        };
        let mut chart = ChartBuilder::on(area)
            .caption(title(variant), ("sans-serif", 14))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d((lo..hi).log_scale(), 0.0..1.0)?;
        chart
            .configure_mesh()
            .x_desc("time to answer (ms, log scale)")
            .y_desc("fraction of buyers")
            .x_label_formatter(&|v| format!("{v:.0}"))
            .draw()?;
        for (kind, points) in &lines {
            let c = colour(kind);
            let style = c.stroke_width(2);
            let series = if dashed(kind) {
                chart.draw_series(DashedLineSeries::new(points.clone(), 7, 4, style))?
            } else {
                chart.draw_series(LineSeries::new(points.clone(), style))?
            };
            let is_dashed = dashed(kind);
            // Two strokes: a gap between them for a dashed line, none for a solid one.
            let (end, start) = if is_dashed { (6, 10) } else { (8, 8) };
            series.label(*kind).legend(move |(x, y)| {
                EmptyElement::at((x, y))
                    + PathElement::new([(0, 0), (end, 0)], c.stroke_width(2))
                    + PathElement::new([(start, 0), (16, 0)], c.stroke_width(2))
            });
        }
        if lines.is_empty() {
            continue;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_sorts_and_counts_up_to_one() {
        assert_eq!(
            cdf(&[30.0, 10.0, 20.0, 10.0]),
            vec![(10.0, 0.25), (10.0, 0.5), (20.0, 0.75), (30.0, 1.0)]
        );
        assert!(cdf(&[]).is_empty());
    }

    #[test]
    fn spread_is_median_min_max() {
        assert_eq!(spread(&[3.0, 1.0, 2.0]), (2.0, 1.0, 3.0));
        assert_eq!(spread(&[4.0, 1.0]), (2.5, 1.0, 4.0));
        assert!(spread(&[]).0.is_nan());
    }
}
