//! The JSON renderer: the summary (every metric of `sections::SECTIONS` and the floor as its
//! median and spread over the rounds), every round's own figures, the census, the once-per-run
//! keyed figures and the targets' verdicts.

use serde_json::{json, Map, Value};

use crate::args::{Peer, Workload};
use crate::stats::Spread;

use super::metrics::{Figure, FLOOR};
use super::sections::SECTIONS;
use super::Report;

impl Report {
    pub fn json(&self) -> Value {
        let mut summary = Map::new();
        let floor: Map<String, Value> = FLOOR
            .iter()
            .map(|m| (m.key.to_owned(), json!(self.spread(&Figure::floor(m)))))
            .collect();
        summary.insert("floor".into(), Value::Object(floor));
        for peer in Peer::ALL.into_iter().filter(|&p| self.measured(p)) {
            let mut workloads = Map::new();
            for section in SECTIONS {
                let w = section.workload;
                if !self.args.runs_workload(w) || !self.rounds.iter().any(|r| r.ran(peer, w)) {
                    continue;
                }
                let figures: Map<String, Value> = section
                    .metrics
                    .iter()
                    .map(|m| {
                        (
                            m.key.to_owned(),
                            json!(self.spread(&section.figure(peer, m))),
                        )
                    })
                    .collect();
                workloads.insert(w.key().into(), Value::Object(figures));
            }
            summary.insert(peer.key().into(), Value::Object(workloads));
        }
        let targets: Map<String, Value> = self
            .verdicts()
            .into_iter()
            .map(|v| {
                let spread = Spread::of(v.per_round.iter().copied());
                let target = json!({
                    "issues": v.target.issues,
                    "wanted": v.wanted(),
                    "ratio_of_medians": v.value,
                    "met": v.met(),
                    "per_round": v.per_round,
                    "per_round_min": spread.map(|s| s.min),
                    "per_round_max": spread.map(|s| s.max),
                });
                (v.name, target)
            })
            .collect();
        let rt = &self.round_trips;
        json!({
            "date": self.date,
            "machine": self.machine,
            "cores": self.cores,
            "zookeeper": self.zookeeper,
            "load_avg_start": self.load_start,
            "load_avg_end": self.load_end,
            "measure_s": self.args.measure.as_secs_f64(),
            "warmup_s": self.args.warmup.as_secs_f64(),
            "rounds": self.rounds.len(),
            "curator": {
                "version": self.curator_version,
                "skipped": self.curator_skipped,
            },
            "summary": summary,
            "keyed_once_per_run": {
                "server": self.keyed.server,
                "keys_left": self.keyed.left,
                "keys_memory": self.keyed.memory,
            },
            "per_round": self.per_round_json(),
            "zk_recipes_diagnostics": {
                "requests_per_grant_8_contenders": {
                    "grants": rt.grants,
                    "create_and_list": rt.enqueues,
                    "exists_watch": rt.watches,
                    "wakeups": rt.wakeups,
                    "relists": rt.relists,
                },
                "handoff_breakdown_8_contenders": rt.breakdown,
                "uncontended_acquire_breakdown": rt.uncontended,
                "leader_handover_breakdown": rt.handover,
            },
            "targets": targets,
        })
    }

    /// Every round's own figures, as each window recorded them.
    fn per_round_json(&self) -> Vec<Value> {
        self.rounds
            .iter()
            .enumerate()
            .map(|(i, round)| {
                let order: Map<String, Value> = round
                    .order
                    .iter()
                    .map(|(w, peers)| {
                        let peers: Vec<&str> = peers.iter().map(|p| p.key()).collect();
                        (w.key().to_owned(), json!(peers))
                    })
                    .collect();
                let mut results = Map::new();
                let mut put = |peer: Peer, workload: Workload, figures: Value| {
                    let entry = results
                        .entry(peer.key())
                        .or_insert_with(|| Value::Object(Map::new()));
                    entry[workload.key()] = figures;
                };
                for ((peer, workload), figures) in &round.locks {
                    put(*peer, *workload, figures.to_json());
                }
                for (peer, handover) in &round.handover {
                    put(*peer, Workload::Handover, json!(handover));
                }
                for (peer, waiters) in &round.waiters {
                    put(*peer, Workload::Waiters, json!(waiters));
                }
                for (peer, fresh) in &round.fresh {
                    put(*peer, Workload::FreshKeys, json!(fresh));
                }
                json!({
                    "round": i + 1,
                    "order": order,
                    "floor": round.floor.to_json(),
                    "results": results,
                })
            })
            .collect()
    }
}
