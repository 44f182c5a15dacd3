//! The sharing model's references and the faults they take: base pages, huge leaves,
//! copies on write into the VMA's own anonymous object.

use super::Sharing;
use crate::sharing::ivset::IntervalSet;
use crate::sharing::process::{Process, NO_OBJECT};
use crate::sharing::rmap::PageKind;
use crate::sharing::PageTables;
use pagelab_core::MemRef;

impl Sharing {
    /// One reference by the current process.
    #[inline]
    pub(super) fn reference(&mut self, r: &MemRef) {
        self.n.refs += 1;
        let Some(mut p) = self.cur.take() else {
            // References before any Switch belong to process 0.
            self.switch(self.pid);
            return self.reference_again(r);
        };
        let base = self.cfg.geometry.base();
        // A reference that crosses a page boundary touches every page it covers.
        for vpn in r.addr.vpn(base).0..=r.last_byte().vpn(base).0 {
            match p.find(vpn) {
                Some(vi) => self.touch(&mut p, vi, vpn, r.kind.is_write()),
                None => self.n.refs_outside_vmas += 1,
            }
        }
        self.cur = Some(p);
    }

    fn reference_again(&mut self, r: &MemRef) {
        self.n.refs -= 1;
        self.reference(r)
    }

    /// Whether page `vpn` of VMA `vi` goes through a shared table, and at
    /// which level.
    #[inline]
    pub(crate) fn shared_level(&self, p: &Process, vi: usize) -> Option<u8> {
        let v = &p.vmas[vi];
        if !v.shared {
            return None;
        }
        match self.cfg.page_tables {
            PageTables::Shared if v.leaf == 1 => Some(1),
            PageTables::HugetlbPmdShare if v.hugetlb && v.leaf == 2 => Some(2),
            _ => None,
        }
    }

    /// A reference to `vpn`, inside VMA `vi` of process `p`.
    #[inline]
    pub(crate) fn touch(&mut self, p: &mut Process, vi: usize, vpn: u64, write: bool) {
        if let Some(level) = self.shared_level(p, vi) {
            if self.touch_shared(p, vi, vpn, level) {
                return;
            }
        }
        if !p.attached.is_empty() && self.through_fork_share(p, vi, vpn, write) {
            return;
        }
        let leaf = self.leaf_for(p, vi, vpn);
        if leaf > 1 {
            return self.touch_huge(p, vi, vpn, leaf);
        }
        if p.pop[0].contains(vpn) {
            self.n.hits += 1;
            if write && !p.vmas[vi].shared {
                self.cow(p, vi, vpn);
            }
            return;
        }
        self.n.faults += 1;
        let v = &p.vmas[vi];
        let (obj, idx) = if v.obj == NO_OBJECT || (write && !v.shared) {
            (self.own_anon(p, vi, vpn), vpn)
        } else {
            (v.obj, v.index(vpn))
        };
        let m = self.mapper(self.owner_at(p, vpn), vpn as i64 - idx as i64);
        self.add_mapping(obj, idx, m);
        self.tb.base_leaf_added(p, &mut self.pt, vpn);
    }

    /// The level of the leaf that maps `vpn` in VMA `vi`.
    #[inline]
    fn leaf_for(&self, p: &Process, vi: usize, vpn: u64) -> u8 {
        let v = &p.vmas[vi];
        if v.leaf == 1 || !v.thp {
            return v.leaf;
        }
        // THP: a huge leaf where the whole aligned page lies in the VMA and
        // its object pages are aligned alike.
        let n = 1u64 << (self.cfg.geometry.entry_shift(v.leaf) - self.cfg.geometry.base().shift());
        let s = vpn & !(n - 1);
        if s >= v.start && s + n <= v.end && v.index(s).is_multiple_of(n) {
            v.leaf
        } else {
            1
        }
    }

    pub(crate) fn touch_huge(&mut self, p: &mut Process, vi: usize, vpn: u64, leaf: u8) {
        let g = self.cfg.geometry;
        let sh = g.entry_shift(leaf) - g.base().shift();
        let li = vpn >> sh;
        if p.pop[leaf as usize - 1].contains(li) {
            self.n.hits += 1;
            return;
        }
        self.n.faults += 1;
        let v = &p.vmas[vi];
        let (obj, idx) = (v.obj, v.index(li << sh));
        let m = self.mapper(self.owner_at(p, li << sh), (li << sh) as i64 - idx as i64);
        self.add_mapping(obj, idx, m);
        p.pop[leaf as usize - 1].insert(li);
        self.tb.entry_added(p, &mut self.pt, leaf, li);
    }

    /// The VMA's own anonymous object (made, and linked, on first use), with
    /// `vpn` recorded as mapping one of its pages.
    fn own_anon(&mut self, p: &mut Process, vi: usize, vpn: u64) -> u32 {
        let o = match p.vmas[vi].anon {
            Some(o) => o,
            None => {
                let o = self.new_object(PageKind::Anon);
                let v = &mut p.vmas[vi];
                if !v.anon_charged {
                    v.anon_charged = true;
                    v.links.push(o);
                    self.objects[o as usize].links += 1;
                    self.rmap.linux_structs(1, 1);
                }
                v.anon = Some(o);
                v.layers.push((o, IntervalSet::new()));
                o
            }
        };
        let v = &mut p.vmas[vi];
        for (lo, set) in &mut v.layers {
            if *lo == o {
                set.insert(vpn);
            } else {
                set.remove_range(vpn, vpn + 1);
            }
        }
        o
    }

    /// A write to a present page of a private VMA: copy it unless this PTE is
    /// the only one mapping an anonymous page.
    fn cow(&mut self, p: &mut Process, vi: usize, vpn: u64) {
        let own = self.owner_at(p, vpn);
        let m = self.mapper(own, 0);
        let from = match p.vmas[vi].anon_of(vpn) {
            Some(o) => {
                let len = self.chains.len(*self.objects[o as usize].slot(vpn));
                if len <= 1 {
                    return;
                }
                (o, vpn, m)
            }
            None => {
                let v = &p.vmas[vi];
                let idx = v.index(vpn);
                (v.obj, idx, self.mapper(own, vpn as i64 - idx as i64))
            }
        };
        self.n.cow_copies += 1;
        self.remove_mapping(from.0, from.1, from.2);
        let o = self.own_anon(p, vi, vpn);
        self.add_mapping(o, vpn, m);
    }
}
