//! Times the study's model alone: the trace is parsed and filtered first.
use pagelab_engine::{Study, StudyConfig};
use pagelab_trace::PageBatch;
use std::time::Instant;

/// This thread's CPU time so far, in seconds (Linux's schedstat; 0 elsewhere).
fn cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 / 1e9)
}

fn main() {
    let path = std::env::args().nth(1).expect("a Lackey file");
    let cfg = StudyConfig {
        page_sizes: pagelab_core::parse_page_sizes("4K,8K,16K,32K,64K,128K,256K,2M").unwrap(),
        tlb: pagelab_tlb::preset("weisberg").unwrap(),
    };
    let study = Study::new(&cfg).unwrap();
    let mut src = pagelab_trace::open(&path, None).unwrap();
    let mut filter = study.page_filter();
    let mut batches = Vec::new();
    let t = Instant::now();
    let cpu = cpu_seconds();
    loop {
        let mut b = PageBatch::default();
        if !src.fill_pages(&mut filter, &mut b, 1 << 16).unwrap() {
            break;
        }
        batches.push(b);
    }
    let parse = t.elapsed();
    let parse_cpu = cpu_seconds() - cpu;
    let words: usize = batches.iter().map(|b| b.words.len()).sum();
    let mut best = f64::MAX;
    let mut best_wall = f64::MAX;
    for _ in 0..9 {
        let mut study = Study::new(&cfg).unwrap();
        let cpu = cpu_seconds();
        let t = Instant::now();
        for b in &batches {
            study.feed_pages(b);
        }
        best_wall = best_wall.min(t.elapsed().as_secs_f64());
        best = best.min(cpu_seconds() - cpu);
        std::hint::black_box(study.finish(Default::default()));
    }
    println!(
        "parse+filter, one thread: {:.3} s ({parse_cpu:.3} s CPU), {words} words; \
         model alone, best of 5: {best:.3} s CPU; wall best {best_wall:.4}",
        parse.as_secs_f64()
    );
}
