//! The sharing model held to three things it did not write: closed-form
//! formulas on small cases, a reference that materialises every PTE and
//! chain (proptest over random fork, map, unmap, protect, write and exit
//! streams, with every invariant checked after every event), and the
//! thresholds where sharing starts and ends.

use pagelab_core::{
    AccessKind, Advice, Backing, Event, MapEvent, MemRef, PageSize, Prot, Sharing as Share,
    ThreadId, VirtAddr,
};
use pagelab_mm::sharing::reference::Reference;
use pagelab_mm::sharing::rmap::Method;
use pagelab_mm::sharing::{Config, HugetlbPool, PageTables, Sharing, SharingStats};
use proptest::prelude::*;

const BASE: u64 = 0x1000_0000;
const K4: u64 = 4096;
const M2: u64 = 2 << 20;

fn switch(pid: u32) -> Event {
    Event::Switch(ThreadId { pid, tid: pid })
}

fn map(start: u64, len: u64, backing: Backing, sharing: Share) -> Event {
    Event::Map(Box::new(MapEvent {
        start: VirtAddr(start),
        len,
        prot: Prot(Prot::READ | Prot::WRITE),
        backing,
        sharing,
    }))
}

fn shm(start: u64, len: u64) -> Event {
    map(
        start,
        len,
        Backing::File {
            file_id: 9,
            offset: 0,
        },
        Share::Shared,
    )
}

fn touch(addr: u64, write: bool) -> Event {
    let kind = if write {
        AccessKind::Store
    } else {
        AccessKind::Load
    };
    Event::Ref(MemRef {
        addr: VirtAddr(addr),
        size: 8,
        kind,
    })
}

/// `procs` processes each attach `len` bytes at `start` and touch every page.
fn fanout(procs: u32, start: u64, len: u64, huge: Option<(u8, bool)>) -> Vec<Event> {
    let mut ev = Vec::new();
    for pid in 1..=procs {
        ev.push(switch(pid));
        ev.push(shm(start, len));
        if let Some((shift, wait)) = huge {
            ev.push(Event::Advise {
                start: VirtAddr(start),
                len,
                advice: Advice::PageOrder { shift, wait },
            });
        }
        ev.extend((0..len / K4).map(|i| touch(start + i * K4, false)));
    }
    ev
}

fn run(cfg: Config, ev: &[Event], check: bool) -> SharingStats {
    let mut m = Sharing::new(cfg).unwrap();
    if check {
        for e in ev {
            m.event(e).unwrap();
            m.check().unwrap();
        }
    } else {
        m.events(ev).unwrap();
        m.check().unwrap();
    }
    m.stats()
}

#[test]
fn private_tables_follow_the_closed_form() {
    // N processes × S bytes at a 2M-aligned address on PAE: N·S/2M PTE pages,
    // 3 preallocated PMD pages and a 32-byte PGD each; N·S/4K chain entries.
    for (n, s) in [(1u32, 4 * M2), (3, 6 * M2), (7, M2)] {
        let st = run(
            Config::ia32_pae(PageTables::Private),
            &fanout(n, BASE, s, None),
            true,
        );
        let n = n as u64;
        assert_eq!(st.page_tables.pages_by_level, [n * s / M2, 3 * n, n]);
        assert_eq!(
            st.page_tables.page_table_bytes,
            n * (s / M2 * K4 + 3 * K4 + 32)
        );
        let plain = &st.rmap[&Method::PteChains];
        assert_eq!(plain.bytes_peak, n * s / K4 * 8);
        // Grouped: ceil(n / 7) lines of 32 bytes per page, none with one mapper.
        let lines = if n == 1 { 0 } else { n.div_ceil(7) };
        assert_eq!(
            st.rmap[&Method::PteChainsGrouped].bytes_peak,
            s / K4 * lines * 32
        );
        assert_eq!(st.rmap[&Method::PartialObjrmap].bytes_peak, 0);
    }
}

#[test]
fn shared_tables_are_one_per_aligned_range() {
    let n = 5u64;
    let st = run(
        Config::ia32_pae(PageTables::Shared),
        &fanout(n as u32, BASE, 4 * M2, None),
        true,
    );
    assert_eq!(st.page_tables.pages_by_level, [4, 3 * n, n]);
    assert_eq!(st.page_tables.shared_pages_by_level, [4, 0, 0]);
    // One PTE per page whoever touches it: one chain entry per page.
    assert_eq!(st.rmap[&Method::PteChains].bytes_peak, 4 * M2 / K4 * 8);
    assert_eq!(st.counts.faults, 4 * M2 / K4);
    assert_eq!(st.counts.hits, (n - 1) * 4 * M2 / K4);
}

