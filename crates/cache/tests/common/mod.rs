//! What the cache crate's tests share.

use pagelab_cache::CostSpec;

/// A machine of one cache level, 32K with 8 ways of 64-byte lines (64 sets, which span
/// one 4K page), 4 cycles, and memory at 300.
pub fn l1_only() -> CostSpec {
    toml::from_str(
        r#"
        [caches]
        l1d = { size = "32K", ways = 8, line = 64, latency = 4 }
        memory_latency = 300
        [costs]
        base_cpi = 1.0
        tlb_hit = [0]
        "#,
    )
    .unwrap()
}
