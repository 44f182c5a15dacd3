//! `pagelab run`: a real program under chosen page sizes, measured, with every knob restored.
//!
//! The pipeline: [`plan`] the configurations from a [`RunRequest`]; [`check_machine`] refuses,
//! before anything changes, what this machine cannot do; [`run`] opens one knob session, per
//! configuration sets the THP sizes and hugetlb pools and measures the program `repeat` times
//! through a [`Measurer`], restores the knobs, and summarizes; [`exit_code`] is the status the
//! command ends with.

use crate::measure::{measure, Measurer};
use crate::runner::{self, RunSpec};
use crate::session::{self, KnobSession};
use crate::sysfs::{list_sizes, Sysfs, ThpMode};
use crate::LabError;
use anyhow::{bail, Context};
use pagelab_core::PageSize;
use pagelab_report::{LabConfig, LabResult};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// What the user asked `pagelab run` for, parsed.
#[derive(Clone, Debug)]
pub struct RunRequest {
    /// `--pages`: the sizes available together; `None` for the default (every THP size of
    /// the kernel, or 4K with pools).
    pub pages: Option<Vec<PageSize>>,
    /// `--compare`: one more configuration each, after the 4K baseline.
    pub compare: Vec<Vec<PageSize>>,
    /// `--hugetlb`: pools to grow, size and count.
    pub pools: Vec<(PageSize, u64)>,
    /// How the sizes are offered.
    pub mode: ThpMode,
    /// Runs per configuration (at least 1).
    pub repeat: u32,
    /// The program (as the user named it) and its arguments.
    pub program: Vec<OsString>,
    /// Whether to preload pagelab's shim.
    pub shim: bool,
}

/// One configuration to run.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The anonymous page sizes available.
    pub pages: Vec<PageSize>,
    /// hugetlb pools to grow: size and count.
    pub pools: Vec<(PageSize, u64)>,
    /// The hugetlb size the program's heap is pointed at.
    pub heap_hugetlb: Option<PageSize>,
}

/// The configurations to run, in order: the one asked for, or with `--compare` the 4K
/// baseline, each compared set (once each) and one per pool.
pub fn plan(req: &RunRequest, sysfs: &Sysfs) -> Vec<Config> {
    let pools = &req.pools;
    if req.compare.is_empty() {
        let pages = match &req.pages {
            Some(p) => p.clone(),
            None if !pools.is_empty() => vec![PageSize::K4],
            None => {
                let mut all = sysfs.thp_sizes();
                all.retain(|&s| s > PageSize::K4);
                if all.is_empty() {
                    vec![PageSize::K4]
                } else {
                    all
                }
            }
        };
        return vec![Config {
            pages,
            pools: pools.clone(),
            heap_hugetlb: pools.first().map(|p| p.0),
        }];
    }
    let mut configs = vec![Config {
        pages: vec![PageSize::K4],
        pools: Vec::new(),
        heap_hugetlb: None,
    }];
    for pages in &req.compare {
        let c = Config {
            pages: pages.clone(),
            pools: Vec::new(),
            heap_hugetlb: None,
        };
        if !configs.contains(&c) {
            configs.push(c);
        }
    }
    for &pool in pools {
        configs.push(Config {
            pages: vec![PageSize::K4],
            pools: vec![pool],
            heap_hugetlb: Some(pool.0),
        });
    }
    configs
}

/// Refuses, before anything changes, what this machine cannot do: not root, no THP, a size
/// or pool size the kernel lacks, a pool beyond the machine's memory.
pub fn check_machine(sysfs: &Sysfs, configs: &[Config]) -> Result<(), LabError> {
    if !pagelab_sys::process::is_root() {
        return Err(anyhow::anyhow!(
            "pagelab run changes {}/... (and the hugetlb pools) for the run; run it as root \
             (sudo pagelab run ...)",
            sysfs.thp_dir().display()
        )
        .into());
    }
    sysfs.require_thp()?;
    let thp = sysfs.thp_sizes();
    let hugetlb = sysfs.hugetlb_sizes();
    for c in configs {
        let missing: Vec<String> = c
            .pages
            .iter()
            .filter(|&&p| p != PageSize::K4 && !thp.contains(&p))
            .map(|p| p.to_string())
            .collect();
        if !missing.is_empty() {
            return Err(anyhow::anyhow!(
                "this kernel has no {} THP page size; it has {} (and 4K, the base page){}",
                missing.join(", "),
                list_sizes(&thp),
                if hugetlb.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; hugetlb pools (--hugetlb SIZE:COUNT) offer {}",
                        list_sizes(&hugetlb)
                    )
                }
            )
            .into());
        }
        for &(size, count) in &c.pools {
            if !hugetlb.contains(&size) {
                return Err(anyhow::anyhow!(
                    "this kernel has no {size} hugetlb pool; its hugetlb sizes are {}",
                    list_sizes(&hugetlb)
                )
                .into());
            }
            crate::hugetlb::check_pool_size(sysfs, size, count)
                .with_context(|| format!("--hugetlb {size}:{count}"))?;
        }
    }
    Ok(())
}

