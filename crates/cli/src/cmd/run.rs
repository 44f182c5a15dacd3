//! `pagelab run`: a real program under chosen page sizes, measured, with every knob restored.
//!
//! The pipeline: parse and check everything (sizes against the kernel, the program in
//! `PATH`, root) before touching the machine; open one knob session; per configuration set
//! the THP sizes and hugetlb pools and run the program `--repeat` times; restore the knobs;
//! summarize, print the table, write the JSON; exit with the program's status.

use anyhow::{bail, Context, Result};
use clap::Args;
use pagelab_core::{parse_page_sizes, PageSize};
use pagelab_lab::runner::{self, RunSpec};
use pagelab_lab::session::{self, KnobSession};
use pagelab_lab::sysfs::{Sysfs, ThpMode};
use pagelab_report::{LabConfig, LabResult};
use std::ffi::OsString;
use std::io::IsTerminal;
use std::io::Write;
use std::path::{Path, PathBuf};

mod table;

/// `pagelab run` options.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// Page sizes available to the program's anonymous memory, e.g. `64K` or `64K,2M`
    /// (4K alone is the baseline); default: every THP size of the kernel, or 4K with --hugetlb.
    #[arg(long, value_name = "SIZE[,SIZE...]", conflicts_with = "compare")]
    pub pages: Option<String>,
    /// How the sizes are offered: `always` (every anonymous mapping) or `madvise` (mappings
    /// advised with MADV_HUGEPAGE, which glibc's tunable and pagelab's shim do for the program).
    #[arg(long, value_name = "MODE", default_value = "always")]
    pub thp: String,
    /// Grow the hugetlb pool of SIZE to COUNT pages for the run (restored after) and point the
    /// program's heap at it (the first given, when several); repeatable. With --compare each
    /// pool is one more configuration.
    #[arg(long, value_name = "SIZE:COUNT")]
    pub hugetlb: Vec<String>,
    /// Runs per configuration; the table shows medians and spreads.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub repeat: u32,
    /// Also run under this configuration (sizes available together, e.g. `64K` or `64K,2M`);
    /// repeat for several. The 4K baseline always runs first and speed-ups are against it.
    #[arg(long, value_name = "SIZE[,SIZE...]")]
    pub compare: Vec<String>,
    /// Write the result as JSON (schema pagelab.lab/1, command "run").
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Do not preload pagelab's shim (glibc's tunable still applies).
    #[arg(long)]
    pub no_shim: bool,
    /// The program to run and its arguments, after `--`.
    #[arg(last = true, value_name = "PROGRAM", required = true)]
    pub program: Vec<OsString>,
}

/// One configuration to run.
#[derive(Clone, Debug, PartialEq)]
struct Config {
    pages: Vec<PageSize>,
    /// hugetlb pools to grow: size and count.
    pools: Vec<(PageSize, u64)>,
    /// The hugetlb size the program's heap is pointed at.
    heap_hugetlb: Option<PageSize>,
}

