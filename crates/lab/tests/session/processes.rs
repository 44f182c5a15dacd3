//! Child processes holding a session: SIGKILL leaves a journal that `recover` replays;
//! SIGINT, SIGTERM, SIGHUP and SIGQUIT are held so the session restores before exiting.

use super::{fake_tree, journal, size, snapshot};
use pagelab_lab::session::{interrupted, recover, KnobSession};
use pagelab_lab::sysfs::{Knob, Sysfs, ThpMode};
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Run only as the child of the tests below, on the fake tree in `$PAGELAB_TEST_CHILD_ROOT`,
/// doing what `$PAGELAB_TEST_CHILD_MODE` says: `hold` opens a session, changes knobs and waits
/// for a signal; `begin` opens a session (waiting for the lock) and restores it;
/// `forget` does as `hold` but forgets the session (it never restores, and its lock stays held
/// until the process ends); `real-hold` does as `hold` on this machine's real knobs
/// (the parent has checked root and THP); `unprivileged` checks the errors a user who may not write the knobs gets.
#[test]
#[ignore = "a child process of other tests"]
fn child_session() {
    let root = std::env::var_os("PAGELAB_TEST_CHILD_ROOT").expect("run by the parent tests only");
    let root = Path::new(&root);
    let mode = std::env::var("PAGELAB_TEST_CHILD_MODE").unwrap_or_default();
    let sysfs = if mode == "real-hold" {
        Sysfs::host()
    } else {
        Sysfs::at(root.join("mm"), root.join("state"), root.join("proc"))
    };
    match mode.as_str() {
        "begin" => {
            KnobSession::begin(&sysfs).unwrap().restore().unwrap();
            return;
        }
        "unprivileged" => {
            let err = format!("{:#}", KnobSession::begin(&sysfs).unwrap_err());
            let knob = Knob::ThpEnabled.path(&sysfs);
            let want = format!(
                "pagelab must change the kernel's page-size settings for this, but {} can only \
                 be written by root (Permission denied (os error 13)): run pagelab as root, e.g. \
                 `sudo pagelab ...`",
                knob.display()
            );
            assert_eq!(err, want);
            let err = format!("{:#}", recover(&sysfs).unwrap_err());
            assert!(err.starts_with("pagelab (pid "), "{err}");
            assert!(
                err.contains("left 3 kernel setting(s) changed: ")
                    && err.contains("transparent_hugepage/hugepages-64kB/enabled (to never)")
                    && err.contains("run pagelab as root"),
                "{err}"
            );
            return;
        }
        _ => {}
    }
    let forget = mode == "forget";
    let mut s = KnobSession::begin(&sysfs).unwrap();
    s.configure(&[size("64K")], ThpMode::Always).unwrap();
    if mode == "flip" {
        // A second configuration puts 64K back to its saved `never`, and a program runs that
        // (unlike pagelab's) has no parent-death signal.
        s.configure(&[size("16K")], ThpMode::Always).unwrap();
        // Never waited for: it must outlive this process, as a program left by a killed
        // pagelab does.
        #[allow(clippy::zombie_processes)]
        let prog = Command::new("sleep").arg("60").spawn().unwrap();
        s.note_program(prog.id(), "sleep").unwrap();
        fs::write(root.join("program"), prog.id().to_string()).unwrap();
    }
    let mut s = Some(s);
    if forget {
        let mut s = s.take().unwrap();
        s.grow_hugetlb(pagelab_core::PageSize::M2, 8).unwrap();
        std::mem::forget(s);
    }
    fs::write(root.join("ready"), "").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Some(sig) = interrupted() {
            if let Some(s) = s {
                s.restore().unwrap();
            }
            std::process::exit(100 + sig);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("no signal came");
}

/// The child test process in `mode` on the fake tree at `root` (see [`ran`]).
fn child(root: &Path, mode: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "processes::child_session",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("PAGELAB_TEST_CHILD_ROOT", root)
    .env("PAGELAB_TEST_CHILD_MODE", mode)
    .stdout(Stdio::piped());
    cmd
}

/// Whether the child really ran `child_session` (a filter matching nothing also succeeds).
fn ran(out: &std::process::Output) -> bool {
    String::from_utf8_lossy(&out.stdout).contains("test result: ok. 1 passed")
}

/// Starts `child_session` holding a session on a fresh fake tree and waits until it has
/// changed the knobs.
fn start_child(root: &Path) -> std::process::Child {
    start_child_in(root, "hold")
}

/// Starts `child_session` in `mode` and waits until it has changed the knobs.
fn start_child_in(root: &Path, mode: &str) -> std::process::Child {
    let child = child(root, mode).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !root.join("ready").exists() {
        assert!(
            Instant::now() < deadline,
            "the child never changed the knobs"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

#[test]
fn a_sigkilled_session_is_restored_by_the_next_recover() {
    let dir = tempfile::tempdir().unwrap();
    let sysfs = fake_tree(dir.path());
    let before = snapshot(&sysfs);
    let mut child = start_child(dir.path());
    assert_eq!(
        recover(&sysfs).unwrap(),
        None,
        "the child is alive and holds the lock"
    );
    assert_eq!(
        sysfs.read(&Knob::SizeEnabled(size("64K"))).unwrap(),
        "always"
    );
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    assert!(
        journal(&sysfs).exists() && sysfs.state.join("lock").exists(),
        "a stale lock file stays"
    );
    let msg = recover(&sysfs)
        .unwrap()
        .expect("the killed child's journal");
    let pid = child.id();
    assert!(
        msg.starts_with(&format!(
            "pagelab: restored 3 settings left changed by pagelab (pid {pid}, killed): "
        )),
        "{msg}"
    );
    assert!(
        msg.contains("transparent_hugepage/hugepages-64kB/enabled always -> never"),
        "{msg}"
    );
    assert_eq!(snapshot(&sysfs), before);
    assert!(!journal(&sysfs).exists());
}

#[test]
fn a_forgotten_session_is_replayed_by_recover_once_its_owner_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let sysfs = fake_tree(dir.path());
    let before = snapshot(&sysfs);
    let mut child = start_child_in(dir.path(), "forget");
    let held = recover(&sysfs).unwrap();
    assert_eq!(held, None, "its lock is still held: the owner is alive");
    let k64 = Knob::SizeEnabled(size("64K"));
    assert_eq!(sysfs.read(&k64).unwrap(), "always");
    // SAFETY: signalling our own child, which exits without restoring (its session is forgotten).
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(child.wait().unwrap().code(), Some(100 + libc::SIGTERM));
    let msg = recover(&sysfs).unwrap().expect("a journal to replay");
    let pid = child.id();
    let head =
        format!("pagelab: restored 4 settings left changed by pagelab (pid {pid}, killed): ");
    assert!(msg.starts_with(&head), "{msg}");
    for part in [
        "hugepages/hugepages-2048kB/nr_hugepages 8 -> 0",
        "transparent_hugepage/hugepages-64kB/enabled always -> never",
        "transparent_hugepage/hugepages-2048kB/enabled never -> inherit",
        "transparent_hugepage/enabled always -> madvise",
    ] {
        assert!(msg.contains(part), "{part} missing from {msg}");
    }
    let pools = msg.find("nr_hugepages").unwrap();
    assert!(
        pools < msg.find("hugepages-64kB").unwrap(),
        "pools first: {msg}"
    );
    assert_eq!(snapshot(&sysfs), before);
    assert!(!journal(&sysfs).exists());
    assert_eq!(recover(&sysfs).unwrap(), None, "nothing left to do");
}

#[test]
fn held_signals_let_the_session_restore() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT] {
        let dir = tempfile::tempdir().unwrap();
        let sysfs = fake_tree(dir.path());
        let before = snapshot(&sysfs);
        let mut child = start_child(dir.path());
        // SAFETY: signalling our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        let status = child.wait().unwrap();
        assert_eq!(
            status.code(),
            Some(100 + sig),
            "signal {sig} was held, not fatal: {status:?}"
        );
        assert_eq!(snapshot(&sysfs), before, "after signal {sig}");
        assert!(!journal(&sysfs).exists());
    }
}

#[test]
fn a_waiting_session_names_the_holder_once() {
    let dir = tempfile::tempdir().unwrap();
    let sysfs = fake_tree(dir.path());
    let mut held = KnobSession::begin(&sysfs).unwrap();
    held.set(Knob::ThpEnabled, "always").unwrap();
    let waiter = child(dir.path(), "begin")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    held.restore().unwrap();
    let out = waiter.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && ran(&out), "{stderr}");
    let line = format!(
        "pagelab: waiting for pagelab (pid {}), which holds the knobs ({})",
        std::process::id(),
        sysfs.state.join("lock").display()
    );
    assert_eq!(stderr.matches(&line).count(), 1, "{stderr}");
}

