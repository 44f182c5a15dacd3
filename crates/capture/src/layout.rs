//! Linux's placement of mappings: where the kernel puts each mmap request of
//! an x86-64 process (4-level paging, the default 47-bit address window),
//! without randomisation, as under `setarch -R`.
//!
//! A captured trace holds each request as the program made it
//! ([`MapRequest`]) and where QEMU put it; QEMU user mode places mappings by
//! rules of its own, so 2M alignment differs from the kernel's. This module
//! is the kernel's rule, as Linux 6.13 and later apply it
//! (`mm/mmap.c: __get_unmapped_area`, `arch/x86/kernel/sys_x86_64.c`,
//! `mm/huge_memory.c: __thp_get_unmapped_area`):
//!
//! - `mmap_base` lies below the stack by a gap of `RLIMIT_STACK` plus the
//!   stack guard gap (1M), at least 128M and at most 5/6 of the address
//!   space (8M stacks: 0x7ffff7fff000).
//! - A hint is rounded down to a page (and up to `mmap_min_addr`); it is
//!   taken when the range is free up to the next mapping (and 1M clear of a
//!   stack that grows down), else the search below runs.
//! - The search is top-down: the highest free range below `mmap_base` that
//!   holds the length, the mapping at its top.
//! - A private anonymous mapping whose length is a multiple of 2M is
//!   searched with 2M more and placed at the highest 2M boundary that
//!   leaves it inside (`thp_get_unmapped_area`), unless its hint was free.
//! - `MAP_FIXED` is the hint itself; `MAP_FIXED_NOREPLACE` the hint or
//!   `EEXIST`.
//!
//! - A file mapping that reaches 2M past a 2M boundary of its offset is
//!   searched with 2M more and placed where its address matches its offset
//!   modulo 2M (the filesystem's `thp_get_unmapped_area`), unless its hint
//!   was free.
//!
//! What it does not model is refused ([`Unmodelled`]), never guessed: shared
//! anonymous memory (shmem's own placement), `MAP_32BIT`, `MAP_HUGETLB`, hints above 47 bits and the
//! bottom-up fallback when no range below `mmap_base` is free.
//! `crates/capture/tests/layout.rs` holds it to the kernel itself.

use pagelab_core::{MapRequest, VirtAddr};
use std::collections::BTreeMap;

mod exec;
pub use exec::{
    exec_strings, ExecLayout, ExecRequest, Region, RegionKind, ELF_ET_DYN_BASE, STACK_TOP,
};

/// The base page (x86-64's 4K), from `pagelab_core`.
const PAGE: u64 = pagelab_core::PageSize::MIN.bytes();
const PMD: u64 = 2 << 20;
/// The top of the default address window (`DEFAULT_MAP_WINDOW`, 47 bits).
pub const TASK_SIZE: u64 = (1 << 47) - PAGE;
/// The gap kept below a stack that grows down (`stack_guard_gap`, 256 pages).
pub const STACK_GUARD_GAP: u64 = 256 * PAGE;
const MIN_GAP: u64 = 128 << 20;
const MAP_32BIT: u32 = 0x40;

/// What the layout depends on besides the mappings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayoutParams {
    /// The soft `RLIMIT_STACK` in bytes, `None` when unlimited.
    pub rlimit_stack: Option<u64>,
    /// The lowest address a mapping may take: the larger of
    /// `/proc/sys/vm/mmap_min_addr` and the kernel's `CONFIG_LSM_MMAP_MIN_ADDR`
    /// (65536 in Debian's, Fedora's and Ubuntu's kernels).
    pub mmap_min_addr: u64,
    /// Whether the kernel has transparent huge pages (the 2M alignment of
    /// large anonymous mappings), whatever the THP mode.
    pub thp: bool,
    /// Whether file mappings are aligned for huge pages as anonymous ones
    /// are (2M past a 2M boundary of their offset): the filesystem's
    /// `get_unmapped_area` is `thp_get_unmapped_area` (ext4, xfs, btrfs on
    /// 64-bit kernels with THP).
    pub file_thp: bool,
    /// Bytes of the vDSO's data pages (`[vvar]` and `[vvar_vclock]`), mapped
    /// below its code: 24K on Linux 6.18's x86-64.
    pub vdso_data: u64,
    /// Bytes of the vDSO's code (`[vdso]`): 8K on Linux 6.18's x86-64.
    pub vdso_text: u64,
}

