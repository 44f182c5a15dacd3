//! The kernel's writes into a user buffer (read, pread64, getdents64, readlink, readlinkat,
//! getrandom) become stores in the decoded trace, one per 4K page, as many bytes as the
//! call returned: QEMU's plugin sees none of the kernel's accesses, and without them a
//! buffer that `read` fills first is modelled as read first (zero pages, then copies).
//! Also the writes of a fork (the child's tid, the rseq area) and of wait4/waitid.

use pagelab_capture::format::*;
use pagelab_capture::PluginReader;
use pagelab_core::{AccessKind, Event, MemRef, VirtAddr};
use pagelab_trace::TraceSource;

fn decode(words: &[u64]) -> Vec<Event> {
    let bytes = to_bytes(words);
    let mut r = PluginReader::new(&bytes[..], "test");
    let mut out = Vec::new();
    while r.fill(&mut out, 1000).expect("a good stream") {}
    out
}

/// Stores as (address, size).
type Stores = Vec<(u64, u32)>;

fn stores(events: &[Event]) -> Stores {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Ref(MemRef {
                addr,
                size,
                kind: AccessKind::Store,
            }) => Some((addr.0, *size)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_read_writes_its_buffer_page_by_page() {
    let mut w = thread(7, 7).to_vec();
    // read(3, 0x70000ff0, 20000) = 10000: 16 bytes, two whole pages, 1792 bytes.
    w.extend(syscall(0, 10000, [3, 0x7000_0ff0, 20000, 0, 0, 0], None));
    assert_eq!(
        stores(&decode(&w)),
        vec![
            (0x7000_0ff0, 16),
            (0x7000_1000, 4096),
            (0x7000_2000, 4096),
            (0x7000_3000, 1792)
        ]
    );
    let first = decode(&w)
        .into_iter()
        .find(|e| matches!(e, Event::Ref(_)))
        .unwrap();
    assert_eq!(
        first,
        Event::Ref(MemRef {
            addr: VirtAddr(0x7000_0ff0),
            size: 16,
            kind: AccessKind::Store
        })
    );
}

#[test]
fn each_call_names_its_buffer_and_a_failure_or_nothing_read_writes_nothing() {
    let cases: [(u64, [u64; 6], Stores); 6] = [
        (17, [3, 0x1000, 100, 64, 0, 0], vec![(0x1000, 100)]), // pread64
        (89, [0x9000, 0x2000, 100, 0, 0, 0], vec![(0x2000, 100)]), // readlink
        (217, [3, 0x3000, 100, 0, 0, 0], vec![(0x3000, 100)]), // getdents64
        (267, [3, 0x9000, 0x4000, 100, 0, 0], vec![(0x4000, 100)]), // readlinkat
        (318, [0x5000, 100, 0, 0, 0, 0], vec![(0x5000, 100)]), // getrandom
        (1, [1, 0x6000, 100, 0, 0, 0], vec![]),                // write: reads the buffer
    ];
    for (num, args, want) in cases {
        let mut w = thread(7, 7).to_vec();
        w.extend(syscall(num, 100, args, None));
        assert_eq!(stores(&decode(&w)), want, "system call {num}");
    }
    for ret in [0i64, -14] {
        let mut w = thread(7, 7).to_vec();
        w.extend(syscall(0, ret, [3, 0x7000, 100, 0, 0, 0], None));
        assert_eq!(stores(&decode(&w)), vec![], "read returning {ret:#x}");
    }
    // A return past the buffer's size (a corrupt stream) writes the buffer only.
    let mut w = thread(7, 7).to_vec();
    // (A return past what any kernel returns is an error: the test below.)
    w.extend(syscall(0, 1000, [3, 0x7000, 100, 0, 0, 0], None));
    assert_eq!(stores(&decode(&w)), vec![(0x7000, 100)]);
}

#[test]
fn a_result_no_kernel_returns_is_a_corrupt_stream_not_millions_of_stores() {
    // Found by the qemu_stream fuzz target: a read "returning" 2^40 bytes into a buffer of
    // 2^40 became 2^28 stores and ran the fuzzer out of memory. Linux returns at most
    // MAX_RW_COUNT (0x7ffff000) from one call.
    let mut w = thread(7, 7).to_vec();
    w.extend(syscall(
        0,
        1 << 40,
        [3, 0x7000_0000, 1 << 40, 0, 0, 0],
        None,
    ));
    let bytes = to_bytes(&w);
    let mut r = PluginReader::new(&bytes[..], "test");
    let mut out = Vec::new();
    let e = loop {
        match r.fill(&mut out, 1000) {
            Ok(true) => continue,
            Ok(false) => panic!("decoded {} events from an impossible read", out.len()),
            Err(e) => break e.to_string(),
        }
    };
    assert!(e.contains("more than Linux returns from one call"), "{e}");
    assert!(e.contains("test"), "the error names the stream: {e}");
    assert!(out.len() < 10, "{} events", out.len());
    // The most a kernel returns is still decoded, page by page.
    let mut w = thread(7, 7).to_vec();
    w.extend(syscall(
        0,
        0x7fff_f000,
        [3, 0x1000_0000, 0x7fff_f000, 0, 0, 0],
        None,
    ));
    assert_eq!(stores(&decode(&w)).len(), 0x7fff_f000 / 4096);
}

/// The events of a process's life as (pid in whose context, what): stores as
/// `("store", address, size)`, forks as `("fork", child, 0)`, execs as `("exec", 0, 0)`.
fn lives(events: &[Event]) -> Vec<(u32, &'static str, u64, u32)> {
    let mut pid = 0;
    let mut v = Vec::new();
    for e in events {
        match e {
            Event::Switch(t) => pid = t.pid,
            Event::Ref(MemRef {
                addr,
                size,
                kind: AccessKind::Store,
            }) => v.push((pid, "store", addr.0, *size)),
            Event::Fork { child, .. } => v.push((pid, "fork", u64::from(*child), 0)),
            Event::Exec(_) => v.push((pid, "exec", 0, 0)),
            _ => {}
        }
    }
    v
}

#[test]
fn a_fork_writes_the_childs_tid_and_the_rseq_area_in_parent_and_child() {
    // glibc registers its thread's struct rseq (QEMU answers ENOSYS: -38) and forks with
    // clone(CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD, 0, 0, &tid, 0). Natively
    // the kernel writes the area on the registration's return, the child's tid and its
    // rseq area on the child's first return to user mode, and the parent's area after
    // the fork write-protected it; QEMU makes the tid write itself and no rseq write.
    let (area, tid) = (0x7fff_f7dd_2060u64, 0x7fff_f7dd_1a10u64);
    let flags = 0x0120_0000u64; // CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID
    let status = 0x7fff_ffff_e000u64;
    let mut w = thread(7, 7).to_vec();
    w.extend(syscall(334, -38, [area, 32, 0, 0x5305_3053, 0, 0], None));
    w.extend([ext(X_FORK, 1, 8), flags]);
    // A second fork before the parent sleeps: the kernel writes the area once, at the wait.
    w.extend([ext(X_FORK, 1, 12), flags]);
    w.extend(syscall(61, 8, [8, status, 0, 0, 0, 0], None));
    w.extend(syscall(61, 0, [12, status, 1, 0, 0, 0], None)); // WNOHANG, none: no write
    w.extend(thread(8, 8));
    w.extend([ext(X_CHILD, 3, 0), 7 | 7 << 32, flags, tid]);
    w.push(mem(0, 0x1000, 3, false));
    w.extend([ext(X_EXEC, 0, 0)]);
    // After the exec the registration is gone: the exec'd program's fork writes no area.
    w.extend([ext(X_FORK, 1, 9), flags]);
    w.extend(thread(9, 9));
    w.extend([ext(X_CHILD, 3, 0), 8 | 8 << 32, flags, tid]);
    assert_eq!(
        lives(&decode(&w)),
        vec![
            (7, "store", area, 32),
            (7, "fork", 8, 0),
            (7, "fork", 12, 0),
            (7, "store", area, 32),
            (7, "store", status, 4),
            (8, "store", tid, 4),
            (8, "store", area, 32),
            (8, "exec", 0, 0),
            (8, "fork", 9, 0),
            (9, "store", tid, 4),
        ]
    );
}

#[test]
fn a_vfork_child_inherits_no_rseq_area_and_its_parent_is_not_write_protected() {
    // CLONE_VM: rseq_fork clears the child's registration, and nothing was
    // write-protected; a failed registration other than ENOSYS is no registration, and
    // an older CHILD record (no tid word) writes no tid. waitid writes its siginfo and the
    // rusage asked for.
    let area = 0x7fff_f7dd_2060u64;
    let mut w = thread(7, 7).to_vec();
    w.extend(syscall(334, 0, [area, 32, 0, 0x5305_3053, 0, 0], None));
    w.extend([ext(X_FORK, 1, 8), 0x4100]); // CLONE_VM | CLONE_VFORK
    w.extend(thread(8, 8));
    w.extend([ext(X_CHILD, 2, 0), 7 | 7 << 32, 0x4100]);
    w.extend(thread(10, 10));
    w.extend(syscall(334, -22, [area, 32, 0, 0x5305_3053, 0, 0], None)); // EINVAL
    w.extend([ext(X_FORK, 1, 11), 0]);
    w.extend(syscall(247, 0, [1, 11, 0x9000, 4, 0xaf80, 0], None));
    assert_eq!(
        lives(&decode(&w)),
        vec![
            (7, "store", area, 32),
            (7, "fork", 8, 0),
            (10, "fork", 11, 0),
            (10, "store", 0x9000, 128),
            (10, "store", 0xaf80, 128),
            (10, "store", 0xb000, 16),
        ]
    );
}
