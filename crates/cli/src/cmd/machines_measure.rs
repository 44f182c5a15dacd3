//! `pagelab machines --measure`: this machine's caches and memory, as a chase sees them,
//! written as a machine file (the lab's [`pagelab_lab::probe`], the machine crate's
//! [`pagelab_machine::measured`]).

use super::machines_probe::{
    interval_check, model_of_probe, probe_in_model, walk_cost, walk_frames,
};
use crate::args::MachinesArgs;
use crate::out::outln;
use anyhow::{bail, Context, Result};
use pagelab_core::PageSize;
use pagelab_lab::probe::overlap::OverlapProbe;
use pagelab_machine::measured::{self, LatencyPoint, NominalCache};

pub fn run(a: &MachinesArgs) -> Result<()> {
    let max = pagelab_core::parse_bytes(&a.max).with_context(|| format!("--max {}", a.max))?;
    let m = measure(&a.base, max, a.repeat, !a.no_blocks)?;
    for l in m.curve.iter().chain(&m.summary) {
        outln!("{l}")?;
    }
    std::fs::write(&a.out, &m.text).with_context(|| format!("writing {}", a.out.display()))?;
    for l in probe_in_model(&a.out.display().to_string(), &m)? {
        outln!("{l}")?;
    }
    outln!(
        "wrote {} (pagelab bench --predict --machine {})",
        a.out.display(),
        a.out.display()
    )?;
    Ok(())
}

/// What [`measure`] found: the machine file, the curve's table and the summary, as lines.
pub struct Measured {
    /// The machine file's TOML.
    pub text: String,
    /// The chase's table: footprint, ns per step on 2M-advised and 4K pages.
    pub curve: Vec<String>,
    /// The caches, memory, frames and overlap found.
    pub summary: Vec<String>,
    /// What the probes of misses, walks and the host's page measured.
    pub probe: pagelab_lab::probe::overlap::OverlapProbe,
    /// The clock found, GHz.
    pub ghz: f64,
}

