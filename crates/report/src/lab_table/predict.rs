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
/// The same figure in each run's metrics.
const RUN_MEASURED: &str = "ns_per_op";

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

/// The two-sided level at which sign tests over the rounds separate a kernel's
/// configurations, shared among its pairs (Bonferroni: each pair of three configurations is
/// tested at a third of it, so that the chance that runs which cannot tell any pair apart
/// separate one stays within it; [`same_ranking`]).
pub const RANK_SIGNIFICANCE: f64 = 0.05;

/// The two-sided p-value of a sign test: the chance, were either configuration as likely
/// to be the faster in a round, that one of them would be faster in at least `wins` of `n`
/// rounds (`wins` the larger count).
pub fn sign_test(wins: usize, n: usize) -> f64 {
    let k = wins.max(n - wins);
    let tail: f64 = (k..=n).map(|i| binomial(n, i)).sum::<f64>() / 2f64.powi(n as i32);
    (2.0 * tail).min(1.0)
}

fn binomial(n: usize, k: usize) -> f64 {
    (0..k).fold(1.0, |c, i| c * (n - i) as f64 / (i + 1) as f64)
}

/// Rounds in which `a`'s run of `subject` was faster than `b`'s, and rounds in which they
/// differed. `bench` runs every configuration once a round, so the runs with the same index
/// ran in the same round, minutes apart at most, and the machine's slow and fast stretches
/// fall on both.
fn rounds_faster(result: &LabResult, subject: &str, a: &str, b: &str) -> Option<(usize, usize)> {
    let ns = |l: &str| -> Option<Vec<Option<f64>>> {
        Some(
            find(result, subject, l)?
                .runs
                .iter()
                .map(|r| r.metrics.get(RUN_MEASURED).copied())
                .collect(),
        )
    };
    let (a, b) = (ns(a)?, ns(b)?);
    let pairs: Vec<(f64, f64)> = a
        .iter()
        .zip(&b)
        .filter_map(|(x, y)| Some(((*x)?, (*y)?)))
        .filter(|(x, y)| x != y)
        .collect();
    Some((pairs.iter().filter(|(x, y)| x < y).count(), pairs.len()))
}

/// Whether the runs show configuration `a` of `subject` faster than `b`: every run of `a`
/// faster than every run of `b` (their ranges do not overlap), or `a` the faster in so many
/// of the rounds that a two-sided sign test puts the chance of it at `level` or less (at
/// a third of 5%: 9 of 9 rounds, 7 of 7, 11 of 12).
pub fn measured_faster(result: &LabResult, subject: &str, a: &str, b: &str, level: f64) -> bool {
    let range = |l: &str| {
        let s = find(result, subject, l)?.summary.get(MEASURED)?;
        Some((s.min, s.max))
    };
    if let (Some((_, a_max)), Some((b_min, _))) = (range(a), range(b)) {
        if a_max < b_min {
            return true;
        }
    }
    rounds_faster(result, subject, a, b)
        .is_some_and(|(wins, n)| 2 * wins > n && sign_test(wins, n) <= level)
}

/// Whether the model orders `p`'s configurations as the measurements do, judged on the
/// pairs of configurations the runs separate ([`measured_faster`], the sign tests at
/// [`RANK_SIGNIFICANCE`] over the number of pairs): each such pair must be in the same
/// order in the model (a tie in the model is not). `None` when no pair is separated so (the
/// runs do not tell the configurations apart).
pub fn same_ranking(result: &LabResult, p: &KernelPrediction) -> Option<bool> {
    let labels = both(result, p);
    let pairs = labels.len() * labels.len().saturating_sub(1) / 2;
    let level = RANK_SIGNIFICANCE / pairs.max(1) as f64;
    let mut separated = false;
    for a in &labels {
        for b in &labels {
            if a != b && measured_faster(result, &p.subject, a, b, level) {
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
         the runs separate ordered alike by the model: ranges that do not overlap, or one \
         faster in enough of the rounds for sign tests at {:.0}% over a kernel's pairs): \
         {rank_met} of {rank_n} kernels whose runs separate some pair\n",
        columns(&rows, &[0, 1]),
        SPEEDUP_TOLERANCE * 100.0,
        RANK_SIGNIFICANCE * 100.0
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
            c.runs = ns
                .iter()
                .map(|&v| crate::Measurement {
                    metrics: [(RUN_MEASURED.to_string(), v)].into(),
                    ..Default::default()
                })
                .collect();
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

    #[test]
    fn a_configuration_faster_in_enough_rounds_is_separated_though_the_ranges_overlap() {
        assert!((sign_test(8, 9) - 2.0 * 10.0 / 512.0).abs() < 1e-12);
        assert!((sign_test(1, 9) - sign_test(8, 9)).abs() < 1e-12);
        assert!((sign_test(6, 6) - 2.0 / 64.0).abs() < 1e-12);
        assert!(sign_test(5, 5) > RANK_SIGNIFICANCE);
        assert!(sign_test(7, 9) > RANK_SIGNIFICANCE);
        assert_eq!(sign_test(0, 0), 1.0);
        // A machine that drifts from round to round: 64K a little faster than 4K in 8 of 9
        // rounds, though its slowest run is slower than 4K's fastest.
        let base = [10.0, 14.0, 11.0, 16.0, 12.0, 10.5, 15.0, 13.0, 11.5];
        let mut faster = base.map(|v| v * 0.95);
        faster[3] = 16.5;
        let r = result(&[("4K", &base), ("64K", &faster)]);
        assert!(measured_faster(&r, "gups", "64K", "4K", 0.05));
        assert!(!measured_faster(&r, "gups", "4K", "64K", 0.05));
        // Two configurations are one pair: the whole 5% is its level.
        let right = prediction(&[("4K", 100.0), ("64K", 90.0)]);
        let tie = prediction(&[("4K", 100.0), ("64K", 100.0)]);
        assert_eq!(same_ranking(&r, &right), Some(true));
        assert_eq!(same_ranking(&r, &tie), Some(false));
        // With a third configuration each of the three pairs gets a third of it, under
        // which 8 of 9 rounds (3.9%) do not separate a pair, and 9 of 9 (0.4%) do.
        let slow = base.map(|v| v * 1.5);
        let r3 = result(&[("4K", &base), ("64K", &faster), ("2M", &slow)]);
        let three = prediction(&[("4K", 100.0), ("64K", 100.0), ("2M", 150.0)]);
        assert!(!measured_faster(&r3, "gups", "64K", "4K", 0.05 / 3.0));
        assert!(measured_faster(&r3, "gups", "4K", "2M", 0.05 / 3.0));
        assert_eq!(
            same_ranking(&r3, &three),
            Some(true),
            "the tie is not judged"
        );
        // Faster in 7 of 9 rounds: the sign test does not separate them.
        faster[5] = 11.0;
        let r = result(&[("4K", &base), ("64K", &faster)]);
        assert!(!measured_faster(&r, "gups", "64K", "4K", 0.05));
        assert_eq!(same_ranking(&r, &tie), None);
        let table = predict_table(&r, &[right], "zen4");
        assert!(
            table.contains("sign tests at 5% over a kernel's pairs): 0 of 0 kernels"),
            "{table}"
        );
    }
}
