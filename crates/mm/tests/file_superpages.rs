//! Superpages in the page cache: a file page is mapped as a superpage only
//! where virtual, physical and file offsets are aligned alike and the VMA
//! covers the aligned range; the page cache holds one folio per aligned
//! extent, shared by every mapping; linux-thp reads 2M folios in VMAs given
//! MADV_HUGEPAGE; the reservation policy reads an extent
//! page by page and promotes the mapping at once when the whole extent is
//! in the page cache. `check()` after every step.

use crate::common;

use common::{access_page, ev, mm, K, M};
use pagelab_core::{Advice, Backing, Event, MapEvent, Prot, Sharing, ThreadId, VirtAddr};
use pagelab_mm::pagetable::PageTable;
use pagelab_mm::system::Mm;

const A: u64 = 0x4000_0000;
const FILE: u64 = 9;

/// Maps the file with MADV_HUGEPAGE (which linux-thp's PMD-order readahead needs).
fn map_file(m: &mut Mm, start: u64, len: u64, offset: u64, sharing: Sharing) {
    map_file_plain(m, start, len, offset, sharing);
    let advise = Event::Advise {
        start: VirtAddr(start),
        len,
        advice: Advice::HugePage,
    };
    m.event(&advise).unwrap();
}

fn map_file_plain(m: &mut Mm, start: u64, len: u64, offset: u64, sharing: Sharing) {
    let e = MapEvent {
        start: VirtAddr(start),
        len,
        prot: Prot(Prot::READ),
        backing: Backing::File {
            file_id: FILE,
            offset,
        },
        sharing,
    };
    ev(m, Event::Map(Box::new(e)));
}

/// Size and first 4K frame of the page mapping `addr` after touching it (a read).
fn touch(m: &mut Mm, addr: u64) -> (u64, u64) {
    access_page(m, addr, false)
}

#[test]
fn aligned_file_extents_are_mapped_as_one_superpage() {
    for policy in ["linux-thp:enabled=always", "reservation"] {
        let mut m = mm(policy, 256 * M);
        map_file(&mut m, A, 4 * M, 2 * M, Sharing::Private);
        // Reservation reads page by page: fault every page of the first extent.
        for i in 0..512 {
            touch(&mut m, A + i * 4 * K);
        }
        let (size, pfn) = touch(&mut m, A + 5 * K);
        assert_eq!(size, 2 * M, "{policy}");
        // Physically aligned: the folio is a naturally aligned block.
        assert_eq!(pfn % 512, 0, "{policy}");
        assert_eq!(m.machine().stats.file_superpage_faults, 1, "{policy}");
        assert_eq!(m.machine().cache_frames(), 512, "{policy}");
    }
}

#[test]
fn a_misaligned_file_offset_gets_base_pages() {
    for policy in ["linux-thp:enabled=always", "reservation"] {
        let mut m = mm(policy, 256 * M);
        // File offset 4K at a 2M-aligned address: virtual and file space disagree.
        map_file(&mut m, A, 4 * M, 4 * K, Sharing::Private);
        for i in 0..1024 {
            assert_eq!(touch(&mut m, A + i * 4 * K).0, 4 * K, "{policy} page {i}");
        }
        // Offset 0 at an address 1M into a 2M page: misaligned the other way.
        map_file(&mut m, A + 17 * M, 4 * M, 0, Sharing::Private);
        for i in 0..1024 {
            assert_eq!(touch(&mut m, A + 17 * M + i * 4 * K).0, 4 * K, "{policy}");
        }
        assert_eq!(m.machine().stats.file_superpage_faults, 0, "{policy}");
    }
}

#[test]
fn a_vma_that_does_not_cover_the_extent_gets_base_pages() {
    let mut m = mm("linux-thp:enabled=always", 256 * M);
    map_file(&mut m, A, M, 0, Sharing::Shared);
    assert_eq!(touch(&mut m, A).0, 4 * K);
    // The page cache read a base folio: a later aligned mapping reads its own 2M folio elsewhere.
    map_file(&mut m, A + 64 * M, 4 * M, 2 * M, Sharing::Shared);
    assert_eq!(touch(&mut m, A + 64 * M).0, 2 * M);
}

#[test]
fn policies_without_file_superpages_map_base_pages() {
    for policy in [
        "base:4K",
        "eager",
        "explicit",
        "relocation",
        "linux-thp:2M=never",
    ] {
        let mut m = mm(policy, 256 * M);
        map_file(&mut m, A, 4 * M, 0, Sharing::Private);
        assert_eq!(touch(&mut m, A).0, 4 * K, "{policy}");
    }
    // linux-thp without MADV_HUGEPAGE: no PMD-order readahead, even with `always`.
    let mut m = mm("linux-thp:enabled=always", 256 * M);
    map_file_plain(&mut m, A, 4 * M, 0, Sharing::Private);
    assert_eq!(touch(&mut m, A).0, 4 * K);
    // The default `madvise` with MADV_HUGEPAGE: 2M.
    let mut m = mm("linux-thp", 256 * M);
    map_file(&mut m, A, 4 * M, 0, Sharing::Private);
    assert_eq!(touch(&mut m, A).0, 2 * M);
}

