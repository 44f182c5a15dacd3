//! The `linux-thp` policy against the kernel's rules, on VMA geometries that
//! exercise alignment, VMA edges, partially populated ranges and allocation
//! failure. Expected values are worked out by hand from mm/memory.c.

use crate::common;

use common::{access, map_event, mm_no_reclaim, per_size, touch, K, M};
use pagelab_core::{Advice, Backing, Event, MapEvent, PageSize, Prot, Sharing, VirtAddr};
use pagelab_mm::phys::FrameAllocator;
use pagelab_mm::policy::{PolicySpec, ThpSettings};
use pagelab_mm::system::Mm;

fn mm(settings: &str, memory: u64) -> Mm {
    mm_no_reclaim(&format!("linux-thp:{settings}"), memory)
}

// Unlike the shared `map` and `advise`, these two do not check afterwards.
fn map(m: &mut Mm, start: u64, len: u64) {
    let ev = map_event(start, len, Backing::Anon, Sharing::Private);
    m.event(&ev).unwrap();
}

fn advise(m: &mut Mm, start: u64, len: u64, advice: Advice) {
    m.event(&Event::Advise {
        start: VirtAddr(start),
        len,
        advice,
    })
    .unwrap();
}

#[test]
fn settings_parse_with_kernel_words_and_defaults() {
    let d = ThpSettings::default();
    assert_eq!(d.full(), "enabled=madvise,16K=never,32K=never,64K=never,128K=never,256K=never,512K=never,1M=never,2M=inherit,use_zero_page=1");
    assert_eq!(d.to_string(), "");
    let t: ThpSettings = "enabled=always,64K=inherit,2M=never".parse().unwrap();
    assert_eq!(t.to_string(), "enabled=always,64K=inherit,2M=never");
    assert_eq!(
        "linux-thp".parse::<PolicySpec>().unwrap().to_string(),
        "linux-thp"
    );
    let z: ThpSettings = "use_zero_page=0".parse().unwrap();
    assert!(!z.use_zero_page);
    assert_eq!(z.to_string(), "use_zero_page=0");
    assert_eq!(z.full().parse::<ThpSettings>().unwrap(), z);
    for bad in [
        "enabled=inherit",
        "8K=always",
        "64K=sometimes",
        "64K",
        "use_zero_page=yes",
    ] {
        assert!(bad.parse::<ThpSettings>().is_err(), "{bad}");
    }
    let e = "linux-thp:4M=always"
        .parse::<PolicySpec>()
        .unwrap_err()
        .to_string();
    assert!(e.contains("16K") && e.contains("2M"), "{e}");
}

#[test]
fn aligned_vma_gets_a_2m_page_when_always() {
    let mut m = mm("enabled=always", 64 * M);
    map(&mut m, 0x4000_0000, 4 * M);
    assert_eq!(touch(&mut m, 0x4000_1234), 2 * M);
    assert_eq!(touch(&mut m, 0x401f_ffff), 2 * M); // same page, no new fault
    assert_eq!(touch(&mut m, 0x4020_0000), 2 * M);
    assert_eq!(m.machine().stats.faults, 2);
    assert_eq!(per_size(&m, "anon_fault_alloc", "2M"), 2);
}

#[test]
fn vma_edges_limit_the_size() {
    // VMA [2M+16K, 2M+16K+1M): no 2M range fits; 64K ranges fit except at the ends.
    let mut m = mm("enabled=always,16K=always,64K=always", 64 * M);
    let start = 0x4020_4000;
    map(&mut m, start, M);
    assert_eq!(touch(&mut m, start), 16 * K); // [start, +64K) would start below the VMA
    assert_eq!(touch(&mut m, 0x4021_0000), 64 * K);
    let end = start + M;
    assert_eq!(touch(&mut m, end - 1), 16 * K); // the last 64K block crosses the VMA's end
    assert_eq!(per_size(&m, "anon_fault_alloc", "64K"), 1);
    assert_eq!(per_size(&m, "anon_fault_alloc", "16K"), 2);
}

#[test]
fn partially_populated_ranges_use_the_highest_empty_size() {
    let mut m = mm("enabled=never,16K=always,32K=always,64K=always", 64 * M);
    map(&mut m, 0x4000_0000, 2 * M);
    advise(&mut m, 0x4000_0000, 2 * M, Advice::NoHugePage);
    assert_eq!(touch(&mut m, 0x4000_0000), 4 * K);
    advise(&mut m, 0x4000_0000, 2 * M, Advice::HugePage);
    // [0, 64K) and [0, 32K) and [0, 16K) all hold the 4K page: 4K.
    assert_eq!(touch(&mut m, 0x4000_2000), 4 * K);
    // [32K, 64K) is empty: 32K.
    assert_eq!(touch(&mut m, 0x4000_c000), 32 * K);
    // [64K, 128K) is empty: 64K.
    assert_eq!(touch(&mut m, 0x4001_0000), 64 * K);
}

