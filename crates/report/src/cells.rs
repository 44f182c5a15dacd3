//! The cells shared by the text and Markdown tables: one header, one row per page size.

use crate::schema::{RunStats, SimResult};
use pagelab_core::Bytes;

/// Column headers of the per-page-size tables.
pub(crate) const HEADERS: [&str; 11] = [
    "page",
    "iTLB acc",
    "iTLB miss",
    "iTLB miss%",
    "dTLB acc",
    "dTLB miss",
    "dTLB miss%",
    "code",
    "data",
    "total",
    "faults",
];

/// The first line of a table: source and TLB.
pub(crate) fn heading(r: &SimResult) -> String {
    match &r.machine {
        Some(m) => format!(
            "{} · TLB: {} · machine: {m}",
            r.source_label(),
            r.tlb_name()
        ),
        None => format!("{} · TLB: {}", r.source_label(), r.tlb_name()),
    }
}

/// The second line of a table: reference counts.
pub(crate) fn refs_line(r: &SimResult) -> String {
    format!(
        "refs: {} instr, {} data",
        thousands(r.refs.instr),
        thousands(r.refs.data)
    )
}

/// One row of cells per run.
pub(crate) fn rows(r: &SimResult) -> Vec<Vec<String>> {
    let mut rows: Vec<Vec<String>> = if r.runs.iter().any(|run| run.mm.is_some()) {
        let reclaim = any_reclaim(r);
        let numa = any_numa(r);
        r.runs
            .iter()
            .map(|run| {
                let mut cells = policy_row(run, reclaim);
                if numa {
                    cells.extend(numa_cells(run));
                }
                cells
            })
            .collect()
    } else {
        r.runs.iter().map(|run| row(run).to_vec()).collect()
    };
    if r.runs.iter().any(|run| run.cost.is_some()) {
        for (cells, run) in rows.iter_mut().zip(&r.runs) {
            cells.extend(cost_cells(run));
        }
    }
    rows
}

/// The time columns, when the runs were timed (`--cost`).
pub(crate) const COST_HEADERS: [&str; 6] = [
    "cycles/ref",
    "cycles/data ref",
    "speed-up",
    "walk refs",
    "L1D miss data",
    "L1D miss PT",
];

fn cost_cells(run: &RunStats) -> Vec<String> {
    let Some(c) = &run.cost else {
        return vec!["-".to_string(); COST_HEADERS.len()];
    };
    let l1 = c.caches.first();
    vec![
        format!("{:.2}", c.cycles_per_ref),
        format!("{:.2}", c.cycles_per_data_ref),
        c.speedup_over_4k
            .map_or("-".to_string(), |s| format!("{s:.2}×")),
        thousands(c.walk_refs),
        thousands(l1.map_or(0, |l| l.data_misses)),
        thousands(l1.map_or(0, |l| l.table_misses)),
    ]
}

/// The column headers for `r`: one row per page size, or one row per policy
/// (with the reclaim columns when some run reclaimed memory or read from disk).
pub(crate) fn headers(r: &SimResult) -> Vec<&'static str> {
    let mut h = if r.runs.iter().any(|run| run.mm.is_some()) {
        let mut h = POLICY_HEADERS.to_vec();
        if any_reclaim(r) {
            h.extend(RECLAIM_HEADERS);
        }
        if any_numa(r) {
            h.extend(NUMA_HEADERS);
        }
        h
    } else {
        HEADERS.to_vec()
    };
    if r.runs.iter().any(|run| run.cost.is_some()) {
        h.extend(COST_HEADERS);
    }
    h
}

/// Whether some run of `r` reclaimed memory or took a major fault.
fn any_reclaim(r: &SimResult) -> bool {
    r.runs
        .iter()
        .filter_map(|run| run.mm.as_ref())
        .any(|mm| mm.reclaimed_bytes > 0 || mm.major_faults > 0 || mm.swap_bytes > 0)
}

/// Whether some run of `r` was on a machine of several NUMA nodes.
fn any_numa(r: &SimResult) -> bool {
    r.runs
        .iter()
        .filter_map(|run| run.mm.as_ref())
        .any(|mm| mm.numa.is_some())
}

/// The NUMA columns (on a machine of several nodes): allocations and
/// references local and remote to the CPU of the process that made them.
pub(crate) const NUMA_HEADERS: [&str; 5] = [
    "local alloc",
    "remote alloc",
    "local refs",
    "remote refs",
    "remote%",
];

