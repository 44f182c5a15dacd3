//! Runs of references to consecutive pages, carried out together: the same
//! result as one reference at a time (tested), without the per-reference
//! bookkeeping of the general path.

use super::model::{Sharing, CHUNK};
use super::process::{Process, NO_OBJECT};
use super::SharingError;
use pagelab_core::Event;

impl Sharing {
    /// Carries out `evs` in order: the same as [`Sharing::event`] on each,
    /// with references to consecutive pages by one process taken as a run.
    ///
    /// # Errors
    /// As [`Sharing::event`]; the events before the one refused have been
    /// carried out.
    pub fn events(&mut self, evs: &[Event]) -> Result<(), SharingError> {
        let base = self.cfg.geometry.base();
        let mut i = 0;
        while i < evs.len() {
            if let (Event::Ref(r), true) = (&evs[i], self.cur.is_some()) {
                let page = r.addr.vpn(base).0;
                let w = r.kind.is_write();
                if r.last_byte().vpn(base).0 == page {
                    let mut j = i + 1;
                    while let Some(Event::Ref(q)) = evs.get(j) {
                        let next = page + (j - i) as u64;
                        if q.addr.vpn(base).0 != next
                            || q.last_byte().vpn(base).0 != next
                            || q.kind.is_write() != w
                        {
                            break;
                        }
                        j += 1;
                    }
                    if j - i > 1 {
                        let n = (j - i) as u64;
                        self.n.events += n;
                        self.n.refs += n;
                        self.run(page, n, w);
                        if self.names_out {
                            return Err(self.names_error());
                        }
                        i = j;
                        continue;
                    }
                }
            }
            self.event(&evs[i])?;
            i += 1;
        }
        Ok(())
    }

    /// References to pages `[vpn, vpn + n)` by the current process.
    fn run(&mut self, vpn: u64, n: u64, write: bool) {
        let Some(mut p) = self.cur.take() else { return };
        let (mut at, end) = (vpn, vpn + n);
        while at < end {
            match p.find(at) {
                None => {
                    self.n.refs_outside_vmas += 1;
                    at += 1;
                }
                Some(vi) => {
                    let stop = end.min(p.vmas[vi].end);
                    self.touch_pages(&mut p, vi, at, stop, write);
                    at = stop;
                }
            }
        }
        self.cur = Some(p);
    }

    fn each(&mut self, p: &mut Process, vi: usize, a: u64, b: u64, write: bool) {
        for vpn in a..b {
            self.touch(p, vi, vpn, write);
        }
    }

    /// Pages `[a, b)` of VMA `vi`.
    fn touch_pages(&mut self, p: &mut Process, vi: usize, a: u64, b: u64, write: bool) {
        let g = self.cfg.geometry;
        if let Some(level) = self.shared_level(p, vi) {
            // Through shared tables: a span at a time; after its first page,
            // the rest of a span whose leaves are all present are hits.
            let lsh = g.entry_shift(level) - g.base().shift();
            let ssh = g.table_shift(level) - g.base().shift();
            let mut at = a;
            while at < b {
                let stop = b.min(((at >> ssh) + 1) << ssh);
                if !self.touch_shared(p, vi, at, level) {
                    self.each(p, vi, at, stop, write);
                } else if stop > at + 1 {
                    let t = p.attached.get(at >> ssh).unwrap_or(0);
                    let mask = g.entries(level) - 1;
                    let (s0, s1) = (((at + 1) >> lsh) & mask, ((stop - 1) >> lsh) & mask);
                    if self.tables[t as usize].pop.covers(s0, s1 + 1) {
                        self.n.hits += stop - at - 1;
                    } else {
                        for vpn in at + 1..stop {
                            self.touch_shared(p, vi, vpn, level);
                        }
                    }
                }
                at = stop;
            }
            return;
        }
        let bs = self.tb.block_shift();
        let forked = self.cfg.page_tables == super::PageTables::Shared
            && (!p.labels.is_empty() || p.attached.any_within(a >> bs, ((b - 1) >> bs) + 1));
        if forked {
            // PTE pages shared at fork, or named apart: a page at a time.
            return self.each(p, vi, a, b, write);
        }
        let v = &p.vmas[vi];
        if v.leaf > 1 && !v.thp {
            // Hugetlb: the first page of each huge page decides, the rest hit.
            let lsh = g.entry_shift(v.leaf) - g.base().shift();
            let leaf = v.leaf;
            let mut at = a;
            while at < b {
                let stop = b.min(((at >> lsh) + 1) << lsh);
                self.touch_huge(p, vi, at, leaf);
                self.n.hits += stop - at - 1;
                at = stop;
            }
            return;
        }
        if v.leaf > 1 || v.obj == NO_OBJECT || (write && !v.shared) {
            return self.each(p, vi, a, b, write);
        }
        if p.pop[0].covers(a, b) {
            self.n.hits += b - a;
            return;
        }
        if p.pop[0].any_in(a, b) {
            return self.each(p, vi, a, b, write);
        }
        self.fault_range(p, vi, a, b);
    }

    /// Every page of `[a, b)` of file VMA `vi` faults (none is present).
    fn fault_range(&mut self, p: &mut Process, vi: usize, a: u64, b: u64) {
        let v = &p.vmas[vi];
        let (obj, idx0) = (v.obj, v.index(a));
        let m = self.mapper(p.label, a as i64 - idx0 as i64);
        let sh = self.tb.block_shift();
        let (first, last) = (a >> sh, (b - 1) >> sh);
        let free = |p: &Process, blk: u64| !p.pop[0].any_in(blk << sh, (blk + 1) << sh);
        let (f0, f1) = (free(p, first), free(p, last));
        p.pop[0].insert_range(a, b);
        for blk in first..=last {
            let inner = blk != first && blk != last;
            let edge_free = (blk == first && f0) || (blk == last && f1);
            if inner || edge_free {
                self.tb.own(p, &mut self.pt, 1, true);
                self.tb.entry_added(p, &mut self.pt, 2, blk);
            }
        }
        self.n.faults += b - a;
        self.add_run(obj, idx0, b - a, m);
    }

    /// `mapper`'s PTEs now map pages `[idx, idx + n)` of `obj`: as
    /// [`Sharing::add_mapping`] on each, a chunk of slots at a time.
    fn add_run(&mut self, obj: u32, idx: u64, n: u64, mapper: u32) {
        let kind = self.objects[obj as usize].kind;
        let (mut at, end) = (idx, idx + n);
        let (mut lo, mut ln) = (u32::MAX, u32::MAX);
        while at < end {
            let stop = end.min((at / CHUNK + 1) * CHUNK);
            let slots = self.objects[obj as usize].slots(at, stop);
            for s in slots.iter_mut() {
                let old = *s;
                if old != lo {
                    lo = old;
                    ln = self.chains.cons(mapper, old);
                }
                *s = ln;
                if self.rc.0 == old && self.rc.1 == ln {
                    self.rc.2 += 1;
                } else {
                    let (o, nw, k) = self.rc;
                    if k > 0 {
                        self.chains.retain_n(nw, k as u32);
                        self.chains.release_n(o, k as u32);
                    }
                    self.rc = (old, ln, 1);
                }
                let len = self.chains.len(old);
                let pd = &mut self.pending;
                if pd.n > 0 && (pd.len != len || pd.kind != kind) {
                    self.rmap.add(pd.kind, pd.len as u64, pd.n);
                    pd.n = 0;
                }
                pd.kind = kind;
                pd.len = len;
                pd.n += 1;
            }
            at = stop;
        }
    }
}