#[test]
fn madvise_mode_needs_madv_hugepage_and_nohugepage_wins() {
    let mut m = mm("enabled=madvise", 64 * M);
    map(&mut m, 0x4000_0000, 6 * M);
    assert_eq!(touch(&mut m, 0x4000_0000), 4 * K);
    advise(&mut m, 0x4020_0000, 2 * M, Advice::HugePage);
    assert_eq!(touch(&mut m, 0x4020_0000), 2 * M);
    let mut m = mm("enabled=always", 64 * M);
    map(&mut m, 0x4000_0000, 4 * M);
    advise(&mut m, 0x4000_0000, 2 * M, Advice::NoHugePage);
    assert_eq!(touch(&mut m, 0x4000_0000), 4 * K);
    assert_eq!(touch(&mut m, 0x4020_0000), 2 * M);
}

#[test]
fn file_mappings_get_2m_folios_only_where_aligned_and_advised() {
    let file = |m: &mut Mm, start: u64, offset: u64, huge: bool| {
        let ev = MapEvent {
            start: VirtAddr(start),
            len: 4 * M,
            prot: Prot(Prot::READ),
            backing: Backing::File { file_id: 1, offset },
            sharing: Sharing::Private,
        };
        m.event(&Event::Map(Box::new(ev))).unwrap();
        if huge {
            let advice = pagelab_core::Advice::HugePage;
            let ev = Event::Advise {
                start: VirtAddr(start),
                len: 4 * M,
                advice,
            };
            m.event(&ev).unwrap();
        }
    };
    let mut m = mm("enabled=always", 64 * M);
    // PMD-order readahead needs MADV_HUGEPAGE, even with `always`.
    file(&mut m, 0x4000_0000, 0, false);
    assert_eq!(touch(&mut m, 0x4000_0000), 4 * K);
    file(&mut m, 0x4800_0000, 8 * M, true);
    assert_eq!(touch(&mut m, 0x4800_0000), 2 * M);
    // A file offset 4K off the virtual alignment: base pages.
    file(&mut m, 0x5000_0000, 4 * K, true);
    assert_eq!(touch(&mut m, 0x5000_0000), 4 * K);
    // `madvise` allows it in an advised VMA; 2M=never does not.
    let mut m = mm("enabled=madvise", 64 * M);
    file(&mut m, 0x4000_0000, 0, true);
    assert_eq!(touch(&mut m, 0x4000_0000), 2 * M);
    let mut m = mm("enabled=always,2M=never", 64 * M);
    file(&mut m, 0x4000_0000, 0, true);
    assert_eq!(touch(&mut m, 0x4000_0000), 4 * K);
}

#[test]
fn failed_allocation_falls_back_and_counts() {
    // 4M of memory: a 4K page splits one 2M block; the first 2M fault takes the other;
    // the second 2M fault fails (fallback counted) and gets 64K from the split block.
    let mut m = mm("enabled=always,64K=always", 4 * M);
    map(&mut m, 0x4000_0000, 4 * K);
    advise(&mut m, 0x4000_0000, 4 * K, Advice::NoHugePage);
    map(&mut m, 0x8000_0000, 4 * M);
    assert_eq!(touch(&mut m, 0x4000_0000), 4 * K);
    assert_eq!(touch(&mut m, 0x8000_0000), 2 * M);
    assert_eq!(touch(&mut m, 0x8020_0000), 64 * K);
    assert_eq!(per_size(&m, "anon_fault_fallback", "2M"), 1);
    assert_eq!(per_size(&m, "anon_fault_alloc", "64K"), 1);
    assert_eq!(m.machine().stats.faults_by_size.get(PageSize::K4), 1);
}

