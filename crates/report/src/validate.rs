//! `pagelab validate`'s result (schema `pagelab.validate/1`): the model's and the kernel's
//! faults and per-size THP allocations for each (workload, configuration) case, side by side,
//! with a verdict under a tolerance, and the table that shows them.
//!
//! ```
//! use pagelab_report::validate::{Counts, ValidateCase};
//!
//! let model = Counts::new(105, [("64K", 10)]);
//! let kernel = Counts::new(100, [("64K", 10)]);
//! assert_eq!(ValidateCase::verdict_of(&model, &kernel, 5.0), "agree");
//! assert_eq!(ValidateCase::verdict_of(&model, &kernel, 4.9), "differ");
//! ```

use crate::Provenance;
use pagelab_core::PageSize;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;

/// The schema name of a validate result.
pub const VALIDATE_SCHEMA: &str = "pagelab.validate/1";

/// Faults and THP allocations at fault time per size above 4K (`anon_fault_alloc`), and for
/// real programs the large anonymous folios mapped at exit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counts {
    /// Page faults (minor and major, as the kernel counts them for the process).
    pub faults: u64,
    /// Allocations per size at fault time (`anon_fault_alloc`), keyed as people write sizes
    /// (`"64K"`); sizes with none are left out. For a real program the kernel's are the
    /// machine-wide counters' deltas over the run (other processes' too), so there they are
    /// information, and [`Counts::exit_folios`] decides.
    pub allocs: BTreeMap<String, u64>,
    /// For real programs (`validate -- PROGRAM`): the large anonymous folios each of the
    /// program's processes had mapped at its exit, summed over the processes, by size
    /// (the kernel's read from `/proc/PID/pagemap` and `/proc/kpageflags` at each exit; the
    /// model's from its page tables at each exit record). Absent where not counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_folios: Option<BTreeMap<String, u64>>,
}

impl Counts {
    /// Counts from `faults` and `(size, allocations)` pairs (zeros are dropped).
    pub fn new<'a>(faults: u64, allocs: impl IntoIterator<Item = (&'a str, u64)>) -> Counts {
        Counts {
            faults,
            allocs: allocs
                .into_iter()
                .filter(|&(_, n)| n > 0)
                .map(|(k, n)| (k.to_string(), n))
                .collect(),
            exit_folios: None,
        }
    }

    /// These counts with the folios mapped at exit, `(size, folios)` pairs (zeros dropped).
    pub fn with_exit_folios<'a>(
        mut self,
        folios: impl IntoIterator<Item = (&'a str, u64)>,
    ) -> Counts {
        self.exit_folios = Some(Counts::new(0, folios).allocs);
        self
    }

    /// The allocations as `3×64K 1×2M` in size order, or `-` when there are none.
    pub fn allocs_text(&self) -> String {
        per_size_text(&self.allocs)
    }

    /// The allocation cell of the table: [`Counts::allocs_text`], or with folios at exit
    /// `55×64K at exit (54×64K at fault)`, `NOTE` added after `at fault` when given
    /// (the kernel's `machine-wide`).
    pub fn allocs_cell(&self, note: Option<&str>) -> String {
        match &self.exit_folios {
            Some(f) => format!(
                "{} at exit ({} at fault{})",
                per_size_text(f),
                self.allocs_text(),
                note.map(|n| format!(", {n}")).unwrap_or_default()
            ),
            None => self.allocs_text(),
        }
    }
}

/// Counts by size as `3×64K 1×2M` in size order, or `-` when there are none.
pub(crate) fn per_size_text(counts: &BTreeMap<String, u64>) -> String {
    let mut sizes: Vec<(&String, &u64)> = counts.iter().filter(|(_, &n)| n > 0).collect();
    sizes.sort_by_key(|(k, _)| k.parse::<PageSize>().ok());
    if sizes.is_empty() {
        return "-".into();
    }
    let words: Vec<String> = sizes.iter().map(|(k, n)| format!("{n}×{k}")).collect();
    words.join(" ")
}

