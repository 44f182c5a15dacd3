//! Where the kernel's THP, mTHP and hugetlb knobs live, and what they hold.
//!
//! [`Sysfs`] names three roots: the `mm` directory (`/sys/kernel/mm`), pagelab's state
//! directory (`/run/pagelab`, holding the lock and the journal of changed knobs) and `/proc`.
//! Tests point them at a fake tree with [`Sysfs::at`]. A [`Knob`] is one file under `mm`;
//! [`Sysfs::read`] gives its current value (the bracketed choice of `always [madvise] never`).

use anyhow::{anyhow, bail, Context};
use pagelab_core::PageSize;
use pagelab_report::HostInfo;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// The three roots pagelab reads and writes the kernel's memory knobs under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sysfs {
    /// The kernel's `mm` directory: `/sys/kernel/mm` (or `$PAGELAB_SYSFS_ROOT`).
    pub mm: PathBuf,
    /// pagelab's state directory, holding `lock` and `journal.json`: `/run/pagelab`
    /// (or `$PAGELAB_STATE_DIR`). It is on tmpfs, so the journal does not outlive a reboot,
    /// which resets the knobs anyway.
    pub state: PathBuf,
    /// The proc filesystem: `/proc` (or `$PAGELAB_PROC_ROOT`).
    pub proc: PathBuf,
}

impl Sysfs {
    /// This machine's roots: `$PAGELAB_SYSFS_ROOT` or `/sys/kernel/mm`, `$PAGELAB_STATE_DIR`
    /// or `/run/pagelab`, `$PAGELAB_PROC_ROOT` or `/proc`.
    pub fn host() -> Sysfs {
        let env = |name: &str, default: &str| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(default))
        };
        Sysfs {
            mm: env("PAGELAB_SYSFS_ROOT", "/sys/kernel/mm"),
            state: env("PAGELAB_STATE_DIR", "/run/pagelab"),
            proc: env("PAGELAB_PROC_ROOT", "/proc"),
        }
    }

    /// Roots given explicitly (tests use a fake tree; environment variables are process-global).
    pub fn at(
        mm: impl Into<PathBuf>,
        state: impl Into<PathBuf>,
        proc: impl Into<PathBuf>,
    ) -> Sysfs {
        Sysfs {
            mm: mm.into(),
            state: state.into(),
            proc: proc.into(),
        }
    }

    /// This machine's knobs ([`Sysfs::host`]) when pagelab can set them for each THP size of
    /// `sizes`: we are root, the kernel has per-size THP knobs, and it has every one of
    /// `sizes`. Otherwise says why not, as the tests that need the real kernel report when they
    /// skip.
    pub fn host_for(sizes: &[PageSize]) -> Result<Sysfs, String> {
        if !pagelab_sys::process::is_root() {
            return Err("not root, so the THP knobs cannot be set nor frames read".into());
        }
        let sysfs = Sysfs::host();
        sysfs.require_thp().map_err(|e| format!("{e:#}"))?;
        let have = sysfs.thp_sizes();
        let missing: Vec<String> = sizes
            .iter()
            .filter(|p| !have.contains(p))
            .map(|p| p.to_string())
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "this kernel has no {} THP size",
                missing.join(" nor ")
            ));
        }
        Ok(sysfs)
    }

    /// `mm/transparent_hugepage`.
    pub fn thp_dir(&self) -> PathBuf {
        self.mm.join("transparent_hugepage")
    }

    /// The anonymous THP sizes: `hugepages-*kB` directories under [`Sysfs::thp_dir`] that have
    /// an `enabled` knob (x86-64's `hugepages-8kB` has none), ascending.
    pub fn thp_sizes(&self) -> Vec<PageSize> {
        sizes_in(&self.thp_dir(), "enabled")
    }

    /// The hugetlb page sizes: `mm/hugepages/hugepages-*kB` directories, ascending.
    pub fn hugetlb_sizes(&self) -> Vec<PageSize> {
        sizes_in(&self.mm.join("hugepages"), "nr_hugepages")
    }

    /// Succeeds when the kernel has THP with per-size (multi-size) knobs; otherwise says what is
    /// missing and what that means for pagelab.
    pub fn require_thp(&self) -> anyhow::Result<()> {
        let top = Knob::ThpEnabled.path(self);
        if !top.exists() {
            bail!(
                "this kernel has no transparent huge pages ({} does not exist): it was built \
                 without CONFIG_TRANSPARENT_HUGEPAGE, so pagelab cannot give anonymous memory pages \
                 larger than 4K through THP; hugetlb pools (--hugetlb) may still work ({})",
                top.display(),
                hugetlb_note(self)
            );
        }
        if self.thp_sizes().is_empty() {
            bail!(
                "this kernel has THP but no multi-size THP knobs ({}/hugepages-*kB/enabled): \
                 per-size anonymous pages (16K..1M) need Linux 6.8 or later, so pagelab cannot \
                 choose page sizes on this kernel",
                self.thp_dir().display()
            );
        }
        Ok(())
    }

    /// The knob's current value: the bracketed choice of a multiple-choice knob
    /// (`always [madvise] never` gives `madvise`), otherwise the trimmed content (numbers as is).
    pub fn read(&self, knob: &Knob) -> anyhow::Result<String> {
        read_value(&knob.path(self)).with_context(|| format!("reading {}", knob.name()))
    }

    /// The machine: kernel release, CPU model, online CPUs, memory, whether it is a VM, and
    /// the THP and hugetlb sizes. Fields that cannot be read are left empty or zero.
    pub fn host_info(&self) -> HostInfo {
        let cpuinfo = fs::read_to_string(self.proc.join("cpuinfo")).unwrap_or_default();
        let meminfo = fs::read_to_string(self.proc.join("meminfo")).unwrap_or_default();
        let kernel = fs::read_to_string(self.proc.join("sys/kernel/osrelease"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| field(l, "model name"))
            .unwrap_or_default()
            .to_string();
        let listed = cpuinfo
            .lines()
            .filter(|l| field(l, "processor").is_some())
            .count() as u32;
        let online = std::thread::available_parallelism().map_or(0, |n| n.get() as u32);
        let virtualized = cpuinfo
            .lines()
            .filter_map(|l| field(l, "flags"))
            .any(|flags| flags.split_whitespace().any(|f| f == "hypervisor"));
        let memory_bytes = meminfo_bytes(&meminfo, "MemTotal").unwrap_or(0);
        HostInfo {
            kernel,
            cpu,
            cpus: if listed > 0 { listed } else { online },
            memory_bytes,
            virtualized,
            thp_sizes: self.thp_sizes(),
            hugetlb_sizes: self.hugetlb_sizes(),
        }
    }
}