#[test]
fn munmap_frees_and_splits_straddling_pages() {
    let mut m = mm("enabled=always", 64 * M);
    map(&mut m, 0x4000_0000, 4 * M);
    assert_eq!(touch(&mut m, 0x4000_0000), 2 * M);
    // Unmapping 4K in the middle of the 2M page splits it (a demotion), frees 4K.
    m.event(&Event::Unmap {
        start: VirtAddr(0x4010_0000),
        len: 4 * K,
    })
    .unwrap();
    m.check().unwrap();
    assert_eq!(m.machine().stats.rss_bytes, 2 * M - 4 * K);
    assert_eq!(m.machine().stats.demotions, 1);
    m.event(&Event::Unmap {
        start: VirtAddr(0x4000_0000),
        len: 4 * M,
    })
    .unwrap();
    m.check().unwrap();
    assert_eq!(m.machine().stats.rss_bytes, 0);
    // Unmapping nothing is counted, not an error.
    m.event(&Event::Unmap {
        start: VirtAddr(0x4000_0000),
        len: 4 * M,
    })
    .unwrap();
    assert_eq!(m.machine().stats.events_on_nothing, 1);
}

#[test]
fn protecting_part_of_a_superpage_demotes_it() {
    let mut m = mm("enabled=always", 64 * M);
    map(&mut m, 0x4000_0000, 2 * M);
    assert_eq!(touch(&mut m, 0x4000_0000), 2 * M);
    m.event(&Event::Protect {
        start: VirtAddr(0x4000_0000),
        len: 4 * K,
        prot: Prot(Prot::READ),
    })
    .unwrap();
    m.check().unwrap();
    assert_eq!(m.machine().stats.demotions, 1);
    assert_eq!(touch(&mut m, 0x4010_0000), 4 * K);
    // Freeing the demoted page frees its frames one by one.
    m.event(&Event::Unmap {
        start: VirtAddr(0x4000_0000),
        len: 2 * M,
    })
    .unwrap();
    m.check().unwrap();
    assert_eq!(m.machine().stats.rss_bytes, 0);
}

/// Reads `addr` and returns the size of the page that maps it.
fn read(m: &mut Mm, addr: u64) -> u64 {
    access(m, addr, false)
}

#[test]
fn a_read_maps_the_huge_zero_page_and_a_write_then_gets_a_2m_page() {
    let mut m = mm("enabled=always", 64 * M);
    map(&mut m, 0x4000_0000, 4 * M);
    assert_eq!(read(&mut m, 0x4000_1000), 2 * M);
    assert_eq!(read(&mut m, 0x4010_0000), 2 * M); // same zero page: no fault
    assert_eq!(m.machine().stats.faults, 1);
    assert_eq!(per_size(&m, "anon_fault_alloc", "2M"), 0);
    // A second 2M range reads the same huge zero page: no new frames.
    let free = m.machine().phys.free_frames();
    assert_eq!(read(&mut m, 0x4020_0000), 2 * M);
    assert_eq!(m.machine().phys.free_frames(), free);
    // do_huge_zero_wp_pmd: the write gets a real 2M page.
    assert_eq!(touch(&mut m, 0x4000_2000), 2 * M);
    assert_eq!(per_size(&m, "anon_fault_alloc", "2M"), 1);
    assert_eq!(m.machine().stats.faults, 3);
    assert_eq!(read(&mut m, 0x4000_3000), 2 * M); // the new page, writable
    assert_eq!(m.machine().stats.faults, 3);
}

#[test]
fn without_use_zero_page_a_read_maps_the_4k_zero_page() {
    let mut m = mm("enabled=always,use_zero_page=0", 64 * M);
    map(&mut m, 0x4000_0000, 4 * M);
    assert_eq!(read(&mut m, 0x4000_1000), 4 * K);
    assert_eq!(per_size(&m, "anon_fault_alloc", "2M"), 0);
    // The range is no longer empty (the zero PTE): a write elsewhere in it
    // cannot get a PMD page; with no mTHP size enabled it gets 4K.
    assert_eq!(touch(&mut m, 0x4000_8000), 4 * K);
    assert_eq!(per_size(&m, "anon_fault_alloc", "2M"), 0);
}

#[test]
fn a_write_to_the_4k_zero_page_gets_one_base_page_never_an_mthp() {
    let mut m = mm("enabled=never,64K=always", 64 * M);
    map(&mut m, 0x4000_0000, 2 * M);
    assert_eq!(read(&mut m, 0x4000_0000), 4 * K); // mTHP sizes: reads map the 4K zero page
    assert_eq!(per_size(&m, "anon_fault_alloc", "64K"), 0);
    // wp_page_copy: one 4K page, though [0, 64K) holds nothing else.
    assert_eq!(touch(&mut m, 0x4000_0000), 4 * K);
    assert_eq!(per_size(&m, "anon_fault_alloc", "64K"), 0);
    // The rest of [0, 64K) is not empty, so its writes get 4K pages; the next
    // 64K range is empty and gets a 64K page.
    assert_eq!(touch(&mut m, 0x4000_1000), 4 * K);
    assert_eq!(touch(&mut m, 0x4001_0000), 64 * K);
    assert_eq!(per_size(&m, "anon_fault_alloc", "64K"), 1);
    assert_eq!(m.machine().stats.faults, 4);
}

