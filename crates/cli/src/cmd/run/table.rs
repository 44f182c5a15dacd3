//! The table `pagelab run` prints: one row per configuration, medians over repetitions.

use pagelab_core::PageSize;
use pagelab_report::{LabConfig, LabResult};

/// The table: one row per configuration, medians over repetitions.
pub fn table(result: &LabResult) -> String {
    let mut rows = vec![[
        "config",
        "wall",
        "user",
        "sys",
        "faults",
        "THP allocations",
        "fallbacks",
        "peak RSS",
        "vs 4K",
    ]
    .map(String::from)
    .to_vec()];
    for c in &result.configs {
        let med = |k: &str| c.summary.get(k).map_or(0.0, |s| s.median);
        let wall = c.summary.get("wall_seconds").copied().unwrap_or_default();
        let wall = if c.runs.len() > 1 {
            format!("{:.3} s ± {:.1}%", wall.median, wall.spread * 100.0)
        } else {
            format!("{:.3} s", wall.median)
        };
        let per_size = |prefix: &str| {
            let mut v: Vec<(PageSize, f64)> = c
                .summary
                .iter()
                .filter_map(|(k, s)| Some((k.strip_prefix(prefix)?.parse().ok()?, s.median)))
                .collect();
            v.sort_by_key(|e| std::cmp::Reverse(e.0));
            let text: Vec<String> = v
                .iter()
                .map(|(s, n)| format!("{s}:{}", count(*n)))
                .collect();
            if text.is_empty() {
                "-".to_string()
            } else {
                text.join(" ")
            }
        };
        rows.push(vec![
            c.label.clone(),
            wall,
            format!("{:.3} s", med("user_seconds")),
            format!("{:.3} s", med("system_seconds")),
            count(med("faults")),
            per_size("faults_by_size/"),
            per_size("fallbacks_by_size/"),
            pagelab_core::Bytes(med("peak_rss_bytes") as u64).to_string(),
            c.speedup_vs_4k.map_or("-".into(), |s| format!("{s:.2}x")),
        ]);
    }
    let mut out = pagelab_report::columns(&rows, &[0]);
    let runs = result
        .configs
        .iter()
        .map(|c| c.runs.len())
        .max()
        .unwrap_or(0);
    out += &format!(
        "{} run{} per configuration; wall is the median{}; faults are minor faults; THP \
         allocations are the kernel's anon_fault_alloc per size (system-wide, during the run)\n",
        runs,
        if runs == 1 { "" } else { "s" },
        if runs > 1 { " ± (max-min)/median" } else { "" }
    );
    if let Some(why) = result
        .configs
        .iter()
        .flat_map(|c| &c.runs)
        .find_map(|m| m.hw_unavailable.as_ref())
    {
        out += &format!("hardware counters unavailable: {why}\n");
    }
    for c in result.configs.iter().filter(|c| !c.hugetlb.is_empty()) {
        out += &hugetlb_note(c);
    }
    if let Some(failures) = failures(result) {
        out += &format!("{failures}\n");
    }
    out
}

/// How a run ended, as people say it: `exited with code 7`, `was killed by signal 9`.
fn ending(m: &pagelab_report::Measurement) -> Option<String> {
    match (m.exit.code, m.exit.signal) {
        (Some(0), _) => None,
        (Some(code), _) => Some(format!("exited with code {code}")),
        (None, Some(sig)) => Some(format!("was killed by signal {sig}")),
        (None, None) => Some("ended in an unknown way".into()),
    }
}

/// A sentence naming every configuration whose program failed in some run, and how; `None`
/// when every run exited 0. The figures of such runs measure a program that did not do its
/// whole work, so the table must not pass for a normal one.
pub fn failures(result: &LabResult) -> Option<String> {
    let parts: Vec<String> = result
        .configs
        .iter()
        .filter_map(|c| {
            let endings: Vec<String> = c.runs.iter().filter_map(ending).collect();
            let first = endings.first()?;
            Some(format!(
                "under {} it {first} in {} of {} run{}",
                c.label,
                endings.len(),
                c.runs.len(),
                if c.runs.len() == 1 { "" } else { "s" }
            ))
        })
        .collect();
    (!parts.is_empty()).then(|| {
        format!(
            "WARNING: the program failed: {}; those runs' figures are in the table and the \
             JSON as measured, and pagelab exits with the first failed run's status",
            parts.join("; ")
        )
    })
}

/// What a configuration with hugetlb pools got from them: the pool, the pages in use at the
/// peak (sampled), what the shim mapped.
fn hugetlb_note(c: &LabConfig) -> String {
    let med = |k: &str| c.summary.get(k).map_or(0.0, |s| s.median);
    let pools: Vec<String> = c
        .hugetlb
        .iter()
        .map(|(size, got)| {
            format!(
                "pool of {got} {size} pages, at most {} of them seen in use",
                count(med(&format!("metrics/hugetlb_peak_in_use/{size}")))
            )
        })
        .collect();
    let mut note = format!("{}: {}", c.label, pools.join("; "));
    if c.summary.contains_key("metrics/shim_processes") {
        note += &format!(
            "; the shim mapped {} mappings with MAP_HUGETLB ({} fell back to normal pages)",
            count(med("metrics/shim_hugetlb_mappings")),
            count(med("metrics/shim_hugetlb_fallbacks"))
        );
    }
    note + " (medians; use is sampled every 5 ms, so a run that short may show none)\n"
}

fn count(n: f64) -> String {
    if n.fract() == 0.0 {
        format!("{n:.0}")
    } else {
        format!("{n:.1}")
    }
}
