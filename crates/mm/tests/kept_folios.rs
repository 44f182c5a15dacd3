//! `linux-thp` keeps a large folio whole when part of its mapping goes (munmap,
//! MADV_DONTNEED) or changes (mprotect), as Linux does: checked on Linux 6.18 with a
//! program that mapped 64K folios in always mode, unmapped or re-protected parts of them
//! and read `/proc/self/pagemap` and `/proc/kpageflags` (every still-mapped page showed
//! the same head and tails; a write into the hole got a 4K page), and in mm/rmap.c
//! (`__folio_remove_rmap` queues a partly mapped anonymous folio with
//! `deferred_split_folio`; only the deferred-split shrinker splits it).

use crate::common;

use common::{mm, mm_no_reclaim, per_size, touch_page, K, M};
use pagelab_core::{Advice, Event, Prot, VirtAddr};
use pagelab_mm::phys::FrameAllocator;
use pagelab_mm::system::Mm;

const BASE: u64 = 0x4000_0000;

fn free(m: &Mm) -> u64 {
    m.machine().phys.free_frames()
}

fn ev(m: &mut Mm, e: Event) {
    m.event(&e).unwrap();
    m.check().unwrap();
}

fn unmap(m: &mut Mm, start: u64, len: u64) {
    let start = VirtAddr(start);
    ev(m, Event::Unmap { start, len });
}

fn exit(m: &mut Mm) {
    ev(m, Event::Exit { status: 0 });
}

/// Four 64K folios written at `BASE`, their frames' heads.
fn four_folios(m: &mut Mm) -> Vec<u64> {
    common::map(m, BASE, 256 * K);
    (0..4)
        .map(|i| {
            let (size, pfn) = touch_page(m, BASE + i * 64 * K);
            assert_eq!(size, 64 * K);
            pfn
        })
        .collect()
}

#[test]
fn a_partly_unmapped_folio_stays_whole_and_counts_whole_at_exit() {
    let mut m = mm_no_reclaim("linux-thp:enabled=never,64K=always", 64 * M);
    let start = free(&m);
    let heads = four_folios(&mut m);
    let used = start - free(&m);
    assert_eq!(used, 4 * 16);
    // munmap of the first folio's last 24K (the kernel's munmap case).
    unmap(&mut m, BASE + 40 * K, 24 * K);
    assert_eq!(
        start - free(&m),
        used,
        "nothing freed: the folio stays whole"
    );
    assert_eq!(m.machine().stats.rss_bytes, 256 * K - 24 * K);
    // Its mapped pages are 4K pages of the same frames.
    assert_eq!(touch_page(&mut m, BASE + 36 * K), (4 * K, heads[0] + 9));
    // MADV_DONTNEED of the second's first 8K, mprotect of part of the third.
    let advice = Advice::DontNeed;
    ev(
        &mut m,
        Event::Advise {
            start: VirtAddr(BASE + 64 * K),
            len: 8 * K,
            advice,
        },
    );
    let prot = Prot(Prot::READ);
    ev(
        &mut m,
        Event::Protect {
            start: VirtAddr(BASE + 128 * K),
            len: 8 * K,
            prot,
        },
    );
    assert_eq!(start - free(&m), used);
    assert_eq!(touch_page(&mut m, BASE + 72 * K), (4 * K, heads[1] + 2));
    assert_eq!(touch_page(&mut m, BASE + 136 * K), (4 * K, heads[2] + 2));
    // A write into the hole: a 4K page (its 64K range is not empty), not the folio's frame.
    let (size, pfn) = touch_page(&mut m, BASE + 64 * K);
    assert_eq!(size, 4 * K);
    assert!(pfn < heads[1] || pfn >= heads[1] + 16);
    assert_eq!(start - free(&m), used + 1);
    let kept: Vec<_> = m
        .machine()
        .kept_folios()
        .map(|(h, f)| (h.0, f.holes.len()))
        .collect();
    assert_eq!(kept, vec![(heads[0], 6), (heads[1], 2), (heads[2], 0)]);
    // kpageflags shows each as one 64K folio; so does the model at exit.
    exit(&mut m);
    assert_eq!(per_size(&m, "exit_anon_folios", "64K"), 4);
    assert_eq!(free(&m), start, "every frame back after the exit");
    assert_eq!(m.machine().kept_folios().count(), 0);
}

