//! Allocation on a NUMA machine (004 paper, section 9) against hand-computed
//! cases and a simple reference model: the local node first, then
//! round-robin by node number upward; `membind`, `interleave`, `preferred`;
//! processes placed on CPUs round-robin; local and remote allocations and
//! references counted. All on tests/data/numa-small.toml: four nodes of 16M
//! (4096 frames), CPUs 2n and 2n+1 on node n, no reclaim.

use crate::common;

use common::{load, machine, run, run_with, store, switch};
use pagelab_core::Event;
use pagelab_mm::phys::nodes::MemPolicy;
use serde_json::Value;

const PAGE: u64 = 4096;
const NODE_PAGES: u64 = 4096;

/// `pid` runs and writes `pages` consecutive pages from `base`, then reads each once more.
fn touch(pid: u32, base: u64, pages: u64) -> Vec<Event> {
    let mut ev = vec![switch(pid)];
    ev.extend((0..pages).map(|p| store(base + p * PAGE)));
    ev.extend((0..pages).map(|p| load(base + p * PAGE + 8)));
    ev
}

fn numa(mm: &Value) -> &Value {
    &mm["numa"]
}

fn per_node(n: &Value, field: &str) -> Vec<u64> {
    n["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x[field].as_u64().unwrap())
        .collect()
}

fn policy(p: &str) -> impl FnOnce(&mut pagelab_mm::platform::Platform) + '_ {
    move |pl| pl.placement.policy = p.parse::<MemPolicy>().unwrap().resolve_all(4)
}

#[test]
fn a_full_local_node_falls_back_upward() {
    let m = machine("numa-small.toml");
    // One process on CPU 0 (node 0) writes 20M: 16M local, then 4M on node 1.
    let mm = run(&m, touch(1, 1 << 30, NODE_PAGES + 1024)).unwrap();
    let n = numa(&mm);
    assert_eq!(n["policy"], "local");
    assert_eq!(
        (n["local_allocs"].as_u64(), n["remote_allocs"].as_u64()),
        (Some(4096), Some(1024))
    );
    assert_eq!(n["remote_alloc_bytes"], 1024 * PAGE);
    assert_eq!(per_node(n, "allocs"), [4096, 1024, 0, 0]);
    // Every page written once and read once: references follow the pages.
    assert_eq!(per_node(n, "refs"), [2 * 4096, 2 * 1024, 0, 0]);
    assert_eq!(n["remote_refs"], 2 * 1024);
    // A process bound to CPU 4 (node 2) by --bind writes 34M: nodes 2 and
    // 3 fill, and the fallback wraps round to node 0.
    let ev = touch(7, 1 << 30, 2 * NODE_PAGES + 512);
    let mm = run_with(&m, |p| p.placement.cpus = Some(vec![4]), ev).unwrap();
    assert_eq!(per_node(numa(&mm), "allocs"), [512, 0, 4096, 4096]);
    assert_eq!(per_node(numa(&mm), "processes"), [0, 0, 1, 0]);
}

#[test]
fn processes_go_to_cpus_round_robin() {
    let m = machine("numa-small.toml");
    let mut ev = Vec::new();
    for pid in 1..=5 {
        ev.extend(touch(pid, 1 << 30, 10));
    }
    // CPUs 0..4 in turn: nodes 0, 0, 1, 1, 2; each process's pages are local.
    let mm = run(&m, ev.clone()).unwrap();
    assert_eq!(per_node(numa(&mm), "processes"), [2, 2, 1, 0]);
    assert_eq!(per_node(numa(&mm), "allocs"), [20, 20, 10, 0]);
    assert_eq!(numa(&mm)["remote_allocs"], 0);
    // On CPUs 0, 2, 4, 6 only: one node each, the fifth back on node 0.
    let mm = run_with(&m, |p| p.placement.cpus = Some(vec![0, 2, 4, 6]), ev).unwrap();
    assert_eq!(per_node(numa(&mm), "processes"), [2, 1, 1, 1]);
}

