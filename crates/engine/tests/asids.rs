//! `--asids N`: TLB entries tagged with address-space IDs survive process
//! switches, against hand-computed miss counts. The D-TLB is 64 entries,
//! 4-way: each process touches 8 pages in sets 0..7, so up to 4 processes'
//! entries fit side by side and every miss below is a flush, not a conflict.

use pagelab_core::{AccessKind, Bytes, Event, MemRef, ThreadId, VirtAddr};
use pagelab_engine::{run_policies, PolicyConfig};
use pagelab_mm::phys::PhysConfig;
use pagelab_tlb::TlbConfig;
use pagelab_trace::Events;

const TLB: &str = r#"
name = "asid-test"
[l1i]
arrays = [{ entries = 4, sizes = ["4K"] }]
[l1d]
arrays = [{ entries = 64, ways = 4, sizes = ["4K"] }]
"#;

/// Data-TLB misses of `events` under `base:4K` with `asids`.
fn misses(asids: Option<u32>, events: &[Event]) -> u64 {
    let tlb = TlbConfig {
        asids,
        ..TlbConfig::from_toml_str(TLB, "asid-test").unwrap()
    };
    let cfg = PolicyConfig {
        policies: vec!["base:4K".parse().unwrap()],
        tlb,
        phys: PhysConfig::new(Bytes(64 << 20)),
        strict: false,
        cow: Default::default(),
        file_faults: Default::default(),
        platform: None,
        exit_mappings: false,
    };
    let r = run_policies(&mut Events(Vec::from(events).into_iter()), &cfg, &mut ()).unwrap();
    r.runs[0].dtlb_misses
}

fn switch(pid: u32) -> Event {
    Event::Switch(ThreadId { pid, tid: pid })
}

/// Process `pid` runs and reads its 8 pages.
fn run(pid: u32) -> Vec<Event> {
    let mut ev = vec![switch(pid)];
    ev.extend((0..8u64).map(|p| {
        Event::Ref(MemRef {
            addr: VirtAddr((1 << 30) + p * 4096),
            size: 4,
            kind: AccessKind::Load,
        })
    }));
    ev
}

fn runs(pids: &[u32]) -> Vec<Event> {
    pids.iter().flat_map(|&p| run(p)).collect()
}

#[test]
fn two_processes_keep_their_entries_with_two_asids() {
    // A and B alternate ten times each: 20 runs of 8 pages.
    let ab: Vec<u32> = (0..20).map(|i| 1 + i % 2).collect();
    let ev = runs(&ab);
    // Every switch flushes: every run misses its 8 pages.
    assert_eq!(misses(None, &ev), 160);
    // One ASID: each switch to the other process reuses the slot, flushing it.
    assert_eq!(misses(Some(1), &ev), 160);
    // Two or more: only the first run of each misses.
    assert_eq!(misses(Some(2), &ev), 16);
    assert_eq!(misses(Some(6), &ev), 16);
}

#[test]
fn round_robin_reuse_flushes_the_oldest_slot() {
    // A, B, C in turn, five rounds: with two slots each process finds its
    // slot taken by the one that ran two switches ago, and misses every time.
    let abc: Vec<u32> = (0..15).map(|i| 1 + i % 3).collect();
    let ev = runs(&abc);
    assert_eq!(misses(Some(2), &ev), 120);
    assert_eq!(misses(Some(3), &ev), 24);
    assert_eq!(misses(None, &ev), 120);
}

#[test]
fn fork_flushes_the_parent_and_exit_frees_nothing_early() {
    // A and B run; A forks (its entries are write-protected: flushed), B
    // still hits, A misses again.
    let mut ev = runs(&[1, 2]);
    ev.push(switch(1));
    ev.push(Event::fork(3));
    ev.extend(runs(&[2, 1]));
    // A 8, B 8, B again 0, A 8.
    assert_eq!(misses(Some(2), &ev), 24);
    assert_eq!(misses(None, &ev), 32);
    // A exits; D takes the next slot round-robin (A's old one, 0), and B's
    // entries survive. With one slot, D's run flushes B's.
    let mut ev = runs(&[1, 2]);
    ev.push(switch(1));
    ev.push(Event::Exit { status: 0 });
    ev.extend(runs(&[4, 2]));
    assert_eq!(misses(Some(2), &ev), 8 + 8 + 8);
    assert_eq!(misses(Some(1), &ev), 8 + 8 + 8 + 8);
}
