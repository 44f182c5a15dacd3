//! Walk costs on hand-computed cases, the PTE size, and bad geometries.

use pagelab_cache::{Caches, CostSpec, Host, PageTable, TableLayout};

const MEM: u32 = 100;

fn spec(l1: &str, walk_caches: &str) -> CostSpec {
    let text = format!(
        "[caches]\nl1d = {l1}\nl2 = {{ size = \"256K\", ways = 8, line = 64, latency = 10 }}\nmemory_latency = {MEM}\n[walk_caches]\n{walk_caches}\n[costs]\nbase_cpi = 1.0\ntlb_hit = [1]\n"
    );
    let s: CostSpec = toml::from_str(&text).unwrap();
    s.check(4096, 1, 4).unwrap();
    s
}

fn x86_64() -> TableLayout {
    TableLayout::uniform(12, &[9, 9, 9, 9], 1, 8)
}

const L1: &str = "{ size = \"32K\", ways = 8, line = 64, latency = 4 }";

#[test]
fn a_cold_walk_reads_one_line_per_level_from_memory() {
    let s = spec(L1, "");
    let mut caches = Caches::new(&s);
    let mut pt = PageTable::new(x86_64(), &[], 0);
    let w = pt.walk(0x7f00_1234_5000, &mut caches);
    assert_eq!((w.refs, w.cycles, w.cache_hits), (4, 4 * MEM, 0));
    assert_eq!(caches.counts()[0].table_misses, 4);
    // Every read missed the L1D: all of the walk's cycles would hold a miss buffer.
    assert_eq!(w.miss_cycles, w.cycles);
    // The next page: every entry in the same lines, all L1 hits, none missing.
    let w = pt.walk(0x7f00_1234_6000, &mut caches);
    assert_eq!((w.refs, w.cycles, w.miss_cycles), (4, 4 * 4, 0));
    // A 2M leaf (level 2) reads three levels.
    let mut big = PageTable::new(
        TableLayout {
            leaf: 2,
            page_shift: 21,
            ..x86_64()
        },
        &[],
        0,
    );
    assert_eq!(big.walk(0x4000_0000, &mut caches).refs, 3);
}

#[test]
fn a_walk_cache_hit_skips_levels() {
    // A PDE cache of 32 and a PDPTE cache of 4 (levels 2 and 3).
    let s = spec(L1, "entries = [32, 4]");
    let mut caches = Caches::new(&s);
    let mut pt = PageTable::new(x86_64(), &s.walk_caches.entries, 0);
    assert_eq!(pt.walk(0x10_0000_0000, &mut caches).refs, 4);
    // Same 2M region: the PDE cache gives the leaf table; one reference.
    let w = pt.walk(0x10_0000_1000, &mut caches);
    assert_eq!((w.refs, w.cache_hits), (1, 1));
    // Same 1G region, another 2M: the PDPTE cache; two references.
    let w = pt.walk(0x10_0020_0000, &mut caches);
    assert_eq!((w.refs, w.cache_hits), (2, 1));
    // Another 512G region: nothing helps.
    assert_eq!(pt.walk(0x7f10_0000_0000, &mut caches).refs, 4);
}

#[test]
fn a_cold_nested_walk_makes_24_references() {
    let s = spec(L1, "");
    let mut caches = Caches::new(&s);
    let mut guest = PageTable::new(x86_64(), &[], 0);
    let mut host = Host::new(PageTable::new(x86_64(), &[], 1 << 40), 0);
    let w = host.nested_walk(&mut guest, 0x7f00_1234_5000, &mut caches);
    assert_eq!((w.refs, w.cache_hits), (24, 0));
    // With 2M host pages each host walk is three references: 4 × 4 + 3 = 19.
    let mut guest = PageTable::new(x86_64(), &[], 0);
    let mut host = Host::new(
        PageTable::new(
            TableLayout {
                leaf: 2,
                page_shift: 21,
                ..x86_64()
            },
            &[],
            1 << 40,
        ),
        0,
    );
    assert_eq!(
        host.nested_walk(&mut guest, 0x7f00_1234_5000, &mut caches)
            .refs,
        19
    );
    // A nested TLB of 16: a second walk in the same guest tables needs no
    // host walk for them (same host pages), only the 4 guest reads.
    let mut guest = PageTable::new(x86_64(), &[], 0);
    let mut host = Host::new(PageTable::new(x86_64(), &[], 1 << 40), 16);
    host.nested_walk(&mut guest, 0x7f00_1234_5000, &mut caches);
    let w = host.nested_walk(&mut guest, 0x7f00_1234_6000, &mut caches);
    assert_eq!(
        w.refs,
        4 + 4,
        "4 guest entries and the new data page's host walk"
    );
}

