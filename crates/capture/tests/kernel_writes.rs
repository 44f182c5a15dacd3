//! The kernel's writes into a user buffer (read, pread64, getdents64, readlink, readlinkat,
//! getrandom) become stores in the decoded trace, one per 4K page, as many bytes as the
//! call returned: QEMU's plugin sees none of the kernel's accesses, and without them a
//! buffer that `read` fills first is modelled as read first (zero pages, then copies).
//! Also the writes of a fork (the child's tid, the rseq area) and of wait4/waitid, the
//! fixed-size writes of the stat family, uname, pipe, rt_sigaction and the rest, and the
//! vector writes of readv, preadv, preadv2, recvfrom and recvmsg from the iovecs and
//! `struct msghdr` fields the plugin appends to their records, the socket addresses of
//! accept and getsockname, epoll_wait's events; and, under QEMU, a real
//! program whose first touch of fresh pages is the kernel's writes.

mod common;

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

/// The stores of one SYSCALL record of thread 7 with `extra` words after its arguments.
fn call(num: u64, ret: i64, args: [u64; 6], extra: &[u64]) -> Stores {
    stores(&decode(&record(num, ret, args, extra)))
}

fn record(num: u64, ret: i64, args: [u64; 6], extra: &[u64]) -> Vec<u64> {
    let mut w = thread(7, 7).to_vec();
    let mut r = syscall(num, ret, args, None);
    r[0] = ext(X_SYSCALL, 7 + extra.len(), num);
    r.extend_from_slice(extra);
    w.extend(r);
    w
}

