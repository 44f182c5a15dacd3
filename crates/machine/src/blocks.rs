//! `[nested] block_entries`, `block_miss` and `block_interval` from pooled kernels: what a
//! 4K walk costs more the more 2M blocks of guest memory the data's frames fall in
//! ([`pagelab_cache::blocks`]), beyond what the model already makes of those frames.
//!
//! `pagelab machines --measure` runs, on 4K pages with their frames drawn from pools of
//! whole 2M blocks (`pool=`), an every-page stride over 16M (4096 pages, independent loads)
//! with pools of 8 to a few thousand blocks, and a chase over 8192 pages (each step on the
//! last) with a pool of 16 blocks and one of a few thousand. For each, what the machine
//! took more than with the fewest blocks, less what the model (without block translations)
//! takes more for the same frames, is what the block translations must explain. For each
//! candidate number of entries the share of walks that miss is what an LRU set of that many
//! blocks gives the same draw ([`pagelab_cache::blocks::miss_share`]); then
//! - the chase's extra over its share of misses is a miss's latency, `block_miss` (each
//!   step walks: 8192 pages visited in a fixed cycle, more than any TLB here holds);
//! - the stride's extras against their shares, fitted through zero, are what a miss adds to
//!   a loop of independent loads, `block_interval` (at most `block_miss`): on the Zen 4
//!   guest the same in a loop of dependent loads, so nothing overlaps it, and the model
//!   pauses everything in flight for it ([`pagelab_cache::overlap`]); the part of
//!   `block_miss` that lengthens the walk it hides behind other walks as it does their reads;
//! - the candidate whose shares fit the stride's extras best is `block_entries`.

use pagelab_cache::blocks::miss_share;

/// One pooled kernel: its frames' blocks and cycles per unit of work, measured and modelled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockPoint {
    /// The 2M blocks its pool's frames fell in (`pool_blocks`).
    pub blocks: u64,
    /// Cycles per access (per step), as measured.
    pub measured: f64,
    /// The same in the model without block translations.
    pub model: f64,
}

/// What [`fit`] found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlocksFit {
    /// `block_entries`.
    pub entries: u32,
    /// `block_miss`, cycles.
    pub miss: u32,
    /// `block_interval`, cycles.
    pub interval: u32,
    /// Cycles a miss added to the stride, fitted.
    pub stride_per_miss: f64,
    /// The root mean square of the stride's extras less the fit, cycles an access.
    pub rms: f64,
}

/// The every-page stride's pages (16M of 4K).
pub const STRIDE_PAGES: u64 = 4096;
/// The chase's pages.
pub const CHASE_PAGES: u64 = 8192;
/// Below this many cycles more a step, the chase's many blocks show nothing to fit.
pub const MIN_CHASE_CYCLES: f64 = 5.0;
/// The seed of the draws the shares are computed for.
const SEED: u64 = 0x6b6c_6f63_6b73;

/// The candidates for `block_entries`: 64 to 8192, by factors of about 1.4.
pub fn candidates() -> Vec<u32> {
    (0..=14)
        .map(|k| (64.0 * 2f64.powf(k as f64 / 2.0)).round() as u32)
        .collect()
}

