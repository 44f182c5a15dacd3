//! A reference for the sharing model that materialises everything: every
//! PTE of every process, every page's chain as a list, every table counted
//! from the PTEs after every event. Slow and simple, for tests (base pages;
//! private page tables, or under [`PageTables::Shared`] McCracken's PTE
//! pages shared at fork, for streams of private mappings only: tables shared
//! by key are the model's alone).
//!
//! Every PTE has an id of its own, and a chain lists PTE ids: a PTE page
//! shared at fork is one set of PTEs, kept as a table with a user count, and
//! a process that must change it copies it (new ids) unless it is the last
//! user.

use super::rmap::{Method, RmapSizes};
use super::{Config, PageTables};
use pagelab_core::{Backing, Event, Sharing as Share};
use std::collections::{BTreeMap, BTreeSet, HashMap};

#[derive(Clone, Debug)]
struct RVma {
    start: u64,
    end: u64,
    shared: bool,
    /// File object, or None for anonymous memory.
    obj: Option<u64>,
    pgoff: u64,
}

#[derive(Clone, Debug, Default)]
struct RProc {
    vmas: Vec<RVma>,
    /// Own PTEs: virtual page -> (page id, PTE id).
    ptes: BTreeMap<u64, (u64, u64)>,
    /// PTE pages shared at fork, by span: table id.
    shared: BTreeMap<u64, u64>,
}

/// A PTE page shared at fork.
#[derive(Clone, Debug)]
struct RTable {
    users: u32,
    ptes: BTreeMap<u64, (u64, u64)>,
}

/// What the reference counts, to compare with the model.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RefCounts {
    /// Faults, hits and copy-on-write copies.
    pub faults: u64,
    /// References that found their PTE.
    pub hits: u64,
    /// Copies made by writes.
    pub cow_copies: u64,
    /// PTE pages shared at fork.
    pub fork_shared_tables: u64,
    /// Shared PTE pages copied by a user while others still used them.
    pub fork_unshares: u64,
    /// Shared PTE pages their last user took as its own.
    pub fork_takeovers: u64,
    /// Page-table bytes now and at the peak.
    pub pt_bytes: u64,
    /// The most page-table bytes after any event.
    pub pt_bytes_peak: u64,
    /// Tables by level now.
    pub tables: Vec<u64>,
    /// For each chain method: (bytes, objects, bytes_peak, objects_peak,
    /// adds, removes, entries walked to remove).
    pub chains: BTreeMap<Method, [u64; 7]>,
}

/// The reference model.
#[derive(Debug)]
pub struct Reference {
    cfg: Config,
    procs: BTreeMap<u32, RProc>,
    pid: u32,
    files: HashMap<u64, u64>,
    file_pages: HashMap<(u64, u64), u64>,
    /// Page id -> the PTE ids mapping it, newest first; anonymous or not.
    pages: HashMap<u64, (bool, Vec<u64>)>,
    tables: BTreeMap<u64, RTable>,
    next: u64,
    /// The counts so far.
    pub counts: RefCounts,
}

impl Reference {
    /// An empty reference for `cfg`: PTE pages are shared at fork under
    /// [`PageTables::Shared`], never otherwise.
    pub fn new(cfg: Config) -> Reference {
        let mut counts = RefCounts::default();
        for m in [
            Method::PteChains,
            Method::PteChainsDirect,
            Method::PteChainsGrouped,
        ] {
            counts.chains.insert(m, [0; 7]);
        }
        Reference {
            cfg,
            procs: BTreeMap::new(),
            pid: 0,
            files: HashMap::new(),
            file_pages: HashMap::new(),
            pages: HashMap::new(),
            tables: BTreeMap::new(),
            next: 1,
            counts,
        }
    }

