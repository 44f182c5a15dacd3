//! Many processes sharing memory: what their page tables and the reverse map
//! cost (Bligh and Hansen, *Linux memory management on larger machines*, 2003).
//!
//! [`Sharing`] takes a stream of events from many processes (fork, exit,
//! switch, map, unmap, protect, advise, references) and keeps, for every
//! process, which PTEs and huge leaves exist, and for every physical page,
//! which PTEs map it. From that it counts:
//!
//! - page-table pages by level, now and at the peak, under
//!   [`PageTables::Private`] (today's Linux), [`PageTables::Shared`]
//!   (McCracken's shared PTE pages) or [`PageTables::HugetlbPmdShare`]
//!   (Linux's PMD sharing for shared hugetlb mappings);
//! - what every reverse-map [`rmap::Method`] would spend, side by side.
//!
//! Nothing is stored per PTE: a process's present leaves are page ranges
//! ([`ivset::IntervalSet`]), a page's reverse map is a hash-consed chain id
//! ([`chains`]), and a shared page table is one record however many
//! processes use it. 5000 processes touching every page of a 2G segment are
//! 2.6 billion references through the model, in a few hundred kilobytes.
//!
//! ```
//! use pagelab_core::{AccessKind, Backing, Event, MapEvent, MemRef, Prot, Sharing as Share, ThreadId, VirtAddr};
//! use pagelab_mm::sharing::{Config, PageTables, Sharing};
//!
//! let mut m = Sharing::new(Config::ia32_pae(PageTables::Private)).unwrap();
//! for pid in 1..=3 {
//!     m.event(&Event::Switch(ThreadId { pid, tid: pid })).unwrap();
//!     let map = MapEvent { start: VirtAddr(0x1000_0000), len: 4 << 20, prot: Prot(Prot::READ | Prot::WRITE),
//!         backing: Backing::File { file_id: 7, offset: 0 }, sharing: Share::Shared };
//!     m.event(&Event::Map(Box::new(map))).unwrap();
//!     for page in 0..1024u64 {
//!         let r = MemRef { addr: VirtAddr(0x1000_0000) + page * 4096, size: 8, kind: AccessKind::Load };
//!         m.event(&Event::Ref(r)).unwrap();
//!     }
//! }
//! let s = m.stats();
//! // Three processes, each with two PTE pages, three PMD pages (PAE
//! // preallocates them) and a 32-byte PGD.
//! assert_eq!(s.page_tables.pages_by_level, [6, 9, 3]);
//! assert_eq!(s.page_tables.page_table_bytes, 3 * (5 * 4096 + 32));
//! ```

mod attach;
pub mod chains;
pub mod ivset;
mod model;
#[cfg(test)]
mod names_tests;
mod ops;
mod process;
pub mod reference;
pub mod rmap;
mod run;
mod stats;
mod tables;

pub use model::Sharing;
pub use stats::{PageTableStats, SharingCounts, SharingStats};

use crate::pagetable::{Geometry, GeometrySpec};
use pagelab_core::PageSize;
use serde::Serialize;

/// How page tables are shared between processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PageTables {
    /// Every process has its own tables (today's Linux for non-hugetlb memory).
    Private,
    /// McCracken's shared PTE pages: a PTE page covering a whole, aligned
    /// range of a shared mapping is shared by every process that maps the
    /// same object pages there with the same protection. Sharing ends when a
    /// process changes the protection of any page of the range, unmaps part
    /// of it, or where the range is not wholly inside the mapping. At fork,
    /// a PTE page wholly inside one private mapping is shared copy-on-write
    /// with the child; a write or an anonymous fault through it, or an
    /// mprotect or partial unmap of its range, copies it for that process,
    /// and a read fault on a file page fills the PTE in place (`attach.rs`).
    Shared,
    /// Linux's `huge_pmd_share`: a PMD page covering a whole, PUD-aligned
    /// range of a shared hugetlb mapping is shared; everything else private.
    HugetlbPmdShare,
}

impl PageTables {
    /// Parses `private`, `shared` or `hugetlb-pmd-share`.
    pub fn parse(s: &str) -> Result<PageTables, SharingError> {
        match s {
            "private" => Ok(PageTables::Private),
            "shared" => Ok(PageTables::Shared),
            "hugetlb-pmd-share" => Ok(PageTables::HugetlbPmdShare),
            _ => Err(SharingError::Config {
                field: "page-tables",
                why: format!("`{s}` is not one of private, shared, hugetlb-pmd-share"),
            }),
        }
    }
}

/// A hugetlb pool reserved at boot: `count` pages of `size`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct HugetlbPool {
    /// The page size.
    pub size: PageSize,
    /// Pages in the pool.
    pub count: u64,
}

