//! Programs a capture execs, relocated to Linux's layout and held to the
//! kernel: `sh -c` forks and execs `cat /proc/self/maps` (directly, and
//! through a `#!` script whose interpreter is sh again); natively under
//! `setarch -R` that cat prints where the kernel mapped it. The capture,
//! relocated (`Capture::spawn_relocatable`, `Relocated`), must name each
//! exec'd program in its exec record, give it a new address space, and put
//! every reference the exec'd cat makes inside a mapping the native cat
//! had (instruction fetches inside an executable one). Checked on Linux
//! 6.18 with QEMU 7.2. About 3 s per case in a debug build.

mod common;

use pagelab_capture::layout::LayoutParams;
use pagelab_capture::Relocated;
use pagelab_capture::{Backend, Capture, CaptureCommand, StdoutTo};
use pagelab_core::{Event, ThreadId};
use pagelab_trace::TraceSource;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

/// The ranges of a `/proc/PID/maps` text and whether each is executable.
fn maps(text: &str) -> Vec<(u64, u64, bool)> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (s, e) = w.next()?.split_once('-')?;
            let perms = w.next()?;
            let hex = |v| u64::from_str_radix(v, 16).ok();
            Some((hex(s)?, hex(e)?, perms.as_bytes().get(2) == Some(&b'x')))
        })
        .collect()
}

/// Runs `sh -c SCRIPT` natively without randomisation (as the model
/// places mappings) and under the relocated capture, where `SCRIPT` writes
/// cat's `/proc/self/maps` to the file it is given. Returns the native
/// maps and the relocated events.
fn run(dir: &Path, script: impl Fn(&Path) -> String) -> Option<(String, Vec<Event>)> {
    let setarch = pagelab_capture::which("setarch".as_ref())?;
    let native = dir.join("maps-n");
    let out = Command::new(setarch)
        .args(["x86_64", "-R", "sh", "-c"])
        .arg(script(&native))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let cmd = CaptureCommand {
        backend: Backend::Qemu,
        program: "sh".into(),
        args: vec!["-c".into(), script(&dir.join("maps-q")).into()],
        stdout: StdoutTo::Stderr,
    };
    let (cap, setup) = Capture::spawn_relocatable(&cmd, LayoutParams::default()).unwrap();
    let mut src = Relocated::new(cap, setup);
    let mut events = Vec::new();
    while src.fill(&mut events, 1 << 16).unwrap() {}
    let status = src.inner_mut().status().unwrap();
    assert_eq!(pagelab_capture::exit_code(status), 0);
    Some((std::fs::read_to_string(native).unwrap(), events))
}

/// Each exec's program path and the process it happened in.
fn execs(events: &[Event]) -> Vec<(u32, String)> {
    let mut pid = 0;
    let mut out = Vec::new();
    for e in events {
        match e {
            Event::Switch(ThreadId { pid: p, .. }) => pid = *p,
            Event::Exec(img) => {
                let img = img.as_ref().expect("the exec record names the program");
                out.push((pid, String::from_utf8_lossy(&img.path).into_owned()));
            }
            _ => {}
        }
    }
    out
}

/// Checks that every reference the process `pid` makes after its exec lies
/// in a mapping of `native`, instruction fetches in an executable one;
/// returns how many references were checked.
fn inside(events: &[Event], pid: u32, native: &[(u64, u64, bool)]) -> usize {
    let (mut cur, mut after, mut n) = (0, false, 0);
    for e in events {
        match e {
            Event::Switch(t) => cur = t.pid,
            Event::Exec(_) if cur == pid => after = true,
            Event::Ref(r) if cur == pid && after => {
                let a = r.addr.0;
                let hit = native.iter().find(|(s, e, _)| (*s..*e).contains(&a));
                let Some((_, _, x)) = hit else {
                    panic!(
                        "process {pid}: {r:?} lies in no mapping of the native run's {native:x?}"
                    )
                };
                assert!(
                    *x || !r.kind.is_instr(),
                    "process {pid}: instruction fetch {a:#x} in a mapping the kernel did not make executable"
                );
                n += 1;
            }
            _ => {}
        }
    }
    n
}

fn check(script: impl Fn(&Path) -> String, interpreters: usize) {
    if !common::available(Backend::Qemu) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some((native, events)) = run(dir.path(), script) else {
        eprintln!("SKIPPED: setarch is not installed");
        return;
    };
    let cat = std::fs::canonicalize("/bin/cat").unwrap();
    let sh = std::fs::canonicalize("/bin/sh").unwrap();
    let execs = execs(&events);
    let cats: Vec<u32> = execs
        .iter()
        .filter(|(_, p)| Path::new(p) == cat)
        .map(|e| e.0)
        .collect();
    let shells = execs.iter().filter(|(_, p)| Path::new(p) == sh).count();
    assert_eq!(cats.len(), 1, "{execs:?}");
    assert_eq!(shells, interpreters, "{execs:?}");
    let n = inside(&events, cats[0], &maps(&native));
    assert!(n > 10_000, "only {n} references of cat");
    eprintln!("{n} references of the exec'd cat lie where the kernel mapped cat's");
}

#[test]
fn an_exec_d_program_is_laid_out_as_the_kernel_lays_it_out() {
    // `; true`: sh forks and execs cat rather than exec'ing in its place.
    check(
        |out| format!("cat /proc/self/maps > {}; true", out.display()),
        0,
    );
}

#[test]
fn a_script_s_interpreter_is_laid_out_too() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("s");
    std::fs::write(&script, "#!/bin/sh\ncat /proc/self/maps > \"$1\"\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let s = script.display().to_string();
    check(move |out| format!("{s} {}; true", out.display()), 1);
}
