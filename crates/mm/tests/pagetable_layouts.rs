//! Hand-computed page-table layouts: memory for known mappings, refusals,
//! splitting by protect, freeing by unmap.

use pagelab_core::{BasePfn, PageSize, VirtAddr};
use pagelab_mm::pagetable::{Geometry, PageTable, PtError, PteFlags, RadixPageTable, Split};

const K4: u64 = 4096;
const M2: u64 = 2 << 20;
const G1: u64 = 1 << 30;

fn sz(s: &str) -> PageSize {
    s.parse().unwrap()
}

fn x86() -> RadixPageTable {
    RadixPageTable::new(Geometry::x86_64())
}

#[test]
fn empty_table_is_the_root() {
    let pt = x86();
    assert_eq!(pt.memory_bytes(), K4);
    assert_eq!(pt.stats().tables_per_level, vec![0, 0, 0, 1]);
}

#[test]
fn one_4k_page_needs_four_tables() {
    let mut pt = x86();
    pt.map(
        VirtAddr(0x7fff_1234_5000),
        BasePfn(7),
        PageSize::K4,
        PteFlags::RW,
    )
    .unwrap();
    assert_eq!(pt.memory_bytes(), 16 * 1024);
    let t = pt.walk(VirtAddr(0x7fff_1234_5fff)).unwrap();
    assert_eq!(
        (t.start, t.size, t.pfn, t.levels),
        (VirtAddr(0x7fff_1234_5000), PageSize::K4, BasePfn(7), 4)
    );
    assert!(pt.walk(VirtAddr(0x7fff_1234_6000)).is_none());
    // A miss in the same leaf table still reads four levels; elsewhere fewer.
    assert_eq!(pt.walk_levels(VirtAddr(0x7fff_1234_6000)), 4);
    assert_eq!(pt.walk_levels(VirtAddr(0x7fff_1240_0000)), 3);
    assert_eq!(pt.walk_levels(VirtAddr(0)), 1);
    assert_eq!(pt.walk_levels(VirtAddr(u64::MAX)), 0);
}

#[test]
fn a_2m_region_of_4k_pages_still_needs_four_tables() {
    let mut pt = x86();
    for i in 0..512 {
        pt.map(
            VirtAddr(G1 + i * K4),
            BasePfn(1000 + i),
            PageSize::K4,
            PteFlags::READ,
        )
        .unwrap();
    }
    assert_eq!(pt.memory_bytes(), 4 * K4);
    assert_eq!(pt.stats().leaves_per_size[&PageSize::K4], 512);
    // One more page in the next 2M region needs one more leaf table.
    pt.map(VirtAddr(G1 + M2), BasePfn(0), PageSize::K4, PteFlags::READ)
        .unwrap();
    assert_eq!(pt.memory_bytes(), 5 * K4);
}

#[test]
fn a_2m_leaf_needs_three_tables_and_a_1g_leaf_two() {
    let mut pt = x86();
    pt.map(VirtAddr(M2), BasePfn(512), PageSize::M2, PteFlags::RW)
        .unwrap();
    assert_eq!(pt.memory_bytes(), 3 * K4);
    assert_eq!(pt.walk(VirtAddr(M2 + 5)).unwrap().levels, 3);
    let mut pt = x86();
    pt.map(VirtAddr(G1), BasePfn(G1 / K4), PageSize::G1, PteFlags::RW)
        .unwrap();
    assert_eq!(pt.memory_bytes(), 2 * K4);
    let t = pt.walk(VirtAddr(G1 + 123_456)).unwrap();
    assert_eq!((t.size, t.levels, t.start), (PageSize::G1, 2, VirtAddr(G1)));
}

#[test]
fn a_contiguous_run_walks_at_its_size() {
    let mut pt = x86();
    pt.map(VirtAddr(0x10000), BasePfn(64), sz("64K"), PteFlags::RW)
        .unwrap();
    for off in [0u64, 0x1000, 0xffff] {
        let t = pt.walk(VirtAddr(0x10000 + off)).unwrap();
        assert_eq!(
            (t.start, t.size, t.pfn, t.levels),
            (VirtAddr(0x10000), sz("64K"), BasePfn(64), 4)
        );
    }
    assert_eq!(pt.memory_bytes(), 4 * K4);
    assert_eq!(pt.mappings_in(VirtAddr(0), 1 << 20).len(), 1);
}

