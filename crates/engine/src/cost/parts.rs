//! A [`CostStudy`] of many page sizes split into parts, one per thread, stepped in
//! parallel over the same batches.
//!
//! Every run of a cost study is independent of the others: what they share (the filter of
//! repeated instruction pages and data lines, the first cache level where its sets lie
//! within the smallest page) gives each run the same answers whichever runs it is shared
//! with. So the runs can be dealt out to several studies, each reading every reference,
//! and their results put back in the order of the sizes: identical to one study's, in
//! less time where there are cores to spare. Each part repeats the filter and the shared
//! level, the work that does not grow with the runs.

use super::{with_speedups, CostConfig, CostStudy};
use pagelab_core::{Event, PageSize};
use pagelab_report::CostStats;

/// The runs of `sizes`, dealt out to parts: run `i` goes to part `i % parts`, so that
/// each part gets small and large pages alike (a small page's run walks more).
pub struct CostParts {
    parts: Vec<CostStudy>,
    sizes: Vec<PageSize>,
}

impl CostParts {
    /// Runs of `sizes` on `cfg`'s machine, in at most `parts` parts (at least one, at most
    /// one per size).
    pub fn new(sizes: &[PageSize], cfg: &CostConfig, parts: usize) -> Result<CostParts, String> {
        let n = parts.clamp(1, sizes.len().max(1));
        let parts = (0..n)
            .map(|p| {
                let own: Vec<PageSize> = sizes.iter().copied().skip(p).step_by(n).collect();
                CostStudy::new(&own, cfg)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CostParts {
            parts,
            sizes: sizes.to_vec(),
        })
    }

    /// How many parts there are.
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// Whether there are none (never: a study has at least one part).
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// [`CostStudy::set_independent`] for every part.
    pub fn set_independent(&mut self, independent: bool) {
        for p in &mut self.parts {
            p.set_independent(independent);
        }
    }

    /// Steps every part over a batch, one after the other on this thread.
    pub fn feed(&mut self, events: &[Event]) {
        for p in &mut self.parts {
            p.feed(events);
        }
    }

    /// Steps every part over a batch, in parallel on the current rayon pool.
    pub fn par_feed(&mut self, events: &[Event]) {
        use rayon::prelude::*;
        self.parts.par_iter_mut().for_each(|p| p.feed(events));
    }

    /// Every run's time in the order of the sizes, with its speed-up over the 4K run,
    /// as one [`CostStudy`] of them all gives it.
    pub fn finish(&self) -> Vec<CostStats> {
        let n = self.parts.len();
        let mut done: Vec<std::vec::IntoIter<CostStats>> =
            self.parts.iter().map(|p| p.finish().into_iter()).collect();
        let mut out: Vec<CostStats> = (0..self.sizes.len())
            .filter_map(|i| done[i % n].next())
            .collect();
        with_speedups(&self.sizes, &mut out);
        out
    }
}
