//! `pagelab sharing`: many processes sharing memory, and what their page
//! tables and every reverse-map method cost (Bligh and Hansen, OLS 2003).

use crate::out::outln;
use anyhow::{bail, Context, Result};
use clap::Args;
use pagelab_core::{Bytes, Event, PageSize};
use pagelab_mm::sharing::{Config, HugetlbPool, PageTables, Sharing, SharingStats};
use pagelab_trace::TraceSource;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct SharingArgs {
    /// Built-in workload, as NAME[:key=value,...]: shm-fanout or forkexec (see `pagelab workloads`).
    #[arg(
        long,
        value_name = "SPEC",
        required_unless_present = "trace",
        conflicts_with = "trace"
    )]
    pub workload: Option<String>,
    /// Trace file with its processes' fork, exit and map events (native format), or Lackey text.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<String>,
    /// Trace format, overriding detection: lackey or native.
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<String>,
    /// The modelled machine: a preset (`pagelab machines`; ia32-pae is the
    /// paper's) or a machine file; its page-table geometry and memory are used.
    #[arg(long, value_name = "NAME", default_value = "ia32-pae")]
    pub machine: String,
    /// Physical memory, overriding the machine's (like 64G).
    #[arg(long, value_name = "SIZE")]
    pub memory: Option<String>,
    /// Page-table sharing: private (today), shared (McCracken's shared PTE
    /// pages: of shared mappings, and of private ones copy-on-write at fork)
    /// or hugetlb-pmd-share (Linux's PMD sharing for shared hugetlb).
    #[arg(long, value_name = "MODE", default_value = "private")]
    pub page_tables: String,
    /// A hugetlb pool reserved at boot, SIZE:COUNT (like 2M:1024); repeat for several sizes.
    #[arg(long, value_name = "SIZE:COUNT")]
    pub hugetlb: Vec<String>,
    /// Check every invariant after every event (slow; for small runs).
    #[arg(long)]
    pub check: bool,
    /// Write the result as JSON (schema pagelab.sharing/1).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

/// The sharing model's configuration for `--machine` and `--page-tables`.
pub fn config(a: &SharingArgs) -> Result<Config> {
    let mode = PageTables::parse(&a.page_tables).map_err(|e| anyhow::anyhow!("--{e}"))?;
    let m =
        pagelab_machine::resolve(&a.machine).with_context(|| format!("--machine {}", a.machine))?;
    let mut cfg = Config::for_machine(m.geometry, m.phys.memory.0, mode);
    if let Some(m) = &a.memory {
        cfg.memory_bytes = pagelab_core::parse_bytes(m).with_context(|| format!("--memory {m}"))?;
    }
    for h in &a.hugetlb {
        let (size, count) = h
            .split_once(':')
            .with_context(|| format!("--hugetlb {h}: write SIZE:COUNT, like 2M:1024"))?;
        let size = PageSize::from_bytes(
            pagelab_core::parse_bytes(size).with_context(|| format!("--hugetlb {h}"))?,
        )
        .with_context(|| format!("--hugetlb {h}: the size must be a page size from 4K to 1G"))?;
        let count: u64 = count
            .replace('_', "")
            .parse()
            .with_context(|| format!("--hugetlb {h}: COUNT must be a whole number"))?;
        cfg.hugetlb.push(HugetlbPool { size, count });
    }
    cfg.check().map_err(|e| anyhow::anyhow!("--{e}"))?;
    Ok(cfg)
}

/// Runs every event of `src` through `model` (checking invariants with `check`).
pub fn drive(src: &mut dyn TraceSource, model: &mut Sharing, check: bool) -> Result<()> {
    let mut buf: Vec<Event> = Vec::with_capacity(1 << 14);
    loop {
        buf.clear();
        if !src.fill(&mut buf, 1 << 14)? {
            break;
        }
        if !check {
            model.events(&buf)?;
            continue;
        }
        for ev in &buf {
            model.event(ev)?;
            model
                .check()
                .map_err(|e| anyhow::anyhow!("invariant broken: {e}"))?;
        }
    }
    Ok(())
}

