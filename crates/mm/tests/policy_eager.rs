//! The `eager` policy at its thresholds: the largest size whose aligned block
//! lies in the VMA and holds no page; partially mapped blocks; allocation
//! failure falling back size by size. Expected values are worked out by hand.

use crate::common;

use common::{advise, map, map_as, mm_no_reclaim, per_size, touch, K, M};
use pagelab_core::{Advice, Backing, Event, PageSize, Sharing, VirtAddr};
use pagelab_mm::machine::MmError;
use pagelab_mm::policy::PolicySpec;
use pagelab_mm::system::Mm;

fn dontneed(m: &mut Mm, start: u64, len: u64) {
    advise(m, start, len, Advice::DontNeed);
}

#[test]
fn spec_parses_sizes_and_prints_back() {
    let d: PolicySpec = "eager".parse().unwrap();
    assert_eq!(d.to_string(), "eager");
    assert_eq!(d.base(), PageSize::K4);
    let s: PolicySpec = "eager:sizes=2M,64K".parse().unwrap();
    assert_eq!(s.to_string(), "eager:sizes=4K,64K,2M"); // base added, sorted
    assert_eq!(s.to_string().parse::<PolicySpec>().unwrap(), s);
    for bad in [
        "eager:sizes=4M",
        "eager:sizes=3K",
        "eager:size=64K",
        "eager:sizes=",
    ] {
        assert!(bad.parse::<PolicySpec>().is_err(), "{bad}");
    }
    let e = "eager:sizes=4M"
        .parse::<PolicySpec>()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("eager:sizes=4M") && e.contains("1M, 2M, 1G"),
        "{e}"
    );
}

#[test]
fn default_sizes_are_every_mapped_size_up_to_2m() {
    let mut m = mm_no_reclaim("eager", 64 * M);
    map(&mut m, 0x4000_0000, 4 * M);
    assert_eq!(touch(&mut m, 0x4000_1234), 2 * M);
    assert_eq!(touch(&mut m, 0x401f_ffff), 2 * M); // same page, no new fault
    assert_eq!(touch(&mut m, 0x4020_0000), 2 * M);
    assert_eq!(m.machine().stats.faults, 2);
    assert_eq!(m.machine().stats.zeroed_bytes, 4 * M);
    assert_eq!(per_size(&m, "alloc", "2M"), 2);
    let sizes = m.policy_counters()["sizes"].as_str().unwrap().to_string();
    assert_eq!(
        sizes, "4K,8K,16K,32K,64K,128K,256K,512K,1M,2M",
        "1G is mapped by the geometry but above the default"
    );
}

#[test]
fn vma_edges_choose_the_size() {
    // VMA [0x4020_4000, +1M): no 2M or 1M block fits.
    let mut m = mm_no_reclaim("eager", 64 * M);
    let start = 0x4020_4000;
    let end = start + M;
    map(&mut m, start, M);
    // 16K-aligned start: [start, +16K) fits, [0x4020_0000, +32K) starts below the VMA.
    assert_eq!(touch(&mut m, start), 16 * K);
    // [0x4020_8000, +32K) fits, the 64K block starts below.
    assert_eq!(touch(&mut m, 0x4020_8000), 32 * K);
    // 64K-aligned: the 128K block starts below the VMA.
    assert_eq!(touch(&mut m, 0x4021_0000), 64 * K);
    // [0x4028_0000, 0x4030_0000) fits; the 1M block starts below.
    assert_eq!(touch(&mut m, 0x4028_0000), 512 * K);
    // The last 16K block ends at the VMA's end; the 32K one crosses it.
    assert_eq!(touch(&mut m, end - 1), 16 * K);
    let f = &m.machine().stats.faults_by_size;
    assert_eq!(f.total(), 5);
    assert_eq!(f.get(PageSize::from_shift(14).unwrap()), 2);
}

