//! Events other than references: map, unmap, protect, advise, brk, fork, exit.

use super::model::Sharing;
use super::process::{Process, Vma, NO_OBJECT};
use super::rmap::PageKind;
use super::{PageTables, SharingError};
use pagelab_core::{Advice, Backing, Bytes, Event, MapEvent, VirtAddr, Vpn};

impl Sharing {
    /// Carries out a non-reference event for the current process.
    pub(crate) fn op(&mut self, ev: &Event) -> Result<(), SharingError> {
        match ev {
            Event::Map(m) => self.map(m),
            Event::Unmap { start, len } => {
                let (a, b) = self.range(*start, *len)?;
                let mut p = self.take();
                self.unmap_range(&mut p, a, b);
                self.put(p);
                Ok(())
            }
            Event::Protect { start, len, prot } => {
                let (a, b) = self.range(*start, *len)?;
                let mut p = self.take();
                self.unshare_range(&mut p, a, b, false);
                self.split(&mut p, a);
                self.split(&mut p, b);
                for v in p.vmas.iter_mut().filter(|v| v.start >= a && v.end <= b) {
                    v.prot = prot.0;
                }
                self.put(p);
                Ok(())
            }
            Event::Advise { start, len, advice } => self.advise(*start, *len, *advice),
            Event::Brk { end } => self.brk(*end),
            Event::Fork { child, .. } => {
                if *child == self.pid || self.procs.contains_key(child) {
                    self.n.events_on_nothing += 1;
                    return Ok(());
                }
                self.fork(*child);
                Ok(())
            }
            Event::Exit { .. } | Event::Exec(_) => {
                if !self.procs.contains_key(&self.pid) {
                    self.n.events_on_nothing += 1;
                    return Ok(());
                }
                let mut p = self.take();
                let top = self.cfg.user_top >> self.base_shift();
                self.unmap_range(&mut p, 0, top);
                self.tb.process_died(&mut p, &mut self.pt);
                Ok(())
            }
            Event::Ref(_) | Event::Switch(_) | Event::MapRequest(_) => Ok(()),
        }
    }

    fn base_shift(&self) -> u32 {
        self.cfg.geometry.base().shift()
    }

    /// The current process, out of the table.
    fn take(&mut self) -> Box<Process> {
        match self.procs.remove(&self.pid) {
            Some(p) => p,
            None => self.born(),
        }
    }

    fn put(&mut self, p: Box<Process>) {
        self.procs.insert(self.pid, p);
    }

    fn bad(&self, why: String) -> SharingError {
        SharingError::Event {
            index: self.n.events - 1,
            why,
        }
    }

    /// `[start, start + len)` as base pages (widened to whole pages), inside user space.
    fn range(&self, start: VirtAddr, len: u64) -> Result<(u64, u64), SharingError> {
        let base = self.cfg.geometry.base();
        match start.checked_add(len) {
            Some(end) if end <= VirtAddr(self.cfg.user_top) => {
                Ok((start.vpn(base).0, end.vpn_ceil(base).0))
            }
            _ => Err(self.bad(format!(
                "range {start:#x}+{len:#x} goes past user space, which ends at {:#x}",
                self.cfg.user_top
            ))),
        }
    }

