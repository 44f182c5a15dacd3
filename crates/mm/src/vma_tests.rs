use super::*;
use pagelab_core::VirtAddr as V;
use proptest::prelude::*;
use std::collections::BTreeMap as Map;

const RW: Prot = Prot(Prot::READ | Prot::WRITE);
const RO: Prot = Prot(Prot::READ);

fn anon(start: u64, len: u64) -> MapEvent {
    MapEvent {
        start: VirtAddr(start),
        len,
        prot: RW,
        backing: Backing::Anon,
        sharing: Sharing::Private,
    }
}

fn ranges(a: &AddressSpace) -> Vec<(u64, u64)> {
    raw(a.iter().map(|v| (v.start, v.end)).collect())
}

/// Ranges as plain numbers, to compare with literals.
fn raw(r: Vec<(V, V)>) -> Vec<(u64, u64)> {
    r.into_iter().map(|(s, e)| (s.0, e.0)).collect()
}

#[test]
fn adjacent_anonymous_maps_merge_and_lengths_round_up() {
    let mut a = AddressSpace::new();
    a.map(&anon(0x10000, 0x1000)).unwrap();
    a.map(&anon(0x11000, 0x2001)).unwrap();
    assert_eq!(ranges(&a), [(0x10000, 0x14000)]);
    a.check().unwrap();
}

#[test]
fn map_replaces_what_it_overlaps() {
    let mut a = AddressSpace::new();
    a.map(&anon(0x10000, 0x10000)).unwrap();
    let file = MapEvent {
        start: VirtAddr(0x14000),
        len: 0x2000,
        prot: RO,
        backing: Backing::File {
            file_id: 7,
            offset: 0x3000,
        },
        sharing: Sharing::Shared,
    };
    assert_eq!(raw(a.map(&file).unwrap()), [(0x14000, 0x16000)]);
    assert_eq!(
        ranges(&a),
        [(0x10000, 0x14000), (0x14000, 0x16000), (0x16000, 0x20000)]
    );
    assert_eq!(
        a.find(V(0x15000)).unwrap().file_offset(V(0x15000)),
        Some(0x4000)
    );
    a.check().unwrap();
}

#[test]
fn partial_protect_splits_and_restoring_remerges() {
    let mut a = AddressSpace::new();
    a.map(&anon(0x200000, 0x400000)).unwrap();
    assert_eq!(
        raw(a.protect(V(0x300000), 0x1000, RO).unwrap()),
        [(0x300000, 0x301000)]
    );
    assert_eq!(a.len(), 3);
    assert_eq!(a.find(V(0x300000)).unwrap().prot, RO);
    // Same protection again changes nothing.
    assert!(a.protect(V(0x300000), 0x1000, RO).unwrap().is_empty());
    a.protect(V(0x300000), 0x1000, RW).unwrap();
    assert_eq!(ranges(&a), [(0x200000, 0x600000)]);
    a.check().unwrap();
}

#[test]
fn unmap_of_nothing_is_an_error_and_holes_are_skipped() {
    let mut a = AddressSpace::new();
    assert_eq!(
        a.unmap(V(0x1000), 0x1000),
        Err(VmaError::NothingMapped {
            start: V(0x1000),
            end: V(0x2000)
        })
    );
    a.map(&anon(0x10000, 0x1000)).unwrap();
    a.map(&anon(0x13000, 0x1000)).unwrap();
    assert_eq!(
        raw(a.unmap(V(0x10000), 0x10000).unwrap()),
        [(0x10000, 0x11000), (0x13000, 0x14000)]
    );
    assert!(a.is_empty());
    assert!(matches!(
        a.unmap(V(0x1001), 1),
        Err(VmaError::BadRange { .. })
    ));
    assert!(matches!(
        a.unmap(V(u64::MAX - 0xfff), 0x2000),
        Err(VmaError::BadRange { .. })
    ));
}

