//! `pagelab machines --measure`'s host blocks: the pooled kernels of
//! [`pagelab_lab::probe::blocks`] against the model of the file being written, without the
//! host's block translations and with them held in the TLB, fitted by
//! [`pagelab_machine::blocks::fit`] and [`fit_interval`] into `[nested] block_miss` and
//! `block_interval`.

use super::bench_predict::{
    model_of, model_pair, steady_costs, with_frames, KernelFrames, Steady, DEFAULT_VIRT,
};
use anyhow::{Context, Result};
use pagelab_core::{Bytes, PageSize};
use pagelab_engine::CostConfig;
use pagelab_lab::native::{KernelSpec, Scale};
use pagelab_lab::probe::blocks::{chase_spec, stride_spec, BlocksProbe, PooledRun};
use pagelab_machine::blocks::{bound_miss, fit, fit_interval, BlockPoint, BlocksFit, PROBE_MISS};

/// What the block probe found: the fit (`None`: not measured) and the lines that say how.
pub struct HostBlocks {
    /// The fit: wherever the blocks were measured, at the chase's miss, the stride's bound,
    /// or 0 cycles (held in the TLB, taking entries, nothing more).
    pub fit: Option<BlocksFit>,
    /// Lines for the summary and the file's comments.
    pub lines: Vec<String>,
}

impl HostBlocks {
    /// Not measured, for `why`.
    pub fn skipped(why: &str) -> HostBlocks {
        HostBlocks {
            fit: None,
            lines: vec![format!("host blocks: not measured ({why}): none modelled")],
        }
    }
}

/// Runs the block probe and fits it against the model of the machine file at `path` (the
/// file as measured so far, without blocks), at `ghz`.
/// A probe that cannot run (not root, too little memory, THP unable to collapse a pool)
/// gives [`HostBlocks::skipped`] with its reason; a model run that fails is an error.
///
/// # Errors
/// A model run that fails.
pub fn measure(path: &str, ghz: f64) -> Result<HostBlocks> {
    if !pagelab_sys::process::is_root() {
        return Ok(HostBlocks::skipped(
            "needs root: pool= reads the frames through pagemap",
        ));
    }
    let progress = crate::progress::Progress::new("machines --measure");
    let probe = pagelab_lab::probe::blocks::blocks(&mut |s| progress.step(s));
    let probe = match probe {
        Ok(p) => p,
        Err(e) => return Ok(HostBlocks::skipped(&format!("{e:#}"))),
    };
    let model = Model::new(path, &probe)?;
    let n = model.runs.len();
    let measured: Vec<f64> = model.runs.iter().map(|r| r.ns * ghz).collect();
    progress.step(&format!(
        "the block probe's {n} kernels in the model, without the blocks and with them"
    ));
    let without = model.at(None, 0)?;
    // The fit's misses a step come from the chase alone, with the blocks at any cycles.
    let with = each_on_every_core(2, |k| model.run(n - 2 + k, Some(PROBE_MISS), 0))?;
    let chase_point = |k: usize| BlockPoint {
        blocks: model.runs[n - 2 + k].pool_blocks,
        measured: measured[n - 2 + k],
        model: without[n - 2 + k].cycles,
        with: with[k].cycles,
        misses: with[k].block_misses,
    };
    let chase = [chase_point(0), chase_point(1)];
    let noise = probe.chase_noise * ghz;
    let fitted_chase =
        fit(chase, pagelab_cache::MAX_WALK_CYCLES, noise).map_err(anyhow::Error::msg)?;
    // The stride over the most blocks bounds the miss (no interval can make it faster),
    // then sets the interval at which it takes the machine's time; the model at both beside
    // the measurements, the stride's other pools the check.
    let top = n - 3;
    // The stride's cycles at a miss and an interval, each pair run once: the bound and the
    // interval's fit both ask for the stride at the bound's miss with no interval.
    let mut known = std::collections::HashMap::new();
    let mut stride = |miss: u32, interval: u32| -> Result<f64> {
        if let Some(&cycles) = known.get(&(miss, interval)) {
            return Ok(cycles);
        }
        // A miss of 0, the bound's floor: the blocks held in the TLB at no cycles.
        progress.step(&format!(
            "the stride over the most blocks in the model at block_miss {miss}, \
             block_interval {interval}"
        ));
        let cycles = model.run(top, Some(miss), interval)?.cycles;
        known.insert((miss, interval), cycles);
        Ok(cycles)
    };
    // The blocks take TLB entries whatever their misses cost (session 40: an 11M stride
    // whose pages fit the TLB slowed with the blocks its frames fell in; session 54: a 7M
    // stride took 1.83 ns over 8 blocks and 5.78 over thousands), so they are held there
    // in every case: where the chase shows no time of their own, or the stride leaves no
    // room for any, at 0 cycles a miss (session 55).
    let mut found = match fitted_chase {
        Some(f) => {
            let miss = bound_miss(measured[top], f.miss, |m| stride(m, 0))?;
            BlocksFit {
                miss,
                chase_miss: (miss < f.miss).then_some(f.miss),
                ..f
            }
        }
        None => {
            let [few, many] = chase;
            BlocksFit {
                miss: 0,
                interval: 0,
                extra: (many.measured - few.measured) - (many.model - few.model),
                misses: many.misses - few.misses,
                chase_miss: None,
            }
        }
    };
    let miss = found.miss;
    found.interval = fit_interval(measured[top], miss, |i| stride(miss, i))?;
    progress.step(&format!(
        "the block probe's {n} kernels in the model at block_miss {}",
        found.miss
    ));
    let fitted = model.at(Some(found.miss), found.interval)?;
    progress.finish();
    Ok(HostBlocks {
        lines: lines(
            &model.runs,
            &measured,
            &without,
            &fitted,
            &found,
            fitted_chase.is_some(),
            noise,
        ),
        fit: Some(found),
    })
}

