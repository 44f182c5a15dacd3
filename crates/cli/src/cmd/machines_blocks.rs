//! `pagelab machines --measure`'s host blocks: the pooled kernels of
//! [`pagelab_lab::probe::blocks`] against the model of the file being written, fitted by
//! [`pagelab_machine::blocks::fit`] into `[nested] block_entries`, `block_miss` and
//! `block_interval`.

use super::bench_predict::{predict, KernelFrames, DEFAULT_VIRT};
use anyhow::{Context, Result};
use pagelab_core::{Bytes, PageSize};
use pagelab_lab::native::{KernelSpec, Scale};
use pagelab_lab::probe::blocks::{chase_spec, stride_spec, BlocksProbe, PooledRun};
use pagelab_machine::blocks::{fit, BlockPoint, BlocksFit};
use std::collections::BTreeMap;

/// What the block probe found: the fit (`None`: nothing to model, or not measured) and the
/// lines that say how.
pub struct HostBlocks {
    /// The fit, when the machine showed block translations to fit.
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
    progress.finish();
    let probe = match probe {
        Ok(p) => p,
        Err(e) => return Ok(HostBlocks::skipped(&format!("{e:#}"))),
    };
    let (stride, chase) = points(path, &probe, ghz)?;
    let found = fit(&stride, chase, pagelab_cache::MAX_WALK_CYCLES).map_err(anyhow::Error::msg)?;
    Ok(HostBlocks {
        fit: found,
        lines: lines(&probe, &stride, &chase, found.as_ref()),
    })
}

/// The probe's runs as cycles per unit of work, measured and in the model of the file at
/// `path` with each kernel's 4K frames at random over the blocks its pool came back in.
fn points(path: &str, probe: &BlocksProbe, ghz: f64) -> Result<(Vec<BlockPoint>, [BlockPoint; 2])> {
    let runs: Vec<(String, &PooledRun)> = probe
        .stride
        .iter()
        .map(|r| (stride_spec(r.pool), r))
        .chain(probe.chase.iter().map(|r| (chase_spec(r.pool), r)))
        .collect();
    let mut specs = Vec::new();
    let mut frames = BTreeMap::new();
    for (text, r) in &runs {
        let k = KernelSpec::parse(text, Scale::Full)?;
        frames.insert(
            k.to_string(),
            KernelFrames {
                neighbours: 0.0,
                span: r.pool_blocks.max(1) * (2 << 20),
            },
        );
        specs.push(k);
    }
    let (predicted, _) = predict(
        &specs,
        &[vec![PageSize::K4]],
        path,
        Some(DEFAULT_VIRT),
        &frames,
    )
    .context("the model of the block probe's kernels")?;
    let mut out: Vec<BlockPoint> = runs
        .iter()
        .zip(&predicted)
        .map(|((_, r), p)| BlockPoint {
            blocks: r.pool_blocks,
            measured: r.ns * ghz,
            model: p.cycles_per_op.first().map_or(0.0, |c| c.1),
        })
        .collect();
    let many = out.pop().context("the chase's runs")?;
    let few = out.pop().context("the chase's runs")?;
    Ok((out, [few, many]))
}

fn lines(
    probe: &BlocksProbe,
    stride: &[BlockPoint],
    chase: &[BlockPoint; 2],
    found: Option<&BlocksFit>,
) -> Vec<String> {
    let row = |what: &str, r: &PooledRun, p: &BlockPoint| {
        format!(
            "host blocks: {what} pool {} ({} blocks): measured {:.1} cycles, model {:.1}",
            Bytes(r.pool),
            p.blocks,
            p.measured,
            p.model
        )
    };
    let mut out: Vec<String> = probe
        .stride
        .iter()
        .zip(stride)
        .map(|(r, p)| row("16M stride, every page, 4K,", r, p))
        .chain(
            probe
                .chase
                .iter()
                .zip(chase)
                .map(|(r, p)| row("chase of 8192 4K pages,", r, p)),
        )
        .collect();
    out.push(match found {
        Some(f) => format!(
            "host blocks: an LRU set of {} 2M blocks fits the stride best ({:.1} cycles a miss, \
             {:.2} an access off); the chase's misses wait {} cycles: block_entries = {}, \
             block_miss = {}, block_interval = {}",
            f.entries, f.stride_per_miss, f.rms, f.miss, f.entries, f.miss, f.interval
        ),
        None => "host blocks: many blocks cost no more than the model makes of them: none modelled"
            .to_string(),
    });
    out
}
