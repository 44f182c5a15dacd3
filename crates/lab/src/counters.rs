//! Snapshots of the kernel's own memory counters, and what changed between two.
//!
//! A [`CounterSnapshot`] reads, all at once:
//!
//! - every file under `transparent_hugepage/hugepages-*kB/stats/`, keyed
//!   `hugepages-64kB/anon_fault_alloc` (the per-size THP allocations and fallbacks at fault
//!   time, splits, swaps, ...);
//! - the `thp_*` lines of `/proc/vmstat`, keyed `vmstat/thp_fault_alloc`;
//! - each hugetlb pool's `free_hugepages` and `surplus_hugepages`, keyed
//!   `hugetlb-2048kB/free_hugepages`.
//!
//! The counters are system-wide: a delta around a run also counts whatever else the machine
//! did meanwhile (on an idle machine, next to nothing).
//!
//! ```no_run
//! use pagelab_lab::{counters::{self, CounterSnapshot}, sysfs::Sysfs};
//! let sysfs = Sysfs::host();
//! let before = CounterSnapshot::take(&sysfs);
//! // ... run something ...
//! let delta = before.delta(&CounterSnapshot::take(&sysfs));
//! println!("{:?}", counters::faults_by_size(&delta)); // {"64K": 128}
//! ```

use crate::sysfs::Sysfs;
use pagelab_core::PageSize;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The values of the kernel's THP and hugetlb counters at one moment, by key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CounterSnapshot {
    /// Every counter read, by key (`hugepages-64kB/anon_fault_alloc`, `vmstat/thp_fault_alloc`,
    /// `hugetlb-2048kB/free_hugepages`).
    pub values: BTreeMap<String, i64>,
}

impl CounterSnapshot {
    /// Reads every counter `sysfs` offers. Files that are missing or do not hold a number are
    /// left out (a kernel without THP gives an empty snapshot, not an error).
    pub fn take(sysfs: &Sysfs) -> CounterSnapshot {
        let mut values = BTreeMap::new();
        for dir in size_dirs(&sysfs.thp_dir()) {
            let Ok(stats) = fs::read_dir(dir.join("stats")) else {
                continue;
            };
            let dir_name = file_name(&dir);
            for entry in stats.flatten() {
                if let Some(v) = read_number(&entry.path()) {
                    values.insert(format!("{dir_name}/{}", file_name(&entry.path())), v);
                }
            }
        }
        if let Ok(vmstat) = fs::read_to_string(sysfs.proc.join("vmstat")) {
            for line in vmstat.lines() {
                let mut words = line.split_whitespace();
                if let (Some(name), Some(value)) = (words.next(), words.next()) {
                    if let (true, Ok(v)) = (name.starts_with("thp_"), value.parse::<i64>()) {
                        values.insert(format!("vmstat/{name}"), v);
                    }
                }
            }
        }
        for dir in size_dirs(&sysfs.mm.join("hugepages")) {
            let pool = file_name(&dir).replacen("hugepages-", "hugetlb-", 1);
            for counter in ["free_hugepages", "surplus_hugepages"] {
                if let Some(v) = read_number(&dir.join(counter)) {
                    values.insert(format!("{pool}/{counter}"), v);
                }
            }
        }
        CounterSnapshot { values }
    }

    /// `later - self` for every key whose value changed (a key present in only one snapshot
    /// counts as 0 in the other).
    pub fn delta(&self, later: &CounterSnapshot) -> BTreeMap<String, i64> {
        let keys = self.values.keys().chain(later.values.keys());
        keys.filter_map(|k| {
            let d = later.values.get(k).copied().unwrap_or(0)
                - self.values.get(k).copied().unwrap_or(0);
            (d != 0).then(|| (k.clone(), d))
        })
        .collect()
    }
}

/// THP allocations at fault time per size (`hugepages-*kB/anon_fault_alloc` deltas), keyed as
/// people write sizes (`"64K"`); sizes that allocated nothing are left out.
pub fn faults_by_size(delta: &BTreeMap<String, i64>) -> BTreeMap<String, u64> {
    by_size(delta, "anon_fault_alloc")
}

