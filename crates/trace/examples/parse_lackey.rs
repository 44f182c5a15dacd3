//! Parsing speed of one Lackey file, read into memory first.
//!
//! `cargo run --release -p pagelab-trace --example parse_lackey FILE [runs]`
//! prints the best of `runs` (default 5) by wall clock and per CPU-second.

use pagelab_trace::{LackeyReader, TraceSource};
use std::time::Instant;

/// CPU time this thread has used, in seconds (Linux), for a busy machine.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(stat.split_whitespace().next()?.parse::<f64>().ok()? / 1e9)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args.next().ok_or("usage: parse_lackey FILE [runs]")?;
    let runs: usize = args.next().map_or(Ok(5), |s| s.parse())?;
    let text = std::fs::read(&path)?;
    let mb = text.len() as f64 / 1e6;
    let (mut wall, mut cpu) = (f64::INFINITY, f64::INFINITY);
    let mut refs = 0;
    for _ in 0..runs {
        let (t, c) = (Instant::now(), cpu_seconds());
        let mut src = LackeyReader::new(&text[..], &path);
        let mut batch = Vec::with_capacity(1 << 16);
        refs = 0u64;
        loop {
            batch.clear();
            if !src.fill(&mut batch, 1 << 16)? {
                break;
            }
            refs += batch.len() as u64;
        }
        wall = wall.min(t.elapsed().as_secs_f64());
        if let (Some(c0), Some(c1)) = (c, cpu_seconds()) {
            cpu = cpu.min(c1 - c0);
        }
    }
    println!("{refs} refs, {mb:.0} MB");
    println!(
        "lackey parse: {:.0} MB/s, {:.1} M refs/s",
        mb / wall,
        refs as f64 / wall / 1e6
    );
    println!("    per CPU-second: {:.0} MB/s", mb / cpu);
    Ok(())
}