/// Fits the block translations to `stride` (the fewest blocks first) and `chase` (few
/// blocks, many), `block_miss` at most `max_miss`. `Ok(None)` when the chase shows
/// less than [`MIN_CHASE_CYCLES`] more with many blocks than the model does, or no
/// candidate leaves the stride's many-block runs a share of misses to fit (nothing to
/// model); an error names what is missing.
///
/// # Errors
/// Fewer than two stride points, or the stride's first point not its fewest blocks.
pub fn fit(
    stride: &[BlockPoint],
    chase: [BlockPoint; 2],
    max_miss: u32,
) -> Result<Option<BlocksFit>, String> {
    let Some((base, rest)) = stride.split_first() else {
        return Err("the block fit needs the stride with two pools or more".into());
    };
    if rest.is_empty() {
        return Err("the block fit needs the stride with two pools or more".into());
    }
    if rest.iter().any(|p| p.blocks < base.blocks) {
        return Err("the block fit's first stride point must have the fewest blocks".into());
    }
    let extra =
        |p: &BlockPoint, from: &BlockPoint| (p.measured - from.measured) - (p.model - from.model);
    let chase_extra = extra(&chase[1], &chase[0]);
    if chase_extra < MIN_CHASE_CYCLES {
        return Ok(None);
    }
    let extras: Vec<f64> = rest.iter().map(|p| extra(p, base)).collect();
    let mut best: Option<(f64, BlocksFit)> = None;
    for entries in candidates() {
        let share = |pages, blocks| miss_share(pages, blocks, entries, SEED);
        let chase_share = share(CHASE_PAGES, chase[1].blocks) - share(CHASE_PAGES, chase[0].blocks);
        if chase_share < 0.1 {
            continue;
        }
        let base_share = share(STRIDE_PAGES, base.blocks);
        let shares: Vec<f64> = rest
            .iter()
            .map(|p| share(STRIDE_PAGES, p.blocks) - base_share)
            .collect();
        let ss: f64 = shares.iter().map(|s| s * s).sum();
        if ss < 1e-6 {
            continue;
        }
        let per_miss = shares.iter().zip(&extras).map(|(s, e)| s * e).sum::<f64>() / ss;
        let sq: f64 = shares
            .iter()
            .zip(&extras)
            .map(|(s, e)| (e - per_miss * s).powi(2))
            .sum();
        let rms = (sq / shares.len() as f64).sqrt();
        let miss = (chase_extra / chase_share)
            .round()
            .clamp(1.0, max_miss as f64);
        let interval = per_miss.round().clamp(0.0, miss);
        let found = BlocksFit {
            entries,
            miss: miss as u32,
            interval: interval as u32,
            stride_per_miss: per_miss,
            rms,
        };
        if best.as_ref().is_none_or(|(r, _)| rms < *r) {
            best = Some((rms, found));
        }
    }
    Ok(best.map(|(_, f)| f))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Points of a machine whose block translations are `entries`, a miss costing `miss`
    /// cycles in a chase and `per_miss` in the stride, over a model that sees `drift`
    /// cycles more per thousand blocks that the machine shows too.
    fn machine(
        entries: u32,
        miss: f64,
        per_miss: f64,
        drift: f64,
    ) -> (Vec<BlockPoint>, [BlockPoint; 2]) {
        let point = |pages, blocks: u64, cost: f64, base: f64| {
            let s = miss_share(pages, blocks, entries, SEED);
            let model = base + drift * blocks as f64 / 1000.0;
            BlockPoint {
                blocks,
                measured: model + cost * s,
                model,
            }
        };
        let stride = [8, 128, 512, 1024, 2048, 4096]
            .iter()
            .map(|&b| point(STRIDE_PAGES, b, per_miss, 6.0))
            .collect();
        (
            stride,
            [
                point(CHASE_PAGES, 16, miss, 110.0),
                point(CHASE_PAGES, 3600, miss, 110.0),
            ],
        )
    }

    #[test]
    fn the_fit_finds_the_entries_and_costs_it_was_made_with() {
        for entries in [512, 1024, 2048] {
            let (stride, chase) = machine(entries, 40.0, 9.0, 3.0);
            let f = fit(&stride, chase, 10_000).unwrap().unwrap();
            assert_eq!(f.entries, entries, "{f:?}");
            assert_eq!(f.miss, 40, "{f:?}");
            // 9 a miss in the stride.
            assert_eq!(f.interval, 9, "{f:?}");
            assert!(
                f.rms < 0.01 && (f.stride_per_miss - 9.0).abs() < 0.01,
                "{f:?}"
            );
        }
    }

    #[test]
    fn a_machine_the_model_already_explains_gets_no_blocks() {
        // The model's own drift, measured alike: nothing left over.
        let (stride, chase) = machine(1024, 0.0, 0.0, 5.0);
        assert_eq!(fit(&stride, chase, 10_000).unwrap(), None);
    }

    #[test]
    fn too_few_points_are_an_error() {
        let (stride, chase) = machine(1024, 40.0, 9.0, 0.0);
        let e = fit(&stride[..1], chase, 10_000).unwrap_err();
        assert!(e.contains("two pools or more"), "{e}");
        let mut back = stride.clone();
        back.reverse();
        let e = fit(&back, chase, 10_000).unwrap_err();
        assert!(e.contains("fewest blocks"), "{e}");
    }

    #[test]
    fn the_candidates_run_from_64_to_8192() {
        let c = candidates();
        assert_eq!((c[0], c[2], c[14]), (64, 128, 8192));
        assert!(c.windows(2).all(|w| w[0] < w[1]));
    }
}
