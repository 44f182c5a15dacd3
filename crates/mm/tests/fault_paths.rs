//! The fault path every policy shares: file pages through the page cache,
//! fork, and copy-on-write in both modes. Frame accounting (`check`) after every step.

use crate::common;

use common::{access, ev, map_as, mm, K, M};
use pagelab_core::{Backing, CloneFlags, Event, Sharing, ThreadId, VirtAddr};
use pagelab_mm::fault::CowMode;
use pagelab_mm::phys::FrameAllocator;
use pagelab_mm::system::{Invalidate, Mm};

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
    ev(&mut m, Event::fork(9));
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
    // The parent exits: the frames the child still maps stay, and under linux-thp so does
    // the one the child copied away from: the 2M folio stays whole while partly mapped
    // (machine/folios.rs), 512 frames, beside the child's copy.
    ev(&mut m, Event::Exit { status: 0 });
    assert_eq!(used_frames(&m), 513);
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
    // The frame only the parent held is unmapped now, but under linux-thp it stays with
    // its 2M folio, which the child still maps in part (machine/folios.rs): 513 + 512.
    assert_eq!(used_frames(&m), 513 + 512);
}

#[test]
fn a_write_fork_left_read_only_is_a_fault_even_when_the_page_is_reused() {
    // do_wp_page (mm/memory.c): fork left the parent's entries read-only; once
    // the child has exited (or exec'd) the page is the parent's alone and
    // wp_page_reuse makes the entry writable in place, without a copy, but it
    // is still a fault: the kernel counts each one (the page-faults event of
    // do_user_addr_fault, min_flt in mm_account_fault).
    let mut m = mm("base:4K", 256 * M);
    map_as(&mut m, 0x4000_0000, 16 * K, Backing::Anon, Sharing::Private);
    access(&mut m, 0x4000_0000, true);
    access(&mut m, 0x4000_1000, true);
    ev(&mut m, Event::fork(5));
    switch(&mut m, 5);
    access(&mut m, 0x4000_1000, true); // the child's copy
    ev(&mut m, Event::Exit { status: 0 });
    switch(&mut m, 0);
    let faults = |m: &Mm| m.machine().stats.faults;
    let (before, copied) = (faults(&m), m.machine().stats.copied_bytes);
    access(&mut m, 0x4000_0000, true);
    assert_eq!(faults(&m), before + 1, "a reuse is a fault");
    access(&mut m, 0x4000_0000, true);
    assert_eq!(faults(&m), before + 1, "now writable");
    access(&mut m, 0x4000_1000, true); // the child copied it away: the old page is ours
    assert_eq!(faults(&m), before + 2);
    assert_eq!(m.machine().stats.copied_bytes, copied, "nothing copied");
    let by_task: Vec<(u32, u64)> = m.faults_by_task().iter().map(|(&p, &n)| (p, n)).collect();
    assert_eq!(by_task, [(0, 4), (5, 1)]);
}

