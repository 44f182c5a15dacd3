//! The `explicit` policy (Winwood et al., OLS 2002, 3.2.3 and 4.8): regions without a
//! request get base pages; best effort takes the largest size not above the
//! request whose block is in the VMA, empty and allocatable; wait takes the
//! requested size, copying pages already in its block and compacting memory
//! when no free block exists. Fragmented memories are built by hand: 4M of
//! memory is 1024 frames, and base pages touched in order take frames 0, 1, 2, ...

use crate::common;

use common::{advise, counter, map, mm_no_reclaim, per_size, touch, touch_page, K, M};
use pagelab_core::{Advice, Event, PageSize};
use pagelab_mm::policy::PolicySpec;
use pagelab_mm::system::Mm;

fn mm(memory: u64) -> Mm {
    mm_no_reclaim("explicit", memory)
}

fn order(m: &mut Mm, start: u64, len: u64, shift: u8, wait: bool) {
    advise(m, start, len, Advice::PageOrder { shift, wait });
}

/// 4M of memory, all of it mapped as base pages at `0x1000_0000` (frame i at
/// page i), then the pages whose index `i % 1024` satisfies `drop` dropped.
fn fragmented(drop: impl Fn(u64) -> bool) -> Mm {
    let mut m = mm(4 * M);
    let va = 0x1000_0000;
    map(&mut m, va, 4 * M);
    for i in 0..1024 {
        assert_eq!(touch_page(&mut m, va + i * 4 * K), (4 * K, i));
    }
    for i in (0..1024).filter(|&i| drop(i)) {
        advise(&mut m, va + i * 4 * K, 4 * K, Advice::DontNeed);
    }
    m
}

const REGION: u64 = 0x4000_0000;

#[test]
fn spec_parses() {
    let s: PolicySpec = "explicit".parse().unwrap();
    assert_eq!(s.to_string(), "explicit");
    assert_eq!(s.base(), PageSize::K4);
    let e = "explicit:wait"
        .parse::<PolicySpec>()
        .unwrap_err()
        .to_string();
    assert!(e.contains("no parameters"), "{e}");
}

#[test]
fn regions_without_a_request_get_base_pages() {
    let mut m = mm(64 * M);
    map(&mut m, REGION, 4 * M);
    assert_eq!(touch(&mut m, REGION), 4 * K);
    assert_eq!(counter(&m, "unrequested_faults"), 1);
    assert_eq!(counter(&m, "requested_faults"), 0);
}

#[test]
fn best_effort_maps_the_requested_size_rounded_to_a_mapped_one() {
    let mut m = mm(64 * M);
    map(&mut m, REGION, 8 * M);
    order(&mut m, REGION, 2 * M, 16, false);
    order(&mut m, REGION + 2 * M, 2 * M, 21, false);
    order(&mut m, REGION + 4 * M, 2 * M, 22, false); // 4M: rounded down to 2M
    order(&mut m, REGION + 6 * M, 2 * M, 9, false); // below 4K: base pages
    assert_eq!(touch(&mut m, REGION), 64 * K);
    assert_eq!(touch(&mut m, REGION + 2 * M), 2 * M);
    assert_eq!(touch(&mut m, REGION + 4 * M), 2 * M);
    assert_eq!(touch(&mut m, REGION + 6 * M), 4 * K);
    assert_eq!(counter(&m, "rounded_requests"), 2);
    assert_eq!(counter(&m, "granted"), 4);
}

#[test]
fn best_effort_takes_the_largest_empty_block_in_the_vma() {
    let mut m = mm(64 * M);
    // A region of 1M+64K starting 2M-aligned, asking for 2M.
    map(&mut m, REGION, M + 64 * K);
    assert_eq!(touch(&mut m, REGION), 4 * K); // before the request
    order(&mut m, REGION, M + 64 * K, 21, false);
    // [0, 2M) crosses the VMA's end; [0, 1M) ... [0, 8K) hold the 4K page.
    assert_eq!(touch(&mut m, REGION + 8 * K), 8 * K);
    assert_eq!(touch(&mut m, REGION + 512 * K), 512 * K);
    assert_eq!(touch(&mut m, REGION + M), 64 * K);
    assert_eq!(counter(&m, "below_request"), 3);
    assert_eq!(m.machine().stats.copied_bytes, 0);
}

