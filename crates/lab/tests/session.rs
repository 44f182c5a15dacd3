//! The knob session: set and restore on every exit path, the journal and its replay after
//! SIGKILL, the lock, configure's per-size outcome, on a fake tree; and on the real sysfs when
//! run as root with THP (skipped with a reason otherwise).

use pagelab_core::PageSize;
use pagelab_lab::session::{recover, KnobSession};
use pagelab_lab::sysfs::{Knob, Sysfs, ThpMode};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[path = "session/processes.rs"]
mod processes;
#[path = "session/real.rs"]
mod real;

#[path = "common/tree.rs"]
mod tree;
use tree::{fake_tree, THP_KB};

fn size(s: &str) -> PageSize {
    s.parse().unwrap()
}

fn journal(sysfs: &Sysfs) -> PathBuf {
    sysfs.state.join("journal.json")
}

/// Every knob's value, for comparing a tree before and after.
fn snapshot(sysfs: &Sysfs) -> Vec<(Knob, String)> {
    let mut knobs = vec![Knob::ThpEnabled, Knob::ThpDefrag, Knob::UseZeroPage];
    knobs.extend(sysfs.thp_sizes().into_iter().map(Knob::SizeEnabled));
    knobs.extend(sysfs.hugetlb_sizes().into_iter().map(Knob::HugetlbPages));
    knobs
        .into_iter()
        .map(|k| (k.clone(), sysfs.read(&k).unwrap()))
        .collect()
}

#[test]
fn fake_tree_sizes_and_host_info() {
    let dir = tempfile::tempdir().unwrap();
    let sysfs = fake_tree(dir.path());
    let want: Vec<PageSize> = THP_KB
        .iter()
        .map(|kb| PageSize::from_bytes(kb * 1024).unwrap())
        .collect();
    assert_eq!(
        sysfs.thp_sizes(),
        want,
        "8kB has no `enabled` and is skipped"
    );
    assert_eq!(sysfs.hugetlb_sizes(), vec![PageSize::M2, PageSize::G1]);
    assert_eq!(sysfs.read(&Knob::ThpEnabled).unwrap(), "madvise");
    assert_eq!(
        sysfs.read(&Knob::SizeEnabled(PageSize::M2)).unwrap(),
        "inherit"
    );
    let host = sysfs.host_info();
    assert_eq!(
        (host.kernel.as_str(), host.cpu.as_str(), host.cpus),
        ("6.18.0-fake", "Fake CPU", 2)
    );
    assert_eq!(host.memory_bytes, 24000000 * 1024);
    assert!(host.virtualized);
    sysfs.require_thp().unwrap();
    let bare = Sysfs::at(
        dir.path().join("none"),
        dir.path().join("s"),
        dir.path().join("p"),
    );
    let err = bare.require_thp().unwrap_err().to_string();
    assert!(
        err.contains("no transparent huge pages") && err.contains("CONFIG_TRANSPARENT_HUGEPAGE"),
        "{err}"
    );
    let err = KnobSession::begin(&bare).unwrap_err().to_string();
    assert!(err.contains("found no THP or hugetlb knobs"), "{err}");
}

#[test]
fn set_then_restore_puts_values_back_and_removes_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let sysfs = fake_tree(dir.path());
    let before = snapshot(&sysfs);
    let mut s = KnobSession::begin(&sysfs).unwrap();
    s.set(Knob::SizeEnabled(size("64K")), "always").unwrap();
    s.set(Knob::SizeEnabled(size("64K")), "madvise").unwrap();
    s.set(Knob::ThpDefrag, "never").unwrap();
    assert!(journal(&sysfs).exists(), "journal written before the knobs");
    let text = fs::read_to_string(journal(&sysfs)).unwrap();
    assert!(
        text.contains(&format!("\"pid\": {}", std::process::id())),
        "{text}"
    );
    assert_eq!(
        s.changes(),
        vec![
            (
                Knob::SizeEnabled(size("64K")),
                "never".into(),
                "madvise".into()
            ),
            (Knob::ThpDefrag, "madvise".into(), "never".into()),
        ],
        "first change saves, later ones do not"
    );
    s.restore().unwrap();
    assert_eq!(snapshot(&sysfs), before);
    assert!(!journal(&sysfs).exists());
}

