//! Hierarchy semantics on small hand-computed cases: levels, sides, routing of
//! sizes to arrays, fragments, invalidation, counters.

use pagelab_core::{PageSize, VirtAddr, Vpn};
use pagelab_tlb::{preset, Outcome, Side, TlbConfig, TlbHierarchy};
use Outcome::{L1Hit, L2Hit, Miss};

fn cfg(text: &str) -> TlbConfig {
    TlbConfig::from_toml_str(text, "test").unwrap()
}

fn size(s: &str) -> PageSize {
    s.parse().unwrap()
}

const TWO_LEVEL: &str = r#"
name = "tiny"
[l1i]
arrays = [{ entries = 2 }]
[l1d]
arrays = [{ entries = 2 }]
[l2]
arrays = [{ entries = 4 }]
"#;

#[test]
fn two_level_exact_outcomes_and_counters() {
    let mut t = TlbHierarchy::new(&cfg(TWO_LEVEL)).unwrap();
    let k = PageSize::K4;
    let d = Side::Data;
    let got: Vec<Outcome> = [1, 2, 3, 1, 2, 4, 5, 1]
        .iter()
        .map(|&v| t.access(d, Vpn(v), k))
        .collect();
    // L1 (2) holds the last two pages; L2 (4) the last four distinct misses of L1.
    // 1 2 3: cold. 1: L1 has {3,2}, L2 has {3,2,1} → L2 hit. 2: L1 {1,3} → L2 hit.
    // 4: miss (L2 now 4,2,1,3). 5: miss, evicts 3 from L2. 1: L1 {5,4}, L2 has 1 → L2 hit.
    assert_eq!(got, vec![Miss, Miss, Miss, L2Hit, L2Hit, Miss, Miss, L2Hit]);
    assert_eq!(t.access(d, Vpn(1), k), L1Hit);
    let s = t.stats();
    assert_eq!((s.l1d.accesses, s.l1d.hits, s.l1d.misses), (9, 1, 8));
    let l2 = s.l2.unwrap();
    assert_eq!((l2.accesses, l2.hits, l2.misses), (8, 3, 5));
    assert_eq!(
        (
            s.data.accesses,
            s.data.l1_hits,
            s.data.l2_hits,
            s.data.misses
        ),
        (9, 1, 3, 5)
    );
    assert_eq!(s.instr, Default::default());
    t.reset_stats();
    assert_eq!(t.stats().data.accesses, 0);
    assert_eq!(t.access(d, Vpn(1), k), L1Hit); // entries survive a counter reset
}

#[test]
fn unified_l2_is_shared_split_l2_is_not() {
    let mut unified = TlbHierarchy::new(&cfg(TWO_LEVEL)).unwrap();
    let k = PageSize::K4;
    assert_eq!(unified.access(Side::Instr, Vpn(9), k), Miss);
    assert_eq!(unified.access(Side::Data, Vpn(9), k), L2Hit);
    let mut split = TlbHierarchy::new(&preset("pkunity").unwrap()).unwrap();
    assert_eq!(split.access(Side::Instr, Vpn(9), k), Miss);
    assert_eq!(split.access(Side::Data, Vpn(9), k), Miss);
    let s = split.stats();
    assert!(s.l2.is_none() && s.l2i.unwrap().misses == 1 && s.l2d.unwrap().misses == 1);
}

#[test]
fn weisberg_counts_walks_per_side() {
    let mut t = TlbHierarchy::new(&preset("weisberg").unwrap()).unwrap();
    let s16 = size("16K");
    for round in 0..2 {
        for v in 0..64 {
            let want = if round == 0 { Miss } else { L1Hit };
            assert_eq!(t.access(Side::Instr, Vpn(v), s16), want);
        }
    }
    assert_eq!(t.access(Side::Instr, Vpn(64), s16), Miss); // evicts page 0
    assert_eq!(t.access(Side::Instr, Vpn(0), s16), Miss);
    let s = t.stats();
    assert_eq!(
        (s.instr.accesses, s.instr.misses, s.data.accesses),
        (130, 66, 0)
    );
}

