//! Throughput of the trace readers and writers.
//!
//! Generates a realistic trace of about 20M references in memory (instruction
//! fetches advancing mostly sequentially with occasional jumps, data
//! references mixing stack and heap), writes it as Lackey text and as native,
//! then times parsing and decoding.
//!
//! `cargo run --release -p pagelab-trace --example bench_trace [refs]`

use pagelab_core::{AccessKind, Event, MemRef, VirtAddr};
use pagelab_trace::{LackeyReader, LackeyWriter, NativeReader, NativeWriter, TraceSource};
use std::time::Instant;

/// A small, fast, deterministic random generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// About `n` references shaped like a real program's.
fn generate(n: usize) -> Vec<Event> {
    const CODE: u64 = 0x0040_0000;
    const STACK: u64 = 0x1f_feff_f000;
    const HEAP: u64 = 0x0500_0000;
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let mut pc = CODE;
    let mut heap_cursor = HEAP;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let len = 1 + rng.below(15) as u32;
        out.push(Event::Ref(MemRef {
            addr: VirtAddr(pc),
            size: len,
            kind: AccessKind::Instr,
        }));
        pc += len as u64;
        if rng.below(12) == 0 {
            pc = CODE + rng.below(1 << 20); // a jump or call
        }
        if rng.below(10) < 6 {
            let kind = match rng.below(10) {
                0..=5 => AccessKind::Load,
                6..=8 => AccessKind::Store,
                _ => AccessKind::Modify,
            };
            let size = [1, 2, 4, 8, 8, 8, 16, 32][rng.below(8) as usize];
            let addr = match rng.below(10) {
                0..=4 => (STACK - rng.below(4096)) & !7,
                5..=7 => {
                    heap_cursor += 8 * rng.below(4);
                    heap_cursor
                }
                _ => HEAP + (rng.below(64 << 20) & !7),
            };
            out.push(Event::Ref(MemRef {
                addr: VirtAddr(addr),
                size,
                kind,
            }));
        }
    }
    out
}

/// Reads every event of `src` in batches of 64K; returns the count.
fn drain(src: &mut dyn TraceSource) -> u64 {
    let mut batch = Vec::with_capacity(1 << 16);
    let mut n = 0;
    loop {
        batch.clear();
        if !src.fill(&mut batch, 1 << 16).expect("trace reads back") {
            return n;
        }
        n += batch.len() as u64;
    }
}

/// CPU time this thread has used, in seconds, where Linux tells it.
///
/// The benchmark machine may be shared: rates per CPU-second are steadier
/// than rates per wall-clock second, so both are printed.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: f64 = stat.split_whitespace().next()?.parse().ok()?;
    Some(ns / 1e9)
}

/// Best wall time and best CPU time of `runs` runs of `f`, in seconds.
struct Timing {
    wall: f64,
    cpu: Option<f64>,
}

impl Timing {
    /// Prints `label: N refs/s[, M MB/s]` by wall clock, then the same per
    /// CPU-second on an indented line when known.
    fn report(&self, label: &str, refs: f64, mb: Option<f64>, note: &str) {
        let line = |secs: f64| match mb {
            Some(mb) => format!("{:.0} refs/s, {:.0} MB/s", refs / secs, mb / secs),
            None => format!("{:.0} refs/s", refs / secs),
        };
        println!("{label}: {}{note}", line(self.wall));
        if let Some(cpu) = self.cpu {
            println!("    per CPU-second: {}", line(cpu));
        }
    }
}

fn best<T>(runs: usize, mut f: impl FnMut() -> T) -> (Timing, T) {
    let mut timing = Timing {
        wall: f64::INFINITY,
        cpu: None,
    };
    let mut last = None;
    for _ in 0..runs {
        let (t, c) = (Instant::now(), cpu_seconds());
        let r = f();
        timing.wall = timing.wall.min(t.elapsed().as_secs_f64());
        if let (Some(c0), Some(c1)) = (c, cpu_seconds()) {
            timing.cpu = Some(timing.cpu.map_or(c1 - c0, |b: f64| b.min(c1 - c0)));
        }
        last = Some(r);
    }
    (timing, last.unwrap())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(Ok(20_000_000), |s| s.parse())?;
    let events = generate(n);
    let n = events.len() as f64;
    println!("trace: {} references", events.len());

    let (t, text) = best(1, || {
        let mut w = LackeyWriter::new(Vec::with_capacity(events.len() * 16));
        events.iter().for_each(|e| w.write(e).unwrap());
        w.finish().unwrap()
    });
    let mb = text.len() as f64 / 1e6;
    t.report(
        "lackey write",
        n,
        Some(mb),
        &format!(" ({mb:.0} MB of text)"),
    );

    let (t, native) = best(1, || {
        let mut w = NativeWriter::new(Vec::new()).unwrap();
        events.iter().for_each(|e| w.write(e).unwrap());
        w.finish().unwrap()
    });
    let note = format!(
        " ({:.1} MB, {:.2} bytes/ref)",
        native.len() as f64 / 1e6,
        native.len() as f64 / n
    );
    t.report("native write", n, None, &note);

    let (t, count) = best(3, || drain(&mut LackeyReader::new(&text[..], "bench")));
    assert_eq!(count, events.len() as u64);
    t.report("lackey parse", n, Some(mb), "");

    let (t, count) = best(3, || drain(&mut NativeReader::new(&native[..], "bench")));
    assert_eq!(count, events.len() as u64);
    t.report("native decode", n, None, "");
    Ok(())
}
