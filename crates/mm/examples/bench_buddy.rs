//! Throughput of the buddy allocator: random orders 0–9 on 4 GiB of 4K frames.
//!
//! Run: `cargo run --release -p pagelab-mm --example bench_buddy`
//!
//! The allocator is first filled to `LIVE` blocks; then each step frees a
//! random live block and allocates a block of a random order, so memory stays
//! part-full and fragmented. Prints allocations + frees per second.

use pagelab_core::{Order, Pfn};
use pagelab_mm::phys::BuddyAllocator;
use std::hint::black_box;
use std::time::Instant;

/// xorshift64*: deterministic and dependency-free.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

const FRAMES: u64 = 1 << 20; // 4 GiB of 4K frames
const STEPS: usize = 5_000_000;

fn run(live_target: usize, orders: u64) -> (f64, u64, f64) {
    let mut b = BuddyAllocator::new(Pfn(0), FRAMES, Order(10)).expect("4 GiB fits");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut live: Vec<(Pfn, Order)> = Vec::with_capacity(live_target + 1);
    while live.len() < live_target {
        let o = Order((rng.next() % orders) as u8);
        match b.alloc(o) {
            Some(p) => live.push((p, o)),
            None => break,
        }
    }
    let mut failures = 0u64;
    let mut ops = 0u64;
    let t = Instant::now();
    for _ in 0..STEPS {
        let r = rng.next();
        if !live.is_empty() {
            let (p, o) = live.swap_remove((r >> 32) as usize % live.len());
            b.free(p, o).expect("a live block frees");
            ops += 1;
        }
        let o = Order((r % orders) as u8);
        match b.alloc(o) {
            Some(p) => live.push((p, o)),
            None => failures += 1,
        }
        ops += 1;
    }
    let secs = t.elapsed().as_secs_f64();
    black_box(&live);
    let used = (FRAMES - b.free_frames()) as f64 / FRAMES as f64;
    (ops as f64 / secs, failures, used)
}

fn main() {
    println!("buddy allocator, 4G of 4K frames, max order 10, {STEPS} free+alloc steps");
    for (live, orders, what) in [
        (4_000, 10, "orders 0-9, ~40% full"),
        (9_000, 10, "orders 0-9, ~90% full"),
        (500_000, 1, "order 0 only, ~50% full"),
    ] {
        let (rate, failures, used) = run(live, orders);
        println!(
            "{what:>26}: {:>6.1}M allocs+frees/s  ({failures} failed allocs, {:.0}% used at end)",
            rate / 1e6,
            used * 100.0
        );
    }
}
