//! `pagelab sim`: every page size in one pass over one trace or workload.

use crate::args::SimArgs;
use crate::progress::StderrProgress;
use anyhow::{Context, Result};
use pagelab_trace::TraceSource;

pub fn run(a: SimArgs) -> Result<()> {
    let cfg = super::study_config(&a.model)?;
    let mut src = super::capture::sim_source(&a)?;
    let label = src.info().name;
    let result = if a.policy.is_empty() {
        pagelab_engine::run_study(&mut *src, &cfg, &mut StderrProgress::new(&label))?
    } else {
        let policies = a
            .policy
            .iter()
            .map(|p| p.parse().with_context(|| format!("--policy {p}")))
            .collect::<Result<Vec<_>>>()?;
        let memory = pagelab_core::parse_bytes(&a.memory)
            .with_context(|| format!("--memory {}", a.memory))?;
        let phys = pagelab_mm::phys::PhysConfig::new(pagelab_core::Bytes(memory));
        phys.validate()
            .with_context(|| format!("--memory {}", a.memory))?;
        let cow = a
            .cow
            .parse()
            .map_err(|e: String| anyhow::anyhow!("--cow {}: {e}", a.cow))?;
        let pcfg = pagelab_engine::PolicyConfig {
            policies,
            tlb: cfg.tlb.clone(),
            phys,
            strict: a.strict,
            cow,
        };
        pagelab_engine::run_policies(&mut *src, &pcfg, &mut StderrProgress::new(&label))?
    };
    print!("{}", pagelab_report::table(&result));
    if let Some(p) = &a.json {
        pagelab_report::write_json(p, &result)?;
    }
    if let Some(p) = &a.csv {
        pagelab_report::write_csv(p, std::slice::from_ref(&result))?;
    }
    if let Some(p) = &a.svg {
        pagelab_report::plot_svg(std::slice::from_ref(&result), p)?;
    }
    Ok(())
}