/// Measures this machine on the base preset `base_arg` (`host`: this CPU's), the chase up
/// to `max` bytes, `repeat` runs of each, and when `blocks` the host's block translations
/// ([`super::machines_blocks`]); warnings go to stderr, progress to the terminal.
///
/// # Errors
/// A base without caches, bad options, or a measurement that fails.
pub fn measure(base_arg: &str, max: u64, repeat: u32, blocks: bool) -> Result<Measured> {
    let (base, why) = if base_arg == pagelab_machine::host::HOST {
        let c = pagelab_machine::host::host_choice();
        (c.name.to_string(), Some(c.reason))
    } else {
        (base_arg.to_string(), None)
    };
    let base_text = pagelab_machine::preset_text(&base).with_context(|| {
        format!(
            "--base {base}: not a preset; the presets are {}",
            pagelab_machine::preset_names().join(", ")
        )
    })?;
    let base_m = pagelab_machine::preset(&base)?;
    let Some(cost) = base_m.cost.as_ref() else {
        bail!("--base {base}: the preset has no [caches]; give one that has, such as emeraldrapids or zen4");
    };
    if let Some(why) = why {
        eprintln!("pagelab: --base host: {why}");
    }
    let mut nominal = measured::sysfs_caches();
    let from = if nominal.is_empty() {
        let c = &cost.caches;
        let levels = [Some(&c.l1d), c.l2.as_ref(), c.l3.as_ref()];
        nominal = levels
            .iter()
            .flatten()
            .zip(1u8..)
            .map(|(s, level)| NominalCache {
                level,
                size: s.size,
                ways: s.ways,
                line: s.line,
            })
            .collect();
        format!("the preset {base} (sysfs names no caches)")
    } else {
        "/sys/devices/system/cpu/cpu0/cache".to_string()
    };
    // A machine file has at most three levels of data cache.
    nominal.truncate(3);
    let opts = pagelab_lab::probe::ProbeOptions {
        max,
        repeat,
        ..Default::default()
    };
    let progress = crate::progress::Progress::new("machines --measure");
    let points = pagelab_lab::probe::probe(&opts, &mut |done, total| {
        progress.step(&format!("chase: run {done} of {total}, in rounds"));
    })?;
    let l2 = nominal.iter().find(|c| c.level == 2).map(|c| c.size);
    let walk_pages = pagelab_lab::probe::overlap::walk_pages(l2);
    let ov = pagelab_lab::probe::overlap::overlap(
        max,
        walk_pages,
        opts.steps,
        repeat,
        &mut |done, total| {
            progress.step(&format!(
                "misses and walks in flight: run {done} of {total}, in rounds"
            ));
        },
    )?;
    progress.finish();
    if points
        .iter()
        .filter(|p| p.bytes >= 2 << 20)
        .any(|p| !p.huge)
    {
        eprintln!(
            "pagelab: warning: THP gave the chase 4K pages at some footprints of 2M and more \
             (is /sys/kernel/mm/transparent_hugepage/enabled `never`?): their times include \
             TLB misses, so memory and the last level look slower than they are"
        );
    }
    let curve: Vec<LatencyPoint> = points
        .iter()
        .map(|p| LatencyPoint {
            bytes: p.bytes,
            ns: p.ns_huge,
        })
        .collect();
    let h = measured::analyse(&curve, &nominal).map_err(anyhow::Error::msg)?;
    let l1_cycles = cost.caches.l1d.latency;
    let ghz = l1_cycles as f64 / h.levels[0].ns;
    let interval = ov.walk_interval_ns().map(|ns| ns * ghz);
    let overlap = measured::overlap_spec(
        ov.misses_in_flight(),
        ov.walks_in_flight(),
        interval,
        cost.overlap.as_ref(),
    )
    .map_err(anyhow::Error::msg)?;
    let frames = ov
        .frames
        .map(|f| frames_spec(f.neighbours, f.span, base_m.phys.memory.0));

    let mut curve = vec!["footprint  ns/step 2M-advised  ns/step 4K  4K adds".to_string()];
    for p in &points {
        let note = if p.huge || p.bytes < 2 << 20 {
            ""
        } else {
            "  (got 4K pages)"
        };
        curve.push(format!(
            "{:>9}  {:>17.1}  {:>10.1}  {:>7.1}{note}",
            pagelab_core::Bytes(p.bytes).to_string(),
            p.ns_huge,
            p.ns_base,
            p.ns_base - p.ns_huge
        ));
    }
    let mut summary = vec![format!(
        "\ncaches named by {from}; clock {ghz:.2} GHz (the {base} L1's {l1_cycles} cycles in {:.2} ns)",
        h.levels[0].ns
    )];
    for l in &h.levels {
        summary.push(format!(
            "L{}: {} of {} ({}-way), {:.1} ns = {:.0} cycles",
            l.nominal.level,
            pagelab_core::Bytes(l.size),
            pagelab_core::Bytes(l.nominal.size),
            l.nominal.ways,
            l.ns,
            l.ns * ghz
        ));
    }
    summary.push(format!(
        "memory: {:.1} ns = {:.0} cycles",
        h.memory_ns,
        h.memory_ns * ghz
    ));
    summary.push(match (&ov.frames, &frames) {
        (Some(f), Some(spec)) => format!(
            "4K frames (the in-order lines' {}, as the kernel's allocator placed them): \
             {:.1}% of consecutive pages on neighbouring frames, in {} 2M blocks over {}: \
             placement = \"scattered\", span = {}, neighbours = {:.3}",
            pagelab_core::Bytes(ov.walk_pages * 4096),
            f.neighbours * 100.0,
            f.blocks,
            pagelab_core::Bytes(f.span),
            pagelab_core::Bytes(spec.span.unwrap_or(f.span)),
            f.neighbours
        ),
        _ => "4K frames: pagemap hides frame numbers (not root): the base's placement kept".into(),
    });
    let mut overlap_lines = overlap_text(&ov, &overlap, cost.overlap.is_some());
    let dir = pagelab_sys::private::private_dir()
        .context("finding the private directory for the file being measured")?;
    // Removed on every way out (the handle's drop), whatever the model made of it.
    let temp = tempfile::Builder::new()
        .prefix("measuring-")
        .suffix(".toml")
        .tempfile_in(&dir)
        .with_context(|| format!("making the file being measured in {}", dir.display()))?;
    let path = temp.path();
    let file = path.display().to_string();
    let host_page = ov.host.host_page();
    // Writes the file as measured so far where the model reads it.
    let write = |found: measured::Found<'_>, notes: &[String]| -> Result<String> {
        let t = measured::machine_toml(&base, base_text, &h, l1_cycles, found, notes)
            .map_err(anyhow::Error::msg)?;
        std::fs::write(path, &t).with_context(|| format!("writing {}", path.display()))?;
        Ok(t)
    };
    let probe_model = || model_of_probe(&file, ov.walk_pages, walk_frames(&ov));
    // An interval is a cost the model adds: kept only where the model without it is faster
    // than the machine on the loads it was read from. Where it is dropped, the model of the
    // probe without it is also that of the file the walk's cost is read from (`modelled`).
    let without = measured::OverlapSpec {
        walk_interval: 0,
        ..overlap
    };
    let (overlap, modelled) = if overlap.walk_interval > 0 {
        write(found_with(frames, host_page, &without, 0, None), &[])?;
        let model = probe_model()?;
        let check = interval_check(&model, &ov, ghz, overlap.walk_interval);
        overlap_lines.push(check.text());
        if check.kept() {
            (overlap, None)
        } else {
            (without, Some(model))
        }
    } else {
        (overlap, None)
    };
    summary.extend(overlap_lines.iter().cloned());
    if !ov.memory_huge {
        eprintln!(
            "pagelab: warning: the misses in flight were measured on 4K pages (THP gave no 2M \
             page): each load also walked, which the figure then includes"
        );
    }
    let mut notes = vec![
        format!(
            "Written by `pagelab machines --measure` on {}.",
            pagelab_machine::host::host_cpu_text()
        ),
        format!("Caches as {from}; clock {ghz:.2} GHz from the L1."),
    ];
    notes.extend(overlap_lines);
    notes.push("footprint, ns per dependent step on 2M-advised pages, on 4K pages:".to_string());
    notes.extend(points.iter().map(|p| {
        format!(
            "  {:>9} {:>8.1} {:>8.1}",
            pagelab_core::Bytes(p.bytes).to_string(),
            p.ns_huge,
            p.ns_base
        )
    }));
    // The walk's own cost: the model of the file without one, against the probe's walks.
    write(found_with(frames, host_page, &overlap, 0, None), &notes)?;
    let walk = if ov.host.huge_ok {
        let model = match modelled {
            Some(m) => m,
            None => probe_model()?,
        };
        walk_cost(&model, &ov, ghz)
    } else {
        None
    };
    let walk_line = match &walk {
        Some(w) => w.text(),
        None => "a walk's own cost: no walk showed (or THP gave the probe no 2M page): walk = 0"
            .to_string(),
    };
    summary.push(walk_line.clone());
    notes.push(walk_line);
    let walk = walk.map_or(0, |w| w.cycles);
    // The host's block translations, against the model of the file so far (with its walk).
    let host_blocks = if blocks {
        write(found_with(frames, host_page, &overlap, walk, None), &notes)?;
        super::machines_blocks::measure(&file, ghz)?
    } else {
        super::machines_blocks::HostBlocks::skipped("--no-blocks")
    };
    summary.extend(host_blocks.lines.iter().cloned());
    notes.extend(host_blocks.lines);
    let text = measured::machine_toml(
        &base,
        base_text,
        &h,
        l1_cycles,
        found_with(frames, host_page, &overlap, walk, host_blocks.fit),
        &notes,
    )
    .map_err(anyhow::Error::msg)?;
    Ok(Measured {
        text,
        curve,
        summary,
        probe: ov,
        ghz,
    })
}

