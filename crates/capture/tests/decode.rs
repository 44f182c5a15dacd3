//! The plugin stream decoder on hand-written streams: instruction rebuilding,
//! threads, forks, system calls, and errors with byte offsets.

use pagelab_capture::format::{self, *};
use pagelab_capture::PluginReader;
use pagelab_core::{
    AccessKind, Backing, CloneFlags, Event, FileIdentity, MapEvent, MapRequest, MemRef, Prot,
    Sharing, ThreadId, VirtAddr,
};
use pagelab_trace::{TraceError, TraceSource};

fn decode(words: &[u64], max: usize) -> (Vec<Event>, Option<TraceError>) {
    let bytes = to_bytes(words);
    let mut r = PluginReader::new(&bytes[..], "test");
    let mut out = Vec::new();
    loop {
        let before = out.len();
        match r.fill(&mut out, max) {
            Ok(true) => assert!(out.len() - before <= max && out.len() > before),
            Ok(false) => return (out, None),
            Err(e) => return (out, Some(e)),
        }
    }
}

fn i(addr: u64, size: u32) -> Event {
    Event::Ref(MemRef {
        addr: VirtAddr(addr),
        size,
        kind: AccessKind::Instr,
    })
}

fn d(addr: u64, size: u32, kind: AccessKind) -> Event {
    Event::Ref(MemRef {
        addr: VirtAddr(addr),
        size,
        kind,
    })
}

fn sw(pid: u32, tid: u32) -> Event {
    Event::Switch(ThreadId { pid, tid })
}

/// A stream with one thread, a block of three instructions (sizes 3, 4, 2 at 0x1000).
fn base() -> Vec<u64> {
    let mut w = thread(10, 10).to_vec();
    w.extend(tb_def(1, 0x1000, &[3, 4, 2], false));
    w
}

#[test]
fn instructions_are_rebuilt_around_accesses() {
    let mut w = base();
    w.push(tb_exec(1));
    w.push(mem(1, 0x8000, 3, false));
    w.push(mem(1, 0x8008, 3, true));
    w.push(tb_exec(1));
    w.push(mem(0, 0x9000, 2, true));
    let expect = vec![
        sw(10, 10),
        i(0x1000, 3),
        i(0x1003, 4),
        d(0x8000, 8, AccessKind::Load),
        d(0x8008, 8, AccessKind::Store),
        i(0x1007, 2),
        i(0x1000, 3),
        d(0x9000, 4, AccessKind::Store),
        i(0x1003, 4),
        i(0x1007, 2),
    ];
    for max in [1, 2, 3, 1000] {
        let (events, err) = decode(&w, max);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(events, expect, "max {max}");
    }
}

#[test]
fn per_instruction_blocks_emit_only_what_ran() {
    let mut w = thread(1, 1).to_vec();
    w.extend(tb_def(5, 0x2ffa, &[3, 4], true));
    w.push(insn_exec(5, 0));
    w.push(mem(0, 0x100, 0, false));
    // instruction 1 crosses the page and is not executed here
    let (events, err) = decode(&w, 100);
    assert!(err.is_none());
    assert_eq!(
        events,
        vec![sw(1, 1), i(0x2ffa, 3), d(0x100, 1, AccessKind::Load)]
    );
}

#[test]
fn threads_resume_their_own_blocks() {
    let mut w = base();
    w.push(tb_exec(1));
    w.push(mem(0, 0x10, 3, false));
    w.extend(thread(10, 11));
    w.push(tb_exec(1));
    w.extend(thread(10, 10));
    w.push(mem(2, 0x20, 3, false));
    let (events, err) = decode(&w, 100);
    assert!(err.is_none());
    assert_eq!(
        events,
        vec![
            sw(10, 10),
            i(0x1000, 3),
            d(0x10, 8, AccessKind::Load),
            // Thread 11's block start emits nothing yet: switches are lazy.
            i(0x1003, 4),
            i(0x1007, 2),
            d(0x20, 8, AccessKind::Load),
            sw(10, 11),
            i(0x1000, 3),
            i(0x1003, 4),
            i(0x1007, 2),
        ]
    );
}

