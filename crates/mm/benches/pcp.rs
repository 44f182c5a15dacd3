//! Page allocation with and without the per-CPU hot and cold page lists:
//! on a 1G machine of 4 CPUs, rounds of 256 order-0 allocations and 256
//! frees (hot, and every fourth page cold), the CPU changing every round.
//! Prints allocations and frees per second with the paper's lists and
//! without lists (wall time; compare the two lines of one run).
//!
//! `cargo bench -p pagelab-mm --bench pcp`

use pagelab_core::{Bytes, Order, Pfn};
use pagelab_mm::phys::{PageTemp, PcpConfig, PhysConfig, PhysMem, ZonePref};
use std::time::Instant;

fn run(label: &str, pcp: Option<PcpConfig>, rounds: u32) {
    let mut mem = PhysMem::new(&PhysConfig::new(Bytes(1 << 30))).expect("phys");
    if let Some(cfg) = pcp {
        mem.set_pcp(cfg, 4);
    }
    let mut held: Vec<Pfn> = Vec::with_capacity(256);
    let start = Instant::now();
    for r in 0..rounds {
        mem.set_cpu(r % 4);
        for i in 0..256 {
            let t = if i % 4 == 0 {
                PageTemp::Cold
            } else {
                PageTemp::Hot
            };
            held.push(mem.alloc_temp(Order(0), ZonePref::Any, t).expect("memory"));
        }
        for p in held.drain(..) {
            mem.free_temp(p, Order(0), PageTemp::Hot).expect("free");
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let ops = f64::from(rounds) * 512.0;
    let locks = mem.pcp_stats().map_or(String::new(), |s| {
        format!("  {} buddy-lock acquisitions", s.buddy_lock_acquisitions)
    });
    println!(
        "{label:<22} {ops:>10} allocations and frees in {secs:.3} s: {:.1} M/s{locks}",
        ops / secs / 1e6
    );
}

fn main() {
    let rounds = 20_000;
    run("paper's lists", Some(PcpConfig::PAPER), rounds);
    run("no lists", None, rounds);
}