#[test]
fn a_write_to_a_forked_64k_folio_is_resolved_one_base_page_at_a_time() {
    // Linux maps a 64K folio with 16 PTEs; after fork a write fault copies one base page
    // into an order-0 folio while the other process maps the folio (wp_page_copy), and
    // once the folio is the writer's alone makes only the faulting PTE writable
    // (__wp_can_reuse_large_anon_folio): each base page written takes its own fault.
    // bash -c at 16K..64K always took 4 to 10 faults fewer than the kernel without it.
    let mut m = mm("linux-thp:enabled=never,64K=always", 256 * M);
    map_as(&mut m, 0x4000_0000, 64 * K, Backing::Anon, Sharing::Private);
    assert_eq!(access(&mut m, 0x4000_0000, true), 64 * K);
    ev(&mut m, Event::fork(5));
    switch(&mut m, 5);
    let faults = |m: &Mm| m.machine().stats.faults;
    assert_eq!(
        access(&mut m, 0x4000_2000, true),
        4 * K,
        "the child copies a base page"
    );
    assert_eq!(m.machine().stats.copied_bytes, 4 * K);
    assert_eq!(
        access(&mut m, 0x4000_3000, false),
        4 * K,
        "the rest still the folio's"
    );
    ev(&mut m, Event::Exit { status: 0 });
    switch(&mut m, 0);
    let before = faults(&m);
    for (i, page) in [0, 1, 0, 2, 15].into_iter().enumerate() {
        access(&mut m, 0x4000_0000 + page * 4 * K, true);
        let expected = before + [1, 2, 2, 3, 4][i];
        assert_eq!(faults(&m), expected, "write {i} to base page {page}");
    }
    assert_eq!(m.machine().stats.copied_bytes, 4 * K, "reused, not copied");
    // The folio stays whole: one 64K folio of the parent's, 16 frames.
    let kept: Vec<u64> = m
        .machine()
        .kept_folios()
        .map(|(_, f)| f.size.bytes())
        .collect();
    assert_eq!(kept, [64 * K]);
    assert_eq!(used_frames(&m), 16);
    let by_task: Vec<(u32, u64)> = m.faults_by_task().iter().map(|(&p, &n)| (p, n)).collect();
    assert_eq!(by_task, [(0, 5), (5, 1)]);
}

#[test]
fn a_write_to_a_forked_64k_folio_copies_it_whole_in_another_policy() {
    // Only linux-thp keeps a folio apart from its mapping; eager's page table and frames
    // are one, and its copy-on-write stays whole.
    let mut m = mm("eager:sizes=64K", 256 * M);
    map_as(&mut m, 0x4000_0000, 64 * K, Backing::Anon, Sharing::Private);
    assert_eq!(access(&mut m, 0x4000_0000, true), 64 * K);
    ev(&mut m, Event::fork(5));
    switch(&mut m, 5);
    assert_eq!(access(&mut m, 0x4000_2000, true), 64 * K);
    assert_eq!(m.machine().stats.copied_bytes, 64 * K);
}

