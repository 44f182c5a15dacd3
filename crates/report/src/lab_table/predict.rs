//! `pagelab bench --predict`'s table: the model's time per operation beside each measured
//! kernel under each configuration, the two speed-ups over 4K, and the goals they are held to.

use crate::{columns, LabConfig, LabResult};

/// The model's estimate of one kernel under each configuration it could model.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelPrediction {
    /// The kernel's spec as results name it (`LabConfig::subject`).
    pub subject: String,
    /// Whether the speed-up goal holds this kernel (stride heaps of 16M and more, gups,
    /// chase): its predicted 2M-over-4K speed-up is to be within [`SPEEDUP_TOLERANCE`] of
    /// the measured one.
    pub goal: bool,
    /// Cycles per operation (the kernel's unit of work: access, element, update, step),
    /// by configuration label (`4K`, `64K`, `2M`).
    pub cycles_per_op: Vec<(String, f64)>,
}

/// How far (as a fraction of the measured speed-up) a predicted speed-up may be off.
pub const SPEEDUP_TOLERANCE: f64 = 0.25;

/// The measured figure the table compares: every kernel's time per unit of work.
const MEASURED: &str = "metrics/ns_per_op";

fn find<'a>(result: &'a LabResult, subject: &str, label: &str) -> Option<&'a LabConfig> {
    result
        .configs
        .iter()
        .find(|c| c.subject == subject && c.label == label)
}

fn measured(result: &LabResult, subject: &str, label: &str) -> Option<(f64, f64)> {
    let s = find(result, subject, label)?.summary.get(MEASURED)?;
    Some((s.median, s.spread))
}

fn predicted(p: &KernelPrediction, label: &str) -> Option<f64> {
    p.cycles_per_op
        .iter()
        .find(|(l, _)| l == label)
        .map(|&(_, v)| v)
}

/// The labels, in order, that have both a measurement and a prediction for `p`.
fn both(result: &LabResult, p: &KernelPrediction) -> Vec<String> {
    p.cycles_per_op
        .iter()
        .map(|(l, _)| l.clone())
        .filter(|l| measured(result, &p.subject, l).is_some())
        .collect()
}

/// Whether `p`'s 4K or 2M runs spread (fastest to slowest over the median) wider than
/// [`SPEEDUP_TOLERANCE`]: then the measured speed-up moves by more than the goal's band from
/// one draw of runs to the next, and its verdict wants a re-measurement.
pub fn spread_wide(result: &LabResult, p: &KernelPrediction) -> bool {
    ["4K", "2M"].iter().any(|l| {
        measured(result, &p.subject, l).is_some_and(|(_, spread)| spread > SPEEDUP_TOLERANCE)
    })
}

/// The measured and the predicted 2M-over-4K speed-up of `p`, when both configurations ran.
pub fn speedups_2m(result: &LabResult, p: &KernelPrediction) -> Option<(f64, f64)> {
    let (m4, _) = measured(result, &p.subject, "4K")?;
    let (m2, _) = measured(result, &p.subject, "2M")?;
    Some((m4 / m2, predicted(p, "4K")? / predicted(p, "2M")?))
}

/// Whether the model orders `p`'s configurations as the measurements do, judged on the
/// pairs of configurations whose measured ranges (fastest to slowest run) do not overlap:
/// each such pair must be in the same order in the model (a tie in the model is not).
/// `None` when no pair is separated so (the runs do not tell the configurations apart).
pub fn same_ranking(result: &LabResult, p: &KernelPrediction) -> Option<bool> {
    let labels = both(result, p);
    let range = |l: &str| {
        let s = find(result, &p.subject, l)?.summary.get(MEASURED)?;
        Some((s.min, s.max))
    };
    let mut separated = false;
    for a in &labels {
        for b in &labels {
            let (Some((_, a_max)), Some((b_min, _))) = (range(a), range(b)) else {
                continue;
            };
            if a_max < b_min {
                separated = true;
                if predicted(p, a)? >= predicted(p, b)? {
                    return Some(false);
                }
            }
        }
    }
    separated.then_some(true)
}

