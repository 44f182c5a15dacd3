//! Child processes holding a session: SIGKILL leaves a journal that `recover` replays;
//! SIGINT, SIGTERM, SIGHUP and SIGQUIT are held so the session restores before exiting.

use super::{fake_tree, journal, size, snapshot};
use pagelab_lab::session::{interrupted, recover, KnobSession};
use pagelab_lab::sysfs::{Knob, Sysfs, ThpMode};
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Run only as the child of `a_sigkilled_session_is_restored_by_the_next_recover` and
/// `held_signals_let_the_session_restore`: opens a session on the fake tree in
/// `$PAGELAB_TEST_CHILD_ROOT`, changes knobs, then waits for a signal.
#[test]
#[ignore = "a child process of other tests"]
fn child_session() {
    let root = std::env::var_os("PAGELAB_TEST_CHILD_ROOT").expect("run by the parent tests only");
    let sysfs = Sysfs::at(
        Path::new(&root).join("mm"),
        Path::new(&root).join("state"),
        Path::new(&root).join("proc"),
    );
    let mut s = KnobSession::begin(&sysfs).unwrap();
    s.configure(&[size("64K")], ThpMode::Always).unwrap();
    fs::write(Path::new(&root).join("ready"), "").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if let Some(sig) = interrupted() {
            s.restore().unwrap();
            std::process::exit(100 + sig);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("no signal came");
}

/// Starts `child_session` on a fresh fake tree and waits until it has changed the knobs.
fn start_child(root: &Path) -> std::process::Child {
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "processes::child_session",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("PAGELAB_TEST_CHILD_ROOT", root)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
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