#[test]
fn every_mapping_shares_the_cached_folio() {
    let mut m = mm("linux-thp:enabled=always", 256 * M);
    map_file(&mut m, A, 4 * M, 0, Sharing::Shared);
    let (size, pfn) = touch(&mut m, A);
    assert_eq!(size, 2 * M);
    let reads = m.machine().stats.file_read_bytes;
    assert_eq!(reads, 2 * M);
    // Another process maps the same file elsewhere, aligned: the same frames, no read.
    m.event(&Event::Switch(ThreadId { pid: 2, tid: 2 }))
        .unwrap();
    map_file(&mut m, A + 8 * M, 2 * M, 0, Sharing::Shared);
    assert_eq!(touch(&mut m, A + 8 * M + 4 * K), (2 * M, pfn));
    assert_eq!(m.machine().stats.file_read_bytes, reads);
    assert_eq!(m.machine().stats.major_faults, 1);
    // A misaligned mapping of the same extent maps base pages of the same folio.
    map_file(&mut m, A + 32 * M + 4 * K, 8 * K, 0, Sharing::Shared);
    assert_eq!(touch(&mut m, A + 32 * M + 4 * K), (4 * K, pfn));
    assert_eq!(touch(&mut m, A + 32 * M + 8 * K), (4 * K, pfn + 1));
}

#[test]
fn reservation_promotes_at_the_fault_that_completes_the_extent() {
    let mut m = mm("reservation", 256 * M);
    map_file(&mut m, A, 2 * M, 0, Sharing::Private);
    for i in 0..511 {
        assert_eq!(touch(&mut m, A + i * 4 * K).0, 4 * K, "page {i}");
    }
    assert_eq!(m.machine().stats.promotions, 0);
    m.take_invalidations();
    // The last page read completes the extent: the base pages become one 2M page.
    assert_eq!(touch(&mut m, A + 511 * 4 * K).0, 2 * M);
    let s = &m.machine().stats;
    assert_eq!((s.promotions, s.file_superpage_faults), (1, 1));
    assert_eq!(s.file_read_bytes, 2 * M);
    assert!(m
        .take_invalidations()
        .contains(&(VirtAddr(A), VirtAddr(A + 2 * M))));
    let p = m.machine().proc(0).unwrap();
    assert_eq!(p.pt.walk(VirtAddr(A)).unwrap().size.bytes(), 2 * M);
}

#[test]
fn reservation_promotes_at_once_when_the_extent_is_already_cached() {
    let mut m = mm("reservation", 256 * M);
    map_file(&mut m, A, 2 * M, 0, Sharing::Private);
    for i in 0..512 {
        touch(&mut m, A + i * 4 * K);
    }
    let reads = m.machine().stats.major_faults;
    // A second mapping of the cached extent: 2M at its first fault, nothing read.
    map_file(&mut m, A + 64 * M, 2 * M, 0, Sharing::Private);
    assert_eq!(touch(&mut m, A + 64 * M + 300 * 4 * K).0, 2 * M);
    assert_eq!(m.machine().stats.major_faults, reads);
    assert_eq!(m.machine().stats.file_superpage_faults, 2);
    // Without reading the whole extent, no promotion: a fresh extent half read stays in base pages.
    map_file(&mut m, A + 128 * M, 2 * M, 2 * M, Sharing::Private);
    for i in 0..256 {
        assert_eq!(touch(&mut m, A + 128 * M + i * 4 * K).0, 4 * K);
    }
}

#[test]
fn a_private_write_to_a_file_superpage_copies_it() {
    let mut m = mm("linux-thp:enabled=always", 256 * M);
    let e = MapEvent {
        start: VirtAddr(A),
        len: 2 * M,
        prot: Prot(Prot::READ | Prot::WRITE),
        backing: Backing::File {
            file_id: FILE,
            offset: 0,
        },
        sharing: Sharing::Private,
    };
    m.event(&Event::Map(Box::new(e))).unwrap();
    let advice = Advice::HugePage;
    let advise = Event::Advise {
        start: VirtAddr(A),
        len: 2 * M,
        advice,
    };
    m.event(&advise).unwrap();
    assert_eq!(touch(&mut m, A).0, 2 * M);
    let t = m.translate(VirtAddr(A + 8 * K), false, true).unwrap();
    m.check().unwrap();
    // The cache keeps its folio; the writer has a private copy.
    assert!(m.machine().stats.copied_bytes > 0);
    assert_eq!(m.machine().cache_frames(), 512);
    assert!(t.flags.contains(pagelab_mm::pagetable::PteFlags::WRITE));
}
