//! The lab's result schema (`pagelab.lab/1`): what real runs on this machine measured.
//!
//! One [`LabResult`] holds every configuration a `pagelab run`, `pagelab bench` or
//! `pagelab validate` tried. Field names follow the model's [`crate::RunStats`] and
//! [`crate::PolicyStats`] where they mean the same thing (`faults`, `faults_by_size`,
//! `peak_rss_bytes`), so a model result and a lab result can be laid side by side.
//! Sizes in keys are written as people write them (`64K`, `2M`); values are counts or bytes.

use pagelab_core::PageSize;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The `schema` string of a [`LabResult`].
pub const LAB_SCHEMA: &str = "pagelab.lab/1";

/// Everything one lab command measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LabResult {
    /// Always [`LAB_SCHEMA`].
    pub schema: String,
    /// `run`, `bench` or `validate`.
    pub command: String,
    /// The machine the figures come from.
    pub host: HostInfo,
    /// One entry per (workload or program, page-size configuration), in the order run.
    pub configs: Vec<LabConfig>,
    /// Runs whose program did not exit 0 (each run's `exit` says how it ended). Their figures
    /// stay in the summaries, as measured; `pagelab run` exits with the first one's status.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed_runs: u32,
    /// The signal (its number) that stopped the command before every configuration ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted_by: Option<i32>,
    /// What made the result: pagelab's version and the command line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<crate::Provenance>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl LabResult {
    /// An empty result of `command` with the right schema string.
    pub fn new(command: &str, host: HostInfo) -> LabResult {
        LabResult {
            schema: LAB_SCHEMA.to_string(),
            command: command.to_string(),
            host,
            configs: Vec::new(),
            failed_runs: 0,
            interrupted_by: None,
            provenance: None,
        }
    }
}

/// What the machine was: enough to tell a VM from bare metal and one kernel from another.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    /// `uname -r`.
    pub kernel: String,
    /// The CPU model name from `/proc/cpuinfo`.
    pub cpu: String,
    /// Online CPUs.
    pub cpus: u32,
    /// `MemTotal` in bytes.
    pub memory_bytes: u64,
    /// Whether `/proc/cpuinfo` lists the `hypervisor` flag.
    pub virtualized: bool,
    /// The anonymous THP sizes the kernel offers (`hugepages-*kB` directories with an `enabled` knob).
    pub thp_sizes: Vec<PageSize>,
    /// The hugetlb page sizes the kernel offers.
    pub hugetlb_sizes: Vec<PageSize>,
}

/// One page-size configuration of one program or workload, and every repetition of it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LabConfig {
    /// What ran: the program and its arguments, or a workload spec such as `stride:heap=4M`.
    pub subject: String,
    /// The configuration as people read it: `4K`, `64K`, `64K+2M`, `2M hugetlb`.
    pub label: String,
    /// The anonymous page sizes made available (4K alone is the baseline).
    pub pages: Vec<PageSize>,
    /// The THP mode the sizes were enabled with: `always` or `madvise`.
    pub thp: String,
    /// hugetlb pools set for the run: size → pages obtained.
    #[serde(default)]
    pub hugetlb: BTreeMap<String, u64>,
    /// Every repetition, in the order run.
    pub runs: Vec<Measurement>,
    /// Median, minimum, maximum and spread of each numeric metric over `runs`.
    #[serde(default)]
    pub summary: BTreeMap<String, Summary>,
    /// Median wall time of the 4K baseline over this configuration's median (above 1 is faster),
    /// when the same command also ran the baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speedup_vs_4k: Option<f64>,
    /// What the model predicted for the same configuration (`pagelab validate`): its faults and
    /// per-size allocations, for comparison with `runs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted: Option<Measurement>,
    /// Disagreements between `predicted` and `runs`, as sentences; empty when they agree.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disagreements: Vec<String>,
}

/// One run of a program (or one timed kernel of a benchmark).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// Wall-clock seconds.
    pub wall_seconds: f64,
    /// User CPU seconds.
    pub user_seconds: f64,
    /// System CPU seconds.
    pub system_seconds: f64,
    /// Minor page faults (the model's `faults`).
    pub faults: u64,
    /// Major page faults.
    pub major_faults: u64,
    /// Anonymous THP allocations at fault time per size (`anon_fault_alloc` deltas), e.g. `"64K": 12`.
    #[serde(default)]
    pub faults_by_size: BTreeMap<String, u64>,
    /// Failed THP allocations at fault time per size (`anon_fault_fallback` deltas).
    #[serde(default)]
    pub fallbacks_by_size: BTreeMap<String, u64>,
    /// Every kernel counter that changed: `hugepages-64kB/anon_fault_alloc`, `vmstat/thp_fault_alloc`, ...
    #[serde(default)]
    pub kernel_counters: BTreeMap<String, i64>,
    /// Peak resident set in bytes.
    pub peak_rss_bytes: u64,
    /// Hardware counters by name (`cycles`, `instructions`, `dtlb_misses`, `itlb_misses`);
    /// `null` when the CPU does not expose the counter. Never zero for "unavailable".
    #[serde(default)]
    pub hw: BTreeMap<String, Option<u64>>,
    /// Why hardware counters are unavailable, when they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hw_unavailable: Option<String>,
    /// Benchmark-specific figures (`ns_per_access`, `mb_per_s`, ...).
    #[serde(default)]
    pub metrics: BTreeMap<String, f64>,
    /// How the program ended.
    pub exit: ExitInfo,
}

/// How a program ended: an exit code or a signal.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitInfo {
    /// The exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
}

/// A metric's distribution over repetitions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The median (the mean of the middle two for an even count).
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
    /// (max - min) / median, as a fraction; 0 for a single run.
    pub spread: f64,
}

impl Summary {
    /// The summary of `values` (`None` when there are none).
    pub fn of(values: &[f64]) -> Option<Summary> {
        if values.is_empty() {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        let (min, max) = (v[0], v[n - 1]);
        let spread = if median != 0.0 {
            (max - min) / median.abs()
        } else {
            0.0
        };
        Some(Summary {
            median,
            min,
            max,
            spread,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_odd_and_even_counts() {
        let s = Summary::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert!((s.spread - 1.0).abs() < 1e-12);
        let s = Summary::of(&[4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!(s.median, 2.5);
        assert_eq!(Summary::of(&[5.0]).unwrap().spread, 0.0);
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn lab_result_round_trips_with_unavailable_counters() {
        let mut r = LabResult::new("run", HostInfo::default());
        let mut m = Measurement::default();
        m.hw.insert("cycles".into(), None);
        m.hw_unavailable = Some("no PMU".into());
        r.configs.push(LabConfig {
            label: "4K".into(),
            runs: vec![m],
            ..Default::default()
        });
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains("\"cycles\":null"), "{text}");
        let back: LabResult = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r);
    }
}
