//! The report's pictures, drawn from its JSON (so any earlier report can be drawn again with
//! `--plot-from`): SVG files next to the JSON, `{stem}-cycles.svg` (cycles/s per workload and
//! library, the median over the rounds with the spread as whiskers), `{stem}-acquire.svg` and
//! `{stem}-handoff.svg` (latency CDFs per library, one line per round, from each round's
//! `quantiles_us`; reports from before 2026-12-07 have none, and then only p50 and p99 are
//! drawn, as points).

use std::path::{Path, PathBuf};

use plotters::prelude::*;
use serde_json::Value;

use crate::measure::QUANTILES;

/// The libraries, their JSON keys, names and colours.
const PEERS: [(&str, &str, RGBColor); 3] = [
    ("zk-recipes", "zk-recipes", RGBColor(0x1f, 0x77, 0xb4)),
    ("client-lock", "Client::lock", RGBColor(0xff, 0x7f, 0x0e)),
    ("curator", "Curator", RGBColor(0x2c, 0xa0, 0x2c)),
];

/// The lock workloads of the cycles plot, as the JSON names them.
const CYCLE_WORKLOADS: [&str; 4] = ["uncontended", "contended8", "locks64x4", "keys64x4"];

/// A panel of a CDF plot: its title, and where its latency is in a round's results
/// (workload, latency) and in the summary (workload, metric prefix).
struct Panel {
    title: &'static str,
    workload: &'static str,
    latency: &'static str,
}

const ACQUIRE: [Panel; 2] = [
    Panel {
        title: "acquire, uncontended",
        workload: "uncontended",
        latency: "acquire",
    },
    Panel {
        title: "acquire, 8 contenders",
        workload: "contended8",
        latency: "acquire",
    },
];

const HANDOFF: [Panel; 2] = [
    Panel {
        title: "handoff, 8 contenders (release -> next grant)",
        workload: "contended8",
        latency: "handoff",
    },
    Panel {
        title: "leader handover (release -> campaign returns)",
        workload: "handover",
        latency: "handover",
    },
];

