//! `replacement = "random"`: a set-associative array whose miss in a full set replaces a way
//! picked by a fixed pseudo-random sequence (AMD Zen 4's second-level data TLB, measured:
//! configs/tlb/zen4.toml, docs/cost.md session 35).

use pagelab_core::{PageSize, Vpn};
use pagelab_tlb::reference::RefTlb;
use pagelab_tlb::{Replacement, Side, Tlb, TlbArray, TlbConfig, TlbHierarchy};
use proptest::prelude::*;

/// Hits of the later passes of `passes` over `pages` pages `stride` apart, as a share.
fn loop_hits(mut t: TlbArray, pages: u64, stride: u64, passes: u64) -> f64 {
    let k = PageSize::K4;
    for i in 0..pages {
        t.access(Vpn(i * stride), k);
    }
    let mut hits = 0u64;
    for _ in 1..passes {
        hits += (0..pages).filter(|&i| t.access(Vpn(i * stride), k)).count() as u64;
    }
    hits as f64 / ((passes - 1) * pages) as f64
}

#[test]
fn a_loop_one_third_over_a_set_misses_every_time_under_lru_and_half_the_time_at_random() {
    // 256 pages 16 apart in Zen 4's 3072-entry 24-way array: 8 of its 128 sets, 32 pages
    // a set over 24 ways. The guest's dependent chase over them ran 12.1 ns against 3.3
    // over 128 such pages (hits) and 21.8 over 512 (misses): about 52% hits.
    let array = |r| TlbArray::new(3072, Some(24)).with_replacement(r);
    assert_eq!(loop_hits(array(Replacement::Lru), 256, 16, 20), 0.0);
    let random = loop_hits(array(Replacement::Random), 256, 16, 200);
    assert!((0.48..0.60).contains(&random), "{random}");
    // Within a set's ways both keep the whole loop.
    assert_eq!(loop_hits(array(Replacement::Lru), 192, 16, 5), 1.0);
    assert_eq!(loop_hits(array(Replacement::Random), 192, 16, 5), 1.0);
    // Twice the ways: a random way still holds a few of them at their next visit.
    let twice = loop_hits(array(Replacement::Random), 512, 16, 200);
    assert!(twice > 0.05 && twice < random, "{twice}");
}

#[test]
fn the_same_array_repeats_its_victims() {
    let run = || {
        let mut t = TlbArray::new(64, Some(4)).with_replacement(Replacement::Random);
        (0..5000u64)
            .map(|i| t.access(Vpn(i * 7919 % 97), PageSize::K4))
            .collect::<Vec<_>>()
    };
    assert_eq!(run(), run());
}

#[derive(Clone, Debug)]
enum Op {
    Access(u64, bool),
    Insert(u64),
    Invalidate(u64),
    Flush,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn a_random_array_agrees_with_the_reference(
        ways in 1usize..=8,
        sets_log in 0u32..4,
        ops in proptest::collection::vec(
            prop_oneof![
                40 => (0u64..200, any::<bool>()).prop_map(|(v, b)| Op::Access(v, b)),
                3 => (0u64..200).prop_map(Op::Insert),
                3 => (0u64..200).prop_map(Op::Invalidate),
                1 => Just(Op::Flush),
            ],
            1..1500,
        ),
    ) {
        let entries = ways << sets_log;
        let mut fast = TlbArray::new(entries, Some(ways)).with_replacement(Replacement::Random);
        let mut slow = RefTlb::new(entries, Some(ways)).with_replacement(Replacement::Random);
        if ways == entries {
            // One set of all the entries is a fully associative array, which is LRU.
            return Ok(());
        }
        for (i, op) in ops.iter().enumerate() {
            match *op {
                Op::Access(v, big) => {
                    let s = if big { PageSize::M2 } else { PageSize::K4 };
                    prop_assert_eq!(fast.access(Vpn(v), s), slow.access(Vpn(v), s), "op {}", i);
                }
                Op::Insert(v) => {
                    // The reference inserts by an access; both report the page as absent
                    // or present alike before it.
                    let k = PageSize::K4;
                    prop_assert_eq!(fast.contains(Vpn(v), k), slow.contains(Vpn(v), k), "op {}", i);
                    fast.insert(Vpn(v), k);
                    slow.access(Vpn(v), k);
                }
                Op::Invalidate(v) => prop_assert_eq!(
                    fast.invalidate(Vpn(v), PageSize::K4),
                    slow.invalidate(Vpn(v), PageSize::K4),
                    "op {}", i
                ),
                Op::Flush => {
                    fast.flush();
                    slow.flush();
                }
            }
            prop_assert_eq!(fast.resident(), slow.resident(), "after op {}", i);
        }
    }
}

fn config(array: &str) -> Result<TlbConfig, String> {
    let text =
        format!("name = \"t\"\n[l1i]\narrays = [{{ entries = 16 }}]\n[l1d]\narrays = [{array}]\n");
    TlbConfig::from_toml_str(&text, "t.toml").map_err(|e| e.to_string())
}

#[test]
fn random_replacement_is_for_set_associative_arrays_and_named_when_wrong() {
    let e = config("{ entries = 16, replacement = \"random\" }").unwrap_err();
    assert!(
        e.contains("replacement") && e.contains("set-associative") && e.contains("t.toml"),
        "{e}"
    );
    let e = config("{ entries = 16, ways = 4, replacement = \"fifo\" }").unwrap_err();
    assert!(e.contains("replacement") || e.contains("fifo"), "{e}");
    let c = config("{ entries = 16, ways = 4, replacement = \"random\" }").unwrap();
    assert_eq!(c.l1d.arrays[0].replacement, Replacement::Random);
    assert!(
        c.describe().contains("random replacement"),
        "{}",
        c.describe()
    );
    // Written back, it says so; LRU, the default, is not written.
    let text = toml::to_string(&c).unwrap();
    assert!(text.contains("replacement = \"random\""), "{text}");
    let lru = config("{ entries = 16, ways = 4 }").unwrap();
    assert!(!toml::to_string(&lru).unwrap().contains("replacement"));
}

#[test]
fn zen4s_second_level_data_tlb_replaces_at_random_and_its_others_lru() {
    let c = pagelab_tlb::preset("zen4").unwrap();
    let l2d = c.l2d.as_ref().unwrap();
    assert_eq!(l2d.arrays[0].replacement, Replacement::Random);
    assert!(c
        .l1d
        .arrays
        .iter()
        .all(|a| a.replacement == Replacement::Lru));
    // Through the hierarchy: the every-16th stride over 16M (256 pages) walks about half
    // the time on Zen 4 where LRU would walk every time.
    let mut h = TlbHierarchy::new(&c).unwrap();
    let k = PageSize::K4;
    for pass in 0..100u64 {
        for i in 0..256u64 {
            h.access_addr(Side::Data, pagelab_core::VirtAddr((i * 16) << 12), k);
        }
        if pass == 0 {
            h.reset_stats();
        }
    }
    let s = h.stats();
    let walks = s.data.misses as f64 / (99.0 * 256.0);
    assert!((0.38..0.55).contains(&walks), "{walks}");
}