#[test]
fn wait_copies_the_pages_already_in_the_block() {
    let mut m = mm(64 * M);
    map(&mut m, REGION, 4 * M);
    assert_eq!(touch(&mut m, REGION), 4 * K);
    assert_eq!(touch(&mut m, REGION + 8 * K), 4 * K);
    order(&mut m, REGION, 4 * M, 21, true);
    assert_eq!(touch(&mut m, REGION + 64 * K), 2 * M);
    let s = &m.machine().stats;
    assert_eq!((s.promotions, s.copied_bytes), (1, 8 * K));
    assert_eq!(s.rss_bytes, 2 * M);
    assert_eq!(s.zeroed_bytes, 2 * M); // 4K + 4K, then 2M less the 8K copied
    assert_eq!(counter(&m, "collapse_copied_bytes"), 8 * K);
    assert_eq!(counter(&m, "granted"), 1);
    assert_eq!(counter(&m, "stalls"), 0);
}

#[test]
fn wait_stays_inside_the_vma() {
    let mut m = mm(64 * M);
    map(&mut m, REGION, M);
    order(&mut m, REGION, M, 21, true);
    assert_eq!(touch(&mut m, REGION), M);
    assert_eq!(counter(&m, "below_request"), 1);
}

#[test]
fn best_effort_falls_back_under_fragmentation() {
    // Every odd frame free: 512 free frames, none in a block above order 0.
    let mut m = fragmented(|i| i % 2 == 1);
    map(&mut m, REGION, 2 * M);
    order(&mut m, REGION, 2 * M, 21, false);
    assert_eq!(touch(&mut m, REGION), 4 * K);
    for size in [
        "8K", "16K", "32K", "64K", "128K", "256K", "512K", "1M", "2M",
    ] {
        assert_eq!(per_size(&m, "fallback", size), 1, "{size}");
    }
    assert_eq!(counter(&m, "below_request"), 1);
    assert_eq!(m.machine().stats.copied_bytes, 0);
}

#[test]
fn wait_compacts_the_least_populated_block() {
    // Block 0 (frames 0..512) keeps its even frames (256 allocated), block 1
    // (512..1024) every fourth frame (128 allocated): block 1 is emptied into
    // block 0's holes, its 128 pages copied.
    let mut m = fragmented(|i| if i < 512 { i % 2 == 1 } else { i % 4 != 0 });
    map(&mut m, REGION, 2 * M);
    order(&mut m, REGION, 2 * M, 21, true);
    assert_eq!(touch_page(&mut m, REGION), (2 * M, 512));
    assert_eq!(counter(&m, "stalls"), 1);
    assert_eq!(counter(&m, "compactions"), 1);
    assert_eq!(counter(&m, "migrated_pages"), 128);
    assert_eq!(counter(&m, "compaction_copied_bytes"), 128 * 4 * K);
    assert_eq!(m.machine().stats.copied_bytes, 128 * 4 * K);
    assert_eq!(counter(&m, "wait_failed"), 0);
    // The moved pages are still mapped at their addresses, now in block 0.
    let (size, pfn) = touch_page(&mut m, 0x1000_0000 + 512 * 4 * K);
    assert_eq!(size, 4 * K);
    assert!(pfn < 512 && pfn % 2 == 1, "moved to frame {pfn}");
    assert_eq!(m.machine().stats.faults, 1024 + 1);
}

#[test]
fn wait_compaction_ties_go_to_the_lowest_block() {
    let mut m = fragmented(|i| i % 2 == 1);
    map(&mut m, REGION, 2 * M);
    order(&mut m, REGION, 2 * M, 21, true);
    assert_eq!(touch_page(&mut m, REGION), (2 * M, 0));
    assert_eq!(counter(&m, "migrated_pages"), 256);
    assert_eq!(m.machine().stats.copied_bytes, M);
}

