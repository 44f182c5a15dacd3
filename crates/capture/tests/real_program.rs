//! A real Debian program (gzip) captured by both backends: the instruction
//! counts and the sizes of the code and data page sets must agree within a
//! tolerance.
//!
//! Why not exactly: the two emulate different CPUs, so glibc picks other
//! string functions (QEMU 7.2 has no AVX2); QEMU reports a 16- or 32-byte
//! vector access as 8-byte pieces and a read-modify-write as a load and a
//! store where Lackey prints one `M`; and addresses differ (QEMU loads
//! executables at 0x4000000000), so page *sets* are compared by size.
//! Tolerances: instructions within 1 %, code and data page-set sizes within
//! 5 % (measured on Debian 12, gzip 1.12, 40 KB input: 0.35 %, 1.2 % and 2.8 %).

mod common;

use common::*;
use pagelab_capture::Backend;
use pagelab_core::Event;
use std::collections::HashSet;

struct Profile {
    instr: u64,
    data: u64,
    code_pages: usize,
    data_pages: usize,
}

fn profile(events: &[Event]) -> Profile {
    let (instr, data) = counts(events);
    let mut code = HashSet::new();
    let mut datap = HashSet::new();
    for e in events {
        if let Event::Ref(r) = e {
            if r.kind.is_instr() {
                code.insert(r.addr.vpn(pagelab_core::PageSize::MIN));
            } else {
                datap.insert(r.addr.vpn(pagelab_core::PageSize::MIN));
            }
        }
    }
    Profile {
        instr,
        data,
        code_pages: code.len(),
        data_pages: datap.len(),
    }
}

fn within(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * a.max(b)
}

#[test]
fn gzip_agrees_between_qemu_and_lackey() {
    if !available(Backend::Qemu) || !available(Backend::Valgrind) {
        return;
    }
    let Some(gzip) = pagelab_capture::which("gzip".as_ref()) else {
        eprintln!("SKIPPED: gzip not installed");
        return;
    };
    // 40 KB of text that compresses somewhat.
    let input = std::env::temp_dir().join(format!("pagelab-gzip-in-{}", std::process::id()));
    let text: String = (0..4000)
        .map(|i| format!("line {i} of {} words\n", i * 7919 % 1000))
        .collect();
    std::fs::write(&input, text).unwrap();
    let gzip = gzip.to_string_lossy().into_owned();
    let args = ["-9", "-c", input.to_str().unwrap()];
    let sink = std::path::Path::new("/dev/null");
    let (q, qcode) = capture(Backend::Qemu, &gzip, &args, Some(sink));
    let (v, vcode) = capture(Backend::Valgrind, &gzip, &args, Some(sink));
    let _ = std::fs::remove_file(&input);
    assert_eq!((qcode, vcode), (0, 0));
    let (q, v) = (profile(&q), profile(&v));
    eprintln!(
        "qemu:   {} instr, {} data, {} code pages, {} data pages",
        q.instr, q.data, q.code_pages, q.data_pages
    );
    eprintln!(
        "lackey: {} instr, {} data, {} code pages, {} data pages",
        v.instr, v.data, v.code_pages, v.data_pages
    );
    assert!(within(q.instr as f64, v.instr as f64, 0.01), "instructions");
    assert!(
        within(q.code_pages as f64, v.code_pages as f64, 0.05),
        "code pages"
    );
    assert!(
        within(q.data_pages as f64, v.data_pages as f64, 0.05),
        "data pages"
    );
}
