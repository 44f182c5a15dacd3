//! Decoder speed alone: decodes a recorded plugin stream (a file the plugin
//! wrote with `fd=N` redirected to it) and prints events per second.
//!
//! ```sh
//! qemu-x86_64 -plugin .../libpagelab_qemu_v1.so,fd=200 gzip -9 -c big >/dev/null 200>/tmp/gzip.stream
//! cargo run --release -p pagelab-capture --example decode_stream -- /tmp/gzip.stream
//! ```
//!
//! The file is read into memory first, so the figure is the decoder's own.
//! With a third argument `hash`, a hash of all the events is printed too (to
//! check that a change of the decoder leaves its output identical).

use pagelab_capture::PluginReader;
use pagelab_core::Event;
use pagelab_trace::TraceSource;
use std::hash::{Hash, Hasher};
use std::time::Instant;

/// CPU seconds used by the calling thread (steadier than wall time on a busy machine).
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` writes only the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

fn main() {
    let path = std::env::args().nth(1).expect("a stream file");
    let repeat: usize = std::env::args()
        .nth(2)
        .map_or(3, |s| s.parse().expect("a repeat count"));
    let hash = std::env::args().nth(3).is_some_and(|s| s == "hash");
    let data = std::fs::read(&path).expect("readable stream file");
    for _ in 0..repeat {
        let t = Instant::now();
        let c = thread_cpu();
        let mut r = PluginReader::new(&data[..], path.clone());
        let bs: usize = std::env::var("BATCH").map_or(1 << 16, |s| s.parse().unwrap());
        let mut batch = Vec::with_capacity(bs);
        let (mut refs, mut events) = (0u64, 0u64);
        let mut h = rustc_hash::FxHasher::default();
        if let Ok(depth) = std::env::var("PAGES") {
            // Through a page filter of this depth, as the study reads.
            let mut filter = pagelab_trace::PageFilter::new(depth.parse().unwrap(), false);
            let mut pb = pagelab_trace::PageBatch::default();
            let mut words = 0u64;
            loop {
                pb.clear();
                let more = if std::env::var_os("DEFAULT").is_some() {
                    let m = r.fill(&mut pb.events, bs).expect("a valid stream");
                    filter.take_events(&mut pb);
                    m
                } else {
                    r.fill_pages(&mut filter, &mut pb, bs)
                        .expect("a valid stream")
                };
                if !more {
                    break;
                }
                refs += pb.refs[0] + pb.refs[1];
                words += pb.words.len() as u64;
            }
            let s = t.elapsed().as_secs_f64();
            println!(
                "{:.3} s (cpu {:.3} s): {:.0} M refs, {:.1} M page words",
                s,
                thread_cpu() - c,
                refs as f64 / 1e6,
                words as f64 / 1e6
            );
            continue;
        }
        while r.fill(&mut batch, bs).expect("a valid stream") {
            events += batch.len() as u64;
            refs += batch.iter().filter(|e| matches!(e, Event::Ref(_))).count() as u64;
            if hash {
                for e in &batch {
                    match e {
                        Event::Ref(r) => r.hash(&mut h),
                        other => format!("{other:?}").hash(&mut h),
                    }
                }
            }
            batch.clear();
        }
        let s = t.elapsed().as_secs_f64();
        println!(
            "{:.3} s (cpu {:.3} s): {:.0} M events, {:.0} M refs, {:.1} M refs/s, {:.2} GB/s of stream",
            s,
            thread_cpu() - c,
            events as f64 / 1e6,
            refs as f64 / 1e6,
            refs as f64 / s / 1e6,
            data.len() as f64 / s / 1e9
        );
        if hash {
            println!("hash of the events: {:016x}", h.finish());
        }
    }
}
