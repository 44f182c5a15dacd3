//! Throughput of the hot paths, printed as rates (run: `cargo bench -p pagelab --bench throughput`).
//!
//! Input: the real gzip trace of `tests/data`, decompressed and repeated to
//! about 36 M references (`PAGELAB_BENCH_REPEAT` changes the count). Each
//! rate is the best of three runs; `wc -l` on the same file is the yardstick
//! the issue sets for the whole study on Lackey text.

use pagelab_engine::{run_study, StudyConfig};
use pagelab_trace::{Format, TraceSource};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// CPU seconds (user + system) used so far by this process and by its
/// waited-for children, from `getrusage` (microseconds; zeros if it fails).
fn cpu_seconds() -> (f64, f64) {
    let of = |who| {
        // SAFETY: `getrusage` fills the zeroed struct it is given.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(who, &mut u) } != 0 {
            return 0.0;
        }
        let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
        t(u.ru_utime) + t(u.ru_stime)
    };
    (of(libc::RUSAGE_SELF), of(libc::RUSAGE_CHILDREN))
}

/// The CPU seconds of one run of `f`: this process's own, or its children's.
fn cpu_of(children: bool, f: impl FnOnce()) -> f64 {
    let pick = |(own, kids): (f64, f64)| if children { kids } else { own };
    let before = pick(cpu_seconds());
    f();
    pick(cpu_seconds()) - before
}

/// The median of `v` (not empty).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn best_of<T>(n: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = None;
    let mut last = None;
    for _ in 0..n {
        let t = Instant::now();
        let v = f();
        let d = t.elapsed();
        best = Some(best.map_or(d, |b: Duration| b.min(d)));
        last = Some(v);
    }
    (best.unwrap(), last.unwrap())
}

/// The benchmark's Lackey file, written in large writes; and a copy written
/// 4 KiB at a time, as a program printing its trace would (Valgrind's file
/// is written in small writes). The page cache may hold the first in larger
/// folios, which `wc -l` reads markedly faster.
fn make_inputs(dir: &Path, repeat: usize) -> (PathBuf, PathBuf) {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/gzip-9.lackey.zst");
    let text = zstd_decode(&data);
    let path = dir.join("bench.lackey");
    let mut f = std::fs::File::create(&path).unwrap();
    for _ in 0..repeat {
        f.write_all(&text).unwrap();
    }
    let small = dir.join("bench-small-writes.lackey");
    let mut f = std::fs::File::create(&small).unwrap();
    for _ in 0..repeat {
        for chunk in text.chunks(4096) {
            f.write_all(chunk).unwrap();
        }
    }
    (path, small)
}

/// Pins this process (and so the children it starts) to the processor it is
/// running on; returns the previous affinity to restore, or `None` if it cannot.
fn pin_to_one_cpu() -> Option<libc::cpu_set_t> {
    // SAFETY: plain syscalls on this process with properly sized sets.
    unsafe {
        let mut old: libc::cpu_set_t = std::mem::zeroed();
        let size = std::mem::size_of::<libc::cpu_set_t>();
        if libc::sched_getaffinity(0, size, &mut old) != 0 {
            return None;
        }
        let cpu = libc::sched_getcpu();
        if cpu < 0 {
            return None;
        }
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut one);
        (libc::sched_setaffinity(0, size, &one) == 0).then_some(old)
    }
}

fn unpin(old: &libc::cpu_set_t) {
    // SAFETY: as in `pin_to_one_cpu`.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), old) };
}

/// The study's CPU time and `wc -l`'s on `path`, and their ratio: runs of
/// the two in turn, pair by pair (so that a drift in the machine's speed
/// moves both), the median of each over 9 pairs after one pair not counted.
fn cpu_ratio(path: &Path) -> (f64, f64, f64) {
    let (mut study_cpu, mut wc, mut ratio) = (vec![], vec![], vec![]);
    for pair in 0..10 {
        let w = cpu_of(true, || {
            Command::new("wc").arg("-l").arg(path).output().unwrap();
        });
        let s = cpu_of(false, || {
            study(path.to_str().unwrap());
        });
        if pair > 0 && w > 0.0 {
            study_cpu.push(s);
            wc.push(w);
            ratio.push(s / w);
        }
    }
    if ratio.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    (median(study_cpu), median(wc), median(ratio))
}

fn zstd_decode(path: &Path) -> Vec<u8> {
    let out = Command::new("zstd")
        .arg("-dc")
        .arg(path)
        .output()
        .expect("zstd is installed by scripts/setup.sh");
    assert!(out.status.success(), "zstd -dc {} failed", path.display());
    out.stdout
}

fn count_refs(path: &str) -> u64 {
    let mut src = pagelab_trace::open(path, None).unwrap();
    let mut buf = Vec::with_capacity(pagelab_engine::BATCH);
    let mut n = 0u64;
    loop {
        buf.clear();
        if !src.fill(&mut buf, pagelab_engine::BATCH).unwrap() {
            return n;
        }
        n += buf.len() as u64;
    }
}

