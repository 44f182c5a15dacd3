//! The sharing model: state, references and faults.

use super::chains::{Chains, EMPTY};
use super::ivset::IntervalSet;
use super::process::Process;
use super::rmap::{PageKind, RmapCosts};
use super::stats::SharingCounts;
use super::tables::{Tables, Totals};
use super::{Config, SharingError};
use pagelab_core::Event;
use rustc_hash::{FxHashMap, FxHashSet};

mod faults;

/// Chain-id storage is in chunks of this many pages.
pub(crate) const CHUNK: u64 = 512;
/// Mapper owners at or above this are shared tables, below are pids and
/// (from [`LABELS`]) PTE pages named afresh.
pub(crate) const TABLE_OWNER: u32 = 1 << 31;
/// The first name of a PTE page that is not a pid.
pub(crate) const LABELS: u32 = 1 << 30;

/// A file, shared-memory segment or anonymous object: its pages' chains.
#[derive(Debug)]
pub(crate) struct Object {
    pub kind: PageKind,
    chunks: FxHashMap<u64, u32>,
    data: Vec<[u32; CHUNK as usize]>,
    last: (u64, u32),
    /// Level of the hugetlb leaves its pages are, once advised.
    pub hugetlb: Option<u8>,
    /// Huge pages reserved from the pool (object pages below this × the huge size).
    pub reserved: u64,
    /// VMAs linked to it (anonymous objects: today's `anon_vma_chain`s).
    pub links: u64,
}

impl Object {
    pub fn new(kind: PageKind) -> Object {
        Object {
            kind,
            chunks: FxHashMap::default(),
            data: Vec::new(),
            last: (u64::MAX, 0),
            hugetlb: None,
            reserved: 0,
            links: 0,
        }
    }

    /// The chain slot of page `idx`.
    #[inline]
    pub fn slot(&mut self, idx: u64) -> &mut u32 {
        let c = idx / CHUNK;
        let d = if self.last.0 == c {
            self.last.1
        } else {
            let next = self.data.len() as u32;
            let d = *self.chunks.entry(c).or_insert(next);
            if d == next {
                self.data.push([EMPTY; CHUNK as usize]);
            }
            self.last = (c, d);
            d
        };
        &mut self.data[d as usize][(idx % CHUNK) as usize]
    }

    /// The chain slots of pages `[idx, end)`, which must lie in one chunk.
    #[inline]
    pub fn slots(&mut self, idx: u64, end: u64) -> &mut [u32] {
        self.slot(idx);
        let d = self.last.1 as usize;
        let lo = (idx % CHUNK) as usize;
        &mut self.data[d][lo..lo + (end - idx) as usize]
    }

    /// Calls `f(page index, chain)` for every page with a non-empty chain, in page order.
    pub fn each_mapped(&self, mut f: impl FnMut(u64, u32)) {
        let mut chunks: Vec<(u64, u32)> = self.chunks.iter().map(|(&c, &d)| (c, d)).collect();
        chunks.sort_unstable();
        for (c, d) in chunks {
            for (i, &ch) in self.data[d as usize].iter().enumerate() {
                if ch != EMPTY {
                    f(c * CHUNK + i as u64, ch);
                }
            }
        }
    }
}

/// A page table shared between processes.
#[derive(Debug)]
pub(crate) struct SharedTable {
    pub level: u8,
    pub key: (u32, u64, u8),
    pub users: u32,
    /// Present leaves, by slot in the table.
    pub pop: IntervalSet,
    pub live: bool,
    /// A PTE page shared at fork (copy-on-write): the name its PTEs carry in
    /// reverse-map chains. None for a table shared by key.
    pub label: Option<u32>,
}

/// Additions to the reverse map not yet told to [`RmapCosts`]: a run of
/// faults on pages with the same chain length is told once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pending {
    pub kind: PageKind,
    pub len: u32,
    pub n: u64,
}