/// The program as `PATH` finds it (a name with a `/` is taken as a path).
pub fn find_program(name: &OsString) -> anyhow::Result<PathBuf> {
    let path = Path::new(name);
    let runnable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.as_encoded_bytes().contains(&b'/') {
        if runnable(path) {
            return Ok(path.to_path_buf());
        }
        bail!("cannot run {}: no such executable file", path.display());
    }
    let dirs = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&dirs)
        .map(|d| d.join(path))
        .find(|p| runnable(p))
        .with_context(|| format!("cannot run {}: not found in PATH", path.display()))
}

/// The program's words as a shell would take them back.
pub fn shell_words(argv: &[OsString]) -> String {
    argv.iter()
        .map(|a| {
            let s = a.to_string_lossy();
            if s.is_empty() || s.contains(|c: char| c.is_whitespace() || "'\"$\\".contains(c)) {
                format!("'{}'", s.replace('\'', "'\\''"))
            } else {
                s.into_owned()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs every configuration of `configs` `req.repeat` times through `measurer`, under one
/// knob session on `sysfs`, and returns the summarized result: configurations that ran at
/// least once, `interrupted_by` when a held signal stopped the runs (the knobs are restored
/// before this returns, whatever happens), `failed_runs`. `argv` is the program as found
/// ([`find_program`]) with its arguments; `progress` hears about each run.
pub fn run(
    sysfs: &Sysfs,
    req: &RunRequest,
    configs: &[Config],
    argv: &[OsString],
    measurer: &mut dyn Measurer,
    progress: &mut dyn FnMut(&str),
) -> Result<LabResult, LabError> {
    let subject = shell_words(&req.program);
    let mut session = KnobSession::begin(sysfs)?;
    let mut result = LabResult::new("run", sysfs.host_info());
    let mut interrupted = None;
    'configs: for (i, c) in configs.iter().enumerate() {
        if session::interrupted().is_some() {
            break;
        }
        let mut lab = LabConfig {
            subject: subject.clone(),
            label: runner::config_label(&c.pages, c.heap_hugetlb),
            pages: c.pages.clone(),
            thp: req.mode.to_string(),
            ..Default::default()
        };
        session.configure(&c.pages, req.mode)?;
        for &(size, count) in &c.pools {
            let got = session.grow_hugetlb(size, count)?;
            lab.hugetlb.insert(size.to_string(), got);
        }
        let spec = RunSpec {
            argv: argv.to_vec(),
            env: runner::config_env(&c.pages, req.mode, c.heap_hugetlb, req.shim)?,
            capture_stdout: false,
            no_randomize: false,
            folios_at_exit: false,
        };
        for j in 0..req.repeat {
            progress(&format!(
                "config {}/{} ({}), run {}/{}",
                i + 1,
                configs.len(),
                lab.label,
                j + 1,
                req.repeat
            ));
            if session::interrupted().is_some() {
                result.configs.push(lab);
                break 'configs;
            }
            let name = spec.argv.first().cloned().unwrap_or_default();
            let measured = measure(measurer, &spec, &mut |pid| {
                session.note_program(pid, &name.to_string_lossy())
            });
            let out = match measured {
                Ok(out) => out,
                // A signal between the check above and the program's start: as there.
                Err(e) if LabError::interrupt_in(&e).is_some() => {
                    result.configs.push(lab);
                    break 'configs;
                }
                Err(e) => return Err(e.into()),
            };
            lab.runs.push(out.measurement);
            if out.interrupted.is_some() {
                interrupted = out.interrupted;
                result.configs.push(lab);
                break 'configs;
            }
        }
        result.configs.push(lab);
    }
    let interrupted = interrupted.or_else(session::interrupted);
    session.restore()?;
    result.configs.retain(|c| !c.runs.is_empty());
    runner::summarize(&mut result.configs);
    result.interrupted_by = interrupted;
    result.failed_runs = result
        .configs
        .iter()
        .flat_map(|c| &c.runs)
        .filter(|m| m.exit.code != Some(0))
        .count() as u32;
    Ok(result)
}

/// The status `pagelab run` exits with: 128 + the signal that interrupted it; otherwise the
/// first run that did not exit 0 decides (its code, or 128 + the signal that killed it); 0
/// when all did.
pub fn exit_code(result: &LabResult) -> i32 {
    if let Some(sig) = result.interrupted_by {
        return 128 + sig;
    }
    result
        .configs
        .iter()
        .flat_map(|c| &c.runs)
        .map(|m| match (m.exit.code, m.exit.signal) {
            (Some(code), _) => code,
            (None, Some(sig)) => 128 + sig,
            (None, None) => 1,
        })
        .find(|&c| c != 0)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_for_the_shell() {
        let argv: Vec<OsString> = ["sh", "-c", "exit 3", ""]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(shell_words(&argv), "sh -c 'exit 3' ''");
    }
}
