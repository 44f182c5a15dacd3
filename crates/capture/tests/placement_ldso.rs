//! The placement library must not change what ld.so maps (docs/layout.md, "A
//! capture at Linux's addresses"). ld.so loads it with its minimal malloc,
//! which takes memory in 8K mmaps and holds two copies of the library's path;
//! with a long path python3's ld.so made a third 8K mmap that it does not make
//! natively, and every later mapping of the placed capture, the program's own
//! arenas among them, came 8K under the kernel's. Held to the kernel: python3
//! building a dict and a list (its arenas are placed) maps every region, ld.so's
//! and its own, at the address the kernel gives it under `setarch -R`. Checked
//! on Linux 6.18.44 with QEMU 7.2. Natively the program makes 226 mmaps (seven of them
//! 1M arenas) and 19 munmaps, whose addresses the kernel reuses; ten times the items took
//! 56 s under the capture instead of 7, checking the same placement on more of them.

mod common;

use pagelab_capture::Backend;
use pagelab_core::Event;
use std::process::Command;

const PYTHON: &str = "/usr/bin/python3";
const CODE: &str =
    "d={i:str(i) for i in range(20000)}; l=[x*2 for x in range(30000)]; print(len(d)+len(l))";

/// The mmap results of a native run under `setarch -R`, in order, or `None`
/// (the test skips, saying why).
fn native() -> Option<Vec<u64>> {
    let which = |t: &str| {
        let found = pagelab_capture::which(t.as_ref());
        if found.is_none() {
            eprintln!("SKIPPED: {t} is not installed");
        }
        found
    };
    let (setarch, strace) = (which("setarch")?, which("strace")?);
    if !std::path::Path::new(PYTHON).exists() {
        eprintln!("SKIPPED: {PYTHON} is not installed");
        return None;
    }
    let log = std::env::temp_dir().join(format!("pagelab-ldso-{}.log", std::process::id()));
    let out = Command::new(setarch)
        .args(["x86_64", "-R"])
        .arg(strace)
        .args(["-qq", "-e", "trace=mmap", "-o"])
        .arg(&log)
        .args([PYTHON, "-c", CODE])
        .output()
        .unwrap();
    if !out.status.success() {
        eprintln!("SKIPPED: setarch -R strace could not run {PYTHON}: {out:?}");
        return None;
    }
    let text = std::fs::read_to_string(&log).unwrap();
    std::fs::remove_file(&log).unwrap();
    Some(
        text.lines()
            .filter(|l| l.starts_with("mmap("))
            .filter_map(|l| l.rsplit_once(" = 0x"))
            .map(|(_, a)| u64::from_str_radix(a.trim(), 16).unwrap())
            .collect(),
    )
}

#[test]
fn a_placed_capture_maps_what_ld_so_maps_natively() {
    // cargo's LD_LIBRARY_PATH makes ld.so probe glibc-hwcaps directories, by
    // the host CPU's features natively and QEMU's under the capture, so its
    // own allocations differ (crates/capture/tests/relocate.rs). This test
    // is the binary's only one, so no other thread reads the environment.
    std::env::remove_var("LD_LIBRARY_PATH");
    if !common::available(Backend::Qemu) {
        return;
    }
    let Some(kernel) = native() else { return };
    let events = common::placed(PYTHON, &["-c".to_string(), CODE.to_string()]);
    // Each mmap is a request followed by its result; the library's own are
    // not in the relocated trace.
    let mut maps = Vec::new();
    let mut requested = false;
    for e in &events {
        match e {
            Event::MapRequest(_) => requested = true,
            Event::Map(m) if std::mem::take(&mut requested) => maps.push(m.start.0),
            _ => {}
        }
    }
    let hex = |v: &[u64]| v.iter().map(|a| format!("{a:#x}")).collect::<Vec<_>>();
    assert_eq!(
        hex(&maps),
        hex(&kernel),
        "mmap results of the placed capture (left) and the kernel's"
    );
}
