//! The model's side of `pagelab validate`: the same workload, the same mapping
//! and the same THP settings, run through the memory-management model's
//! `linux-thp` policy.

use super::replay::ReplayReport;
use anyhow::{anyhow, Context, Result};
use pagelab_core::{Advice, Backing, Event, MapEvent, PageSize, Prot, Sharing, VirtAddr};
use pagelab_mm::phys::PhysConfig;
use pagelab_mm::policy::{PolicySpec, ThpSettings};
use pagelab_mm::system::Mm;
use std::collections::BTreeMap;

/// What the model predicts for one replay.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prediction {
    /// Page faults.
    pub faults: u64,
    /// THP allocations at fault time per size above 4K (`anon_fault_alloc`), keyed `"64K"`.
    pub alloc_by_size: BTreeMap<String, u64>,
    /// Failed THP allocations per size (`anon_fault_fallback`), keyed `"64K"`.
    pub fallback_by_size: BTreeMap<String, u64>,
}

/// Runs the model on the workload of `report` with its mapping and settings,
/// on the model's default machine (4G: far more than a validate workload
/// needs, so no allocation fails in the model, as none does on the host).
pub fn predict(report: &ReplayReport) -> Result<Prediction> {
    let settings: ThpSettings = report
        .settings
        .parse()
        .map_err(|e| anyhow!("THP settings `{}`: {e}", report.settings))?;
    let spec = PolicySpec::LinuxThp(settings);
    let phys = PhysConfig::new(pagelab_core::Bytes(4 << 30));
    let mut mm = Mm::new(&spec, &phys).map_err(|e| anyhow!("model: {e}"))?;
    let model = |e: pagelab_mm::machine::MmError| anyhow!("model of {}: {e}", report.workload);
    mm.event(&Event::Map(Box::new(MapEvent {
        start: VirtAddr(report.start),
        len: report.len,
        prot: Prot(Prot::READ | Prot::WRITE),
        backing: Backing::Anon,
        sharing: Sharing::Private,
    })))
    .map_err(model)?;
    if report.advised {
        mm.event(&Event::Advise {
            start: VirtAddr(report.start),
            len: report.len,
            advice: Advice::HugePage,
        })
        .map_err(model)?;
    }
    let mut src = pagelab_workloads::open(&report.workload)
        .with_context(|| format!("workload `{}`", report.workload))?;
    super::replay::for_each_data_ref(&mut *src, &mut Vec::new(), |r| {
        let write = r.kind.is_write();
        mm.translate(r.addr, false, write).map_err(model)?;
        if r.last_byte().vpn(PageSize::MIN) != r.addr.vpn(PageSize::MIN) {
            mm.translate(r.last_byte(), false, write).map_err(model)?;
        }
        Ok(())
    })?;
    let stats = &mm.machine().stats;
    let counters = mm.policy_counters();
    let per_size = |name: &str| -> BTreeMap<String, u64> {
        counters[name]
            .as_object()
            .map(|o| {
                o.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_u64()?)))
                    .filter(|&(_, n)| n > 0)
                    .collect()
            })
            .unwrap_or_default()
    };
    Ok(Prediction {
        faults: stats.faults,
        alloc_by_size: per_size("anon_fault_alloc"),
        fallback_by_size: per_size("anon_fault_fallback"),
    })
}
