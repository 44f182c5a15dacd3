//! `pagelab study`: the page-size study over a set of workloads.

use crate::args::StudyArgs;
use crate::progress::Progress;
use anyhow::{Context, Result};
use pagelab_report::{AnyResult, StudyResult};

pub fn run(a: StudyArgs) -> Result<()> {
    let (cfg, machine) = super::study_config(&a.model)?;
    let cost = super::cost_config(&a.model, &cfg, machine.as_ref())?;
    let rule = a.rule.rule()?;
    let specs: Vec<String> = if a.workloads.is_empty() {
        pagelab::builtin::default_set()
    } else {
        a.workloads.clone()
    };
    for spec in &specs {
        if pagelab::param_sweep::expand(spec)?.is_some() {
            anyhow::bail!("{spec}: a FROM..TO/STEP sweep runs under `pagelab sim --workload`, one result per value");
        }
    }
    // Open every workload first so a typo fails before minutes of work.
    let (specs, mut sources) = super::capture::study_sources(&a, &specs)?;
    let mut results = Vec::new();
    for (spec, src) in specs.iter().zip(sources.iter_mut()) {
        let progress = &mut Progress::new(spec);
        let result = match &cost {
            Some(c) => pagelab_engine::run_cost_study(&mut **src, &cfg, c, progress)?,
            None => {
                let result = pagelab_engine::run_study(&mut **src, &cfg, progress)?;
                super::sim::page_index_hint(&**src, &cfg.tlb, spec);
                result
            }
        };
        crate::out::outln!("{}", pagelab_report::table(&result))?;
        results.push(result);
    }
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let mut study = StudyResult::new(results);
    let mut inputs = Vec::new();
    if a.program.program.is_empty() {
        for (spec, src) in specs.iter().zip(&sources) {
            inputs.extend(pagelab::provenance::read_checksum(spec, &**src)?);
        }
    }
    study.provenance = Some(super::report::provenance(
        a.model.machine.as_deref(),
        inputs,
    )?);
    let json = a.out.join("result.json");
    pagelab_report::write_json(&json, &study)?;
    let csv = a.out.join("result.csv");
    pagelab_report::write_csv(&csv, &study.results)?;
    let svg = a.out.join("study.svg");
    pagelab_report::plot_svg(&study.results, &svg)?;
    let html = a.out.join("report.html");
    let study = AnyResult::Study(study);
    super::report::write_one(&html, study.clone(), &rule)?;
    crate::out::outln!(
        "wrote {}, {}, {} and {}",
        json.display(),
        csv.display(),
        svg.display(),
        html.display()
    )?;
    super::report::print_answer(&study, &rule)
}
