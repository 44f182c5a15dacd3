//! Capture follows a program however it is started: a `#!` script runs its
//! interpreter, a program's exec is traced in the same trace with a new
//! address space (an `Exec` event), and a shell's fork then exec
//! (`sh -c 'a; b'`) is traced in both processes. Real programs: sh, env,
//! perl, python3 where installed. Each takes 1–4 s (Valgrind's Lackey is
//! the slow part: it runs shells only).

mod common;

use common::*;
use pagelab_capture::Backend;
use pagelab_core::{Event, ThreadId};
use std::collections::BTreeMap;

/// What happened to one process in a trace.
#[derive(Debug, Default, Clone)]
struct Life {
    /// References before the first exec, then after each exec.
    refs: Vec<u64>,
    /// Maps or program-break moves after the last exec.
    maps_after_exec: u64,
    forked_by: Option<u32>,
    exit: Option<i32>,
}

/// Each process's life, in the order they first appear.
fn lives(events: &[Event]) -> BTreeMap<u32, Life> {
    let mut out: BTreeMap<u32, Life> = BTreeMap::new();
    let mut cur = ThreadId::default();
    for e in events {
        match e {
            Event::Switch(t) => cur = *t,
            Event::Ref(_) => {
                let l = out.entry(cur.pid).or_default();
                if l.refs.is_empty() {
                    l.refs.push(0);
                }
                *l.refs.last_mut().unwrap() += 1;
            }
            Event::Exec(_) => {
                let l = out.entry(cur.pid).or_default();
                if l.refs.is_empty() {
                    l.refs.push(0);
                }
                l.refs.push(0);
                l.maps_after_exec = 0;
            }
            Event::Map(_) | Event::Brk { .. } => {
                out.entry(cur.pid).or_default().maps_after_exec += 1;
            }
            Event::Fork { child, .. } => out.entry(*child).or_default().forked_by = Some(cur.pid),
            Event::Exit { status } => out.entry(cur.pid).or_default().exit = Some(*status),
            _ => {}
        }
    }
    out
}