#[test]
fn the_last_range_is_shared_only_if_whole() {
    // 3 whole 2M ranges and 1M more: the partial range stays private.
    let n = 4u64;
    let st = run(
        Config::ia32_pae(PageTables::Shared),
        &fanout(n as u32, BASE, 3 * M2 + M2 / 2, None),
        true,
    );
    assert_eq!(st.page_tables.shared_pages_by_level[0], 3);
    assert_eq!(st.page_tables.pages_by_level[0], 3 + n);
    // Unaligned start: no range is whole except those fully inside.
    let st = run(
        Config::ia32_pae(PageTables::Shared),
        &fanout(n as u32, BASE + K4, 3 * M2, None),
        true,
    );
    assert_eq!(st.page_tables.shared_pages_by_level[0], 2);
    assert_eq!(st.page_tables.pages_by_level[0], 2 + 2 * n);
}

#[test]
fn mprotect_of_one_page_unshares_one_range_for_one_process() {
    let mut ev = fanout(3, BASE, 2 * M2, None);
    ev.push(switch(2));
    ev.push(Event::Protect {
        start: VirtAddr(BASE + M2 + 5 * K4),
        len: K4,
        prot: Prot(Prot::READ),
    });
    let st = run(Config::ia32_pae(PageTables::Shared), &ev, true);
    assert_eq!(st.counts.unshares, 1);
    // Two shared PTE pages still, plus process 2's own copy of the second.
    assert_eq!(st.page_tables.shared_pages_by_level[0], 2);
    assert_eq!(st.page_tables.pages_by_level[0], 3);
    // Its 512 PTEs became its own: 512 more chain entries.
    assert_eq!(st.rmap[&Method::PteChains].bytes, (2 * M2 / K4 + 512) * 8);
}

#[test]
fn hugetlb_maps_huge_leaves_and_pmd_sharing_shares_pud_ranges() {
    let g1 = 1u64 << 30;
    let mut cfg = Config::ia32_pae(PageTables::Private);
    cfg.hugetlb = vec![HugetlbPool {
        size: PageSize::M2,
        count: 1024,
    }];
    let ev = fanout(4, g1, g1, Some((21, true)));
    let st = run(cfg.clone(), &ev, false);
    // No PTE pages; each process's PMD page holds 512 huge leaves.
    assert_eq!(st.page_tables.pages_by_level, [0, 12, 4]);
    assert_eq!(st.counts.faults, 4 * 512);
    assert_eq!(st.hugetlb_free, [(M2, 512)]);
    cfg.page_tables = PageTables::HugetlbPmdShare;
    let st = run(cfg.clone(), &ev, false);
    // The PUD-aligned gigabyte's PMD page is shared (PAE preallocates the
    // private ones anyway, so they stay, empty of leaves).
    assert_eq!(st.page_tables.shared_pages_by_level, [0, 1, 0]);
    assert_eq!(st.counts.faults, 512);
    // A pool too small is refused, naming the pool.
    cfg.hugetlb[0].count = 100;
    let mut m = Sharing::new(cfg.clone()).unwrap();
    m.event(&switch(1)).unwrap();
    m.event(&shm(g1, g1)).unwrap();
    let err = m
        .event(&Event::Advise {
            start: VirtAddr(g1),
            len: g1,
            advice: Advice::PageOrder {
                shift: 21,
                wait: true,
            },
        })
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("hugetlb pool of 2M") && err.contains("100 free"),
        "{err}"
    );
    // A pool the machine cannot hold is refused at configuration.
    cfg.hugetlb[0].count = 1 << 20;
    let err = Sharing::new(cfg).unwrap_err().to_string();
    assert!(err.starts_with("hugetlb:") && err.contains("16G"), "{err}");
}

fn anon(start: u64, len: u64) -> Event {
    map(start, len, Backing::Anon, Share::Private)
}

/// Process 1 maps `len` private anonymous bytes at `start`, writes every
/// page, and forks process 2.
fn forked(start: u64, len: u64) -> Vec<Event> {
    let mut ev = vec![switch(1), anon(start, len)];
    ev.extend((0..len / K4).map(|i| touch(start + i * K4, true)));
    ev.push(Event::fork(2));
    ev
}

