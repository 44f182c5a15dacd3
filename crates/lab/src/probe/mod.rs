//! `pagelab machines --measure`: the memory hierarchy as a dependent chase sees it.
//!
//! The `chase` kernel ([`crate::native`]) runs at footprints growing geometrically, each
//! twice: with its data advised `MADV_HUGEPAGE` (2M pages where THP allows it: its time is
//! then the caches' and memory's, the TLB holding every page) and `MADV_NOHUGEPAGE` (4K
//! pages: the difference is what a TLB miss's walk adds to a dependent load). Each run is
//! timed in stretches, and a figure is the 10th percentile of the stretches of `repeat`
//! runs, the thread pinned to the CPU it started on. Nothing on
//! the machine is changed: no THP knob is written, so where THP is off the 2M runs get 4K
//! pages, and [`ProbePoint::huge`] says so.

pub mod blocks;
pub mod host_page;
pub mod overlap;

use crate::native::{Advice, Chase};
use anyhow::{bail, Context, Result};

/// What to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeOptions {
    /// The smallest footprint, bytes.
    pub min: u64,
    /// The largest footprint, bytes.
    pub max: u64,
    /// Footprints per doubling.
    pub per_doubling: u32,
    /// Dependent steps timed in each run, in 64 stretches.
    pub steps: u64,
    /// Runs at each footprint and page size (their stretches are pooled).
    pub repeat: u32,
}

impl Default for ProbeOptions {
    /// 8K to 256M, four footprints a doubling, 1M steps, 3 runs: well under a minute idle.
    fn default() -> Self {
        ProbeOptions {
            min: 8 << 10,
            max: 256 << 20,
            per_doubling: 4,
            steps: 1 << 20,
            repeat: 3,
        }
    }
}

/// One footprint's times.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProbePoint {
    /// Bytes of 64-byte nodes in the cycle.
    pub bytes: u64,
    /// Nanoseconds per step with the data advised for huge pages.
    pub ns_huge: f64,
    /// Whether those runs got huge pages (their first touch faulted under one fault per
    /// 16 base pages; a footprint under 2M never does).
    pub huge: bool,
    /// Nanoseconds per step on base pages.
    pub ns_base: f64,
}

/// The footprints [`probe`] measures: `min` to `max` in `per_doubling` steps a doubling,
/// each a whole number of 64-byte nodes.
///
/// # Errors
/// A minimum under 1K, a maximum below the minimum, or no step per doubling.
pub fn footprints(o: &ProbeOptions) -> Result<Vec<u64>> {
    if o.min < 1024 || o.max < o.min || o.per_doubling == 0 || o.per_doubling > 64 {
        bail!(
            "footprints from {} to {} bytes, {} a doubling: the smallest must be at least 1K, \
             the largest at least the smallest, and 1 to 64 a doubling",
            o.min,
            o.max,
            o.per_doubling
        );
    }
    let step = 2f64.powf(1.0 / o.per_doubling as f64);
    let mut out: Vec<u64> = Vec::new();
    let mut b = o.min as f64;
    while b <= o.max as f64 * 1.0001 {
        let bytes = ((b / 64.0).round() as u64).max(1) * 64;
        if out.last() != Some(&bytes) {
            out.push(bytes);
        }
        b *= step;
    }
    Ok(out)
}

/// Stretches each chase or overlap measurement is timed in (see [`ProbeOptions::steps`]).
pub(crate) const CHUNKS: u64 = 64;

/// The chase's ns per step over `bytes` and the first touch's faults: the 10th percentile
/// of the stretches of `repeat` runs, so that stretches a loaded machine preempted the
/// thread in, and the cold first ones, do not count.
fn time(bytes: u64, o: &ProbeOptions, advice: Advice) -> Result<(f64, f64)> {
    let k = Chase {
        nodes: bytes / 64,
        node: 64,
        steps: o.steps,
        seed: 1,
        pool: None,
    };
    tenth_percentile(o.repeat, || {
        k.time_chunks(advice, CHUNKS)
            .with_context(|| format!("running `{k}` ({advice})"))
    })
}