/// The table: one row per (kernel, configuration) with the measured median time per
/// operation, its spread, the measured speed-up over 4K, the model's cycles per operation and
/// its speed-up, and for the 2M row of a kernel the speed-up goal holds, whether it is met;
/// then one line per goal with how many kernels meet it. `model` names the machine.
pub fn predict_table(result: &LabResult, predictions: &[KernelPrediction], model: &str) -> String {
    let runs = result.configs.first().map_or(0, |c| c.runs.len());
    let mut rows = vec![[
        "kernel",
        "config",
        "measured ns/op",
        "spread",
        "measured speed-up",
        "model cycles/op",
        "model speed-up",
        "model/measured",
    ]
    .map(String::from)
    .to_vec()];
    let (mut goal_met, mut goal_n, mut rank_met, mut rank_n) = (0, 0, 0, 0);
    let mut wide = 0;
    for p in predictions {
        let base_m = measured(result, &p.subject, "4K").map(|m| m.0);
        let base_p = predicted(p, "4K");
        for (i, label) in both(result, p).iter().enumerate() {
            let (m, spread) = measured(result, &p.subject, label).unwrap_or_default();
            let c = predicted(p, label).unwrap_or_default();
            let sm = base_m.map(|b| b / m);
            let sp = base_p.map(|b| b / c);
            let verdict = match (sm, sp) {
                (Some(sm), Some(sp)) if label != "4K" => {
                    let ratio = sp / sm;
                    let mark = if p.goal && label == "2M" {
                        let ok = (ratio - 1.0).abs() <= SPEEDUP_TOLERANCE;
                        match (ok, spread_wide(result, p)) {
                            (true, false) => " (goal met)",
                            (false, false) => " (goal missed)",
                            (true, true) => " (goal met; runs spread wider than 25%)",
                            (false, true) => " (goal missed; runs spread wider than 25%)",
                        }
                    } else {
                        ""
                    };
                    format!("{ratio:.2}{mark}")
                }
                _ => "-".into(),
            };
            let fmt = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
            rows.push(vec![
                if i == 0 {
                    p.subject.clone()
                } else {
                    String::new()
                },
                label.clone(),
                format!("{m:.2}"),
                format!("{:.1}%", spread * 100.0),
                fmt(sm),
                format!("{c:.1}"),
                fmt(sp),
                verdict,
            ]);
        }
        if p.goal {
            if let Some((sm, sp)) = speedups_2m(result, p) {
                goal_n += 1;
                goal_met += usize::from((sp / sm - 1.0).abs() <= SPEEDUP_TOLERANCE);
                wide += usize::from(spread_wide(result, p));
            }
        }
        if let Some(same) = same_ranking(result, p) {
            rank_n += 1;
            rank_met += usize::from(same);
        }
    }
    let wide = if wide > 0 {
        format!(
            " ({wide} of them measured with 4K or 2M runs spread wider than the band, so \
             their verdicts move from one set of runs to the next: re-measure on an idle \
             machine, with a larger --repeat)"
        )
    } else {
        String::new()
    };
    format!(
        "measured (median of {runs} run(s), time per operation) beside the model \
         ({model}, cycles per operation in the steady state)\n{}\
         goal: predicted 2M-over-4K speed-up within {:.0}% of the measured one \
         (stride heaps of 16M and more, gups, chase): {goal_met} of {goal_n} kernels{wide}\n\
         goal: configurations ranked in the measured order (every pair of configurations \
         whose measured ranges do not overlap ordered alike by the model): {rank_met} of \
         {rank_n} kernels whose runs separate some pair\n",
        columns(&rows, &[0, 1]),
        SPEEDUP_TOLERANCE * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Summary;

    /// A result with one kernel whose configurations ran in these (label, runs' ns) pairs.
    fn result(runs: &[(&str, &[f64])]) -> LabResult {
        let mut r = LabResult::new("bench", Default::default());
        for (label, ns) in runs {
            let mut c = LabConfig {
                subject: "gups".into(),
                label: label.to_string(),
                ..Default::default()
            };
            c.summary.insert(MEASURED.into(), Summary::of(ns).unwrap());
            r.configs.push(c);
        }
        r
    }

    fn prediction(cycles: &[(&str, f64)]) -> KernelPrediction {
        KernelPrediction {
            subject: "gups".into(),
            goal: true,
            cycles_per_op: cycles.iter().map(|&(l, c)| (l.to_string(), c)).collect(),
        }
    }

    #[test]
    fn the_goals_judge_speed_ups_and_only_the_pairs_the_runs_separate() {
        let r = result(&[
            ("4K", &[10.0, 11.0, 12.0]),
            ("64K", &[9.0, 10.5, 11.5]),
            ("2M", &[5.0, 6.0]),
        ]);
        // 2M is measured 2x faster than 4K (11 / 5.5); 64K overlaps both.
        let good = prediction(&[("4K", 100.0), ("64K", 200.0), ("2M", 60.0)]);
        let (m, p) = speedups_2m(&r, &good).unwrap();
        assert!((m - 11.0 / 5.5).abs() < 1e-9 && (p - 100.0 / 60.0).abs() < 1e-9);
        assert_eq!(same_ranking(&r, &good), Some(true));
        let wrong_order = prediction(&[("4K", 100.0), ("64K", 50.0), ("2M", 100.0)]);
        assert_eq!(same_ranking(&r, &wrong_order), Some(false));
        let table = predict_table(&r, &[good, wrong_order], "zen4");
        // 100/60 = 1.67 against 2.00 measured: 0.83, within 25%; 1.00 against 2.00: not.
        assert!(table.contains("0.83 (goal met)"), "{table}");
        assert!(table.contains("0.50 (goal missed)"), "{table}");
        assert!(table.contains("): 1 of 2 kernels\n"), "{table}");
        assert!(table.contains("): 1 of 2 kernels whose runs"), "{table}");
        // Runs that spread wider than the band say so, in the row and in the goal's line.
        let r = result(&[("4K", &[10.0, 11.0, 14.0]), ("2M", &[5.0, 6.0])]);
        let p = prediction(&[("4K", 100.0), ("2M", 60.0)]);
        assert!(spread_wide(&r, &p));
        let table = predict_table(&r, &[p], "zen4");
        assert!(
            table.contains("0.83 (goal met; runs spread wider than 25%)"),
            "{table}"
        );
        assert!(
            table.contains("): 1 of 1 kernels (1 of them measured with 4K or 2M runs"),
            "{table}"
        );
        let together = result(&[("4K", &[10.0, 12.0]), ("2M", &[11.0, 13.0])]);
        let any = prediction(&[("4K", 1.0), ("2M", 2.0)]);
        assert_eq!(same_ranking(&together, &any), None);
    }
}
