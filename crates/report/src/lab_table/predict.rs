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

/// The confidence the interval of a measured speed-up ([`MeasuredSpeedup`]) has, at least,
/// where the rounds are enough for it.
pub const SPEEDUP_CONFIDENCE: f64 = 0.95;

/// A configuration's measured speed-up over 4K.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeasuredSpeedup {
    /// The median of the rounds' speed-ups (each round's 4K time over its time for the
    /// configuration), or, where the runs do not pair up by round, the 4K median over the
    /// configuration's.
    pub median: f64,
    /// The lower end of an interval that holds the speed-up's true median (the one more
    /// rounds would converge on) with at least [`SPEEDUP_CONFIDENCE`] where the rounds
    /// allow: order statistics of the rounds' speed-ups, the 2nd and 8th of 9. Where the
    /// rounds are too few for that, their whole range (93.75% with 5 rounds); where the runs
    /// do not pair up, the speed-ups of the fastest and slowest runs against each other.
    pub low: f64,
    /// The upper end of that interval.
    pub high: f64,
}

/// The number `k` of order statistics to leave out at each end of `n` values so that the
/// `k`-th smallest and the `k`-th largest (from 0) hold their population's median with at
/// least [`SPEEDUP_CONFIDENCE`]: the chance that the median lies outside is twice that of
/// `k` or fewer of `n` fair coins coming up heads. 0 where no `k` reaches it.
fn median_bounds(n: usize) -> usize {
    let outside =
        |k: usize| 2.0 * (0..=k).map(|i| binomial(n, i)).sum::<f64>() / 2f64.powi(n as i32);
    (0..n / 2)
        .take_while(|&k| outside(k) <= 1.0 - SPEEDUP_CONFIDENCE)
        .last()
        .unwrap_or(0)
}

/// Each round's speed-up of `label` over 4K for `subject`, sorted: `bench` runs every
/// configuration once a round, so the runs with the same index ran minutes apart at most,
/// and a machine whose speed drifts from one minute to the next (this project's guests)
/// slows both alike. Empty where the two have no runs with the figure in the same rounds.
fn round_speedups(result: &LabResult, subject: &str, label: &str) -> Vec<f64> {
    let mut out: Vec<f64> = round_pairs(result, subject, "4K", label)
        .unwrap_or_default()
        .into_iter()
        .filter(|&(_, y)| y > 0.0)
        .map(|(x, y)| x / y)
        .collect();
    out.sort_by(f64::total_cmp);
    out
}

/// The measured speed-up of `label` over 4K for `subject` ([`MeasuredSpeedup`]), when both
/// ran.
pub fn measured_speedup(result: &LabResult, subject: &str, label: &str) -> Option<MeasuredSpeedup> {
    let rounds = round_speedups(result, subject, label);
    let n = rounds.len();
    if n >= 2 {
        let median = if n % 2 == 1 {
            rounds[n / 2]
        } else {
            (rounds[n / 2 - 1] + rounds[n / 2]) / 2.0
        };
        let k = median_bounds(n);
        return Some(MeasuredSpeedup {
            median,
            low: rounds[k],
            high: rounds[n - 1 - k],
        });
    }
    let summary = |l: &str| find(result, subject, l)?.summary.get(MEASURED);
    let (base, this) = (summary("4K")?, summary(label)?);
    Some(MeasuredSpeedup {
        median: base.median / this.median,
        low: base.min / this.max,
        high: base.max / this.min,
    })
}

/// Whether a predicted speed-up `predicted` is within [`SPEEDUP_TOLERANCE`] of the measured
/// `measured`.
fn within(predicted: f64, measured: f64) -> bool {
    (predicted / measured - 1.0).abs() <= SPEEDUP_TOLERANCE
}

/// Whether the verdict on `predicted` holds over the whole interval of `m`: the measured
/// speed-ups it is within [`SPEEDUP_TOLERANCE`] of make one interval, and `m`'s lies
/// inside it or clear of it. `false` where a measured speed-up in `m`'s interval would judge
/// otherwise than another, so that another set of runs could turn the verdict.
pub fn settled(predicted: f64, m: &MeasuredSpeedup) -> bool {
    let (lo, hi) = (
        predicted / (1.0 + SPEEDUP_TOLERANCE),
        predicted / (1.0 - SPEEDUP_TOLERANCE),
    );
    (m.low >= lo && m.high <= hi) || m.high < lo || m.low > hi
}

/// The measured and the predicted 2M-over-4K speed-up of `p`, when both configurations ran.
pub fn speedups_2m(result: &LabResult, p: &KernelPrediction) -> Option<(MeasuredSpeedup, f64)> {
    let m = measured_speedup(result, &p.subject, "2M")?;
    Some((m, predicted(p, "4K")? / predicted(p, "2M")?))
}

