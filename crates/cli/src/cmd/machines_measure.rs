//! `pagelab machines --measure`: this machine's caches and memory, as a chase sees them,
//! written as a machine file (the lab's [`pagelab_lab::probe`], the machine crate's
//! [`pagelab_machine::measured`]).

use crate::args::MachinesArgs;
use crate::out::outln;
use anyhow::{bail, Context, Result};
use pagelab_machine::measured::{self, LatencyPoint, NominalCache};

/// Below this share of consecutive virtual pages on neighbouring frames (one above or one
/// below), the kernel is taken to scatter a process's 4K frames (first-touch order, or its
/// reverse, gives nearly 1).
const CONTIGUOUS: f64 = 0.5;

pub fn run(a: &MachinesArgs) -> Result<()> {
    let max = pagelab_core::parse_bytes(&a.max).with_context(|| format!("--max {}", a.max))?;
    let m = measure(&a.base, max, a.repeat)?;
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

/// Steps of the model's two runs of each of the probe's loads ([`probe_in_model`]): their
/// difference is the steady state.
const MODEL_STEPS: (u64, u64) = (100_000, 200_000);

/// The probe's loads ([`pagelab_lab::probe::overlap`]: its lines one per 4K page on 4K and
/// on 2M-advised pages, and packed, each load on the last and independent), as
/// measured and as the model of the machine file at `path` (`--virt nested`) puts them: the
/// model's `lines` workload visits the same lines in the same order. Lines of a table,
/// cycles at the measured clock.
///
/// # Errors
/// A file the model cannot time with, or a run that fails.
pub fn probe_in_model(path: &str, m: &Measured) -> Result<Vec<String>> {
    use super::bench_predict::{steady_state, ModelPair, DEFAULT_VIRT};
    let (cfg, machine) = pagelab::model::machine_study_config(Some(path), Some("4K,2M"), None)?;
    let cost = pagelab::model::cost_config(machine.as_ref(), &cfg, Some(DEFAULT_VIRT))?
        .context("a measured machine file has caches")?;
    let p = &m.probe;
    let count = p.walk_pages;
    let spread = format!("one per 4K over {}", pagelab_core::Bytes(count * 4096));
    let packed = format!("packed into {}", pagelab_core::Bytes(count * 64));
    // (spacing, label, measured on 4K pages, measured on 2M-advised pages)
    let layouts = [
        ("4K", &spread, Some(p.walk_base), p.host.spread),
        ("64", &packed, None, p.host.packed),
    ];
    let mut out = vec![
        String::new(),
        format!(
            "the probe's loads ({count} lines), measured and in the model of this file \
             (--virt {DEFAULT_VIRT}; the `lines` workload), cycles per load at {:.2} GHz:",
            m.ghz
        ),
        format!(
            "{:<20}  {:<4}  {:<11}  {:>11}  {:>8}  {:>7}  {:>14}",
            "lines", "page", "order", "measured ns", "= cycles", "model", "model/measured"
        ),
    ];
    for (spacing, label, on_4k, on_2m) in layouts {
        for (order, pick) in [
            ("dependent", (|t: (f64, f64)| t.0) as fn((f64, f64)) -> f64),
            ("independent", |t: (f64, f64)| t.1),
        ] {
            let w = |steps: u64| {
                format!("lines:lines={count},spacing={spacing},order={order},steps={steps}")
            };
            let pair = ModelPair {
                small: w(MODEL_STEPS.0),
                large: w(MODEL_STEPS.1),
                ops: MODEL_STEPS.1 - MODEL_STEPS.0,
            };
            let model = steady_state(&cfg, &cost, &pair, &format!("the probe's {order} lines"))?;
            for (page, measured, modelled) in
                [("4K", on_4k, model[0]), ("2M", Some(on_2m), model[1])]
            {
                let Some(measured) = measured.map(pick) else {
                    continue;
                };
                let cycles = measured * m.ghz;
                out.push(format!(
                    "{label:<20}  {page:<4}  {order:<11}  {measured:>11.2}  {cycles:>8.1}  \
                     {modelled:>7.1}  {:>14.2}",
                    modelled / cycles
                ));
            }
        }
    }
    Ok(out)
}

/// Measures this machine on the base preset `base_arg` (`host`: this CPU's), the chase up
/// to `max` bytes, `repeat` runs of each; warnings go to stderr, progress to the terminal.
///
/// # Errors
/// A base without caches, bad options, or a measurement that fails.
pub fn measure(base_arg: &str, max: u64, repeat: u32) -> Result<Measured> {
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
        progress.step(&format!("chase {done} of {total} footprints"));
    })?;
    progress.step("frame placement");
    let contiguity = pagelab_lab::probe::frame_contiguity(64 << 20)?;
    progress.step("misses and walks in flight");
    let l2 = nominal.iter().find(|c| c.level == 2).map(|c| c.size);
    let walk_pages = pagelab_lab::probe::overlap::walk_pages(l2);
    let ov = pagelab_lab::probe::overlap::overlap(max, walk_pages, opts.steps, repeat)?;
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
    let placement = contiguity.map(|c| {
        if c < CONTIGUOUS {
            "scattered"
        } else {
            "first-touch"
        }
    });

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
    summary.push(match contiguity {
        Some(c) => format!(
            "4K frames: {:.1}% of consecutive pages on neighbouring frames: {}",
            c * 100.0,
            placement.unwrap_or("first-touch")
        ),
        None => {
            "4K frames: pagemap hides frame numbers (not root): the base's placement kept".into()
        }
    });
    let overlap_lines = overlap_text(&ov, &overlap, cost.overlap.is_some());
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
    let text = measured::machine_toml(
        &base,
        base_text,
        &h,
        l1_cycles,
        measured::Found {
            placement,
            overlap: Some(&overlap),
            host_page: ov.host.host_page(),
        },
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
        Some(w) => format!("{w:.1} walks in flight: walkers = {}", o.walkers),
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
            "splintered walks of {:.1} ns added {ns:.2} ns each, more than their share of the \
             walkers: walk_interval = {} cycles",
            ov.host.translation_ns(),
            o.walk_interval
        ),
        None => format!(
            "no interval between walks showed: walk_interval = {}",
            o.walk_interval
        ),
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
            "walks: one line in each of {pages} 4K pages, dependent {bd:.1} ns (packed into {} \
             on a 2M-advised page {pd:.1}: a walk {:.1} ns), independent {bi:.2} ns (packed \
             {pi:.2}: a walk adds {:.2} ns): {walks}",
            pagelab_core::Bytes(pages * 64),
            bd - pd,
            bi - pi
        ),
        host_page_text(&ov.host, pages),
        interval,
    ]
}

