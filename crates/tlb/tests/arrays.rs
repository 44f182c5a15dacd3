//! Hand-computed sequences on single arrays: exact hit/miss patterns, eviction
//! order, set conflicts, mixed sizes, flush and invalidation.

use pagelab_core::{PageSize, Vpn};
use pagelab_tlb::{FullyAssoc, SetAssoc, Tlb, TlbArray};

const K4: PageSize = PageSize::K4;
const M2: PageSize = PageSize::M2;

fn pattern(t: &mut impl Tlb, seq: &[u64]) -> String {
    seq.iter()
        .map(|&v| if t.access(Vpn(v), K4) { 'H' } else { 'M' })
        .collect()
}

#[test]
fn fully_assoc_exact_pattern_and_eviction_order() {
    let mut t = FullyAssoc::new(4);
    // 1-4 cold; 1 hits and becomes MRU; 5 evicts 2 (LRU); 2 evicts 3; 1 still there.
    assert_eq!(pattern(&mut t, &[1, 2, 3, 4, 1, 5, 2, 1, 3]), "MMMMHMMHM");
    // After ...,2,1,3: 3 evicted 4 (order was 1,2,5,4 → LRU 4).
    assert_eq!(
        t.lru_order().iter().map(|e| e.0 .0).collect::<Vec<_>>(),
        vec![3, 1, 2, 5]
    );
    assert_eq!(t.len(), 4);
}

#[test]
fn fully_assoc_insert_reports_victim() {
    let mut t = FullyAssoc::new(2);
    assert_eq!(t.insert(Vpn(1), K4), None);
    assert_eq!(t.insert(Vpn(2), K4), None);
    assert_eq!(t.insert(Vpn(1), K4), None); // touch, not a second copy
    assert_eq!(t.insert(Vpn(3), K4), Some((Vpn(2), K4)));
    assert!(t.lookup(Vpn(1), K4));
    assert!(!t.lookup(Vpn(2), K4));
}

#[test]
fn sizes_coexist_and_never_match_each_other() {
    for mut t in [TlbArray::new(4, None), TlbArray::new(4, Some(2))] {
        assert!(!t.access(Vpn(5), K4));
        assert!(!t.access(Vpn(5), M2));
        assert!(t.access(Vpn(5), K4));
        assert!(t.access(Vpn(5), M2));
        assert!(
            t.contains(Vpn(5), K4) && t.contains(Vpn(5), M2) && !t.contains(Vpn(5), PageSize::G1)
        );
        assert_eq!(t.resident(), vec![(Vpn(5), K4), (Vpn(5), M2)]);
    }
}

#[test]
fn set_assoc_conflicts_stay_in_their_set() {
    // 8 entries, 2 ways: 4 sets; pages 0, 4, 8 all map to set 0.
    let mut t = SetAssoc::new(8, 2);
    assert_eq!(t.sets(), 4);
    assert_eq!(pattern(&mut t, &[0, 4, 8]), "MMM"); // 8 evicts 0
    assert_eq!(pattern(&mut t, &[1, 5]), "MM"); // set 1 untouched by set 0
    assert_eq!(pattern(&mut t, &[4, 0, 8]), "HMM"); // 0 evicts 8 (LRU after 4 was touched); 8 evicts 4
    assert_eq!(t.set_order(Vpn(0)), vec![(Vpn(8), K4), (Vpn(0), K4)]);
    assert_eq!(pattern(&mut t, &[1, 5]), "HH");
    assert_eq!(t.len(), 4);
    // A fully associative array of the same size would have hit 4, 0 and 8 again.
    let mut fa = FullyAssoc::new(8);
    assert_eq!(pattern(&mut fa, &[0, 4, 8, 1, 5, 4, 0, 8]), "MMMMMHHH");
}

#[test]
fn set_index_is_page_number_modulo_sets_for_every_size() {
    let mut t = SetAssoc::new(4, 1); // direct mapped, 4 sets
    assert!(!t.access(Vpn(2), M2));
    assert!(!t.access(Vpn(6), K4)); // same set as (2, 2M): evicts it
    assert!(!t.contains(Vpn(2), M2));
    assert!(!t.access(Vpn(3), M2)); // another set
    assert!(t.contains(Vpn(6), K4));
}

#[test]
fn invalidate_and_flush() {
    for mut t in [
        TlbArray::new(4, None),
        TlbArray::new(4, Some(2)),
        TlbArray::new(4, Some(4)),
    ] {
        for v in 0..4 {
            t.access(Vpn(v), K4);
        }
        assert!(t.invalidate(Vpn(1), K4));
        assert!(!t.invalidate(Vpn(1), K4));
        assert!(!t.invalidate(Vpn(2), M2));
        assert_eq!(t.len(), 3);
        assert!(!t.access(Vpn(1), K4));
        assert_eq!(t.invalidate_where(|v, _| v.0 % 2 == 0), 2);
        assert_eq!(t.resident(), vec![(Vpn(1), K4), (Vpn(3), K4)]);
        t.flush();
        assert!(t.is_empty());
        assert!(!t.access(Vpn(3), K4));
        assert_eq!(t.capacity(), 4);
    }
}

#[test]
fn invalidate_keeps_recency_order() {
    let mut t = FullyAssoc::new(3);
    for v in [1, 2, 3] {
        t.access(Vpn(v), K4);
    }
    t.invalidate(Vpn(2), K4);
    t.access(Vpn(4), K4); // room: no eviction
    t.access(Vpn(5), K4); // evicts 1, the least recent
    assert_eq!(
        t.lru_order().iter().map(|e| e.0 .0).collect::<Vec<_>>(),
        vec![5, 4, 3]
    );
    let mut s = SetAssoc::new(3, 3);
    for v in [1, 2, 3] {
        s.access(Vpn(v), K4);
    }
    s.invalidate(Vpn(2), K4);
    s.access(Vpn(4), K4);
    s.access(Vpn(5), K4);
    assert_eq!(
        s.set_order(Vpn(0))
            .iter()
            .map(|e| e.0 .0)
            .collect::<Vec<_>>(),
        vec![5, 4, 3]
    );
}

#[test]
fn large_fully_assoc_cycles_exactly() {
    // LRU with a cyclic stream one larger than the array misses every time.
    let mut t = FullyAssoc::new(2048);
    for round in 0..3 {
        for v in 0..2049u64 {
            assert!(!t.access(Vpn(v * 7919), K4), "round {round} page {v}");
        }
    }
    // Exactly the array size: hits after the first round.
    let mut t = FullyAssoc::new(2048);
    for v in 0..2048u64 {
        t.access(Vpn(v), K4);
    }
    assert!((0..2048u64).all(|v| t.access(Vpn(v), K4)));
}
