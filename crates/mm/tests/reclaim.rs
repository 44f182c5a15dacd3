//! Reclaim at its thresholds: it starts at the allocation that takes a zone
//! below the low watermark (not one before) and stops at the high one; a
//! superpage is reclaimed whole or split first; a swapped page faults back
//! in as a major fault; clean page-cache pages are dropped and dirty ones
//! written back; the reservation policy preempts before anything mapped is
//! reclaimed. `check()` after every step (swapped pages hold no frames).

use crate::common;

use common::{access, free_frames, map, map_as, mm_with, K, M};
use pagelab_core::{Backing, Bytes, Event, PageSize, Sharing, VirtAddr};
use pagelab_mm::pagetable::PageTable;
use pagelab_mm::phys::{PhysConfig, SuperpageReclaim, WatermarkConfig};
use pagelab_mm::policy::PolicySpec;
use pagelab_mm::system::Mm;

const A: u64 = 0x4000_0000;

/// `memory` bytes (one zone) with watermarks `low` and `high`.
fn mm(policy: &str, memory: u64, low: u64, high: u64, mode: SuperpageReclaim) -> Mm {
    let mut phys = PhysConfig::new(Bytes(memory));
    phys.watermarks = Some(WatermarkConfig {
        low: Bytes(low),
        high: Bytes(high),
    });
    phys.reclaim_superpages = mode;
    mm_with(policy, &phys)
}

fn mapped(m: &Mm, addr: u64) -> Option<u64> {
    let p = m.machine().proc(m.pid())?;
    p.pt.walk(VirtAddr(addr)).map(|t| t.size.bytes())
}

#[test]
fn reclaim_starts_below_low_and_stops_at_high() {
    // 16M = 4096 frames; low 1M = 256 frames, high 2M = 512 frames.
    let mut m = mm("base:4K", 16 * M, M, 2 * M, SuperpageReclaim::Whole);
    map(&mut m, A, 64 * M);
    for i in 0..3840 {
        access(&mut m, A + i * 4 * K, true);
    }
    // 256 free: exactly at low, not below it.
    assert_eq!(free_frames(&m), 256);
    assert_eq!(m.machine().stats.kswapd_runs, 0);
    assert_eq!(m.machine().stats.reclaimed_bytes, 0);
    // The next allocation leaves 255: reclaim runs until 512 are free, not one more.
    access(&mut m, A + 3840 * 4 * K, true);
    let s = &m.machine().stats;
    assert_eq!(s.kswapd_runs, 1);
    assert_eq!(free_frames(&m), 512);
    assert_eq!(s.swapped_out_bytes, 257 * 4 * K);
    assert_eq!(s.reclaimed_bytes, s.swapped_out_bytes);
    assert_eq!(m.swap().bytes(), 257 * 4 * K);
    assert_eq!(s.major_faults, 0);
    // The oldest pages went first (each was touched once, at its fault).
    assert_eq!(mapped(&m, A), None);
    assert_eq!(mapped(&m, A + 3840 * 4 * K), Some(4 * K));
    // Invalidations name the swapped pages of the running process.
    let inv = m.take_invalidations();
    assert!(inv.contains(&(VirtAddr(A), VirtAddr(A + 4 * K))), "{inv:?}");
}

#[test]
fn a_swapped_page_faults_back_as_a_major_fault() {
    let mut m = mm("base:4K", 16 * M, M, 2 * M, SuperpageReclaim::Whole);
    map(&mut m, A, 64 * M);
    for i in 0..3841 {
        access(&mut m, A + i * 4 * K, true);
    }
    assert_eq!(mapped(&m, A), None);
    let before = m.machine().stats.faults;
    access(&mut m, A + 100, false);
    let s = &m.machine().stats;
    assert_eq!((s.major_faults, s.swap_in_faults), (1, 1));
    assert_eq!(s.swapped_in_bytes, 4 * K);
    assert_eq!(s.faults, before + 1);
    assert_eq!(m.swap().bytes(), 256 * 4 * K);
    // A first touch of a page never swapped is a minor fault.
    access(&mut m, A + 5000 * 4 * K, false);
    assert_eq!(m.machine().stats.major_faults, 1);
    // Unmapping frees the swap entries of the range.
    m.event(&Event::Unmap {
        start: VirtAddr(A),
        len: 64 * M,
    })
    .unwrap();
    m.check().unwrap();
    assert_eq!(m.swap().bytes(), 0);
}