fn chain_bytes(st: &SharingStats) -> u64 {
    st.rmap[&Method::PteChains].bytes
}

#[test]
fn a_write_in_a_table_shared_at_fork_copies_that_table_only() {
    let mut ev = forked(BASE, 2 * M2);
    let st = run(Config::ia32_pae(PageTables::Private), &ev, true);
    // Private: the child copies both PTE pages and their 1024 PTEs.
    assert_eq!(st.page_tables.pages_by_level, [4, 6, 2]);
    assert_eq!(chain_bytes(&st), 2 * 1024 * 8);
    let cfg = Config::ia32_pae(PageTables::Shared);
    let st = run(cfg.clone(), &ev, true);
    assert_eq!(st.counts.fork_shared_tables, 2);
    assert_eq!(st.page_tables.pages_by_level, [2, 6, 2]);
    assert_eq!(st.page_tables.shared_pages_by_level, [2, 0, 0]);
    assert_eq!(chain_bytes(&st), 1024 * 8);
    // A read by either process goes through the shared table.
    ev.extend([switch(2), touch(BASE + M2 + 8 * K4, false)]);
    ev.extend([switch(1), touch(BASE + 9 * K4, false)]);
    let st = run(cfg.clone(), &ev, true);
    assert_eq!((st.counts.fork_unshares, st.counts.hits), (0, 2));
    assert_eq!(st.page_tables.pages_by_level[0], 2);
    // A write by the child inside the second table copies that one table
    // (512 new PTEs), then copies the page it wrote.
    ev.extend([switch(2), touch(BASE + M2 + 8 * K4, true)]);
    let st = run(cfg.clone(), &ev, true);
    assert_eq!(st.counts.fork_unshares, 1);
    assert_eq!(st.counts.cow_copies, 1);
    assert_eq!(st.page_tables.pages_by_level, [3, 6, 2]);
    assert_eq!(chain_bytes(&st), (1024 + 512) * 8);
    // An mprotect of one page of the first table copies it for the parent only.
    ev.extend([
        switch(1),
        Event::Protect {
            start: VirtAddr(BASE + 5 * K4),
            len: K4,
            prot: Prot(Prot::READ),
        },
    ]);
    let st = run(cfg, &ev, true);
    assert_eq!(st.counts.fork_unshares, 2);
    assert_eq!(st.page_tables.pages_by_level, [4, 6, 2]);
}

#[test]
fn a_read_fault_in_a_table_shared_at_fork_fills_it_in_place() {
    // McCracken's patch copies a PTE page shared at fork only on a write
    // fault: a read fault fills the PTE in the page every sharer uses.
    let cfg = Config::ia32_pae(PageTables::Shared);
    let file = Backing::File {
        file_id: 1,
        offset: 0,
    };
    let mut ev = vec![switch(1), map(BASE, M2, file, Share::Private)];
    ev.extend((0..256).map(|i| touch(BASE + 2 * i * K4, false)));
    ev.push(Event::fork(2));
    ev.extend([switch(2), touch(BASE + K4, false)]);
    let st = run(cfg.clone(), &ev, true);
    assert_eq!(st.counts.fork_shared_tables, 1);
    assert_eq!((st.counts.fork_unshares, st.counts.faults), (0, 257));
    assert_eq!(st.page_tables.pages_by_level[0], 1);
    // One PTE, one chain entry, for both processes.
    assert_eq!(chain_bytes(&st), 257 * 8);
    // The parent finds the child's PTE present.
    ev.extend([switch(1), touch(BASE + K4, false)]);
    let st = run(cfg.clone(), &ev, true);
    assert_eq!((st.counts.faults, st.counts.hits), (257, 1));
    // A write fault copies the table, as before.
    ev.extend([switch(2), touch(BASE + 3 * K4, true)]);
    let st = run(cfg.clone(), &ev, true);
    assert_eq!(st.counts.fork_unshares, 1);
    assert_eq!(st.page_tables.pages_by_level[0], 2);
    // A read fault on anonymous memory copies it too (the model has no
    // zero page: the faulting process gets a page of its own).
    let mut ev = vec![switch(1), anon(BASE, M2), touch(BASE, true)];
    ev.extend([Event::fork(2), switch(2), touch(BASE + K4, false)]);
    let st = run(cfg, &ev, true);
    assert_eq!(
        (st.counts.fork_shared_tables, st.counts.fork_unshares),
        (1, 1)
    );
}

