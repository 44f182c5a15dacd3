//! `pagelab bench`: the native kernels of `pagelab_lab::native` under each page-size
//! configuration, each run in a fresh child (`pagelab bench-child`): the flags parsed into a
//! `pagelab_lab::bench::BenchRequest`, the lab's result printed; and the hidden child.

use crate::out::{out, outln};
use crate::progress::Progress;
use anyhow::{bail, Context, Result};
use clap::Args;
use pagelab_core::PageSize;
use pagelab_lab::bench::{self as lab_bench, is_baseline, BenchRequest};
use pagelab_lab::measure::Host;
use pagelab_lab::native::{self, Advice, KernelSpec, Scale};
use pagelab_lab::session::KnobSession;
use pagelab_lab::sysfs::{Sysfs, ThpMode};
use std::path::PathBuf;

/// The page-size configurations `bench` runs when `--pages` is not given.
pub const DEFAULT_PAGES: [&str; 4] = ["4K", "16K", "64K", "2M"];

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// A page-size configuration: the THP sizes available together, comma-separated
    /// (`64K,2M`); repeat the flag for several configurations (`--pages 4K --pages 64K,2M`).
    /// 4K alone is the baseline (every THP size never). Default: 4K, 16K, 64K and 2M, each alone.
    #[arg(long, value_name = "SIZES")]
    pub pages: Vec<String>,
    /// How the THP sizes are enabled: madvise (the kernels advise their data with
    /// MADV_HUGEPAGE) or always (no advice).
    #[arg(long, value_name = "MODE", default_value = "madvise")]
    pub thp: String,
    /// Runs of each (kernel, configuration); tables show the median and spread.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub repeat: u32,
    /// Write the result as JSON (schema pagelab.lab/1, command "bench").
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the plot (stride time per access against heap size, speed-ups, fault cost) as SVG.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Write the self-contained HTML report (the answer, interactive plots, tables).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    #[command(flatten)]
    pub rule: crate::cmd::report::RuleArgs,
    /// Small sizes and few iterations everywhere (for tests and a first look).
    #[arg(long)]
    pub quick: bool,
    /// Print the model's estimate beside each measured kernel under each configuration of
    /// one page size: the model's workload of the same parameters, timed on `--machine`
    /// (docs/cost.md).
    #[arg(long)]
    pub predict: bool,
    /// The machine `--predict` models: `measured` (this machine, measured first as
    /// `pagelab machines --measure` does: about a minute), `host` (the preset of this CPU,
    /// read from /proc/cpuinfo; said on standard error), a preset with caches, or a
    /// machine file.
    #[arg(long, value_name = "NAME|FILE", default_value = super::bench_predict::DEFAULT_MACHINE, requires = "predict")]
    pub machine: String,
    /// The virtualisation `--predict` models: nested (the machine file's host page, as
    /// `machines --measure` found it; 2M if it gives none), nested:host=4K|2M|1G, or none.
    #[arg(long, value_name = "VIRT", default_value = super::bench_predict::DEFAULT_VIRT, requires = "predict")]
    pub virt: String,
    /// Where `--predict` places each kernel's frames: `kernels` (as its own 4K runs' frames
    /// lay, read from pagemap as root: their median share of neighbours and span; the
    /// machine file's where they were not recorded) or `machine` (the machine file's
    /// `[frames]` for every kernel).
    #[arg(long, value_name = "WHERE", default_value = "kernels", value_parser = ["kernels", "machine"], requires = "predict")]
    pub frames: String,
    /// With `--machine measured`: skip measuring the host's block translations (about a
    /// minute, as root; `machines --measure --no-blocks`), so the model has none.
    #[arg(long, requires = "predict")]
    pub no_blocks: bool,
    /// With `--predict`: measure the kernels whose 2M verdict is unsettled (the interval of
    /// the measured speed-up crosses an edge of the 25% band) for `--repeat` more rounds,
    /// up to N times, and judge them over all their rounds (0: never).
    #[arg(long, value_name = "N", default_value_t = 2, requires = "predict")]
    pub settle: u32,
    /// Kernels, as NAME[:key=value,...]: stride, stream, gups, chase, fault (all of them
    /// when none is given); `stride` without heap= or every= is the paper's sweep.
    #[arg(value_name = "KERNEL")]
    pub kernels: Vec<String>,
}

/// The hidden child of `pagelab bench`: runs one kernel and prints one JSON line.
#[derive(Args, Debug)]
pub struct BenchChildArgs {
    /// How the kernel advises its data: nohugepage, none or hugepage.
    #[arg(long, value_name = "ADVICE", default_value = "none")]
    pub advice: String,
    /// The kernel spec (canonical, as `pagelab bench` passes it, or any spec).
    pub spec: String,
}

pub fn child(a: BenchChildArgs) -> Result<()> {
    let advice: Advice = a.advice.parse().context("--advice")?;
    outln!("{}", native::run_child(&a.spec, advice)?)
}

