//! The real sysfs: run only as root on a kernel with THP (skipped with a reason otherwise).
//! Each test holds the session lock, so they never overlap with other pagelab runs or tests.

use super::{size, snapshot};
use pagelab_core::PageSize;
use pagelab_lab::session::KnobSession;
use pagelab_lab::sysfs::{Knob, Sysfs, ThpMode};
use std::fs;

/// This machine's knobs when we are root and the kernel has THP; `None` (saying why) otherwise.
pub(super) fn real() -> Option<Sysfs> {
    Sysfs::host_for(&[])
        .map_err(|why| eprintln!("skipped: {why}"))
        .ok()
}

#[test]
fn real_configure_64k_always_then_restore() {
    let Some(sysfs) = real() else { return };
    let k64 = Knob::SizeEnabled(size("64K"));
    if !sysfs.thp_sizes().contains(&size("64K")) {
        eprintln!("skipped: this kernel has no 64K THP size");
        return;
    }
    let mut s = KnobSession::begin(&sysfs).unwrap(); // the lock keeps other runs out meanwhile
    let before = snapshot(&sysfs);
    s.configure(&[size("64K")], ThpMode::Always).unwrap();
    let raw = fs::read_to_string(k64.path(&sysfs)).unwrap();
    assert!(raw.contains("[always]"), "the kernel's file says {raw}");
    for p in sysfs.thp_sizes().into_iter().filter(|p| *p != size("64K")) {
        assert_eq!(sysfs.read(&Knob::SizeEnabled(p)).unwrap(), "never", "{p}");
    }
    s.restore().unwrap();
    assert_eq!(snapshot(&sysfs), before);
}

#[test]
fn real_hugetlb_pool_grows_and_goes_back() {
    let Some(sysfs) = real() else { return };
    if !sysfs.hugetlb_sizes().contains(&PageSize::M2) {
        eprintln!("skipped: no 2M hugetlb pool");
        return;
    }
    let knob = Knob::HugetlbPages(PageSize::M2);
    let mut s = KnobSession::begin(&sysfs).unwrap();
    let before: u64 = sysfs.read(&knob).unwrap().parse().unwrap();
    assert_eq!(
        s.grow_hugetlb(PageSize::M2, before + 4).unwrap(),
        before + 4
    );
    assert_eq!(sysfs.read(&knob).unwrap(), (before + 4).to_string());
    s.restore().unwrap();
    assert_eq!(sysfs.read(&knob).unwrap(), before.to_string());
}
