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
        let phys = phys_config(a.phys.as_deref(), a.memory.as_deref())?;
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
    Ok(())
}

/// The modelled machine's physical memory: `--phys FILE.toml`, else 4G, with
/// `--memory` overriding the size.
fn phys_config(
    file: Option<&std::path::Path>,
    memory: Option<&str>,
) -> Result<pagelab_mm::phys::PhysConfig> {
    use pagelab_mm::phys::PhysConfig;
    let mut phys = match file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--phys {}", path.display()))?;
            toml::from_str::<PhysConfig>(&text)
                .with_context(|| format!("--phys {}", path.display()))?
        }
        None => PhysConfig::new(pagelab_core::Bytes(4 << 30)),
    };
    if let Some(m) = memory {
        phys.memory = pagelab_core::Bytes(
            pagelab_core::parse_bytes(m).with_context(|| format!("--memory {m}"))?,
        );
    }
    let origin = file.map_or_else(
        || "--memory".to_string(),
        |p| format!("--phys {}", p.display()),
    );
    phys.validate().with_context(|| origin)?;
    Ok(phys)
}