/// Regression (found by the `qemu_stream` fuzz target): an in-place mremap
/// of a mapping at the top of the address space overflowed `old + old_len`.
#[test]
fn an_mremap_at_the_top_of_the_address_space_does_not_overflow() {
    let top: u64 = !0xfff;
    for (old_len, new_len) in [(4096, 8192), (8192, 4096)] {
        let mut w = thread(7, 7).to_vec();
        w.extend(syscall(
            25,
            top as i64,
            [top, old_len, new_len, 0, 0, 0],
            None,
        ));
        let (events, err) = decode(&w, 100);
        assert!(err.is_none());
        assert_eq!(events.len(), 2, "{events:?}");
    }
}

#[test]
fn syscalls_become_address_space_events() {
    let mut w = thread(7, 7).to_vec();
    w.extend(syscall(
        9,
        0x7000_0000,
        [0, 10000, 3, 0x22, u64::MAX, 0],
        None,
    ));
    w.extend(syscall(
        9,
        0x7100_0000,
        [0, 4096, 1, 0x02, 3, 8192],
        Some((1, 99)),
    ));
    w.extend(syscall(10, 0, [0x7000_0000, 4096, 1, 0, 0, 0], None));
    w.extend(syscall(28, 0, [0x7000_0000, 8192, 14, 0, 0, 0], None));
    w.extend(syscall(
        25,
        0x7200_0000,
        [0x7000_0000, 12288, 16384, 1, 0, 0],
        None,
    ));
    w.extend(syscall(11, 0, [0x7100_0000, 1, 0, 0, 0, 0], None));
    w.extend(syscall(12, 0x5000, [0, 0, 0, 0, 0, 0], None));
    w.extend(syscall(12, 0x5000, [0, 0, 0, 0, 0, 0], None));
    w.extend(syscall(12, 0x9000, [0x9000, 0, 0, 0, 0, 0], None));
    w.extend(syscall(231, 0, [3, 0, 0, 0, 0, 0], None));
    let (events, err) = decode(&w, 100);
    assert!(err.is_none());
    let anon = MapEvent {
        start: VirtAddr(0x7000_0000),
        len: 12288,
        prot: Prot(3),
        backing: Backing::Anon,
        sharing: Sharing::Private,
    };
    assert_eq!(
        events,
        vec![
            sw(7, 7),
            Event::MapRequest(Box::new(MapRequest {
                hint: VirtAddr(0),
                len: 10000,
                prot: Prot(3),
                flags: 0x22,
                file: None,
                offset: 0,
            })),
            Event::Map(Box::new(anon)),
            Event::MapRequest(Box::new(MapRequest {
                hint: VirtAddr(0),
                len: 4096,
                prot: Prot(1),
                flags: 0x02,
                file: Some(FileIdentity { dev: 1, ino: 99 }),
                offset: 8192,
            })),
            Event::Map(Box::new(MapEvent {
                start: VirtAddr(0x7100_0000),
                len: 4096,
                prot: Prot(1),
                backing: Backing::File {
                    file_id: 1,
                    offset: 8192
                },
                sharing: Sharing::Private,
            })),
            Event::Protect {
                start: VirtAddr(0x7000_0000),
                len: 4096,
                prot: Prot(1)
            },
            Event::Advise {
                start: VirtAddr(0x7000_0000),
                len: 8192,
                advice: pagelab_core::Advice::HugePage
            },
            Event::Unmap {
                start: VirtAddr(0x7000_0000),
                len: 12288
            },
            Event::Map(Box::new(MapEvent {
                start: VirtAddr(0x7200_0000),
                len: 16384,
                prot: Prot(1),
                ..anon
            })),
            Event::Unmap {
                start: VirtAddr(0x7100_0000),
                len: 4096
            },
            Event::Brk {
                end: VirtAddr(0x5000)
            },
            Event::Brk {
                end: VirtAddr(0x9000)
            },
            Event::Exit { status: 3 },
        ]
    );
}