/// The configurations of the `--pages` flags, each the sizes made available
/// together (4K beside larger sizes adds nothing: it is always there).
fn parse_pages(flags: &[String]) -> Result<Vec<Vec<PageSize>>> {
    let mut out: Vec<Vec<PageSize>> = Vec::new();
    for text in flags {
        let mut sizes =
            pagelab_core::parse_page_sizes(text).with_context(|| format!("--pages {text}"))?;
        sizes.sort();
        sizes.dedup();
        if sizes.len() > 1 && sizes.contains(&PageSize::K4) {
            sizes.retain(|&s| s != PageSize::K4);
        }
        if !out.contains(&sizes) {
            out.push(sizes);
        }
    }
    Ok(out)
}

/// Why the knobs cannot be changed here, if they cannot.
fn knobs_unavailable(sysfs: &Sysfs) -> Option<String> {
    if !pagelab_sys::process::is_root() {
        return Some("changing the THP knobs needs root".into());
    }
    sysfs.require_thp().err().map(|e| format!("{e:#}"))
}

/// The specs named on the command line (every kernel's defaults when none is).
fn kernel_specs(names: &[String], scale: Scale) -> Result<Vec<KernelSpec>> {
    if names.is_empty() {
        return Ok(native::default_specs(scale));
    }
    let mut out = Vec::new();
    for n in names {
        out.extend(native::expand(n, scale).with_context(|| format!("kernel `{n}`"))?);
    }
    Ok(out)
}

