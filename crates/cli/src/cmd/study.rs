//! `pagelab study`: the page-size study over a set of workloads.

use crate::args::StudyArgs;
use crate::progress::StderrProgress;
use anyhow::{Context, Result};
use pagelab_report::{StudyResult, STUDY_SCHEMA};

pub fn run(a: StudyArgs) -> Result<()> {
    let cfg = super::study_config(&a.model)?;
    let specs: Vec<String> = if a.workloads.is_empty() {
        pagelab::builtin::default_set()
    } else {
        a.workloads.clone()
    };
    // Open every workload first so a typo fails before minutes of work.
    let (specs, mut sources) = super::capture::study_sources(&a, &specs)?;
    let mut results = Vec::new();
    for (spec, src) in specs.iter().zip(sources.iter_mut()) {
        let result = pagelab_engine::run_study(&mut **src, &cfg, &mut StderrProgress::new(spec))?;
        crate::out::outln!("{}", pagelab_report::table(&result))?;
        results.push(result);
    }
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let study = StudyResult {
        schema: STUDY_SCHEMA.to_string(),
        results,
    };
    let json = a.out.join("result.json");
    pagelab_report::write_json(&json, &study)?;
    let csv = a.out.join("result.csv");
    pagelab_report::write_csv(&csv, &study.results)?;
    let svg = a.out.join("study.svg");
    pagelab_report::plot_svg(&study.results, &svg)?;
    crate::out::outln!(
        "wrote {}, {} and {}",
        json.display(),
        csv.display(),
        svg.display()
    )?;
    Ok(())
}