/// `f` of `0..n`, in that order, run on rayon's threads (one per core), each call on one
/// thread alone (`pagelab_engine::with_threads`): a model run of one page size keeps one core
/// busy, so two runs side by side on two cores take the time of one. Every call runs; the
/// first error (by index) is returned; a panic is passed on.
fn each_on_every_core<T: Send>(n: usize, f: impl Fn(usize) -> Result<T> + Sync) -> Result<Vec<T>> {
    use rayon::prelude::*;
    let one = std::num::NonZeroUsize::new(1);
    let each: Vec<Result<T>> = (0..n)
        .into_par_iter()
        .map(|i| pagelab_engine::with_threads(one, || f(i)))
        .collect();
    each.into_iter().collect()
}

/// The probe's kernels in the model of one machine file, each with its 4K frames at random
/// over the blocks its pool came back in.
struct Model<'a> {
    cfg: pagelab_engine::StudyConfig,
    cost: CostConfig,
    /// The probe's runs, the stride's then the chase's, and their kernels.
    runs: Vec<&'a PooledRun>,
    specs: Vec<KernelSpec>,
}

impl<'a> Model<'a> {
    fn new(path: &str, probe: &'a BlocksProbe) -> Result<Model<'a>> {
        let (cfg, cost) = model_of(&[vec![PageSize::K4]], path, Some(DEFAULT_VIRT))?;
        let runs: Vec<&PooledRun> = probe.stride.iter().chain(&probe.chase).collect();
        anyhow::ensure!(
            !probe.stride.is_empty(),
            "the block probe ran no stride to check the fit with"
        );
        let stride = probe.stride.iter().map(|r| stride_spec(r.pool));
        let specs = stride
            .chain(probe.chase.iter().map(|r| chase_spec(r.pool)))
            .map(|text| KernelSpec::parse(&text, Scale::Full))
            .collect::<Result<_>>()?;
        Ok(Model {
            cfg,
            cost,
            runs,
            specs,
        })
    }

    /// Each run's steady state with the host's block translations held in the TLB at
    /// `miss` cycles a miss, each taking them for `interval`, one at a time (`None`: none
    /// modelled).
    fn at(&self, miss: Option<u32>, interval: u32) -> Result<Vec<Steady>> {
        each_on_every_core(self.runs.len(), |i| self.run(i, miss, interval))
    }

    /// [`Model::at`] for run `i` alone (its progress is the caller's to show).
    fn run(&self, i: usize, miss: Option<u32>, interval: u32) -> Result<Steady> {
        let (spec, r) = (&self.specs[i], self.runs[i]);
        let pair = model_pair(spec).context("a pooled kernel has a model")?;
        let frames = KernelFrames {
            neighbours: 0.0,
            span: r.pool_blocks.max(1) * (2 << 20),
        };
        let mut cost = with_frames(&self.cost, &frames);
        // A machine without `[nested]` is refused by the model run, saying so.
        if let Some(n) = cost.machine.cost.nested.as_mut() {
            (n.block_entries, n.block_miss, n.block_interval) = (0, miss, interval);
        }
        let what = match miss {
            Some(m) => format!("{spec} (block_miss {m}, block_interval {interval})"),
            None => format!("{spec} (no block translations)"),
        };
        let steady = steady_costs(&self.cfg, &cost, &pair, &what, false)
            .context("the model of the block probe's kernels")?;
        Ok(steady.first().copied().unwrap_or_default())
    }
}

/// The summary's lines: each of the probe's runs, measured and modelled (without blocks,
/// and with `found`'s, `fitted`), then what was found: from the chase where it showed the
/// blocks' time (`from_chase`), else the blocks in the TLB at no cycles of their own.
fn lines(
    runs: &[&PooledRun],
    measured: &[f64],
    without: &[Steady],
    fitted: &[Steady],
    found: &BlocksFit,
    from_chase: bool,
    noise: f64,
) -> Vec<String> {
    let stride = runs.len() - 2;
    let mut out: Vec<String> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let (what, unit) = if i < stride {
                ("16M stride, every page, 4K,", "an access")
            } else {
                ("chase of 8192 4K pages,", "a step")
            };
            format!(
                "host blocks: {what} pool {} ({} blocks): measured {:.1} cycles, model {:.1} \
                 without the blocks, {:.1} with them ({:.2} missed {unit})",
                Bytes(r.pool),
                r.pool_blocks,
                measured[i],
                without[i].cycles,
                fitted[i].cycles,
                fitted[i].block_misses
            )
        })
        .collect();
    let f = found;
    let bounded = |chase: u32, miss: u32| {
        format!(
            "block_miss = {chase}, at which the model's stride over the most blocks is \
             slower than the machine's, which no interval can make faster: the stride bounds \
             it to {miss}"
        )
    };
    out.push(if from_chase {
        format!(
            "host blocks: held in the TLB beside the guest's pages, the chase's {:.2} more \
             misses a step give its {:.1} cycles more than the model without them at {}; the \
             stride over the most blocks takes the machine's time with each miss taking them \
             {} cycles, one at a time: block_interval = {}",
            f.misses,
            f.extra,
            match f.chase_miss {
                Some(chase) => format!("{}: block_miss = {}", bounded(chase, f.miss), f.miss),
                None => format!("block_miss = {}", f.miss),
            },
            f.interval,
            f.interval
        )
    } else {
        format!(
            "host blocks: many blocks cost no more than the model makes of them, beyond the \
             {noise:.1} cycles a step the chase's runs of one pool differed by ({} runs of \
             each, in turn): held in the TLB beside the guest's pages, whose entries they \
             take, at no cycles of their own: block_miss = 0",
            pagelab_lab::probe::blocks::CHASE_ROUNDS
        )
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_miss_the_stride_bounds_is_said_with_the_chases() {
        let run = |pool_blocks| PooledRun {
            pool: pool_blocks * (2 << 20),
            pool_blocks,
            ns: 10.0,
        };
        let runs = [run(8), run(4096), run(16), run(4096)];
        let runs: Vec<&PooledRun> = runs.iter().collect();
        let measured = [20.0, 27.8, 180.0, 315.0];
        let without = [9.6, 13.9, 142.0, 163.0].map(|cycles| Steady {
            cycles,
            block_misses: 0.0,
        });
        let fitted = without.map(|s| Steady {
            block_misses: 0.5,
            ..s
        });
        let f = BlocksFit {
            miss: 82,
            interval: 0,
            extra: 111.4,
            misses: 0.77,
            chase_miss: Some(145),
        };
        let all = |found: &BlocksFit, from_chase| {
            lines(&runs, &measured, &without, &fitted, found, from_chase, 20.0)
        };
        let last = |found: &BlocksFit, from_chase| all(found, from_chase).pop().unwrap();
        let text = last(&f, true);
        assert!(
            text.contains("block_miss = 145, at which the model's stride over the most blocks")
                && text.contains("the stride bounds it to 82: block_miss = 82;"),
            "{text}"
        );
        // A fit the stride leaves no room for keeps the blocks in the TLB at no cycles.
        let zero = BlocksFit { miss: 0, ..f };
        let text = last(&zero, true);
        assert!(
            text.contains("block_miss = 145, at which")
                && text.contains("the stride bounds it to 0: block_miss = 0;"),
            "{text}"
        );
        let plain = BlocksFit {
            chase_miss: None,
            ..f
        };
        let text = last(&plain, true);
        assert!(
            text.contains("without them at block_miss = 82; the stride"),
            "{text}"
        );
        // A chase that shows nothing: the blocks in the TLB all the same, at no cycles.
        let none = BlocksFit {
            miss: 0,
            chase_miss: None,
            ..f
        };
        let text = last(&none, false);
        assert!(
            text.contains("cost no more than the model makes of them, beyond the 20.0 cycles")
                && text.ends_with("at no cycles of their own: block_miss = 0"),
            "{text}"
        );
        let first = all(&none, false).swap_remove(0);
        assert!(
            first.ends_with("model 9.6 without the blocks, 9.6 with them (0.50 missed an access)"),
            "{first}"
        );
    }

    #[test]
    fn every_index_runs_once_in_order_and_the_first_error_is_returned() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let out = each_on_every_core(37, |i| Ok(i * i)).unwrap();
        assert_eq!(out, (0..37).map(|i| i * i).collect::<Vec<_>>());
        let calls = AtomicUsize::new(0);
        let err = each_on_every_core(10, |i| {
            calls.fetch_add(1, Ordering::Relaxed);
            anyhow::ensure!(i != 3 && i != 7, "run {i} failed");
            Ok(i)
        })
        .unwrap_err();
        assert_eq!(err.to_string(), "run 3 failed");
        assert_eq!(calls.load(Ordering::Relaxed), 10);
        assert!(each_on_every_core(0, Ok).unwrap().is_empty());
    }
}
