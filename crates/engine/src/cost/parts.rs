//! A [`CostStudy`] of many page sizes split into parts, one per thread, each stepped over
//! the same batches (`crate::run_cost_study` steps them in parallel).
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
use pagelab_report::{CostStats, RunStats};

/// The runs of `sizes`, dealt out to parts.
pub struct CostParts {
    parts: Vec<CostStudy>,
    /// The part of each size's run, in the order of the sizes.
    owner: Vec<usize>,
    sizes: Vec<PageSize>,
}

impl CostParts {
    /// Runs of `sizes` on `cfg`'s machine, in at most `parts` parts (at least one, at most
    /// one per size). The first part's thread also does other work, worth about
    /// `first_busy` runs: each size in turn goes to the part with the least work so far
    /// (the first counted from `first_busy`; a tie to the first of them), so that small
    /// and large pages (a small page's run walks more) spread over the parts.
    pub fn new(
        sizes: &[PageSize],
        cfg: &CostConfig,
        parts: usize,
        first_busy: usize,
    ) -> Result<CostParts, String> {
        let n = parts.clamp(1, sizes.len().max(1));
        let mut load = vec![0; n];
        load[0] = first_busy;
        let owner: Vec<usize> = sizes
            .iter()
            .map(|_| {
                let p = (0..n).min_by_key(|&p| load[p]).unwrap_or(0);
                load[p] += 1;
                p
            })
            .collect();
        let parts = (0..n)
            .map(|p| {
                let own: Vec<PageSize> = sizes
                    .iter()
                    .zip(&owner)
                    .filter(|&(_, &o)| o == p)
                    .map(|(&s, _)| s)
                    .collect();
                CostStudy::new(&own, cfg)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CostParts {
            parts,
            owner,
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

    /// [`CostStudy::count_pages`] for every part: whether the runs count the study's figures.
    pub fn count_pages(&mut self) -> bool {
        // Every part or none: their runs are alike but for their sizes.
        self.parts.iter().all(CostStudy::can_count_pages)
            && self.parts.iter_mut().all(CostStudy::count_pages)
    }

    /// [`CostStudy::study_runs`] of every run in the order of the sizes, and the references
    /// per side.
    pub fn study_runs(&self) -> Option<([u64; 2], Vec<RunStats>)> {
        let mut done = Vec::with_capacity(self.parts.len());
        for p in &self.parts {
            done.push(p.study_runs()?);
        }
        // The part of the first size has runs, so it has counted the references.
        let refs = done[*self.owner.first()?].0;
        let mut runs: Vec<std::vec::IntoIter<RunStats>> =
            done.into_iter().map(|(_, r)| r.into_iter()).collect();
        Some((
            refs,
            self.owner.iter().filter_map(|&p| runs[p].next()).collect(),
        ))
    }

    /// The parts, to step apart (each over every batch, in order).
    pub fn parts_mut(&mut self) -> &mut [CostStudy] {
        &mut self.parts
    }

    /// Every run's time in the order of the sizes, with its speed-up over the 4K run,
    /// as one [`CostStudy`] of them all gives it.
    pub fn finish(&self) -> Vec<CostStats> {
        let mut done: Vec<std::vec::IntoIter<CostStats>> =
            self.parts.iter().map(|p| p.finish().into_iter()).collect();
        let mut out: Vec<CostStats> = self.owner.iter().filter_map(|&p| done[p].next()).collect();
        with_speedups(&self.sizes, &mut out);
        out
    }
}