#[test]
fn the_last_user_takes_the_table_and_nothing_is_freed_twice() {
    let cfg = Config::ia32_pae(PageTables::Shared);
    // The child exits: the parent is the table's one user; its write takes
    // the table over, with no copy and no new reverse-map entry.
    let mut ev = forked(BASE, M2);
    ev.extend([switch(2), Event::Exit { status: 0 }]);
    ev.extend([switch(1), touch(BASE + 3 * K4, true)]);
    let st = run(cfg.clone(), &ev, true);
    assert_eq!((st.counts.fork_unshares, st.counts.fork_takeovers), (0, 1));
    assert_eq!(st.page_tables.pages_by_level, [1, 3, 1]);
    assert_eq!(st.page_tables.shared_pages_by_level, [0, 0, 0]);
    assert_eq!(chain_bytes(&st), 512 * 8);
    // Both leave without writing: the last one out frees the table once.
    for last in [1u32, 2] {
        let mut ev = forked(BASE, M2);
        ev.extend([switch(3 - last), Event::Exit { status: 0 }]);
        ev.extend([switch(last), Event::Exit { status: 0 }]);
        let st = run(cfg.clone(), &ev, true);
        assert_eq!(st.page_tables.page_table_bytes, 0);
        assert_eq!(st.page_tables.pages_by_level, [0, 0, 0]);
        let plain = &st.rmap[&Method::PteChains];
        assert_eq!((plain.bytes, plain.adds, plain.removes), (0, 512, 512));
    }
}

#[test]
fn only_tables_wholly_inside_one_private_vma_are_shared_at_fork() {
    // 4M from 4K past a 2M boundary: three PTE pages, one wholly inside.
    let st = run(
        Config::ia32_pae(PageTables::Shared),
        &forked(BASE + K4, 2 * M2),
        true,
    );
    assert_eq!(st.counts.fork_shared_tables, 1);
    assert_eq!(st.page_tables.pages_by_level[0], 3 + 2);
}

/// One random event for sharing at fork: private mappings only, often whole
/// aligned PTE ranges, long runs of references, and many forks.
fn fork_event() -> impl Strategy<Value = Event> {
    let page = 0u64..2048;
    prop_oneof![
        2 => (1u32..4).prop_map(switch),
        2 => (0u64..4, 1u64..3, 0u8..3).prop_map(|(span, n, k)| {
            let backing = if k == 0 { Backing::File { file_id: 1, offset: 0 } } else { Backing::Anon };
            map(BASE + span * M2, n * M2, backing, Share::Private)
        }),
        1 => (page.clone(), 1u64..700).prop_map(|(p, n)| anon(BASE + p * K4, n * K4)),
        1 => (page.clone(), 1u64..600).prop_map(|(p, n)| Event::Unmap {
            start: VirtAddr(BASE + p * K4),
            len: n * K4
        }),
        1 => (page.clone(), 1u64..8).prop_map(|(p, n)| Event::Protect {
            start: VirtAddr(BASE + p * K4),
            len: n * K4,
            prot: Prot(Prot::READ)
        }),
        3 => (1u32..4).prop_map(Event::fork),
        1 => Just(Event::Exit { status: 0 }),
        3 => (page.clone(), any::<bool>()).prop_map(|(p, w)| touch(BASE + p * K4 + 8, w)),
        3 => (page, 1u64..600, any::<bool>()).prop_map(|(p, n, w)| {
            Event::Advise {
                start: VirtAddr(BASE + p * K4),
                len: n,
                advice: Advice::Other(if w { 1 } else { 0 }),
            }
        }),
    ]
}

/// One random event over a small address space (4 PTE ranges), 5 pids, 2 files.
fn event() -> impl Strategy<Value = Event> {
    let page = 0u64..2048;
    prop_oneof![
        (1u32..6).prop_map(switch),
        (page.clone(), 1u64..700, 0u8..4).prop_map(|(p, n, k)| {
            let backing = if k % 2 == 0 {
                Backing::File {
                    file_id: (k / 2) as u64,
                    offset: (p % 7) * K4,
                }
            } else {
                Backing::Anon
            };
            let sharing = if k < 2 { Share::Shared } else { Share::Private };
            map(BASE + p * K4, n * K4, backing, sharing)
        }),
        (page.clone(), 1u64..300).prop_map(|(p, n)| Event::Unmap {
            start: VirtAddr(BASE + p * K4),
            len: n * K4
        }),
        (page.clone(), 1u64..50).prop_map(|(p, n)| Event::Protect {
            start: VirtAddr(BASE + p * K4),
            len: n * K4,
            prot: Prot(Prot::READ)
        }),
        (1u32..6).prop_map(Event::fork),
        Just(Event::Exit { status: 0 }),
        Just(Event::Exec(None)),
        (page.clone(), any::<bool>()).prop_map(|(p, w)| touch(BASE + p * K4 + 8, w)),
        (page, 1u64..600, any::<bool>()).prop_map(|(p, n, w)| {
            Event::Advise {
                start: VirtAddr(BASE + p * K4),
                len: n,
                advice: Advice::Other(if w { 1 } else { 0 }),
            }
        }),
    ]
}

