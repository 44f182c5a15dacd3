//! Where frames lie: the scattered placement never gives two frames the
//! same memory, keeps each aligned to its size inside the memory (above it
//! only once the memory is full), and scatters small frames as Linux does
//! on a machine that has run a while; first touch keeps them consecutive.

use crate::common;

use pagelab_cache::{Caches, Frames, Host, PageTable, Placement, TableLayout};
use proptest::prelude::*;

const K4: u32 = 12;
const M2: u32 = 21;

/// Start and end of every frame, sorted; panics on an overlap.
fn no_overlaps(mut frames: Vec<(u64, u64)>) {
    frames.sort_unstable();
    for w in frames.windows(2) {
        assert!(
            w[0].1 <= w[1].0,
            "frames {:#x}..{:#x} and {:#x}..{:#x} overlap",
            w[0].0,
            w[0].1,
            w[1].0,
            w[1].1
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any mix of page sizes, in any order, into memories from too small to
    /// roomy: frames are aligned to their size, never overlap, and lie in
    /// the memory unless it has no room left for them.
    #[test]
    fn scattered_frames_are_aligned_disjoint_and_inside(
        memory_mb in 4u64..64,
        pages in prop::collection::vec((0u64..1 << 20, prop::sample::select(vec![12u32, 14, 16, 20, 21])), 1..600),
    ) {
        let memory = memory_mb << 20;
        let mut f = Frames::placed(0, Placement::scattered(memory));
        let mut out = Vec::new();
        let mut seen = std::collections::HashMap::new();
        for &(vpn, shift) in &pages {
            // Each size has its own page numbers, as each run has its own table.
            let key = (vpn << 5) | u64::from(shift - K4);
            let p = f.page(key, shift);
            prop_assert_eq!(p % (1 << shift), 0, "a {}-byte frame at {:#x}", 1u64 << shift, p);
            if let Some(&(q, s)) = seen.get(&key) {
                prop_assert_eq!((p, shift), (q, s), "a page keeps its frame");
                continue;
            }
            seen.insert(key, (p, shift));
            out.push((p, p + (1 << shift)));
        }
        // Inside the memory while it lasts: a frame above it means a frame
        // of that size had no room, which needs the memory to be mostly
        // taken or cut into small pieces.
        let used: u64 = out.iter().map(|(a, b)| b - a).sum();
        if used <= memory / 4 && out.iter().all(|(a, b)| b - a < 2 << 20) {
            prop_assert!(out.iter().all(|&(_, end)| end <= memory), "small frames fit a memory a quarter used");
        }
        no_overlaps(out);
    }
}

#[test]
fn a_full_memory_goes_on_above_it_without_overlap() {
    let memory = 4 << 20;
    let mut f = Frames::placed(0, Placement::scattered(memory));
    let mut out = Vec::new();
    // 1500 of the 1024 4K frames: 476 above the memory.
    for vpn in 0..1500 {
        let p = f.page(vpn, K4);
        out.push((p, p + 4096));
    }
    assert_eq!(out.iter().filter(|&&(a, _)| a < memory).count(), 1024);
    // A 2M page after them finds no free block inside: it goes above too.
    let big = f.page(1 << 30, M2);
    assert!(big >= memory && big.is_multiple_of(2 << 20));
    out.push((big, big + (2 << 20)));
    no_overlaps(out);
}

#[test]
fn large_frames_are_whole_free_blocks_from_the_top() {
    // 100 small frames in 512 blocks of 2M leave most blocks whole.
    let memory = 1 << 30;
    let mut f = Frames::placed(0, Placement::scattered(memory));
    let small: Vec<u64> = (0..100).map(|v| f.page(v, K4)).collect();
    let big: Vec<u64> = (0..4).map(|v| f.page(1000 + v, M2)).collect();
    for &b in &big {
        assert!(b + (2 << 20) <= memory);
        assert!(
            small.iter().all(|&s| s >> M2 != b >> M2),
            "a 2M frame at {b:#x} shares its block with a 4K frame"
        );
    }
    assert!(
        big.windows(2).all(|w| w[1] < w[0]),
        "taken from the top down: {big:x?}"
    );
}

/// The frames of a 16M heap touched page by page, sorted.
fn heap_frames(placement: Placement) -> Vec<u64> {
    let mut f = Frames::placed(0, placement);
    let mut frames: Vec<u64> = (0..4096).map(|v| f.page(v, K4) >> K4).collect();
    let runs = 1 + frames.windows(2).filter(|w| w[1] != w[0] + 1).count();
    frames.sort_unstable();
    let mut blocks: Vec<u64> = frames.iter().map(|p| p >> (M2 - K4)).collect();
    blocks.dedup();
    eprintln!("{placement:?}: {runs} runs, {} 2M blocks", blocks.len());
    frames.push(runs as u64);
    frames.push(blocks.len() as u64);
    frames
}

#[test]
fn a_heap_of_4k_pages_is_scattered_as_linux_scatters_it() {
    // This VM's kernel (docs/cost.md): 4079 and 4092 runs, 987 and 992 blocks.
    let s = heap_frames(Placement::scattered(24 << 30));
    let (runs, blocks) = (s[s.len() - 2], s[s.len() - 1]);
    assert!(runs > 4000, "{runs} runs of consecutive frames");
    assert!(blocks > 900, "{blocks} 2M blocks");
    let t = heap_frames(Placement::FirstTouch);
    assert_eq!((t[t.len() - 2], t[t.len() - 1]), (1, 8));
}

/// Of a 16M heap's 4095 pairs of consecutive pages, those on neighbouring frames.
fn neighbour_pairs(placement: Placement) -> (usize, u64) {
    let mut f = Frames::placed(0, placement);
    let frames: Vec<u64> = (0..4096).map(|v| f.page(v, K4) >> K4).collect();
    let near = frames.windows(2).filter(|w| w[1] == w[0] + 1).count();
    (near, *frames.iter().max().unwrap() + 1)
}

#[test]
fn a_share_of_frames_lies_next_to_the_last_and_all_inside_the_span() {
    use pagelab_cache::NEIGHBOURS_ONE;
    let span = 2u64 << 30;
    let with = |share: f64| Placement::Scattered {
        memory: span,
        neighbours: (share * f64::from(NEIGHBOURS_ONE)) as u32,
    };
    // None on purpose: a chance pair or two in 4095. Every one: a single run.
    assert!(neighbour_pairs(with(0.0)).0 < 5);
    assert_eq!(neighbour_pairs(with(1.0)).0, 4095);
    // A share between: near it (each page a fixed draw), the frames inside the span.
    for share in [0.35, 0.64, 0.9] {
        let (near, top) = neighbour_pairs(with(share));
        let got = near as f64 / 4095.0;
        assert!((got - share).abs() < 0.03, "{share}: {got}");
        assert!(top << K4 <= span, "{share}: a frame at {top:#x} pages");
    }
}

#[test]
fn scattered_frames_cost_a_nested_walk_its_host_walks() {
    // Under nested paging with 2M host pages, 4K guest frames spread over
    // many host pages miss the nested TLB; consecutive ones share 8.
    let spec = common::l1_only();
    let x86_64 = TableLayout::uniform(K4, &[9, 9, 9, 9], 1, 8);
    let host2m = TableLayout {
        leaf: 2,
        page_shift: M2,
        ..x86_64
    };
    let refs = |placement| {
        let mut caches = Caches::new(&spec);
        let mut guest = PageTable::placed(x86_64, &[64, 64, 64], 0, placement);
        let mut host = Host::new(PageTable::new(host2m, &[64, 64, 64], 1 << 44), 64);
        (0..4096u64)
            .map(|p| {
                host.nested_walk(&mut guest, 0x7f00_0000_0000 + (p << K4), &mut caches)
                    .refs
            })
            .sum::<u32>()
    };
    let (first, scattered) = (
        refs(Placement::FirstTouch),
        refs(Placement::scattered(24 << 30)),
    );
    eprintln!(
        "nested walks of 4096 pages: {first} references at first touch, {scattered} scattered"
    );
    // Consecutive: one guest read per walk (the walk caches hold the upper
    // levels) and a host walk only for the few new host pages (8 of data,
    // one of tables).
    assert!(first < 4096 + 100, "first touch: {first} references");
    // Scattered: besides, nearly every data page's host page misses the
    // nested TLB, a host walk of one reference (its walk caches warm).
    assert!(
        scattered > 2 * 4096 - 100,
        "scattered: {scattered} references"
    );
}
