//! Page-table throughput: walks/s on a hot set and on a large set, maps/s and
//! unmaps/s, for the radix table on x86-64 with 4K, 64K-run and 2M pages.
//!
//! Run with `cargo run --release -p pagelab-mm --example bench_pagetable`.

use pagelab_core::{BasePfn, PageSize, VirtAddr};
use pagelab_mm::pagetable::{Geometry, PageTable, PteFlags, RadixPageTable};
use std::hint::black_box;
use std::time::Instant;

/// A small xorshift generator: the benchmark needs no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn rate(n: u64, start: Instant) -> f64 {
    n as f64 / start.elapsed().as_secs_f64()
}

/// Maps `bytes` from 1G up with pages of `size`; returns maps/s.
fn fill(pt: &mut RadixPageTable, bytes: u64, size: PageSize) -> f64 {
    let base = 1u64 << 30;
    let frames = pt.geometry().frames(size);
    let n = bytes / size.bytes();
    let start = Instant::now();
    for i in 0..n {
        let va = VirtAddr(base + i * size.bytes());
        if pt.map(va, BasePfn(i * frames), size, PteFlags::RW).is_err() {
            eprintln!("map failed at {va}");
        }
    }
    rate(n, start)
}

/// Walks `reps` random addresses inside `bytes` from 1G; returns walks/s.
fn walks(pt: &RadixPageTable, bytes: u64, reps: usize) -> f64 {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let addrs: Vec<VirtAddr> = (0..1 << 16)
        .map(|_| VirtAddr((1 << 30) + rng.next() % bytes))
        .collect();
    let start = Instant::now();
    let mut sum = 0u64;
    for _ in 0..reps {
        for &va in &addrs {
            if let Some(t) = pt.walk(va) {
                sum = sum.wrapping_add(t.pfn.0 + t.levels as u64);
            }
        }
    }
    black_box(sum);
    rate((reps * addrs.len()) as u64, start)
}

fn unmaps(pt: &mut RadixPageTable, bytes: u64, size: PageSize) -> f64 {
    let n = bytes / size.bytes();
    let start = Instant::now();
    for i in 0..n {
        if pt
            .unmap(VirtAddr((1 << 30) + i * size.bytes()), size)
            .is_err()
        {
            eprintln!("unmap failed");
        }
    }
    rate(n, start)
}

fn main() {
    let cases = [
        ("4K, hot 8M", PageSize::K4, 8u64 << 20),
        ("4K, 4G", PageSize::K4, 4 << 30),
        (
            "64K runs, 1G",
            PageSize::from_bytes(65536).unwrap_or(PageSize::K4),
            1 << 30,
        ),
        ("2M, 4G", PageSize::M2, 4 << 30),
    ];
    println!("radix page table, x86-64 geometry");
    for (name, size, bytes) in cases {
        let mut pt = RadixPageTable::new(Geometry::x86_64());
        let maps = fill(&mut pt, bytes, size);
        let walk = walks(&pt, bytes, 100);
        let mem = pt.memory_bytes();
        let unmap = unmaps(&mut pt, bytes, size);
        println!(
            "{name:>14}: {:>7.1} M walks/s  {:>6.1} M maps/s  {:>6.1} M unmaps/s  tables {} KiB",
            walk / 1e6,
            maps / 1e6,
            unmap / 1e6,
            mem / 1024
        );
    }
}