#[test]
fn dropping_a_session_restores() {
    let dir = tempfile::tempdir().unwrap();
    let sysfs = fake_tree(dir.path());
    let before = snapshot(&sysfs);
    let early_return = || -> anyhow::Result<()> {
        let mut s = KnobSession::begin(&sysfs)?;
        s.set(Knob::ThpEnabled, "always")?;
        s.set(Knob::SizeEnabled(size("16K")), "bogus-but-fake-takes-it")?;
        anyhow::bail!("the run failed")
    };
    assert!(early_return().is_err());
    assert_eq!(snapshot(&sysfs), before);
    assert!(!journal(&sysfs).exists());
}

#[test]
fn a_panic_restores() {
    let dir = tempfile::tempdir().unwrap();
    let sysfs = fake_tree(dir.path());
    let before = snapshot(&sysfs);
    let r = std::panic::catch_unwind(|| {
        let mut s = KnobSession::begin(&sysfs).unwrap();
        s.configure(&[size("64K"), PageSize::M2], ThpMode::Always)
            .unwrap();
        assert_eq!(
            sysfs.read(&Knob::SizeEnabled(size("64K"))).unwrap(),
            "always"
        );
        panic!("a bug in the middle of a run");
    });
    assert!(r.is_err());
    assert_eq!(snapshot(&sysfs), before);
    assert!(!journal(&sysfs).exists());
}

#[test]
fn recover_leaves_a_live_sessions_journal_alone() {
    let dir = tempfile::tempdir().unwrap();
    let sysfs = fake_tree(dir.path());
    let mut s = KnobSession::begin(&sysfs).unwrap();
    s.set(Knob::ThpEnabled, "always").unwrap();
    let other = sysfs.clone();
    let seen = std::thread::spawn(move || recover(&other).unwrap())
        .join()
        .unwrap();
    assert_eq!(seen, None);
    assert!(journal(&sysfs).exists());
    assert_eq!(sysfs.read(&Knob::ThpEnabled).unwrap(), "always");
    s.restore().unwrap();
    assert_eq!(sysfs.read(&Knob::ThpEnabled).unwrap(), "madvise");
}

#[test]
fn a_second_session_waits_for_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let sysfs = fake_tree(dir.path());
    let mut first = KnobSession::begin(&sysfs).unwrap();
    first.set(Knob::ThpEnabled, "always").unwrap();
    let other = sysfs.clone();
    let waiter = std::thread::spawn(move || {
        let s = KnobSession::begin(&other).unwrap();
        let seen = other.read(&Knob::ThpEnabled).unwrap();
        s.restore().unwrap();
        seen
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !waiter.is_finished(),
        "the second session must wait for the lock"
    );
    first.restore().unwrap();
    assert_eq!(
        waiter.join().unwrap(),
        "madvise",
        "it got the knobs only after the restore"
    );
}

#[test]
fn a_value_the_kernel_does_not_keep_is_an_error_naming_knob_value_and_content() {
    let dir = tempfile::tempdir().unwrap();
    let sysfs = fake_tree(dir.path());
    let knob = Knob::SizeEnabled(size("32K"));
    fs::remove_file(knob.path(&sysfs)).unwrap();
    std::os::unix::fs::symlink("/dev/null", knob.path(&sysfs)).unwrap();
    let mut s = KnobSession::begin(&sysfs).unwrap();
    let err = s.set(knob, "always").unwrap_err().to_string();
    assert_eq!(
        err,
        "the kernel did not take transparent_hugepage/hugepages-32kB/enabled = always: it holds nothing"
    );
    s.restore().unwrap();
}

