//! What a process maps at its exit, VMA by VMA: the 4K pages each VMA maps and the large
//! folios first seen in it. `linux-thp` sums these into its `exit_*_folios` counters, and
//! [`crate::system::Mm::record_exit_mappings`] keeps them per process, so that
//! `pagelab validate --per-mapping` can set each mapping beside the kernel's
//! (`pagelab_lab::folios`, which reads `/proc/PID/maps`, `pagemap` and `kpageflags` at
//! the same moment: the process's exit stop).

use crate::machine::Machine;
use crate::pagetable::PageTable;
use pagelab_core::{Backing, PageSize};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};

/// One VMA at its process's exit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmaFolios {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// What backs it.
    pub backing: Backing,
    /// 4K pages mapped in it (zero pages included, as pagemap shows them present).
    pub pages: u64,
    /// Of those, 4K pages of a zero page.
    pub zero: u64,
    /// Large folios first seen in this VMA, by size.
    pub folios: BTreeMap<PageSize, u64>,
}

/// Each VMA of process `pid` (address order) with what it maps. A folio is keyed by its
/// first frame, as the lab keys a folio by its head frame, and counted in the first VMA
/// that maps it only (as `FolioCounter::by_mapping` counts it in the lower mapping): a
/// large page-cache page mapped by two mappings of one file is one folio. A folio whose
/// mapping was split (part of it unmapped or re-protected) is still one folio, as
/// kpageflags shows it: counted at its whole size, once. Zero pages are no allocation
/// and are left out of the folios (not of the pages).
pub fn vma_folios(m: &Machine, pid: u32) -> Vec<VmaFolios> {
    let Some(p) = m.proc(pid) else {
        return Vec::new();
    };
    let base = m.base();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for vma in p.aspace.iter() {
        let mut v = VmaFolios {
            start: vma.start.0,
            end: vma.end.0,
            backing: vma.backing,
            pages: 0,
            zero: 0,
            folios: BTreeMap::new(),
        };
        for page in p.pt.mappings_in(vma.start, vma.len()) {
            let pages = page.size.bytes() / PageSize::K4.bytes();
            v.pages += pages;
            let frame = page.pfn.to_pfn(base);
            let (head, size) = m.kept_folio_of(frame).unwrap_or((frame, page.size));
            if m.is_zero(head) {
                v.zero += pages;
                continue;
            }
            if size <= base || !seen.insert(head) {
                continue;
            }
            *v.folios.entry(size).or_default() += 1;
        }
        out.push(v);
    }
    out
}

/// One mapping at exit as `pagelab validate --per-mapping` reads it (the JSON of
/// [`crate::system::Mm::exit_mappings`]): its range, a name (`anon`, or `file#ID` by the
/// trace's file id, since the model knows no paths), its 4K pages and its large anonymous
/// folios by size (`"64K"`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ExitMapping {
    /// First byte.
    pub start: u64,
    /// One past the last byte.
    pub end: u64,
    /// `anon` or `file#ID`.
    pub name: String,
    /// 4K pages mapped.
    pub pages: u64,
    /// Of those, 4K pages of a zero page.
    pub zero: u64,
    /// Large anonymous folios by size.
    pub folios: BTreeMap<String, u64>,
}

/// The mappings of one process at its exit, in the order the processes exited.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ExitProcess {
    /// The trace's pid.
    pub pid: u32,
    /// Its VMAs, in address order.
    pub mappings: Vec<ExitMapping>,
}

impl ExitProcess {
    /// Process `pid` of `m` as it is now (at its exit).
    pub fn of(m: &Machine, pid: u32) -> ExitProcess {
        let mappings = vma_folios(m, pid)
            .into_iter()
            .map(|v| ExitMapping {
                start: v.start,
                end: v.end,
                name: match v.backing {
                    Backing::Anon => "anon".to_string(),
                    Backing::File { file_id, .. } => format!("file#{file_id}"),
                },
                pages: v.pages,
                zero: v.zero,
                // Anonymous folios only, as validate's totals (`exit_anon_folios`).
                folios: match v.backing {
                    Backing::Anon => v.folios.iter().map(|(s, n)| (s.to_string(), *n)).collect(),
                    Backing::File { .. } => BTreeMap::new(),
                },
            })
            .collect();
        ExitProcess { pid, mappings }
    }
}
