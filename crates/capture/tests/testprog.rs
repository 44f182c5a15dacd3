//! The project's own test program under both backends: exactly the pages it
//! touches in the region it maps, and (qemu) exactly that map and unmap.

mod common;

use common::*;
use pagelab_capture::Backend;
use pagelab_core::{
    Backing, Event, FileIdentity, MapEvent, MapRequest, Prot, Sharing, ThreadId, VirtAddr,
};
use std::collections::BTreeSet;

fn run(backend: Backend, args: &[&str]) -> Option<(Vec<Event>, i32, String)> {
    if !available(backend) {
        return None;
    }
    let dir = std::env::temp_dir().join(format!(
        "pagelab-testprog-{}-{backend}-{}",
        std::process::id(),
        args.join("-")
    ));
    let (events, code) = capture(backend, &testprog(), args, Some(&dir));
    let out = std::fs::read_to_string(&dir).unwrap();
    let _ = std::fs::remove_file(&dir);
    Some((events, code, out))
}

fn check_region(events: &[Event], out: &str, prefix: &str) {
    let regions = regions(out, prefix);
    assert_eq!(regions.len(), 1, "output: {out}");
    let (start, len) = regions[0];
    let pages = data_pages_in(events, start, len);
    assert_eq!(
        pages,
        TOUCHED.iter().copied().collect::<BTreeSet<_>>(),
        "region {start:#x}"
    );
}

#[test]
fn qemu_touch_yields_exactly_its_pages_map_and_unmap() {
    let Some((events, code, out)) = run(Backend::Qemu, &["touch"]) else {
        return;
    };
    assert_eq!(code, 0);
    check_region(&events, &out, "");
    let (start, len) = regions(&out, "")[0];
    let maps: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::Map(m) if m.start == VirtAddr(start) => Some(**m),
            _ => None,
        })
        .collect();
    assert_eq!(
        maps,
        vec![MapEvent {
            start: VirtAddr(start),
            len,
            prot: Prot(Prot::READ | Prot::WRITE),
            backing: Backing::Anon,
            sharing: Sharing::Private,
        }]
    );
    // The request comes just before its result, as the program made it.
    let at = events
        .iter()
        .position(|e| matches!(e, Event::Map(m) if m.start == VirtAddr(start)))
        .unwrap();
    assert_eq!(
        events[at - 1],
        Event::MapRequest(Box::new(MapRequest {
            hint: VirtAddr(0),
            len,
            prot: Prot(Prot::READ | Prot::WRITE),
            flags: MapRequest::PRIVATE | MapRequest::ANONYMOUS,
            file: None,
            offset: 0,
        }))
    );
    // ld.so maps libc: its requests name the file by device and inode, and
    // each is followed by a file-backed map.
    use std::os::unix::fs::MetadataExt;
    if let Ok(libc) = std::fs::metadata("/lib/x86_64-linux-gnu/libc.so.6") {
        let id = FileIdentity {
            dev: libc.dev(),
            ino: libc.ino(),
        };
        let libc_maps: Vec<_> = events
            .windows(2)
            .filter_map(|w| match (&w[0], &w[1]) {
                (Event::MapRequest(r), Event::Map(m)) if r.file == Some(id) => Some((**r, **m)),
                _ => None,
            })
            .collect();
        assert!(libc_maps.len() >= 2, "{libc_maps:?}");
        for (r, m) in libc_maps {
            assert!(matches!(m.backing, Backing::File { offset, .. } if offset == r.offset));
            assert_eq!(m.len, r.len.next_multiple_of(4096));
            assert_eq!(r.flags & MapRequest::ANONYMOUS, 0);
        }
    }
    let unmaps = events
        .iter()
        .filter(|e| matches!(e, Event::Unmap { start: s, len: l } if *s == VirtAddr(start) && *l == len))
        .count();
    assert_eq!(unmaps, 1);
    // The map comes before the touches, the unmap after them.
    let pos = |f: &dyn Fn(&Event) -> bool| events.iter().position(f).unwrap();
    let map_at = pos(&|e| matches!(e, Event::Map(m) if m.start == VirtAddr(start)));
    let unmap_at = pos(&|e| matches!(e, Event::Unmap { start: s, .. } if *s == VirtAddr(start)));
    let touch_at = pos(
        &|e| matches!(e, Event::Ref(r) if r.addr >= VirtAddr(start) && r.addr < VirtAddr(start + len)),
    );
    assert!(map_at < touch_at && touch_at < unmap_at);
    assert!(matches!(events.last(), Some(Event::Exit { status: 0 })));
}