#[test]
fn a_fork_is_reported_once_before_the_child() {
    // The child's block arrives before the parent's FORK record.
    let mut w = base();
    w.extend(thread(11, 11));
    w.push(ext(X_CHILD, 1, 0));
    w.push(10 | (10 << 32));
    w.push(tb_exec(1));
    w.extend(thread(10, 10));
    w.push(ext(X_FORK, 0, 11));
    let (events, err) = decode(&w, 100);
    assert!(err.is_none());
    assert_eq!(
        events,
        vec![
            sw(10, 10),
            Event::fork(11),
            sw(11, 11),
            i(0x1000, 3),
            i(0x1003, 4),
            i(0x1007, 2),
        ]
    );
}

/// A vfork's clone flags as the plugin writes them (in the parent's FORK
/// record and the child's CHILD record) reach the trace's fork event,
/// whichever record comes first, and survive the native format; an older
/// stream's records, without flags, read as a plain fork.
#[test]
fn clone_flags_travel_from_the_stream_to_a_stored_trace() {
    let vfork = CloneFlags::VFORK_CALL;
    let parent = 10 | (10 << 32);
    let child_first = |flags: Option<u64>| {
        let mut w = base();
        w.extend(thread(11, 11));
        match flags {
            Some(f) => w.extend([ext(X_CHILD, 2, 0), parent, f]),
            None => w.extend([ext(X_CHILD, 1, 0), parent]),
        }
        w.extend(thread(10, 10));
        match flags {
            Some(f) => w.extend([ext(X_FORK, 1, 11), f]),
            None => w.push(ext(X_FORK, 0, 11)),
        }
        w
    };
    let parent_first = |f: u64| {
        let mut w = base();
        w.extend([ext(X_FORK, 1, 11), f]);
        w.extend(thread(11, 11));
        w.extend([ext(X_CHILD, 2, 0), parent, f]);
        w.push(tb_exec(1));
        w
    };
    let fork_of = |w: &[u64]| {
        let (events, err) = decode(w, 100);
        assert!(err.is_none(), "{err:?}");
        let forks: Vec<Event> = events
            .into_iter()
            .filter(|e| matches!(e, Event::Fork { .. }))
            .collect();
        assert_eq!(forks.len(), 1, "one fork event per child");
        forks[0].clone()
    };
    let want = Event::Fork {
        child: 11,
        flags: vfork,
    };
    assert_eq!(fork_of(&child_first(Some(vfork.0))), want);
    assert_eq!(fork_of(&parent_first(vfork.0)), want);
    assert_eq!(fork_of(&child_first(None)), Event::fork(11));
    // clone(CLONE_VM | CLONE_VFORK | SIGCHLD), as posix_spawn calls it, without its signal.
    let spawn = CloneFlags::from_clone_arg(0x4111);
    assert_eq!(spawn, vfork);
    assert_eq!(
        fork_of(&parent_first(spawn.0)),
        Event::Fork {
            child: 11,
            flags: spawn
        }
    );

    // Stored and read back.
    let (events, _) = decode(&parent_first(vfork.0), 100);
    let mut wr = pagelab_trace::NativeWriter::new(Vec::new()).unwrap();
    for e in &events {
        wr.write(e).unwrap();
    }
    let bytes = wr.finish().unwrap();
    let mut rd = pagelab_trace::NativeReader::new(&bytes[..], "t.pgl");
    let mut back = Vec::new();
    while rd.fill(&mut back, 7).unwrap() {}
    assert_eq!(back, events);
    assert!(back.contains(&want));
}

