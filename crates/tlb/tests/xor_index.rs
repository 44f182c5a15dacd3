//! `index = "xor"`: a set-associative array whose set is the page number's low bits XOR
//! the bits above them (Intel's STLB, configs/tlb/skylake.toml).

use pagelab_core::{PageSize, Vpn};
use pagelab_tlb::reference::RefTlb;
use pagelab_tlb::{SetIndex, Tlb, TlbArray, TlbConfig};
use proptest::prelude::*;

/// Misses of two passes over `pages` pages `stride` apart.
fn second_pass_misses(index: SetIndex, pages: u64, stride: u64) -> usize {
    let mut t = TlbArray::new(2048, Some(16)).with_index(index);
    let k = PageSize::K4;
    for i in 0..pages {
        t.access(Vpn(i * stride), k);
    }
    (0..pages)
        .filter(|&i| !t.access(Vpn(i * stride), k))
        .count()
}

#[test]
fn every_sixteenth_page_fits_an_xor_indexed_stlb_and_thrashes_a_linear_one() {
    // 512 pages 16 apart (the every-16th stride over 32M): a linear index puts them in
    // 8 of the 128 sets (128 entries), so a second pass misses every page; XOR spreads them.
    assert_eq!(second_pass_misses(SetIndex::Linear, 512, 16), 512);
    assert_eq!(second_pass_misses(SetIndex::Xor, 512, 16), 0);
    // Consecutive pages fill the sets evenly either way.
    assert_eq!(second_pass_misses(SetIndex::Linear, 2048, 1), 0);
    assert_eq!(second_pass_misses(SetIndex::Xor, 2048, 1), 0);
}

proptest! {
    #[test]
    fn an_xor_indexed_array_agrees_with_the_reference(
        accesses in proptest::collection::vec((0u64..1 << 16, any::<bool>()), 1..2000),
    ) {
        let mut fast = TlbArray::new(64, Some(4)).with_index(SetIndex::Xor);
        let mut slow = RefTlb::new(64, Some(4)).with_index(SetIndex::Xor);
        for (i, &(v, big)) in accesses.iter().enumerate() {
            let s = if big { PageSize::M2 } else { PageSize::K4 };
            prop_assert_eq!(fast.access(Vpn(v), s), slow.access(Vpn(v), s), "access {}", i);
        }
    }
}

#[test]
fn an_index_for_a_fully_associative_array_is_refused_naming_the_field() {
    let text = r#"
name = "t"
[l1i]
arrays = [{ entries = 16 }]
[l1d]
arrays = [{ entries = 16, index = "xor" }]
"#;
    let e = TlbConfig::from_toml_str(text, "t.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("index") && e.contains("fully associative"),
        "{e}"
    );
    let bad = text.replace("\"xor\"", "\"hashed\"");
    let e = TlbConfig::from_toml_str(&bad, "t.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("hashed"), "{e}");
}

#[test]
fn the_intel_presets_index_their_stlb_by_xor() {
    for name in ["skylake", "emeraldrapids"] {
        let t = pagelab_tlb::preset(name).unwrap();
        let l2 = t.l2.as_ref().unwrap();
        assert_eq!(l2.arrays[0].index, SetIndex::Xor, "{name}");
        assert!(t.describe().contains("XOR-indexed"), "{name}");
    }
}