/// Failed THP allocations at fault time per size (`anon_fault_fallback` deltas), keyed like
/// [`faults_by_size`].
pub fn fallbacks_by_size(delta: &BTreeMap<String, i64>) -> BTreeMap<String, u64> {
    by_size(delta, "anon_fault_fallback")
}

/// The size of a `hugepages-<n>kB` name, if it is one.
pub fn size_of_dir(name: &str) -> Option<PageSize> {
    let kb: u64 = name
        .strip_prefix("hugepages-")?
        .strip_suffix("kB")?
        .parse()
        .ok()?;
    PageSize::from_bytes(kb.checked_mul(1024)?)
}

fn by_size(delta: &BTreeMap<String, i64>, counter: &str) -> BTreeMap<String, u64> {
    delta
        .iter()
        .filter_map(|(key, &d)| {
            let (dir, name) = key.split_once('/')?;
            let size = size_of_dir(dir)?;
            (name == counter && d > 0).then(|| (size.to_string(), d as u64))
        })
        .collect()
}

/// The `hugepages-<n>kB` directories of `dir`.
fn size_dirs(dir: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut dirs: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| size_of_dir(&file_name(p)).is_some())
        .collect();
    dirs.sort();
    dirs
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn read_number(path: &Path) -> Option<i64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Samples how many pages of each non-empty hugetlb pool are in use: the kernel keeps no
/// counter of a program's hugetlb faults, and the pages are free again once it exits.
pub(crate) struct PoolSampler {
    /// Size label, `nr_hugepages` and `free_hugepages` files, in use at the start, peak.
    pools: Vec<(String, PathBuf, PathBuf, u64, u64)>,
}

impl PoolSampler {
    pub(crate) fn new(sysfs: &Sysfs) -> PoolSampler {
        let mut pools = Vec::new();
        for size in sysfs.hugetlb_sizes() {
            let dir = sysfs
                .mm
                .join(format!("hugepages/hugepages-{}kB", size.bytes() >> 10));
            let (nr, free) = (dir.join("nr_hugepages"), dir.join("free_hugepages"));
            if let Some(used) = in_use(&nr, &free).filter(|_| read_u64(&nr) > Some(0)) {
                pools.push((size.to_string(), nr, free, used, used));
            }
        }
        PoolSampler { pools }
    }

    pub(crate) fn sample(&mut self) {
        for (_, nr, free, _, peak) in &mut self.pools {
            if let Some(used) = in_use(nr, free) {
                *peak = (*peak).max(used);
            }
        }
    }

    /// Each pool's peak pages in use beyond what was in use at the start.
    pub(crate) fn peaks(self) -> Vec<(String, u64)> {
        self.pools
            .into_iter()
            .map(|(size, _, _, start, peak)| (size, peak - start))
            .collect()
    }
}