pub fn run(a: RunArgs) -> Result<i32> {
    let mode: ThpMode = a.thp.parse().context("--thp")?;
    if a.repeat == 0 {
        bail!("--repeat 0: give at least 1 run per configuration");
    }
    let pools = a
        .hugetlb
        .iter()
        .map(|h| parse_pool(h))
        .collect::<Result<Vec<_>>>()?;
    let sysfs = Sysfs::host();
    let configs = plan(&a, &pools, &sysfs)?;
    check_machine(&sysfs, &configs)?;
    let program = find_program(&a.program[0])?;
    let mut argv = a.program.clone();
    argv[0] = program.into_os_string();
    let subject = shell_words(&a.program);

    let mut session = KnobSession::begin(&sysfs)?;
    let mut result = LabResult::new("run", sysfs.host_info());
    let progress = std::io::stderr().is_terminal();
    let mut interrupted = None;
    'configs: for (i, c) in configs.iter().enumerate() {
        if session::interrupted().is_some() {
            break;
        }
        let mut lab = LabConfig {
            subject: subject.clone(),
            label: runner::config_label(&c.pages, c.heap_hugetlb),
            pages: c.pages.clone(),
            thp: mode.to_string(),
            ..Default::default()
        };
        session.configure(&c.pages, mode)?;
        for &(size, count) in &c.pools {
            let got = session.grow_hugetlb(size, count)?;
            lab.hugetlb.insert(size.to_string(), got);
        }
        let env = runner::config_env(&c.pages, mode, c.heap_hugetlb, !a.no_shim)?;
        let spec = RunSpec {
            argv: argv.clone(),
            env,
            capture_stdout: false,
        };
        for j in 0..a.repeat {
            if progress {
                eprintln!(
                    "pagelab: config {}/{} ({}), run {}/{}",
                    i + 1,
                    configs.len(),
                    lab.label,
                    j + 1,
                    a.repeat
                );
            }
            if session::interrupted().is_some() {
                result.configs.push(lab);
                break 'configs;
            }
            let out = runner::run_once(&sysfs, &spec, Some(&mut session))?;
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
    print!("{}", table::table(&result));
    std::io::stdout().flush()?;
    if let Some(path) = &a.json {
        let text = serde_json::to_string_pretty(&result)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(sig) = interrupted {
        eprintln!("pagelab: interrupted by signal {sig}; every setting is restored");
        return Ok(128 + sig);
    }
    if let Some(failure) = table::failures(&result) {
        eprintln!("pagelab: {failure}");
    }
    Ok(exit_code(&result))
}

/// `2M:512` as (2M, 512).
fn parse_pool(text: &str) -> Result<(PageSize, u64)> {
    let hint = "write SIZE:COUNT, e.g. --hugetlb 2M:512 or --hugetlb 1G:2";
    let (size, count) = text
        .split_once(':')
        .with_context(|| format!("--hugetlb {text}: {hint}"))?;
    let size: PageSize = size
        .parse()
        .with_context(|| format!("--hugetlb {text}: {hint}"))?;
    let count: u64 = count
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("--hugetlb {text}: `{count}` is not a page count; {hint}"))?;
    if count == 0 {
        bail!("--hugetlb {text}: a pool of 0 pages gives the program nothing; {hint}");
    }
    Ok((size, count))
}

/// The configurations to run, in order.
fn plan(a: &RunArgs, pools: &[(PageSize, u64)], sysfs: &Sysfs) -> Result<Vec<Config>> {
    let sizes =
        |flag: &str, text: &str| parse_page_sizes(text).with_context(|| format!("{flag} {text}"));
    if a.compare.is_empty() {
        let pages = match &a.pages {
            Some(p) => sizes("--pages", p)?,
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
        return Ok(vec![Config {
            pages,
            pools: pools.to_vec(),
            heap_hugetlb: pools.first().map(|p| p.0),
        }]);
    }
    let mut configs = vec![Config {
        pages: vec![PageSize::K4],
        pools: Vec::new(),
        heap_hugetlb: None,
    }];
    for text in &a.compare {
        let c = Config {
            pages: sizes("--compare", text)?,
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
    Ok(configs)
}

/// Refuses, before anything changes, what this machine cannot do.
fn check_machine(sysfs: &Sysfs, configs: &[Config]) -> Result<()> {
    if !pagelab_sys::process::is_root() {
        bail!(
            "pagelab run changes {}/... (and the hugetlb pools) for the run; run it as root \
             (sudo pagelab run ...)",
            sysfs.thp_dir().display()
        );
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
            bail!(
                "this kernel has no {} THP page size; it has {} (and 4K, the base page){}",
                missing.join(", "),
                pagelab_lab::sysfs::list_sizes(&thp),
                if hugetlb.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; hugetlb pools (--hugetlb SIZE:COUNT) offer {}",
                        pagelab_lab::sysfs::list_sizes(&hugetlb)
                    )
                }
            );
        }
        for &(size, count) in &c.pools {
            if !hugetlb.contains(&size) {
                bail!(
                    "this kernel has no {size} hugetlb pool; its hugetlb sizes are {}",
                    pagelab_lab::sysfs::list_sizes(&hugetlb)
                );
            }
            pagelab_lab::hugetlb::check_pool_size(sysfs, size, count)
                .with_context(|| format!("--hugetlb {size}:{count}"))?;
        }
    }
    Ok(())
}

/// The program as `PATH` finds it (a name with a `/` is taken as a path).
fn find_program(name: &OsString) -> Result<PathBuf> {
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

fn shell_words(argv: &[OsString]) -> String {
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

/// The first run that did not exit 0 decides: its code, or 128+signal; 0 when all did.
fn exit_code(result: &LabResult) -> i32 {
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
    fn pools_parse_and_refuse_clearly() {
        assert_eq!(parse_pool("2M:512").unwrap(), (PageSize::M2, 512));
        let e = format!("{:#}", parse_pool("2M:abc").unwrap_err());
        assert!(
            e.contains("`abc` is not a page count") && e.contains("2M:512"),
            "{e}"
        );
        let e = format!("{:#}", parse_pool("2M").unwrap_err());
        assert!(e.contains("SIZE:COUNT"), "{e}");
        let e = format!("{:#}", parse_pool("3M:2").unwrap_err());
        assert!(
            e.contains("--hugetlb 3M:2") && e.contains("not allowed"),
            "{e}"
        );
    }

    #[test]
    fn words_are_quoted_for_the_shell() {
        let argv: Vec<OsString> = ["sh", "-c", "exit 3", ""]
            .iter()
            .map(OsString::from)
            .collect();
        assert_eq!(shell_words(&argv), "sh -c 'exit 3' ''");
    }
}