#[test]
fn each_fixed_size_call_writes_its_structure_page_by_page_on_success_only() {
    let path = 0x9_0000u64;
    // (number, result, arguments, stores): x86-64 sizes from the UAPI headers.
    let cases: Vec<(u64, i64, [u64; 6], Stores)> = vec![
        // stat: struct stat, 144 bytes, here over a page boundary.
        (
            4,
            0,
            [path, 0x1000_0ff0, 0, 0, 0, 0],
            vec![(0x1000_0ff0, 16), (0x1000_1000, 128)],
        ),
        (5, 0, [3, 0x2000, 0, 0, 0, 0], vec![(0x2000, 144)]), // fstat
        (6, 0, [path, 0x3000, 0, 0, 0, 0], vec![(0x3000, 144)]), // lstat
        (262, 0, [3, path, 0x4000, 0x100, 0, 0], vec![(0x4000, 144)]), // newfstatat
        (332, 0, [3, path, 0, 0x7ff, 0x5000, 0], vec![(0x5000, 256)]), // statx
        (137, 0, [path, 0x6000, 0, 0, 0, 0], vec![(0x6000, 120)]), // statfs
        (138, 0, [3, 0x6100, 0, 0, 0, 0], vec![(0x6100, 120)]), // fstatfs
        // uname: struct new_utsname, 390 bytes.
        (
            63,
            0,
            [0x7f00, 0, 0, 0, 0, 0],
            vec![(0x7f00, 256), (0x8000, 134)],
        ),
        (
            22,
            0,
            [0x8ffc, 0, 0, 0, 0, 0],
            vec![(0x8ffc, 4), (0x9000, 4)],
        ), // pipe
        (293, 0, [0xa000, 0x80000, 0, 0, 0, 0], vec![(0xa000, 8)]), // pipe2
        (53, 0, [1, 1, 0, 0xa100, 0, 0], vec![(0xa100, 8)]),        // socketpair
        // rt_sigaction: the kernel's struct sigaction, 32 bytes; the old one only.
        (13, 0, [10, 0xb100, 0xb000, 8, 0, 0], vec![(0xb000, 32)]),
        (13, 0, [10, 0xb000, 0, 8, 0, 0], vec![]),
        (14, 0, [0, 0xc000, 0xc100, 8, 0, 0], vec![(0xc100, 8)]), // rt_sigprocmask
        (14, 0, [0, 0xc000, 0, 8, 0, 0], vec![]),
        (228, 0, [1, 0xd000, 0, 0, 0, 0], vec![(0xd000, 16)]), // clock_gettime
        (229, 0, [1, 0xd100, 0, 0, 0, 0], vec![(0xd100, 16)]), // clock_getres
        (229, 0, [1, 0, 0, 0, 0, 0], vec![]),
        // gettimeofday: timeval and timezone, each when asked for.
        (
            96,
            0,
            [0xe000, 0xe100, 0, 0, 0, 0],
            vec![(0xe000, 16), (0xe100, 8)],
        ),
        (96, 0, [0xe000, 0, 0, 0, 0, 0], vec![(0xe000, 16)]),
        (96, 0, [0, 0xe100, 0, 0, 0, 0], vec![(0xe100, 8)]),
        (99, 0, [0xf000, 0, 0, 0, 0, 0], vec![(0xf000, 112)]), // sysinfo
        (97, 0, [7, 0x1_0000, 0, 0, 0, 0], vec![(0x1_0000, 16)]), // getrlimit
        (
            302,
            0,
            [0, 7, 0x1_0100, 0x1_1000, 0, 0],
            vec![(0x1_1000, 16)],
        ), // prlimit64
        (302, 0, [0, 7, 0x1_0100, 0, 0, 0], vec![]),
        (98, 0, [0, 0x1_2000, 0, 0, 0, 0], vec![(0x1_2000, 144)]), // getrusage
        // times returns clock ticks; its struct tms only when asked for.
        (
            100,
            123_456,
            [0x1_3000, 0, 0, 0, 0, 0],
            vec![(0x1_3000, 32)],
        ),
        (100, 123_456, [0, 0, 0, 0, 0, 0], vec![]),
        // time: a time_t when asked for.
        (
            201,
            1_700_000_000,
            [0x1_6000, 0, 0, 0, 0, 0],
            vec![(0x1_6000, 8)],
        ),
        (201, 1_700_000_000, [0, 0, 0, 0, 0, 0], vec![]),
        // getresuid, getresgid: three ids.
        (
            118,
            0,
            [0x1_7000, 0x1_7004, 0x1_7ffe, 0, 0, 0],
            vec![(0x1_7000, 4), (0x1_7004, 4), (0x1_7ffe, 2), (0x1_8000, 2)],
        ),
        (
            120,
            0,
            [0x1_7000, 0x1_7004, 0x1_7008, 0, 0, 0],
            vec![(0x1_7000, 4), (0x1_7004, 4), (0x1_7008, 4)],
        ),
        // getgroups: as many gid_ts as it returns, none when asked for the count only.
        (115, 3, [64, 0x1_9000, 0, 0, 0, 0], vec![(0x1_9000, 12)]),
        (115, 3, [0, 0x1_9000, 0, 0, 0, 0], vec![]),
        // sigaltstack's old stack_t, getitimer's struct itimerval.
        (
            131,
            0,
            [0x1_a000, 0x1_a100, 0, 0, 0, 0],
            vec![(0x1_a100, 24)],
        ),
        (131, 0, [0x1_a000, 0, 0, 0, 0, 0], vec![]),
        (36, 0, [0, 0x1_b000, 0, 0, 0, 0], vec![(0x1_b000, 32)]),
        // getcwd and sched_getaffinity: as many bytes as they return.
        (79, 10, [0x1_4000, 4096, 0, 0, 0, 0], vec![(0x1_4000, 10)]),
        (204, 8, [0, 128, 0x1_5000, 0, 0, 0], vec![(0x1_5000, 8)]),
    ];
    for (num, ret, args, want) in cases {
        assert_eq!(
            call(num, ret, args, &[]),
            want,
            "system call {num} {args:x?}"
        );
        // A failed call wrote nothing (EFAULT, EINVAL, ...).
        for err in [-14, -22] {
            assert_eq!(
                call(num, err, args, &[]),
                vec![],
                "{num} failing with {err}"
            );
        }
    }
}