/// Expands `Advise Other(w)` with len n into a run of n references (writes if w).
fn expand(ev: Vec<Event>) -> Vec<Event> {
    let mut out = Vec::new();
    for e in ev {
        match e {
            Event::Advise {
                start,
                len,
                advice: Advice::Other(w),
            } => {
                out.extend((0..len).map(|i| touch(start.0 + i * K4, w == 1)));
            }
            e => out.push(e),
        }
    }
    out
}

/// The model and the reference count the same after every event of `ev`
/// (every invariant checked too), and the batched path gives the same result.
fn agrees_with_the_reference(mode: PageTables, ev: &[Event]) -> Result<(), TestCaseError> {
    let cfg = Config::ia32_pae(mode);
    let mut m = Sharing::new(cfg.clone()).unwrap();
    let mut r = Reference::new(cfg.clone());
    for (i, e) in ev.iter().enumerate() {
        m.event(e).unwrap();
        r.event(e);
        m.check()
            .map_err(|x| TestCaseError::fail(format!("event {i} {e:?}: {x}")))?;
        let s = m.stats();
        let (c, n) = (&r.counts, &s.counts);
        prop_assert_eq!(
            (
                n.faults,
                n.hits,
                n.cow_copies,
                n.fork_shared_tables,
                n.fork_unshares,
                n.fork_takeovers
            ),
            (
                c.faults,
                c.hits,
                c.cow_copies,
                c.fork_shared_tables,
                c.fork_unshares,
                c.fork_takeovers
            ),
            "event {} {:?}",
            i,
            e
        );
        prop_assert_eq!(
            &s.page_tables.pages_by_level,
            &c.tables,
            "event {} {:?}",
            i,
            e
        );
        prop_assert_eq!(s.page_tables.page_table_bytes, c.pt_bytes);
        prop_assert_eq!(s.page_tables.page_table_bytes_peak, c.pt_bytes_peak);
        for (method, want) in &c.chains {
            let got = &s.rmap[method];
            let have = [
                got.bytes,
                got.objects,
                got.bytes_peak,
                got.objects_peak,
                got.adds,
                got.removes,
                got.remove_entries_walked,
            ];
            prop_assert_eq!(&have, want, "{:?} after event {} {:?}", method, i, e);
        }
    }
    let mut b = Sharing::new(cfg).unwrap();
    b.events(ev).unwrap();
    prop_assert_eq!(b.stats(), m.stats());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn private_model_matches_the_materialising_reference(ev in prop::collection::vec(event(), 1..60)) {
        agrees_with_the_reference(PageTables::Private, &expand(ev))?;
    }

    #[test]
    fn tables_shared_at_fork_match_the_materialising_reference(ev in prop::collection::vec(fork_event(), 1..60)) {
        agrees_with_the_reference(PageTables::Shared, &expand(ev))?;
    }

    #[test]
    fn shared_modes_keep_their_invariants(ev in prop::collection::vec(event(), 1..60), pmd in any::<bool>()) {
        let ev = expand(ev);
        let mut cfg = Config::ia32_pae(if pmd { PageTables::HugetlbPmdShare } else { PageTables::Shared });
        cfg.hugetlb = vec![HugetlbPool { size: PageSize::M2, count: 64 }];
        let mut m = Sharing::new(cfg.clone()).unwrap();
        for (i, e) in ev.iter().enumerate() {
            m.event(e).unwrap();
            m.check().map_err(|x| TestCaseError::fail(format!("event {i} {e:?}: {x}")))?;
        }
        let mut b = Sharing::new(cfg).unwrap();
        b.events(&ev).unwrap();
        prop_assert_eq!(b.stats(), m.stats());
    }
}
