//! Fast arrays and hierarchies against the reference model on random streams.

use pagelab_core::{PageSize, VirtAddr, Vpn};
use pagelab_tlb::reference::{RefHierarchy, RefTlb};
use pagelab_tlb::{presets, FullyAssoc, Side, SmallFullyAssoc, Tlb, TlbArray, TlbHierarchy};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Access(u64, u8),
    Invalidate(u64, u8),
    Flush,
}

fn size(i: u8) -> PageSize {
    [
        PageSize::K4,
        PageSize::from_shift(14).unwrap(),
        PageSize::M2,
    ][i as usize % 3]
}

fn ops(pages: u64) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        30 => (0..pages, 0u8..3).prop_map(|(v, s)| Op::Access(v, s)),
        2 => (0..pages, 0u8..3).prop_map(|(v, s)| Op::Invalidate(v, s)),
        1 => Just(Op::Flush),
    ];
    proptest::collection::vec(op, 1..600)
}

fn check(entries: usize, ways: Option<usize>, ops: &[Op]) -> Result<(), TestCaseError> {
    check_array(TlbArray::new(entries, ways), entries, ways, ops)
}

fn check_array(
    mut fast: TlbArray,
    entries: usize,
    ways: Option<usize>,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let mut slow = RefTlb::new(entries, ways);
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Op::Access(v, s) => prop_assert_eq!(
                fast.access(Vpn(v), size(s)),
                slow.access(Vpn(v), size(s)),
                "step {}",
                i
            ),
            Op::Invalidate(v, s) => {
                prop_assert_eq!(
                    fast.invalidate(Vpn(v), size(s)),
                    slow.invalidate(Vpn(v), size(s)),
                    "step {}",
                    i
                )
            }
            Op::Flush => {
                fast.flush();
                slow.flush();
            }
        }
    }
    prop_assert_eq!(fast.resident(), slow.resident());
    prop_assert_eq!(fast.len(), slow.resident().len());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn fully_assoc_matches_reference(entries in 1usize..24, ops in ops(40)) {
        check(entries, None, &ops)?;
    }

    #[test]
    fn every_fully_assoc_kind_matches_reference(entries in 1usize..=140, ops in ops(160)) {
        // TlbArray::new picks one kind by size; check both kinds at every size.
        check_array(TlbArray::FullyAssoc(FullyAssoc::new(entries)), entries, None, &ops)?;
        if entries <= SmallFullyAssoc::MAX_ENTRIES {
            check_array(TlbArray::SmallFullyAssoc(SmallFullyAssoc::new(entries)), entries, None, &ops)?;
        }
    }

    #[test]
    fn set_assoc_matches_reference(sets_log in 0u32..4, ways in 1usize..6, ops in ops(48)) {
        check((1usize << sets_log) * ways, Some(ways), &ops)?;
    }

    /// Sets of 8, 16 and 24 ways, as the presets' L1 I-TLBs and L2 TLBs have: past the
    /// four ways compared at once, a walk of the rest (`array::move_to_front`).
    #[test]
    fn wide_sets_match_reference(
        sets_log in 0u32..3,
        ways in prop_oneof![Just(8usize), Just(16), Just(24)],
        ops in ops(120),
    ) {
        check((1usize << sets_log) * ways, Some(ways), &ops)?;
    }

    #[test]
    fn large_arrays_match_reference(ops in ops(3000)) {
        check(2048, None, &ops)?;
        check(1536, Some(12), &ops)?;
    }

    #[test]
    fn every_preset_hierarchy_matches_reference(
        refs in proptest::collection::vec((any::<bool>(), 0u64..64, 0u64..1 << 22, 12u8..=30), 1..400)
    ) {
        for (name, cfg) in presets() {
            let mut fast = TlbHierarchy::new(&cfg).unwrap();
            let mut slow = RefHierarchy::new(&cfg);
            for (i, &(instr, region, offset, shift)) in refs.iter().enumerate() {
                let side = if instr { Side::Instr } else { Side::Data };
                // A few regions spread over the address space, so big pages collide and small ones don't.
                let addr = (region << 30).wrapping_mul(0x9E37) % (1 << 47) + offset;
                let size = PageSize::from_shift(shift).unwrap();
                prop_assert_eq!(fast.access_addr(side, VirtAddr(addr), size), slow.access_addr(side, VirtAddr(addr), size), "{} step {}", name, i);
            }
            prop_assert_eq!(fast.stats(), slow.stats(), "{}", name);
        }
    }
}
