//! Running out of names for PTE pages shared at fork is an error that says
//! what ran out, after how many forks, and what to do; never a panic.

use super::model::LABELS;
use super::{Config, PageTables, Sharing, SharingError};
use pagelab_core::{
    AccessKind, Backing, Event, MapEvent, MemRef, Prot, Sharing as Share, ThreadId, VirtAddr,
};

const BASE: u64 = 0x1000_0000;
const M2: u64 = 2 << 20;

fn store(addr: u64) -> Event {
    Event::Ref(MemRef {
        addr: VirtAddr(addr),
        size: 8,
        kind: AccessKind::Store,
    })
}

/// Process 1 fills two PTE pages of a private heap, then forks `forks`
/// children, each of which exits; after each fork the parent writes once in
/// each 2M span, which copies the table it shares (one fresh name each).
fn stream(forks: u32) -> Vec<Event> {
    let mut ev = vec![
        Event::Switch(ThreadId { pid: 1, tid: 1 }),
        Event::Map(Box::new(MapEvent {
            start: VirtAddr(BASE),
            len: 2 * M2,
            prot: Prot(Prot::READ | Prot::WRITE),
            backing: Backing::Anon,
            sharing: Share::Private,
        })),
    ];
    ev.extend((0..2 * M2 / 4096).map(|i| store(BASE + i * 4096)));
    for k in 0..forks {
        let child = 100 + k;
        ev.push(Event::fork(child));
        ev.push(store(BASE));
        ev.push(store(BASE + M2));
        ev.push(Event::Switch(ThreadId {
            pid: child,
            tid: child,
        }));
        ev.push(Event::Exit { status: 0 });
        ev.push(Event::Switch(ThreadId { pid: 1, tid: 1 }));
    }
    ev
}

fn model(names: u32) -> Sharing {
    let mut m = Sharing::new(Config::ia32_pae(PageTables::Shared)).unwrap();
    m.label_limit = LABELS + 1 + names;
    m
}

#[test]
fn running_out_of_names_is_an_error_naming_the_forks() {
    // Each fork names the parent's two tables afresh (2 names), and the
    // parent's two writes copy them (2 more): 4 names a fork. With 10 names
    // the third fork's second write finds none left.
    let ev = stream(5);
    let mut m = model(10);
    let err = ev.iter().try_for_each(|e| m.event(e)).unwrap_err();
    let SharingError::Event { why, .. } = &err else {
        panic!("not an event error: {err:?}")
    };
    assert!(why.contains("ran out of names for PTE pages"), "{why}");
    assert!(why.contains("after 3 forks"), "{why}");
    assert!(why.contains("10 PTE pages"), "{why}");
    assert!(why.contains("--page-tables private"), "{why}");
    // The batched path refuses at the same point.
    let mut m = model(10);
    assert_eq!(m.events(&ev).unwrap_err(), err);
    // With names enough the same stream runs, and without sharing none are used.
    let mut m = model(100);
    m.events(&ev).unwrap();
    m.check().unwrap();
    let mut m = Sharing::new(Config::ia32_pae(PageTables::Private)).unwrap();
    m.label_limit = LABELS + 1;
    m.events(&ev).unwrap();
}