/// The modelled machine and the choices of one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Config {
    /// Page-table geometry: levels, entries, PTE size, leaf levels.
    pub geometry: Geometry,
    /// First byte above user space (3G on a 32-bit kernel with the 3G/1G split).
    pub user_top: u64,
    /// The tables of the level below the root that cover user space are
    /// allocated with the root and kept for the process's life (i386 PAE's
    /// `pgd_alloc` preallocates its three user PMD pages).
    pub prealloc_below_root: bool,
    /// Physical memory, bytes (hugetlb pools must fit in it).
    pub memory_bytes: u64,
    /// Page-table sharing.
    pub page_tables: PageTables,
    /// Hugetlb pools reserved at boot.
    pub hugetlb: Vec<HugetlbPool>,
    /// Sizes of the reverse-map structures.
    pub rmap: rmap::RmapSizes,
}

impl Config {
    /// The paper's machine: i386 with PAE, 16G, 3G of user space.
    pub fn ia32_pae(page_tables: PageTables) -> Config {
        let spec = GeometrySpec {
            base: PageSize::K4,
            bits_per_level: vec![9, 9, 2],
            leaf_levels: vec![1, 2],
            max_run_shift: vec![],
            entry_bytes: 8,
        };
        Config {
            geometry: Geometry::from_spec(&spec).expect("the PAE geometry is valid"),
            user_top: 3 << 30,
            prealloc_below_root: true,
            memory_bytes: 16 << 30,
            page_tables,
            hugetlb: Vec::new(),
            rmap: rmap::RmapSizes::default(),
        }
    }

    /// x86-64 with four levels, 128T of user space and `memory` bytes; the
    /// reverse map's chains still counted with the paper's 32-bit sizes.
    pub fn x86_64(page_tables: PageTables, memory: u64) -> Config {
        Config {
            geometry: Geometry::x86_64(),
            user_top: 1 << 47,
            prealloc_below_root: false,
            memory_bytes: memory,
            page_tables,
            hugetlb: Vec::new(),
            rmap: rmap::RmapSizes::default(),
        }
    }

    /// A machine of this geometry and memory: a 32-bit one (32-bit virtual
    /// addresses) with the 3G/1G split, preallocating the tables below a
    /// 4-entry root as i386 PAE does; a 64-bit one with the lower half of
    /// its virtual addresses for user space.
    pub fn for_machine(geometry: Geometry, memory_bytes: u64, page_tables: PageTables) -> Config {
        let va = geometry.va_bits();
        Config {
            user_top: if va <= 32 { 3 << 30 } else { 1 << (va - 1) },
            prealloc_below_root: va <= 32
                && geometry.levels() > 1
                && geometry.bits(geometry.levels()) == 2,
            geometry,
            memory_bytes,
            page_tables,
            hugetlb: Vec::new(),
            rmap: rmap::RmapSizes::default(),
        }
    }

    /// Checks the configuration against itself.
    pub fn check(&self) -> Result<(), SharingError> {
        let g = &self.geometry;
        let mut reserved: u64 = 0;
        for pool in &self.hugetlb {
            let fits = (1..=g.levels())
                .any(|l| g.is_leaf_level(l) && g.entry_shift(l) == pool.size.shift());
            if !fits || pool.size == g.base() {
                return Err(SharingError::Config {
                    field: "hugetlb",
                    why: format!(
                        "the page table cannot map {} as one huge leaf; use one of {}",
                        pagelab_core::Bytes(pool.size.bytes()),
                        huge_sizes(g)
                    ),
                });
            }
            reserved = pool
                .size
                .bytes()
                .checked_mul(pool.count)
                .and_then(|b| b.checked_add(reserved))
                .unwrap_or(u64::MAX);
        }
        if reserved > self.memory_bytes {
            return Err(SharingError::Config {
                field: "hugetlb",
                why: format!(
                    "the pools take {} but the machine has {} of memory",
                    pagelab_core::Bytes(reserved),
                    pagelab_core::Bytes(self.memory_bytes)
                ),
            });
        }
        if self.user_top == 0 || self.user_top > 1u64 << g.va_bits().min(63) {
            return Err(SharingError::Config {
                field: "user_top",
                why: format!("must be above 0 and at most 2^{}", g.va_bits()),
            });
        }
        if self.rmap.pointer_bytes == 0 || self.rmap.line_bytes <= self.rmap.pointer_bytes {
            return Err(SharingError::Config {
                field: "rmap",
                why: "pointer_bytes must be above 0 and below line_bytes".into(),
            });
        }
        Ok(())
    }
}

fn huge_sizes(g: &Geometry) -> String {
    let v: Vec<String> = (2..=g.levels())
        .filter(|&l| g.is_leaf_level(l))
        .map(|l| pagelab_core::Bytes(1u64 << g.entry_shift(l)).to_string())
        .collect();
    if v.is_empty() {
        "none (this geometry has no huge leaves)".into()
    } else {
        v.join(", ")
    }
}

/// Why the sharing model refused a configuration or an event.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SharingError {
    /// A configuration value is not allowed; names the field and what is.
    #[error("{field}: {why}")]
    Config {
        /// The option or field.
        field: &'static str,
        /// What is wrong and what is allowed.
        why: String,
    },
    /// An event cannot be modelled; says which and why.
    #[error("event {index}: {why}")]
    Event {
        /// 0-based index of the event in the stream.
        index: u64,
        /// What is wrong.
        why: String,
    },
}
