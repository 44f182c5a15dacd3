//! Parsing speed of one Lackey file, read into memory first.
//!
//! `cargo run --release -p pagelab-trace --example parse_lackey FILE [runs]`
//! prints the best of `runs` (default 5) by wall clock and per CPU-second,
//! for counting the lines (the yardstick, in memory), parsing into events,
//! and parsing into the study's page filter.

use pagelab_trace::{LackeyReader, PageBatch, PageFilter, TraceSource};
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
    let best = |what: &str, f: &mut dyn FnMut() -> Result<u64, Box<dyn std::error::Error>>| {
        let (mut wall, mut cpu) = (f64::INFINITY, f64::INFINITY);
        let mut n = 0;
        for _ in 0..runs {
            let (t, c) = (Instant::now(), cpu_seconds());
            n = f()?;
            wall = wall.min(t.elapsed().as_secs_f64());
            if let (Some(c0), Some(c1)) = (c, cpu_seconds()) {
                cpu = cpu.min(c1 - c0);
            }
        }
        println!(
            "{what}: {n} in {:.1} ms ({:.1} ms CPU), {:.0} MB/s, {:.1} M/s",
            wall * 1e3,
            cpu * 1e3,
            mb / wall,
            n as f64 / wall / 1e6
        );
        Ok::<f64, Box<dyn std::error::Error>>(cpu)
    };
    println!("{path}: {mb:.0} MB");
    let count = best("count lines", &mut || {
        Ok(memchr::memchr_iter(b'\n', &text).count() as u64)
    })?;
    best("parse into events", &mut || {
        let mut src = LackeyReader::new(&text[..], &path);
        let mut batch = Vec::with_capacity(1 << 16);
        let mut refs = 0u64;
        loop {
            batch.clear();
            if !src.fill(&mut batch, 1 << 16)? {
                break;
            }
            refs += batch.len() as u64;
        }
        Ok(refs)
    })?;
    let pages = best("parse into pages", &mut || {
        let mut src = LackeyReader::new(&text[..], &path);
        let mut filter = PageFilter::new(4, false);
        let mut batch = PageBatch::default();
        let (mut refs, mut words) = (0, 0);
        loop {
            batch.clear();
            let more = src.fill_pages(&mut filter, &mut batch, 1 << 16)?;
            refs += batch.refs[0] + batch.refs[1];
            words += batch.words.len();
            if !more {
                break;
            }
        }
        std::hint::black_box(words);
        Ok(refs)
    })?;
    println!("pages / count lines, CPU: {:.2}", pages / count);
    Ok(())
}