#[test]
fn advice_sets_order_and_thp_on_the_range_only() {
    let mut a = AddressSpace::new();
    a.map(&anon(0x0, 0x800000)).unwrap();
    a.advise(V(0x200000), 0x200000, Advice::HugePage).unwrap();
    a.advise(
        V(0x400000),
        0x400000,
        Advice::PageOrder {
            shift: 22,
            wait: true,
        },
    )
    .unwrap();
    assert_eq!(a.find(V(0x100000)).unwrap().thp, ThpAdvice::None);
    assert_eq!(a.find(V(0x300000)).unwrap().thp, ThpAdvice::Huge);
    assert_eq!(
        a.find(V(0x500000)).unwrap().order,
        Some(OrderRequest {
            shift: 22,
            wait: true
        })
    );
    assert_eq!(a.len(), 3);
    assert!(a
        .find(V(0x300000))
        .unwrap()
        .holds_aligned(V(0x3fffff), PageSize::M2));
    assert!(!a
        .find(V(0x300000))
        .unwrap()
        .holds_aligned(V(0x3fffff), PageSize::from_bytes(0x400000).unwrap()));
    a.check().unwrap();
}

#[test]
fn brk_grows_and_shrinks_the_heap() {
    let mut a = AddressSpace::new();
    assert!(a.brk(V(0x5000_0123)).unwrap().is_empty());
    assert!(a.is_empty());
    a.brk(V(0x5002_1000)).unwrap();
    assert_eq!(ranges(&a), [(0x5000_1000, 0x5002_1000)]);
    assert_eq!(
        raw(a.brk(V(0x5000_8000)).unwrap()),
        [(0x5000_8000, 0x5002_1000)]
    );
    assert_eq!(ranges(&a), [(0x5000_1000, 0x5000_8000)]);
    a.check().unwrap();
}

#[test]
fn the_heap_grows_apart_from_the_bss_below_the_break() {
    // As /proc/PID/maps shows a program's bss and [heap]: adjacent, alike, yet two VMAs
    // (brk grows only a VMA at or above start_brk). The heap's own growth still merges.
    let mut a = AddressSpace::new();
    a.map(&anon(0x23c_d000, 0x1a0_000)).unwrap();
    a.brk(V(0x256_d000)).unwrap();
    a.brk(V(0x258_e000)).unwrap();
    a.brk(V(0x25b_1000)).unwrap();
    assert_eq!(
        ranges(&a),
        [(0x23c_d000, 0x256_d000), (0x256_d000, 0x25b_1000)]
    );
    a.check().unwrap();
    // A 64K block across the boundary lies in neither VMA.
    let at = V(0x256_8000);
    let k64 = PageSize::from_shift(16).unwrap();
    assert!(!a.find(at).unwrap().holds_aligned(at, k64));
    // Shrunk to nothing and grown again: a heap of its own again.
    a.brk(V(0x256_d000)).unwrap();
    a.brk(V(0x257_0000)).unwrap();
    assert_eq!(
        ranges(&a),
        [(0x23c_d000, 0x256_d000), (0x256_d000, 0x257_0000)]
    );
    a.check().unwrap();
}

#[test]
fn inferred_regions_cover_aligned_granules_around_real_vmas() {
    let mut a = AddressSpace::new();
    a.map(&anon(0x201000, 0x1000)).unwrap();
    assert_eq!(
        a.infer(V(0x3ff000), PageSize::M2, false),
        (V(0x202000), V(0x400000))
    );
    assert_eq!(
        a.infer(V(0x400000), PageSize::M2, false),
        (V(0x400000), V(0x600000))
    );
    assert_eq!(
        a.infer(V(0x1000), PageSize::M2, true),
        (V(0x0), V(0x200000))
    );
    // The two data granules merged; the code granule differs in protection.
    assert_eq!(
        ranges(&a),
        [(0x0, 0x200000), (0x201000, 0x202000), (0x202000, 0x600000)]
    );
    a.check().unwrap();
}

/// The reference: one entry per 4K page with that page's attributes.
type Pages = Map<u64, (Prot, Backing, Sharing, Option<OrderRequest>, ThpAdvice)>;

