//! End-to-end tests of `pagelab capture` and of `study`/`sim -- PROGRAM`:
//! real programs under both backends, exit statuses, Ctrl-C, windows, and
//! the message when a backend is missing. Tests that need qemu or valgrind
//! skip, saying why, when it is not installed (scripts/setup.sh installs both).

mod common;

use common::{pagelab, succeeded, tmp};

use pagelab_capture::Backend;
use pagelab_core::{Event, VirtAddr};
use pagelab_trace::TraceSource;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

fn testprog() -> PathBuf {
    pagelab_capture::testprog_path()
}

fn available(backend: Backend) -> bool {
    let found = match backend {
        Backend::Qemu => pagelab_capture::find_qemu().map(|_| ()),
        Backend::Valgrind => pagelab_capture::find_valgrind().map(|_| ()),
    };
    if let Err(e) = &found {
        eprintln!("SKIPPED: {e}");
    }
    found.is_ok()
}

fn events(path: &Path) -> Vec<Event> {
    let mut src = pagelab_trace::open(path.to_str().unwrap(), None).unwrap();
    let mut v = Vec::new();
    while src.fill(&mut v, 1 << 16).unwrap() {}
    v
}

/// The data pages touched in the region named by the test program's output line.
fn region_pages(events: &[Event], stdout: &str) -> BTreeSet<u64> {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("region 0x"))
        .unwrap_or_else(|| panic!("no region line in {stdout:?}"));
    let mut f = line.split_whitespace();
    let start = u64::from_str_radix(f.next().unwrap(), 16).unwrap();
    let len: u64 = f.next().unwrap().parse().unwrap();
    events
        .iter()
        .filter_map(|e| match e {
            Event::Ref(r)
                if !r.kind.is_instr()
                    && r.addr >= VirtAddr(start)
                    && r.addr < VirtAddr(start + len) =>
            {
                Some((r.addr - VirtAddr(start)) / 4096)
            }
            _ => None,
        })
        .collect()
}

const TOUCHED: [u64; 6] = [0, 1, 5, 17, 40, 63];

fn capture(backend: Backend, dir: &Path, args: &[&str]) -> (Output, Vec<Event>) {
    let trace = dir.join(format!("{backend}.trace"));
    let out = pagelab()
        .args(["capture", "--backend", &backend.to_string(), "-o"])
        .arg(&trace)
        .arg("--")
        .arg(testprog())
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    (out, events(&trace))
}

#[test]
fn capture_writes_a_native_trace_of_exactly_the_touched_pages() {
    let dir = tmp("touch");
    for backend in [Backend::Qemu, Backend::Valgrind] {
        if !available(backend) {
            continue;
        }
        let (out, ev) = capture(backend, &dir, &["touch"]);
        succeeded(&out);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(region_pages(&ev, &stdout), TOUCHED.into_iter().collect());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("captured"), "{stderr}");
        if backend == Backend::Qemu {
            assert!(ev
                .iter()
                .any(|e| matches!(e, Event::Map(m) if m.len == 64 * 4096)));
        }
    }
}

#[test]
fn exit_status_is_mirrored_and_a_crash_leaves_a_valid_trace() {
    let dir = tmp("status");
    for backend in [Backend::Qemu, Backend::Valgrind] {
        if !available(backend) {
            continue;
        }
        let (out, ev) = capture(backend, &dir, &["exit", "3"]);
        assert_eq!(out.status.code(), Some(3), "{backend}");
        assert!(matches!(ev.last(), Some(Event::Exit { status: 3 })));
        let (out, ev) = capture(backend, &dir, &["crash"]);
        assert_eq!(out.status.code(), Some(139), "{backend}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(region_pages(&ev, &stdout), TOUCHED.into_iter().collect());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("the trace holds what ran"), "{stderr}");
    }
}

#[test]
fn a_missing_backend_says_what_to_install() {
    let out = pagelab()
        .args(["capture", "-o", "/dev/null", "--"])
        .arg(testprog())
        .env("PAGELAB_QEMU", "/nonexistent/qemu-x86_64")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("/nonexistent/qemu-x86_64 not found")
            && err.contains("apt-get install qemu-user"),
        "{err}"
    );
    let out = pagelab()
        .args(["sim", "--backend", "valgrind", "--"])
        .arg(testprog())
        .env("PAGELAB_VALGRIND", "no-such-valgrind")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("apt-get install valgrind"), "{err}");
    let out = pagelab()
        .args(["capture", "-o", "/dev/null", "--", "no-such-program-xyz"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no-such-program-xyz: not found in PATH"),
        "{err}"
    );
}

fn json_refs(path: &Path) -> u64 {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v["refs"]["instr"].as_u64().unwrap() + v["refs"]["data"].as_u64().unwrap()
}

