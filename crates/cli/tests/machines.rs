//! `--machine` end to end: a preset's page sizes and TLB become the defaults,
//! the x86-64 preset gives the same results as no machine, sizes and base
//! pages the machine cannot map are refused, and `pagelab machines` prints
//! the paper's mem_map figures.

mod common;

use common::{pagelab, succeeded};

use std::process::Output;

fn run(args: &[&str]) -> Output {
    let out = pagelab().args(args).output().expect("pagelab runs");
    succeeded(&out);
    out
}

fn fail(args: &[&str]) -> String {
    let out = pagelab().args(args).output().expect("pagelab runs");
    assert_eq!(out.status.code(), Some(1), "pagelab {args:?} should fail");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(!err.contains("panicked"), "{err}");
    err
}

/// The JSON a command writes, without its timing.
fn result(args: &[&str], name: &str) -> serde_json::Value {
    let path = std::env::temp_dir().join(format!(
        "pagelab-machines-{}-{name}.json",
        std::process::id()
    ));
    let p = path.to_str().unwrap();
    let mut all = args.to_vec();
    all.extend(["--json", p]);
    run(&all);
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let _ = std::fs::remove_file(&path);
    // Timing and the command line differ by construction.
    v.as_object_mut().unwrap().remove("elapsed_seconds");
    v.as_object_mut().unwrap().remove("provenance");
    v
}

const W: &str = "gups:updates=20000,table=4M";

/// `sim` under `base:4K` on ia32-pae.
const PAE_4K: [&str; 5] = ["sim", "--machine", "ia32-pae", "--policy", "base:4K"];

#[test]
fn the_x86_64_preset_is_todays_default_machine() {
    for policy in [
        &[][..],
        &["--policy", "base:4K", "--policy", "linux-thp"][..],
    ] {
        let mut plain = vec!["sim", "--workload", W, "--page-sizes", "4K,2M,1G"];
        plain.extend(policy);
        let mut with = plain.clone();
        with.extend(["--machine", "x86-64"]);
        // The same results, and with a policy the kernel's memory besides:
        // 1M pages of 64-byte struct page.
        let mut x86 = result(&with, "x86");
        for run in x86["runs"].as_array_mut().unwrap() {
            if let Some(k) = run.as_object_mut().unwrap().remove("kernel") {
                assert_eq!(k["mem_map_bytes"], 64u64 << 20, "{policy:?}");
            }
        }
        assert_eq!(result(&plain, "plain"), x86, "{policy:?}");
    }
}

#[test]
fn a_machine_gives_its_page_sizes_and_tlb() {
    let v = result(&["sim", "--machine", "ia32-pae", "--workload", W], "pae");
    let sizes: Vec<u64> = v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["page_size"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, [4096, 2 << 20]);
    assert_eq!(v["tlb"]["name"], "pentium3");
    // --tlb replaces the machine's TLB.
    let v = result(
        &[
            "sim",
            "--machine",
            "ia32-pae",
            "--tlb",
            "skylake",
            "--workload",
            W,
        ],
        "pae-sky",
    );
    assert_eq!(v["tlb"]["name"], "skylake");
}

