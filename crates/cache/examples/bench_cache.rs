//! Lookups per second in the data caches and walks per second through them.
//! `cargo run --release -p pagelab-cache --example bench_cache`

use pagelab_cache::{Caches, CostSpec, Line, PageTable, TableLayout};
use std::time::Instant;

fn main() {
    let spec: CostSpec = toml::from_str(
        "[caches]\nl1d = { size = \"32K\", ways = 8, line = 64, latency = 4 }\n\
         l2 = { size = \"1M\", ways = 16, line = 64, latency = 14 }\n\
         l3 = { size = \"32M\", ways = 16, line = 64, latency = 50 }\n\
         memory_latency = 300\n[costs]\nbase_cpi = 1.0\ntlb_hit = [0]\n",
    )
    .expect("a valid spec");
    // An xorshift stream over working sets from L1-sized to memory-sized.
    for (name, span) in [
        ("16K", 16u64 << 10),
        ("512K", 512 << 10),
        ("8M", 8 << 20),
        ("1G", 1 << 30),
    ] {
        let mut caches = Caches::new(&spec);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let n = 20_000_000u64;
        let t = Instant::now();
        let mut cycles = 0u64;
        for _ in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            cycles += caches.access(x % span, Line::Data) as u64;
        }
        let s = t.elapsed().as_secs_f64();
        println!(
            "caches, random over {name:>4}: {:6.1} M lookups/s ({:.1} cycles each)",
            n as f64 / s / 1e6,
            cycles as f64 / n as f64
        );
    }
    let mut caches = Caches::new(&spec);
    let mut pt = PageTable::new(
        TableLayout::uniform(12, &[9, 9, 9, 9], 1, 8),
        &[32, 4, 2],
        0,
    );
    let n = 5_000_000u64;
    let t = Instant::now();
    let mut refs = 0u64;
    for i in 0..n {
        refs += pt.walk((i * 0x9e37_79b9) % (64 << 30), &mut caches).refs as u64;
    }
    let s = t.elapsed().as_secs_f64();
    println!(
        "walks over 64G with walk caches: {:6.1} M walks/s ({:.2} references each)",
        n as f64 / s / 1e6,
        refs as f64 / n as f64
    );
}