#[test]
fn fragment_caches_one_entry_per_base_fragment() {
    // Pentium 4: 4M pages are fragmented into the 4K I-TLB; the D-TLB holds them whole.
    let mut t = TlbHierarchy::new(&preset("pentium4").unwrap()).unwrap();
    let m4 = size("4M");
    assert_eq!(t.access_addr(Side::Instr, VirtAddr(0x40_0000), m4), Miss);
    assert_eq!(t.access_addr(Side::Instr, VirtAddr(0x40_0fff), m4), L1Hit); // same 4K fragment
    assert_eq!(t.access_addr(Side::Instr, VirtAddr(0x40_1000), m4), Miss); // next fragment
    assert_eq!(t.access_addr(Side::Data, VirtAddr(0x40_0000), m4), Miss);
    assert_eq!(t.access_addr(Side::Data, VirtAddr(0x7f_ffff), m4), L1Hit); // whole 4M entry
                                                                           // Invalidating the 4M page removes all of its fragments.
    t.invalidate(Vpn(1), m4);
    assert_eq!(t.access_addr(Side::Instr, VirtAddr(0x40_0000), m4), Miss);
    assert_eq!(t.access_addr(Side::Instr, VirtAddr(0x40_1000), m4), Miss);
    assert_eq!(t.access_addr(Side::Data, VirtAddr(0x40_0000), m4), Miss);
}

#[test]
fn sizes_route_to_their_arrays() {
    // Skylake L1 DTLB: 1G has 4 entries of its own; 2M 32; 64K pages go to the 4K array.
    let mut t = TlbHierarchy::new(&preset("skylake").unwrap()).unwrap();
    let g1 = PageSize::G1;
    for v in 0..5 {
        t.access(Side::Data, Vpn(v), g1);
    }
    assert_eq!(t.access(Side::Data, Vpn(0), g1), L2Hit); // L1 1G array held 4; L2 1G array 16
                                                         // 4K and 64K pages share the 64-entry 4-way array: same set, 4 ways.
    let k64 = size("64K");
    let k4 = PageSize::K4;
    for v in [0u64, 16, 32, 48] {
        t.access(Side::Data, Vpn(v), k4);
    }
    t.access(Side::Data, Vpn(64), k64); // set 0 of 16: evicts 4K page 0 from L1
    assert_eq!(t.access(Side::Data, Vpn(0), k4), L2Hit);
    // ...while 2M pages live in their own array and do not disturb it.
    t.access(Side::Data, Vpn(0), PageSize::M2);
    assert_eq!(t.access(Side::Data, Vpn(0), k4), L1Hit);
}

#[test]
fn invalidate_range_drops_every_overlapping_entry() {
    let mut t = TlbHierarchy::new(&cfg(TWO_LEVEL)).unwrap();
    let k = PageSize::K4;
    t.access(Side::Data, Vpn(1), k);
    t.access(Side::Data, Vpn(0), PageSize::M2);
    t.invalidate_range(VirtAddr(0x1fff), 1);
    assert_eq!(t.access(Side::Data, Vpn(1), k), Miss);
    assert_eq!(t.access(Side::Data, Vpn(0), PageSize::M2), Miss);
    t.flush();
    assert_eq!(t.access(Side::Data, Vpn(1), k), Miss);
}

#[test]
fn the_hosts_block_translations_share_the_last_level_uncounted() {
    // An L1 of 2 and an L2 of 4 (LRU): the host's translation of a block is held in the
    // L2 beside the guest's pages, so it pushes the least recent of them out.
    let mut t = TlbHierarchy::new(&cfg(TWO_LEVEL)).unwrap();
    let (d, k) = (Side::Data, PageSize::K4);
    for v in 1..=4 {
        assert_eq!(t.access(d, Vpn(v), k), Miss);
    }
    let before = t.stats();
    assert!(!t.host_block(7));
    assert!(t.host_block(7));
    // Neither lookup is counted.
    assert_eq!(t.stats(), before);
    // The L2 held 1..4; block 7 pushed out page 1 (L1 holds 3 and 4).
    assert_eq!(t.access(d, Vpn(1), k), Miss);
    assert_eq!(t.access(d, Vpn(2), k), Miss);
    // A block's tag is its own: guest page 7 and the 2M page at block 7 are other entries.
    assert_eq!(t.access(d, Vpn(7), k), Miss);
    assert_eq!(t.access(d, Vpn(7), PageSize::M2), Miss);
    // Without an L2, the data side's L1 holds them.
    let mut one = TlbHierarchy::new(&cfg(
        "name = \"one\"\n[l1i]\narrays = [{ entries = 2 }]\n[l1d]\narrays = [{ entries = 2 }]\n",
    ))
    .unwrap();
    assert_eq!(one.access(d, Vpn(1), k), Miss);
    assert!(!one.host_block(3) && !one.host_block(4));
    assert_eq!(one.access(d, Vpn(1), k), Miss);
}
