//! `pagelab sim`: every page size in one pass over one trace or workload,
//! or one result per value of a swept workload parameter (`FROM..TO/STEP`).

use crate::args::SimArgs;
use crate::progress::Progress;
use anyhow::{bail, Result};
use pagelab_engine::{CostConfig, PolicyConfig, StudyConfig};
use pagelab_report::SimResult;
use pagelab_trace::TraceSource;

/// What simulates one input: the study, timed or not, or the policies.
pub struct Model {
    cfg: StudyConfig,
    cost: Option<CostConfig>,
    policies: Option<PolicyConfig>,
}

impl Model {
    /// Runs the model over `src`, showing progress under `label`.
    pub fn simulate(&self, src: &mut (dyn TraceSource + Send), label: &str) -> Result<SimResult> {
        let progress = &mut Progress::new(label);
        Ok(match (&self.policies, &self.cost) {
            (Some(p), _) => pagelab_engine::run_policies(src, p, progress)?,
            (None, Some(c)) => pagelab_engine::run_cost_study(src, &self.cfg, c, progress)?,
            (None, None) => {
                let result = pagelab_engine::run_study(src, &self.cfg, progress)?;
                page_index_hint(&*src, &self.cfg.tlb, label);
                result
            }
        })
    }
}

/// After a study of `src`: a word when its page index was made for another TLB's
/// filter than `tlb`'s, so the study decoded every record where an index for this
/// TLB would have spared it that (`docs/commands/convert.md`).
pub fn page_index_hint(src: &dyn TraceSource, tlb: &pagelab_tlb::TlbConfig, label: &str) {
    let want = pagelab_engine::page_filter_params(tlb);
    if let Some(have) = src.page_index().filter(|&have| have != want) {
        let kind = |(depth, fragments): (usize, bool)| {
            format!(
                "depth {depth}, {}",
                if fragments {
                    "fragments"
                } else {
                    "no fragments"
                }
            )
        };
        // A TLB from a file is named by its path there, which is not known here.
        let preset = pagelab_tlb::preset_names().contains(&tlb.name.as_str());
        eprintln!(
            "note: {label}'s page index is for another TLB's filter ({}; {} needs {}), so the study decoded every record; `pagelab convert {label} OUT --page-index-tlb {}` writes one for it",
            kind(have),
            tlb.name,
            kind(want),
            if preset { tlb.name.as_str() } else { "TLB.toml" }
        );
    }
}

pub fn run(a: SimArgs) -> Result<()> {
    let (cfg, machine) = super::study_config(&a.model)?;
    let rule = a.rule.rule()?;
    let cost = super::cost_config(&a.model, &cfg, machine.as_ref())?;
    let policies = if a.policy.is_empty() {
        None
    } else {
        if cost.is_some() {
            eprintln!("note: time is estimated for the fixed-size study; the --policy runs are not timed (docs/cost.md)");
        }
        Some(pagelab::model::policy_config(
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
                bind: a.bind.as_deref(),
                mempolicy: a.mempolicy.as_deref(),
                pcp: a.pcp.as_deref(),
                asids: a.asids,
                page_cache: a.page_cache.as_deref(),
                fault_around: a.fault_around.as_deref(),
            },
        )?)
    };
    let model = Model {
        cfg,
        cost,
        policies,
    };
    if let Some(spec) = &a.workload {
        if let Some(sweep) = pagelab::param_sweep::expand(spec)? {
            if a.trace.is_some() || !a.program.program.is_empty() {
                bail!("give one input: --trace, --workload or `-- PROGRAM`, not several");
            }
            return super::sim_sweep::run(&a, &sweep, &model, &rule);
        }
    }
    let mut src = super::capture::sim_source(&a)?;
    let label = src.info().name;
    let mut result = model.simulate(&mut *src, &label)?;
    let inputs = match (&a.trace, a.program.program.is_empty()) {
        (Some(t), true) => pagelab::provenance::read_checksum(t, &*src)?
            .into_iter()
            .collect(),
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