impl Default for LayoutParams {
    fn default() -> Self {
        LayoutParams {
            rlimit_stack: Some(8 << 20),
            mmap_min_addr: 65536,
            thp: true,
            file_thp: true,
            vdso_data: 6 * PAGE,
            vdso_text: 2 * PAGE,
        }
    }
}

/// Why a request's placement is not modelled, or why the kernel refuses it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unmodelled {
    /// A rule this module does not follow: its name.
    #[error("not modelled: {0}")]
    Rule(&'static str),
    /// The kernel refuses the request with this errno.
    #[error("the kernel refuses it (errno {0})")]
    Refused(i32),
}

/// One mapping of the address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Area {
    end: u64,
    grows_down: bool,
}

impl crate::intervals::Interval for Area {
    fn end(&self) -> u64 {
        self.end
    }
    fn ending_at(self, end: u64) -> Self {
        Area { end, ..self }
    }
    fn from(self, _start: u64, _at: u64) -> Self {
        self
    }
}

/// A process's address space as Linux lays it out.
#[derive(Clone, Debug)]
pub struct LinuxLayout {
    params: LayoutParams,
    mmap_base: u64,
    areas: BTreeMap<u64, Area>,
}

impl LinuxLayout {
    /// An empty address space.
    pub fn new(params: LayoutParams) -> LinuxLayout {
        let gap = params
            .rlimit_stack
            .map_or(u64::MAX, |r| r.saturating_add(STACK_GUARD_GAP))
            .clamp(MIN_GAP, TASK_SIZE / 6 * 5);
        LinuxLayout {
            params,
            mmap_base: (TASK_SIZE - gap).next_multiple_of(PAGE),
            areas: BTreeMap::new(),
        }
    }