fn read_u64(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn in_use(nr: &Path, free: &Path) -> Option<u64> {
    Some(read_u64(nr)?.saturating_sub(read_u64(free)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A fake `mm` and `proc` tree under a fresh temporary directory.
    fn fake_tree(tag: &str) -> (PathBuf, Sysfs) {
        let root =
            std::env::temp_dir().join(format!("pagelab-counters-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let thp = root.join("mm/transparent_hugepage");
        for (dir, alloc, fallback) in [("hugepages-64kB", 5, 1), ("hugepages-2048kB", 7, 0)] {
            fs::create_dir_all(thp.join(dir).join("stats")).unwrap();
            fs::write(
                thp.join(dir).join("stats/anon_fault_alloc"),
                format!("{alloc}\n"),
            )
            .unwrap();
            fs::write(
                thp.join(dir).join("stats/anon_fault_fallback"),
                format!("{fallback}\n"),
            )
            .unwrap();
        }
        // x86-64's 8kB directory has no stats worth reading; a junk file is skipped.
        fs::create_dir_all(thp.join("hugepages-8kB")).unwrap();
        fs::write(thp.join("enabled"), "always [madvise] never\n").unwrap();
        let pool = root.join("mm/hugepages/hugepages-2048kB");
        fs::create_dir_all(&pool).unwrap();
        fs::write(pool.join("free_hugepages"), "0\n").unwrap();
        fs::write(pool.join("surplus_hugepages"), "0\n").unwrap();
        fs::write(pool.join("nr_hugepages"), "0\n").unwrap();
        fs::create_dir_all(root.join("proc")).unwrap();
        fs::write(
            root.join("proc/vmstat"),
            "nr_free_pages 100\nthp_fault_alloc 10\nthp_split_pmd 3\n",
        )
        .unwrap();
        let sysfs = Sysfs::at(root.join("mm"), root.join("state"), root.join("proc"));
        (root, sysfs)
    }

    #[test]
    fn snapshot_reads_stats_vmstat_and_pools() {
        let (root, sysfs) = fake_tree("keys");
        let s = CounterSnapshot::take(&sysfs);
        let keys: Vec<&str> = s.values.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "hugepages-2048kB/anon_fault_alloc",
                "hugepages-2048kB/anon_fault_fallback",
                "hugepages-64kB/anon_fault_alloc",
                "hugepages-64kB/anon_fault_fallback",
                "hugetlb-2048kB/free_hugepages",
                "hugetlb-2048kB/surplus_hugepages",
                "vmstat/thp_fault_alloc",
                "vmstat/thp_split_pmd",
            ]
        );
        assert_eq!(s.values["hugepages-64kB/anon_fault_alloc"], 5);
        assert_eq!(s.values["vmstat/thp_fault_alloc"], 10);
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn delta_keeps_changed_keys_and_maps_sizes() {
        let (root, sysfs) = fake_tree("delta");
        let before = CounterSnapshot::take(&sysfs);
        let thp = root.join("mm/transparent_hugepage");
        fs::write(thp.join("hugepages-64kB/stats/anon_fault_alloc"), "133\n").unwrap();
        fs::write(thp.join("hugepages-64kB/stats/anon_fault_fallback"), "3\n").unwrap();
        fs::write(
            root.join("proc/vmstat"),
            "thp_fault_alloc 10\nthp_split_pmd 1\n",
        )
        .unwrap();
        let delta = before.delta(&CounterSnapshot::take(&sysfs));
        let expected: BTreeMap<String, i64> = [
            ("hugepages-64kB/anon_fault_alloc".to_string(), 128),
            ("hugepages-64kB/anon_fault_fallback".to_string(), 2),
            ("vmstat/thp_split_pmd".to_string(), -2),
        ]
        .into();
        assert_eq!(delta, expected);
        assert_eq!(faults_by_size(&delta), [("64K".to_string(), 128)].into());
        assert_eq!(fallbacks_by_size(&delta), [("64K".to_string(), 2)].into());
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_missing_tree_gives_an_empty_snapshot() {
        let sysfs = Sysfs::at("/nonexistent/mm", "/nonexistent/state", "/nonexistent/proc");
        assert!(CounterSnapshot::take(&sysfs).values.is_empty());
    }

    #[test]
    fn the_real_machine_has_the_counters() {
        let sysfs = Sysfs::host();
        if !sysfs.thp_dir().join("enabled").exists() {
            eprintln!("skipped: this kernel has no transparent huge pages");
            return;
        }
        let s = CounterSnapshot::take(&sysfs);
        for size in sysfs.thp_sizes() {
            let key = format!("hugepages-{}kB/anon_fault_alloc", size.bytes() >> 10);
            assert!(
                s.values.contains_key(&key),
                "{key} missing from {:?}",
                s.values.keys()
            );
        }
        assert!(
            s.values.contains_key("vmstat/thp_fault_alloc"),
            "{:?}",
            s.values.keys()
        );
    }
}
