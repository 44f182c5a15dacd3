//! The fault path every policy shares: file pages through the page cache,
//! fork, and copy-on-write in both modes. Frame accounting (`check`) after every step.

mod common;

use common::{access, ev, map_as, mm, K, M};
use pagelab_core::{Backing, Event, Sharing, ThreadId, VirtAddr};
use pagelab_mm::fault::CowMode;
use pagelab_mm::phys::FrameAllocator;
use pagelab_mm::system::Mm;

fn switch(m: &mut Mm, pid: u32) {
    ev(m, Event::Switch(ThreadId { pid, tid: pid }));
}

fn used_frames(m: &Mm) -> u64 {
    let p = &m.machine().phys;
    p.total_frames() - p.free_frames()
}

#[test]
fn file_pages_are_read_once_and_shared() {
    let mut m = mm("base:4K", 256 * M);
    let file = Backing::File {
        file_id: 7,
        offset: 0x10000,
    };
    map_as(&mut m, 0x4000_0000, 64 * K, file, Sharing::Shared);
    assert_eq!(access(&mut m, 0x4000_1000, false), 4 * K);
    assert_eq!(used_frames(&m), 1);
    // Another process maps the same file at another address and offset alignment.
    switch(&mut m, 2);
    map_as(
        &mut m,
        0x5000_0000,
        64 * K,
        Backing::File {
            file_id: 7,
            offset: 0x11000,
        },
        Sharing::Shared,
    );
    assert_eq!(access(&mut m, 0x5000_0000, true), 4 * K); // file page 0x11000: the same page
    assert_eq!(used_frames(&m), 1);
    assert_eq!(m.machine().stats.rss_bytes, 8 * K);
    // Unmapping both leaves the page in the cache.
    ev(
        &mut m,
        Event::Unmap {
            start: VirtAddr(0x5000_0000),
            len: 64 * K,
        },
    );
    switch(&mut m, 0);
    ev(
        &mut m,
        Event::Unmap {
            start: VirtAddr(0x4000_0000),
            len: 64 * K,
        },
    );
    assert_eq!((used_frames(&m), m.machine().stats.rss_bytes), (1, 0));
}

#[test]
fn writing_a_private_file_mapping_copies_the_page() {
    let mut m = mm("base:4K", 256 * M);
    map_as(
        &mut m,
        0x4000_0000,
        16 * K,
        Backing::File {
            file_id: 1,
            offset: 0,
        },
        Sharing::Private,
    );
    access(&mut m, 0x4000_0000, false);
    assert_eq!(m.machine().stats.copied_bytes, 0);
    access(&mut m, 0x4000_0000, true);
    assert_eq!(m.machine().stats.copied_bytes, 4 * K);
    assert_eq!(used_frames(&m), 2); // the cached page and the private copy
                                    // A first write to another page copies straight from the file page.
    access(&mut m, 0x4000_1000, true);
    assert_eq!(m.machine().stats.copied_bytes, 8 * K);
    assert_eq!(used_frames(&m), 4);
}

fn forked_2m(mode: CowMode) -> Mm {
    let mut m = mm("linux-thp:enabled=always", 256 * M);
    m.set_cow(mode);
    map_as(&mut m, 0x4000_0000, 2 * M, Backing::Anon, Sharing::Private);
    assert_eq!(access(&mut m, 0x4000_0000, true), 2 * M);
    ev(&mut m, Event::Fork { child: 9 });
    assert_eq!(m.machine().stats.rss_bytes, 4 * M);
    assert_eq!(used_frames(&m), 512);
    switch(&mut m, 9);
    m
}

#[test]
fn cow_whole_copies_the_superpage() {
    let mut m = forked_2m(CowMode::Whole);
    assert_eq!(access(&mut m, 0x4000_1000, true), 2 * M);
    assert_eq!(m.machine().stats.copied_bytes, 2 * M);
    assert_eq!(used_frames(&m), 1024);
    // The parent is now the only holder of the old page: it writes in place.
    switch(&mut m, 0);
    assert_eq!(access(&mut m, 0x4000_0000, true), 2 * M);
    assert_eq!(m.machine().stats.copied_bytes, 2 * M);
    // The child exits: its copy is freed.
    switch(&mut m, 9);
    ev(&mut m, Event::Exit { status: 0 });
    assert_eq!(used_frames(&m), 512);
}

