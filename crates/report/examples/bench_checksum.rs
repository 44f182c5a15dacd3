//! The rate of the provenance checksum, which every run over a trace file
//! pays once: over bytes in memory, and over a file (read through a map).
//!
//! Run: `cargo run --release -p pagelab-report --example bench_checksum [FILE]`
//! (without FILE, 256 MiB of made-up bytes written to a temporary file).

use std::time::Instant;

fn main() {
    let arg = std::env::args().nth(1);
    let tmp = std::env::temp_dir().join(format!("pagelab-bench-checksum-{}", std::process::id()));
    let path = match &arg {
        Some(p) => std::path::PathBuf::from(p),
        None => {
            let data: Vec<u8> = (0..256u64 << 20).map(|i| (i * 31 % 251) as u8).collect();
            std::fs::write(&tmp, data).unwrap();
            tmp.clone()
        }
    };
    let bytes = std::fs::read(&path).unwrap();
    let gb = bytes.len() as f64 / 1e9;
    let best = |f: &dyn Fn() -> String| {
        let mut best = f64::INFINITY;
        let mut out = String::new();
        for _ in 0..5 {
            let t = Instant::now();
            out = f();
            best = best.min(t.elapsed().as_secs_f64());
        }
        (best, out)
    };
    let (mem, a) = best(&|| pagelab_report::checksum_bytes("x", &bytes).checksum);
    println!(
        "checksum of bytes in memory: {:.1} GB/s ({mem:.3} s)",
        gb / mem
    );
    let (file, b) = best(&|| pagelab_report::checksum_file("x", &path).unwrap().checksum);
    println!(
        "checksum of the file:        {:.1} GB/s ({file:.3} s)",
        gb / file
    );
    assert_eq!(a, b);
    if arg.is_none() {
        let _ = std::fs::remove_file(&tmp);
    }
}