/// Many processes sharing memory, stepped event by event.
#[derive(Debug)]
pub struct Sharing {
    pub(crate) cfg: Config,
    pub(crate) tb: Tables,
    pub(crate) procs: FxHashMap<u32, Box<Process>>,
    pub(crate) pid: u32,
    pub(crate) objects: Vec<Object>,
    pub(crate) files: FxHashMap<u64, u32>,
    pub(crate) tables: Vec<SharedTable>,
    pub(crate) free_tables: Vec<u32>,
    pub(crate) keyed: FxHashMap<(u32, u64, u8), u32>,
    pub(crate) chains: Chains,
    mappers: FxHashMap<(u32, i64), u32>,
    last_mapper: (u32, i64, u32),
    pub(crate) rmap: RmapCosts,
    pub(crate) pending: Pending,
    /// Pages moved from chain `.0` to chain `.1`, `.2` of them, not yet counted.
    pub(crate) rc: (u32, u32, u64),
    pub(crate) pt: Totals,
    pub(crate) n: SharingCounts,
    /// Most processes alive at once.
    pub(crate) processes_peak: u64,
    /// Free pages per hugetlb pool, in `cfg.hugetlb` order.
    pub(crate) pool_free: Vec<u64>,
    /// A process taken out of `procs` while its references run.
    pub(crate) cur: Option<Box<Process>>,
    /// The last PTE-page name handed out (names above pids, below [`TABLE_OWNER`]).
    pub(crate) next_label: u32,
    /// Pids that name a PTE page shared at fork: a later process of that
    /// pid names its own PTEs afresh.
    pub(crate) label_pids: FxHashSet<u32>,
    /// Names below this are free to hand out ([`TABLE_OWNER`]; smaller in
    /// tests, to run out).
    pub(crate) label_limit: u32,
    /// Forks carried out, for the message when names run out.
    pub(crate) forks: u64,
    /// Set when [`Sharing::fresh_label`] found no name left: the event that
    /// asked is refused (`event` returns the error).
    pub(crate) names_out: bool,
}

impl Sharing {
    /// A model with no process yet.
    ///
    /// # Errors
    /// A configuration that contradicts itself (see [`Config::check`]).
    pub fn new(cfg: Config) -> Result<Sharing, SharingError> {
        cfg.check()?;
        Ok(Sharing {
            tb: Tables { g: cfg.geometry },
            procs: FxHashMap::default(),
            pid: 0,
            objects: Vec::new(),
            files: FxHashMap::default(),
            tables: Vec::new(),
            free_tables: Vec::new(),
            keyed: FxHashMap::default(),
            chains: Chains::new(),
            mappers: FxHashMap::default(),
            last_mapper: (u32::MAX, 0, 0),
            rmap: RmapCosts::new(cfg.rmap),
            pending: Pending {
                kind: PageKind::File,
                len: 0,
                n: 0,
            },
            rc: (EMPTY, EMPTY, 0),
            pt: Totals::default(),
            n: SharingCounts::default(),
            processes_peak: 0,
            pool_free: cfg.hugetlb.iter().map(|p| p.count).collect(),
            cur: None,
            next_label: LABELS,
            label_pids: FxHashSet::default(),
            label_limit: TABLE_OWNER,
            forks: 0,
            names_out: false,
            cfg,
        })
    }