/// The kernels whose 2M verdict is unsettled ([`settled`]): the interval of the measured
/// speed-up crosses an edge of the band around the model's, so more rounds could turn it
/// (`bench --predict --settle` measures them again).
pub fn unsettled_subjects(result: &LabResult, predictions: &[KernelPrediction]) -> Vec<String> {
    predictions
        .iter()
        .filter(|p| p.goal)
        .filter(|p| speedups_2m(result, p).is_some_and(|(sm, sp)| !settled(sp, &sm)))
        .map(|p| p.subject.clone())
        .collect()
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
    let pairs: Vec<(f64, f64)> = round_pairs(result, subject, a, b)?
        .into_iter()
        .filter(|(x, y)| x != y)
        .collect();
    Some((pairs.iter().filter(|(x, y)| x < y).count(), pairs.len()))
}

/// The time per operation of `a`'s and `b`'s runs of `subject` in each round both ran in
/// with the figure.
fn round_pairs(result: &LabResult, subject: &str, a: &str, b: &str) -> Option<Vec<(f64, f64)>> {
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
    Some(
        a.iter()
            .zip(&b)
            .filter_map(|(x, y)| Some(((*x)?, (*y)?)))
            .collect(),
    )
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
    let runs = super::run_counts(result.configs.iter());
    let mut rows = vec![[
        "kernel",
        "config",
        "measured ns/op",
        "spread",
        "measured speed-up",
        "interval",
        "model cycles/op",
        "model speed-up",
        "model/measured",
    ]
    .map(String::from)
    .to_vec()];
    let (mut goal_met, mut goal_n, mut rank_met, mut rank_n) = (0, 0, 0, 0);
    let mut unsettled = 0;
    for p in predictions {
        let base_p = predicted(p, "4K");
        for (i, label) in both(result, p).iter().enumerate() {
            let (m, spread) = measured(result, &p.subject, label).unwrap_or_default();
            let c = predicted(p, label).unwrap_or_default();
            let sm = if label == "4K" {
                None
            } else {
                measured_speedup(result, &p.subject, label)
            };
            let sp = base_p.map(|b| b / c);
            let verdict = match (sm, sp) {
                (Some(sm), Some(sp)) => {
                    let ratio = sp / sm.median;
                    let mark = if p.goal && label == "2M" {
                        match (within(sp, sm.median), settled(sp, &sm)) {
                            (true, true) => " (goal met)",
                            (false, true) => " (goal missed)",
                            (true, false) => " (goal met; unsettled)",
                            (false, false) => " (goal missed; unsettled)",
                        }
                    } else {
                        ""
                    };
                    format!("{ratio:.2}{mark}")
                }
                _ => "-".into(),
            };
            let (measured_speedup, interval) = match (label.as_str(), sm) {
                ("4K", _) => ("1.00".to_string(), "-".to_string()),
                (_, Some(m)) => (
                    format!("{:.2}", m.median),
                    format!("{:.2}-{:.2}", m.low, m.high),
                ),
                (_, None) => ("-".into(), "-".into()),
            };
            rows.push(vec![
                if i == 0 {
                    p.subject.clone()
                } else {
                    String::new()
                },
                label.clone(),
                format!("{m:.2}"),
                format!("{:.1}%", spread * 100.0),
                measured_speedup,
                interval,
                format!("{c:.1}"),
                sp.map_or("-".into(), |v| format!("{v:.2}")),
                verdict,
            ]);
        }
        if p.goal {
            if let Some((sm, sp)) = speedups_2m(result, p) {
                goal_n += 1;
                goal_met += usize::from(within(sp, sm.median));
                unsettled += usize::from(!settled(sp, &sm));
            }
        }
        if let Some(same) = same_ranking(result, p) {
            rank_n += 1;
            rank_met += usize::from(same);
        }
    }
    let unsettled = if unsettled > 0 {
        format!(
            " ({unsettled} of them unsettled: the interval of the measured speed-up crosses \
             an edge of the band, so another set of runs could turn the verdict: re-measure \
             on an idle machine, with a larger --repeat or --settle)"
        )
    } else {
        String::new()
    };
    format!(
        "measured (median of {runs} run(s), time per operation; the speed-up over 4K the \
         median of the rounds', with an interval that holds it with {:.0}% confidence where \
         the rounds allow) beside the model ({model}, cycles per operation in the steady \
         state)\n{}\
         goal: predicted 2M-over-4K speed-up within {:.0}% of the measured one \
         (stride heaps of 16M and more, gups, chase): {goal_met} of {goal_n} kernels{unsettled}\n\
         goal: configurations ranked in the measured order (every pair of configurations \
         the runs separate ordered alike by the model: ranges that do not overlap, or one \
         faster in enough of the rounds for sign tests at {:.0}% over a kernel's pairs): \
         {rank_met} of {rank_n} kernels whose runs separate some pair\n",
        SPEEDUP_CONFIDENCE * 100.0,
        columns(&rows, &[0, 1]),
        SPEEDUP_TOLERANCE * 100.0,
        RANK_SIGNIFICANCE * 100.0
    )
}

#[cfg(test)]
mod tests;