/// Walks of `pages` pages 4K apart, starting cold: the L1 misses of the PTE lines.
fn pte_line_misses(entry_bytes: u32, pages: u64) -> u64 {
    let s = spec(L1, "");
    let mut caches = Caches::new(&s);
    let bits: &[u32] = if entry_bytes == 4 {
        &[10, 10]
    } else {
        &[9, 9, 9, 9]
    };
    let mut pt = PageTable::new(TableLayout::uniform(12, bits, 1, entry_bytes), &[], 0);
    for p in 0..pages {
        pt.walk(p << 12, &mut caches);
    }
    caches.counts()[0].table_misses - (bits.len() as u64 - 1)
}

#[test]
fn the_pte_size_sets_how_many_ptes_share_a_line() {
    // 4-byte PTEs (ia32): 16 per 64-byte line; 8-byte (x86-64): 8 per line.
    assert_eq!(pte_line_misses(4, 256), 256 / 16);
    assert_eq!(pte_line_misses(8, 256), 256 / 8);
}

fn error_of(text: &str) -> String {
    let s: CostSpec = toml::from_str(text).unwrap();
    s.check(4096, 1, 2).unwrap_err().to_string()
}

#[test]
fn geometries_that_cannot_exist_are_refused_by_field() {
    let with = |l1: &str| {
        format!(
            "[caches]\nl1d = {l1}\nmemory_latency = 100\n[costs]\nbase_cpi = 1.0\ntlb_hit = [0]\n"
        )
    };
    let e = error_of(&with("{ size = \"8K\", ways = 3, line = 64, latency = 2 }"));
    assert!(
        e.contains("`caches.l1d.ways`") && e.contains("must divide the lines"),
        "{e}"
    );
    let e = error_of(&with(
        "{ size = \"64K\", ways = 4, line = 8192, latency = 2 }",
    ));
    assert!(
        e.contains("`caches.l1d.line`") && e.contains("larger than the smallest page"),
        "{e}"
    );
    let e = error_of(&with("{ size = \"8K\", ways = 4, line = 48, latency = 2 }"));
    assert!(
        e.contains("`caches.l1d.line`") && e.contains("power of two"),
        "{e}"
    );
    // A missing latency is serde's error, naming the field.
    let missing = "[caches]\nl1d = { size = \"8K\", ways = 4, line = 64 }\nmemory_latency = 100\n[costs]\nbase_cpi = 1.0\ntlb_hit = [0]\n";
    let e = toml::from_str::<CostSpec>(missing).unwrap_err().to_string();
    assert!(e.contains("missing field `latency`"), "{e}");
    let e = error_of("[caches]\nl1d = { size = \"8K\", ways = 4, line = 64, latency = 2 }\nmemory_latency = 1\n[costs]\nbase_cpi = 1.0\ntlb_hit = [0]\n");
    assert!(e.contains("`caches.memory_latency`"), "{e}");
    let e = error_of("[caches]\nl1d = { size = \"8K\", ways = 4, line = 64, latency = 2 }\nmemory_latency = 100\n[costs]\nbase_cpi = 1.0\ntlb_hit = [0, 7]\n");
    assert!(
        e.contains("`costs.tlb_hit`") && e.contains("one per TLB level (1)"),
        "{e}"
    );
}