#[test]
fn a_partially_mapped_block_forces_a_smaller_size() {
    let mut m = mm_no_reclaim("eager", 64 * M);
    map(&mut m, 0x4000_0000, 2 * M);
    assert_eq!(touch(&mut m, 0x4000_0000), 2 * M);
    // Dropping 64K of the 2M page splits it into 4K pages (a demotion).
    dontneed(&mut m, 0x4000_0000, 64 * K);
    assert_eq!(m.machine().stats.demotions, 1);
    assert_eq!(m.machine().stats.rss_bytes, 2 * M - 64 * K);
    // [0, 64K) is empty again, every larger block holds 4K pages.
    assert_eq!(touch(&mut m, 0x4000_0000), 64 * K);
    // Drop 12K at 1M: the 16K block there still holds one 4K page, the 8K one is empty.
    dontneed(&mut m, 0x4010_0000, 12 * K);
    assert_eq!(touch(&mut m, 0x4010_0000), 8 * K);
    // [0x4010_2000, +8K) holds the 4K page at 0x4010_3000: a base page.
    assert_eq!(touch(&mut m, 0x4010_2000), 4 * K);
    assert_eq!(m.machine().stats.rss_bytes, 2 * M);
}

#[test]
fn restricted_sizes_skip_the_others() {
    let mut m = mm_no_reclaim("eager:sizes=4K,64K", 64 * M);
    map(&mut m, 0x4000_0000, 4 * M);
    assert_eq!(touch(&mut m, 0x4000_0000), 64 * K);
    // A VMA of 32K gets base pages: 16K and 32K are not in the list.
    map(&mut m, 0x5000_0000, 32 * K);
    assert_eq!(touch(&mut m, 0x5000_0000), 4 * K);
}

#[test]
fn failed_allocation_falls_back_in_order() {
    // 4M of memory is one order-10 block. A 4K page splits it: pfn 0 used,
    // free blocks of orders 0..9 at pfns 1, 2, 4, ..., 512.
    let mut m = mm_no_reclaim("eager:sizes=4K,64K,2M", 4 * M);
    map(&mut m, 0x4000_0000, 4 * K);
    assert_eq!(touch(&mut m, 0x4000_0000), 4 * K);
    map(&mut m, 0x8000_0000, 4 * M);
    // The order-9 block.
    assert_eq!(touch(&mut m, 0x8000_0000), 2 * M);
    // No 2M block is left: 2M fails, 64K comes from orders 4..8 (496 frames, 31 pages).
    let second = 0x8020_0000;
    for i in 0..31 {
        assert_eq!(touch(&mut m, second + i * 64 * K), 64 * K, "64K page {i}");
    }
    assert_eq!(per_size(&m, "fallback", "2M"), 1);
    // Only orders 0..3 are free (15 frames): 64K fails too, then 4K.
    assert_eq!(touch(&mut m, second + 31 * 64 * K), 4 * K);
    assert_eq!(per_size(&m, "fallback", "64K"), 1);
    for i in 1..15 {
        assert_eq!(touch(&mut m, second + 31 * 64 * K + i * 4 * K), 4 * K);
    }
    // Memory is full: out of memory, an error rather than a panic, nothing changed.
    let e = m
        .translate(pagelab_core::VirtAddr(0x803f_f000), false, true)
        .unwrap_err();
    assert!(matches!(e, MmError::OutOfMemory { .. }), "{e}");
    m.check().unwrap();
    assert_eq!(m.machine().stats.rss_bytes, 4 * M);
    assert_eq!(per_size(&m, "alloc", "64K"), 31);
}

#[test]
fn shared_anonymous_mappings_get_base_pages() {
    let mut m = mm_no_reclaim("eager", 64 * M);
    map_as(&mut m, 0x4000_0000, 2 * M, Backing::Anon, Sharing::Shared);
    assert_eq!(touch(&mut m, 0x4000_0000), 4 * K);
    assert_eq!(m.policy_counters()["base_only_faults"], 1);
}

#[test]
fn munmap_frees_every_page() {
    let mut m = mm_no_reclaim("eager", 64 * M);
    map(&mut m, 0x4000_0000, 3 * M);
    assert_eq!(touch(&mut m, 0x4000_0000), 2 * M);
    assert_eq!(touch(&mut m, 0x4020_0000), M);
    m.event(&Event::Unmap {
        start: VirtAddr(0x4010_0000),
        len: 2 * M,
    })
    .unwrap();
    m.check().unwrap();
    assert_eq!(m.machine().stats.rss_bytes, M);
    m.event(&Event::Unmap {
        start: VirtAddr(0x4000_0000),
        len: 3 * M,
    })
    .unwrap();
    m.check().unwrap();
    assert_eq!(m.machine().stats.rss_bytes, 0);
}