#[test]
fn readv_spreads_its_result_over_the_iovecs_in_order() {
    // Four iovecs, one empty; 5000 bytes: 100 in the first (over a page boundary), 4900 in
    // the third, none in the fourth.
    let iov = [0x1000_0ff0, 100, 0x3000, 0, 0x5000, 9000, 0x9000, 50];
    let want = vec![
        (0x1000_0ff0, 16),
        (0x1000_1000, 84),
        (0x5000, 4096),
        (0x6000, 804),
    ];
    for num in [19, 295, 327] {
        // readv, preadv, preadv2
        assert_eq!(
            call(num, 5000, [3, 0x7ff0, 4, 0, 0, 0], &iov),
            want,
            "{num}"
        );
        assert_eq!(
            call(num, 0, [3, 0x7ff0, 4, 0, 0, 0], &iov),
            vec![],
            "{num} at EOF"
        );
        // No iovecs recorded (an older stream, or the plugin could not read them).
        assert_eq!(call(num, 5000, [3, 0x7ff0, 4, 0, 0, 0], &[]), vec![]);
    }
    // More bytes than the iovecs hold (a corrupt stream): the iovecs only.
    assert_eq!(
        call(19, 300, [3, 0x7ff0, 1, 0, 0, 0], &[0x5000, 200]),
        vec![(0x5000, 200)]
    );
}

#[test]
fn recvmsg_writes_data_control_address_and_the_msghdr_fields() {
    let msg = 0x7ffe_0000u64;
    // name, namelen before and after, control, controllen after, two iovecs.
    let extra = [0x2_0000, 128, 16, 0x2_1000, 24, 0x2_2000, 50, 0x2_3000, 100];
    assert_eq!(
        call(47, 120, [3, msg, 0, 0, 0, 0], &extra),
        vec![
            (0x2_2000, 50),
            (0x2_3000, 70),
            (0x2_1000, 24),
            (0x2_0000, 16),
            (msg + 8, 4),
            (msg + 48, 4),
            (msg + 40, 8),
        ]
    );
    // A caller's buffer shorter than the address: as much as fits; no name asked for: no
    // address, no msg_namelen; no control message: nothing at msg_control.
    let extra = [0x2_0000, 8, 16, 0x2_1000, 0, 0x2_2000, 50];
    assert_eq!(
        call(47, 10, [3, msg, 0, 0, 0, 0], &extra),
        vec![
            (0x2_2000, 10),
            (0x2_0000, 8),
            (msg + 8, 4),
            (msg + 48, 4),
            (msg + 40, 8)
        ]
    );
    let extra = [0, 0, 0, 0x2_1000, 0, 0x2_2000, 50];
    assert_eq!(
        call(47, 10, [3, msg, 0, 0, 0, 0], &extra),
        vec![(0x2_2000, 10), (msg + 48, 4), (msg + 40, 8)]
    );
    // Nothing recorded of the msghdr, or a failure: nothing.
    assert_eq!(call(47, 10, [3, msg, 0, 0, 0, 0], &[]), vec![]);
    assert_eq!(call(47, -11, [3, msg, 0, 0, 0, 0], &[]), vec![]);
}

#[test]
fn recvfrom_writes_its_buffer_and_the_source_address_asked_for() {
    let args = [3, 0x3_0000, 4096, 0, 0x3_1000, 0x3_2000];
    assert_eq!(
        call(45, 10, args, &[16, 110]),
        vec![(0x3_0000, 10), (0x3_1000, 16), (0x3_2000, 4)]
    );
    // A connected socket's empty address: only its length.
    assert_eq!(
        call(45, 10, args, &[16, 0]),
        vec![(0x3_0000, 10), (0x3_2000, 4)]
    );
    // No address asked for, or none recorded: the data only.
    let no_addr = [3, 0x3_0000, 4096, 0, 0, 0];
    assert_eq!(call(45, 10, no_addr, &[]), vec![(0x3_0000, 10)]);
    assert_eq!(call(45, 10, args, &[]), vec![(0x3_0000, 10)]);
    assert_eq!(call(45, -11, args, &[16, 110]), vec![]);
}