#[test]
fn a_nested_walk_waits_for_each_block_the_host_does_not_hold() {
    let s = spec(L1, "");
    let walk = |host: &mut Host, guest: &mut PageTable, va: u64| {
        let mut caches = Caches::new(&s);
        host.nested_walk(guest, va, &mut caches)
    };
    let fresh = |entries: u32| {
        let host = Host::new(PageTable::new(x86_64(), &[], 1 << 40), 0).with_blocks(entries, 40);
        (host, PageTable::new(x86_64(), &[], 0))
    };
    // Without blocks: no misses, and the same cycles as a host given 0 entries.
    let (mut plain, mut g) = (
        Host::new(PageTable::new(x86_64(), &[], 1 << 40), 0),
        PageTable::new(x86_64(), &[], 0),
    );
    let base = walk(&mut plain, &mut g, 0x7f00_1234_5000);
    let (mut none, mut g) = fresh(0);
    assert_eq!(walk(&mut none, &mut g, 0x7f00_1234_5000), base);
    assert_eq!(base.block_misses, 0);
    // The first walk's five guest-physical addresses (four tables, the data) lie in
    // blocks the host does not hold yet: the four tables' frames share the guest's first
    // 2M block, the data's page the same: one miss, 40 cycles.
    let (mut host, mut g) = fresh(16);
    let cold = walk(&mut host, &mut g, 0x7f00_1234_5000);
    assert_eq!(cold.block_misses, 1);
    assert_eq!(cold.cycles, base.cycles + 40);
    assert_eq!(cold.refs, base.refs);
    // Again, every block held: no wait.
    let warm = walk(&mut host, &mut g, 0x7f00_1234_5000);
    assert_eq!(warm.block_misses, 0);
    // One entry is enough while the tables and the data share a block.
    let (mut one, mut g) = fresh(1);
    walk(&mut one, &mut g, 0x7f00_1234_5000);
    assert_eq!(walk(&mut one, &mut g, 0x7f00_1234_6000).block_misses, 0);
}

#[test]
fn the_blocks_are_refused_unless_whole_and_within_bounds() {
    let with = |nested: &str| {
        format!(
            "[caches]\nl1d = {{ size = \"8K\", ways = 4, line = 64, latency = 2 }}\nmemory_latency = 100\n[costs]\nbase_cpi = 1.0\ntlb_hit = [0]\n[nested]\nntlb_entries = 8\n{nested}\n"
        )
    };
    let ok = |nested: &str| {
        let s: CostSpec = toml::from_str(&with(nested)).unwrap();
        s.check(4096, 1, 2).unwrap();
    };
    ok("");
    ok("block_entries = 1024\nblock_miss = 40\nblock_interval = 9");
    ok("block_entries = 1024\nblock_miss = 40");
    // Held in the TLB.
    ok("block_miss = 40");
    ok("block_miss = 40\nblock_interval = 12");
    // Held in the TLB, where they take entries, at no cycles of their own.
    ok("block_miss = 0");
    for (nested, field, says) in [
        (
            "block_entries = 8",
            "`nested.block_miss`",
            "missing with block_entries",
        ),
        (
            "block_interval = 8",
            "`nested.block_miss`",
            "missing with block_entries",
        ),
        (
            "block_entries = 8\nblock_miss = 0",
            "`nested.block_miss`",
            "0 holds them in the TLB, without block_entries",
        ),
        (
            "block_miss = 0\nblock_interval = 1",
            "`nested.block_interval`",
            "allowed 0 to block_miss (0)",
        ),
        (
            "block_entries = 8\nblock_miss = 10\nblock_interval = 11",
            "`nested.block_interval`",
            "allowed 0 to block_miss (10)",
        ),
        (
            "block_entries = 8\nblock_miss = 10001",
            "`nested.block_miss`",
            "allowed 0 to 10000",
        ),
        (
            "block_entries = 4194304\nblock_miss = 10",
            "`nested.block_entries`",
            "allowed 0 (held in the TLB) to 2097152",
        ),
    ] {
        let e = error_of(&with(nested));
        assert!(e.contains(field) && e.contains(says), "{nested}: {e}");
    }
}
