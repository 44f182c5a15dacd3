//! Properties: bijection, determinism by seed, counts by formula, the fill contract.

use crate::common;
use common::*;
use pagelab_core::{AccessKind, Event};
use pagelab_trace::TraceSource;
use pagelab_workloads::{open, total_refs, Permutation};
use proptest::prelude::*;
use std::collections::HashSet;

proptest! {
    #[test]
    fn permutation_is_a_bijection(n in 1u64..5000, seed in any::<u64>()) {
        let p = Permutation::new(n, seed);
        let mut seen = vec![false; n as usize];
        for i in 0..n {
            let x = p.apply(i);
            prop_assert!(x < n);
            prop_assert!(!seen[x as usize], "{} hit twice", x);
            seen[x as usize] = true;
        }
    }

    #[test]
    fn chase_visits_every_node_once_per_cycle(nodes in 1u64..3000, seed in 0u64..1000) {
        let spec = format!("chase:nodes={nodes},steps={},seed={seed},init=false", 2 * nodes);
        let loads = addrs(&refs(&spec), AccessKind::Load);
        let (first, second) = loads.split_at(nodes as usize);
        let set: HashSet<u64> = first.iter().copied().collect();
        prop_assert_eq!(set.len() as u64, nodes);
        prop_assert!(first.iter().all(|a| (a - MMAP_BASE).is_multiple_of(64) && (a - MMAP_BASE) / 64 < nodes));
        prop_assert_eq!(first, second);
    }

    #[test]
    fn batch_size_does_not_change_the_trace(batch in 1usize..40) {
        for spec in ["stride:heap=8K,page=1K,iters=3", "stream:n=5,iters=2", "gups:table=1K,updates=20", "chase:nodes=7,steps=20"] {
            prop_assert_eq!(refs_batched(spec, batch), refs(spec));
        }
    }
}

#[test]
fn permutation_is_not_the_identity_and_seeds_differ() {
    let a: Vec<u64> = (0..1000)
        .map(|i| Permutation::new(1000, 1).apply(i))
        .collect();
    let b: Vec<u64> = (0..1000)
        .map(|i| Permutation::new(1000, 2).apply(i))
        .collect();
    assert_ne!(a, (0..1000).collect::<Vec<_>>());
    assert_ne!(a, b);
    // Neighbours in the cycle are far apart on average, as in a random cycle (~n/3).
    let mean_jump: f64 = a
        .windows(2)
        .map(|w| w[0].abs_diff(w[1]) as f64)
        .sum::<f64>()
        / 999.0;
    assert!((200.0..470.0).contains(&mean_jump), "{mean_jump}");
}

#[test]
fn same_seed_same_trace_different_seed_different_trace() {
    for w in ["gups:table=1M,updates=5000", "chase:nodes=1000,steps=5000"] {
        let a = refs(&format!("{w},seed=11"));
        assert_eq!(a, refs(&format!("{w},seed=11")), "{w}");
        assert_ne!(a, refs(&format!("{w},seed=12")), "{w}");
    }
}

#[test]
fn counts_follow_the_formulas() {
    // stride: memset of the heap (5 refs per 32 bytes) + iters x ceil(pages / every) x 7.
    let cases = [
        (
            "stride:heap=1M,every=16,iters=10",
            1048576 / 32 * 5 + 10 * 16 * 7,
        ),
        ("stride:heap=100K,every=16,iters=3,init=false", 3 * 2 * 7), // 25 pages: 0 and 16
        ("stride:heap=64K,page=64K,line=4K,iters=5,init=false", 5 * 7),
        // stream: memset of 24n bytes + iters x n x (7 + 8 + 9 + 10).
        (
            "stream:n=1000,iters=3",
            24000u64.div_ceil(32) * 5 + 3 * 1000 * 34,
        ),
        ("stream:n=1000,iters=0,init=false", 0),
        // gups: memset of the table + 10 per update.
        ("gups:table=64K,updates=1234", 65536 / 32 * 5 + 12340),
        // chase: memset of nodes x node + 4 per step.
        (
            "chase:nodes=1000,node=24,steps=777",
            24000 / 32 * 5 + 777 * 4,
        ),
        // lines: memset of lines x spacing + 4 per dependent step, 21 per independent.
        (
            "lines:lines=64,spacing=256,steps=99",
            64 * 256 / 32 * 5 + 99 * 4,
        ),
        (
            "lines:lines=64,spacing=64,steps=99,order=independent,init=false",
            99 * 21,
        ),
    ];
    for (spec, expect) in cases {
        assert_eq!(total_refs(spec).unwrap(), expect, "{spec}");
        assert_eq!(refs(spec).len() as u64, expect, "{spec}");
    }
}

