//! Shared page tables: attaching to one (by key, as McCracken's
//! `pte_try_to_share` found them, or at fork), copying one for a process that
//! must change it, and detaching.
//!
//! At fork, with [`PageTables::Shared`], a PTE page of the parent that lies
//! wholly inside one private VMA is shared with the child instead of copied
//! (McCracken's copy-on-write page tables): one table, two users, no new
//! reverse-map entries (a PTE in a shared page is one PTE). A process that
//! then writes through it, faults an anonymous page into it, or protects or
//! unmaps part of its range gets its own copy first (a new PTE page, and a new
//! reverse-map entry for each of its PTEs); when one user is left, the table
//! becomes that process's own without a copy. A read goes through the
//! shared table, and a read fault on a file page fills the PTE in place
//! (see [`Sharing::through_fork_share`]).
//!
//! A PTE is named in reverse-map chains by its table and displacement. A
//! process's own PTEs carry its pid; a PTE page shared at fork keeps the name
//! its PTEs had, the parent's later own PTEs in that range take a fresh name,
//! and so does every copy, so two live PTE pages never share a name.

use super::ivset::IntervalSet;
use super::model::{SharedTable, Sharing, TABLE_OWNER};
use super::process::{Process, NO_OBJECT};
use super::PageTables;

impl Sharing {
    /// The name `p`'s own PTE for `vpn` carries in reverse-map chains.
    #[inline]
    pub(crate) fn owner_at(&self, p: &Process, vpn: u64) -> u32 {
        if p.labels.is_empty() {
            return p.label;
        }
        let span = vpn >> self.tb.block_shift();
        p.labels.get(&span).copied().unwrap_or(p.label)
    }

    /// A name never given before. When none is left it sets `names_out`
    /// and returns the last name again: the event that asked is refused
    /// ([`Sharing::event`] returns [`Sharing::names_error`]) and the model
    /// is not used after it, so the repeated name is never counted.
    pub(crate) fn fresh_label(&mut self) -> u32 {
        if self.next_label + 1 >= self.label_limit {
            self.names_out = true;
            return self.next_label;
        }
        self.next_label += 1;
        self.next_label
    }

    /// The name a new process of `pid` gives its own PTEs.
    pub(crate) fn label_for(&mut self, pid: u32) -> u32 {
        if self.label_pids.contains(&pid) {
            self.fresh_label()
        } else {
            pid
        }
    }

    /// A new table record (counted as a shared table of its level).
    fn new_table(&mut self, tab: SharedTable) -> u32 {
        self.tb.shared(&mut self.pt, tab.level, true);
        match self.free_tables.pop() {
            Some(t) => {
                self.tables[t as usize] = tab;
                t
            }
            None => {
                self.tables.push(tab);
                (self.tables.len() - 1) as u32
            }
        }
    }

    /// Through a shared table at `level`; false if this page cannot share
    /// (it goes through the process's own tables).
    #[inline]
    pub(crate) fn touch_shared(&mut self, p: &mut Process, vi: usize, vpn: u64, level: u8) -> bool {
        let g = self.cfg.geometry;
        let span_sh = g.table_shift(level) - g.base().shift();
        let leaf_sh = g.entry_shift(level) - g.base().shift();
        let span = vpn >> span_sh;
        let t = match p.attached.get(span) {
            Some(t) => t,
            None => {
                let v = &p.vmas[vi];
                let (s, e) = (span << span_sh, (span + 1) << span_sh);
                let own = &p.pop[level as usize - 1];
                if s < v.start || e > v.end || own.any_in(s >> leaf_sh, e >> leaf_sh) {
                    return false;
                }
                let key = (v.obj, v.index(s), v.prot);
                let t = self.table_for(key, level);
                self.tables[t as usize].users += 1;
                p.attached.insert(span, t);
                self.tb.entry_added(p, &mut self.pt, level + 1, span);
                t
            }
        };
        let slot = (vpn >> leaf_sh) & (g.entries(level) - 1);
        let tab = &mut self.tables[t as usize];
        if tab.pop.contains(slot) {
            self.n.hits += 1;
            return true;
        }
        self.n.faults += 1;
        tab.pop.insert(slot);
        let (obj, first) = (tab.key.0, tab.key.1);
        let idx = first + (slot << leaf_sh);
        let m = self.mapper(TABLE_OWNER | t, -(first as i64));
        self.add_mapping(obj, idx, m);
        true
    }

