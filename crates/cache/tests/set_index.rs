//! How a cache chooses a line's set: by address, a stride of whole pages reaches only the
//! sets its page offset allows, as many as the set count's factors of two leave; hashed,
//! every set, whatever the count.

use pagelab_cache::{Cache, CacheSpec, CostError, CostSpec, SetIndex};

/// A 20-way cache of `sets` sets of 64-byte lines.
fn cache(sets: u64, index: SetIndex) -> Cache {
    let spec = CacheSpec {
        size: sets * 20 * 64,
        ways: 20,
        line: 64,
        latency: 40,
        index,
    };
    spec.check("caches.l3", 4096).unwrap();
    Cache::new(&spec)
}

/// The share of hits on the second and third passes of a cycle over the first line of
/// `pages` 4K frames scattered over 16G (a fixed random draw, no two alike).
fn second_pass_hits(c: &mut Cache, pages: u64) -> f64 {
    let mut frames = std::collections::BTreeSet::new();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    while frames.len() < pages as usize {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        frames.insert(x % (4 << 20));
    }
    let lines: Vec<u64> = frames.into_iter().map(|f| f << 12).collect();
    lines.iter().for_each(|&a| {
        c.access(a);
    });
    let hits = (0..2)
        .flat_map(|_| lines.iter())
        .filter(|&&a| c.access(a))
        .count();
    hits as f64 / (2 * pages) as f64
}

#[test]
fn by_address_a_set_count_with_factors_of_two_leaves_page_strides_few_sets() {
    // 6064 = 16 x 379: lines at one page offset (64 lines a page) fall in 379 sets, 7580
    // lines, fewer than the 8192 of the chase; 7551 sets (odd) take them all.
    let few = second_pass_hits(&mut cache(6064, SetIndex::Address), 8192);
    let all = second_pass_hits(&mut cache(7551, SetIndex::Address), 8192);
    assert!(
        few < 0.5,
        "6064 sets by address: {few:.3} of the second passes hit"
    );
    assert!(
        all > 0.99,
        "7551 sets by address: {all:.3} of the second passes hit"
    );
}

#[test]
fn hashed_every_set_count_holds_a_page_stride_alike() {
    // The capacity a page stride finds no longer hangs on the set count's factors of two.
    for sets in [6064, 7551, 8192, 6144] {
        let hits = second_pass_hits(&mut cache(sets, SetIndex::Hashed), 8192);
        assert!(
            hits > 0.99,
            "{sets} sets hashed: {hits:.3} of the second passes hit"
        );
    }
    // And a cycle larger than the cache misses in it, hashed as by address.
    let over = second_pass_hits(&mut cache(512, SetIndex::Hashed), 16384);
    assert!(
        over < 0.05,
        "a cycle of 16384 lines in 10240: {over:.3} hit"
    );
}

#[test]
fn hashed_spreads_consecutive_lines_evenly() {
    // Each set of a hashed cache takes about its share of a run of lines (a random draw
    // would give 64 +- 8, the extremes of 379 sets about 40 and 90).
    let sets = 379u64;
    let mut count = vec![0u32; sets as usize];
    for line in 0..sets * 64 {
        count[pagelab_cache::config::hashed_set(line, sets) as usize] += 1;
    }
    let (lo, hi) = (count.iter().min().unwrap(), count.iter().max().unwrap());
    assert!(
        *lo >= 30 && *hi <= 100,
        "lines a set from {lo} to {hi}, 64 on average"
    );
}

#[test]
fn an_l1d_may_not_be_hashed() {
    let machine = |l1d_index: &str| {
        let text = format!(
            "[caches]\nl1d = {{ size = \"48K\", ways = 12, line = 64, latency = 5{l1d_index} }}\n\
             l2 = {{ size = \"2M\", ways = 16, line = 64, latency = 15, index = \"hashed\" }}\n\
             memory_latency = 300\n[costs]\nbase_cpi = 0.5\ntlb_hit = [1]\n"
        );
        let spec: CostSpec = toml::from_str(&text).unwrap();
        spec.check(4096, 1, 4)
    };
    // A hashed L2 is allowed beside an L1D by address.
    machine("").unwrap();
    let e: CostError = machine(", index = \"hashed\"").unwrap_err();
    assert_eq!(e.field, "caches.l1d.index");
    assert!(e.why.contains("an L1D is indexed by its address"), "{e}");
}

#[test]
fn the_index_is_read_from_toml_and_left_out_when_by_address() {
    let hashed: CacheSpec =
        toml::from_str("size = \"7580K\"\nways = 20\nline = 64\nlatency = 111\nindex = \"hashed\"")
            .unwrap();
    assert_eq!(hashed.index, SetIndex::Hashed);
    let plain: CacheSpec =
        toml::from_str("size = \"2M\"\nways = 16\nline = 64\nlatency = 13").unwrap();
    assert_eq!(plain.index, SetIndex::Address);
    assert!(!toml::to_string(&plain).unwrap().contains("index"));
    assert!(toml::to_string(&hashed)
        .unwrap()
        .contains("index = \"hashed\""));
    let e = toml::from_str::<CacheSpec>(
        "size = \"2M\"\nways = 16\nline = 64\nlatency = 13\nindex = \"xor\"",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("unknown variant `xor`") && e.contains("hashed"),
        "{e}"
    );
}