fn numa_cells(run: &RunStats) -> Vec<String> {
    let n = run.mm.as_ref().and_then(|mm| mm.numa.as_ref());
    let get = |k: &str| n.and_then(|n| n.get(k)).and_then(|v| v.as_u64());
    let count = |k: &str| get(k).map_or("-".to_string(), thousands);
    let share = match (get("local_refs"), get("remote_refs")) {
        (Some(l), Some(r)) if l + r > 0 => format!("{:.1}%", r as f64 * 100.0 / (l + r) as f64),
        _ => "-".to_string(),
    };
    vec![
        count("local_allocs"),
        count("remote_allocs"),
        count("local_refs"),
        count("remote_refs"),
        share,
    ]
}

/// Columns of a run of the memory-management model under a policy.
pub(crate) const POLICY_HEADERS: [&str; 12] = [
    "policy",
    "faults",
    "faults by size",
    "iTLB miss",
    "dTLB miss",
    "walk refs",
    "rss",
    "peak rss",
    "page tables",
    "promo",
    "demo",
    "frag",
];

/// The reclaim columns after them: major faults, bytes reclaimed (swapped out
/// plus page cache dropped), swapped out, and in swap at the end.
pub(crate) const RECLAIM_HEADERS: [&str; 4] = ["major", "reclaimed", "swapped out", "in swap"];

fn policy_row(run: &RunStats, reclaim: bool) -> Vec<String> {
    let mm = run.mm.clone().unwrap_or_default();
    let mut by_size: Vec<(u64, String)> = mm
        .faults_by_size
        .iter()
        .map(|(k, n)| {
            (
                k.parse::<pagelab_core::PageSize>().map_or(0, |s| s.bytes()),
                format!("{k}:{}", thousands(*n)),
            )
        })
        .collect();
    by_size.sort();
    let mut cells = vec![
        mm.policy.clone(),
        thousands(run.faults),
        by_size
            .into_iter()
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(" "),
        thousands(run.itlb_misses),
        thousands(run.dtlb_misses),
        thousands(mm.walk_refs),
        Bytes(mm.rss_bytes).to_string(),
        Bytes(mm.peak_rss_bytes).to_string(),
        Bytes(mm.page_table_bytes).to_string(),
        thousands(mm.promotions),
        thousands(mm.demotions),
        format!("{:.2}", mm.fragmentation),
    ];
    if reclaim {
        cells.extend([
            thousands(mm.major_faults),
            Bytes(mm.reclaimed_bytes).to_string(),
            Bytes(mm.swapped_out_bytes).to_string(),
            Bytes(mm.swap_bytes).to_string(),
        ]);
    }
    cells
}

fn row(run: &RunStats) -> [String; 11] {
    [
        run.page_size.to_string(),
        thousands(run.itlb_accesses),
        thousands(run.itlb_misses),
        pct(run.itlb_miss_percent()),
        thousands(run.dtlb_accesses),
        thousands(run.dtlb_misses),
        pct(run.dtlb_miss_percent()),
        Bytes(run.code_footprint_bytes).to_string(),
        Bytes(run.data_footprint_bytes).to_string(),
        Bytes(run.footprint_bytes).to_string(),
        thousands(run.faults),
    ]
}

/// A percentage with two decimals, or two significant digits when smaller (`0.0042%`), so
/// that a rare miss never reads as `0.00%`.
fn pct(p: Option<f64>) -> String {
    match p {
        None => "-".to_string(),
        Some(0.0) => "0%".to_string(),
        Some(p) => {
            let decimals = (1 - p.log10().floor() as i64).clamp(2, 8) as usize;
            format!("{p:.decimals$}%")
        }
    }
}

/// `n` with a comma between groups of three digits: `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{pct, thousands};

    #[test]
    fn small_percentages_keep_two_significant_digits() {
        assert_eq!(pct(None), "-");
        assert_eq!(pct(Some(0.0)), "0%");
        assert_eq!(pct(Some(17.0)), "17.00%");
        assert_eq!(pct(Some(0.62)), "0.62%");
        assert_eq!(pct(Some(0.0042)), "0.0042%");
        assert_eq!(pct(Some(100.0)), "100.00%");
    }

    #[test]
    fn groups_digits_by_three() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(123_456), "123,456");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
    }
}