    /// The shared table for `key`, made if there is none.
    fn table_for(&mut self, key: (u32, u64, u8), level: u8) -> u32 {
        if let Some(&t) = self.keyed.get(&key) {
            return t;
        }
        let t = self.new_table(SharedTable {
            level,
            key,
            users: 0,
            pop: IntervalSet::new(),
            live: true,
            label: None,
        });
        self.keyed.insert(key, t);
        t
    }

    /// The parent's own PTE pages that lie wholly inside one private VMA
    /// become shared (with the parent as their one user so far; the fork
    /// attaches the child).
    pub(crate) fn share_at_fork(&mut self, parent: &mut Process) {
        if self.cfg.page_tables != PageTables::Shared {
            return;
        }
        let sh = self.tb.block_shift();
        let mut spans: Vec<u64> = Vec::new();
        for &(s, e) in parent.pop[0].runs() {
            for span in (s >> sh)..=((e - 1) >> sh) {
                if spans.last() != Some(&span) {
                    spans.push(span);
                }
            }
        }
        for span in spans {
            let (s, e) = (span << sh, (span + 1) << sh);
            let inside = parent
                .vmas
                .iter()
                .any(|v| v.start <= s && e <= v.end && !v.shared && v.leaf == 1);
            if !inside {
                continue;
            }
            let label = self.owner_at(parent, s);
            if label < super::model::LABELS {
                self.label_pids.insert(label);
            }
            let fresh = self.fresh_label();
            parent.labels.insert(span, fresh);
            let mut pop = IntervalSet::new();
            for (a, b) in parent.pop[0].remove_range(s, e) {
                pop.insert_range(a - s, b - s);
            }
            // The parent's table changes hands: its own count falls before
            // the shared one rises, so the peak does not move.
            self.tb.own(parent, &mut self.pt, 1, false);
            let t = self.new_table(SharedTable {
                level: 1,
                key: (NO_OBJECT, span, 0),
                users: 1,
                pop,
                live: true,
                label: Some(label),
            });
            parent.attached.insert(span, t);
            self.n.fork_shared_tables += 1;
        }
    }

    /// A reference to `vpn` of private VMA `vi` of `p`: true if it went
    /// through a PTE page shared at fork; a write first gives `p` the table
    /// as its own (false).
    ///
    /// A read goes through the shared table: a hit if the PTE is present,
    /// and otherwise a fault that fills the PTE in place, keeping the share,
    /// as McCracken's patch did. In his `shpte` patches (linux-mm, "Rough cut
    /// at shared page tables", 6 September 2002, and the later 2.5.41-mm
    /// versions) `handle_mm_fault` copies the PTE page only when
    /// `pte_needs_unshare` says so, and that returns 0 for a fault that is
    /// not a write ("If this isn't a write fault we don't need to
    /// unshare"); `handle_pte_fault` then fills the PTE in the page every
    /// sharer uses. The model does this where the PTE maps the file's page
    /// (a private file mapping with no anonymous copy there). A read fault
    /// on anonymous memory, which the patch served with the zero page in
    /// place, still copies the table here: the model has no zero page, and
    /// gives the faulting process an anonymous page of its own, which the
    /// other sharers must not see.
    #[inline]
    pub(crate) fn through_fork_share(
        &mut self,
        p: &mut Process,
        vi: usize,
        vpn: u64,
        write: bool,
    ) -> bool {
        if self.cfg.page_tables != PageTables::Shared {
            return false;
        }
        let sh = self.tb.block_shift();
        let Some(t) = p.attached.get(vpn >> sh) else {
            return false;
        };
        let slot = vpn & ((1 << sh) - 1);
        if !write {
            let tab = &mut self.tables[t as usize];
            if tab.pop.contains(slot) {
                self.n.hits += 1;
                return true;
            }
            if let Some(label) = tab.label {
                let v = &mut p.vmas[vi];
                if v.obj != NO_OBJECT && v.anon_of(vpn).is_none() {
                    self.n.faults += 1;
                    self.tables[t as usize].pop.insert(slot);
                    let (obj, idx, m) = self.target(label, v, vpn);
                    self.add_mapping(obj, idx, m);
                    return true;
                }
            }
        }
        self.unshare(p, vpn >> sh, t);
        false
    }