/// The line that says what the host-page probe measured and found.
fn host_page_text(hp: &pagelab_lab::probe::host_page::HostPageProbe, pages: u64) -> String {
    let ((sd, si), (pd, pi)) = (hp.spread, hp.packed);
    let found = match hp.host_page() {
        None => "not measured (THP gave the 2M-advised lines 4K pages): the base's kept".into(),
        Some(p) => {
            let flight = hp
                .walks_in_flight()
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
mod tests {
    use super::*;
    use pagelab_lab::probe::{host_page::HostPageProbe, overlap::OverlapProbe};

    #[test]
    fn the_probes_loads_are_set_beside_the_models() {
        // The figures of this project's Zen 4 guest (session 33), against the zen4 preset.
        let m = Measured {
            text: String::new(),
            curve: Vec::new(),
            summary: Vec::new(),
            probe: OverlapProbe {
                memory_bytes: 256 << 20,
                memory: (167.7, 15.16),
                memory_huge: true,
                walk_pages: 16384,
                walk_base: (30.6, 3.89),
                host: HostPageProbe {
                    spread: (26.5, 3.46),
                    packed: (8.5, 2.06),
                    huge_ok: true,
                },
            },
            ghz: 3.5,
        };
        let lines = probe_in_model("zen4", &m).unwrap();
        let rows: Vec<Vec<&str>> = lines[3..]
            .iter()
            .map(|l| {
                l.split("  ")
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .collect();
        assert_eq!(rows.len(), 6, "{lines:#?}");
        let measured: Vec<f64> = rows.iter().map(|r| r[3].parse().unwrap()).collect();
        assert_eq!(measured, [30.6, 26.5, 3.89, 3.46, 8.5, 2.06]);
        for r in &rows {
            let (ns, cycles, model, ratio): (f64, f64, f64, f64) = (
                r[3].parse().unwrap(),
                r[4].parse().unwrap(),
                r[5].parse().unwrap(),
                r[6].parse().unwrap(),
            );
            assert!((cycles - ns * 3.5).abs() < 0.06, "{r:?}");
            assert!(
                model > 0.0 && (ratio - model / cycles).abs() < 0.01,
                "{r:?}"
            );
        }
        // In the model too a walk costs the dependent spread lines on 4K pages more than
        // the packed ones on 2M, and independent loads less than dependent ones.
        let model: Vec<f64> = rows.iter().map(|r| r[5].parse().unwrap()).collect();
        assert!(model[0] > model[4] && model[2] < model[0] && model[5] < model[4]);
    }
}