/// An executable file `name` in `dir` holding `text`.
fn script(dir: &tempfile::TempDir, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// Life of the process that ran `pid`'s program, or a failure naming the trace's processes.
fn life(lives: &BTreeMap<u32, Life>, pid: u32) -> &Life {
    lives
        .get(&pid)
        .unwrap_or_else(|| panic!("no process {pid} in {lives:?}"))
}

/// The root (the first process) and its life.
fn root(lives: &BTreeMap<u32, Life>, events: &[Event]) -> u32 {
    let first = events.iter().find_map(|e| match e {
        Event::Switch(t) => Some(t.pid),
        _ => None,
    });
    let pid = first.expect("the trace names a process");
    assert!(life(lives, pid).forked_by.is_none());
    pid
}

fn backends() -> Vec<Backend> {
    [Backend::Qemu, Backend::Valgrind]
        .into_iter()
        .filter(|b| available(*b))
        .collect()
}

#[test]
fn a_shell_s_fork_then_exec_is_traced_in_both_processes() {
    for backend in backends() {
        // dash and bash fork for `true` and exec the last command in place.
        let (ev, code) = capture(backend, "sh", &["-c", "/bin/true; exec /bin/echo x"], None);
        assert_eq!(code, 0, "{backend}");
        let lives = lives(&ev);
        let sh = root(&lives, &ev);
        let l = life(&lives, sh);
        // sh, then echo in its place: references on both sides of the exec.
        assert_eq!(l.refs.len(), 2, "{backend}: {l:?}");
        assert!(l.refs.iter().all(|&n| n > 10_000), "{backend}: {l:?}");
        assert!(l.maps_after_exec > 0 || backend == Backend::Valgrind);
        assert_eq!(l.exit, Some(0), "{backend}");
        // The child: forked by sh, exec'd true, which ran and exited.
        let children: Vec<_> = lives
            .iter()
            .filter(|(_, l)| l.forked_by == Some(sh))
            .collect();
        assert_eq!(children.len(), 1, "{backend}: {lives:?}");
        let c = children[0].1;
        assert_eq!(c.refs.len(), 2, "{backend}: {c:?}");
        assert!(c.refs[1] > 10_000, "{backend}: true ran traced: {c:?}");
        assert_eq!(c.exit, Some(0), "{backend}");
    }
}

#[test]
fn scripts_and_exec_chains_are_followed_to_the_program_they_run() {
    let Some(perl) = pagelab_capture::which("perl".as_ref()) else {
        eprintln!("SKIPPED: perl not installed");
        return;
    };
    // A shim as pyenv writes them: env finds sh, sh runs a script whose
    // interpreter is perl (under Valgrind, whose Lackey takes half a minute
    // for perl, sh), which exits with the code it was given.
    let dir = tempfile::tempdir().unwrap();
    let perl_script = script(
        &dir,
        "inner.pl",
        &format!(
            "#!{} -w\nmy $s = 0; $s += $_ for 1..20000; exit($ARGV[0]);\n",
            perl.display()
        ),
    );
    let sh_script = script(&dir, "inner.sh", "#!/bin/sh\nexit $1\n");
    for backend in backends() {
        let inner = match backend {
            Backend::Qemu => &perl_script,
            Backend::Valgrind => &sh_script,
        };
        let shim = script(
            &dir,
            "shim",
            &format!("#!/usr/bin/env sh\nexec {} \"$@\"\n", inner.display()),
        );
        let (ev, code) = capture(backend, shim.to_str().unwrap(), &["7"], None);
        assert_eq!(code, 7, "{backend}: the last program's exit code");
        let lives = lives(&ev);
        let pid = root(&lives, &ev);
        let l = life(&lives, pid);
        // env, then sh, then perl (or sh): three programs in one process.
        assert_eq!(l.refs.len(), 3, "{backend}: {l:?}");
        assert!(l.refs.iter().all(|&n| n > 1000), "{backend}: {l:?}");
        if backend == Backend::Qemu {
            assert!(l.refs[2] > 1_000_000, "perl ran traced: {l:?}");
        }
        assert_eq!(l.exit, Some(7), "{backend}");
    }
}

#[test]
fn a_python_script_runs_python() {
    // Debian's python3 (an ELF file): a shell shim in front of it, such as
    // pyenv's, is followed too (the test above) but takes a minute of QEMU.
    let python = std::path::Path::new("/usr/bin/python3");
    if !python.exists() || !available(Backend::Qemu) {
        eprintln!("SKIPPED: /usr/bin/python3 or QEMU is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let prog = script(
        &dir,
        "prog.py",
        "#!/usr/bin/python3 -S\nimport sys\nd = {i: str(i) for i in range(2000)}\nsys.exit(4)\n",
    );
    let (ev, code) = capture(Backend::Qemu, prog.to_str().unwrap(), &[], None);
    assert_eq!(code, 4);
    let lives = lives(&ev);
    let l = life(&lives, root(&lives, &ev));
    assert_eq!(l.refs.len(), 1, "no exec: the kernel runs python directly");
    assert!(l.refs[0] > 1_000_000, "python ran traced: {l:?}");
}

/// Python's subprocess closes every descriptor in the child before exec,
/// the trace's output with them: that child's program must still run (once
/// it failed, QEMU's plugin refusing to start), untraced; posix_spawn keeps
/// them, and its child is followed through the exec.
#[test]
fn a_child_that_closed_every_descriptor_still_runs() {
    let python = std::path::Path::new("/usr/bin/python3");
    if !python.exists() || !available(Backend::Qemu) {
        eprintln!("SKIPPED: /usr/bin/python3 or QEMU is not installed");
        return;
    }
    let code = "import os, subprocess\n\
                subprocess.run(['/bin/true'], check=True)\n\
                pid = os.posix_spawn('/bin/true', ['/bin/true'], {})\n\
                assert os.waitpid(pid, 0)[1] == 0\n";
    let (ev, status) = capture(Backend::Qemu, "/usr/bin/python3", &["-S", "-c", code], None);
    assert_eq!(status, 0, "both children ran and exited 0");
    let lives = lives(&ev);
    let py = root(&lives, &ev);
    let spawned: Vec<_> = lives
        .values()
        .filter(|l| l.forked_by == Some(py) && l.refs.len() == 2 && l.refs[1] > 10_000)
        .collect();
    assert_eq!(
        spawned.len(),
        1,
        "the posix_spawn child, traced through its exec: {lives:?}"
    );
}
