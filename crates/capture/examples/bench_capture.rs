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
//! /dev/null. The Lackey run is skipped with `PAGELAB_BENCH_NO_LACKEY=1`.

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
    let qemu = best_of(3, || {
        let t = Instant::now();
        let mut cap = Capture::spawn(&cmd).unwrap();
        let mut batch = Vec::with_capacity(1 << 16);
        refs = 0;
        while cap.fill(&mut batch, 1 << 16).unwrap() {
            refs += batch.iter().filter(|e| matches!(e, Event::Ref(_))).count() as u64;
            batch.clear();
        }
        t.elapsed()
    });
    let qs = qemu.as_secs_f64() / native.as_secs_f64();
    println!(
        "qemu capture:          {:>9.3} s  {:>7.1}x native  ({:.0} M refs, {:.1} M refs/s)",
        qemu.as_secs_f64(),
        qs,
        refs as f64 / 1e6,
        refs as f64 / qemu.as_secs_f64() / 1e6
    );

    let cfg = StudyConfig {
        page_sizes: pagelab_core::parse_page_sizes("4K,8K,16K,32K,64K,128K,256K,2M").unwrap(),
        tlb: pagelab_tlb::resolve("weisberg").unwrap(),
    };
    let study = best_of(2, || {
        let t = Instant::now();
        let mut cap = Capture::spawn(&cmd).unwrap();
        pagelab_engine::run_study(&mut cap, &cfg, &mut ()).unwrap();
        t.elapsed()
    });
    println!(
        "qemu capture + study:  {:>9.3} s  {:>7.1}x native  (goal: under 30x)",
        study.as_secs_f64(),
        study.as_secs_f64() / native.as_secs_f64()
    );

    if std::env::var_os("PAGELAB_BENCH_NO_LACKEY").is_some() {
        return;
    }
    let valgrind = pagelab_capture::find_valgrind().expect("valgrind");
    let t = Instant::now();
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"v="$1"; shift; "$v" --tool=lackey --trace-mem=yes --log-fd=3 "$@" 3>&1 >/dev/null 2>/dev/null | wc -l"#)
        .arg("sh")
        .arg(&valgrind)
        .arg(&program)
        .args(&prog[1..])
        .output()
        .unwrap();
    let lackey = t.elapsed();
    let lines = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let ls = lackey.as_secs_f64() / native.as_secs_f64();
    println!(
        "lackey | wc -l:        {:>9.3} s  {:>7.1}x native  ({lines} lines)",
        lackey.as_secs_f64(),
        ls
    );
    println!(
        "qemu capture is {:.0}x faster than lackey (goal: 200x or more)",
        ls / qs
    );
}