/// One kernel memory knob pagelab may change.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Knob {
    /// `transparent_hugepage/enabled`: the top-level THP mode, inherited by sizes set to `inherit`.
    ThpEnabled,
    /// `transparent_hugepage/defrag`.
    ThpDefrag,
    /// `transparent_hugepage/use_zero_page`.
    UseZeroPage,
    /// `transparent_hugepage/hugepages-<size>kB/enabled`: one anonymous THP size's mode.
    SizeEnabled(PageSize),
    /// `hugepages/hugepages-<size>kB/nr_hugepages`: the persistent hugetlb pool of a size.
    HugetlbPages(PageSize),
}

impl Knob {
    /// The knob's file under `sysfs.mm`.
    pub fn path(&self, sysfs: &Sysfs) -> PathBuf {
        sysfs.mm.join(self.name())
    }

    /// The knob as people read it, relative to `/sys/kernel/mm`:
    /// `transparent_hugepage/hugepages-64kB/enabled`.
    pub fn name(&self) -> String {
        match self {
            Knob::ThpEnabled => "transparent_hugepage/enabled".into(),
            Knob::ThpDefrag => "transparent_hugepage/defrag".into(),
            Knob::UseZeroPage => "transparent_hugepage/use_zero_page".into(),
            Knob::SizeEnabled(s) => {
                format!(
                    "transparent_hugepage/hugepages-{}kB/enabled",
                    s.bytes() >> 10
                )
            }
            Knob::HugetlbPages(s) => {
                format!("hugepages/hugepages-{}kB/nr_hugepages", s.bytes() >> 10)
            }
        }
    }

    /// Whether this knob is a hugetlb pool (restored before the THP knobs).
    pub fn is_hugetlb(&self) -> bool {
        matches!(self, Knob::HugetlbPages(_))
    }
}

impl fmt::Display for Knob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// The mode THP sizes are enabled with for a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThpMode {
    /// Every anonymous mapping may get the enabled sizes at fault time.
    Always,
    /// Only mappings advised with `madvise(MADV_HUGEPAGE)` may.
    Madvise,
}

impl ThpMode {
    /// The word the kernel's `enabled` knobs take: `always` or `madvise`.
    pub fn as_str(self) -> &'static str {
        match self {
            ThpMode::Always => "always",
            ThpMode::Madvise => "madvise",
        }
    }
}