#[test]
fn without_permission_begin_and_recover_say_to_run_as_root() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to start a child as an unprivileged user");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sysfs = fake_tree(dir.path());
    let before = snapshot(&sysfs);
    let mut holder = start_child(dir.path());
    // SAFETY: signalling our own child.
    unsafe { libc::kill(holder.id() as i32, libc::SIGKILL) };
    holder.wait().unwrap();
    // Let `nobody` in to read the tree (it is root's, 0644 files), not to write it.
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    use std::os::unix::process::CommandExt;
    let out = child(dir.path(), "unprivileged")
        .uid(65534)
        .gid(65534)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        journal(&sysfs).exists(),
        "the unprivileged recover left it in place"
    );
    assert!(recover(&sysfs).unwrap().is_some());
    assert_eq!(snapshot(&sysfs), before);
}

#[test]
fn a_sigkilled_session_on_the_real_knobs_is_restored() {
    let Some(sysfs) = super::real::real() else {
        return;
    };
    if !sysfs.thp_sizes().contains(&size("64K")) {
        eprintln!("skipped: this kernel has no 64K THP size");
        return;
    }
    // Knobs at rest (no session open, no journal) are the same before and after any session,
    // so compare them under the lock, whatever other pagelab runs do meanwhile.
    let at_rest = || {
        let s = KnobSession::begin(&sysfs).unwrap();
        let knobs = snapshot(&sysfs);
        s.restore().unwrap();
        knobs
    };
    let before = at_rest();
    let dir = tempfile::tempdir().unwrap();
    let mut child = start_child_in(dir.path(), "real-hold");
    let k64 = Knob::SizeEnabled(size("64K"));
    assert_eq!(
        sysfs.read(&k64).unwrap(),
        "always",
        "the child configured 64K"
    );
    assert!(journal(&sysfs).exists());
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    // Another pagelab may replay the journal first (every command calls recover); either way
    // the knobs must end up as they were.
    if let Some(msg) = recover(&sysfs).unwrap() {
        let pid = child.id();
        assert!(msg.contains(&format!("(pid {pid}, killed)")), "{msg}");
        assert!(
            msg.contains("transparent_hugepage/hugepages-64kB/enabled always -> never"),
            "{msg}"
        );
    }
    assert_eq!(at_rest(), before);
}