#[test]
fn overlaps_are_refused_in_every_direction() {
    let mut pt = x86();
    pt.map(VirtAddr(M2), BasePfn(512), PageSize::M2, PteFlags::RW)
        .unwrap();
    let before = pt.memory_bytes();
    // smaller page inside a bigger one
    assert!(matches!(
        pt.map(VirtAddr(M2 + K4), BasePfn(0), PageSize::K4, PteFlags::RW),
        Err(PtError::Overlap { .. })
    ));
    // bigger page over a smaller one
    assert!(matches!(
        pt.map(VirtAddr(0), BasePfn(0), PageSize::G1, PteFlags::RW),
        Err(PtError::Overlap { .. })
    ));
    // the same page twice
    assert!(matches!(
        pt.map(VirtAddr(M2), BasePfn(0), PageSize::M2, PteFlags::RW),
        Err(PtError::Overlap { .. })
    ));
    // a run over one base page
    pt.map(VirtAddr(0x5000), BasePfn(5), PageSize::K4, PteFlags::RW)
        .unwrap();
    assert!(matches!(
        pt.map(VirtAddr(0), BasePfn(0), sz("32K"), PteFlags::RW),
        Err(PtError::Overlap { .. })
    ));
    // a failed map allocates nothing
    assert_eq!(pt.memory_bytes(), before + K4);
}

#[test]
fn bad_arguments_are_refused() {
    let mut pt = x86();
    let e = pt.map(VirtAddr(K4), BasePfn(0), PageSize::M2, PteFlags::RW);
    assert!(matches!(e, Err(PtError::Misaligned { .. })));
    let e = pt.map(VirtAddr(0), BasePfn(0), sz("4M"), PteFlags::RW);
    assert!(matches!(e, Err(PtError::UnsupportedSize { .. })));
    let e = pt.map(VirtAddr(0), BasePfn(3), sz("16K"), PteFlags::RW);
    assert!(matches!(e, Err(PtError::BadPfn { .. })));
    let e = pt.map(VirtAddr(1 << 48), BasePfn(0), PageSize::K4, PteFlags::RW);
    assert!(matches!(e, Err(PtError::OutOfRange { .. })));
    assert!(pt.walk(VirtAddr(u64::MAX)).is_none());
    assert!(matches!(
        pt.protect(VirtAddr(1), K4, PteFlags::READ),
        Err(PtError::BadRange { .. })
    ));
    assert!(matches!(
        pt.protect(VirtAddr(K4), u64::MAX - 10, PteFlags::READ),
        Err(PtError::BadRange { .. })
    ));
    assert_eq!(pt.memory_bytes(), K4);
}

#[test]
fn partial_protect_splits_a_2m_leaf_into_512_ptes() {
    let mut pt = x86();
    pt.map(VirtAddr(M2), BasePfn(512), PageSize::M2, PteFlags::RW)
        .unwrap();
    let report = pt
        .protect(VirtAddr(M2 + 8 * K4), 2 * K4, PteFlags::READ)
        .unwrap();
    let split = Split {
        start: VirtAddr(M2),
        from: PageSize::M2,
        to: PageSize::K4,
        pieces: 512,
    };
    assert_eq!(report.splits, vec![split]);
    assert_eq!(report.updated, 2);
    assert_eq!(pt.memory_bytes(), 4 * K4); // + one leaf table
    let t = pt.walk(VirtAddr(M2 + 9 * K4)).unwrap();
    assert_eq!(
        (t.size, t.pfn, t.flags, t.levels),
        (PageSize::K4, BasePfn(521), PteFlags::READ, 4)
    );
    assert_eq!(pt.walk(VirtAddr(M2 + 10 * K4)).unwrap().flags, PteFlags::RW);
    assert_eq!(pt.stats().leaves_per_size[&PageSize::K4], 512);
    assert_eq!(pt.stats().splits, 1);
}