    /// The mappings, in address order: start, length and whether each grows down.
    pub fn areas(&self) -> impl Iterator<Item = (VirtAddr, u64, bool)> + '_ {
        self.areas
            .iter()
            .map(|(s, a)| (VirtAddr(*s), a.end - s, a.grows_down))
    }

    /// Whether `[start, start + len)` is free of mappings.
    pub fn is_free(&self, start: VirtAddr, len: u64) -> bool {
        let (s, e) = page_range(start.0, len);
        !self.overlaps(s, e)
    }

    /// Where the top-down search starts (`mm->mmap_base`).
    pub fn mmap_base(&self) -> VirtAddr {
        VirtAddr(self.mmap_base)
    }

    /// Adds a mapping of `[start, start + len)` (page-rounded), replacing
    /// what was there; `grows_down` marks a stack (`MAP_GROWSDOWN`, the main
    /// stack), which keeps [`STACK_GUARD_GAP`] clear below it.
    pub fn insert(&mut self, start: VirtAddr, len: u64, grows_down: bool) {
        let (s, e) = page_range(start.0, len);
        self.remove(VirtAddr(s), e - s);
        self.areas.insert(s, Area { end: e, grows_down });
    }

    /// Removes `[start, start + len)` (munmap), cutting mappings it overlaps.
    pub fn remove(&mut self, start: VirtAddr, len: u64) {
        let (s, e) = page_range(start.0, len);
        crate::intervals::cut(&mut self.areas, s, e);
    }

    /// Where the kernel places `req` in this address space (the space is not changed).
    pub fn place(&self, req: &MapRequest) -> Result<VirtAddr, Unmodelled> {
        let len = req.len.next_multiple_of(PAGE);
        if len == 0 || len > TASK_SIZE {
            return Err(Unmodelled::Refused(if len == 0 { 22 } else { 12 }));
        }
        let flags = req.flags;
        let hint = req.hint.0;
        if flags & (MapRequest::FIXED | MapRequest::FIXED_NOREPLACE) != 0 {
            if !hint.is_multiple_of(PAGE) {
                return Err(Unmodelled::Refused(22));
            }
            if flags & MapRequest::FIXED == 0 && self.overlaps(hint, hint + len) {
                return Err(Unmodelled::Refused(17));
            }
            return Ok(VirtAddr(hint));
        }
        if flags & MAP_32BIT != 0 {
            return Err(Unmodelled::Rule("MAP_32BIT (the bottom-up area below 2G)"));
        }
        if flags & MapRequest::HUGETLB != 0 {
            return Err(Unmodelled::Rule("MAP_HUGETLB (hugetlbfs's own placement)"));
        }
        let shared = flags & 3 != MapRequest::PRIVATE;
        let anon = flags & MapRequest::ANONYMOUS != 0;
        if anon && shared {
            return Err(Unmodelled::Rule(
                "shared anonymous memory (shmem's own placement)",
            ));
        }
        // round_hint_to_min
        let mut hint = hint & !(PAGE - 1);
        if hint != 0 && hint < self.params.mmap_min_addr {
            hint = self.params.mmap_min_addr.next_multiple_of(PAGE);
        }
        if hint > TASK_SIZE {
            return Err(Unmodelled::Rule("hints above 47 bits (the 5-level window)"));
        }
        if !anon {
            let off_align = req.offset.next_multiple_of(PMD);
            let off_end = req.offset.saturating_add(len);
            if off_end > off_align && off_end - off_align >= PMD {
                if !self.params.file_thp {
                    return Err(Unmodelled::Rule(
                        "file mappings of 2M past a 2M boundary on a filesystem without huge-page alignment",
                    ));
                }
                if let Some(at) = self.thp_area(hint, len, req.offset) {
                    return Ok(at);
                }
            }
            return self.topdown(hint, len);
        }
        if self.params.thp && len.is_multiple_of(PMD) {
            if let Some(at) = self.thp_area(hint, len, 0) {
                return Ok(at);
            }
        }
        self.topdown(hint, len)
    }

    /// `__thp_get_unmapped_area`: a search for 2M more, then the place in it
    /// whose address matches the offset modulo 2M, as high as it goes; a free
    /// hint as it is.
    fn thp_area(&self, hint: u64, len: u64, offset: u64) -> Option<VirtAddr> {
        let ret = self.topdown(hint, len + PMD).ok()?.0;
        if ret == hint {
            return Some(VirtAddr(ret));
        }
        let sub = offset.wrapping_sub(ret) & (PMD - 1);
        Some(VirtAddr(if sub == 0 { ret + PMD } else { ret + sub }))
    }

    /// Places `req` and adds it; returns where it went.
    pub fn map(&mut self, req: &MapRequest) -> Result<VirtAddr, Unmodelled> {
        let at = self.place(req)?;
        self.insert(at, req.len, req.flags & MapRequest::GROWSDOWN != 0);
        Ok(at)
    }

    fn overlaps(&self, s: u64, e: u64) -> bool {
        self.areas
            .range(..e)
            .next_back()
            .is_some_and(|(_, a)| a.end > s)
    }

    /// The first mapping that ends above `addr` (`find_vma`).
    fn find(&self, addr: u64) -> Option<(u64, Area)> {
        if let Some((k, a)) = self.areas.range(..=addr).next_back() {
            if a.end > addr {
                return Some((*k, *a));
            }
        }
        self.areas
            .range(addr.saturating_add(1)..)
            .next()
            .map(|(k, a)| (*k, *a))
    }

    /// `arch_get_unmapped_area_topdown` for a request of `len` bytes.
    fn topdown(&self, hint: u64, len: u64) -> Result<VirtAddr, Unmodelled> {
        if hint != 0 && TASK_SIZE - len >= hint {
            let ok = match self.find(hint) {
                None => true,
                Some((start, a)) => hint + len <= start_gap(start, a),
            };
            if ok {
                return Ok(VirtAddr(hint));
            }
        }
        let low = PAGE.max(self.params.mmap_min_addr);
        let high = self.mmap_base;
        // Free ranges from the top: [end of a mapping, start of the one above).
        let mut above = self.areas.range(high..).next().map(|(k, a)| (*k, *a));
        let mut below = self.areas.range(..high).rev().map(|(k, a)| (*k, *a));
        loop {
            let next = below.next();
            let lo = next.map_or(0, |(_, a)| a.end).max(low);
            let hi = above.map_or(high, |(s, a)| start_gap(s, a)).min(high);
            if hi >= lo && hi - lo >= len {
                return Ok(VirtAddr(hi - len));
            }
            match next {
                Some(n) if n.1.end > low => above = Some(n),
                _ => {
                    return Err(Unmodelled::Rule(
                        "the bottom-up fallback (no free range below mmap_base)",
                    ))
                }
            }
        }
    }
}

