//! Stepping every run of a [`CostStudy`] over the references: repeats of the last
//! instruction page or data line counted once for all runs, a data line read once in
//! the shared first cache level, then each run's own levels.

use super::{CostStudy, Run, MIN_PAGE_SHIFT};
use pagelab_cache::{SharedFirst, SharedLine};
use pagelab_core::{AccessKind, Event};

impl CostStudy {
    /// Steps every run over a batch of events (references; others are ignored,
    /// as the fixed-size study ignores them).
    pub fn feed(&mut self, events: &[Event]) {
        // A study of no size (a part dealt none: `CostParts`) has nothing to count.
        if self.runs.is_empty() {
            return;
        }
        let hit = self.hit;
        let ls = self.line_shift;
        for e in events {
            let Event::Ref(r) = e else { continue };
            // The cost model works on an address's bits (cache lines,
            // physical addresses built from them): the number, taken once.
            let (addr, last) = (r.addr.0, r.last_byte().0);
            if r.kind == AccessKind::Instr {
                self.instrs += 1;
                if self.independent {
                    for run in &mut self.runs {
                        run.issue(self.cpi_ticks);
                    }
                }
                let page = addr >> MIN_PAGE_SHIFT;
                let one_page = last >> MIN_PAGE_SHIFT == page;
                if page == self.last_instr_page && one_page {
                    self.instr_repeats += 1;
                    continue;
                }
                self.last_instr_page = if one_page { page } else { u64::MAX };
                if !one_page && self.counting {
                    for run in &mut self.runs {
                        run.count_extra(0, addr, last);
                    }
                }
                let mut walked = false;
                for run in &mut self.runs {
                    walked |= run.instr(addr, last, &hit);
                }
                // A walk's lines may have pushed the last data line out.
                if walked {
                    self.last_line = u64::MAX;
                }
            } else {
                self.data_refs += 1;
                let load = r.kind == AccessKind::Load;
                self.loads += u64::from(load);
                let line = addr >> ls;
                if line == self.last_line && last >> ls == line {
                    self.data_repeats += 1;
                    self.load_repeats += u64::from(load);
                    if self.independent {
                        for run in &mut self.runs {
                            run.overlap_line(
                                (hit[0] as u64, 0, 0, 0),
                                self.l1_latency as u64,
                                load,
                            );
                        }
                    }
                    continue;
                }
                // The line is read last, after any walk: the most recent of its set.
                self.last_line = if last >> ls == line { line } else { u64::MAX };
                // A line in the L1 entry of the last data line repeats that entry in every
                // run (no walk); if the shared first level holds it and no run holds its
                // set itself, every run's answer is the same hit.
                let mut first = None;
                if let (Some(memo), Some(shared)) = (self.page_memo, &self.shared) {
                    if !self.independent
                        && addr >> memo == self.last_data_page
                        && last >> ls == line
                    {
                        let read = shared.access(addr);
                        if read.hit_everywhere() {
                            self.data_repeats += 1;
                            self.load_repeats += u64::from(load);
                            continue;
                        }
                        first = Some(read);
                    }
                    self.last_data_page = last >> memo;
                }
                if (addr ^ last) >> MIN_PAGE_SHIFT != 0 && self.counting {
                    for run in &mut self.runs {
                        run.count_extra(1, addr, last);
                    }
                }
                match &self.shared {
                    Some(shared) => {
                        Self::shared_data(&mut self.runs, shared, addr, last, first, ls, &hit, load)
                    }
                    None => {
                        for run in &mut self.runs {
                            run.data(addr, last, ls, &hit, load);
                        }
                    }
                }
            }
        }
    }

    /// A data reference from `addr` to `last` in every run, line by line,
    /// with a shared first level: each line translated in every run (walks
    /// read the caches first), then read once in the shared level, then in
    /// each run's levels as far as it goes. `first` is the first line's read of the
    /// shared level, where the caller read it already (a line of the last data line's
    /// L1 entry: its translation walks in no run, so reading it first is the same).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn shared_data(
        runs: &mut [Run],
        shared: &SharedFirst,
        addr: u64,
        last: u64,
        mut first: Option<SharedLine>,
        line_shift: u32,
        hit: &[u32; 3],
        load: bool,
    ) {
        let mut a = addr;
        loop {
            for run in runs.iter_mut() {
                run.translate_line(a, hit, load);
            }
            let line = first.take().unwrap_or_else(|| shared.access(a));
            for run in runs.iter_mut() {
                run.shared_line(line, load);
            }
            let next = ((a >> line_shift) + 1) << line_shift;
            if next == 0 || next > last {
                break;
            }
            a = next;
        }
    }
}