fn expand(a: &AddressSpace) -> Pages {
    let mut m = Map::new();
    for v in a.iter() {
        for p in (v.start.0..v.end.0).step_by(BASE as usize) {
            let backing = match v.backing {
                Backing::File { file_id, .. } => Backing::File {
                    file_id,
                    offset: v.file_offset(V(p)).unwrap(),
                },
                b => b,
            };
            m.insert(p, (v.prot, backing, v.sharing, v.order, v.thp));
        }
    }
    m
}

#[derive(Clone, Debug)]
enum Op {
    Map(u64, u64, bool, u8),
    Unmap(u64, u64),
    Protect(u64, u64, bool),
    Advise(u64, u64, u8),
}

fn op() -> impl Strategy<Value = Op> {
    let r = (0u64..64, 1u64..24);
    prop_oneof![
        (r.clone(), any::<bool>(), 0u8..3).prop_map(|((s, l), f, id)| Op::Map(s, l, f, id)),
        r.clone().prop_map(|(s, l)| Op::Unmap(s, l)),
        (r.clone(), any::<bool>()).prop_map(|((s, l), w)| Op::Protect(s, l, w)),
        (r, 0u8..4).prop_map(|((s, l), k)| Op::Advise(s, l, k)),
    ]
}

proptest! {
    #[test]
    fn matches_a_per_page_reference(ops in proptest::collection::vec(op(), 1..60)) {
        let mut a = AddressSpace::new();
        let mut reference = Pages::new();
        for o in ops {
            match o {
                Op::Map(s, l, file, id) => {
                    let (start, len) = (s * BASE, l * BASE);
                    let backing = if file { Backing::File { file_id: id as u64, offset: 0x10000 } } else { Backing::Anon };
                    let m = MapEvent { start: VirtAddr(start), len, prot: RW, backing, sharing: Sharing::Private };
                    a.map(&m).unwrap();
                    for p in (start..start + len).step_by(BASE as usize) {
                        let b = match backing { Backing::File { file_id, offset } => Backing::File { file_id, offset: offset + p - start }, b => b };
                        reference.insert(p, (RW, b, Sharing::Private, None, ThpAdvice::None));
                    }
                }
                Op::Unmap(s, l) => {
                    let (start, end) = (s * BASE, (s + l) * BASE);
                    let had = reference.range(start..end).count();
                    let got = a.unmap(V(start), end - start);
                    prop_assert_eq!(got.is_ok(), had > 0);
                    if let Ok(r) = got {
                        prop_assert_eq!(r.iter().map(|&(a, b)| (b - a) / BASE).sum::<u64>(), had as u64);
                    }
                    reference.retain(|&p, _| p < start || p >= end);
                }
                Op::Protect(s, l, w) => {
                    let (start, end) = (s * BASE, (s + l) * BASE);
                    let prot = if w { RW } else { RO };
                    let had = reference.range(start..end).count();
                    prop_assert_eq!(a.protect(V(start), end - start, prot).is_ok(), had > 0);
                    for (_, v) in reference.range_mut(start..end) { v.0 = prot; }
                }
                Op::Advise(s, l, k) => {
                    let (start, end) = (s * BASE, (s + l) * BASE);
                    let advice = [Advice::HugePage, Advice::NoHugePage, Advice::PageOrder { shift: 16, wait: false }, Advice::DontNeed][k as usize];
                    let had = reference.range(start..end).count();
                    prop_assert_eq!(a.advise(V(start), end - start, advice).is_ok(), had > 0);
                    for (_, v) in reference.range_mut(start..end) {
                        match advice {
                            Advice::HugePage => v.4 = ThpAdvice::Huge,
                            Advice::NoHugePage => v.4 = ThpAdvice::NoHuge,
                            Advice::PageOrder { shift, wait } => v.3 = Some(OrderRequest { shift, wait }),
                            _ => {}
                        }
                    }
                }
            }
            prop_assert_eq!(a.check(), Ok(()));
            prop_assert_eq!(expand(&a), reference.clone());
        }
    }
}
