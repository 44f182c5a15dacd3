//! The study with time against the study without: refs/s of each on the
//! given traces, the 8 default page sizes in one pass, on one machine.
//! `cargo run --release -p pagelab-engine --example bench_cost [--machine zen4] TRACE...`

use pagelab_engine::{run_cost_study, run_study, CostConfig, CostMachine, StudyConfig};

/// CPU seconds (user + system) of this process so far, its reading threads included.
fn cpu() -> f64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `getrusage` fills the zeroed struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
    // SAFETY: zeroed, then filled by the kernel: every field is an integer.
    let ru = unsafe { ru.assume_init() };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut machine = "zen4".to_string();
    if let Some(i) = args.iter().position(|a| a == "--machine") {
        machine = args.remove(i + 1);
        args.remove(i);
    }
    if args.is_empty() {
        args.push(
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../tests/data/gzip-9.lackey.zst"
            )
            .to_string(),
        );
    }
    let preset = pagelab_machine::resolve(&machine).expect("a machine");
    let tlb = preset
        .tlb
        .clone()
        .unwrap_or_else(|| pagelab_tlb::preset("weisberg").unwrap());
    let m = CostMachine::new(&preset, &tlb)
        .expect("a TLB matching the costs")
        .expect("a machine with [caches] and [costs]");
    let cost = CostConfig {
        machine: m.clone(),
        nested_host: None,
    };
    let cfg = StudyConfig {
        page_sizes: pagelab_core::parse_page_sizes("4K,8K,16K,32K,64K,128K,256K,2M").unwrap(),
        tlb: m.tlb.clone(),
    };
    for path in &args {
        let mut best = [f64::MAX; 2];
        let mut refs = 0;
        for _ in 0..3 {
            for (k, timed) in [false, true].into_iter().enumerate() {
                let mut src = pagelab_trace::open(path, None).expect("a trace");
                let c0 = cpu();
                let r = if timed {
                    run_cost_study(&mut *src, &cfg, &cost, &mut ()).expect("a run")
                } else {
                    run_study(&mut *src, &cfg, &mut ()).expect("a run")
                };
                refs = r.refs.instr + r.refs.data;
                best[k] = best[k].min(cpu() - c0);
            }
        }
        println!(
            "{path}: {:.1} M refs; study {:.1} M refs/s, with time on {machine} {:.1} M refs/s (CPU, best of 3, 8 page sizes)",
            refs as f64 / 1e6,
            refs as f64 / best[0] / 1e6,
            refs as f64 / best[1] / 1e6
        );
    }
}
