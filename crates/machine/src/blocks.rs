//! `[nested] block_miss` and `block_interval` from pooled kernels: what a 4K walk costs more
//! the more 2M blocks of guest memory the data's frames fall in ([`pagelab_cache::blocks`]),
//! beyond what the model already makes of those frames.
//!
//! `pagelab machines --measure` runs, on 4K pages with their frames drawn from pools of
//! whole 2M blocks (`pool=`), a chase over 8192 pages (each step on the last) with a pool of
//! 16 blocks and one of a few thousand, and an every-page stride over 16M with pools of 8 to
//! a few thousand blocks. Each is modelled twice with the same frames: without the host's
//! block translations, and with them held in the guest's TLB (`block_entries = 0`) at
//! [`PROBE_MISS`] cycles a miss, which gives the model's misses a step. A chase pays every
//! miss in full, and what the TLB holds does not depend on the cycles, so the model's chase
//! takes `with + (miss - PROBE_MISS) × misses` cycles a step at any `miss`: the one that
//! gives the machine's extra from few blocks to many is `block_miss` ([`fit`]). Then
//! `block_interval`, the cycles each miss takes the translations for, one at a time, in a
//! loop of independent loads: the one at which the model's stride over the most blocks
//! takes the machine's time ([`fit_interval`]; on the Zen 4 guest the stride paid nearly as
//! much a miss as a chase does, session 39, which misses that overlap as walks do cannot
//! give). The stride's other pools are the check: what the model makes of them at those
//! two (`docs/cost.md`, session 40).

/// One pooled kernel: its frames' blocks and cycles per unit of work, measured and modelled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockPoint {
    /// The 2M blocks its pool's frames fell in (`pool_blocks`).
    pub blocks: u64,
    /// Cycles per access (per step), as measured.
    pub measured: f64,
    /// The same in the model without block translations.
    pub model: f64,
    /// The same in the model with them, held in the TLB, at [`PROBE_MISS`] cycles a miss.
    pub with: f64,
    /// The blocks missed per access (per step) in that model.
    pub misses: f64,
}

/// What [`fit`] found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlocksFit {
    /// `block_miss`, cycles.
    pub miss: u32,
    /// `block_interval`, cycles ([`fit_interval`]; 0 until then).
    pub interval: u32,
    /// The chase's cycles a step more with many blocks than with few, measured less the
    /// model's without block translations: what they must explain.
    pub extra: f64,
    /// The model's blocks missed a step more with many blocks than with few.
    pub misses: f64,
    /// The `block_miss` the chase gave, where the stride over the most blocks bounded it
    /// to [`BlocksFit::miss`] ([`bound_miss`]).
    pub chase_miss: Option<u32>,
}

/// The cycles a miss the block probe's model runs with: any will do, the misses a step do
/// not depend on it.
pub const PROBE_MISS: u32 = 100;
/// Below this many cycles more a step, the chase's many blocks show nothing to fit.
pub const MIN_CHASE_CYCLES: f64 = 5.0;
/// Below this many more misses a step in the model, its many blocks miss too few to fit.
pub const MIN_MISSES: f64 = 0.05;

/// Fits `block_miss`, at most `max_miss`, to the chase with few blocks and with many.
/// `None` when the machine's chase takes less than [`MIN_CHASE_CYCLES`], or less than
/// `noise` (the cycles a step the chase's own runs of one pool differed by), more a step
/// with many blocks than the model without blocks does, or the model's misses no more than
/// [`MIN_MISSES`] more (nothing to model); at least 1 cycle where the model's blocks
/// already explain all of it (they still push the guest's pages out of the TLB).
///
/// # Errors
/// The chase's first point with more blocks than its second.
pub fn fit(chase: [BlockPoint; 2], max_miss: u32, noise: f64) -> Result<Option<BlocksFit>, String> {
    let [few, many] = chase;
    if few.blocks > many.blocks {
        return Err(format!(
            "the block fit's chase must have its fewest blocks first, not {} then {}",
            few.blocks, many.blocks
        ));
    }
    let measured = many.measured - few.measured;
    let extra = measured - (many.model - few.model);
    let misses = many.misses - few.misses;
    if extra < MIN_CHASE_CYCLES.max(noise) || misses < MIN_MISSES {
        return Ok(None);
    }
    // The model's chase at `m` a miss: `with + (m - PROBE_MISS) × misses` at each point.
    let at_probe = many.with - few.with;
    let miss = f64::from(PROBE_MISS) + (measured - at_probe) / misses;
    Ok(Some(BlocksFit {
        miss: miss.round().clamp(1.0, f64::from(max_miss)) as u32,
        interval: 0,
        extra,
        misses,
        chase_miss: None,
    }))
}

