//! `pagelab sweep`: handed to the Python package (`python -m pagelab sweep`),
//! whose executors run the tasks on local processes or a Dask cluster.

use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::process::Command;

#[derive(Args, Debug)]
pub struct SweepArgs {
    /// The sweep: sources (workloads, trace paths, fsspec URLs), page_sizes,
    /// tlbs, policies, memory, out (see docs/python.md).
    #[arg(value_name = "SWEEP.toml")]
    pub file: PathBuf,
    /// Run on the Dask cluster with this scheduler (tcp://host:8786) instead of local processes.
    #[arg(long, value_name = "SCHEDULER_ADDRESS")]
    pub dask: Option<String>,
    /// Output directory for result.parquet and result.json (default: the file's `out`, else pagelab-sweep).
    #[arg(long, short = 'o', value_name = "DIR")]
    pub out: Option<PathBuf>,
}

pub fn run(a: SweepArgs) -> Result<i32> {
    let python = python()?;
    let mut cmd = Command::new(&python);
    // -P: the current directory (python/ of a checkout holds the package's
    // sources without the built module) must not shadow the installed package.
    cmd.args(["-P", "-m", "pagelab", "sweep"]).arg(&a.file);
    if let Some(addr) = &a.dask {
        cmd.args(["--dask", addr]);
    }
    if let Some(out) = &a.out {
        cmd.arg("--out").arg(out);
    }
    let status = cmd
        .status()
        .with_context(|| format!("running {}", python.display()))?;
    Ok(status.code().unwrap_or(1))
}

/// The Python that has the `pagelab` package: `$PAGELAB_PYTHON` (then no
/// other), else the active virtualenv's, the `.venv` of the checkout this binary was built in (where
/// `scripts/setup.sh` installs it), `./.venv`, else `python3` on the PATH.
fn python() -> Result<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    // A Python named explicitly is the only one tried: falling back to another
    // would hide the user's mistake.
    if let Some(p) = std::env::var_os("PAGELAB_PYTHON") {
        candidates.push(p.into());
    } else {
        if let Some(v) = std::env::var_os("VIRTUAL_ENV") {
            candidates.push(PathBuf::from(v).join("bin/python"));
        }
        if let Ok(exe) = std::env::current_exe() {
            candidates.extend(exe.ancestors().skip(1).map(|d| d.join(".venv/bin/python")));
        }
        candidates.push(PathBuf::from(".venv/bin/python"));
        candidates.push(PathBuf::from("python3"));
    }
    for python in &candidates {
        let has_pagelab = Command::new(python)
            .args(["-P", "-c", "import pagelab._native"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if has_pagelab {
            return Ok(python.clone());
        }
    }
    bail!(
        "`pagelab sweep` runs on the Python package, and no Python here has it: `bash scripts/setup.sh` \
         installs it into .venv (or `pip install ./python`); activate that virtualenv or set \
         PAGELAB_PYTHON to its python (tried {})",
        candidates
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}