#[test]
fn every_data_reference_stays_inside_the_data() {
    for (spec, lo, len) in [
        (
            "stride:heap=64K,page=4K,line=512,every=3,iters=2",
            MMAP_BASE,
            65536,
        ),
        ("stream:n=333,iters=1", BSS_BASE, 333 * 24),
        ("gups:table=4K,updates=1000", MMAP_BASE, 4096),
        ("chase:nodes=33,node=40,steps=100", MMAP_BASE, 33 * 40),
        // `lines` starts 2M-aligned by default.
        (
            "lines:lines=32,spacing=4K,steps=100",
            0x7f3a_1c60_0000,
            32 * 4096,
        ),
    ] {
        for (addr, size, _) in data(&refs(spec)) {
            assert!(
                addr >= lo && addr + size as u64 <= lo + len,
                "{spec}: {addr:#x}+{size}"
            );
        }
    }
}

#[test]
fn fill_keeps_its_contract() {
    let mut src = open("chase:nodes=3,steps=2,init=false").unwrap();
    let mut out = vec![Event::Exit { status: 7 }];
    assert!(src.fill(&mut out, 3).unwrap());
    assert_eq!(out.len(), 4, "appends, never clears, at most max");
    assert!(matches!(out[0], Event::Exit { status: 7 }));
    assert!(
        src.fill(&mut out, 0).unwrap(),
        "max 0 appends nothing but the trace is not over"
    );
    assert_eq!(out.len(), 4);
    assert!(src.fill(&mut out, 100).unwrap());
    assert_eq!(out.len(), 9);
    for _ in 0..3 {
        assert!(!src.fill(&mut out, 100).unwrap());
        assert!(!src.fill(&mut out, 0).unwrap());
        assert_eq!(out.len(), 9);
    }
}

#[test]
fn info_lists_every_effective_parameter() {
    for doc in pagelab_workloads::catalog() {
        let info = open(doc.name).unwrap().info();
        assert_eq!(info.kind, "workload");
        assert_eq!(info.name, doc.name);
        let keys: Vec<&str> = info.params.keys().map(String::as_str).collect();
        let mut expect: Vec<&str> = doc.params.iter().map(|p| p.name).collect();
        expect.sort();
        assert_eq!(keys, expect, "{}", doc.name);
        for p in doc.params {
            assert_eq!(info.params[p.name], p.default, "{} {}", doc.name, p.name);
        }
    }
    // Sizes are shown as people write them, whatever the spelling given.
    let info = open("stride:heap=8192K,page=4096").unwrap().info();
    assert_eq!(
        (info.params["heap"].as_str(), info.params["page"].as_str()),
        ("8M", "4K")
    );
}

#[test]
fn default_set_opens_and_is_sized_for_a_quick_study() {
    let set = pagelab_workloads::default_set();
    // One spec per single-process workload; the many-process ones
    // (shm-fanout, forkexec, prefork) are for `pagelab sharing`, not the study, and
    // `lines` is the loads of `machines --measure`'s probe, not a program.
    let single = pagelab_workloads::catalog()
        .iter()
        .filter(|d| !["shm-fanout", "forkexec", "prefork", "lines"].contains(&d.name))
        .count();
    assert_eq!(set.len(), single);
    let total: u64 = set.iter().map(|s| total_refs(s).unwrap()).sum();
    assert!((10_000_000..=30_000_000).contains(&total), "{total}");
    for s in set {
        open(s).unwrap();
    }
}

