//! The LD_PRELOAD shim (`capture/shim/pagelab_shim.c`): where it is, and what it reports.
//!
//! The build compiles the shim and this crate embeds the library, so an installed `pagelab`
//! carries it: [`shim_path`] writes it out once per content into a directory owned by the
//! current user under the temporary directory (`/tmp/pagelab-<uid>/`), checked not to be a
//! link nor writable by others, and gives its path for `LD_PRELOAD`.
//!
//! A process that loaded the shim and was told `PAGELAB_SHIM_REPORT=<path>` appends one line at
//! exit, which [`ShimReport::parse`] reads back (summing the lines of every process).

use anyhow::{Context, Result};
use std::ffi::OsString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The shim library's bytes, as built by `crates/lab/build.rs`.
pub fn shim_bytes() -> &'static [u8] {
    include_bytes!(env!("PAGELAB_SHIM_SO"))
}

/// The shim's test program (`capture/shim/shim_testprog.c`), built beside the library. It
/// exists on the machine that built pagelab; tests use it.
pub fn testprog_path() -> &'static Path {
    Path::new(env!("PAGELAB_SHIM_TESTPROG"))
}

/// pagelab's private directory under the temporary directory, created 0755 if missing and
/// refused unless it is a real directory owned by this user that nobody else can write
/// ([`pagelab_sys::private::private_dir`], shared with the QEMU plugin's copy).
pub fn private_dir() -> Result<PathBuf> {
    Ok(pagelab_sys::private::private_dir()?)
}

/// The shim written out as a file, for `LD_PRELOAD`: `<private dir>/libpagelab_shim-<hash>.so`,
/// used when a regular file of that content is there, else written anew (atomically, by
/// rename; [`pagelab_sys::private::install`]).
pub fn shim_path() -> Result<PathBuf> {
    let bytes = shim_bytes();
    let name = format!(
        "libpagelab_shim-{:016x}.so",
        pagelab_sys::private::content_hash(bytes)
    );
    pagelab_sys::private::install(bytes, &name, None).context("writing the LD_PRELOAD shim")
}

/// What the shim did, summed over every process that loaded it and reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShimReport {
    /// Processes that reported (each writes one line at a normal exit).
    pub processes: u64,
    /// Mappings advised with `MADV_HUGEPAGE`.
    pub advised_mappings: u64,
    /// Bytes advised.
    pub advised_bytes: u64,
    /// Mappings made with `MAP_HUGETLB`.
    pub hugetlb_mappings: u64,
    /// Bytes mapped with `MAP_HUGETLB` (rounded up to the huge page size).
    pub hugetlb_bytes: u64,
    /// Mappings that fell back to normal pages because the pool had no free pages.
    pub hugetlb_fallbacks: u64,
    /// The largest own peak resident set (`VmHWM`) of a reporting process, in bytes.
    pub peak_rss_bytes: u64,
}

impl ShimReport {
    /// Reads the report lines in `text` (other lines are ignored):
    /// `pagelab-shim: advised N mappings, B bytes; hugetlb M mappings, H bytes, F fell back;
    /// peak rss K kB; pid P`.
    pub fn parse(text: &str) -> ShimReport {
        let mut r = ShimReport::default();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("pagelab-shim: ") else {
                continue;
            };
            let n: Vec<u64> = rest
                .split(|c: char| !c.is_ascii_digit())
                .filter(|w| !w.is_empty())
                .filter_map(|w| w.parse().ok())
                .collect();
            let [advised_n, advised_b, huge_n, huge_b, fell, peak_kb, _pid] = n[..] else {
                continue;
            };
            r.processes += 1;
            r.advised_mappings += advised_n;
            r.advised_bytes += advised_b;
            r.hugetlb_mappings += huge_n;
            r.hugetlb_bytes += huge_b;
            r.hugetlb_fallbacks += fell;
            r.peak_rss_bytes = r.peak_rss_bytes.max(peak_kb * 1024);
        }
        r
    }

    /// The report as `metrics` of a measurement: `shim_advised_mappings`, ...
    pub fn metrics(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("shim_processes", self.processes as f64),
            ("shim_advised_mappings", self.advised_mappings as f64),
            ("shim_advised_bytes", self.advised_bytes as f64),
            ("shim_hugetlb_mappings", self.hugetlb_mappings as f64),
            ("shim_hugetlb_bytes", self.hugetlb_bytes as f64),
            ("shim_hugetlb_fallbacks", self.hugetlb_fallbacks as f64),
        ]
    }
}

/// A file the shim's processes append their report lines to; removed when read or dropped.
pub(crate) struct ReportFile {
    pub(crate) path: PathBuf,
}

impl ReportFile {
    /// A fresh report file when `env` preloads the shim and does not name a report itself.
    pub(crate) fn for_env(env: &[(OsString, OsString)]) -> Result<Option<ReportFile>> {
        let preloads_shim = env.iter().any(|(k, v)| {
            k == "LD_PRELOAD" && v.as_bytes().windows(15).any(|w| w == b"libpagelab_shim")
        });
        if !preloads_shim || env.iter().any(|(k, _)| k == "PAGELAB_SHIM_REPORT") {
            return Ok(None);
        }
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = private_dir()?;
        if n == 0 {
            remove_orphans(&dir);
        }
        let path = dir.join(format!("report-{}-{n}", std::process::id()));
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .with_context(|| format!("creating the shim's report file {}", path.display()))?;
        Ok(Some(ReportFile { path }))
    }

    pub(crate) fn read(self) -> ShimReport {
        ShimReport::parse(&std::fs::read_to_string(&self.path).unwrap_or_default())
    }
}

/// Removes report files of pagelab processes that are gone (killed before they could).
fn remove_orphans(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let pid = name
            .to_str()
            .and_then(|n| n.strip_prefix("report-"))
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists()) {
            let _ = fs::remove_file(e.path());
        }
    }
}

impl Drop for ReportFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_sums_report_lines() {
        let text = "noise\n\
            pagelab-shim: advised 1 mappings, 8388608 bytes; hugetlb 0 mappings, 0 bytes, 0 fell back; peak rss 9672 kB; pid 27537\n\
            pagelab-shim: advised 2 mappings, 131072 bytes; hugetlb 1 mappings, 2097152 bytes, 3 fell back; peak rss 100 kB; pid 27538\n\
            pagelab-shim: truncated 1 2\n";
        let r = ShimReport::parse(text);
        assert_eq!(
            r,
            ShimReport {
                processes: 2,
                advised_mappings: 3,
                advised_bytes: 8388608 + 131072,
                hugetlb_mappings: 1,
                hugetlb_bytes: 2097152,
                hugetlb_fallbacks: 3,
                peak_rss_bytes: 9672 * 1024,
            }
        );
    }
}