#[test]
fn forking_a_pid_in_use_is_counted_not_obeyed() {
    let mut m = mm("base:4K", 256 * M);
    map_as(&mut m, 0x4000_0000, 4 * K, Backing::Anon, Sharing::Private);
    access(&mut m, 0x4000_0000, true);
    ev(&mut m, Event::fork(0));
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
    ev(&mut m, Event::fork(1));
    map_as(&mut m, 0x4000_0000, 4 * K, Backing::Anon, Sharing::Private);
    ev(&mut m, Event::fork(2));
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
    ev(&mut m, Event::fork(5));
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

#[test]
fn a_vfork_child_faults_in_its_parents_address_space_without_a_copy() {
    // kernel/fork.c: copy_mm with CLONE_VM takes the parent's mm (no copy,
    // no write-protection); the child's faults are faults of that mm until
    // its exec leaves it (exec_mm_release -> mm_release).
    let mut m = mm("base:4K", 256 * M);
    let faults = |m: &Mm| m.machine().stats.faults;
    map_as(&mut m, 0x4000_0000, 64 * K, Backing::Anon, Sharing::Private);
    access(&mut m, 0x4000_0000, true);
    let (rss, used, copied) = (
        m.machine().stats.rss_bytes,
        used_frames(&m),
        m.machine().stats.copied_bytes,
    );
    let inv = m
        .event(&Event::Fork {
            child: 5,
            flags: CloneFlags::VFORK_CALL,
        })
        .unwrap();
    assert_eq!(
        inv,
        Invalidate::Nothing,
        "the parent's entries stay writable"
    );
    assert_eq!(m.machine().stats.rss_bytes, rss, "nothing was copied");
    switch(&mut m, 5);
    assert_eq!(m.pid(), 0, "the child runs in its parent's address space");
    assert_eq!(m.task(), 5);
    // A write to the parent's page: no copy-on-write fault, no copy.
    let before = faults(&m);
    access(&mut m, 0x4000_0000, true);
    assert_eq!(faults(&m), before);
    // A new page: the child's fault, in the shared space.
    access(&mut m, 0x4000_1000, true);
    assert_eq!(faults(&m), before + 1);
    assert_eq!(m.machine().stats.copied_bytes, copied);
    assert_eq!(used_frames(&m), used + 1);
    ev(&mut m, Event::Exec(None));
    // The child's new program has a space of its own; the parent's keeps both pages.
    map_as(&mut m, 0x4000_0000, 64 * K, Backing::Anon, Sharing::Private);
    access(&mut m, 0x4000_0000, true);
    assert_eq!(faults(&m), before + 2);
    switch(&mut m, 0);
    access(&mut m, 0x4000_0000, true);
    access(&mut m, 0x4000_1000, true);
    assert_eq!(faults(&m), before + 2, "the parent finds the child's page");
    assert_eq!(used_frames(&m), used + 2);

    // The same with a plain fork: the child's write copies, its new page is its own.
    let mut f = mm("base:4K", 256 * M);
    map_as(&mut f, 0x4000_0000, 64 * K, Backing::Anon, Sharing::Private);
    access(&mut f, 0x4000_0000, true);
    ev(&mut f, Event::fork(5));
    switch(&mut f, 5);
    let before = faults(&f);
    access(&mut f, 0x4000_0000, true);
    access(&mut f, 0x4000_1000, true);
    assert_eq!(faults(&f), before + 2);
    assert_eq!(f.machine().stats.copied_bytes, 4 * K);
    ev(&mut f, Event::Exec(None));
    switch(&mut f, 0);
    access(&mut f, 0x4000_1000, true);
    assert_eq!(faults(&f), before + 3);
}

#[test]
fn a_vfork_child_that_exits_leaves_the_space_to_its_parent() {
    let mut m = mm("base:4K", 256 * M);
    map_as(&mut m, 0x4000_0000, 64 * K, Backing::Anon, Sharing::Private);
    access(&mut m, 0x4000_0000, true);
    let vfork = |child| Event::Fork {
        child,
        flags: CloneFlags::VFORK_CALL,
    };
    ev(&mut m, vfork(5));
    // A pid borrowing a space is in use.
    ev(&mut m, vfork(5));
    assert_eq!(m.machine().stats.events_on_nothing, 1);
    switch(&mut m, 5);
    access(&mut m, 0x4000_1000, true);
    ev(&mut m, Event::Exit { status: 127 });
    assert_eq!(m.machine().pids(), vec![0]);
    assert_eq!(m.machine().stats.rss_bytes, 8 * K);
    // The parent execs: its space goes, and with it the child's page.
    switch(&mut m, 0);
    ev(&mut m, vfork(6));
    switch(&mut m, 6);
    ev(&mut m, Event::Exit { status: 0 });
    switch(&mut m, 0);
    ev(&mut m, Event::Exec(None));
    assert_eq!(m.machine().stats.rss_bytes, 0);
    assert_eq!(used_frames(&m), 0);
    m.check().unwrap();
}

#[test]
fn a_clone_vm_child_keeps_the_space_its_parent_left() {
    // mmput frees an mm at its last user's exit: the parent's exit leaves
    // it to a CLONE_VM child still running in it.
    let mut m = mm("base:4K", 256 * M);
    map_as(&mut m, 0x4000_0000, 64 * K, Backing::Anon, Sharing::Private);
    access(&mut m, 0x4000_0000, true);
    ev(
        &mut m,
        Event::Fork {
            child: 5,
            flags: CloneFlags(CloneFlags::VM),
        },
    );
    ev(&mut m, Event::Exit { status: 0 });
    assert_eq!(m.machine().stats.rss_bytes, 4 * K, "held by the child");
    switch(&mut m, 5);
    let before = m.machine().stats.faults;
    access(&mut m, 0x4000_0000, true);
    assert_eq!(m.machine().stats.faults, before);
    ev(&mut m, Event::Exit { status: 0 });
    assert_eq!(m.machine().stats.rss_bytes, 0);
    assert_eq!(used_frames(&m), 0);
    assert!(m.machine().pids().is_empty());
}
