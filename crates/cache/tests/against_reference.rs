//! The fast cache against the per-set LRU lists of `ReferenceCache`, on random
//! addresses and on the real gzip trace's data addresses.

use pagelab_cache::{Cache, CacheSpec, ReferenceCache, SetIndex};
use pagelab_core::Event;
use proptest::prelude::*;

fn spec(size: u64, ways: u32, line: u32) -> CacheSpec {
    CacheSpec {
        size,
        ways,
        line,
        latency: 1,
        index: SetIndex::Address,
    }
}

/// Feeds `addrs` to both models; every hit or miss and the final contents agree.
fn agree(s: &CacheSpec, addrs: &[u64]) -> Result<(), TestCaseError> {
    s.check("c", 4096).unwrap();
    let mut fast = Cache::new(s);
    let mut slow = ReferenceCache::indexed(s.size, s.ways, s.line, s.index);
    for (i, &a) in addrs.iter().enumerate() {
        prop_assert_eq!(fast.access(a), slow.access(a), "access {} at {:#x}", i, a);
    }
    for set in 0..fast.sets() as usize {
        prop_assert_eq!(fast.set_lines(set), slow.set_lines(set), "set {}", set);
    }
    Ok(())
}

fn geometry() -> impl Strategy<Value = CacheSpec> {
    // Power-of-two set counts and others (a 12-way or 20-way last level).
    // Sets chosen by address or by a hash of the line (a sliced last level).
    (
        0u32..4,
        prop::sample::select(vec![1u32, 2, 4, 8, 12, 16, 20]),
        prop::sample::select(vec![32u32, 64, 128]),
        any::<bool>(),
    )
        .prop_map(|(sets_log, ways, line, hashed)| {
            let sets = [1u64, 4, 32, 6][sets_log as usize];
            CacheSpec {
                index: if hashed {
                    SetIndex::Hashed
                } else {
                    SetIndex::Address
                },
                ..spec(sets * ways as u64 * line as u64, ways, line)
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn random_addresses(s in geometry(), addrs in prop::collection::vec(0u64..(1 << 16), 0..3000)) {
        agree(&s, &addrs)?;
    }

    #[test]
    fn clustered_addresses(s in geometry(), bases in prop::collection::vec(0u64..64, 1..8), picks in prop::collection::vec((0usize..8, 0u64..4096), 0..3000)) {
        // A few hot regions far apart, as a program's stack, heap and tables.
        let addrs: Vec<u64> = picks.iter().map(|&(b, off)| (bases[b % bases.len()] << 24) + off).collect();
        agree(&s, &addrs)?;
    }
}

fn gzip_data_addresses() -> Vec<u64> {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/gzip-9.lackey.zst");
    let mut src = pagelab_trace::open(path.to_str().unwrap(), None).unwrap();
    let mut events = Vec::new();
    let mut addrs = Vec::new();
    while src.fill(&mut events, 1 << 16).unwrap() {
        for e in events.drain(..) {
            if let Event::Ref(r) = e {
                if r.kind != pagelab_core::AccessKind::Instr {
                    addrs.push(r.addr.0);
                }
            }
        }
    }
    addrs
}

#[test]
fn real_trace_every_geometry() {
    let addrs = gzip_data_addresses();
    assert!(addrs.len() > 1_000_000, "{} data references", addrs.len());
    let hashed = |s: CacheSpec| CacheSpec {
        index: SetIndex::Hashed,
        ..s
    };
    // The P4's L1 and L2, a Zen L1, a 12-way cache with 6 sets, and hashed: that one, a
    // small 20-way last level of 6064 sets, and a power-of-two one.
    for s in [
        spec(8 << 10, 4, 64),
        spec(256 << 10, 8, 64),
        spec(32 << 10, 8, 64),
        spec(6 * 12 * 64, 12, 64),
        hashed(spec(6 * 12 * 64, 12, 64)),
        hashed(spec(6064 * 20 * 64, 20, 64)),
        hashed(spec(256 << 10, 8, 64)),
    ] {
        agree(&s, &addrs).unwrap();
    }
}