/// What `machines --measure` found besides the caches, with `overlap`, a walk's own cost of
/// `walk` cycles and the host's `blocks`.
fn found_with(
    frames: Option<pagelab_cache::FramesSpec>,
    host_page: Option<PageSize>,
    overlap: &measured::OverlapSpec,
    walk: u32,
    blocks: Option<pagelab_machine::blocks::BlocksFit>,
) -> measured::Found<'_> {
    measured::Found {
        frames,
        walk: Some(walk),
        overlap: Some(overlap),
        host_page,
        blocks,
    }
}

/// `[frames]` for 4K frames `span` bytes apart with a share `neighbours` of consecutive
/// pages on neighbouring frames: scattered over the span (whole 2M blocks, at most the
/// machine's `memory`), with that share (at most 1).
pub fn frames_spec(neighbours: f64, span: u64, memory: u64) -> pagelab_cache::FramesSpec {
    let block = 2 << 20;
    pagelab_cache::FramesSpec {
        placement: pagelab_cache::FramePlacement::Scattered,
        span: Some(
            span.next_multiple_of(block)
                .min(memory / block * block)
                .max(block),
        ),
        neighbours: Some(neighbours.clamp(0.0, 1.0)),
    }
}

/// The lines that say how the overlap was measured and what it gave (printed, and written
/// as comments into the machine file).
fn overlap_text(
    ov: &pagelab_lab::probe::overlap::OverlapProbe,
    o: &measured::OverlapSpec,
    base_has: bool,
) -> Vec<String> {
    let (md, mi) = ov.memory;
    let (bd, bi) = ov.walk_base;
    let (pd, pi) = ov.host.packed;
    let pages = ov.walk_pages;
    let kept = if base_has {
        "the base's"
    } else {
        "as many as the misses"
    };
    let walks = match ov.walks_in_flight() {
        Some(w) => format!(
            "{w:.1} walks in flight: walkers = {}, walks = \"additive\" (each walk adds its \
             share of them to a load, as measured)",
            o.walkers
        ),
        None if !ov.host.huge_ok => format!(
            "not measured (THP gave the packed lines 4K pages): walkers = {} ({kept})",
            o.walkers
        ),
        None => format!(
            "no walk showed or they hid entirely: walkers = {} ({kept})",
            o.walkers
        ),
    };
    let interval = match ov.walk_interval_ns() {
        Some(ns) => format!(
            "splintered walks of {:.1} ns added {ns:.2} ns each, more than {} times their \
             share of the walkers: walk_interval = {} cycles",
            ov.host.translation_ns(),
            pagelab_lab::probe::overlap::INTERVAL_MARGIN,
            o.walk_interval
        ),
        None => match (ov.short_walks_in_flight(), ov.walks_in_flight()) {
            (Some(short), Some(long)) => format!(
                "no interval between walks showed (splintered walks {short:.1} in flight, long \
                 ones {long:.1}: the splintered take no more than {} times their share): \
                 walk_interval = {}",
                pagelab_lab::probe::overlap::INTERVAL_MARGIN,
                o.walk_interval
            ),
            _ => format!(
                "no interval between walks showed: walk_interval = {}",
                o.walk_interval
            ),
        },
    };
    vec![
        format!(
            "misses in flight: random lines over {} on 2M-advised pages, dependent {md:.1} ns, \
             independent {mi:.2} ns: {:.1}: miss_buffers = {}",
            pagelab_core::Bytes(ov.memory_bytes),
            ov.misses_in_flight(),
            o.miss_buffers
        ),
        format!(
            "walks: one line in each of {pages} 4K pages ({}), dependent {bd:.1} ns (packed \
             into {} on a 2M-advised page {pd:.1}: a walk {:.1} ns), independent {bi:.2} ns \
             (packed {pi:.2}: a walk adds {:.2} ns): {walks}",
            walk_placement(ov),
            pagelab_core::Bytes(pages * 64),
            bd - pd,
            bi - pi
        ),
        host_page_text(&ov.host, ov.short_walks_in_flight(), pages),
        interval,
    ]
    .into_iter()
    .chain(rounds_text(ov))
    .collect()
}