fn corrupt(words: &[u64], cut: Option<usize>) -> (u64, String) {
    let mut bytes = to_bytes(words);
    if let Some(c) = cut {
        bytes.truncate(c);
    }
    let mut r = PluginReader::new(&bytes[..], "s");
    let mut out = Vec::new();
    loop {
        match r.fill(&mut out, 100) {
            Ok(true) => continue,
            Ok(false) => panic!("no error"),
            Err(TraceError::Corrupt { offset, reason, .. }) => {
                // The error repeats.
                assert!(r.fill(&mut out, 100).is_err());
                return (offset, reason);
            }
            Err(e) => panic!("{e}"),
        }
    }
}

#[test]
fn a_truncated_stream_is_an_error_at_its_offset() {
    let w = base();
    let len = to_bytes(&w).len();
    for cut in [len - 1, len - 8, len - 13, 3] {
        let (offset, reason) = corrupt(&w, Some(cut));
        assert!(reason.contains("ends inside a record"), "{reason}");
        let record = if cut >= 16 { 16 } else { 0 };
        assert_eq!(offset, record as u64, "cut at {cut}");
    }
}

#[test]
fn bad_records_are_errors_at_their_offset() {
    let mut w = base();
    w.push(tb_exec(2));
    let (offset, reason) = corrupt(&w, None);
    assert_eq!(offset, 8 * (w.len() as u64 - 1));
    assert!(reason.contains("before its definition"), "{reason}");

    let mut w = base();
    w.push(tb_exec(1));
    w.push(mem(3, 0, 0, false));
    let (offset, reason) = corrupt(&w, None);
    assert_eq!(offset, 8 * (w.len() as u64 - 1));
    assert!(reason.contains("instruction 3"), "{reason}");

    let mut w = base();
    w.push(format::ext(40, 0, 0));
    let (_, reason) = corrupt(&w, None);
    assert!(reason.contains("unknown record type 40"), "{reason}");
}

/// Found by the `qemu_stream` fuzz target: `fill` and `fill_pages` added
/// `max` to what the output already held, which overflowed (a panic with
/// overflow checks, a wrapped limit without) when a caller asked for "all"
/// with `usize::MAX` into an output that was not empty; and the fast path
/// then reserved room for that many events. A call now takes in at most
/// 2^20 events, which the contract allows.
#[test]
fn any_max_is_allowed_into_a_non_empty_output() {
    let mut w = base();
    for _ in 0..3 {
        w.push(tb_exec(1));
        w.push(mem(2, 0x8000, 3, true));
    }
    let bytes = to_bytes(&w);
    let (all, err) = decode(&w, 1000);
    assert!(err.is_none());
    assert!(all.len() > 4, "{all:?}");

    let mut r = PluginReader::new(&bytes[..], "test");
    let mut out = Vec::new();
    assert!(r.fill(&mut out, 2).unwrap());
    assert!(r.fill(&mut out, usize::MAX).unwrap());
    assert!(!r.fill(&mut out, usize::MAX).unwrap());
    assert_eq!(out, all);

    let mut r = PluginReader::new(&bytes[..], "test");
    let mut filter = pagelab_trace::PageFilter::new(4, false);
    let mut batch = pagelab_trace::PageBatch::default();
    assert!(r.fill_pages(&mut filter, &mut batch, 2).unwrap());
    assert!(r.fill_pages(&mut filter, &mut batch, usize::MAX).unwrap());
    assert!(!r.fill_pages(&mut filter, &mut batch, usize::MAX).unwrap());
    assert_eq!(batch.events(), all.len() as u64);
}

