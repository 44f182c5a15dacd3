//! The kernel-memory accounting of many live processes on x86-64: each of N
//! processes maps 64K of anonymous memory and writes 4 pages of it, and none
//! exits, so the machine holds N page tables when the last ones are made.
//! The model measures the kernel's page-table memory before every event;
//! with a running total that costs the same at any N (a sum over every
//! process made it grow with N, the run quadratic). Prints CPU seconds and
//! events per CPU second at 1,000, 10,000 and 40,000 processes.
//!
//! `cargo bench -p pagelab-mm --bench page_table_total` (`-- quick`: 1,000 and 10,000).

use pagelab_core::{Backing, Bytes, Event, MapEvent, Prot, Sharing, ThreadId, VirtAddr};
use pagelab_mm::kmem::KernelConfig;
use pagelab_mm::pagetable::Geometry;
use pagelab_mm::phys::numa::NumaConfig;
use pagelab_mm::phys::PhysConfig;
use pagelab_mm::platform::Platform;
use pagelab_mm::system::Mm;

/// This process's CPU seconds (user + system), from /proc/self/stat.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which ends with ')'): utime and stime are
    // the 12th and 13th, in clock ticks of 100 Hz (USER_HZ on Linux).
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    (f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)) as f64 / 100.0
}

fn run(procs: u32) {
    let memory = Bytes(4 << 30);
    let platform = Platform {
        geometry: Geometry::x86_64(),
        kernel: KernelConfig::default(),
        numa: NumaConfig::uniform(memory, 1),
        placement: Default::default(),
        pcp: None,
    };
    let spec = "base:4K".parse().expect("policy");
    let mut mm = Mm::on(&spec, &PhysConfig::new(memory), Some(&platform)).expect("model");
    let start = VirtAddr(0x4000_0000);
    let cpu0 = cpu_seconds();
    let mut events = 0u64;
    for pid in 1..=procs {
        let map = MapEvent {
            start,
            len: 64 << 10,
            prot: Prot(Prot::READ | Prot::WRITE),
            backing: Backing::Anon,
            sharing: Sharing::Private,
        };
        for ev in [
            Event::Switch(ThreadId { pid, tid: pid }),
            Event::Map(Box::new(map)),
        ] {
            mm.event(&ev).expect("event");
            events += 1;
        }
        for page in 0..4u64 {
            mm.translate(VirtAddr(start.0 + page * 4096 * 4), false, true)
                .expect("fault");
            mm.tick().expect("tick");
            events += 1;
        }
    }
    let cpu = cpu_seconds() - cpu0;
    let tables = mm.machine().page_table_bytes();
    println!(
        "{procs:>6} processes: {events:>7} events  cpu {cpu:>6.2} s  {:>8.0} k events/s  page tables {} M",
        events as f64 / cpu.max(0.01) / 1e3,
        tables >> 20
    );
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let sizes: &[u32] = if quick {
        &[1_000, 10_000]
    } else {
        &[1_000, 10_000, 40_000]
    };
    for &n in sizes {
        run(n);
    }
}