/// Where there was more than one round, the counts in flight and the interval each round
/// showed, of which the figures above are the median and the verdict of most
/// ([`pagelab_lab::probe::overlap::OverlapRound`]).
fn rounds_text(ov: &OverlapProbe) -> Option<String> {
    let rounds = ov.each_round();
    if rounds.len() < 2 {
        return None;
    }
    let list = |f: &dyn Fn(&pagelab_lab::probe::overlap::OverlapRound) -> Option<f64>| {
        rounds
            .iter()
            .map(|r| f(r).map_or("-".to_string(), |v| format!("{v:.1}")))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let shown = rounds.iter().filter(|r| r.interval_ns().is_some()).count();
    Some(format!(
        "by round ({} rounds, each its own figures; the counts above are their median): misses \
         in flight {}; walks in flight {}; splintered walks in flight {}; an interval between \
         walks shown in {shown} of {}",
        rounds.len(),
        list(&|r| Some(r.memory.0 / r.memory.1)),
        list(&|r| r.long_walks()),
        list(&|r| r.short_walks()),
        rounds.len()
    ))
}

/// Where the walk measurement's pages lay: drawn from their pool, or where the kernel's
/// allocator put them, and why.
fn walk_placement(ov: &OverlapProbe) -> String {
    let blocks = ov
        .walk_frames
        .map(|f| format!(", in {} 2M blocks", f.blocks))
        .unwrap_or_default();
    match &ov.walk_pool {
        Ok(pool) => format!(
            "drawn from a {} pool of 2M blocks, as many as the spread lines fall in{blocks}",
            pagelab_core::Bytes(*pool)
        ),
        Err(why) => format!("as the kernel's allocator placed them{blocks}; no pool: {why}"),
    }
}

/// The line that says what the host-page probe measured and found.
fn host_page_text(
    hp: &pagelab_lab::probe::host_page::HostPageProbe,
    short_walks: Option<f64>,
    pages: u64,
) -> String {
    let ((sd, si), (pd, pi)) = (hp.spread, hp.packed);
    let found = match hp.host_page() {
        None => "not measured (THP gave the 2M-advised lines 4K pages): the base's kept".into(),
        Some(p) => {
            let flight = short_walks
                .map(|w| format!("; {w:.1} such walks in flight"))
                .unwrap_or_default();
            format!("host_page = {p}{flight}")
        }
    };
    format!(
        "host page: {pages} lines on 2M-advised pages, one per 4K over {} against packed into \
         {}, dependent {sd:.1} against {pd:.1} ns, independent {si:.2} against {pi:.2} ns \
         (a translation {:.1} ns): {found}",
        pagelab_core::Bytes(pages * 4096),
        pagelab_core::Bytes(pages * 64),
        hp.translation_ns()
    )
}

#[cfg(test)]
#[path = "machines_measure_tests.rs"]
mod tests;