#[test]
fn accept_and_getsockname_write_the_address_asked_for_and_epoll_wait_its_events() {
    let args = [3, 0x4_0ff8, 0x4_2000, 0, 0, 0];
    for num in [43, 288, 51, 52] {
        // accept, accept4, getsockname, getpeername: a 16-byte address into a buffer of
        // 128, over a page boundary, then its length.
        assert_eq!(
            call(num, 5, args, &[128, 16]),
            vec![(0x4_0ff8, 8), (0x4_1000, 8), (0x4_2000, 4)],
            "{num}"
        );
        // A 110-byte address into a buffer of 16: 16 bytes.
        assert_eq!(
            call(num, 5, args, &[16, 110]),
            vec![(0x4_0ff8, 8), (0x4_1000, 8), (0x4_2000, 4)],
            "{num}"
        );
        assert_eq!(
            call(num, 5, [3, 0, 0, 0, 0, 0], &[]),
            vec![],
            "{num}: no address"
        );
        assert_eq!(call(num, 5, args, &[]), vec![], "{num}: nothing recorded");
        assert_eq!(call(num, -22, args, &[128, 16]), vec![], "{num} failing");
    }
    for num in [232, 281, 441] {
        // epoll_wait, epoll_pwait, epoll_pwait2: 12-byte events, as many as returned.
        assert_eq!(
            call(num, 3, [4, 0x5_0ff0, 64, 0, 0, 0], &[]),
            vec![(0x5_0ff0, 16), (0x5_1000, 20)],
            "{num}"
        );
        assert_eq!(call(num, 0, [4, 0x5_0ff0, 64, 0, 0, 0], &[]), vec![]);
    }
}