/// The `block_miss`, 0 to `miss`, at which `stride` (the stride over the most blocks, cycles
/// an access in the model at a miss and no interval, which grow with it) takes no longer
/// than `measured`: `miss` where it does not at `miss`. An interval only adds to a stride's
/// time, so a miss at which the model's stride is already slower than the machine's is more
/// than the stride pays: a chase measured in a slow stretch of a guest (on the Emerald Rapids
/// guest, session 43: 315 cycles a step over 4096 blocks where seven of eight other
/// measurements took 176-210) gives one. 0 where the stride leaves no room for any.
///
/// # Errors
/// Whatever `stride` returns.
pub fn bound_miss<E>(
    measured: f64,
    miss: u32,
    mut stride: impl FnMut(u32) -> Result<f64, E>,
) -> Result<u32, E> {
    if stride(miss)? <= measured {
        return Ok(miss);
    }
    let (mut lo, mut hi) = (0, miss);
    if stride(lo)? > measured {
        return Ok(0);
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if stride(mid)? <= measured {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// The `block_interval`, 0 to `miss`, at which `model` (the stride's cycles an access in
/// the model at an interval, which grow with it) comes nearest `measured`: 0 when the model
/// already takes that long without one, `miss` when it does not even then; else found by
/// halving, about log2(`miss`) model runs.
///
/// # Errors
/// Whatever `model` returns.
pub fn fit_interval<E>(
    measured: f64,
    miss: u32,
    mut model: impl FnMut(u32) -> Result<f64, E>,
) -> Result<u32, E> {
    let (mut lo, mut hi) = (0, miss);
    let (mut at_lo, mut at_hi) = (model(lo)?, model(hi)?);
    if at_lo >= measured {
        return Ok(0);
    }
    if at_hi <= measured {
        return Ok(miss);
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let at = model(mid)?;
        if at < measured {
            (lo, at_lo) = (mid, at);
        } else {
            (hi, at_hi) = (mid, at);
        }
    }
    Ok(if measured - at_lo <= at_hi - measured {
        lo
    } else {
        hi
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chase point of `blocks` whose model takes `model` cycles a step without blocks,
    /// `push` more with them for the guest's pages they push out of the TLB, and misses
    /// `misses` a step, on a machine whose misses cost `miss`.
    fn point(blocks: u64, model: f64, push: f64, misses: f64, miss: f64) -> BlockPoint {
        BlockPoint {
            blocks,
            measured: model + push + miss * misses,
            model,
            with: model + push + f64::from(PROBE_MISS) * misses,
            misses,
        }
    }

    #[test]
    fn the_fit_finds_the_miss_it_was_made_with() {
        for miss in [12.0, 47.0, 230.0] {
            let chase = [
                point(16, 114.0, 0.0, 0.005, miss),
                point(4096, 130.0, 6.0, 0.69, miss),
            ];
            let f = fit(chase, 10_000, 0.0).unwrap().unwrap();
            assert_eq!(f.miss, miss as u32, "{f:?}");
            assert!((f.misses - 0.685).abs() < 1e-9, "{f:?}");
            // The extra is over the model without blocks: the push and the misses.
            assert!((f.extra - (6.0 + miss * 0.685)).abs() < 1e-9, "{f:?}");
        }
        // Bounded by the most allowed, and at least 1.
        let big = [
            point(16, 114.0, 0.0, 0.0, 9000.0),
            point(4096, 130.0, 0.0, 0.5, 9000.0),
        ];
        assert_eq!(fit(big, 4000, 0.0).unwrap().unwrap().miss, 4000);
        let pushed = [
            point(16, 114.0, 0.0, 0.0, 0.0),
            point(4096, 130.0, 20.0, 0.5, 0.0),
        ];
        assert_eq!(fit(pushed, 4000, 0.0).unwrap().unwrap().miss, 1);
    }

    #[test]
    fn a_machine_the_model_already_explains_gets_no_blocks() {
        // The machine's many blocks cost what the model makes of the frames.
        let same = [
            point(16, 114.0, 0.0, 0.0, 0.0),
            point(4096, 130.0, 0.0, 0.0, 0.0),
        ];
        assert_eq!(fit(same, 10_000, 0.0).unwrap(), None);
        // Or the model's many blocks miss no more than its few.
        let held = [
            point(16, 114.0, 0.0, 0.3, 40.0),
            point(4096, 130.0, 30.0, 0.32, 40.0),
        ];
        assert_eq!(fit(held, 10_000, 0.0).unwrap(), None);
        // Or an extra the chase's own runs differ by as much as: noise, not blocks (this
        // project's Emerald Rapids guest, session 41: 10-45 ns more over 4096 blocks in
        // single runs, the runs of one pool 20 ns apart).
        let noisy = [
            point(16, 114.0, 0.0, 0.0, 40.0),
            point(4096, 130.0, 0.0, 0.5, 40.0),
        ];
        assert_eq!(fit(noisy, 10_000, 20.5).unwrap(), None);
        assert_eq!(fit(noisy, 10_000, 19.5).unwrap().unwrap().miss, 40);
    }

    #[test]
    fn the_interval_is_where_the_model_meets_the_stride() {
        // A model whose stride takes 10 cycles an access, plus what 0.5 misses an access
        // at one a time over `i` cycles add beyond the loop's 10: max(10, i / 2).
        let model = |i: u32| Ok::<f64, String>(f64::max(10.0, f64::from(i) / 2.0));
        let mut runs = 0;
        let counted = |i: u32| {
            runs += 1;
            model(i)
        };
        assert_eq!(fit_interval(15.0, 45, counted), Ok(30));
        assert!(runs <= 8, "{runs} runs");
        // Nearest of the two either side: 15.2 is 30.4 (30); 15.3 is 30.6 (31).
        assert_eq!(fit_interval(15.2, 45, model), Ok(30));
        assert_eq!(fit_interval(15.3, 45, model), Ok(31));
        // Already that long without, or not even with the whole miss.
        assert_eq!(fit_interval(9.0, 45, model), Ok(0));
        assert_eq!(fit_interval(30.0, 45, model), Ok(45));
        // A model run that fails is the error.
        let failing = |_: u32| Err::<f64, String>("no model".into());
        assert_eq!(fit_interval(15.0, 45, failing), Err("no model".into()));
    }

    #[test]
    fn the_stride_over_the_most_blocks_bounds_the_miss() {
        // Session 43's measurement: the stride over 4096 blocks took 27.8 cycles, the model
        // 13.9 without blocks and 38.3 at the chase's 145 cycles a miss (0.78 missed an
        // access, 0.17 cycles a miss-cycle between the two), no interval.
        let stride = |m: u32| Ok::<f64, String>(13.9 + (38.3 - 13.9) / 145.0 * f64::from(m));
        let m = bound_miss(27.8, 145, stride).unwrap();
        assert!(
            stride(m).unwrap() <= 27.8 && stride(m + 1).unwrap() > 27.8,
            "{m}"
        );
        assert_eq!(m, 82);
        // A stride the chase's miss leaves at or under its time: the chase's miss.
        assert_eq!(bound_miss(38.3, 145, stride), Ok(145));
        assert_eq!(bound_miss(40.0, 145, stride), Ok(145));
        // A stride the model takes longer than the machine with no blocks at all: none.
        assert_eq!(bound_miss(12.0, 145, stride), Ok(0));
        let failing = |_: u32| Err::<f64, String>("no model".into());
        assert_eq!(bound_miss(12.0, 145, failing), Err("no model".into()));
    }

    #[test]
    fn the_fewest_blocks_come_first() {
        let chase = [
            point(4096, 130.0, 0.0, 0.69, 40.0),
            point(16, 114.0, 0.0, 0.0, 40.0),
        ];
        let e = fit(chase, 10_000, 0.0).unwrap_err();
        assert!(e.contains("fewest blocks first"), "{e}");
    }
}
