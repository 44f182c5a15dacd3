//! The folios each process maps at its exit, read from the kernel (`pagemap`, `kpageflags`,
//! at a `ptrace` exit stop), against what a test program of our own touched: under 64K THP
//! in always mode, each 64K block it writes is one 64K folio. The program's own start-up
//! (its stack, libc's data) takes folios too, so each case is measured against the same
//! program touching nothing, without address-space randomisation so that both lay out
//! alike. Root and a kernel with 64K THP are needed (skipped with the reason otherwise);
//! the knobs are restored by the session. Checked on Linux 6.18.

use pagelab_core::PageSize;
use pagelab_lab::measure::{measure, Host, EXIT_ANON_FOLIOS, EXIT_PROCESSES};
use pagelab_lab::runner::RunSpec;
use pagelab_lab::session::KnobSession;
use pagelab_lab::sysfs::{Sysfs, ThpMode};

/// 64K, the size the test program's blocks take.
fn k64() -> PageSize {
    PageSize::from_shift(16).expect("64K is a page size")
}

/// This machine's knobs when we are root and the kernel has 64K THP; `None` (saying why).
fn real() -> Option<Sysfs> {
    Sysfs::host_for(&[k64()])
        .map_err(|why| eprintln!("skipped: {why}"))
        .ok()
}

/// The 64K anonymous folios mapped at exit, summed over the processes, and how many
/// processes were read, of one run of the test program with `args`.
fn at_exit(sysfs: &Sysfs, args: &[&str]) -> (u64, u64) {
    let mut argv = vec![env!("PAGELAB_FOLIO_TOUCH").into()];
    argv.extend(args.iter().map(Into::into));
    let spec = RunSpec {
        argv,
        env: Vec::new(),
        capture_stdout: false,
        no_randomize: true,
        folios_at_exit: true,
    };
    let out = measure(&mut Host::new(sysfs), &spec, &mut |_| Ok(())).unwrap();
    assert_eq!(out.measurement.exit.code, Some(0), "{args:?}");
    let m = &out.measurement.metrics;
    let folios = m.get(&format!("{EXIT_ANON_FOLIOS}/64K")).copied();
    let processes = m.get(EXIT_PROCESSES).copied().expect("processes read");
    (folios.unwrap_or(0.0) as u64, processes as u64)
}

/// Runs `cases` (each: the program's arguments, the folios expected beyond `base`'s, the
/// processes expected) under 64K THP in always mode.
fn check(base: &[&str], cases: &[(&[&str], u64, u64)]) {
    let Some(sysfs) = real() else { return };
    let mut session = KnobSession::begin(&sysfs).unwrap();
    session.configure(&[k64()], ThpMode::Always).unwrap();
    let (start, processes) = at_exit(&sysfs, base);
    let got: Vec<(u64, u64)> = cases.iter().map(|(a, _, _)| at_exit(&sysfs, a)).collect();
    session.restore().unwrap();
    for ((args, more, procs), (folios, p)) in cases.iter().zip(got) {
        assert_eq!(p, *procs, "{args:?}: processes read at exit");
        assert_eq!(
            procs, &processes,
            "{args:?} and {base:?} run as many processes"
        );
        assert_eq!(
            folios,
            start + more,
            "{args:?}: 64K folios at exit, {start} with {base:?}"
        );
    }
}

#[test]
fn each_touched_64k_block_is_one_folio_at_exit() {
    check(&["0"], &[(&["5"], 5, 1), (&["40"], 40, 1)]);
}

#[test]
fn a_forked_child_is_read_at_its_own_exit() {
    // The child maps the parent's 12 folios (shared since the fork) and its own 7.
    check(&["0", "0"], &[(&["12", "7"], 12 + 12 + 7, 2)]);
}

#[test]
fn a_partly_unmapped_folio_is_still_one_folio_at_exit() {
    // 2 × 6 folios, each left partly mapped by munmap or MADV_DONTNEED: Linux keeps them
    // whole (deferred split) and kpageflags shows each as one 64K folio. The model does the
    // same (crates/mm/tests/kept_folios.rs).
    check(&["0"], &[(&["cut", "6"], 12, 1)]);
}
