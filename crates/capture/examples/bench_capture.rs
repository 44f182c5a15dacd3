//! Capture speed on a real program, side by side in one run: the program
//! natively, under pagelab's QEMU capture (decoded, events counted), under
//! Valgrind Lackey into `wc -l`, and under the QEMU capture feeding the
//! default page-size study.
//!
//! ```sh
//! cargo run --release -p pagelab-capture --example bench_capture            # gzip -9 on 256 KB
//! cargo run --release -p pagelab-capture --example bench_capture -- 2M      # on 2 MB
//! cargo run --release -p pagelab-capture --example bench_capture -- 256K xz -3 -c
//! ```
//!
//! The input is the first bytes of the files in /usr/bin (real binaries and
//! scripts); the program gets it as its last argument, its output goes to
//! /dev/null. The CPU time of each capture is printed beside its wall time:
//! QEMU's (with the plugin) and pagelab's (decoding, and the study), which
//! share the two cores of a small machine.
//!
//! Lackey takes minutes and its time does not depend on pagelab, so
//! `PAGELAB_BENCH_LACKEY` chooses: `run` (the default) runs it and keeps its
//! time in a cache file, `cache` takes the kept time for the same program,
//! arguments, input size and tools when there is one (else runs it), `skip`
//! leaves it out (as does `PAGELAB_BENCH_NO_LACKEY=1`).

use pagelab_capture::{Backend, Capture, CaptureCommand, StdoutTo};
use pagelab_core::Event;
use pagelab_engine::StudyConfig;
use pagelab_trace::TraceSource;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn input(bytes: usize) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("pagelab-bench-input-{bytes}"));
    let mut data = Vec::with_capacity(bytes);
    let mut names: Vec<_> = std::fs::read_dir("/usr/bin")
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    names.sort();
    for p in names {
        if data.len() >= bytes {
            break;
        }
        if let Ok(d) = std::fs::read(&p) {
            data.extend_from_slice(&d[..d.len().min(64 * 1024)]);
        }
    }
    data.truncate(bytes);
    std::fs::write(&path, &data).unwrap();
    path
}

fn parse_size(s: &str) -> usize {
    let (n, m) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 1 << 10),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 1 << 20),
        _ => (s, 1),
    };
    n.parse::<usize>().expect("a size like 256K or 2M") * m
}

fn best_of(n: usize, mut f: impl FnMut() -> Duration) -> Duration {
    (0..n).map(|_| f()).min().unwrap()
}

/// CPU seconds (user + system) used so far by this process and by its waited-for children.
fn cpu() -> (f64, f64) {
    let get = |who| {
        // SAFETY: `rusage` is plain integers, for which all zeros is valid.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `getrusage` writes only the struct it is given.
        unsafe { libc::getrusage(who, &mut u) };
        let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        s(u.ru_utime) + s(u.ru_stime)
    };
    (get(libc::RUSAGE_SELF), get(libc::RUSAGE_CHILDREN))
}

/// Runs `f` `n` times; the best wall time and the CPU seconds of that run
/// (this process's, its children's).
fn best_with_cpu(n: usize, mut f: impl FnMut()) -> (Duration, f64, f64) {
    (0..n)
        .map(|_| {
            let (s0, c0) = cpu();
            let t = Instant::now();
            f();
            let wall = t.elapsed();
            let (s1, c1) = cpu();
            (wall, s1 - s0, c1 - c0)
        })
        .min_by_key(|r| r.0)
        .unwrap()
}

/// Where Lackey's time for this program, arguments, input size and tools is kept.
fn lackey_cache(
    valgrind: &std::path::Path,
    program: &std::path::Path,
    args: &[String],
    size: usize,
) -> std::path::PathBuf {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for p in [valgrind, program] {
        p.hash(&mut h);
        if let Ok(m) = std::fs::metadata(p) {
            (m.len(), m.modified().ok()).hash(&mut h);
        }
    }
    args.hash(&mut h);
    size.hash(&mut h);
    std::env::temp_dir().join(format!("pagelab-bench-lackey-{:016x}.txt", h.finish()))
}

