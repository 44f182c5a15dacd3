//! A process of the sharing model: its VMAs, the leaves its own page tables
//! hold, and the shared tables it uses.

use super::ivset::IntervalSet;
use crate::pagetable::MAX_LEVELS;
use rustc_hash::FxHashMap;

/// No backing object: an anonymous VMA.
pub(crate) const NO_OBJECT: u32 = u32::MAX;

/// One VMA, in page numbers of the base size.
#[derive(Clone, Debug)]
pub(crate) struct Vma {
    pub start: u64,
    pub end: u64,
    pub prot: u8,
    pub shared: bool,
    /// The file or shared-memory object, or [`NO_OBJECT`].
    pub obj: u32,
    /// Object page index of `start`.
    pub pgoff: u64,
    /// Level of the leaves that map it (1: base pages).
    pub leaf: u8,
    /// Huge leaves only where a whole aligned page fits, base pages elsewhere
    /// (THP); otherwise every page is a leaf of `leaf` (hugetlb).
    pub thp: bool,
    /// Whether the pages come from a hugetlb pool.
    pub hugetlb: bool,
    /// The VMA's own anonymous object, made at its first anonymous page.
    pub anon: Option<u32>,
    /// Pages whose PTE maps an anonymous page, by anonymous object.
    pub layers: Vec<(u32, IntervalSet)>,
    /// Anonymous objects linked to this VMA (today's `anon_vma_chain`s).
    pub links: Vec<u32>,
    /// Whether today's kernel already gave this VMA its own `anon_vma` (a
    /// parent keeps its own after fork, though its later copies go to a new
    /// object here so that no two pages share a slot).
    pub anon_charged: bool,
}

impl Vma {
    /// The anonymous object whose page `vpn` maps, if any.
    pub fn anon_of(&mut self, vpn: u64) -> Option<u32> {
        for (o, set) in &mut self.layers {
            if set.contains(vpn) {
                return Some(*o);
            }
        }
        None
    }

    /// Object page index of `vpn`.
    #[inline]
    pub fn index(&self, vpn: u64) -> u64 {
        self.pgoff + (vpn - self.start)
    }
}

/// The shared tables a process uses, by span index, run-encoded: consecutive
/// spans on consecutive tables take one entry.
#[derive(Clone, Debug, Default)]
pub(crate) struct Attached {
    runs: Vec<(u64, u32, u32)>,
    hint: usize,
}

impl Attached {
    #[inline]
    pub fn get(&mut self, span: u64) -> Option<u32> {
        let h = self.hint;
        if let Some(&(s, t, n)) = self.runs.get(h) {
            if span >= s && span < s + n as u64 {
                return Some(t + (span - s) as u32);
            }
        }
        let i = self.runs.partition_point(|&(s, _, n)| s + n as u64 <= span);
        match self.runs.get(i) {
            Some(&(s, t, _)) if s <= span => {
                self.hint = i;
                Some(t + (span - s) as u32)
            }
            _ => None,
        }
    }

    pub fn insert(&mut self, span: u64, table: u32) {
        let i = self.runs.partition_point(|&(s, _, _)| s < span);
        if i > 0 {
            let (s, t, n) = self.runs[i - 1];
            if s + n as u64 == span && t + n == table {
                self.runs[i - 1].2 += 1;
                self.hint = i - 1;
                return;
            }
        }
        self.runs.insert(i, (span, table, 1));
        self.hint = i;
    }

    pub fn remove(&mut self, span: u64) -> Option<u32> {
        let i = self.runs.partition_point(|&(s, _, n)| s + n as u64 <= span);
        let (s, t, n) = *self.runs.get(i)?;
        if s > span {
            return None;
        }
        let k = (span - s) as u32;
        let mut keep = Vec::with_capacity(2);
        if k > 0 {
            keep.push((s, t, k));
        }
        if k + 1 < n {
            keep.push((span + 1, t + k + 1, n - k - 1));
        }
        self.runs.splice(i..=i, keep);
        self.hint = 0;
        Some(t + k)
    }

    /// Every (span, table), in order.
    pub fn all(&self) -> Vec<(u64, u32)> {
        self.runs
            .iter()
            .flat_map(|&(s, t, n)| (0..n).map(move |k| (s + k as u64, t + k)))
            .collect()
    }

    /// The (span, table) pairs with spans in `[a, b)`.
    pub fn within(&self, a: u64, b: u64) -> Vec<(u64, u32)> {
        self.all()
            .into_iter()
            .filter(|&(s, _)| s >= a && s < b)
            .collect()
    }

    /// Whether no table is attached.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Whether a table is attached at any span in `[a, b)`.
    pub fn any_within(&self, a: u64, b: u64) -> bool {
        let i = self.runs.partition_point(|&(s, _, n)| s + n as u64 <= a);
        self.runs.get(i).is_some_and(|&(s, _, _)| s < b)
    }
}

/// A process.
#[derive(Clone, Debug)]
pub(crate) struct Process {
    pub vmas: Vec<Vma>,
    /// Leaves present in this process's own tables, by level (index level
    /// - 1), in units of that level's entry.
    pub pop: [IntervalSet; MAX_LEVELS],
    /// Shared tables in use (at the model's shared level).
    pub attached: Attached,
    /// Present entries per table, by level (index level - 1), for levels
    /// above 1: table index -> entries present.
    pub entries: Vec<FxHashMap<u64, u32>>,
    /// Own tables by level (index level - 1), the root included.
    pub tables: [u64; MAX_LEVELS],
    /// Bytes of this process's own tables.
    pub bytes: u64,
    /// The heap's first and current end (brk), in bytes, once seen.
    pub brk: Option<(u64, u64)>,
    pub last_vma: usize,
    /// The name its own PTEs carry in reverse-map chains (its pid, unless a
    /// PTE page shared at fork still carries that pid).
    pub label: u32,
    /// PTE-page spans whose own PTEs carry another name than `label`: a
    /// table it took over from a fork, or its copy of one (see `attach.rs`).
    pub labels: FxHashMap<u64, u32>,
}

impl Process {
    pub fn new() -> Process {
        Process {
            vmas: Vec::new(),
            pop: Default::default(),
            attached: Attached::default(),
            entries: vec![FxHashMap::default(); MAX_LEVELS],
            tables: [0; MAX_LEVELS],
            bytes: 0,
            brk: None,
            last_vma: 0,
            label: 0,
            labels: FxHashMap::default(),
        }
    }

    /// Index of the VMA holding `vpn`.
    #[inline]
    pub fn find(&mut self, vpn: u64) -> Option<usize> {
        let h = self.last_vma;
        if let Some(v) = self.vmas.get(h) {
            if v.start <= vpn && vpn < v.end {
                return Some(h);
            }
        }
        let i = self.vmas.partition_point(|v| v.end <= vpn);
        match self.vmas.get(i) {
            Some(v) if v.start <= vpn => {
                self.last_vma = i;
                Some(i)
            }
            _ => None,
        }
    }
}
