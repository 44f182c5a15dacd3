//! Zones and LRU lists under random use, as the fault and reclaim paths will
//! drive them: allocate into the LRU, touch, split, reclaim victims and free
//! them. After every step `check()` holds and the frames the test holds plus
//! the free frames equal the total.

use pagelab_core::{Bytes, Order, PageSize, Pfn};
use pagelab_mm::phys::{
    FrameAllocator, LargeZoneConfig, LruList, Page, PhysConfig, PhysMem, ZoneId, ZoneKind, ZonePref,
};
use proptest::prelude::*;
use std::collections::HashMap;

#[derive(Debug, Clone)]
enum Op {
    Alloc(u8, u8),
    Touch(usize),
    Split(usize),
    Free(usize),
    Reclaim(usize, u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..=9, 0u8..4).prop_map(|(o, z)| Op::Alloc(o, z)),
        3 => any::<usize>().prop_map(Op::Touch),
        1 => any::<usize>().prop_map(Op::Split),
        2 => any::<usize>().prop_map(Op::Free),
        1 => (0usize..3, 1u64..1200).prop_map(|(z, n)| Op::Reclaim(z, n)),
    ]
}

fn mem() -> PhysMem {
    // 16M: dma32 8M, normal 4M, large 4M of 2M pages.
    let mut cfg = PhysConfig::new(Bytes(16 << 20));
    cfg.max_order = 9;
    cfg.dma32 = Bytes(8 << 20);
    cfg.large = Some(LargeZoneConfig {
        size: Bytes(4 << 20),
        page: PageSize::M2,
        exclusive: true,
    });
    PhysMem::new(&cfg).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn zones_and_lru_stay_consistent(ops in prop::collection::vec(op(), 1..200)) {
        let mut m = mem();
        // Every page the test holds, all on the LRU: head -> order.
        let mut held: HashMap<u64, u8> = HashMap::new();
        let mut keys: Vec<u64> = Vec::new();
        let pick = |keys: &Vec<u64>, held: &HashMap<u64, u8>, i: usize| {
            let live: Vec<u64> = keys.iter().copied().filter(|k| held.contains_key(k)).collect();
            (!live.is_empty()).then(|| live[i % live.len()])
        };
        for op in ops {
            match op {
                Op::Alloc(o, z) => {
                    let pref = match z {
                        0 => ZonePref::Only(ZoneKind::Dma32),
                        1 => ZonePref::Only(ZoneKind::Large),
                        _ => ZonePref::Any,
                    };
                    if let Some(p) = m.alloc(Order(o), pref) {
                        if pref == ZonePref::Any && o < 9 {
                            prop_assert_ne!(m.zone_of(p), m.zone_id(ZoneKind::Large));
                        }
                        let zone = m.zone_of(p).unwrap();
                        m.lru_mut().add(zone, Page { pfn: p, order: Order(o) }, LruList::Inactive).unwrap();
                        prop_assert!(held.insert(p.0, o).is_none());
                        keys.push(p.0);
                    }
                }
                Op::Touch(i) => {
                    if let Some(p) = pick(&keys, &held, i) {
                        m.lru_mut().mark_accessed(Pfn(p)).unwrap();
                    }
                }
                Op::Split(i) => {
                    if let Some(p) = pick(&keys, &held, i) {
                        let o = held[&p];
                        m.split(Pfn(p), Order(o)).unwrap();
                        m.lru_mut().split(Pfn(p)).unwrap();
                        for f in p..p + (1 << o) {
                            held.insert(f, 0);
                            if f != p {
                                keys.push(f);
                            }
                        }
                    }
                }
                Op::Free(i) => {
                    if let Some(p) = pick(&keys, &held, i) {
                        let o = held.remove(&p).unwrap();
                        m.lru_mut().remove(Pfn(p)).unwrap();
                        m.free(Pfn(p), Order(o)).unwrap();
                        prop_assert!(m.free(Pfn(p), Order(o)).is_err());
                    }
                }
                Op::Reclaim(z, n) => {
                    let victims = m.lru_mut().select_victims(ZoneId(z), n);
                    let frames: u64 = victims.iter().map(|v| 1u64 << v.order.0).sum();
                    let on_lists = m.lru().zone_stats(ZoneId(z));
                    prop_assert!(frames >= n || on_lists.active_pages + on_lists.inactive_pages == 0);
                    for v in victims {
                        prop_assert_eq!(held.remove(&v.pfn.0), Some(v.order.0));
                        prop_assert_eq!(m.zone_of(v.pfn), Some(ZoneId(z)));
                        m.free(v.pfn, v.order).unwrap();
                    }
                }
            }
            keys.retain(|k| held.contains_key(k));
            m.check().map_err(|e| TestCaseError::fail(e.to_string()))?;
            let used: u64 = held.values().map(|&o| 1u64 << o).sum();
            prop_assert_eq!(m.free_frames() + used, m.total_frames());
            let s = m.stats();
            prop_assert_eq!(s.used_frames, used);
        }
    }
}