/// The 10th percentile of the stretches of `repeat` runs (at least one), each of which
/// returns its stretches' times and its faults, and the fewest faults of a run: stretches
/// a loaded machine preempted the thread in, and the cold first ones, do not count.
pub(crate) fn tenth_percentile(
    repeat: u32,
    mut run: impl FnMut() -> Result<(Vec<f64>, f64)>,
) -> Result<(f64, f64)> {
    let mut all = Vec::new();
    let mut faults = f64::INFINITY;
    for _ in 0..repeat.max(1) {
        let (ns, f) = run()?;
        all.extend(ns);
        faults = faults.min(f);
    }
    all.sort_by(f64::total_cmp);
    Ok((all[all.len() / 10], faults))
}

/// Runs the chase at every footprint; `progress(done, total)` after each.
///
/// # Errors
/// Bad options ([`footprints`]), or a region that cannot be mapped.
pub fn probe(o: &ProbeOptions, progress: &mut dyn FnMut(usize, usize)) -> Result<Vec<ProbePoint>> {
    if o.repeat == 0 || o.steps == 0 {
        bail!("--repeat and the steps must be at least 1");
    }
    let sizes = footprints(o)?;
    // A failure to pin only makes the figures noisier.
    let _pinned = pagelab_sys::process::Pinned::here().ok();
    let mut out = Vec::with_capacity(sizes.len());
    for (i, &bytes) in sizes.iter().enumerate() {
        let (ns_huge, faults) = time(bytes, o, Advice::HugePage)?;
        let huge = bytes < 2 << 20 || faults * 16.0 < bytes.div_ceil(4096) as f64;
        let (ns_base, _) = time(bytes, o, Advice::NoHugePage)?;
        out.push(ProbePoint {
            bytes,
            ns_huge,
            huge,
            ns_base,
        });
        progress(i + 1, sizes.len());
    }
    Ok(out)
}

/// How the 4K frames of a region lie ([`frames_of`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrameLayout {
    /// The share of consecutive pages on neighbouring frames ([`neighbour_share`]).
    pub neighbours: f64,
    /// Bytes from the lowest frame to the end of the highest.
    pub span: u64,
    /// The 2M blocks the frames fall in.
    pub blocks: u64,
}

/// Where the touched 4K pages of the `bytes` from `start` (page-aligned) lie, read from
/// `/proc/self/pagemap`; `None` where pagemap hides frame numbers (not root) or fewer than
/// two pages are present.
///
/// # Errors
/// When pagemap cannot be read.
pub fn frames_of(start: u64, bytes: u64) -> Result<Option<FrameLayout>> {
    use std::os::unix::fs::FileExt;
    let pages = (bytes / 4096) as usize;
    let pagemap =
        std::fs::File::open("/proc/self/pagemap").context("opening /proc/self/pagemap")?;
    let mut buf = vec![0u8; pages * 8];
    pagemap
        .read_exact_at(&mut buf, start / 4096 * 8)
        .context("reading /proc/self/pagemap")?;
    // Bit 63: present; bits 0-54: the frame (zero when hidden from a non-root reader).
    let pfns: Vec<u64> = buf
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .map(|e| if e >> 63 == 1 { e & ((1 << 55) - 1) } else { 0 })
        .collect();
    let known: Vec<u64> = pfns.iter().copied().filter(|&f| f != 0).collect();
    let (Some(lo), Some(hi)) = (known.iter().min(), known.iter().max()) else {
        return Ok(None);
    };
    if pages < 2 {
        return Ok(None);
    }
    let blocks: std::collections::HashSet<u64> = known.iter().map(|f| f >> 9).collect();
    Ok(Some(FrameLayout {
        neighbours: neighbour_share(&pfns),
        span: (hi - lo + 1) * 4096,
        blocks: blocks.len() as u64,
    }))
}