#[test]
fn what_a_machine_cannot_map_is_refused() {
    let e = fail(&[
        "sim",
        "--machine",
        "ia32",
        "--page-sizes",
        "4K,2M",
        "--workload",
        W,
    ]);
    assert!(
        e.contains(
            "--page-sizes 4K,2M: machine ia32 cannot map 2M pages: its page table maps 4K, 4M"
        ),
        "{e}"
    );
    let e = fail(&[
        "sim",
        "--machine",
        "arm64-64k",
        "--policy",
        "base:4K",
        "--workload",
        W,
    ]);
    assert!(e.contains("64K base pages") && e.contains("base:4K"), "{e}");
    // The built-in workloads are 64-bit processes: a 32-bit machine's model refuses them.
    let e = fail(&[&PAE_4K[..], &["--workload", W]].concat());
    assert!(
        e.contains("outside the 32-bit virtual address space"),
        "{e}"
    );
    let e = fail(&[
        "sim",
        "--machine",
        "ia32-pae",
        "--policy",
        "base:4K",
        "--memory",
        "10G",
        "--workload",
        W,
    ]);
    assert!(!e.contains("NUMA"), "10G spreads over 4 nodes: {e}");
    let e = fail(&[
        "sim",
        "--machine",
        "ia32-pae",
        "--policy",
        "base:4K",
        "--memory",
        "512M",
        "--workload",
        W,
    ]);
    assert!(e.contains("--memory 512M: field `phys.highmem`"), "{e}");
    let e = fail(&["sim", "--machine", "vax", "--workload", W]);
    assert!(
        e.contains("unknown machine `vax`") && e.contains("arm64-16k"),
        "{e}"
    );
}

#[test]
fn machines_lists_the_presets_and_the_papers_mem_map() {
    let out = String::from_utf8(run(&["machines"]).stdout).unwrap();
    for name in [
        "ia32-pae",
        "ia32",
        "x86-64",
        "x86-64-la57",
        "arm64-4k",
        "arm64-16k",
        "arm64-64k",
    ] {
        assert!(
            out.contains(&format!("\n{name} - ")) || out.starts_with(&format!("{name} - ")),
            "{name}"
        );
    }
    let one = |args: &[&str]| String::from_utf8(run(args).stdout).unwrap();
    assert!(
        one(&["machines", "ia32-pae"]).contains("mem_map 176M = 19.6% of the 896M of low memory")
    );
    assert!(one(&["machines", "ia32-pae", "--memory", "64G"]).contains("mem_map 704M = 78.6%"));
    let c = one(&[
        "machines",
        "ia32-pae",
        "--memory",
        "64G",
        "--page-cluster",
        "8",
    ]);
    assert!(
        c.contains("44 bytes per 8 pages, mem_map 88M = 9.8%"),
        "{c}"
    );
    let e = fail(&["machines", "ia32-pae", "--page-cluster", "3"]);
    assert!(
        e.contains("--page-cluster 3: 3 is not allowed: pages per cluster is a power of two"),
        "{e}"
    );
}

#[test]
fn numa_placement_and_memory_policy_from_the_command_line() {
    let numa = |extra: &[&str], name: &str| {
        let shm = [
            "--workload",
            "shm-fanout:procs=8,segment=64M",
            "--bind",
            "0,4",
        ];
        let args = [&PAE_4K[..], &shm, extra].concat();
        result(&args, name)["runs"][0]["numa"].clone()
    };
    let per_node = |n: &serde_json::Value, f: &str| -> Vec<u64> {
        let nodes = n["nodes"].as_array().unwrap();
        nodes.iter().map(|x| x[f].as_u64().unwrap()).collect()
    };
    // The parent on CPU 0, the children on CPUs 4, 0, 4, ...: the first
    // child (node 1) faults the 16384 shared pages in, all on its own node;
    // each of the 8 children reads every page, 4 of them from node 0.
    let n = numa(&[], "local");
    assert_eq!(per_node(&n, "processes"), [5, 4, 0, 0]);
    assert_eq!(per_node(&n, "allocs"), [0, 16384, 0, 0]);
    assert_eq!(
        (n["local_refs"].as_u64(), n["remote_refs"].as_u64()),
        (Some(65536), Some(65536))
    );
    // Interleaved over the four nodes: a quarter of the pages on each, and
    // each child finds a quarter of them on its own node.
    let n = numa(&["--mempolicy", "interleave:all"], "interleave");
    assert_eq!(per_node(&n, "allocs"), [4096; 4]);
    assert_eq!(
        (n["local_allocs"].as_u64(), n["remote_allocs"].as_u64()),
        (Some(4096), Some(12288))
    );
    assert_eq!(
        (n["local_refs"].as_u64(), n["remote_refs"].as_u64()),
        (Some(32768), Some(98304))
    );
    let base = [&PAE_4K[..], &["--workload", W]].concat();
    let e = fail(&[&base[..], &["--bind", "0-31"]].concat());
    assert!(
        e.contains("--bind: CPU 16 does not exist: the machine has 16 CPUs (0..=15)"),
        "{e}"
    );
    let e = fail(&[&base[..], &["--bind", "2-1"]].concat());
    assert!(e.contains("--bind 2-1: `2-1` is an empty range"), "{e}");
    let e = fail(&[&base[..], &["--mempolicy", "membind:4"]].concat());
    assert!(
        e.contains("--mempolicy membind:4: node 4 does not exist: the machine has 4 nodes"),
        "{e}"
    );
    let e = fail(&[
        "sim",
        "--machine",
        "x86-64",
        "--policy",
        "base:4K",
        "--workload",
        W,
        "--bind",
        "0",
    ]);
    assert!(e.contains("--bind: the machine has one NUMA node"), "{e}");
}

