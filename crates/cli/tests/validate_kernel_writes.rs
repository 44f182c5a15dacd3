//! `pagelab validate -- pagelab_testprog kwrites` on the real kernel (root and QEMU;
//! skipped with the reason elsewhere): a program whose first touch of fifteen fresh pages
//! is the kernel's writes (fstat, pipe2, uname, readv, clock_gettime, rt_sigaction's old
//! action, recvmsg, epoll_wait, getsockname, recvfrom), which it then loads and stores.
//! Natively each page takes one write fault, the kernel's. Before the capture recorded
//! those writes the model took each page as read first (a zero page, then a copy at the
//! store): 93 faults against the kernel's 78 (+19%). Now they agree (78 and 78) within 5%.

mod common;

use common::{pagelab, tmp};
use pagelab_report::validate::ValidateResult;

#[test]
fn the_kernels_writes_into_fresh_pages_fault_as_natively() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: not root: validate changes the THP knobs");
        return;
    }
    if let Err(e) = pagelab_capture::find_qemu() {
        eprintln!("skipped: {e}");
        return;
    }
    let dir = tmp("validate-kwrites");
    let json = dir.join("v.json");
    // One page size and THP mode: the program maps no large folio; the median of three
    // native runs.
    let mut cmd = pagelab();
    cmd.args([
        "validate", "--pages", "4K", "--thp", "madvise", "--repeat", "3",
    ]);
    cmd.args(["--tolerance", "5%", "--json"])
        .arg(&json)
        .arg("--");
    let out = cmd
        .args([
            pagelab_capture::testprog_path().into_os_string(),
            "kwrites".into(),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let r: ValidateResult = serde_json::from_str(&std::fs::read_to_string(&json).unwrap())
        .unwrap_or_else(|e| panic!("{e}\n{stdout}\n{stderr}"));
    assert_eq!(r.cases.len(), 1, "{stdout}");
    let c = &r.cases[0];
    eprintln!(
        "faults: model {}, kernel {}",
        c.model.faults, c.kernel.faults
    );
    assert_eq!(c.verdict, "agree", "{stdout}\n{stderr}");
    assert!(out.status.success(), "{stdout}\n{stderr}");
}