#[test]
fn interleave_membind_and_preferred() {
    let m = machine("numa-small.toml");
    // interleave: page i on node i mod 4, from node 0, for the one process on node 0.
    let mm = run_with(&m, policy("interleave:all"), touch(1, 1 << 30, 10)).unwrap();
    let n = numa(&mm);
    assert_eq!(n["policy"], "interleave:0,1,2,3");
    assert_eq!(per_node(n, "allocs"), [3, 3, 2, 2]);
    assert_eq!(
        (n["local_allocs"].as_u64(), n["remote_allocs"].as_u64()),
        (Some(3), Some(7))
    );
    // Each process keeps its own turn: two processes of 3 pages on 1,3.
    let mut ev = touch(1, 1 << 30, 3);
    ev.extend(touch(2, 1 << 30, 3));
    let mm = run_with(&m, policy("interleave:1,3"), ev).unwrap();
    assert_eq!(per_node(numa(&mm), "allocs"), [0, 4, 0, 2]);
    // membind:1 from node 0: all remote; past node 1's 16M the run fails.
    let mm = run_with(&m, policy("membind:1"), touch(1, 1 << 30, 100)).unwrap();
    assert_eq!(per_node(numa(&mm), "allocs"), [0, 100, 0, 0]);
    assert_eq!(numa(&mm)["remote_refs"], 200);
    let e = run_with(&m, policy("membind:1"), touch(1, 1 << 30, NODE_PAGES + 1)).unwrap_err();
    assert!(e.contains("out of memory") || e.contains("memory"), "{e}");
    // preferred:3: node 3, then upward from it: node 0.
    let mm = run_with(&m, policy("preferred:3"), touch(1, 1 << 30, NODE_PAGES + 5)).unwrap();
    assert_eq!(per_node(numa(&mm), "allocs"), [5, 0, 0, 4096]);
}