#[test]
fn partial_protect_of_1g_splits_twice_and_whole_protect_splits_nothing() {
    let mut pt = x86();
    pt.map(VirtAddr(G1), BasePfn(G1 / K4), PageSize::G1, PteFlags::RW)
        .unwrap();
    let r = pt.protect(VirtAddr(G1), K4, PteFlags::READ).unwrap();
    let froms: Vec<_> = r.splits.iter().map(|s| (s.from, s.to)).collect();
    assert_eq!(
        froms,
        vec![(PageSize::G1, PageSize::M2), (PageSize::M2, PageSize::K4)]
    );
    assert_eq!(pt.memory_bytes(), 4 * K4);
    let r = pt.protect(VirtAddr(G1 + M2), M2, PteFlags::READ).unwrap();
    assert_eq!((r.updated, r.splits.len()), (1, 0));
}

#[test]
fn unmap_frees_empty_tables_and_checks_the_page() {
    let mut pt = x86();
    pt.map(VirtAddr(0x40_0000), BasePfn(1), PageSize::K4, PteFlags::RW)
        .unwrap();
    pt.map(VirtAddr(0x40_1000), BasePfn(2), PageSize::K4, PteFlags::RW)
        .unwrap();
    assert!(matches!(
        pt.unmap(VirtAddr(0x40_2000), PageSize::K4),
        Err(PtError::NotMapped { .. })
    ));
    assert!(matches!(
        pt.unmap(VirtAddr(0x40_0000), sz("8K")),
        Err(PtError::SizeMismatch { .. })
    ));
    pt.unmap(VirtAddr(0x40_0000), PageSize::K4).unwrap();
    assert_eq!(pt.memory_bytes(), 4 * K4);
    let m = pt.unmap(VirtAddr(0x40_1000), PageSize::K4).unwrap();
    assert_eq!(m.pfn, BasePfn(2));
    assert_eq!(pt.memory_bytes(), K4);
    let s = pt.stats();
    assert_eq!(
        (s.tables_allocated, s.tables_freed, s.peak_memory_bytes),
        (4, 3, 4 * K4)
    );
    // A freed table is reused.
    pt.map(VirtAddr(G1), BasePfn(0), PageSize::K4, PteFlags::RW)
        .unwrap();
    assert_eq!(pt.memory_bytes(), 4 * K4);
}

#[test]
fn split_demotes_one_step() {
    let mut pt = x86();
    pt.map(VirtAddr(0), BasePfn(0), sz("1M"), PteFlags::RW)
        .unwrap();
    let s = pt.split(VirtAddr(0x1234)).unwrap();
    assert_eq!((s.from, s.to, s.pieces), (sz("1M"), PageSize::K4, 256));
    assert_eq!(pt.walk(VirtAddr(0x5000)).unwrap().pfn, BasePfn(5));
    assert!(matches!(
        pt.split(VirtAddr(0x5000)),
        Err(PtError::CannotSplit { .. })
    ));
    assert!(matches!(
        pt.split(VirtAddr(G1)),
        Err(PtError::NotMapped { .. })
    ));
}

#[test]
fn other_geometries() {
    let mut a = RadixPageTable::new(Geometry::arm64_64k());
    // root (64 entries = 512 bytes) + level-2 table (64K) + level-1 table (64K)
    a.map(VirtAddr(0), BasePfn(0), sz("64K"), PteFlags::RW)
        .unwrap();
    assert_eq!(a.memory_bytes(), 512 + 2 * 65536);
    a.map(VirtAddr(512 << 20), BasePfn(8192), sz("512M"), PteFlags::RW)
        .unwrap();
    assert_eq!(a.walk(VirtAddr(600 << 20)).unwrap().levels, 2);
    assert_eq!(a.memory_bytes(), 512 + 2 * 65536);
    let mut p = RadixPageTable::new(Geometry::power_64k());
    p.map(VirtAddr(0), BasePfn(0), sz("64K"), PteFlags::RW)
        .unwrap();
    // root 8192 entries (64K), two 4K tables (512 entries) and a 256-byte leaf table
    assert_eq!(p.memory_bytes(), 65536 + 2 * 4096 + 256);
    let mut s = RadixPageTable::new(Geometry::arm64_16k());
    s.map(VirtAddr(32 << 20), BasePfn(2048), sz("32M"), PteFlags::RW)
        .unwrap();
    assert_eq!(s.walk(VirtAddr(33 << 20)).unwrap().size, sz("32M"));
    assert_eq!(s.memory_bytes(), 16 + 2 * 16384);
}
