//! `pagelab sim`: every page size in one pass over one trace or workload.

use crate::args::SimArgs;
use crate::progress::StderrProgress;
use anyhow::{Context, Result};
use pagelab_trace::TraceSource;

pub fn run(a: SimArgs) -> Result<()> {
    let cfg = super::study_config(&a.model)?;
    let mut src: Box<dyn TraceSource + Send> = match (&a.trace, &a.workload) {
        (Some(path), _) => {
            let format = super::parse_format("--format", a.format.as_deref())?;
            pagelab_trace::open(path, format)?
        }
        (None, Some(spec)) => crate::builtin::open(spec).with_context(|| format!("--workload {spec}"))?,
        (None, None) => anyhow::bail!("give a trace with --trace FILE (or - for standard input) or a workload with --workload NAME"),
    };
    let label = src.info().name;
    let result = pagelab_engine::run_study(&mut *src, &cfg, &mut StderrProgress::new(&label))?;
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