#[test]
fn cow_base_keeps_the_parents_superpage_and_copies_one_page() {
    let mut m = forked_2m(CowMode::Base);
    assert_eq!(access(&mut m, 0x4000_1000, true), 4 * K);
    assert_eq!(m.machine().stats.copied_bytes, 4 * K);
    assert_eq!(m.machine().stats.demotions, 1);
    assert_eq!(used_frames(&m), 513);
    // The child still reads the parent's frames elsewhere; the parent keeps its 2M page.
    assert_eq!(access(&mut m, 0x4010_0000, false), 4 * K);
    switch(&mut m, 0);
    assert_eq!(access(&mut m, 0x4010_0000, false), 2 * M);
    // A parent write copies one base page too: in this mode the writer's mapping splits.
    assert_eq!(access(&mut m, 0x4000_5000, true), 4 * K);
    assert_eq!(m.machine().stats.copied_bytes, 8 * K);
    assert_eq!(used_frames(&m), 514);
    // The parent exits: the frames the child still maps stay.
    ev(&mut m, Event::Exit { status: 0 });
    assert_eq!(used_frames(&m), 512);
    switch(&mut m, 9);
    ev(&mut m, Event::Exit { status: 0 });
    assert_eq!(used_frames(&m), 0);
}

#[test]
fn a_page_shared_in_part_is_copied_whole_not_written_in_place() {
    // The child copies one base page (base mode); the parent's 2M page now has
    // one frame of its own and 511 still shared with the child.
    let mut m = forked_2m(CowMode::Base);
    access(&mut m, 0x4000_1000, true);
    // Back to whole-page copies: a parent write to its 2M page, still shared
    // with the child except for one frame, must copy, never write in place.
    m.set_cow(CowMode::Whole);
    switch(&mut m, 0);
    assert_eq!(access(&mut m, 0x4000_5000, true), 2 * M);
    assert_eq!(m.machine().stats.copied_bytes, 4 * K + 2 * M);
    assert_eq!(used_frames(&m), 513 + 512 - 1);
}

#[test]
fn forking_a_pid_in_use_is_counted_not_obeyed() {
    let mut m = mm("base:4K", 256 * M);
    map_as(&mut m, 0x4000_0000, 4 * K, Backing::Anon, Sharing::Private);
    access(&mut m, 0x4000_0000, true);
    ev(&mut m, Event::Fork { child: 0 });
    assert_eq!(m.machine().stats.events_on_nothing, 1);
}

#[test]
fn frames_orphaned_after_fork_go_back_to_the_policy() {
    // Regression: a reservation's frames freed piecewise after fork were freed
    // behind the policy's back (WrongOrder from the allocator).
    let mut m = mm("reservation", 256 * M);
    map_as(&mut m, 0x4000_0000, 2 * M, Backing::Anon, Sharing::Private);
    for i in 0..82 {
        access(&mut m, 0x4000_0000 + i * 4 * K, true);
    }
    ev(&mut m, Event::Fork { child: 1 });
    map_as(&mut m, 0x4000_0000, 4 * K, Backing::Anon, Sharing::Private);
    ev(&mut m, Event::Fork { child: 2 });
    for pid in [2, 1, 0] {
        switch(&mut m, pid);
        ev(&mut m, Event::Exit { status: 0 });
    }
    assert_eq!(m.machine().stats.rss_bytes, 0);
    // Whatever is still in use is held by reservations (check() verified each step).
    let held = m.policy_counters()["held_bytes"]
        .as_u64()
        .expect("reservation reports held_bytes");
    assert_eq!(used_frames(&m) * 4096, held);
}

#[test]
fn fork_copies_the_entries_of_vmas_with_anonymous_pages_only() {
    // Linux's copy_page_range skips a VMA without an anon_vma
    // (vma_needs_copy, mm/memory.c): the child faults its file pages in
    // again from the page cache. A file VMA with a private copy, and an
    // anonymous one, are copied.
    let mut m = mm("base:4K", 256 * M);
    let file = |offset| Backing::File { file_id: 3, offset };
    map_as(&mut m, 0x4000_0000, 16 * K, file(0), Sharing::Private); // text
    map_as(&mut m, 0x4001_0000, 16 * K, file(0x10000), Sharing::Private); // data
    map_as(&mut m, 0x4002_0000, 16 * K, Backing::Anon, Sharing::Private); // heap
    access(&mut m, 0x4000_0000, false);
    access(&mut m, 0x4001_0000, false);
    access(&mut m, 0x4001_1000, true);
    access(&mut m, 0x4002_0000, true);
    ev(&mut m, Event::Fork { child: 5 });
    switch(&mut m, 5);
    let faults = |m: &Mm| m.machine().stats.faults;
    let before = faults(&m);
    access(&mut m, 0x4001_0000, false); // the cached page, copied with its VMA
    access(&mut m, 0x4001_1000, false);
    access(&mut m, 0x4002_0000, false);
    assert_eq!(faults(&m), before);
    access(&mut m, 0x4000_0000, false);
    assert_eq!(faults(&m), before + 1);
    assert_eq!(used_frames(&m), 5); // three cached pages, one copy, the heap page
}