/// Where the free range below a mapping ends (`vm_start_gap`).
fn start_gap(start: u64, a: Area) -> u64 {
    if a.grows_down {
        start.saturating_sub(STACK_GUARD_GAP)
    } else {
        start
    }
}

fn page_range(start: u64, len: u64) -> (u64, u64) {
    let s = start & !(PAGE - 1);
    (s, start.saturating_add(len).next_multiple_of(PAGE).max(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn anon(hint: u64, len: u64) -> MapRequest {
        MapRequest {
            hint: VirtAddr(hint),
            len,
            prot: pagelab_core::Prot(3),
            flags: MapRequest::PRIVATE | MapRequest::ANONYMOUS,
            file: None,
            offset: 0,
        }
    }

    #[test]
    fn mmap_base_is_128m_below_the_top_for_an_8m_stack() {
        let l = LinuxLayout::new(LayoutParams::default());
        assert_eq!(l.mmap_base(), VirtAddr(0x7fff_f7ff_f000));
        let big = LinuxLayout::new(LayoutParams {
            rlimit_stack: Some(1 << 30),
            ..LayoutParams::default()
        });
        assert_eq!(
            big.mmap_base(),
            VirtAddr(TASK_SIZE - (1 << 30) - STACK_GUARD_GAP)
        );
    }

    #[test]
    fn requests_go_top_down_and_large_anonymous_ones_on_2m_boundaries() {
        let mut l = LinuxLayout::new(LayoutParams::default());
        let top = 0x7fff_f7ff_f000;
        assert_eq!(l.map(&anon(0, PAGE)), Ok(VirtAddr(top - PAGE)));
        assert_eq!(l.map(&anon(0, PMD)), Ok(VirtAddr(0x7fff_f7c0_0000)));
        // Not a multiple of 2M: right below, unaligned.
        assert_eq!(
            l.map(&anon(0, PMD + PAGE)),
            Ok(VirtAddr(0x7fff_f7c0_0000 - PMD - PAGE))
        );
        // A free hint is taken; a taken one is not.
        assert_eq!(
            l.map(&anon(0x6000_0000_0123, PAGE)),
            Ok(VirtAddr(0x6000_0000_0000))
        );
        assert_ne!(
            l.place(&anon(0x6000_0000_0000, PAGE)),
            Ok(VirtAddr(0x6000_0000_0000))
        );
        // The 2M one left almost 2M free above it (its alignment): 3M fits
        // only once it is unmapped, at the top of the joined free range.
        let three = anon(0, 3 << 20);
        assert!(l.place(&three).unwrap().0 < 0x7fff_f7c0_0000);
        l.remove(VirtAddr(0x7fff_f7c0_0000), PMD);
        assert_eq!(l.place(&three), Ok(VirtAddr(top - PAGE - (3 << 20))));
    }
}
