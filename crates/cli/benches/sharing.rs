//! The sharing model at Bligh and Hansen's (OLS 2003) scale: 5000 processes each touching
//! every page of a 2G segment on ia32-pae (2.6 billion page references), under
//! private, shared and hugetlb page tables, then the fork/exec churn. Prints,
//! per run, wall and CPU time, references per CPU second and this process's
//! peak resident memory (getrusage maxrss), against the goal of under
//! a minute and under 2G.
//!
//! `cargo bench -p pagelab --bench sharing` (`-- quick` for 500 processes).

use pagelab_core::{Event, PageSize};
use pagelab_mm::sharing::{Config, HugetlbPool, PageTables, Sharing};
use std::time::Instant;

/// This process's CPU seconds and peak resident bytes.
fn usage() -> (f64, u64) {
    // SAFETY: an all-zero rusage is a valid value for getrusage to fill.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `getrusage` fills the struct it is given and touches nothing else.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return (0.0, 0);
    }
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    (t(u.ru_utime) + t(u.ru_stime), u.ru_maxrss as u64 * 1024)
}

fn run(label: &str, spec: &str, cfg: Config) -> u64 {
    let mut src = pagelab_workloads::open(spec).expect("workload");
    let mut model = Sharing::new(cfg).expect("config");
    let (cpu0, _) = usage();
    let wall = Instant::now();
    let mut buf: Vec<Event> = Vec::with_capacity(1 << 14);
    loop {
        buf.clear();
        if !src.fill(&mut buf, 1 << 14).expect("fill") {
            break;
        }
        model.events(&buf).expect("events");
    }
    let s = model.stats();
    let (cpu1, rss) = usage();
    let cpu = cpu1 - cpu0;
    println!(
        "{label:<34} {:>14} refs  wall {:>6.1} s  cpu {:>6.1} s  {:>6.1} M refs/s  peak rss {:>5} M  page tables at peak {:>8} M",
        s.counts.refs,
        wall.elapsed().as_secs_f64(),
        cpu,
        s.counts.refs as f64 / cpu / 1e6,
        rss >> 20,
        s.page_tables.page_table_bytes_peak >> 20
    );
    s.counts.refs
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let procs = if quick { 500 } else { 5000 };
    let seg = format!("shm-fanout:procs={procs},segment=2G");
    println!("goal: 5000 x 2G (2.6 G refs) in under 60 s of one core, peak rss under 2048 M");
    run(
        "ia32-pae private",
        &seg,
        Config::ia32_pae(PageTables::Private),
    );
    run(
        "ia32-pae shared",
        &seg,
        Config::ia32_pae(PageTables::Shared),
    );
    let mut huge = Config::ia32_pae(PageTables::Private);
    huge.hugetlb = vec![HugetlbPool {
        size: PageSize::M2,
        count: 1024,
    }];
    run(
        "ia32-pae hugetlb 2M",
        &format!("{seg},backing=hugetlb"),
        huge,
    );
    for spec in [
        "forkexec:procs=64,jobs=2000",
        "forkexec:procs=256,jobs=2000,anon=4M",
    ] {
        run(spec, spec, Config::ia32_pae(PageTables::Private));
    }
}