fn study(path: &str) -> u64 {
    let cfg = StudyConfig {
        page_sizes: pagelab_core::parse_page_sizes("4K,8K,16K,32K,64K,128K,256K,2M").unwrap(),
        tlb: pagelab_tlb::preset("weisberg").unwrap(),
    };
    let mut src = pagelab_trace::open(path, None).unwrap();
    let r = run_study(&mut *src, &cfg, &mut ()).unwrap();
    r.refs.instr + r.refs.data
}

/// One policy run of the memory-management model over the whole trace.
fn policy(path: &str, spec: &str) -> u64 {
    let cfg = pagelab_engine::PolicyConfig {
        policies: vec![spec.parse().unwrap()],
        tlb: pagelab_tlb::preset("weisberg").unwrap(),
        phys: pagelab_mm::phys::PhysConfig::new(pagelab_core::Bytes(4 << 30)),
        strict: false,
        cow: Default::default(),
    };
    let mut src = pagelab_trace::open(path, None).unwrap();
    let r = pagelab_engine::run_policies(&mut *src, &cfg, &mut ()).unwrap();
    r.refs.instr + r.refs.data
}

fn rate(what: &str, refs: u64, d: Duration, bytes: Option<u64>) {
    let s = d.as_secs_f64();
    match bytes {
        Some(b) => println!(
            "{what:<34} {:>8.1} M refs/s {:>8.0} MB/s  ({s:.3} s)",
            refs as f64 / s / 1e6,
            b as f64 / s / 1e6
        ),
        None => println!(
            "{what:<34} {:>8.1} M refs/s              ({s:.3} s)",
            refs as f64 / s / 1e6
        ),
    }
}

fn main() {
    let repeat: usize = std::env::var("PAGELAB_BENCH_REPEAT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    let dir = std::env::temp_dir().join(format!("pagelab-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (lackey, small_writes) = make_inputs(&dir, repeat);
    let lackey_s = lackey.to_str().unwrap().to_string();
    let native = dir.join("bench.trace");
    let native_s = native.to_str().unwrap().to_string();
    let mut src = pagelab_trace::open(&lackey_s, None).unwrap();
    pagelab_trace::convert(&mut *src, &native_s, Format::Native).unwrap();
    let bytes = std::fs::metadata(&lackey).unwrap().len();

    let (wc, _) = best_of(3, || {
        Command::new("wc").arg("-l").arg(&lackey).output().unwrap()
    });
    let (parse, refs) = best_of(3, || count_refs(&lackey_s));
    let (decode, nrefs) = best_of(3, || count_refs(&native_s));
    let (study_l, srefs) = best_of(3, || study(&lackey_s));
    let (study_n, _) = best_of(3, || study(&native_s));
    assert_eq!(refs, nrefs);
    assert_eq!(refs, srefs);

    println!(
        "input: {} M references, {:.0} MB of Lackey text, {:.0} MB native",
        refs as f64 / 1e6,
        bytes as f64 / 1e6,
        std::fs::metadata(&native).unwrap().len() as f64 / 1e6
    );
    rate("wc -l (yardstick)", refs, wc, Some(bytes));
    rate("lackey parse", refs, parse, Some(bytes));
    rate("native decode", nrefs, decode, None);
    rate(
        "study, 8 sizes, weisberg, lackey",
        refs,
        study_l,
        Some(bytes),
    );
    rate("study, 8 sizes, weisberg, native", refs, study_n, None);
    println!(
        "study on lackey / wc -l: {:.1}x (goal: at most 4x)",
        study_l.as_secs_f64() / wc.as_secs_f64()
    );
    // The same in CPU time, medians of pairs: on every core, then
    // pinned to one (the goal's terms), on both copies of the file.
    let (study_cpu, wc_cpu, ratio) = cpu_ratio(&lackey);
    if wc_cpu > 0.0 {
        println!(
            "study on lackey / wc -l in CPU time: {ratio:.2}x ({study_cpu:.3} s / {wc_cpu:.3} s)"
        );
    }
    match pin_to_one_cpu() {
        Some(old) => {
            for (what, path) in [("large writes", &lackey), ("4 KiB writes", &small_writes)] {
                let (s, w, ratio) = cpu_ratio(path);
                if w > 0.0 {
                    println!(
                        "one core, file written in {what}: study / wc -l in CPU time: {ratio:.2}x ({s:.3} s / {w:.3} s, medians of 9 pairs; goal: at most 4x)"
                    );
                }
            }
            unpin(&old);
        }
        None => println!("one core: could not pin this process to one processor; skipped"),
    }
    // Each policy of the memory-management model, one run per pass, on the native trace.
    let study_rate = refs as f64 / study_n.as_secs_f64();
    for spec in [
        "base:4K",
        "base:64K",
        "linux-thp:enabled=always",
        "eager",
        "explicit",
        "reservation",
        "relocation",
    ] {
        let (d, n) = best_of(2, || policy(&native_s, spec));
        let r = n as f64 / d.as_secs_f64();
        println!(
            "policy {spec:<26} {:>8.1} M refs/s  ({:.2}x the 8-size study's rate; goal at least 0.33x)",
            r / 1e6,
            r / study_rate
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