#[test]
fn prefork_writes_the_heap_then_each_worker_touches_its_part() {
    // 16 text + 256 heap pages by the server, then 5 workers x 128 pages
    // (touch=0.5), a quarter of them stores spread evenly (every 4th page).
    let spec = "prefork:procs=3,jobs=5,heap=1M,text=64K,touch=0.5,write=0.25,slices=3";
    assert_eq!(total_refs(spec).unwrap(), 16 + 256 + 5 * 128);
    let mut src = open(spec).unwrap();
    let mut ev = Vec::new();
    while src.fill(&mut ev, 1000).unwrap() {}
    let (mut pid, mut live, mut most) = (0, HashSet::new(), 0);
    let mut per: std::collections::BTreeMap<u32, Vec<(u64, AccessKind)>> = Default::default();
    for e in &ev {
        match e {
            Event::Switch(t) => pid = t.pid,
            Event::Fork { child, .. } => {
                assert_eq!(pid, 1, "only the server forks");
                live.insert(*child);
                most = most.max(live.len());
            }
            Event::Exit { .. } => assert!(live.remove(&pid)),
            Event::Ref(r) => per.entry(pid).or_default().push((r.addr.0, r.kind)),
            Event::Map(_) => assert_eq!(pid, 1),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(live.is_empty() && most == 3, "{most} workers at once");
    assert_eq!(per[&1].len(), 272);
    assert_eq!(per.len(), 6);
    for w in 2..=6u32 {
        let r = &per[&w];
        let heap = 0x2000_0000u64;
        let want: Vec<(u64, AccessKind)> = (0..128u64)
            .map(|i| {
                let store = (i + 1) % 4 == 0;
                (
                    heap + i * 4096,
                    if store {
                        AccessKind::Store
                    } else {
                        AccessKind::Load
                    },
                )
            })
            .collect();
        assert_eq!(r, &want, "worker {w}");
    }
}

#[test]
fn lines_visit_the_probes_lines_in_its_order() {
    use pagelab_workloads::{line_offset, visit_order};
    let base = 0x7f3a_1c60_0000; // MMAP_BASE aligned up to 2M, `lines`' default
    for order in ["dependent", "independent"] {
        let spec = format!("lines:lines=64,spacing=4K,steps=130,order={order},init=false");
        let loads: Vec<u64> = data(&refs(&spec)).iter().map(|d| d.0).collect();
        assert_eq!(loads.len(), 130, "{spec}");
        for (i, &a) in loads.iter().enumerate() {
            let line = visit_order(i as u64 % 64, 64);
            assert_eq!(a, base + line_offset(line, 4096), "{spec}: step {i}");
        }
        let first: HashSet<u64> = loads[..64].iter().copied().collect();
        assert_eq!(first.len(), 64, "{spec}: every line once in 64 steps");
    }
    // Line i sits in slot i at the colour i / 32: slots 0-31 at offset 0, 32-63 at 64.
    assert_eq!(line_offset(31, 4096), 31 * 4096);
    assert_eq!(line_offset(32, 4096), 32 * 4096 + 64);
    // Packed lines (spacing 64) have one colour: line i at i x 64.
    assert_eq!(line_offset(1000, 64), 64_000);
}

#[test]
fn lines_visited_in_order_go_slot_by_slot_through_the_same_instructions() {
    use pagelab_workloads::{line_offset, visit_order, Order, Visit};
    let base = 0x7f3a_1c60_0000;
    for order in ["dependent", "independent"] {
        let spec = format!(
            "lines:lines=64,spacing=4K,steps=130,order={order},visit=sequential,init=false"
        );
        let loads: Vec<u64> = data(&refs(&spec)).iter().map(|d| d.0).collect();
        let want: Vec<u64> = (0..130).map(|i| base + line_offset(i % 64, 4096)).collect();
        assert_eq!(loads, want, "{spec}");
        // The same instructions as the random visit: only the addresses differ.
        let random = refs(&spec.replace(",visit=sequential", ""));
        let this = refs(&spec);
        assert_eq!(
            addrs(&random, AccessKind::Instr),
            addrs(&this, AccessKind::Instr),
            "{spec}"
        );
    }
    for count in [2u64, 64, 1 << 20] {
        let (seq, rnd) = (
            Order::new(Visit::Sequential, count),
            Order::new(Visit::Random, count),
        );
        for i in [0, 1, count / 2, count - 1] {
            assert_eq!(seq.at(i), i);
            assert_eq!(rnd.at(i), visit_order(i, count));
        }
    }
    assert_eq!(Visit::default(), Visit::Random);
}

#[test]
fn lines_refuse_what_the_probe_cannot_be() {
    for (spec, key) in [
        ("lines:lines=100", "lines"),
        ("lines:lines=1", "lines"),
        ("lines:spacing=100", "spacing"),
        ("lines:spacing=32", "spacing"),
        ("lines:order=random", "order"),
        ("lines:visit=dependent", "visit"),
    ] {
        let e = open(spec).err().expect(spec).to_string();
        assert!(e.contains(key), "{spec}: {e}");
    }
}