#[test]
fn referenced_pages_get_a_second_chance() {
    let mut m = mm("base:4K", 16 * M, M, 2 * M, SuperpageReclaim::Whole);
    map(&mut m, A, 64 * M);
    // The first run looks at every page (each referenced by its fault) and
    // clears the bits of those it keeps.
    for i in 0..3841 {
        access(&mut m, A + i * 4 * K, true);
    }
    assert_eq!(m.machine().stats.kswapd_runs, 1);
    assert_eq!(mapped(&m, A + 256 * 4 * K), None);
    // Pages 300..364 are used again; then new pages wake reclaim again.
    for i in 300..364 {
        access(&mut m, A + i * 4 * K, false);
    }
    for i in 3841..4098 {
        access(&mut m, A + i * 4 * K, true);
    }
    assert_eq!(m.machine().stats.kswapd_runs, 2);
    assert_eq!(m.machine().stats.swapped_out_bytes, 2 * 257 * 4 * K);
    for i in 300..364 {
        assert_eq!(mapped(&m, A + i * 4 * K), Some(4 * K), "page {i}");
    }
    // Pages as old but not used again went instead.
    assert_eq!(mapped(&m, A + 257 * 4 * K), None);
    assert_eq!(mapped(&m, A + 364 * 4 * K), None);
}

/// 16M of 2M pages under linux-thp, low 1M and high 1.5M; the eighth 2M
/// page empties memory and wakes reclaim.
fn eight_huge_pages(mode: SuperpageReclaim) -> Mm {
    let mut m = mm("linux-thp:enabled=always", 16 * M, M, 3 * M / 2, mode);
    map(&mut m, A, 64 * M);
    for i in 0..7 {
        assert_eq!(access(&mut m, A + i * 2 * M, true), 2 * M);
    }
    assert_eq!(m.machine().stats.kswapd_runs, 0);
    assert_eq!(access(&mut m, A + 7 * 2 * M, true), 2 * M);
    assert_eq!(m.machine().stats.kswapd_runs, 1);
    m
}

#[test]
fn a_superpage_is_reclaimed_whole() {
    let m = eight_huge_pages(SuperpageReclaim::Whole);
    let s = &m.machine().stats;
    // One whole 2M page: 512 frames free, above high (384).
    assert_eq!(s.swapped_out_bytes, 2 * M);
    assert_eq!(free_frames(&m), 512);
    assert_eq!((s.reclaim_splits, s.demotions), (0, 0));
    let gone: Vec<u64> = (0..8)
        .filter(|&i| mapped(&m, A + i * 2 * M).is_none())
        .collect();
    assert_eq!(gone.len(), 1, "{gone:?}");
    // Its refault is one major fault bringing back 2M.
    let mut m = m;
    let at = A + gone[0] * 2 * M;
    assert_eq!(access(&mut m, at + 12345, false), 2 * M);
    let s = &m.machine().stats;
    assert_eq!((s.major_faults, s.swapped_in_bytes), (1, 2 * M));
}

#[test]
fn a_superpage_is_split_first_and_only_what_is_needed_is_reclaimed() {
    let mut m = eight_huge_pages(SuperpageReclaim::Split);
    let s = &m.machine().stats;
    // Split into 512 base pages; 384 of them reclaimed: free is exactly high.
    assert_eq!(s.reclaim_splits, 1);
    assert_eq!(s.demotions, 1);
    assert_eq!(s.swapped_out_bytes, 384 * 4 * K);
    assert_eq!(free_frames(&m), 384);
    let split: Vec<u64> = (0..8)
        .filter(|&i| mapped(&m, A + i * 2 * M) != Some(2 * M))
        .collect();
    assert_eq!(split.len(), 1, "{split:?}");
    let base = A + split[0] * 2 * M;
    let left: Vec<u64> = (0..512)
        .filter(|&j| mapped(&m, base + j * 4 * K) == Some(4 * K))
        .collect();
    assert_eq!(left.len(), 128);
    // A reclaimed piece faults back alone, as a major fault.
    let gone = (0..512).find(|j| !left.contains(j)).unwrap();
    access(&mut m, base + gone * 4 * K, false);
    let s = &m.machine().stats;
    assert_eq!((s.major_faults, s.swapped_in_bytes), (1, 4 * K));
}

#[test]
fn clean_file_pages_are_dropped_and_dirty_ones_written_back() {
    let mut m = mm("base:4K", 16 * M, M, 2 * M, SuperpageReclaim::Whole);
    let file = Backing::File {
        file_id: 3,
        offset: 0,
    };
    map_as(&mut m, A, 32 * M, file, Sharing::Shared);
    // The first 100 pages are written (dirty), the rest only read.
    for i in 0..3841 {
        access(&mut m, A + i * 4 * K, i < 100);
    }
    let s = &m.machine().stats;
    assert_eq!(s.kswapd_runs, 1);
    assert_eq!(s.swapped_out_bytes, 0);
    assert_eq!(s.cache_dropped_bytes, 257 * 4 * K);
    assert_eq!(s.written_back_bytes, 100 * 4 * K);
    assert_eq!(s.major_faults, 3841);
    assert_eq!(m.machine().cache_frames(), 3841 - 257);
    // A dropped page is read again: another major fault, no swap involved.
    access(&mut m, A, false);
    let s = &m.machine().stats;
    assert_eq!((s.major_faults, s.swap_in_faults), (3842, 0));
}

