//! `pagelab sim --workload 'NAME:param=FROM..TO/STEP'`: one result per value,
//! written as one `pagelab.study/1` file, with a table and a plot of the
//! metric against the swept parameter.

use super::sim::Model;
use crate::args::SimArgs;
use anyhow::Result;
use pagelab::param_sweep::ParamSweep;
use pagelab_report::{curve, AnyResult, StudyResult};

pub fn run(
    a: &SimArgs,
    s: &ParamSweep,
    model: &Model,
    rule: &pagelab_report::recommend::Rule,
) -> Result<()> {
    // Open every value's workload first, so that a bad value fails at once.
    let mut sources = s
        .specs
        .iter()
        .map(|spec| super::capture::workload_source(spec, &a.window))
        .collect::<Result<Vec<_>>>()?;
    let mut results = Vec::with_capacity(s.specs.len());
    for (spec, src) in s.specs.iter().zip(sources.iter_mut()) {
        results.push(model.simulate(&mut **src, spec)?);
    }
    crate::out::out!("{}", curve::table(&results, &s.param)?)?;
    let mut study = StudyResult::new(results);
    study.provenance = Some(super::report::provenance(
        a.model.machine.as_deref(),
        Vec::new(),
    )?);
    if let Some(p) = &a.json {
        pagelab_report::write_json(p, &study)?;
    }
    if let Some(p) = &a.csv {
        pagelab_report::write_csv(p, &study.results)?;
    }
    if let Some(p) = &a.svg {
        curve::plot_svg(&study.results, &s.param, p)?;
    }
    if let Some(p) = &a.html {
        super::report::write_one(p, AnyResult::Study(study), rule)?;
    }
    Ok(())
}