    /// The process whose references run now, if it is out of the table.
    pub(crate) fn cur_ref(&self) -> Option<&Process> {
        self.cur.as_deref()
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Carries out one event.
    ///
    /// # Errors
    /// An event the model cannot represent: a range past user space, an
    /// unaligned mapping, a hugetlb request the pool cannot serve; or the
    /// names of PTE pages shared at fork ran out (after 2^30 of them), in
    /// which case the event was half carried out and the model must not be
    /// used further.
    pub fn event(&mut self, ev: &Event) -> Result<(), SharingError> {
        self.n.events += 1;
        let done = self.event_inner(ev);
        if self.names_out {
            return Err(self.names_error());
        }
        done
    }

    /// The error once PTE-page names have run out: what ran out, after how
    /// many forks, and what to do.
    pub(crate) fn names_error(&self) -> SharingError {
        SharingError::Event {
            index: self.n.events.saturating_sub(1),
            why: format!(
                "--page-tables shared: the model ran out of names for PTE pages shared at \
                 fork after {} forks ({} PTE pages were shared at fork or copied from one, \
                 each named once for the reverse map); split the trace into shorter runs \
                 or use --page-tables private",
                self.forks,
                self.label_limit - LABELS - 1
            ),
        }
    }

    fn event_inner(&mut self, ev: &Event) -> Result<(), SharingError> {
        match ev {
            Event::Ref(r) => {
                self.reference(r);
                Ok(())
            }
            Event::Switch(t) => {
                self.switch(t.pid);
                Ok(())
            }
            other => {
                self.park();
                self.flush();
                self.op(other)
            }
        }
    }

    /// Makes `pid` current, creating it if it is new.
    pub(crate) fn switch(&mut self, pid: u32) {
        if self.cur.is_some() && pid == self.pid {
            return;
        }
        self.park();
        self.pid = pid;
        let p = match self.procs.remove(&pid) {
            Some(p) => p,
            None => self.born(),
        };
        self.cur = Some(p);
    }

    /// A new, empty process with its root table.
    pub(crate) fn born(&mut self) -> Box<Process> {
        let mut p = Box::new(Process::new());
        p.label = self.label_for(self.pid);
        self.tb.process_born(
            &mut p,
            &mut self.pt,
            self.cfg.prealloc_below_root,
            self.cfg.user_top,
        );
        self.processes_peak = self.processes_peak.max(self.procs.len() as u64 + 1);
        p
    }

    /// Puts the current process back in the table.
    pub(crate) fn park(&mut self) {
        if let Some(p) = self.cur.take() {
            self.procs.insert(self.pid, p);
        }
    }

    /// Tells [`RmapCosts`] about the additions held back.
    pub(crate) fn flush(&mut self) {
        self.settle_rc();
        if self.pending.n > 0 {
            let p = self.pending;
            self.rmap.add(p.kind, p.len as u64, p.n);
            self.pending.n = 0;
        }
    }

    /// The mapper id of the PTEs of `owner` at displacement `disp`.
    #[inline]
    pub(crate) fn mapper(&mut self, owner: u32, disp: i64) -> u32 {
        if self.last_mapper.0 == owner && self.last_mapper.1 == disp {
            return self.last_mapper.2;
        }
        let next = self.mappers.len() as u32 + 1;
        let m = *self.mappers.entry((owner, disp)).or_insert(next);
        self.last_mapper = (owner, disp, m);
        m
    }

    /// A PTE of `mapper` now maps page `idx` of `obj`.
    #[inline]
    pub(crate) fn add_mapping(&mut self, obj: u32, idx: u64, mapper: u32) {
        let o = &mut self.objects[obj as usize];
        let kind = o.kind;
        let slot = o.slot(idx);
        let old = *slot;
        let new = self.chains.cons(mapper, old);
        *slot = new;
        // Reference counts move in runs: many pages go from `old` to `new`.
        if self.rc.0 == old && self.rc.1 == new {
            self.rc.2 += 1;
        } else {
            self.settle_rc();
            self.rc = (old, new, 1);
        }
        let len = self.chains.len(old);
        if self.pending.n > 0 && (self.pending.len != len || self.pending.kind != kind) {
            self.flush();
        }
        self.pending.kind = kind;
        self.pending.len = len;
        self.pending.n += 1;
    }

    /// Applies the reference-count moves held back by [`Sharing::add_mapping`].
    pub(crate) fn settle_rc(&mut self) {
        let (old, new, n) = self.rc;
        if n > 0 {
            self.chains.retain_n(new, n as u32);
            self.chains.release_n(old, n as u32);
        }
        self.rc = (EMPTY, EMPTY, 0);
    }

    /// `mapper`'s PTE no longer maps page `idx` of `obj`; false if it did not.
    pub(crate) fn remove_mapping(&mut self, obj: u32, idx: u64, mapper: u32) -> bool {
        self.flush();
        let o = &mut self.objects[obj as usize];
        let kind = o.kind;
        let slot = o.slot(idx);
        let old = *slot;
        let Some((new, pos)) = self.chains.remove(mapper, old) else {
            return false;
        };
        *slot = new;
        self.chains.retain(new);
        self.chains.release(old);
        self.rmap
            .remove(kind, self.chains.len(old) as u64, pos as u64, 1);
        true
    }

    pub(crate) fn new_object(&mut self, kind: PageKind) -> u32 {
        self.objects.push(Object::new(kind));
        (self.objects.len() - 1) as u32
    }
}