/// Whether process `pid` has ended (gone, or a zombie waiting for its new parent to reap it),
/// waiting up to 5 s for it to.
fn ended(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(')')
            .map(|(_, r)| r.trim_start().chars().next());
        if stat.is_empty() || state == Some(Some('Z')) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Regressions: recovery listed knobs already back at their saved value (`never -> never`),
/// and said nothing of the program a SIGKILLed pagelab left running.
#[test]
fn recovery_lists_only_real_changes_and_ends_the_left_program() {
    let dir = tempfile::tempdir().unwrap();
    let sysfs = fake_tree(dir.path());
    let before = snapshot(&sysfs);
    let mut child = start_child_in(dir.path(), "flip");
    let prog: u32 = fs::read_to_string(dir.path().join("program"))
        .unwrap()
        .parse()
        .unwrap();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    assert!(
        fs::read_to_string(format!("/proc/{prog}/stat")).is_ok(),
        "the program outlived its pagelab"
    );
    let msg = recover(&sysfs).unwrap().expect("a journal to replay");
    let pid = child.id();
    assert!(!msg.contains("never -> never"), "a no-op is listed: {msg}");
    assert!(
        !msg.contains("hugepages-64kB"),
        "64K was back at its saved value: {msg}"
    );
    assert!(
        msg.starts_with(&format!(
            "pagelab: restored 3 settings left changed by pagelab (pid {pid}, killed): "
        )) && msg.contains("transparent_hugepage/hugepages-16kB/enabled always -> never"),
        "{msg}"
    );
    assert!(
        msg.ends_with(&format!(
            "; ended `sleep` (pid {prog}), the program it was measuring, which was still running"
        )),
        "{msg}"
    );
    assert!(ended(prog), "the program {prog} still runs");
    assert_eq!(snapshot(&sysfs), before);
}