#[test]
fn valgrind_touch_yields_exactly_its_pages() {
    let Some((events, code, out)) = run(Backend::Valgrind, &["touch"]) else {
        return;
    };
    assert_eq!(code, 0);
    check_region(&events, &out, "");
    assert!(matches!(events.last(), Some(Event::Exit { status: 0 })));
}

#[test]
fn exit_status_and_crash_are_reported_with_a_valid_trace() {
    for backend in [Backend::Qemu, Backend::Valgrind] {
        let Some((events, code, out)) = run(backend, &["exit", "7"]) else {
            continue;
        };
        assert_eq!(code, 7, "{backend}");
        check_region(&events, &out, "");
        assert!(
            matches!(events.last(), Some(Event::Exit { status: 7 })),
            "{backend}"
        );
        let Some((events, code, out)) = run(backend, &["crash"]) else {
            continue;
        };
        assert_eq!(code, 128 + 11, "{backend}: killed by SIGSEGV");
        check_region(&events, &out, "");
        assert!(
            matches!(events.last(), Some(Event::Exit { status: 139 })),
            "{backend}"
        );
    }
}

#[test]
fn qemu_fork_keeps_process_ids() {
    let Some((events, code, out)) = run(Backend::Qemu, &["fork"]) else {
        return;
    };
    assert_eq!(code, 0);
    check_region(&events, &out, "");
    check_region(&events, &out, "child ");
    let forks: Vec<u32> = events
        .iter()
        .filter_map(|e| match e {
            Event::Fork { child, .. } => Some(*child),
            _ => None,
        })
        .collect();
    assert_eq!(forks.len(), 1, "one fork event");
    let child = forks[0];
    // The child's touches are attributed to the child.
    let (cstart, clen) = regions(&out, "child ")[0];
    let mut pid = 0;
    let mut child_pages = BTreeSet::new();
    for e in &events {
        match e {
            Event::Switch(ThreadId { pid: p, .. }) => pid = *p,
            Event::Ref(r)
                if pid == child
                    && !r.kind.is_instr()
                    && r.addr >= VirtAddr(cstart)
                    && r.addr < VirtAddr(cstart + clen) =>
            {
                child_pages.insert((r.addr - VirtAddr(cstart)) / 4096);
            }
            _ => {}
        }
    }
    assert_eq!(child_pages, TOUCHED.iter().copied().collect());
    let fork_at = events
        .iter()
        .position(|e| matches!(e, Event::Fork { .. }))
        .unwrap();
    let first_child = events
        .iter()
        .position(|e| matches!(e, Event::Switch(t) if t.pid == child))
        .unwrap();
    assert!(
        fork_at < first_child,
        "the fork precedes the child's events"
    );
}

#[test]
fn qemu_threads_are_tagged() {
    let Some((events, code, out)) = run(Backend::Qemu, &["threads"]) else {
        return;
    };
    assert_eq!(code, 0);
    check_region(&events, &out, "");
    check_region(&events, &out, "thread ");
    let tids: BTreeSet<u32> = events
        .iter()
        .filter_map(|e| match e {
            Event::Switch(t) => Some(t.tid),
            _ => None,
        })
        .collect();
    assert!(tids.len() >= 2, "{tids:?}");
}

#[test]
fn qemu_survives_the_program_closing_fd_2() {
    let Some((events, code, out)) = run(Backend::Qemu, &["closefd"]) else {
        return;
    };
    assert_eq!(code, 0);
    check_region(&events, &out, "");
}
