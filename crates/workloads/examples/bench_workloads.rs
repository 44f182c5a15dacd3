//! Generation speed of every workload, in references per second.
//!
//! `cargo run --release -p pagelab-workloads --example bench_workloads [REFS]`
//! drains each workload's source in batches of 64K events into one reused
//! buffer (as the engine does) and prints refs/s. REFS defaults to 200 M per
//! workload; the default set is timed as well.

use pagelab_core::Event;
use pagelab_trace::TraceSource;
use std::time::Instant;

const BATCH: usize = 1 << 16;

/// Drains up to `limit` references from `spec`; returns (refs, seconds, checksum).
fn run(spec: &str, limit: u64) -> (u64, f64, u64) {
    let mut src = pagelab_workloads::open(spec).expect("spec");
    let mut buf: Vec<Event> = Vec::with_capacity(BATCH);
    let (mut n, mut sum) = (0u64, 0u64);
    let t = Instant::now();
    while n < limit {
        buf.clear();
        if !src.fill(&mut buf, BATCH).expect("fill") {
            break;
        }
        n += buf.len() as u64;
        // Touch the batch so the generation cannot be optimised away.
        if let Some(Event::Ref(r)) = buf.last() {
            sum = sum.wrapping_add(r.addr.0);
        }
    }
    (n, t.elapsed().as_secs_f64(), sum)
}

fn main() {
    let limit: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000_000);
    let long = [
        "stride:heap=32M,every=16,iters=1000000000,init=false",
        "stream:n=1000000,iters=1000000000,init=false",
        "gups:table=256M,updates=1000000000,init=false",
        "chase:nodes=3000000,steps=1000000000,init=false",
        "stride:heap=1G,iters=1,init=true",
    ];
    println!(
        "{:<58} {:>12} {:>9} {:>12}",
        "workload", "refs", "seconds", "M refs/s"
    );
    let mut check = 0u64;
    for spec in long.iter().copied().chain(pagelab_workloads::default_set()) {
        let (n, secs, sum) = run(spec, limit);
        check ^= sum;
        println!(
            "{spec:<58} {n:>12} {secs:>9.3} {:>12.1}",
            n as f64 / secs / 1e6
        );
    }
    println!("(checksum {check:#x})");
}