#[test]
fn reservations_are_preempted_before_mapped_pages_are_reclaimed() {
    // Each first touch of a 2M extent reserves 512 frames and maps one.
    let mut m = mm("reservation", 16 * M, M, 2 * M, SuperpageReclaim::Whole);
    map(&mut m, A, 64 * M);
    for i in 0..8 {
        access(&mut m, A + i * 2 * M, true);
    }
    // Memory is all reserved: the eighth reservation left no free frame.
    let s = &m.machine().stats;
    assert_eq!(s.kswapd_runs, 1);
    assert_eq!(s.reclaimed_bytes, 0, "nothing mapped is reclaimed");
    assert!(s.reclaim_preemptions >= 1);
    assert!(free_frames(&m) >= 512);
    for i in 0..8 {
        assert_eq!(mapped(&m, A + i * 2 * M), Some(4 * K), "extent {i}");
    }
    // The least recently allocated reservation went first.
    assert_eq!(
        m.policy_counters()["reservations"],
        8 - s.reclaim_preemptions
    );
}

#[test]
fn reclaim_off_keeps_the_old_out_of_memory_error() {
    let spec: PolicySpec = "base:4K".parse().unwrap();
    let mut phys = PhysConfig::new(Bytes(4 * M));
    phys.reclaim = false;
    let mut m = Mm::new(&spec, &phys).unwrap();
    map(&mut m, A, 8 * M);
    for i in 0..1024 {
        access(&mut m, A + i * 4 * K, true);
    }
    let e = m
        .translate(VirtAddr(A + 1024 * 4 * K), false, true)
        .unwrap_err();
    assert!(e.to_string().contains("out of memory"), "{e}");
    assert_eq!(m.machine().stats.reclaimed_bytes, 0);
}

#[test]
fn default_watermarks_are_linux_s() {
    let phys = PhysConfig::new(Bytes(64 * M));
    let mem = pagelab_mm::phys::PhysMem::new(&phys).unwrap();
    let w = mem.watermarks(pagelab_mm::phys::ZoneId(0));
    assert_eq!((w.min, w.low, w.high), (256, 320, 384));
    let _ = PageSize::K4;
}

#[test]
fn partly_read_file_extents_give_back_their_unread_pages_first() {
    let mut m = mm("reservation", 16 * M, M, 2 * M, SuperpageReclaim::Whole);
    let file = Backing::File {
        file_id: 4,
        offset: 0,
    };
    map_as(&mut m, A + 256 * M, 2 * M, file, Sharing::Private);
    // Ten pages read of a 2M extent: its whole block is held by the page cache.
    for i in 0..10 {
        access(&mut m, A + 256 * M + i * 4 * K, false);
    }
    assert_eq!(m.machine().cache_frames(), 512);
    // Anonymous base pages (MADV_NOHUGEPAGE: no reservations) fill memory.
    map(&mut m, A, 64 * M);
    let nohuge = Event::Advise {
        start: VirtAddr(A),
        len: 64 * M,
        advice: pagelab_core::Advice::NoHugePage,
    };
    m.event(&nohuge).unwrap();
    let mut i = 0;
    while m.machine().stats.kswapd_runs == 0 {
        access(&mut m, A + i * 4 * K, true);
        i += 1;
    }
    let s = &m.machine().stats;
    // The 502 unread frames went back before any mapped page was reclaimed.
    assert_eq!(s.reclaim_preemptions, 1);
    assert_eq!(s.reclaimed_bytes, 0);
    assert_eq!(m.machine().cache_frames(), 10);
    for j in 0..10 {
        assert_eq!(mapped(&m, A + 256 * M + j * 4 * K), Some(4 * K));
    }
}

#[test]
fn each_zone_has_its_own_watermarks_and_lists() {
    // dma32 (first 8M) and normal (next 8M); allocations take normal first.
    let spec: PolicySpec = "base:4K".parse().unwrap();
    let mut phys = PhysConfig::new(Bytes(16 * M));
    phys.dma32 = Bytes(8 * M);
    phys.watermarks = Some(WatermarkConfig {
        low: Bytes(M),
        high: Bytes(2 * M),
    });
    let mut m = Mm::new(&spec, &phys).unwrap();
    map(&mut m, A, 64 * M);
    let zone_free = |m: &Mm, z: usize| m.machine().phys.zone_free(pagelab_mm::phys::ZoneId(z));
    // Each zone: low 128 frames, high 256.
    for i in 0..1920 {
        access(&mut m, A + i * 4 * K, true);
    }
    assert_eq!((zone_free(&m, 0), zone_free(&m, 1)), (2048, 128));
    assert_eq!(m.machine().stats.kswapd_runs, 0);
    access(&mut m, A + 1920 * 4 * K, true);
    // Only normal was reclaimed, up to its own high watermark; dma32 is untouched.
    assert_eq!((zone_free(&m, 0), zone_free(&m, 1)), (2048, 256));
    assert_eq!(m.machine().stats.swapped_out_bytes, 129 * 4 * K);
}