/// QEMU reports a read-modify-write instruction as a load then a store of
/// the same bytes; the decoder gives one modify, as Lackey does, whatever
/// the call boundaries (`max`) and on every path. A load and a store of
/// other bytes, or by another instruction, or another execution of the same
/// instruction, stay apart.
#[test]
fn a_load_and_store_of_one_instruction_are_one_modify() {
    let mut w = base();
    w.push(tb_exec(1));
    w.push(mem(0, 0x8000, 2, false)); // addl $1, (0x8000)
    w.push(mem(0, 0x8000, 2, true));
    w.push(mem(1, 0x9000, 3, false)); // a load, then a store of other bytes
    w.push(mem(1, 0x9008, 3, true));
    w.push(mem(2, 0x9008, 3, false)); // a load by instruction 2...
    w.push(tb_exec(1));
    w.push(mem(0, 0x9008, 3, true)); // ...a store by instruction 0 of the next run
    w.push(mem(1, 0xa000, 2, false)); // another size
    w.push(mem(1, 0xa000, 3, true));
    let expect = vec![
        sw(10, 10),
        i(0x1000, 3),
        d(0x8000, 4, AccessKind::Modify),
        i(0x1003, 4),
        d(0x9000, 8, AccessKind::Load),
        d(0x9008, 8, AccessKind::Store),
        i(0x1007, 2),
        d(0x9008, 8, AccessKind::Load),
        i(0x1000, 3),
        d(0x9008, 8, AccessKind::Store),
        i(0x1003, 4),
        d(0xa000, 4, AccessKind::Load),
        d(0xa000, 8, AccessKind::Store),
        i(0x1007, 2),
    ];
    let bytes = to_bytes(&w);
    for max in [1, 2, 3, 4, 1000] {
        for fast in [true, false] {
            let mut r = PluginReader::new(&bytes[..], "test");
            if !fast {
                r = r.without_fast_path();
            }
            let mut out = Vec::new();
            while r.fill(&mut out, max).unwrap() {}
            assert_eq!(out, expect, "max {max}, fast path {fast}");

            // Through the page filter: one data reference for the modify.
            let mut r = PluginReader::new(&bytes[..], "test");
            if !fast {
                r = r.without_fast_path();
            }
            let mut filter = pagelab_trace::PageFilter::new(4, false);
            let mut batch = pagelab_trace::PageBatch::default();
            while r.fill_pages(&mut filter, &mut batch, max).unwrap() {}
            assert_eq!(
                batch.events(),
                expect.len() as u64,
                "max {max}, fast path {fast}"
            );
            assert_eq!(
                batch.refs[1], 7,
                "data references, max {max}, fast path {fast}"
            );
        }
    }
}

/// A load at the end of one thread's records and a store of the same bytes
/// by another thread are two accesses.
#[test]
fn a_modify_never_joins_two_threads() {
    let mut w = base();
    w.push(tb_exec(1));
    w.push(mem(0, 0x8000, 2, false));
    w.extend(thread(10, 11));
    w.push(tb_exec(1));
    w.push(mem(0, 0x8000, 2, true));
    let (events, err) = decode(&w, 1000);
    assert!(err.is_none(), "{err:?}");
    let kinds: Vec<AccessKind> = events
        .iter()
        .filter_map(|e| match e {
            Event::Ref(r) if !r.kind.is_instr() => Some(r.kind),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, [AccessKind::Load, AccessKind::Store]);
}

/// A `fill` that takes only part of the events decoded past the last call's end must not
/// decode on after them, even when the last it takes is a load (found by the real-stream
/// test at max 7: a block of many instructions staged, a load among them).
#[test]
fn a_partial_fill_ending_in_a_load_keeps_the_order() {
    let mut w = thread(10, 10).to_vec();
    w.extend(tb_def(1, 0x1000, &[1; 9], false));
    w.push(tb_exec(1));
    w.push(mem(0, 0x8000, 3, true));
    w.push(mem(8, 0x9000, 3, false)); // after 8 instructions
    w.push(mem(8, 0xa000, 3, false));
    w.push(tb_exec(1));
    w.push(mem(0, 0x8000, 3, false));
    let (all, err) = decode(&w, 1000);
    assert!(err.is_none(), "{err:?}");
    for max in 1..12 {
        let (events, err) = decode(&w, max);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(events, all, "max {max}");
    }
}