#[test]
fn study_and_sim_run_a_program_on_the_fly_and_windows_cut_any_input() {
    if !available(Backend::Qemu) {
        return;
    }
    let dir = tmp("onthefly");
    let out = pagelab()
        .args(["study", "-o"])
        .arg(dir.join("study"))
        .arg("--")
        .arg(testprog())
        .output()
        .unwrap();
    succeeded(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("4K"));
    assert!(dir.join("study/result.json").exists());

    let (_, ev) = capture(Backend::Qemu, &dir, &["touch"]);
    let total = ev.iter().filter(|e| matches!(e, Event::Ref(_))).count() as u64;
    let trace = dir.join("qemu.trace");
    let json = dir.join("w.json");
    let out = pagelab()
        .args(["sim", "--skip", "100", "--limit", "1000", "--json"])
        .arg(&json)
        .arg("--trace")
        .arg(&trace)
        .output()
        .unwrap();
    succeeded(&out);
    assert_eq!(json_refs(&json), 1000);
    let out = pagelab()
        .args(["sim", "--skip", &(total - 10).to_string(), "--json"])
        .arg(&json)
        .arg("--trace")
        .arg(&trace)
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(json_refs(&json), 10);

    // A limit stops a long program early and leaves nothing running.
    let start = Instant::now();
    let out = pagelab()
        .args(["sim", "--limit", "200000", "--json"])
        .arg(&json)
        .arg("--")
        .arg(testprog())
        .args(["sleep", "60"])
        .output()
        .unwrap();
    succeeded(&out);
    assert_eq!(json_refs(&json), 200000);
    assert!(start.elapsed() < Duration::from_secs(30));
    assert!(survivors("sleep 60").is_empty());
}

/// Processes still running the test program with these arguments.
fn survivors(args: &str) -> Vec<String> {
    std::thread::sleep(Duration::from_millis(200));
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains("pagelab_testprog") && cmd.contains(args) {
            found.push(cmd);
        }
    }
    found
}

/// Ctrl-C (and SIGTERM: once every interrupt exited 130) exits 128 + the signal,
/// as a shell reports a program that signal ended.
#[test]
fn an_interrupt_stops_the_program_exits_128_plus_it_and_leaves_a_valid_trace() {
    let dir = tmp("ctrlc");
    for (backend, sig) in [
        (Backend::Qemu, libc::SIGTERM),
        (Backend::Valgrind, libc::SIGINT),
    ] {
        if !available(backend) {
            continue;
        }
        let trace = dir.join(format!("{backend}.trace"));
        let secs = format!("{}", 45 + backend as u32);
        let child = pagelab()
            .args(["capture", "--backend", &backend.to_string(), "-o"])
            .arg(&trace)
            .arg("--")
            .arg(testprog())
            .args(["fork", "sleep", &secs])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(2500));
        // SAFETY: `kill` takes plain integers; the child is ours and not yet waited for.
        unsafe { libc::kill(child.id() as i32, sig) };
        let start = Instant::now();
        let out = child.wait_with_output().unwrap();
        assert!(start.elapsed() < Duration::from_secs(20));
        assert_eq!(
            out.status.code(),
            Some(128 + sig),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ev = events(&trace);
        assert!(ev.iter().filter(|e| matches!(e, Event::Ref(_))).count() > 1000);
        assert!(survivors(&format!("sleep {secs}")).is_empty(), "{backend}");
    }
}

/// An executable the backend cannot start: a capture that recorded nothing
/// is an error saying why, and leaves no trace file (once: zeros, exit 0).
#[test]
fn a_capture_that_recorded_no_reference_is_an_error() {
    use std::os::unix::fs::PermissionsExt;
    let d = tmp("nothing");
    // An ELF header for arm64: neither backend can run it (a file that is
    // not ELF at all would be run by /bin/sh, as execve's callers do).
    let junk = d.join("junk");
    let mut elf = b"\x7fELF\x02\x01\x01".to_vec();
    elf.resize(16, 0);
    for (v, n) in [
        (2u64, 2),
        (0xb7, 2),
        (1, 4),
        (0x40_0000, 8),
        (64, 8),
        (0, 8),
        (0, 4),
    ] {
        elf.extend_from_slice(&v.to_le_bytes()[..n]);
    }
    for v in [64u16, 56, 0, 64, 0, 0] {
        elf.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(&junk, elf).unwrap();
    // A script whose interpreter is missing: neither can run it either.
    let script = d.join("script.sh");
    std::fs::write(&script, "#!/nonexistent/sh\nexec true\n").unwrap();
    for p in [&junk, &script] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for backend in [Backend::Valgrind, Backend::Qemu] {
        if !available(backend) {
            continue;
        }
        for program in [&junk, &script] {
            let out_file = d.join("out.trace");
            let o = pagelab()
                .args(["capture", "--backend", &backend.to_string(), "-o"])
                .arg(&out_file)
                .arg("--")
                .arg(program)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(
                o.status.code(),
                Some(1),
                "{backend} {}: {err}",
                program.display()
            );
            if program.ends_with("script.sh") {
                assert!(err.contains("`#!` script"), "{err}");
                assert!(err.contains("interpreter"), "{err}");
            } else {
                assert!(err.contains("recorded no reference"), "{err}");
            }
            assert!(!out_file.exists(), "{backend}: a trace file was left");
            let o = pagelab()
                .args(["sim", "--backend", &backend.to_string(), "--"])
                .arg(program)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{err}");
            // In Linux's layout (the qemu default) the ELF file is read
            // first, and its machine refused by name.
            assert!(
                err.contains("`#!` script")
                    || err.contains("recorded no reference")
                    || err.contains("is not x86-64"),
                "{err}"
            );
        }
    }
}