#[test]
fn asids_beyond_the_tag_bits_are_refused() {
    // The hand-computed cases are in crates/engine/tests/asids.rs.
    let la57 = ["sim", "--machine", "x86-64-la57", "--policy", "base:4K"];
    let e = fail(&[&la57[..], &["--asids", "200", "--workload", W]].concat());
    assert!(
        e.contains("--asids 200: at most 128 on a machine of 57-bit virtual addresses"),
        "{e}"
    );
    run(&[&la57[..], &["--asids", "128", "--workload", W]].concat());
    let out = pagelab()
        .args([
            "sim",
            "--policy",
            "base:4K",
            "--asids",
            "0",
            "--workload",
            W,
        ])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && e.contains("--asids"), "{e}");
}

/// A short forkexec churn on ia32-pae with the paper's per-CPU lists and
/// without them (`--pcp off`).
fn churn(pcp: &str, name: &str) -> serde_json::Value {
    let fe = ["--workload", "forkexec:procs=8,jobs=24", "--pcp", pcp];
    result(&[&PAE_4K[..], &fe].concat(), name)["runs"][0].clone()
}

#[test]
fn per_cpu_lists_serve_most_order_0_allocations_of_a_forkexec_churn() {
    let on = churn("on", "pcp-on");
    let off = churn("off", "pcp-off");
    let p = &on["pcp"];
    let n = |f: &str| p[f].as_u64().unwrap();
    assert_eq!((n("batch"), p["hot"]["low"].as_u64()), (16, Some(32)));
    let served = n("pcp_allocs_hot") + n("pcp_allocs_cold");
    // base:4K allocates only base pages: the lists serve all of them but
    // those made when a list was empty after its refill (none here), and
    // the page cache's reads come from the cold lists.
    assert!(n("pcp_allocs_cold") > 0, "{p}");
    assert!(served * 100 >= 99 * (served + n("buddy_allocs")), "{p}");
    assert_eq!(
        served + n("buddy_allocs"),
        on["numa"]["local_allocs"].as_u64().unwrap()
            + on["numa"]["remote_allocs"].as_u64().unwrap()
    );
    // One lock per batch instead of one per allocation and free: most saved.
    let (with, without) = (
        n("buddy_lock_acquisitions"),
        n("buddy_lock_acquisitions_without_lists"),
    );
    assert!(with * 5 < without, "{p}");
    assert_eq!(
        p["buddy_lock_acquisitions_saved"].as_i64(),
        Some(without as i64 - with as i64)
    );
    // Without lists nothing is counted, and what does not depend on which
    // frames are handed out is the same.
    assert!(off.get("pcp").is_none());
    for f in [
        "faults",
        "dtlb_misses",
        "itlb_misses",
        "rss_bytes",
        "peak_rss_bytes",
        "page_table_bytes",
        "zeroed_bytes",
        "copied_bytes",
        "kernel",
    ] {
        assert_eq!(on[f], off[f], "{f}");
    }
    for f in ["local_allocs", "remote_allocs", "local_refs", "remote_refs"] {
        assert_eq!(on["numa"][f], off["numa"][f], "numa.{f}");
    }
    // Bad settings name the flag and what is allowed.
    let base = [&PAE_4K[..], &["--workload", W]].concat();
    let e = fail(&[&base[..], &["--pcp", "hot=96-32"]].concat());
    assert!(
        e.contains("--pcp hot=96-32: pcp.hot: low 96 and high 32 are not allowed"),
        "{e}"
    );
    let e = fail(&[&base[..], &["--pcp", "size=3"]].concat());
    assert!(e.contains("`size` is not a setting of the lists"), "{e}");
}