    fn map(&mut self, m: &MapEvent) -> Result<(), SharingError> {
        let (a, b) = self.range(m.start, m.len)?;
        let sh = self.base_shift();
        if a == b {
            self.n.events_on_nothing += 1;
            return Ok(());
        }
        let shared = m.sharing == pagelab_core::Sharing::Shared;
        let (obj, pgoff) = match m.backing {
            Backing::File { file_id, offset } => {
                if offset % (1 << sh) != 0 {
                    return Err(self.bad(format!(
                        "file offset {offset:#x} is not a multiple of the page size"
                    )));
                }
                let o = match self.files.get(&file_id) {
                    Some(&o) => o,
                    None => {
                        let o = self.new_object(PageKind::File);
                        self.files.insert(file_id, o);
                        o
                    }
                };
                (o, offset >> sh)
            }
            // Shared anonymous memory is shmem: a file of its own.
            Backing::Anon if shared => (self.new_object(PageKind::File), 0),
            Backing::Anon => (NO_OBJECT, 0),
        };
        let mut p = self.take();
        self.unmap_range(&mut p, a, b);
        let v = Vma {
            start: a,
            end: b,
            prot: m.prot.0,
            shared,
            obj,
            pgoff,
            leaf: 1,
            thp: false,
            hugetlb: false,
            anon: None,
            layers: Vec::new(),
            links: Vec::new(),
            anon_charged: false,
        };
        let i = p.vmas.partition_point(|x| x.start < a);
        p.vmas.insert(i, v);
        p.last_vma = i;
        self.put(p);
        Ok(())
    }

    fn brk(&mut self, end: VirtAddr) -> Result<(), SharingError> {
        let base = self.cfg.geometry.base();
        let (_, top) = self.range(end, 0)?;
        let mut p = self.take();
        let Some((start, cur)) = p.brk else {
            p.brk = Some((top, top));
            self.put(p);
            return Ok(());
        };
        let top = top.max(start);
        p.brk = Some((start, top));
        self.put(p);
        if top > cur {
            let m = MapEvent {
                start: Vpn(cur).start(base),
                len: (top - cur) * base.bytes(),
                prot: pagelab_core::Prot(pagelab_core::Prot::READ | pagelab_core::Prot::WRITE),
                backing: Backing::Anon,
                sharing: pagelab_core::Sharing::Private,
            };
            self.map(&m)?;
        } else if top < cur {
            let mut p = self.take();
            self.unmap_range(&mut p, top, cur);
            self.put(p);
        }
        Ok(())
    }

    fn advise(&mut self, start: VirtAddr, len: u64, advice: Advice) -> Result<(), SharingError> {
        let (a, b) = self.range(start, len)?;
        match advice {
            Advice::DontNeed => {
                let mut p = self.take();
                self.unshare_range(&mut p, a, b, true);
                let mut i = 0;
                while i < p.vmas.len() {
                    let (s, e) = (p.vmas[i].start.max(a), p.vmas[i].end.min(b));
                    if s < e {
                        let mut v = p.vmas.remove(i);
                        self.drop_leaves(&mut p, &mut v, s, e);
                        p.vmas.insert(i, v);
                    }
                    i += 1;
                }
                p.last_vma = 0;
                self.put(p);
                Ok(())
            }
            Advice::PageOrder { shift, wait } => self.page_order(a, b, shift, wait),
            _ => Ok(()),
        }
    }

    /// Maps the shared file VMAs inside `[a, b)` with leaves of `1 << shift`
    /// bytes: from the hugetlb pool (`wait`) or as THP where they fit.
    fn page_order(&mut self, a: u64, b: u64, shift: u8, wait: bool) -> Result<(), SharingError> {
        let g = self.cfg.geometry;
        let Some(level) =
            (2..=g.levels()).find(|&l| g.is_leaf_level(l) && g.entry_shift(l) == shift as u32)
        else {
            return Err(self.bad(format!(
                "page size 2^{shift} is not a huge leaf of this page table (use one of {})",
                super::huge_sizes(&g)
            )));
        };
        let n = 1u64 << (shift as u32 - self.base_shift());
        let mut p = self.take();
        let mut result = Ok(());
        for i in 0..p.vmas.len() {
            let v = &p.vmas[i];
            if v.start < a || v.end > b || !v.shared || v.obj == NO_OBJECT {
                continue;
            }
            let touched = (1..=g.levels()).any(|l| {
                let sh = g.entry_shift(l) - g.base().shift();
                p.pop[l as usize - 1].any_in(v.start >> sh, v.end.div_ceil(1 << sh))
            });
            if touched || !p.attached.is_empty() {
                self.n.events_on_nothing += 1;
                continue;
            }
            if wait {
                if let Err(e) = self.reserve(v, level, n) {
                    result = Err(e);
                    break;
                }
            }
            let v = &mut p.vmas[i];
            v.leaf = level;
            v.hugetlb = wait;
            v.thp = !wait;
        }
        self.put(p);
        result
    }