pub fn run(a: SharingArgs) -> Result<()> {
    let cfg = config(&a)?;
    let Some(mut src) = pagelab::builtin::open_input(
        a.trace.as_deref(),
        a.workload.as_deref(),
        a.format.as_deref(),
    )?
    else {
        bail!("give a workload with --workload SPEC or a trace with --trace FILE")
    };
    let started = std::time::Instant::now();
    let mut model = Sharing::new(cfg.clone()).map_err(|e| anyhow::anyhow!("--{e}"))?;
    let info = src.info();
    drive(&mut *src, &mut model, a.check).with_context(|| info.name.clone())?;
    let stats = model.stats();
    let elapsed = started.elapsed().as_secs_f64();
    outln!("{}", table(&stats, &cfg))?;
    if let Some(p) = &a.json {
        let out = serde_json::json!({
            "schema": "pagelab.sharing/1",
            "machine": a.machine,
            "source": info,
            "config": cfg,
            "stats": stats,
            "elapsed_seconds": elapsed,
        });
        let text = serde_json::to_string_pretty(&out)?;
        pagelab_core::write_atomically(p, text.as_bytes())
            .with_context(|| format!("--json {}", p.display()))?;
    }
    Ok(())
}

/// The result for people: page tables, then every reverse-map method.
pub fn table(s: &SharingStats, cfg: &Config) -> String {
    use std::fmt::Write;
    let b = |x: u64| Bytes(x).to_string();
    let pt = &s.page_tables;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{} processes at most ({} now), {} references: {} faults, {} hits, {} copy-on-write, {} unshares, {} outside VMAs",
        s.processes_peak, s.processes, s.counts.refs, s.counts.faults, s.counts.hits, s.counts.cow_copies, s.counts.unshares, s.counts.refs_outside_vmas
    );
    let c = &s.counts;
    if c.fork_shared_tables > 0 {
        let _ = writeln!(
            t,
            "PTE pages shared at fork: {}; copied by a writer (or an mprotect, an anonymous fault, a partial unmap) while shared: {}; taken over by their last user: {}",
            c.fork_shared_tables, c.fork_unshares, c.fork_takeovers
        );
    }
    let _ = writeln!(
        t,
        "page tables ({}): {} now, {} at the peak ({} of PTE pages); one process's own at most {}",
        serde_json::to_value(pt.mode)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default(),
        b(pt.page_table_bytes),
        b(pt.page_table_bytes_peak),
        b(pt.pte_bytes_at_peak),
        b(pt.per_process_bytes_max)
    );
    let levels: Vec<String> = pt
        .pages_by_level_at_peak
        .iter()
        .enumerate()
        .map(|(i, n)| {
            format!(
                "level {}: {n} x {}",
                i + 1,
                b(cfg.geometry.table_bytes(i as u8 + 1))
            )
        })
        .collect();
    let _ = writeln!(t, "tables at the peak: {}", levels.join(", "));
    let _ = writeln!(
        t,
        "\n{:<20} {:>10} {:>12} {:>14} {:>14} {:>12} {:>14} {:>14}",
        "rmap method",
        "bytes_peak",
        "objects_peak",
        "adds",
        "removes",
        "walk/remove",
        "reclaim VMAs",
        "reclaim PTs"
    );
    for (m, r) in &s.rmap {
        let name = serde_json::to_value(m)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        let per = |x: u64, n: u64| {
            if n == 0 {
                "-".to_string()
            } else {
                format!("{:.1}", x as f64 / n as f64)
            }
        };
        let _ = writeln!(
            t,
            "{:<20} {:>10} {:>12} {:>14} {:>14} {:>12} {:>14} {:>14}",
            name,
            b(r.bytes_peak),
            r.objects_peak,
            r.adds,
            r.removes,
            per(r.remove_entries_walked, r.removes),
            r.reclaim_vmas_walked,
            r.reclaim_page_tables_walked
        );
    }
    let _ = write!(
        t,
        "(grouped chains hold {} PTE pointers per {}-byte line; reclaim: one pass unmapping the {} pages mapped at the end)",
        s.rmap_entries_per_line, cfg.rmap.line_bytes,
        s.rmap.values().next().map_or(0, |r| r.reclaim_pages)
    );
    t
}