/// Of consecutive pages' frames `pfns` (0: not known), the share of pairs whose frames are
/// neighbours, one above or one below the other. Both count: Linux's per-CPU lists hand a
/// process the pages another just freed last-in first-out, so a region touched in order
/// after a large free gets its frames in descending order, as contiguous as ascending ones
/// for the cache sets and the page-table lines they fall into (on this project's Zen 4
/// guest, session 33, 64M touched after 256M were freed: 16314 of 16383 pairs one frame
/// below, none one above). Before session 33 only ascending pairs counted, which called
/// such frames scattered.
pub fn neighbour_share(pfns: &[u64]) -> f64 {
    if pfns.len() < 2 {
        return 0.0;
    }
    let near = pfns
        .windows(2)
        .filter(|w| w[0] != 0 && w[1] != 0 && w[0].abs_diff(w[1]) == 1)
        .count();
    near as f64 / (pfns.len() - 1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_in_either_order_are_neighbours_and_scattered_ones_not() {
        let up: Vec<u64> = (1000..1100).collect();
        let down: Vec<u64> = (1000..1100).rev().collect();
        assert_eq!(neighbour_share(&up), 1.0);
        assert_eq!(neighbour_share(&down), 1.0);
        // Every other pair a jump, and unknown frames (0) never count.
        let jumps: Vec<u64> = (0..100u64).map(|i| 5000 + (i / 2) * 64 + i % 2).collect();
        assert!((neighbour_share(&jumps) - 50.0 / 99.0).abs() < 1e-12);
        assert_eq!(neighbour_share(&[0, 1, 0, 1]), 0.0);
        let scattered: Vec<u64> = (0..100u64).map(|i| (i * 7919) % 100_003 + 1).collect();
        assert_eq!(neighbour_share(&scattered), 0.0);
        assert_eq!(neighbour_share(&[7]), 0.0);
    }

    #[test]
    fn footprints_grow_geometrically_in_whole_nodes() {
        let o = ProbeOptions {
            min: 8 << 10,
            max: 64 << 10,
            per_doubling: 2,
            ..ProbeOptions::default()
        };
        assert_eq!(
            footprints(&o).unwrap(),
            vec![8192, 11584, 16384, 23168, 32768, 46336, 65536]
        );
        let bad = ProbeOptions { max: 4096, ..o };
        assert!(footprints(&bad)
            .unwrap_err()
            .to_string()
            .contains("at least the smallest"));
    }

    #[test]
    fn a_small_probe_runs_and_a_larger_footprint_is_not_faster_than_the_l1() {
        let o = ProbeOptions {
            min: 8 << 10,
            max: 32 << 20,
            per_doubling: 1,
            steps: 200_000,
            repeat: 1,
        };
        let mut calls = 0;
        let pts = probe(&o, &mut |done, total| {
            calls += 1;
            assert_eq!(done, calls);
            assert_eq!(total, 13);
        })
        .unwrap();
        assert_eq!(pts.len(), 13);
        // 32M of random dependent loads cannot be as fast as 8K in the L1, on any machine.
        assert!(pts[12].ns_huge > 2.0 * pts[0].ns_huge, "{pts:?}");
        assert!(pts.iter().all(|p| p.ns_huge > 0.0 && p.ns_base > 0.0));
    }

    #[test]
    fn a_regions_frames_are_a_share_a_span_and_blocks_or_hidden() {
        let bytes = 16u64 << 20;
        let mut region = crate::native::Region::new(bytes as usize, Advice::NoHugePage).unwrap();
        for page in region.as_mut_slice::<u64>().chunks_mut(512) {
            page[0] = 1;
        }
        match frames_of(region.as_mut_ptr() as u64, bytes).unwrap() {
            Some(f) => {
                assert!((0.0..=1.0).contains(&f.neighbours), "{f:?}");
                // 4096 distinct frames: at least 16M between the lowest and the highest's
                // end, in at least 8 and at most 4096 2M blocks.
                assert!(f.span >= bytes && (8..=4096).contains(&f.blocks), "{f:?}");
            }
            None => assert!(!pagelab_sys::process::is_root(), "root sees frame numbers"),
        }
    }
}