    /// Ends sharing of every shared table of `p` over `[a, b)`: a span
    /// wholly inside goes (`drop`) or is copied, one partly inside is copied.
    pub(crate) fn unshare_range(&mut self, p: &mut Process, a: u64, b: u64, drop: bool) {
        let Some((_, ssh)) = self.share_span() else {
            return;
        };
        if a >= b {
            return;
        }
        for (span, t) in p.attached.within(a >> ssh, ((b - 1) >> ssh) + 1) {
            let (s, e) = (span << ssh, (span + 1) << ssh);
            if drop && s >= a && e <= b {
                self.detach(p, span, t);
            } else {
                self.unshare(p, span, t);
            }
        }
    }

    /// `p` stops using shared table `t` at `span`; the last user frees it
    /// and its PTEs leave the reverse map.
    pub(crate) fn detach(&mut self, p: &mut Process, span: u64, t: u32) {
        let level = self.tables[t as usize].level;
        p.attached.remove(span);
        self.tb.entry_removed(p, &mut self.pt, level + 1, span);
        let tab = &mut self.tables[t as usize];
        tab.users -= 1;
        if tab.users > 0 {
            return;
        }
        tab.live = false;
        let (key, label, runs) = (tab.key, tab.label, tab.pop.runs().to_vec());
        tab.pop = IntervalSet::new();
        let g = self.cfg.geometry;
        let leaf_sh = g.entry_shift(level) - g.base().shift();
        match label {
            Some(label) => {
                let ssh = g.table_shift(level) - g.base().shift();
                for (s, e) in runs {
                    for slot in s..e {
                        let vpn = (span << ssh) + (slot << leaf_sh);
                        let Some(vi) = p.find(vpn) else { continue };
                        let (obj, idx, m) = self.target(label, &mut p.vmas[vi], vpn);
                        self.remove_mapping(obj, idx, m);
                    }
                }
            }
            None => {
                let m = self.mapper(TABLE_OWNER | t, -(key.1 as i64));
                for (s, e) in runs {
                    for slot in s..e {
                        self.remove_mapping(key.0, key.1 + (slot << leaf_sh), m);
                    }
                }
                self.keyed.remove(&key);
            }
        }
        self.free_tables.push(t);
        self.tb.shared(&mut self.pt, level, false);
    }

    /// `p` gets shared table `t` at `span` as its own: a copy (each PTE a
    /// new reverse-map entry) while others use it, the table itself when
    /// `p` is its last user of a table shared at fork.
    pub(crate) fn unshare(&mut self, p: &mut Process, span: u64, t: u32) {
        let g = self.cfg.geometry;
        let tab = &self.tables[t as usize];
        let (level, key, label, users) = (tab.level, tab.key, tab.label, tab.users);
        let runs = tab.pop.runs().to_vec();
        let leaf_sh = g.entry_shift(level) - g.base().shift();
        let ssh = g.table_shift(level) - g.base().shift();
        if let (Some(label), 1) = (label, users) {
            // The last user: the table becomes its own, PTEs and names.
            self.n.fork_takeovers += 1;
            p.labels.insert(span, label);
            p.attached.remove(span);
            let tab = &mut self.tables[t as usize];
            tab.live = false;
            tab.pop = IntervalSet::new();
            self.free_tables.push(t);
            self.tb.shared(&mut self.pt, level, false);
            for (s, e) in runs {
                p.pop[0].insert_range((span << ssh) + s, (span << ssh) + e);
            }
            // Its upper-level entry still points at a table: only the owner changes.
            self.tb.own(p, &mut self.pt, 1, true);
            return;
        }
        if label.is_some() {
            self.n.fork_unshares += 1;
            let fresh = self.fresh_label();
            p.labels.insert(span, fresh);
        } else {
            self.n.unshares += 1;
        }
        for (s, e) in runs {
            for slot in s..e {
                let vpn = (span << ssh) + (slot << leaf_sh);
                let own = self.owner_at(p, vpn);
                let (obj, idx, m) = match label {
                    Some(_) => {
                        let Some(vi) = p.find(vpn) else { continue };
                        self.target(own, &mut p.vmas[vi], vpn)
                    }
                    None => {
                        let idx = key.1 + (slot << leaf_sh);
                        (key.0, idx, self.mapper(own, vpn as i64 - idx as i64))
                    }
                };
                self.add_mapping(obj, idx, m);
                if level == 1 {
                    self.tb.base_leaf_added(p, &mut self.pt, vpn);
                } else {
                    p.pop[level as usize - 1].insert(vpn >> leaf_sh);
                    self.tb.entry_added(p, &mut self.pt, level, vpn >> leaf_sh);
                }
            }
        }
        self.detach(p, span, t);
    }
}