pub fn run(a: BenchArgs) -> Result<i32> {
    let scale = if a.quick { Scale::Quick } else { Scale::Full };
    let specs = kernel_specs(&a.kernels, scale)?;
    let mode: ThpMode = a.thp.parse().context("--thp")?;
    if a.repeat == 0 {
        bail!("--repeat 0: run each configuration at least once");
    }
    let sysfs = Sysfs::host();
    let mut pages = if a.pages.is_empty() {
        parse_pages(&DEFAULT_PAGES.map(String::from))?
    } else {
        parse_pages(&a.pages)?
    };
    let knobs = knobs_unavailable(&sysfs);
    if let Some(why) = &knobs {
        if pages.iter().any(|p| !is_baseline(p)) {
            if !a.pages.is_empty() {
                bail!("{why}; run as root on a kernel with THP, or ask for the 4K baseline alone with --pages 4K");
            }
            eprintln!(
                "pagelab: note: {why}; running the 4K baseline only (the kernels' data is \
                 advised MADV_NOHUGEPAGE, so it is 4K-mapped whatever the knobs say)"
            );
            pages = vec![vec![PageSize::K4]];
        }
    } else {
        let have = sysfs.thp_sizes();
        for p in pages.iter().flatten().filter(|&&p| p != PageSize::K4) {
            if !have.contains(p) {
                let list: Vec<String> = have.iter().map(|s| s.to_string()).collect();
                bail!(
                    "--pages: {p} is not a THP size of this kernel (it has {})",
                    list.join(", ")
                );
            }
        }
    }
    if cfg!(debug_assertions) {
        eprintln!(
            "pagelab: note: this is a debug build, whose kernels' loops are not optimised; \
             for figures to keep, use a release build (target/release/pagelab)"
        );
    }
    // The machine is resolved (and measured) first: a bad machine fails before the
    // measurements. The model runs after them, with each kernel's frames as they lay.
    let model_machine = if a.predict {
        let virt = (a.virt != "none").then_some(a.virt.as_str());
        let machine = match a.machine.as_str() {
            pagelab_machine::host::HOST => {
                let choice = pagelab_machine::host::host_choice();
                eprintln!("pagelab: --predict --machine host: {}", choice.reason);
                choice.name.to_string()
            }
            super::bench_predict::MEASURED => super::bench_predict::measure_here(!a.no_blocks)?,
            named => named.to_string(),
        };
        super::bench_predict::check_machine(&pages, &machine, virt)?;
        Some((machine, virt))
    } else {
        None
    };
    let exe = std::env::current_exe().context("finding the pagelab binary")?;
    // A knob session for each measurement (none where the knobs cannot be set).
    let begin = || -> Result<Option<KnobSession>> {
        Ok(match knobs {
            None => Some(KnobSession::begin(&sysfs)?),
            Some(_) => None,
        })
    };
    let session = begin()?;
    let req = BenchRequest {
        pages: pages.clone(),
        mode,
        repeat: a.repeat,
        specs: specs.clone(),
        child: vec![exe.into(), "bench-child".into()],
    };
    let rule = a.rule.rule()?;
    let measure = |req: &BenchRequest, session| -> Result<_> {
        let progress = Progress::new("bench");
        let result = lab_bench::run(&sysfs, req, session, &mut Host::new(&sysfs), &mut |msg| {
            progress.step(msg)
        })?;
        progress.finish();
        Ok(result)
    };
    let interrupted = |sig: i32| {
        eprintln!("pagelab: interrupted by signal {sig}; every knob is restored");
        Ok(128 + sig)
    };
    let mut result = measure(&req, session)?;
    if let Some(sig) = result.interrupted_by {
        return interrupted(sig);
    }
    result.provenance = Some(super::report::provenance(None, Vec::new())?);
    // The model of `specs`, with their frames as `result` measured them.
    let predict = |result: &pagelab_report::LabResult, specs: &[KernelSpec]| -> Result<_> {
        let Some((machine, virt)) = &model_machine else {
            return Ok(None);
        };
        let frames = if a.frames == "kernels" {
            super::bench_predict::kernel_frames(result)
        } else {
            Default::default()
        };
        let (predictions, host) =
            super::bench_predict::predict(specs, &pages, machine, *virt, &frames)?;
        let model = match host {
            Some(h) => format!("{machine} nested:host={h}"),
            None => machine.clone(),
        };
        Ok(Some((predictions, model)))
    };
    // A signal while the model runs stops it after the kernel it is on: the tables then
    // hold what was measured and the kernels modelled so far. The model changes nothing on
    // the machine, so a second signal ends pagelab at once.
    let held = model_machine
        .is_some()
        .then(pagelab_sys::signals::hold_soft);
    let modelling_stopped = || {
        let sig = pagelab_sys::signals::received()?;
        eprintln!(
            "pagelab: interrupted by signal {sig} while modelling; the tables hold every \
             measurement and the kernels modelled before it"
        );
        Some(128 + sig)
    };
    if let Some((machine, _)) = &model_machine {
        eprintln!(
            "pagelab: --predict: modelling {} kernel(s) on {machine}",
            specs.len()
        );
    }
    let mut predictions = predict(&result, &specs)?;
    let mut exit = modelling_stopped().unwrap_or(0);
    for pass in 1..=a.settle {
        if exit != 0 {
            break;
        }
        let Some((p, _)) = &predictions else { break };
        let unsettled = pagelab_report::lab_table::unsettled_subjects(&result, p);
        if unsettled.is_empty() {
            break;
        }
        eprintln!(
            "pagelab: --predict: the 2M verdict of {} is unsettled; measuring {} for {} more \
             round(s) (--settle: pass {pass} of {})",
            unsettled.join(", "),
            if unsettled.len() == 1 { "it" } else { "them" },
            a.repeat,
            a.settle
        );
        let again: Vec<KernelSpec> = specs
            .iter()
            .filter(|s| unsettled.contains(&s.to_string()))
            .cloned()
            .collect();
        let more = BenchRequest {
            specs: again.clone(),
            ..req.clone()
        };
        let more = measure(&more, begin()?)?;
        let stopped = more.interrupted_by;
        lab_bench::append_rounds(&mut result, more);
        if let Some(sig) = stopped {
            // The first pass finished: its tables, with every round since, are still worth
            // printing (the result records the signal).
            eprintln!(
                "pagelab: interrupted by signal {sig} while settling; every knob is restored; \
                 the tables hold every round that finished"
            );
            exit = 128 + sig;
            break;
        }
        // Only the kernels measured again have new frames to model.
        if let (Some((all, _)), Some((fresh, _))) = (&mut predictions, predict(&result, &again)?) {
            for f in fresh {
                if let Some(p) = all.iter_mut().find(|p| p.subject == f.subject) {
                    *p = f;
                }
            }
        }
        exit = modelling_stopped().unwrap_or(0);
    }
    // Modelled: a signal from here on ends pagelab as usual.
    drop(held);
    let kernels: Vec<_> = specs.iter().map(KernelSpec::bench_kernel).collect();
    out!(
        "{}",
        pagelab_report::lab_table::bench_tables(&result, &kernels)
    )?;
    if let Some(path) = &a.json {
        pagelab_report::write_json(path, &result)?;
        outln!("wrote {}", path.display())?;
    }
    if let Some(path) = &a.svg {
        pagelab_report::lab_plot::plot_bench_svg(&result, path)?;
        outln!("wrote {}", path.display())?;
    }
    let lab = result.clone();
    let result = pagelab_report::AnyResult::Lab(result);
    if let Some(path) = &a.html {
        super::report::write_one(path, result.clone(), &rule)?;
        outln!("wrote {}", path.display())?;
    }
    super::report::print_answer(&result, &rule)?;
    if let Some((predictions, model)) = &predictions {
        out!(
            "\n{}",
            pagelab_report::lab_table::predict_table(&lab, predictions, model)
        )?;
    }
    Ok(exit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_flag_is_a_configuration_and_commas_join_sizes() {
        let flags = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let p = parse_pages(&flags(&["4K", " 64K,2M ", "2M", "4K"])).unwrap();
        let k = |s: &str| s.parse::<PageSize>().unwrap();
        assert_eq!(
            p,
            vec![vec![k("4K")], vec![k("64K"), k("2M")], vec![k("2M")]]
        );
        assert_eq!(
            parse_pages(&flags(&["4K,64K"])).unwrap(),
            vec![vec![k("64K")]]
        );
        let err = format!("{:#}", parse_pages(&flags(&["4K", "3K"])).unwrap_err());
        assert!(err.contains("--pages 3K"), "{err}");
    }
}