#[test]
fn a_result_length_or_count_no_kernel_gives_is_a_corrupt_stream() {
    let iov = |n: usize| -> Vec<u64> { (0..n as u64).flat_map(|i| [(i + 1) << 12, 8]).collect() };
    let msg = 0x7ffe_0000u64;
    // (number, result, arguments, extra words, what the error says)
    type Bad = (u64, i64, [u64; 6], Vec<u64>, &'static str);
    let cases: Vec<Bad> = vec![
        (
            19,
            0x8000_0000,
            [3, 0x100, 1, 0, 0, 0],
            vec![0x5000, 1 << 40],
            "more than Linux",
        ),
        (19, 8, [3, 0x100, 1, 0, 0, 0], vec![0x5000], "iovec words"),
        (295, 8, [3, 0x100, 1025, 0, 0, 0], iov(1025), "iovec words"),
        (
            19,
            8,
            [3, 0x100, 1, 0, 0, 0],
            vec![0x5000, 1 << 63],
            "iovec of",
        ),
        (
            47,
            8,
            [3, msg, 0, 0, 0, 0],
            vec![0, 0, 0, 0x9000, 1 << 31],
            "control bytes",
        ),
        (
            47,
            8,
            [3, msg, 0, 0, 0, 0],
            vec![0x9000, 128, 129, 0, 0],
            "source address",
        ),
        (
            47,
            8,
            [3, msg, 0, 0, 0, 0],
            vec![0x9000, 128],
            "extra words",
        ),
        (47, 1 << 31, [3, msg, 0, 0, 0, 0], vec![], "more than Linux"),
        (
            45,
            1 << 31,
            [3, 0x100, 1 << 32, 0, 0, 0],
            vec![],
            "more than Linux",
        ),
        (
            45,
            8,
            [3, 0x100, 8, 0, 0x200, 0x300],
            vec![16, 2, 0],
            "extra words",
        ),
        (
            43,
            5,
            [3, 0x100, 0x200, 0, 0, 0],
            vec![128, 129],
            "source address",
        ),
        (51, 0, [3, 0x100, 0x200, 0, 0, 0], vec![128], "extra words"),
        (232, 1 << 28, [4, 0x100, 1 << 28, 0, 0, 0], vec![], "events"),
        (13, 0, [10, 0, 0xb000, 16, 0, 0], vec![], "sigsetsize"),
        (14, 0, [0, 0, 0xb000, 128, 0, 0], vec![], "sigsetsize"),
        (
            79,
            4097,
            [0x1000, 8192, 0, 0, 0, 0],
            vec![],
            "more than Linux",
        ),
        (
            204,
            1032,
            [0, 4096, 0x1000, 0, 0, 0],
            vec![],
            "more than Linux",
        ),
        (
            115,
            65537,
            [1 << 20, 0x1000, 0, 0, 0, 0],
            vec![],
            "more than Linux",
        ),
    ];
    for (num, ret, args, extra, says) in cases {
        let bytes = to_bytes(&record(num, ret, args, &extra));
        let mut r = PluginReader::new(&bytes[..], "test");
        let mut out = Vec::new();
        let e = loop {
            match r.fill(&mut out, 1000) {
                Ok(true) => continue,
                Ok(false) => panic!("{num} {args:x?} {extra:x?}: decoded {out:?}"),
                Err(e) => break e.to_string(),
            }
        };
        // The record follows the 16-byte THREAD record.
        assert!(e.contains("test at byte offset 16"), "{e}");
        assert!(e.contains(says), "{num}: {e}");
        assert!(out.len() < 4, "{num}: {} events", out.len());
    }
    // The most a kernel gives is decoded.
    assert_eq!(call(19, 8, [3, 0x100, 1024, 0, 0, 0], &iov(1024)).len(), 1);
    assert_eq!(
        call(79, 4096, [0x1000, 8192, 0, 0, 0, 0], &[]),
        vec![(0x1000, 4096)]
    );
}

#[test]
fn qemu_the_kernels_writes_are_a_fresh_pages_first_touch() {
    use pagelab_capture::Backend;
    if !common::available(Backend::Qemu) {
        return;
    }
    let file = std::env::temp_dir().join(format!("pagelab-kwrites-{}", std::process::id()));
    let (events, code) = common::capture(
        Backend::Qemu,
        &common::testprog(),
        &["kwrites"],
        Some(&file),
    );
    let out = std::fs::read_to_string(&file).unwrap();
    let _ = std::fs::remove_file(&file);
    assert_eq!(code, 0, "{out}");
    let regions = common::regions(&out, "kwrites ");
    assert_eq!(regions.len(), 1, "{out}");
    let (start, len) = regions[0];
    // The region's data references in order, as (kind, offset, size).
    let refs = common::data_refs_in(&events, start, len);
    const P: u64 = 4096;
    // pagelab_testprog.c's kwrites(): pipe2, fstat, uname, readv, clock_gettime,
    // rt_sigaction, recvmsg, epoll_wait, getsockname, recvfrom (8 bytes of a 13-byte
    // address), time, getresuid, sigaltstack, getitimer, in that order, page by page.
    let kernel: Vec<(AccessKind, u64, u32)> = [
        (P + 16, 8),
        (0, 144),
        (2 * P + 4000, 96),
        (3 * P, 294),
        (4 * P + 4000, 96),
        (5 * P, 104),
        (6 * P, 2800),
        (8 * P, 16),
        (9 * P, 32),
        (10 * P + 8, 100),
        (11 * P, 24),
        (12 * P + 4090, 6),
        (13 * P, 6),
        (14 * P, 2),
        (15 * P, 10),
        (15 * P + 2048, 8),
        (16 * P, 8),
        (17 * P, 4),
        (17 * P + 4, 4),
        (17 * P + 8, 4),
        (18 * P, 24),
        (19 * P, 32),
    ]
    .into_iter()
    .map(|(at, size)| (AccessKind::Store, at, size))
    .collect();
    // The region's stores begin with the kernel's (the program's loads of the descriptors
    // and of uname's result come between), and each page's first reference is one of them.
    let stores: Vec<_> = refs
        .iter()
        .copied()
        .filter(|r| r.0 == AccessKind::Store)
        .collect();
    assert!(stores.len() >= kernel.len(), "{refs:?}");
    assert_eq!(stores[..kernel.len()], kernel[..], "{refs:?}");
    let mut seen = std::collections::BTreeSet::new();
    for r in &refs {
        if seen.insert(r.1 / P) {
            assert!(
                kernel.contains(r),
                "the first access of page {}: {r:?}",
                r.1 / P
            );
        }
    }
    let written: std::collections::BTreeSet<u64> = kernel.iter().map(|k| k.1 / P).collect();
    assert_eq!(
        seen, written,
        "the program touches only the pages the kernel wrote"
    );
}