#[test]
fn distances_order_the_fallback() {
    let text = std::fs::read_to_string(format!(
        "{}/tests/data/numa-small.toml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    // Node 0 is nearer node 2 than node 1 or 3: its overflow goes to node 2.
    let d = [
        "[10, 30, 20, 30]",
        "[30, 10, 30, 20]",
        "[20, 30, 10, 30]",
        "[30, 20, 30, 10]",
    ];
    let mut t = text.clone();
    for (i, cpus) in ["[0, 1] }", "[2, 3] }", "[4, 5] }", "[6, 7] }"]
        .iter()
        .enumerate()
    {
        t = t.replace(
            cpus,
            &format!("{}, distances = {} }}", &cpus[..cpus.len() - 2], d[i]),
        );
    }
    let m = pagelab_machine::Machine::from_toml_str(&t, "numa-distances").unwrap();
    let mm = run(&m, touch(1, 1 << 30, NODE_PAGES + 7)).unwrap();
    assert_eq!(per_node(numa(&mm), "allocs"), [4096, 0, 7, 0]);
    // A node 10 from another is refused, naming the field.
    let bad = t.replace("[10, 30, 20, 30]", "[10, 10, 20, 30]");
    let e = pagelab_machine::Machine::from_toml_str(&bad, "bad.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("bad.toml")
            && e.contains("numa.nodes.distances")
            && e.contains("node 0 to node 1"),
        "{e}"
    );
}

#[test]
fn bad_numa_input_names_the_field() {
    let text = std::fs::read_to_string(format!(
        "{}/tests/data/numa-small.toml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let empty = text.replace(
        "{ memory = \"16M\", cpus = [2, 3] }",
        "{ memory = 0, cpus = [2, 3] }",
    );
    let e = pagelab_machine::Machine::from_toml_str(&empty, "empty.toml")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("empty.toml") && e.contains("numa.nodes.memory") && e.contains("node 1"),
        "{e}"
    );
    let m = machine("numa-small.toml");
    let e = run_with(&m, policy("membind:4"), touch(1, 0, 1)).unwrap_err();
    assert!(
        e.contains("--mempolicy membind:4")
            && e.contains("node 4 does not exist")
            && e.contains("0..=3"),
        "{e}"
    );
    let e = run_with(&m, |p| p.placement.cpus = Some(vec![8]), touch(1, 0, 1)).unwrap_err();
    assert!(
        e.contains("--bind") && e.contains("CPU 8 does not exist"),
        "{e}"
    );
    for bad in [
        "membind",
        "interleave:x",
        "preferred:1,2",
        "spread:1",
        "membind:3-1",
    ] {
        assert!(bad.parse::<MemPolicy>().is_err(), "{bad}");
    }
}

/// The reference: every first touch takes a frame from the first node of
/// the policy's order with a frame left; processes on CPUs 0, 1, 2, ... in
/// the order they first run.
fn reference(touches: &[(u32, u64)], interleave: bool) -> (Vec<u64>, u64, u64, u64, u64) {
    let mut free = [NODE_PAGES; 4];
    let mut cpu_of = std::collections::HashMap::new();
    let mut turn = std::collections::HashMap::new();
    let mut page_node = std::collections::HashMap::new();
    let mut allocs = vec![0u64; 4];
    let (mut la, mut ra, mut lr, mut rr) = (0, 0, 0, 0);
    for &(pid, page) in touches {
        let n = cpu_of.len() as u64;
        let local = (*cpu_of.entry(pid).or_insert(n % 8) / 2) as usize;
        let node = *page_node.entry((pid, page)).or_insert_with(|| {
            let start = if interleave {
                let t = turn.entry(pid).or_insert(0usize);
                *t += 1;
                (*t - 1) % 4
            } else {
                local
            };
            let node = (0..4)
                .map(|k| (start + k) % 4)
                .find(|&k| free[k] > 0)
                .unwrap();
            free[node] -= 1;
            allocs[node] += 1;
            if node == local {
                la += 1
            } else {
                ra += 1
            }
            node
        });
        if node == local {
            lr += 1
        } else {
            rr += 1
        }
    }
    (allocs, la, ra, lr, rr)
}

#[test]
fn random_streams_agree_with_the_reference() {
    let m = machine("numa-small.toml");
    for seed in 1..=6u64 {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // Four processes (CPUs 0-3: nodes 0, 0, 1, 1), each touching pages
        // of a 16M private region: the 64M never runs out, but node 0's two
        // processes overflow it; many touches repeat.
        let mut touches = Vec::new();
        let mut events = Vec::new();
        let mut pid = 0;
        for _ in 0..300 {
            let r = next();
            if r % 5 == 0 || pid == 0 {
                pid = 1 + (r >> 8) as u32 % 4;
                events.push(switch(pid));
            }
            let burst = 1 + (next() % 200);
            let start = next() % NODE_PAGES;
            for p in start..(start + burst).min(NODE_PAGES) {
                touches.push((pid, p));
                events.push(store((1 << 30) + p * PAGE));
            }
        }
        for interleave in [false, true] {
            let (allocs, la, ra, lr, rr) = reference(&touches, interleave);
            let mm = if interleave {
                run_with(&m, policy("interleave:all"), events.clone())
            } else {
                run(&m, events.clone())
            }
            .unwrap();
            let n = numa(&mm);
            let got = (
                per_node(n, "allocs"),
                n["local_allocs"].as_u64().unwrap(),
                n["remote_allocs"].as_u64().unwrap(),
                n["local_refs"].as_u64().unwrap(),
                n["remote_refs"].as_u64().unwrap(),
            );
            assert_eq!(
                got,
                (allocs, la, ra, lr, rr),
                "seed {seed}, interleave {interleave}"
            );
        }
    }
}

#[test]
fn one_node_machines_report_no_numa() {
    let mut m = pagelab_machine::preset("x86-64").unwrap();
    m.set_phys(
        pagelab_mm::phys::PhysConfig::new(pagelab_core::Bytes(64 << 20)),
        "test",
    )
    .unwrap();
    let mm = run(&m, touch(1, 1 << 30, 4)).unwrap();
    assert!(mm.get("numa").is_none());
}