impl FromStr for ThpMode {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<ThpMode> {
        match s.trim().to_ascii_lowercase().as_str() {
            "always" => Ok(ThpMode::Always),
            "madvise" => Ok(ThpMode::Madvise),
            other => Err(anyhow!(
                "THP mode `{other}` is not allowed: write `always` (every anonymous mapping) \
                 or `madvise` (only mappings advised with MADV_HUGEPAGE)"
            )),
        }
    }
}

impl fmt::Display for ThpMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// The value of a knob file: the bracketed choice, or the trimmed content.
pub(crate) fn read_value(path: &Path) -> anyhow::Result<String> {
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(parse_value(&text))
}

/// `always [madvise] never` gives `madvise`; anything without brackets is trimmed.
pub(crate) fn parse_value(text: &str) -> String {
    if let (Some(open), Some(close)) = (text.find('['), text.find(']')) {
        if open < close {
            return text[open + 1..close].trim().to_string();
        }
    }
    text.trim().to_string()
}

/// The choices a multiple-choice knob file lists (`always inherit madvise never`), if it does.
pub(crate) fn choices(path: &Path) -> Option<String> {
    let text = fs::read_to_string(path).ok()?;
    text.contains('[').then(|| {
        text.replace(['[', ']'], "")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    })
}

/// `name:  value` gives `value` when the line's key is `name`.
/// The bytes `/proc/meminfo`'s text `meminfo` gives for `name` (`MemTotal`, `MemAvailable`:
/// kB there), if it has that line.
pub(crate) fn meminfo_bytes(meminfo: &str, name: &str) -> Option<u64> {
    meminfo
        .lines()
        .find_map(|l| field(l, name))
        .and_then(|v| v.trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
}

fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let (key, value) = line.split_once(':')?;
    (key.trim() == name).then(|| value.trim())
}

/// The sizes of `hugepages-<n>kB` directories of `dir` holding a file `needed`, ascending.
fn sizes_in(dir: &Path, needed: &str) -> Vec<PageSize> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut sizes: Vec<PageSize> = entries
        .flatten()
        .filter(|e| e.path().join(needed).exists())
        .filter_map(|e| {
            let name = e.file_name();
            let kb = name
                .to_str()?
                .strip_prefix("hugepages-")?
                .strip_suffix("kB")?;
            PageSize::from_bytes(kb.parse::<u64>().ok()?.checked_mul(1024)?)
        })
        .collect();
    sizes.sort();
    sizes.dedup();
    sizes
}

fn hugetlb_note(sysfs: &Sysfs) -> String {
    let sizes = sysfs.hugetlb_sizes();
    if sizes.is_empty() {
        "this kernel has no hugetlb pools either".into()
    } else {
        format!("hugetlb sizes here: {}", list_sizes(&sizes))
    }
}

/// Sizes as people write them, comma-separated: `16K, 64K, 2M`.
pub fn list_sizes(sizes: &[PageSize]) -> String {
    if sizes.is_empty() {
        return "none".into();
    }
    sizes
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bracketed_choice_and_plain_values() {
        assert_eq!(parse_value("always [madvise] never\n"), "madvise");
        assert_eq!(
            parse_value("always defer defer+madvise [madvise] never"),
            "madvise"
        );
        assert_eq!(parse_value("512\n"), "512");
        assert_eq!(parse_value("1"), "1");
    }

    #[test]
    fn knob_names_as_people_read_them() {
        let s64: PageSize = "64K".parse().unwrap();
        assert_eq!(
            Knob::SizeEnabled(s64).name(),
            "transparent_hugepage/hugepages-64kB/enabled"
        );
        assert_eq!(
            Knob::HugetlbPages(PageSize::G1).name(),
            "hugepages/hugepages-1048576kB/nr_hugepages"
        );
        let sysfs = Sysfs::at("/x/mm", "/x/state", "/x/proc");
        assert_eq!(
            Knob::ThpEnabled.path(&sysfs),
            PathBuf::from("/x/mm/transparent_hugepage/enabled")
        );
    }

    #[test]
    fn thp_modes_parse_and_refuse() {
        assert_eq!("always".parse::<ThpMode>().unwrap(), ThpMode::Always);
        assert_eq!(" Madvise ".parse::<ThpMode>().unwrap(), ThpMode::Madvise);
        let err = "never".parse::<ThpMode>().unwrap_err().to_string();
        assert!(err.contains("`never`") && err.contains("madvise"), "{err}");
        assert_eq!(ThpMode::Madvise.to_string(), "madvise");
    }
}