/// One case: a workload (or program) under one configuration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidateCase {
    /// The workload spec, or the program's command line.
    pub workload: String,
    /// The page sizes enabled: `4K`, `64K`, `2M`, `16K+64K`, or `all`.
    pub config: String,
    /// How the sizes were enabled: `madvise` or `always`.
    pub thp: String,
    /// What the model predicts.
    pub model: Counts,
    /// What the kernel did (the median of `kernel_runs` when the program ran several times).
    pub kernel: Counts,
    /// Each native run's counts, when there were several: the kernel's own run-to-run noise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_runs: Vec<Counts>,
    /// `agree` when every figure is within the tolerance, else `differ`.
    pub verdict: String,
    /// With `validate --per-mapping`: what each process mapped at its exit, mapping by
    /// mapping, the model's beside the kernel's (one native run's: the first whose folios
    /// at exit are the median's) ([`crate::validate_mappings`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mappings: Vec<crate::validate_mappings::MappingRow>,
}

impl ValidateCase {
    /// `agree` when the faults and every size's allocations of `model` are within
    /// `tolerance_percent` of the kernel's (0: exactly equal), else `differ`. Where both
    /// sides counted the folios mapped at exit, those are the allocations compared.
    pub fn verdict_of(model: &Counts, kernel: &Counts, tolerance_percent: f64) -> &'static str {
        let within = |m: u64, k: u64| m.abs_diff(k) as f64 <= tolerance_percent / 100.0 * k as f64;
        let (m, k) = match (&model.exit_folios, &kernel.exit_folios) {
            (Some(m), Some(k)) => (m, k),
            _ => (&model.allocs, &kernel.allocs),
        };
        let allocs_ok = m.keys().chain(k.keys()).all(|s| {
            within(
                m.get(s).copied().unwrap_or(0),
                k.get(s).copied().unwrap_or(0),
            )
        });
        if within(model.faults, kernel.faults) && allocs_ok {
            "agree"
        } else {
            "differ"
        }
    }

    /// The verdict against a kernel that ran the program several times (`runs`, each
    /// native run's counts) and need not do the same each time (a race between processes,
    /// the scheduler): each figure of `model` is judged against the kernel's range of that
    /// figure over the runs, and agrees when it lies inside the range or within
    /// `tolerance_percent` of the range's nearer end (the same as within the tolerance of
    /// one run's figure). Folios at exit are compared when the model and every run have
    /// them, else allocations at fault; a size a run lacks counts 0 there. With one run,
    /// this is [`ValidateCase::verdict_of`] against it; with none, `differ`.
    ///
    /// ```
    /// use pagelab_report::validate::{Counts, ValidateCase};
    ///
    /// let runs = [Counts::new(100, [("16K", 16)]), Counts::new(101, [("16K", 17)])];
    /// let model = Counts::new(99, [("16K", 17)]);
    /// assert_eq!(ValidateCase::verdict_over_runs(&model, &runs, 5.0), "agree");
    /// let model = Counts::new(99, [("16K", 18)]);
    /// assert_eq!(ValidateCase::verdict_over_runs(&model, &runs, 5.0), "differ");
    /// ```
    pub fn verdict_over_runs(
        model: &Counts,
        runs: &[Counts],
        tolerance_percent: f64,
    ) -> &'static str {
        if runs.is_empty() {
            return "differ";
        }
        // The kernel's figure nearest to `m` among `values`: the range's nearer end.
        let near = |m: u64, values: &mut dyn Iterator<Item = u64>| {
            let (lo, hi) = values.fold((u64::MAX, 0), |(lo, hi), v| (lo.min(v), hi.max(v)));
            let k = m.clamp(lo, hi);
            m.abs_diff(k) as f64 <= tolerance_percent / 100.0 * k as f64
        };
        let exit = model.exit_folios.is_some() && runs.iter().all(|r| r.exit_folios.is_some());
        let m = sizes_compared(model, exit);
        let ks: Vec<BTreeMap<String, u64>> = runs.iter().map(|r| sizes_compared(r, exit)).collect();
        let mut sizes: Vec<&String> = m.keys().chain(ks.iter().flat_map(|k| k.keys())).collect();
        sizes.sort();
        sizes.dedup();
        let allocs_ok = sizes.iter().all(|s| {
            let n = m.get(*s).copied().unwrap_or(0);
            near(n, &mut ks.iter().map(|k| k.get(*s).copied().unwrap_or(0)))
        });
        if near(model.faults, &mut runs.iter().map(|c| c.faults)) && allocs_ok {
            "agree"
        } else {
            "differ"
        }
    }
}

