//! Throughput of the TLB arrays and hierarchies on a random-with-locality stream.
//!
//! Run: `cargo run --release -p pagelab-tlb --example bench_tlb`

use pagelab_core::{PageSize, VirtAddr, Vpn};
use pagelab_tlb::{preset, Side, Tlb, TlbArray, TlbHierarchy};
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

/// Page numbers: mostly near the previous page, often from a hot set, sometimes anywhere.
fn stream(n: usize) -> Vec<u64> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let hot: Vec<u64> = (0..1024).map(|_| rng.next() % (1 << 24)).collect();
    let mut cur = 0u64;
    (0..n)
        .map(|_| {
            let r = rng.next();
            cur = match r % 100 {
                0..=59 => cur,
                60..=84 => cur.wrapping_add(r >> 61).wrapping_sub(4) & ((1 << 24) - 1),
                85..=96 => hot[(r >> 20) as usize % hot.len()],
                _ => (r >> 8) % (1 << 24),
            };
            cur
        })
        .collect()
}

const PASSES: usize = 5;

/// This thread's CPU time in seconds (Linux `/proc`, 10 ms resolution), so that
/// rates stay meaningful on a machine shared with other jobs; `None` elsewhere.
fn cpu_secs() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit(')').next()?.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// Wall-clock start and CPU-time start.
struct Clock(Instant, Option<f64>);
impl Clock {
    fn start() -> Clock {
        Clock(Instant::now(), cpu_secs())
    }
    /// Elapsed seconds: CPU time when available, else wall time.
    fn secs(&self) -> f64 {
        match (self.1, cpu_secs()) {
            (Some(a), Some(b)) if b > a => b - a,
            _ => self.0.elapsed().as_secs_f64(),
        }
    }
}

fn bench_array(name: &str, mut t: TlbArray, pages: &[u64]) {
    let size = PageSize::K4;
    let start = Clock::start();
    let mut hits = 0u64;
    for _ in 0..PASSES {
        for &p in pages {
            hits += t.access(black_box(Vpn(p)), size) as u64;
        }
    }
    report(name, start, pages.len() * PASSES, hits);
}

fn bench_hierarchies(name: &str, preset_name: &str, copies: usize, pages: &[u64]) {
    let cfg = preset(preset_name).unwrap();
    let mut hs: Vec<TlbHierarchy> = (0..copies)
        .map(|_| TlbHierarchy::new(&cfg).unwrap())
        .collect();
    let sizes: Vec<PageSize> = (0..copies)
        .map(|i| PageSize::from_shift(12 + i as u8).unwrap())
        .collect();
    let start = Clock::start();
    for _ in 0..PASSES {
        for (i, &p) in pages.iter().enumerate() {
            let side = if i % 4 == 0 { Side::Instr } else { Side::Data };
            let addr = black_box(p << 12);
            for (h, &s) in hs.iter_mut().zip(&sizes) {
                black_box(h.access_addr(side, VirtAddr(addr), s));
            }
        }
    }
    let st = hs[0].stats();
    let hits = st.instr.accesses + st.data.accesses - st.instr.misses - st.data.misses;
    let refs = pages.len() * PASSES;
    let secs = start.secs();
    println!(
        "{name:<34} {:>8.1} M refs/s  ({:>6.1} M hierarchy accesses/s; 4K hierarchy hit rate {:>5.1}%)",
        refs as f64 / secs / 1e6,
        (refs * copies) as f64 / secs / 1e6,
        100.0 * hits as f64 / refs as f64
    );
}

fn report(name: &str, start: Clock, n: usize, hits: u64) {
    let secs = start.secs();
    println!(
        "{name:<34} {:>8.1} M accesses/s  (hit rate {:>5.1}%)",
        n as f64 / secs / 1e6,
        100.0 * hits as f64 / n as f64
    );
}

fn main() {
    let pages = stream(4_000_000);
    println!("rates per second of this thread's CPU time\nstream: {} page numbers x {PASSES} passes, 60% same page, 25% within 4 pages, 12% a hot set of 1024, 3% anywhere in 2^24", pages.len());
    bench_array("FullyAssoc 64", TlbArray::new(64, None), &pages);
    bench_array("FullyAssoc 2048", TlbArray::new(2048, None), &pages);
    bench_array("SetAssoc 1536x12", TlbArray::new(1536, Some(12)), &pages);
    bench_array(
        "SetAssoc 128x2 (POWER5 ERAT)",
        TlbArray::new(128, Some(2)),
        &pages,
    );
    bench_hierarchies("TlbHierarchy weisberg x1", "weisberg", 1, &pages);
    bench_hierarchies("TlbHierarchy weisberg x8 (4K..512K)", "weisberg", 8, &pages);
    bench_hierarchies("TlbHierarchy skylake x1", "skylake", 1, &pages);
    bench_hierarchies("TlbHierarchy skylake x8", "skylake", 8, &pages);
}
