//! `pagelab validate -- PROGRAM ARGS...`: a real program, run natively under every
//! configuration and THP mode (`pagelab_lab::validate::program`), captured once, and
//! modelled by `linux-thp` under each setting the kernel held, in one pass over the capture.

use super::validate::ValidateArgs;
use crate::out::{out, outln};
use crate::progress::Progress;
use anyhow::{anyhow, bail, Context, Result};
use pagelab_lab::measure::{EXIT_ANON_FOLIOS, EXIT_PROCESSES};
use pagelab_lab::sysfs::{Sysfs, ThpMode};
use pagelab_lab::validate::program::{self, NativeCase, ProgramOptions};
use pagelab_mm::fault_around::FileFaults;
use pagelab_mm::policy::PolicySpec;
use pagelab_report::validate::{validate_table, Counts, ValidateCase, ValidateResult};
use pagelab_report::validate_mappings::{join, mappings_table, ExitProcess, MappingRow};
use pagelab_report::{Measurement, RunStats};
use std::collections::BTreeMap;

/// The tolerance of a program's verdicts when `--tolerance` is not given.
const DEFAULT_TOLERANCE: &str = "5%";
/// Native runs per configuration when `--repeat` is not given.
const DEFAULT_REPEAT: usize = 3;

pub fn run(a: &ValidateArgs, sysfs: &Sysfs) -> Result<i32> {
    let tolerance = parse_tolerance(a.tolerance.as_deref().unwrap_or(DEFAULT_TOLERANCE))?;
    let repeat = a.repeat.unwrap_or(DEFAULT_REPEAT);
    if repeat == 0 {
        bail!("--repeat 0: the program must run at least once per configuration");
    }
    let modes = match &a.thp {
        Some(m) => vec![m.parse::<ThpMode>()?],
        None => vec![ThpMode::Madvise, ThpMode::Always],
    };
    // A typo in the backend should fail before any knob changes.
    a.program
        .backend
        .parse::<pagelab_capture::Backend>()
        .context("--backend")?;
    // In Linux's layout the model places mappings without randomisation, so the kernel
    // runs the program so too (as under `setarch -R`): 2M alignment then agrees.
    let linux = super::capture::linux_layout(&a.program, &a.layout)?;
    let opts = ProgramOptions {
        argv: a.program.program.clone(),
        configs: super::validate::configs(a, sysfs)?,
        modes,
        repeat,
        no_randomize: linux,
    };
    let progress = Progress::new("validate");
    let native = program::run_native(sysfs, &opts, |m| progress.step(m))?;
    progress.finish();

    let mut settings: Vec<String> = native.iter().map(|c| c.settings.clone()).collect();
    settings.sort();
    settings.dedup();
    let mut cfg = model_config(&settings, file_faults())?;
    cfg.exit_mappings = a.per_mapping;
    let model_progress = Progress::new("validate: capturing and modelling");
    let (sim, code) = super::capture::with_program(&a.program, &a.layout, |src| {
        let mut p = model_progress;
        Ok(pagelab_engine::run_policies(src, &cfg, &mut p)?)
    })?;
    if code != 0 {
        bail!("the captured run of the program ended with status {code} where the native runs succeeded: the trace is not the program's whole life");
    }
    let workload = pagelab_lab::run::shell_words(&opts.argv);
    let mut result = ValidateResult::new(tolerance);
    for case in &native {
        let i = settings
            .iter()
            .position(|s| *s == case.settings)
            .context("a setting without a model run")?;
        let mut c = compare(&workload, case, &sim.runs[i], tolerance);
        if a.per_mapping {
            c.mappings = per_mapping(&c, case, &sim.runs[i])?;
        }
        result.cases.push(c);
    }
    result.provenance = Some(super::report::provenance(None, Vec::new())?);
    out!("{}", validate_table(&result))?;
    if a.per_mapping {
        for c in &result.cases {
            outln!(
                "\n{} {} ({}): per mapping at exit, model against kernel",
                c.config,
                c.thp,
                c.verdict
            )?;
            out!("{}", mappings_table(&c.mappings))?;
        }
    }
    let (differ, n) = (result.differing(), result.cases.len());
    let any = super::validate::write_outputs(a, result)?;
    super::report::print_answer(&any, &pagelab_report::recommend::Rule::default())?;
    if differ > 0 {
        bail!("the model and the kernel differ beyond {tolerance}% on {differ} of {n} cases");
    }
    outln!("the model and the kernel agree within {tolerance}% on all {n} cases")?;
    Ok(0)
}