/// The per-size counts a verdict compares: folios at exit (`exit`), else allocations at fault.
fn sizes_compared(c: &Counts, exit: bool) -> BTreeMap<String, u64> {
    match &c.exit_folios {
        Some(f) if exit => f.clone(),
        _ => c.allocs.clone(),
    }
}

/// The sizes whose count (folios at exit where every run has them, else allocations at
/// fault) varies over the kernel's runs, as `16K 16..17`, joined by `, `; empty when none
/// varies.
pub fn folio_spread(runs: &[Counts]) -> String {
    let exit = runs.iter().all(|r| r.exit_folios.is_some());
    let ks: Vec<BTreeMap<String, u64>> = runs.iter().map(|r| sizes_compared(r, exit)).collect();
    let mut sizes: Vec<&String> = ks.iter().flat_map(|k| k.keys()).collect();
    sizes.sort_by_key(|k| k.parse::<PageSize>().ok());
    sizes.dedup();
    sizes
        .iter()
        .filter_map(|s| {
            let v = ks.iter().map(|k| k.get(*s).copied().unwrap_or(0));
            let (lo, hi) = (v.clone().min()?, v.max()?);
            (lo != hi).then(|| format!("{s} {lo}..{hi}"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A validate result: every case, with the tolerance the verdicts used.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidateResult {
    /// Always [`VALIDATE_SCHEMA`].
    pub schema: String,
    /// The tolerance of the verdicts, in percent of the kernel's figure (0: exact).
    pub tolerance_percent: f64,
    /// The cases, in the order they ran.
    pub cases: Vec<ValidateCase>,
    /// Where the result came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
}

impl ValidateResult {
    /// An empty result with the tolerance its verdicts use.
    pub fn new(tolerance_percent: f64) -> ValidateResult {
        ValidateResult {
            schema: VALIDATE_SCHEMA.into(),
            tolerance_percent,
            ..Default::default()
        }
    }

    /// The workloads (or programs) of the cases, each once, in the order run.
    pub fn workloads(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for c in &self.cases {
            if !out.contains(&c.workload.as_str()) {
                out.push(&c.workload);
            }
        }
        out
    }

    /// The cases whose verdict is not `agree`.
    pub fn differing(&self) -> usize {
        self.cases.iter().filter(|c| c.verdict != "agree").count()
    }
}

/// `model` against `kernel` as a signed percentage of the kernel's figure (`+5.0%`), or `=`
/// when equal; `new` when the kernel's is 0 and the model's not.
pub fn difference(model: u64, kernel: u64) -> String {
    if model == kernel {
        return "=".into();
    }
    if kernel == 0 {
        return "new".into();
    }
    format!(
        "{:+.1}%",
        (model as f64 - kernel as f64) / kernel as f64 * 100.0
    )
}

/// The text table: one row per case, the model's figures beside the kernel's with their
/// difference, the kernel's spread over repeated runs where there were several, and the verdict.
pub fn validate_table(r: &ValidateResult) -> String {
    let (head, rows) = validate_rows(r);
    let mut widths = head.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let numeric = |i: usize| (3..=6).contains(&i);
    let mut out = String::new();
    let line = |out: &mut String, cells: &[String]| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            let pad = w.saturating_sub(cell.chars().count());
            if i > 0 {
                text.push_str("  ");
            }
            if numeric(i) {
                text.push_str(&" ".repeat(pad));
                text.push_str(cell);
            } else {
                text.push_str(cell);
                text.push_str(&" ".repeat(pad));
            }
        }
        let _ = writeln!(out, "{}", text.trim_end());
    };
    line(&mut out, &head.map(String::from));
    let _ = writeln!(
        out,
        "{}",
        "-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1))
    );
    for row in &rows {
        line(&mut out, row);
    }
    out
}

/// The table's header and rows: one row per case (the text table and the HTML report's).
pub(crate) fn validate_rows(r: &ValidateResult) -> ([&'static str; 10], Vec<[String; 10]>) {
    let head = [
        "workload",
        "config",
        "thp",
        "faults model",
        "faults kernel",
        "diff",
        "kernel spread",
        "allocs model",
        "allocs kernel",
        "verdict",
    ];
    let rows: Vec<[String; 10]> = r
        .cases
        .iter()
        .map(|c| {
            let spread = match (
                c.kernel_runs.iter().map(|k| k.faults).min(),
                c.kernel_runs.iter().map(|k| k.faults).max(),
            ) {
                (Some(lo), Some(hi)) if c.kernel_runs.len() > 1 => {
                    match folio_spread(&c.kernel_runs) {
                        f if f.is_empty() => format!("{lo}..{hi}"),
                        f => format!("{lo}..{hi}; {f}"),
                    }
                }
                _ => "-".into(),
            };
            [
                c.workload.clone(),
                c.config.clone(),
                c.thp.clone(),
                c.model.faults.to_string(),
                c.kernel.faults.to_string(),
                difference(c.model.faults, c.kernel.faults),
                spread,
                c.model.allocs_cell(None),
                c.kernel.allocs_cell(Some("machine-wide")),
                c.verdict.clone(),
            ]
        })
        .collect();
    (head, rows)
}

/// One sentence per workload, in the order run: whether the model and the kernel agreed
/// within the tolerance under every configuration, else how many differ and the largest
/// difference in faults.
pub fn recommendations(r: &ValidateResult) -> Vec<crate::recommend::Recommendation> {
    let (within, beyond) = if r.tolerance_percent == 0.0 {
        ("exactly".to_string(), String::new())
    } else {
        let t = r.tolerance_percent;
        (format!("within {t}%"), format!(" by more than {t}%"))
    };
    r.workloads()
        .into_iter()
        .map(|w| {
            let cases: Vec<&ValidateCase> = r.cases.iter().filter(|c| c.workload == w).collect();
            let differ: Vec<&&ValidateCase> =
                cases.iter().filter(|c| c.verdict != "agree").collect();
            let sentence = if differ.is_empty() {
                let under = match cases.len() {
                    1 => format!("under its one configuration ({} {})", cases[0].config, cases[0].thp),
                    n => format!("under all {n} configurations"),
                };
                format!(
                    "{w}: the model and the kernel agree {within} on faults and allocations per size {under}."
                )
            } else {
                let gap = |c: &ValidateCase| c.model.faults.abs_diff(c.kernel.faults);
                let worst = differ.iter().max_by_key(|c| gap(c)).expect("one differs");
                let labels: Vec<String> =
                    differ.iter().map(|c| format!("{} {}", c.config, c.thp)).collect();
                format!(
                    "{w}: the model and the kernel DIFFER{beyond} under {} of {} configurations ({}); the largest fault difference is under {} {}: model {}, kernel {} ({}).",
                    differ.len(),
                    cases.len(),
                    labels.join(", "),
                    worst.config,
                    worst.thp,
                    worst.model.faults,
                    worst.kernel.faults,
                    difference(worst.model.faults, worst.kernel.faults)
                )
            };
            crate::recommend::Recommendation {
                subject: w.to_string(),
                choice: Some(if differ.is_empty() { "agree" } else { "differ" }.to_string()),
                sentence,
            }
        })
        .collect()
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