#[test]
fn inferred_regions_never_map_the_zero_page() {
    // No map events: the VMA is inferred, its contents unknown.
    let mut m = mm("enabled=always", 64 * M);
    assert_eq!(read(&mut m, 0x4000_1000), 2 * M);
    assert_eq!(per_size(&m, "anon_fault_alloc", "2M"), 1);
}

#[test]
fn forked_zero_page_mappings_are_counted_and_copied_on_write() {
    let mut m = mm("enabled=never", 64 * M);
    map(&mut m, 0x4000_0000, 64 * K);
    read(&mut m, 0x4000_0000);
    m.event(&Event::fork(7)).unwrap();
    m.check().unwrap();
    touch(&mut m, 0x4000_0000);
    m.event(&Event::Switch(pagelab_core::ThreadId { pid: 7, tid: 7 }))
        .unwrap();
    assert_eq!(read(&mut m, 0x4000_0000), 4 * K); // the child still reads zeros
    touch(&mut m, 0x4000_0000);
    m.event(&Event::Exit { status: 0 }).unwrap();
    m.check().unwrap();
}

#[test]
fn folios_are_counted_at_each_process_exit() {
    // What crates/lab/tests/folios.rs holds the kernel to: a parent writes 3 blocks 128K
    // apart (one 64K page each), forks, the child writes 2 more and exits, then the parent
    // exits. The child maps the parent's 3 (shared) and its 2 at its exit; the parent its 3.
    let mut m = mm("enabled=never,64K=always", 64 * M);
    let base = 0x4000_0000;
    map(&mut m, base, 2 * M);
    for i in 0..3 {
        assert_eq!(touch(&mut m, base + i * 128 * K), 64 * K);
    }
    let switch = |m: &mut Mm, pid| {
        let t = pagelab_core::ThreadId { pid, tid: pid };
        m.event(&Event::Switch(t)).unwrap();
    };
    let parent = m.pid();
    m.event(&Event::fork(77)).unwrap();
    switch(&mut m, 77);
    for i in 3..5 {
        assert_eq!(touch(&mut m, base + i * 128 * K), 64 * K);
    }
    // A read of never-written memory maps the zero page: no folio.
    assert_eq!(access(&mut m, base + M, false), 4 * K);
    assert_eq!(
        per_size(&m, "exit_anon_folios", "64K"),
        0,
        "none before an exit"
    );
    m.event(&Event::Exit { status: 0 }).unwrap();
    assert_eq!(per_size(&m, "exit_anon_folios", "64K"), 5);
    switch(&mut m, parent);
    m.event(&Event::Exit { status: 0 }).unwrap();
    assert_eq!(per_size(&m, "exit_anon_folios", "64K"), 8);
    assert_eq!(per_size(&m, "anon_fault_alloc", "64K"), 5);
}

#[test]
fn a_folio_mapped_twice_in_one_process_counts_once_at_exit() {
    // The lab counts a folio once per process, by its head frame. The one way this model
    // maps one folio at two addresses of a process: two mappings of one file, each given
    // MADV_HUGEPAGE, both mapping the page cache's 2M folio of the file's first 2M.
    let mut m = mm("enabled=always", 64 * M);
    let mut pages = Vec::new();
    for start in [0x4000_0000, 0x4800_0000] {
        let ev = MapEvent {
            start: VirtAddr(start),
            len: 2 * M,
            prot: Prot(Prot::READ),
            backing: Backing::File {
                file_id: 1,
                offset: 0,
            },
            sharing: Sharing::Private,
        };
        m.event(&Event::Map(Box::new(ev))).unwrap();
        advise(&mut m, start, 2 * M, Advice::HugePage);
        pages.push(common::access_page(&mut m, start + 8 * K, false));
    }
    assert_eq!(pages[0], (2 * M, pages[1].1), "one 2M folio at both");
    assert_eq!(pages[1].0, 2 * M);
    m.event(&Event::Exit { status: 0 }).unwrap();
    assert_eq!(per_size(&m, "exit_file_folios", "2M"), 1);
    assert_eq!(per_size(&m, "exit_anon_folios", "2M"), 0);
}