#[test]
fn machines_measure_writes_a_machine_file_that_times_a_run() {
    let dir = common::tmp("measure");
    let file = dir.join("here.toml");
    let f = file.to_str().unwrap();
    let out = run(&[
        "machines",
        "--measure",
        "--base",
        "emeraldrapids",
        "--max",
        "8M",
        "--repeat",
        "1",
        "-o",
        f,
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    for want in [
        "footprint",
        "L1: ",
        "L2: ",
        "memory:",
        "4K frames",
        "a walk's own cost: ",
        "misses in flight:",
        "walks: one line in each of ",
        "host page: ",
        "walk_interval = ",
        "host blocks: ",
        "the probe's loads (",
        "model/measured",
        "wrote",
    ] {
        assert!(text.contains(want), "{want} missing from:\n{text}");
    }
    // The walk and host-page probes take half the L2 in lines, the same count in both, and
    // the model's rows follow them: one per layout, page and order.
    let count = |after: &str, before: &str| -> u64 {
        let rest = &text[text.find(after).unwrap() + after.len()..];
        rest[..rest.find(before).unwrap()].parse().unwrap()
    };
    let pages = count("walks: one line in each of ", " 4K pages");
    // The walk's pages drawn from a pool of their own 2M blocks, or why not.
    assert!(
        text.contains(" pool of 2M blocks, as many as the spread lines fall in")
            || text.contains("; no pool: "),
        "{text}"
    );
    assert!(
        pages.is_power_of_two() && (4096..=16384).contains(&pages),
        "{pages}"
    );
    assert_eq!(count("host page: ", " lines on 2M-advised pages"), pages);
    assert_eq!(count("the probe's loads (", " lines)"), pages);
    let rows = text
        .lines()
        .filter(|l| l.starts_with("one per 4K over ") || l.starts_with("packed into "))
        .count();
    assert_eq!(rows, 6, "{text}");
    // Beside them, the spread lines visited in address order, on 4K and 2M-advised pages,
    // dependent and independent.
    let in_order = text
        .lines()
        .filter(|l| l.starts_with("the same, in order "))
        .count();
    assert_eq!(in_order, 4, "{text}");
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(
        written.contains("name = \"emeraldrapids-measured\""),
        "{written}"
    );
    assert!(written.contains("ns per dependent step"), "{written}");
    // The measured overlap: whole numbers of misses and walks in flight.
    let m: toml::Table = toml::from_str(&written).unwrap();
    let o = m["overlap"].as_table().unwrap();
    for k in ["miss_buffers", "walkers"] {
        assert!(o[k].as_integer().unwrap() >= 1, "{k} in {written}");
    }
    // Walkers measured as what a walk adds to a load are read so: the clock adds their share.
    if text.contains("walks in flight: walkers = ") {
        assert_eq!(o["walks"].as_str(), Some("additive"), "{written}");
    }
    // The host page, where THP gave the probe 2M pages: 4K or 2M, and the line says which.
    let found = m
        .get("nested")
        .and_then(|n| n.get("host_page"))
        .and_then(|p| p.as_str());
    match found {
        Some(p) => {
            assert!(p == "4K" || p == "2M", "{written}");
            assert!(text.contains(&format!("host_page = {p}")), "{text}");
        }
        None => assert!(text.contains("the base's kept"), "{text}"),
    }
    // A walk's own cost, in cycles, and as root where the probe's frames lay.
    let walk = m["costs"]
        .get("walk")
        .map_or(0, |w| w.as_integer().unwrap());
    assert!(
        text.contains(&format!("walk = {walk} cycles")) || walk == 0,
        "{text}"
    );
    if let Some(f) = m.get("frames") {
        assert_eq!(f["placement"].as_str(), Some("scattered"), "{written}");
        let n = f["neighbours"].as_float().unwrap();
        assert!((0.0..=1.0).contains(&n), "{written}");
        assert!(text.contains("4K frames (the in-order lines' "), "{text}");
    } else {
        assert!(text.contains("pagemap hides frame numbers"), "{text}");
    }
    // The host's block translations: as root, the pooled kernels' rows and what they gave,
    // written into [nested] when a fit was found; else why not.
    let miss = m
        .get("nested")
        .and_then(|n| n.get("block_miss"))
        .and_then(|e| e.as_integer());
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert!(
            text.contains("host blocks: not measured (needs root"),
            "{text}"
        );
        assert_eq!(miss, None, "{written}");
    } else if !text.contains("host blocks: not measured") {
        let rows = text
            .lines()
            .filter(|l| l.contains(" blocks): measured "))
            .count();
        assert!(rows >= 4, "{text}");
        // Measured, the blocks are always held in the TLB (session 55): at the chase's
        // fit as it stood, bounded by the stride over the most blocks (the guest's
        // measurement decides which), or at no cycles of their own.
        let e = miss.unwrap_or_else(|| panic!("no block_miss written:\n{written}\n{text}"));
        assert!(
            text.contains(&format!("at block_miss = {e};"))
                || text.contains(&format!("the stride bounds it to {e}: block_miss = {e};"))
                || (e == 0 && text.contains("at no cycles of their own: block_miss = 0")),
            "{text}"
        );
        let interval = m["nested"]["block_interval"].as_integer().unwrap();
        assert!((0..=e).contains(&interval), "{written}");
        if text.contains("block_interval = ") {
            assert!(
                text.contains(&format!("block_interval = {interval}\n")),
                "{text}"
            );
        }
        // Each row gives the model with the blocks beside the measurement.
        assert_eq!(
            rows,
            text.lines()
                .filter(|l| l.contains(" without the blocks, ") && l.contains(" with them ("))
                .count(),
            "{text}"
        );
        assert!(!written.contains("block_entries"), "{written}");
    }
    // The file is a machine that times a run.
    let v = result(
        &[
            "sim",
            "--machine",
            f,
            "--workload",
            "chase:nodes=4096,steps=20000",
            "--page-sizes",
            "4K,2M",
        ],
        "measured",
    );
    let runs = v["runs"].as_array().unwrap();
    assert!(
        runs.iter()
            .all(|r| r["cost"]["cycles"].as_u64().unwrap() > 0),
        "{v}"
    );
}

#[test]
fn machines_measure_refuses_bad_options_saying_which() {
    let err = fail(&["machines", "--measure", "--max", "1K", "-o", "/dev/null"]);
    assert!(err.contains("at least the smallest"), "{err}");
    let err = fail(&[
        "machines",
        "--measure",
        "--base",
        "nosuch",
        "-o",
        "/dev/null",
    ]);
    assert!(
        err.contains("--base nosuch") && err.contains("zen4"),
        "{err}"
    );
    let err = fail(&[
        "machines",
        "--measure",
        "--base",
        "x86-64",
        "-o",
        "/dev/null",
    ]);
    assert!(err.contains("no [caches]"), "{err}");
    let err = fail(&["machines", "--measure", "--max", "lots", "-o", "/dev/null"]);
    assert!(err.contains("--max lots"), "{err}");
}