    /// Reserves hugetlb pages of `n` base pages for VMA `v`'s object range.
    fn reserve(&mut self, v: &Vma, level: u8, n: u64) -> Result<(), SharingError> {
        let size = Bytes(n << self.base_shift());
        if !v.start.is_multiple_of(n) || !v.end.is_multiple_of(n) || !v.pgoff.is_multiple_of(n) {
            return Err(self.bad(format!(
                "a hugetlb mapping of {size} pages must start, end and begin in its file on a {size} boundary"
            )));
        }
        let Some(pool) = self
            .cfg
            .hugetlb
            .iter()
            .position(|p| p.size.bytes() == size.0)
        else {
            return Err(self.bad(format!(
                "no hugetlb pool of {size} pages: reserve one at boot with --hugetlb {size}:COUNT"
            )));
        };
        let o = &self.objects[v.obj as usize];
        if o.hugetlb.is_some_and(|l| l != level) {
            return Err(self.bad("this segment is already hugetlb of another page size".into()));
        }
        let need = (v.pgoff + (v.end - v.start)) / n;
        let extra = need.saturating_sub(o.reserved);
        if extra > self.pool_free[pool] {
            return Err(self.bad(format!(
                "the hugetlb pool of {size} pages has {} free, the segment needs {extra} more (--hugetlb {size}:COUNT)",
                self.pool_free[pool]
            )));
        }
        self.pool_free[pool] -= extra;
        let o = &mut self.objects[v.obj as usize];
        o.reserved = o.reserved.max(need);
        o.hugetlb = Some(level);
        Ok(())
    }

    /// The level and span (in base pages, as a shift) of shared tables.
    pub(crate) fn share_span(&self) -> Option<(u8, u32)> {
        let level = match self.cfg.page_tables {
            PageTables::Private => return None,
            PageTables::Shared => 1,
            PageTables::HugetlbPmdShare => 2,
        };
        Some((
            level,
            self.cfg.geometry.table_shift(level) - self.base_shift(),
        ))
    }

    /// Splits the VMA holding `at` (if `at` is inside it) in two.
    fn split(&mut self, p: &mut Process, at: u64) {
        let Some(i) = p.vmas.iter().position(|v| v.start < at && at < v.end) else {
            return;
        };
        let mut right = p.vmas[i].clone();
        right.pgoff = right.index(at);
        right.start = at;
        for (_, set) in &mut right.layers {
            set.remove_range(0, at);
        }
        for &o in &right.links {
            self.objects[o as usize].links += 1;
            self.rmap.linux_structs(0, 1);
        }
        let left = &mut p.vmas[i];
        left.end = at;
        for (_, set) in &mut left.layers {
            set.remove_range(at, u64::MAX);
        }
        p.vmas.insert(i + 1, right);
        p.last_vma = 0;
    }

    /// Removes every mapping of `[a, b)`.
    pub(crate) fn unmap_range(&mut self, p: &mut Process, a: u64, b: u64) {
        self.unshare_range(p, a, b, true);
        self.split(p, a);
        self.split(p, b);
        let i = p.vmas.partition_point(|v| v.end <= a);
        let j = p.vmas.partition_point(|v| v.start < b);
        let gone: Vec<Vma> = p.vmas.drain(i..j.max(i)).collect();
        p.last_vma = 0;
        for mut v in gone {
            let (s, e) = (v.start, v.end);
            self.drop_leaves(p, &mut v, s, e);
            for &o in &v.links {
                let obj = &mut self.objects[o as usize];
                obj.links -= 1;
                self.rmap.linux_structs(0, -1);
                if obj.links == 0 {
                    self.rmap.linux_structs(-1, 0);
                }
            }
        }
    }