#[test]
fn an_unwritable_knob_is_refused_before_it_is_journaled() {
    // A read-only sysfs attribute cannot be opened for writing even by root.
    let real = Path::new("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size");
    if !real.exists() {
        eprintln!("skipped: {} is missing (no THP here)", real.display());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sysfs = fake_tree(dir.path());
    let knob = Knob::UseZeroPage;
    fs::remove_file(knob.path(&sysfs)).unwrap();
    std::os::unix::fs::symlink(real, knob.path(&sysfs)).unwrap();
    let mut s = KnobSession::begin(&sysfs).unwrap();
    let err = s.set(knob, "0").unwrap_err().to_string();
    assert!(
        err.starts_with("cannot change transparent_hugepage/use_zero_page: "),
        "{err}"
    );
    assert!(err.contains("root"), "{err}");
    assert!(s.changes().is_empty());
    assert!(!journal(&sysfs).exists());
    s.restore().unwrap();
}

#[test]
fn configure_sets_each_size_explicitly_and_the_top_level_for_glibc() {
    let dir = tempfile::tempdir().unwrap();
    let sysfs = fake_tree(dir.path());
    let before = snapshot(&sysfs);
    let mut s = KnobSession::begin(&sysfs).unwrap();
    let per_size = |sysfs: &Sysfs| -> Vec<String> {
        sysfs
            .thp_sizes()
            .into_iter()
            .map(|p| sysfs.read(&Knob::SizeEnabled(p)).unwrap())
            .collect()
    };
    s.configure(&[PageSize::K4, size("64K"), PageSize::M2], ThpMode::Madvise)
        .unwrap();
    assert_eq!(
        per_size(&sysfs),
        ["never", "never", "madvise", "never", "never", "never", "never", "madvise"]
    );
    assert_eq!(sysfs.read(&Knob::ThpEnabled).unwrap(), "madvise");
    s.configure(&[size("16K")], ThpMode::Always).unwrap();
    assert_eq!(
        per_size(&sysfs),
        ["always", "never", "never", "never", "never", "never", "never", "never"]
    );
    assert_eq!(sysfs.read(&Knob::ThpEnabled).unwrap(), "always");
    s.configure(&[PageSize::K4], ThpMode::Always).unwrap();
    assert!(per_size(&sysfs).iter().all(|v| v == "never"));
    assert_eq!(
        sysfs.read(&Knob::ThpEnabled).unwrap(),
        "never",
        "the 4K baseline"
    );
    let knobs: Vec<String> = s.changes().into_iter().map(|(k, _, _)| k.name()).collect();
    assert_eq!(
        knobs,
        [
            "transparent_hugepage/hugepages-64kB/enabled",
            "transparent_hugepage/hugepages-2048kB/enabled",
            "transparent_hugepage/enabled",
            "transparent_hugepage/hugepages-16kB/enabled",
        ],
        "only knobs whose value changed, in change order"
    );
    let err = s
        .configure(&[size("8K"), PageSize::G1], ThpMode::Always)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "8K, 1G are not a THP size of this kernel; its THP sizes are 16K, 32K, 64K, 128K, 256K, \
         512K, 1M, 2M (and 4K, the base page); 1G pages come only from a hugetlb pool"
    );
    s.restore().unwrap();
    assert_eq!(snapshot(&sysfs), before);
}

#[test]
fn hugetlb_pools_grow_and_unknown_sizes_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let sysfs = fake_tree(dir.path());
    let mut s = KnobSession::begin(&sysfs).unwrap();
    assert_eq!(s.grow_hugetlb(PageSize::G1, 2).unwrap(), 2);
    assert_eq!(sysfs.read(&Knob::HugetlbPages(PageSize::G1)).unwrap(), "2");
    let err = s.grow_hugetlb(size("32M"), 1).unwrap_err().to_string();
    assert_eq!(
        err,
        "this kernel has no 32M hugetlb pages; its hugetlb sizes are 2M, 1G"
    );
    s.restore().unwrap();
    assert_eq!(sysfs.read(&Knob::HugetlbPages(PageSize::G1)).unwrap(), "0");
}