/// Lackey into `wc -l`: its wall time, its line count, and whether both come from the cache.
fn lackey(
    program: &std::path::Path,
    args: &[String],
    size: usize,
) -> Option<(Duration, String, bool)> {
    let mode = std::env::var("PAGELAB_BENCH_LACKEY").unwrap_or_else(|_| "run".into());
    if mode == "skip" || std::env::var_os("PAGELAB_BENCH_NO_LACKEY").is_some() {
        return None;
    }
    let valgrind = pagelab_capture::find_valgrind().expect("valgrind");
    // The input file's name is the same for the same size: leave it out of the key.
    let cache = lackey_cache(&valgrind, program, &args[..args.len() - 1], size);
    if mode == "cache" {
        let kept = std::fs::read_to_string(&cache).ok().and_then(|s| {
            let mut it = s.split_whitespace();
            let secs: f64 = it.next()?.parse().ok()?;
            Some((Duration::from_secs_f64(secs), it.next()?.to_string(), true))
        });
        if kept.is_some() {
            return kept;
        }
    }
    let t = Instant::now();
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"v="$1"; shift; "$v" --tool=lackey --trace-mem=yes --log-fd=3 "$@" 3>&1 >/dev/null 2>/dev/null | wc -l"#)
        .arg("sh")
        .arg(&valgrind)
        .arg(program)
        .args(args)
        .output()
        .unwrap();
    let wall = t.elapsed();
    let lines = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let _ = std::fs::write(&cache, format!("{} {lines}\n", wall.as_secs_f64()));
    Some((wall, lines, false))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let size = args.first().map_or(256 << 10, |s| parse_size(s));
    let mut prog: Vec<String> = if args.len() > 1 {
        args[1..].to_vec()
    } else {
        vec!["gzip".into(), "-9".into(), "-c".into()]
    };
    let file = input(size);
    prog.push(file.to_string_lossy().into_owned());
    let program = pagelab_capture::which(prog[0].as_ref()).expect("program in PATH");
    println!("program: {} on {} KB", prog.join(" "), size >> 10);

    let native = best_of(5, || {
        let t = Instant::now();
        let s = Command::new(&program)
            .args(&prog[1..])
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(s.success());
        t.elapsed()
    });
    println!("native:                {:>9.3} s", native.as_secs_f64());

    let cmd = CaptureCommand {
        backend: Backend::Qemu,
        program: program.clone().into(),
        args: prog[1..].iter().map(Into::into).collect(),
        stdout: StdoutTo::File("/dev/null".into()),
    };
    let mut refs = 0u64;
    let (qemu, q_self, q_child) = best_with_cpu(3, || {
        let mut cap = Capture::spawn(&cmd).unwrap();
        let mut batch = Vec::with_capacity(1 << 16);
        refs = 0;
        while cap.fill(&mut batch, 1 << 16).unwrap() {
            refs += batch.iter().filter(|e| matches!(e, Event::Ref(_))).count() as u64;
            batch.clear();
        }
    });
    let qs = qemu.as_secs_f64() / native.as_secs_f64();
    println!(
        "qemu capture:          {:>9.3} s  {:>7.1}x native  ({:.0} M refs, {:.1} M refs/s; cpu: qemu {:.2} s, pagelab {:.2} s)",
        qemu.as_secs_f64(),
        qs,
        refs as f64 / 1e6,
        refs as f64 / qemu.as_secs_f64() / 1e6,
        q_child,
        q_self
    );

    let cfg = StudyConfig {
        page_sizes: pagelab_core::parse_page_sizes("4K,8K,16K,32K,64K,128K,256K,2M").unwrap(),
        tlb: pagelab_tlb::resolve("weisberg").unwrap(),
    };
    let (study, s_self, s_child) = best_with_cpu(2, || {
        let mut cap = Capture::spawn(&cmd).unwrap();
        pagelab_engine::run_study(&mut cap, &cfg, &mut ()).unwrap();
    });
    println!(
        "qemu capture + study:  {:>9.3} s  {:>7.1}x native  (goal: under 30x; cpu: qemu {:.2} s, pagelab {:.2} s)",
        study.as_secs_f64(),
        study.as_secs_f64() / native.as_secs_f64(),
        s_child,
        s_self
    );

    let Some((lackey, lines, cached)) = lackey(&program, &prog[1..], size) else {
        return;
    };
    let ls = lackey.as_secs_f64() / native.as_secs_f64();
    println!(
        "lackey | wc -l:        {:>9.3} s  {:>7.1}x native  ({lines} lines{})",
        lackey.as_secs_f64(),
        ls,
        if cached {
            ", time kept from an earlier run"
        } else {
            ""
        }
    );
    println!(
        "qemu capture is {:.0}x faster than lackey (goal: 200x or more)",
        ls / qs
    );
}