/// Draws every plot of `report` (a bench JSON report) next to `json_path`; the files written.
pub fn draw(report: &Value, json_path: &Path) -> Result<Vec<PathBuf>, String> {
    let stem = json_path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("bench");
    let dir = json_path.parent().unwrap_or(Path::new("."));
    let caption = caption(report);
    let mut written = Vec::new();
    let path = dir.join(format!("{stem}-cycles.svg"));
    cycles(report, &path, &caption).map_err(|e| format!("{}: {e}", path.display()))?;
    written.push(path);
    for (name, panels) in [("acquire", &ACQUIRE), ("handoff", &HANDOFF)] {
        let path = dir.join(format!("{stem}-{name}.svg"));
        cdfs(report, panels, &path, &caption).map_err(|e| format!("{}: {e}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

type Drawn = Result<(), Box<dyn std::error::Error>>;

/// What the run was: its date, server and rounds, under every plot.
fn caption(report: &Value) -> String {
    format!(
        "{}, ZooKeeper {}, {} cores, {} rounds",
        report["date"].as_str().unwrap_or("?"),
        report["zookeeper"]
            .as_str()
            .and_then(|z| z.split_whitespace().next())
            .unwrap_or("?"),
        report["cores"].as_u64().unwrap_or(0),
        report["rounds"].as_u64().unwrap_or(0),
    )
}

/// A metric's median and spread in the summary: `(median, min, max)`.
fn spread(report: &Value, peer: &str, workload: &str, metric: &str) -> Option<(f64, f64, f64)> {
    let m = &report["summary"][peer][workload][metric];
    Some((
        m["median"].as_f64()?,
        m["min"].as_f64()?,
        m["max"].as_f64()?,
    ))
}

fn cycles(report: &Value, path: &Path, caption: &str) -> Drawn {
    let bars: Vec<(usize, usize, (f64, f64, f64))> = CYCLE_WORKLOADS
        .iter()
        .enumerate()
        .flat_map(|(w, workload)| {
            PEERS.iter().enumerate().filter_map(move |(p, (key, ..))| {
                Some((w, p, spread(report, key, workload, "cycles_per_s")?))
            })
        })
        .collect();
    let top = bars.iter().map(|b| b.2 .2).fold(0.0_f64, f64::max).max(1.0) * 1.1;
    let root = SVGBackend::new(path, (900, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Lock cycles per second, median over rounds (whiskers: min-max); {caption}"),
            ("sans-serif", 15),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..CYCLE_WORKLOADS.len() as f64, 0.0..top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(CYCLE_WORKLOADS.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - i as f64 - 0.5).abs() < 0.01 && i < CYCLE_WORKLOADS.len() {
                CYCLE_WORKLOADS[i].to_owned()
            } else {
                String::new()
            }
        })
        .y_desc("cycles/s")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    let width = 0.8 / PEERS.len() as f64;
    for (p, (_, name, colour)) in PEERS.iter().enumerate() {
        let mine: Vec<_> = bars.iter().filter(|b| b.1 == p).collect();
        let left = |w: usize| w as f64 + 0.1 + p as f64 * width;
        chart
            .draw_series(mine.iter().map(|&&(w, _, (median, _, _))| {
                Rectangle::new(
                    [(left(w), 0.0), (left(w) + width * 0.9, median)],
                    colour.filled(),
                )
            }))?
            .label(*name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
        chart.draw_series(mine.iter().map(|&&(w, _, (median, min, max))| {
            ErrorBar::new_vertical(left(w) + width * 0.45, min, median, max, BLACK.filled(), 6)
        }))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// One round's CDF of a latency: `(ms, fraction of samples)` points.
type Cdf = Vec<(f64, f64)>;

/// Each round's CDF points of one latency; a round without quantiles gives its p50 and p99
/// alone.
fn round_cdfs(report: &Value, peer: &str, panel: &Panel) -> Vec<Cdf> {
    let Some(rounds) = report["per_round"].as_array() else {
        return Vec::new();
    };
    rounds
        .iter()
        .filter_map(|round| {
            let latency = &round["results"][peer][panel.workload][panel.latency];
            let quantiles: Vec<f64> = latency["quantiles_us"]
                .as_array()
                .map(|q| q.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default();
            let points: Cdf = if quantiles.len() == QUANTILES.len() {
                quantiles
                    .iter()
                    .zip(QUANTILES)
                    .map(|(us, q)| (us / 1000.0, q))
                    .collect()
            } else {
                [("p50_us", 0.5), ("p99_us", 0.99)]
                    .iter()
                    .filter_map(|(k, q)| Some((latency[*k].as_f64()? / 1000.0, *q)))
                    .collect()
            };
            (!points.is_empty()).then_some(points)
        })
        .collect()
}

fn cdfs(report: &Value, panels: &[Panel; 2], path: &Path, caption: &str) -> Drawn {
    let root = SVGBackend::new(path, (1000, 440)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        &format!("Latency CDFs, one line per round; {caption}"),
        ("sans-serif", 15),
    )?;
    for (area, panel) in root.split_evenly((1, 2)).iter().zip(panels) {
        let lines: Vec<(usize, Vec<Cdf>)> = PEERS
            .iter()
            .enumerate()
            .map(|(p, (key, ..))| (p, round_cdfs(report, key, panel)))
            .filter(|(_, rounds)| !rounds.is_empty())
            .collect();
        let all = lines
            .iter()
            .flat_map(|(_, r)| r.iter().flatten().map(|pt| pt.0));
        let (lo, hi) = all.fold((f64::MAX, 0.0_f64), |(lo, hi), ms| (lo.min(ms), hi.max(ms)));
        let (lo, hi) = if lo <= hi && lo > 0.0 {
            (lo * 0.8, hi * 1.25)
        } else {
            (0.1, 10.0)
        };
        let mut chart = ChartBuilder::on(area)
            .caption(panel.title, ("sans-serif", 14))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(44)
            .build_cartesian_2d((lo..hi).log_scale(), 0.0..1.0)?;
        chart
            .configure_mesh()
            .x_desc("latency (ms, log scale)")
            .y_desc("fraction of samples")
            .draw()?;
        for (p, rounds) in &lines {
            let (_, name, colour) = PEERS[*p];
            for (i, points) in rounds.iter().enumerate() {
                let style = colour.stroke_width(2);
                chart.draw_series(points.iter().map(|&pt| Circle::new(pt, 2, colour.filled())))?;
                let series = chart.draw_series(LineSeries::new(points.clone(), style))?;
                if i == 0 {
                    series.label(name).legend(move |(x, y)| {
                        PathElement::new([(x, y), (x + 14, y)], colour.stroke_width(2))
                    });
                }
            }
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

    /// The fixed runs of the report's golden test, drawn: every file is written, and each
    /// plot shows every library the run measured.
    #[test]
    fn the_fixed_runs_draw_every_plot_with_every_library() {
        let dir = std::env::temp_dir().join(format!("bench-plots-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let report: Value =
            serde_json::from_str(include_str!("report/testdata/full.json")).unwrap();
        let written = draw(&report, &dir.join("full.json")).unwrap();
        assert_eq!(written.len(), 3);
        for path in &written {
            let svg = std::fs::read_to_string(path).unwrap();
            assert!(svg.starts_with("<svg"), "{}", path.display());
            for name in ["zk-recipes", "Client::lock", "Curator"] {
                assert!(svg.contains(name), "{} lacks {name}", path.display());
            }
        }
        let cycles = std::fs::read_to_string(&written[0]).unwrap();
        for workload in CYCLE_WORKLOADS {
            assert!(cycles.contains(workload), "cycles plot lacks {workload}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
