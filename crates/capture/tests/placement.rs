//! A capture placed at Linux's addresses (docs/layout.md, "A capture at
//! Linux's addresses"), held to the kernel: the project's placement test
//! program maps regions with `mmap` and writes where they went; natively
//! under `setarch -R` that is the kernel's placement, and under the
//! relocated capture (the placement library preloaded into QEMU's guest,
//! each mmap asking the model) the program must see the same addresses. Run
//! directly and exec'd by `sh -c` (the library reaches the exec'd program
//! through the guest's environment, never QEMU's own). Checked on Linux
//! 6.18.44 with QEMU 7.2.

mod common;

use pagelab_capture::Backend;
use pagelab_core::Event;
use std::path::{Path, PathBuf};
use std::process::Command;

/// An arena as CPython's, a 16K pool, a 2M and a 4M+4K region (THP
/// alignment), 256K.
const SIZES: [&str; 5] = ["1048576", "16384", "2097152", "4198400", "262144"];

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("pagelab-placement-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The program's addresses natively without randomisation, or `None` (the
/// test skips, saying why) where that cannot run.
fn native(program: &str, args: &[String]) -> Option<String> {
    if !common::available(Backend::Qemu) {
        return None;
    }
    let Some(setarch) = pagelab_capture::which("setarch".as_ref()) else {
        eprintln!("SKIPPED: setarch (util-linux) is not installed");
        return None;
    };
    let out = Command::new(setarch)
        .args(["x86_64", "-R", program])
        .args(args)
        .output()
        .unwrap();
    if !out.status.success() {
        eprintln!("SKIPPED: setarch -R could not run {program}: {out:?}");
        return None;
    }
    Some(String::new())
}

fn read(p: &Path) -> Vec<u64> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| u64::from_str_radix(l, 16).unwrap())
        .collect()
}

/// The program sees the kernel's addresses, and the relocated trace maps
/// them where the program saw them.
fn check(dir: &Path, program: &str, args: impl Fn(&Path) -> Vec<String>) {
    let (n, q) = (dir.join("native"), dir.join("captured"));
    if native(program, &args(&n)).is_none() {
        return;
    }
    let events = common::placed(program, &args(&q));
    let (kernel, seen) = (read(&n), read(&q));
    assert_eq!(kernel.len(), SIZES.len());
    let hex = |v: &[u64]| v.iter().map(|a| format!("{a:#x}")).collect::<Vec<_>>();
    assert_eq!(
        hex(&seen),
        hex(&kernel),
        "under the capture the program saw other addresses than natively"
    );
    for a in &seen {
        assert!(
            events
                .iter()
                .any(|e| matches!(e, Event::Map(m) if m.start.0 == *a)),
            "no mapping at {a:#x} in the relocated trace"
        );
    }
}

#[test]
fn a_placed_program_sees_linux_addresses() {
    let dir = scratch("direct");
    let prog = pagelab_capture::placeprog_path();
    check(&dir, prog.to_str().unwrap(), |out| {
        std::iter::once(out.display().to_string())
            .chain(SIZES.iter().map(|s| s.to_string()))
            .collect()
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_execed_program_is_placed_too() {
    let dir = scratch("exec");
    let prog = pagelab_capture::placeprog_path();
    check(&dir, "sh", |out| {
        vec![
            "-c".into(),
            format!("{} {} {}", prog.display(), out.display(), SIZES.join(" ")),
        ]
    });
    let _ = std::fs::remove_dir_all(&dir);
}