    /// Where the leaf at `vpn` of VMA `v` points: (object, page index, mapper).
    pub(crate) fn target(&mut self, owner: u32, v: &mut Vma, vpn: u64) -> (u32, u64, u32) {
        let (obj, idx) = match v.anon_of(vpn) {
            Some(o) => (o, vpn),
            None => (v.obj, v.index(vpn)),
        };
        (obj, idx, self.mapper(owner, vpn as i64 - idx as i64))
    }

    /// Removes `p`'s own leaves over `[a, b)` of VMA `v` (taken out of `p`).
    fn drop_leaves(&mut self, p: &mut Process, v: &mut Vma, a: u64, b: u64) {
        let g = self.cfg.geometry;
        for level in 1..=g.levels() {
            if !g.is_leaf_level(level) {
                continue;
            }
            let sh = g.entry_shift(level) - self.base_shift();
            let n = 1u64 << sh;
            let removed = p.pop[level as usize - 1].remove_range(a >> sh, b.div_ceil(n));
            for &(s, e) in &removed {
                for li in s..e {
                    let own = self.owner_at(p, li << sh);
                    let (obj, idx, m) = self.target(own, v, li << sh);
                    self.remove_mapping(obj, idx, m);
                    if level > 1 {
                        self.tb.entry_removed(p, &mut self.pt, level, li);
                    }
                }
            }
            if level == 1 && !removed.is_empty() {
                self.tb.base_leaves_removed(p, &mut self.pt, &removed);
            }
        }
        for (_, set) in &mut v.layers {
            set.remove_range(a, b);
        }
    }

    /// The current process forks `child`: 2.5's `copy_page_range` copies
    /// every present PTE (each a new reverse-map entry); shared tables are
    /// used by the child too, and with shared page tables the PTE pages
    /// wholly inside a private VMA are shared rather than copied
    /// ([`Sharing::share_at_fork`]).
    fn fork(&mut self, child: u32) {
        self.forks += 1;
        let mut parent = self.take();
        let mut c = self.born();
        c.label = self.label_for(child);
        self.share_at_fork(&mut parent);
        for v in &mut parent.vmas {
            let mut nv = v.clone();
            nv.anon = None;
            nv.anon_charged = false;
            for &o in &nv.links {
                self.objects[o as usize].links += 1;
                self.rmap.linux_structs(0, 1);
            }
            // The parent's copies after the fork go to a new object.
            v.anon = None;
            c.vmas.push(nv);
        }
        if let Some((level, _)) = self.share_span() {
            for (span, t) in parent.attached.all() {
                self.tables[t as usize].users += 1;
                c.attached.insert(span, t);
                self.tb.entry_added(&mut c, &mut self.pt, level + 1, span);
            }
        }
        let g = self.cfg.geometry;
        for level in 1..=g.levels() {
            let sh = g.entry_shift(level) - self.base_shift();
            for &(s, e) in parent.pop[level as usize - 1].runs() {
                for li in s..e {
                    let vpn = li << sh;
                    let Some(vi) = c.find(vpn) else { continue };
                    let (obj, idx, m) = self.target(c.label, &mut c.vmas[vi], vpn);
                    self.add_mapping(obj, idx, m);
                    if level == 1 {
                        self.tb.base_leaf_added(&mut c, &mut self.pt, vpn);
                    } else {
                        c.pop[level as usize - 1].insert(li);
                        self.tb.entry_added(&mut c, &mut self.pt, level, li);
                    }
                }
            }
        }
        c.brk = parent.brk;
        self.procs.insert(child, c);
        self.put(parent);
        self.flush();
    }
}