#[test]
fn wait_fails_and_falls_back_when_memory_is_too_full_to_compact() {
    // 258 free frames: fewer than a 2M block, so no compaction can assemble one.
    let mut m = fragmented(|i| i % 4 == 1 || (i < 8 && i % 4 == 3));
    map(&mut m, REGION, 2 * M);
    order(&mut m, REGION, 2 * M, 21, true);
    assert_eq!(touch(&mut m, REGION), 4 * K);
    assert_eq!(counter(&m, "stalls"), 1);
    assert_eq!(counter(&m, "wait_failed"), 1);
    assert_eq!(counter(&m, "compactions"), 0);
    assert_eq!(m.machine().stats.copied_bytes, 0);
    // But a 1M request can: 257 free frames are left after the 4K fallback.
    map(&mut m, REGION + 4 * M, M);
    order(&mut m, REGION + 4 * M, M, 20, true);
    assert_eq!(touch(&mut m, REGION + 4 * M), M);
    assert_eq!(counter(&m, "compactions"), 1);
}

#[test]
fn wait_for_a_size_above_the_allocator_falls_back() {
    // 1G pages need order 18; the default allocator stops at order 10 (4M).
    let mut m = mm(64 * M);
    map(&mut m, 0x4000_0000, 1 << 30);
    order(&mut m, 0x4000_0000, 1 << 30, 30, true);
    assert_eq!(touch(&mut m, 0x4000_0000), 2 * M);
    assert_eq!(counter(&m, "wait_failed"), 1);
    assert_eq!(per_size(&m, "fallback", "1G"), 1);
    assert_eq!(per_size(&m, "alloc", "2M"), 1);
}

#[test]
fn a_migrated_page_without_a_free_block_of_its_size_is_split() {
    // Frames 0..512: base pages, odd ones then dropped (256 order-0 holes).
    // Frames 512..528: one 64K page, the rest of block 1 free.
    let mut m = mm(4 * M);
    let va = 0x1000_0000;
    map(&mut m, va, 2 * M);
    for i in 0..512 {
        touch(&mut m, va + i * 4 * K);
    }
    map(&mut m, 0x2000_0000, 2 * M);
    order(&mut m, 0x2000_0000, 2 * M, 16, false);
    assert_eq!(touch_page(&mut m, 0x2000_0000), (64 * K, 512));
    for i in (0..512).filter(|i| i % 2 == 1) {
        advise(&mut m, va + i * 4 * K, 4 * K, Advice::DontNeed);
    }
    // Block 1 holds 16 frames, block 0 256: block 1 is emptied, and its 64K
    // page, finding only 4K holes, is moved as 16 base pages.
    map(&mut m, REGION, 2 * M);
    order(&mut m, REGION, 2 * M, 21, true);
    assert_eq!(touch_page(&mut m, REGION), (2 * M, 512));
    assert_eq!(counter(&m, "migrated_pages"), 1);
    assert_eq!(counter(&m, "migration_splits"), 1);
    assert_eq!(m.machine().stats.demotions, 1);
    assert_eq!(m.machine().stats.copied_bytes, 64 * K);
    let (size, pfn) = touch_page(&mut m, 0x2000_0000 + 60 * K);
    assert_eq!(size, 4 * K);
    assert!(pfn < 512 && pfn % 2 == 1, "moved to frame {pfn}");
}

#[test]
fn pages_shared_after_fork_pin_their_block() {
    let mut m = fragmented(|i| i % 2 == 1);
    m.event(&Event::fork(7)).unwrap();
    m.check().unwrap();
    // Every allocated frame is mapped by parent and child: nothing can move.
    map(&mut m, REGION, 2 * M);
    order(&mut m, REGION, 2 * M, 21, true);
    assert_eq!(touch_page(&mut m, REGION), (4 * K, 1));
    assert_eq!(counter(&m, "stalls"), 1);
    assert_eq!(counter(&m, "wait_failed"), 1);
    assert_eq!(m.machine().stats.copied_bytes, 0);
    // Once the child exits and the 4K page is dropped, 512 frames are free
    // again and block 0 can be compacted.
    let switch = |pid| Event::Switch(pagelab_core::ThreadId { pid, tid: pid });
    m.event(&switch(7)).unwrap();
    m.event(&Event::Exit { status: 0 }).unwrap();
    m.event(&switch(0)).unwrap();
    m.check().unwrap();
    advise(&mut m, REGION, 4 * K, Advice::DontNeed);
    map(&mut m, REGION + 2 * M, 2 * M);
    order(&mut m, REGION + 2 * M, 2 * M, 21, true);
    assert_eq!(touch_page(&mut m, REGION + 2 * M), (2 * M, 0));
    assert_eq!(counter(&m, "compactions"), 1);
    assert_eq!(m.machine().stats.copied_bytes, M);
}