/// `5%` or `5` as a percentage.
fn parse_tolerance(text: &str) -> Result<f64> {
    let number = text.trim().trim_end_matches('%');
    match number.parse::<f64>() {
        Ok(p) if p.is_finite() && p >= 0.0 => Ok(p),
        _ => bail!("--tolerance {text}: write a percentage of at least 0, such as 5%"),
    }
}

/// One `linux-thp` run per setting, on the model's default machine (4G: more than the
/// programs validated need, so no allocation fails in the model, as none does on the host).
fn model_config(
    settings: &[String],
    file_faults: FileFaults,
) -> Result<pagelab_engine::PolicyConfig> {
    let policies = settings
        .iter()
        .map(|s| {
            let thp = s
                .parse()
                .map_err(|e| anyhow!("THP settings `{s}` read from the kernel: {e}"))?;
            Ok(PolicySpec::LinuxThp(thp))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(pagelab_engine::PolicyConfig {
        policies,
        tlb: pagelab_tlb::resolve("weisberg")?,
        phys: pagelab_mm::phys::PhysConfig::new(pagelab_core::Bytes(4 << 30)),
        strict: false,
        cow: Default::default(),
        file_faults,
        platform: None,
        exit_mappings: false,
    })
}

/// File faults as the kernel takes them for the native runs: fault-around of the kernel's
/// `fault_around_bytes` (64K when debugfs does not show it), the read-around of the device
/// holding `/usr/lib` (where the programs' libraries are), and a warm page cache, since the
/// repeated native runs find the program's files cached (the median discards a first cold
/// run). Said on standard error.
fn file_faults() -> FileFaults {
    let (window, read) = program::fault_around_bytes();
    let ra = program::read_ahead_pages(std::path::Path::new("/usr/lib")).unwrap_or(32);
    eprintln!(
        "pagelab: modelling file faults with fault-around of {} ({}), read-around of {ra} pages, page cache warm",
        pagelab_core::Bytes(window),
        if read {
            "the kernel's fault_around_bytes"
        } else {
            "the kernel's default; debugfs does not show fault_around_bytes here"
        }
    );
    FileFaults::linux(window, ra, true)
}

/// The case of one configuration: the model's run beside the median of the native runs,
/// judged against the kernel's range over the runs (`ValidateCase::verdict_over_runs`): a
/// kernel that does not do the same each run is met by the model doing what it did once.
fn compare(workload: &str, case: &NativeCase, model: &RunStats, tolerance: f64) -> ValidateCase {
    let counters = model.mm.as_ref().map(|m| &m.policy_counters);
    let per_size = |name: &str| {
        counters
            .and_then(|c| c[name].as_object())
            .map(|o| {
                o.iter()
                    .filter_map(|(k, v)| Some((k.as_str(), v.as_u64()?)))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    let model = Counts::new(model.faults, per_size("anon_fault_alloc"))
        .with_exit_folios(per_size("exit_anon_folios"));
    let kernel_runs: Vec<Counts> = case.runs.iter().map(kernel_counts).collect();
    let kernel = median(&kernel_runs);
    ValidateCase {
        workload: workload.to_string(),
        config: case.label.clone(),
        thp: case.mode.to_string(),
        verdict: ValidateCase::verdict_over_runs(&model, &kernel_runs, tolerance).into(),
        model,
        kernel,
        kernel_runs: if case.runs.len() > 1 {
            kernel_runs
        } else {
            Vec::new()
        },
        mappings: Vec::new(),
    }
}

/// The per-mapping rows of case `c`: the model's processes at their exits against those of
/// one native run, the first whose folios at exit are the median's (else the first run).
fn per_mapping(c: &ValidateCase, case: &NativeCase, model: &RunStats) -> Result<Vec<MappingRow>> {
    // With one run `kernel_runs` is empty, and that run is the one.
    let run = c
        .kernel_runs
        .iter()
        .position(|r| r.exit_folios == c.kernel.exit_folios)
        .unwrap_or(0);
    let model: Vec<ExitProcess> = match model.mm.as_ref().and_then(|m| m.exit_mappings.clone()) {
        Some(v) => serde_json::from_value(v).context("the model's mappings at exit")?,
        None => Vec::new(),
    };
    Ok(join(&model, &case.exit_mappings_of(run)))
}

/// A native run's faults as the kernel counts them for the process (minor and major), its
/// machine-wide allocations, and the anonymous folios its processes mapped at exit where
/// they were read (`exit_anon_folios/SIZE` among its metrics).
fn kernel_counts(m: &Measurement) -> Counts {
    let counts = Counts::new(
        m.faults + m.major_faults,
        m.faults_by_size.iter().map(|(k, &n)| (k.as_str(), n)),
    );
    if !m.metrics.contains_key(EXIT_PROCESSES) {
        return counts;
    }
    let prefix = format!("{EXIT_ANON_FOLIOS}/");
    counts.with_exit_folios(
        m.metrics
            .iter()
            .filter_map(|(k, &v)| Some((k.strip_prefix(&prefix)?, v as u64))),
    )
}

/// The median of each figure over `runs` (the lower middle of an even number); folios at
/// exit only when every run has them.
fn median(runs: &[Counts]) -> Counts {
    let mid = |mut v: Vec<u64>| {
        v.sort_unstable();
        v.get(v.len().saturating_sub(1) / 2).copied().unwrap_or(0)
    };
    let per_size = |of: &dyn Fn(&Counts) -> Option<&BTreeMap<String, u64>>| {
        let mut sizes: Vec<&String> = runs.iter().filter_map(of).flat_map(|r| r.keys()).collect();
        sizes.sort();
        sizes.dedup();
        sizes
            .iter()
            .map(|s| {
                let v = runs
                    .iter()
                    .map(|r| of(r).and_then(|m| m.get(*s)).copied().unwrap_or(0));
                (s.to_string(), mid(v.collect()))
            })
            .collect::<Vec<_>>()
    };
    let allocs = per_size(&|r| Some(&r.allocs));
    let counts = Counts::new(
        mid(runs.iter().map(|r| r.faults).collect()),
        allocs.iter().map(|(s, n)| (s.as_str(), *n)),
    );
    if runs.is_empty() || runs.iter().any(|r| r.exit_folios.is_none()) {
        return counts;
    }
    let exit = per_size(&|r| r.exit_folios.as_ref());
    counts.with_exit_folios(exit.iter().map(|(s, n)| (s.as_str(), *n)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerances_are_percentages() {
        assert_eq!(parse_tolerance("5%").unwrap(), 5.0);
        assert_eq!(parse_tolerance("0").unwrap(), 0.0);
        let e = parse_tolerance("-1%").unwrap_err().to_string();
        assert!(e.contains("--tolerance -1%"), "{e}");
        assert!(parse_tolerance("five").is_err());
    }

    #[test]
    fn the_median_is_taken_per_figure() {
        let runs = [
            Counts::new(10, [("64K", 3)]),
            Counts::new(12, []),
            Counts::new(11, [("64K", 1), ("2M", 1)]),
        ];
        assert_eq!(median(&runs), Counts::new(11, [("64K", 1)]));
        let exits = [
            Counts::new(10, []).with_exit_folios([("64K", 5)]),
            Counts::new(10, []).with_exit_folios([("64K", 7), ("2M", 1)]),
            Counts::new(10, []).with_exit_folios([("64K", 6)]),
        ];
        let m = median(&exits);
        // 2M: 0, 1, 0 has median 0, left out.
        let six = BTreeMap::from([("64K".to_string(), 6)]);
        assert_eq!(m.exit_folios, Some(six));
        // A run without them: the median has none.
        assert_eq!(
            median(&[exits[0].clone(), runs[0].clone()]).exit_folios,
            None
        );
    }
}
