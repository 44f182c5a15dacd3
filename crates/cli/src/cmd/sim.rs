//! `pagelab sim`: every page size in one pass over one trace or workload.

use crate::args::SimArgs;
use crate::progress::Progress;
use anyhow::Result;
use pagelab_trace::TraceSource;

pub fn run(a: SimArgs) -> Result<()> {
    let (cfg, machine) = super::study_config(&a.model)?;
    let rule = a.rule.rule()?;
    let mut src = super::capture::sim_source(&a)?;
    let label = src.info().name;
    let cost = super::cost_config(&a.model, &cfg, machine.as_ref())?;
    let mut result = if let (Some(cost), true) = (&cost, a.policy.is_empty()) {
        pagelab_engine::run_cost_study(&mut *src, &cfg, cost, &mut Progress::new(&label))?
    } else if a.policy.is_empty() {
        pagelab_engine::run_study(&mut *src, &cfg, &mut Progress::new(&label))?
    } else {
        if cost.is_some() {
            eprintln!("note: time is estimated for the fixed-size study; the --policy runs are not timed (docs/cost.md)");
        }
        let pcfg = pagelab::model::policy_config(
            &cfg,
            &pagelab::model::PolicyArgs {
                policies: &a.policy,
                phys: a.phys.as_deref(),
                memory: a.memory.as_deref(),
                strict: a.strict,
                cow: &a.cow,
                machine: machine.as_ref(),
                page_cluster: a.page_cluster,
                highpte: a.highpte,
            },
        )?;
        pagelab_engine::run_policies(&mut *src, &pcfg, &mut Progress::new(&label))?
    };
    let inputs = match (&a.trace, a.program.program.is_empty()) {
        (Some(t), true) => super::report::input_checksum(t)?.into_iter().collect(),
        _ => Vec::new(),
    };
    result.provenance = Some(super::report::provenance(
        a.model.machine.as_deref(),
        inputs,
    )?);
    crate::out::out!("{}", pagelab_report::table(&result))?;
    if let Some(p) = &a.json {
        pagelab_report::write_json(p, &result)?;
    }
    if let Some(p) = &a.csv {
        pagelab_report::write_csv(p, std::slice::from_ref(&result))?;
    }
    if let Some(p) = &a.svg {
        pagelab_report::plot_svg(std::slice::from_ref(&result), p)?;
    }
    let result = pagelab_report::AnyResult::Sim(result);
    if let Some(p) = &a.html {
        super::report::write_one(p, result.clone(), &rule)?;
    }
    super::report::print_answer(&result, &rule)
}