#[test]
fn the_last_mapped_page_frees_the_folio_whole() {
    let mut m = mm_no_reclaim("linux-thp:enabled=never,64K=always", 64 * M);
    let start = free(&m);
    four_folios(&mut m);
    unmap(&mut m, BASE + 40 * K, 24 * K);
    unmap(&mut m, BASE + 8 * K, 16 * K);
    assert_eq!(start - free(&m), 64);
    unmap(&mut m, BASE, 8 * K);
    assert_eq!(start - free(&m), 64);
    unmap(&mut m, BASE + 24 * K, 16 * K);
    assert_eq!(start - free(&m), 48, "the folio's 16 frames go at once");
    assert_eq!(m.machine().kept_folios().count(), 0);
}

#[test]
fn a_pmd_folio_partly_unmapped_stays_one_2m_folio() {
    let mut m = mm_no_reclaim("linux-thp:enabled=always", 64 * M);
    let start = free(&m);
    common::map(&mut m, BASE, 4 * M);
    let (size, head) = touch_page(&mut m, BASE);
    assert_eq!(size, 2 * M);
    // split_huge_pmd, then the upper half's PTEs zapped: the folio stays 2M.
    unmap(&mut m, BASE + M, M);
    assert_eq!(start - free(&m), 512);
    assert_eq!(touch_page(&mut m, BASE + 4 * K), (4 * K, head + 1));
    exit(&mut m);
    assert_eq!(per_size(&m, "exit_anon_folios", "2M"), 1);
    assert_eq!(free(&m), start);
}

#[test]
fn fork_shares_the_pages_of_a_partly_unmapped_folio() {
    let mut m = mm_no_reclaim("linux-thp:enabled=never,64K=always", 64 * M);
    let start = free(&m);
    four_folios(&mut m);
    unmap(&mut m, BASE + 40 * K, 24 * K);
    let parent = m.pid();
    ev(&mut m, Event::fork(9));
    let switch = |m: &mut Mm, pid| {
        let t = pagelab_core::ThreadId { pid, tid: pid };
        ev(m, Event::Switch(t));
    };
    // The parent lets go of the folio's pages; the child still maps them.
    unmap(&mut m, BASE, 40 * K);
    assert_eq!(start - free(&m), 64);
    switch(&mut m, 9);
    // A copy-on-write of one of them copies a 4K page.
    assert_eq!(touch_page(&mut m, BASE).0, 4 * K);
    exit(&mut m);
    assert_eq!(per_size(&m, "exit_anon_folios", "64K"), 4);
    switch(&mut m, parent);
    exit(&mut m);
    assert_eq!(per_size(&m, "exit_anon_folios", "64K"), 7);
    assert_eq!(free(&m), start);
}

#[test]
fn reclaim_splits_partly_unmapped_folios_and_frees_their_holes() {
    // 16M with reclaim: a partly unmapped folio, then enough writes to wake kswapd.
    let mut m = mm("linux-thp:enabled=never,64K=always", 16 * M);
    four_folios(&mut m);
    unmap(&mut m, BASE + 40 * K, 24 * K);
    assert_eq!(m.machine().kept_hole_frames(), 6);
    common::map(&mut m, 0x5000_0000, 32 * M);
    let mut addr = 0x5000_0000;
    while m.reclaim_runs() == 0 {
        touch_page(&mut m, addr);
        addr += 64 * K;
        assert!(addr < 0x5000_0000 + 32 * M, "reclaim never ran");
    }
    m.check().unwrap();
    assert_eq!(m.machine().kept_hole_frames(), 0);
    assert!(m.machine().stats.reclaim_splits >= 1);
}

#[test]
fn other_policies_split_the_frames_with_the_mapping() {
    // eager maps 64K pages too, and frees the unmapped part of one at once.
    let mut m = mm_no_reclaim("eager:sizes=64K", 64 * M);
    let start = free(&m);
    common::map(&mut m, BASE, 256 * K);
    assert_eq!(touch_page(&mut m, BASE).0, 64 * K);
    unmap(&mut m, BASE + 40 * K, 24 * K);
    assert_eq!(start - free(&m), 10);
    assert_eq!(m.machine().kept_folios().count(), 0);
}