    fn id(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    fn proc(&mut self) -> &mut RProc {
        self.procs.entry(self.pid).or_default()
    }

    /// A new PTE maps `page`: its id.
    fn add(&mut self, page: u64) -> u64 {
        for c in self.counts.chains.values_mut() {
            c[4] += 1;
        }
        let id = self.id();
        self.pages.entry(page).or_default().1.insert(0, id);
        id
    }

    fn remove(&mut self, page: u64, pte: u64) {
        let entry = self.pages.get_mut(&page).expect("mapped page");
        let pos = entry.1.iter().position(|&x| x == pte).expect("mapper") as u64 + 1;
        let len = entry.1.len() as u64;
        entry.1.remove(pos as usize - 1);
        for (m, c) in self.counts.chains.iter_mut() {
            c[5] += 1;
            let direct = len == 1 && *m != Method::PteChains;
            c[6] += if direct { 0 } else { pos };
        }
        if entry.1.is_empty() {
            self.pages.remove(&page);
        }
    }

    /// Carries out one event (events the model refuses are not given).
    pub fn event(&mut self, ev: &Event) {
        let base = self.cfg.geometry.base();
        let sh = base.shift();
        match ev {
            Event::Switch(t) => self.pid = t.pid,
            Event::Ref(r) => {
                for vpn in r.addr.vpn(base).0..=r.last_byte().vpn(base).0 {
                    self.touch(vpn, r.kind.is_write());
                }
            }
            Event::Map(m) => {
                let (a, b) = (m.start.vpn(base).0, (m.start + m.len).vpn_ceil(base).0);
                if a == b {
                    return;
                }
                self.unmap(a, b);
                let shared = m.sharing == Share::Shared;
                let (obj, pgoff) = match m.backing {
                    Backing::File { file_id, offset } => {
                        let n = self.files.len() as u64;
                        (Some(*self.files.entry(file_id).or_insert(n)), offset >> sh)
                    }
                    Backing::Anon if shared => (Some(1_000_000 + self.id()), 0),
                    Backing::Anon => (None, 0),
                };
                let p = self.proc();
                p.vmas.push(RVma {
                    start: a,
                    end: b,
                    shared,
                    obj,
                    pgoff,
                });
                p.vmas.sort_by_key(|v| v.start);
            }
            Event::Unmap { start, len } => {
                self.unmap(start.vpn(base).0, (*start + *len).vpn_ceil(base).0);
            }
            Event::Protect { start, len, .. } => {
                let (a, b) = (start.vpn(base).0, (*start + *len).vpn_ceil(base).0);
                for span in self.spans_within(a, b) {
                    self.own_table(span);
                }
                // mprotect splits the VMAs at its edges (never merged again, as
                // in the model): a PTE range across the edge is in no one VMA.
                let p = self.proc();
                for at in [a, b] {
                    if let Some(i) = p.vmas.iter().position(|v| v.start < at && at < v.end) {
                        let v = p.vmas[i].clone();
                        p.vmas[i].end = at;
                        p.vmas.insert(
                            i + 1,
                            RVma {
                                start: at,
                                pgoff: v.pgoff + (at - v.start),
                                ..v
                            },
                        );
                    }
                }
            }
            Event::Fork { child, .. } => {
                if *child == self.pid || self.procs.contains_key(child) {
                    return;
                }
                self.proc();
                if self.cow() {
                    self.share_at_fork();
                }
                let parent = self.proc().clone();
                let mut c = RProc {
                    vmas: parent.vmas.clone(),
                    ptes: BTreeMap::new(),
                    shared: parent.shared.clone(),
                };
                for t in parent.shared.values() {
                    self.tables.get_mut(t).expect("live table").users += 1;
                }
                for (&vpn, &(page, _)) in &parent.ptes {
                    let id = self.add(page);
                    c.ptes.insert(vpn, (page, id));
                }
                self.procs.insert(*child, c);
            }
            Event::Exit { .. } | Event::Exec(_) => {
                self.unmap(0, self.cfg.user_top >> sh);
                self.procs.remove(&self.pid);
                self.settle();
                // The process is gone; a later reference would start it anew.
                return;
            }
            _ => {}
        }
        self.proc();
        self.settle();
    }

    fn cow(&self) -> bool {
        self.cfg.page_tables == PageTables::Shared
    }

    fn span_shift(&self) -> u32 {
        self.cfg.geometry.bits(1) as u32
    }

    /// The spans of the current process's shared PTE pages that meet `[a, b)`.
    fn spans_within(&mut self, a: u64, b: u64) -> Vec<u64> {
        let sh = self.span_shift();
        if a >= b {
            return Vec::new();
        }
        let (lo, hi) = (a >> sh, (b - 1) >> sh);
        self.proc().shared.range(lo..=hi).map(|(&s, _)| s).collect()
    }

    /// At fork: each of the parent's own PTE pages wholly inside one private
    /// VMA becomes a shared table (the child is attached by the caller).
    fn share_at_fork(&mut self) {
        let sh = self.span_shift();
        let p = self.proc();
        let spans: BTreeSet<u64> = p.ptes.keys().map(|v| v >> sh).collect();
        for span in spans {
            let (s, e) = ((span << sh), (span + 1) << sh);
            let p = self.procs.get_mut(&self.pid).expect("parent");
            if !p
                .vmas
                .iter()
                .any(|v| !v.shared && v.start <= s && e <= v.end)
            {
                continue;
            }
            let ptes: BTreeMap<u64, (u64, u64)> =
                p.ptes.range(s..e).map(|(&v, &x)| (v, x)).collect();
            for v in ptes.keys() {
                p.ptes.remove(v);
            }
            self.next += 1;
            let t = self.next;
            p.shared.insert(span, t);
            self.tables.insert(t, RTable { users: 1, ptes });
            self.counts.fork_shared_tables += 1;
        }
    }

    /// The current process gets its shared PTE page at `span` as its own:
    /// a copy while others use it, the table itself if it is the last user.
    fn own_table(&mut self, span: u64) {
        let t = self.proc().shared.remove(&span).expect("attached");
        let tab = self.tables.get_mut(&t).expect("live table");
        if tab.users == 1 {
            let tab = self.tables.remove(&t).expect("live table");
            self.counts.fork_takeovers += 1;
            self.proc().ptes.extend(tab.ptes);
            return;
        }
        tab.users -= 1;
        let ptes = tab.ptes.clone();
        self.counts.fork_unshares += 1;
        for (vpn, (page, _)) in ptes {
            let id = self.add(page);
            self.proc().ptes.insert(vpn, (page, id));
        }
        // The copy exists before the write, protect or unmap that needed it
        // is carried out: its table and chain entries count towards the peaks.
        self.settle();
    }

    /// The current process stops using its shared PTE page at `span`.
    fn detach(&mut self, span: u64) {
        let t = self.proc().shared.remove(&span).expect("attached");
        let tab = self.tables.get_mut(&t).expect("live table");
        tab.users -= 1;
        if tab.users == 0 {
            let tab = self.tables.remove(&t).expect("live table");
            for (page, id) in tab.ptes.into_values() {
                self.remove(page, id);
            }
        }
    }

    fn unmap(&mut self, a: u64, b: u64) {
        let sh = self.span_shift();
        for span in self.spans_within(a, b) {
            if a <= span << sh && (span + 1) << sh <= b {
                self.detach(span);
            } else {
                self.own_table(span);
            }
        }
        let p = self.proc();
        let gone: Vec<(u64, (u64, u64))> = p.ptes.range(a..b).map(|(&v, &x)| (v, x)).collect();
        let mut vmas = Vec::new();
        for v in std::mem::take(&mut p.vmas) {
            if v.end <= a || v.start >= b {
                vmas.push(v);
                continue;
            }
            if v.start < a {
                vmas.push(RVma {
                    end: a,
                    ..v.clone()
                });
            }
            if v.end > b {
                vmas.push(RVma {
                    start: b,
                    pgoff: v.pgoff + (b - v.start),
                    ..v
                });
            }
        }
        p.vmas = vmas;
        for (vpn, _) in &gone {
            p.ptes.remove(vpn);
        }
        for (_, (page, id)) in gone {
            self.remove(page, id);
        }
    }

    fn touch(&mut self, vpn: u64, write: bool) {
        let sh = self.span_shift();
        let p = self.proc();
        let Some(v) = p
            .vmas
            .iter()
            .find(|v| v.start <= vpn && vpn < v.end)
            .cloned()
        else {
            return;
        };
        if let Some(&t) = p.shared.get(&(vpn >> sh)) {
            if !write && self.tables[&t].ptes.contains_key(&vpn) {
                self.counts.hits += 1;
                return;
            }
            // McCracken's patch fills a read fault in the shared page; the
            // model does so for file pages (anonymous ones copy the table).
            if let (false, Some(o)) = (write, v.obj) {
                self.counts.faults += 1;
                let page = self.file_page(o, v.pgoff + (vpn - v.start));
                let id = self.add(page);
                let tab = self.tables.get_mut(&t).expect("live table");
                tab.ptes.insert(vpn, (page, id));
                return;
            }
            self.own_table(vpn >> sh);
        }
        let p = self.proc();
        if let Some(&(page, pte)) = p.ptes.get(&vpn) {
            self.counts.hits += 1;
            if write && !v.shared {
                let (anon, ref m) = self.pages[&page];
                if !anon || m.len() > 1 {
                    self.counts.cow_copies += 1;
                    self.remove(page, pte);
                    let new = self.id();
                    self.pages.insert(new, (true, Vec::new()));
                    let id = self.add(new);
                    self.proc().ptes.insert(vpn, (new, id));
                }
            }
            return;
        }
        self.counts.faults += 1;
        let page = match v.obj {
            Some(o) if v.shared || !write => self.file_page(o, v.pgoff + (vpn - v.start)),
            _ => {
                let id = self.id();
                self.pages.insert(id, (true, Vec::new()));
                id
            }
        };
        let id = self.add(page);
        self.proc().ptes.insert(vpn, (page, id));
    }

    /// The page id of page `idx` of file object `o`, made on first use.
    fn file_page(&mut self, o: u64, idx: u64) -> u64 {
        let n = self.next + 1;
        let id = *self.file_pages.entry((o, idx)).or_insert(n);
        if id == n {
            self.next = n;
        }
        self.pages.entry(id).or_insert((false, Vec::new()));
        id
    }

    /// Recounts tables and chain bytes from scratch and updates the peaks.
    fn settle(&mut self) {
        let g = self.cfg.geometry;
        let levels = g.levels() as usize;
        let mut tables = vec![0u64; levels];
        for p in self.procs.values() {
            let mut at: BTreeSet<u64> = p.ptes.keys().map(|v| v >> g.bits(1)).collect();
            tables[0] += at.len() as u64;
            at.extend(p.shared.keys());
            for l in 2..levels as u8 {
                let mut up: BTreeSet<u64> = at.iter().map(|i| i >> g.bits(l)).collect();
                if self.cfg.prealloc_below_root && l as usize == levels - 1 {
                    up.extend(0..self.cfg.user_top.div_ceil(1 << g.table_shift(l)));
                }
                tables[l as usize - 1] += up.len() as u64;
                at = up;
            }
            tables[levels - 1] += 1;
        }
        tables[0] += self.tables.len() as u64;
        let bytes: u64 = (1..=levels)
            .map(|l| tables[l - 1] * g.table_bytes(l as u8))
            .sum();
        self.counts.pt_bytes = bytes;
        self.counts.pt_bytes_peak = self.counts.pt_bytes_peak.max(bytes);
        self.counts.tables = tables;
        let sizes: RmapSizes = self.cfg.rmap;
        for (m, c) in self.counts.chains.iter_mut() {
            let (mut objs, mut bytes) = (0, 0);
            for (_, mappers) in self.pages.values() {
                let len = mappers.len() as u64;
                let (o, b) = match m {
                    Method::PteChains => (len, len * 2 * sizes.pointer_bytes),
                    Method::PteChainsDirect if len >= 2 => (len, len * 2 * sizes.pointer_bytes),
                    Method::PteChainsGrouped if len >= 2 => {
                        let n = len.div_ceil(sizes.per_line());
                        (n, n * sizes.line_bytes)
                    }
                    _ => (0, 0),
                };
                objs += o;
                bytes += b;
            }
            c[0] = bytes;
            c[1] = objs;
            c[2] = c[2].max(bytes);
            c[3] = c[3].max(objs);
        }
    }
}
