//! The machine presets against the manuals they cite, Bligh and Hansen's (OLS 2003) mem_map
//! figures in closed form, and every kind of self-contradiction refused with
//! the file, the field and what is allowed.

use pagelab_core::{Bytes, PageSize};
use pagelab_machine::{preset, preset_names, preset_text, Machine, MachineError};
use pagelab_mm::pagetable::Geometry;
use pagelab_mm::phys::PcpConfig;

fn sizes(m: &Machine) -> String {
    m.page_sizes
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn every_preset_loads_under_its_own_name() {
    let names = preset_names();
    assert!(names.len() >= 7);
    for name in names {
        let m = preset(name).unwrap();
        assert_eq!(m.name, name);
        assert!(!m.source.is_empty(), "{name} has no source");
        // Its TOML starts with a comment saying where the numbers come from.
        assert!(preset_text(name).unwrap().starts_with('#'), "{name}");
    }
}

#[test]
fn presets_have_the_geometry_of_their_manuals() {
    // (name, entries per level root first, entry bytes, VA bits, MMU page sizes)
    let want: &[(&str, &[u64], u64, u32, &str)] = &[
        ("ia32-pae", &[4, 512, 512], 8, 32, "4K,2M"),
        ("ia32", &[1024, 1024], 4, 32, "4K,4M"),
        ("x86-64", &[512, 512, 512, 512], 8, 48, "4K,2M,1G"),
        ("x86-64-la57", &[512; 5], 8, 57, "4K,2M,1G"),
        ("arm64-4k", &[512; 4], 8, 48, "4K,64K,2M,32M,1G"),
        ("arm64-16k", &[2, 2048, 2048, 2048], 8, 48, "16K,2M,32M,1G"),
        ("arm64-64k", &[64, 8192, 8192], 8, 48, "64K,2M,512M"),
    ];
    for &(name, entries, bytes, va, ps) in want {
        let m = preset(name).unwrap();
        let g = m.geometry;
        let got: Vec<u64> = (1..=g.levels()).rev().map(|l| g.entries(l)).collect();
        assert_eq!(got, entries, "{name}");
        assert_eq!((g.entry_bytes(), g.va_bits()), (bytes, va), "{name}");
        assert_eq!(sizes(&m), ps, "{name}");
    }
    // The x86-64 presets are exactly the geometries a run without --machine uses.
    assert_eq!(preset("x86-64").unwrap().geometry, Geometry::x86_64());
    assert_eq!(
        preset("x86-64-la57").unwrap().geometry,
        Geometry::x86_64_la57()
    );
    assert_eq!(preset("arm64-64k").unwrap().geometry, Geometry::arm64_64k());
    // arm64's contiguous blocks: 16 x 2M = 32M with 4K, 32 x 32M = 1G with 16K.
    let a4 = preset("arm64-4k").unwrap().geometry;
    assert_eq!(a4.placement("32M".parse().unwrap()).unwrap().run_shift, 4);
    let a16 = preset("arm64-16k").unwrap().geometry;
    assert_eq!(a16.placement(PageSize::G1).unwrap().level, 2);
}

#[test]
fn the_numa_q_has_four_quads_and_896m_of_low_memory() {
    let m = preset("ia32-pae").unwrap();
    assert_eq!(m.numa.cpus, 16);
    assert_eq!(m.numa.nodes.len(), 4);
    assert!(m
        .numa
        .nodes
        .iter()
        .all(|n| n.memory == Bytes(4 << 30) && n.cpus.len() == 4));
    assert_eq!(m.phys.highmem, Some(Bytes(896 << 20)));
    let zones: Vec<(String, u64)> = m
        .phys
        .zone_sizes()
        .unwrap()
        .into_iter()
        .map(|(k, b)| (k.name().to_string(), b >> 20))
        .collect();
    let want = [("dma", 16), ("normal", 880), ("highmem", 16 * 1024 - 896)];
    assert_eq!(zones, want.map(|(k, b)| (k.to_string(), b)).to_vec());
}

/// The paper's section 2: mem_map takes 19% of the kernel's space at 16G, 78%
/// at 64G and 9% at 64G with 8-page clusters (percentages it truncates).
#[test]
fn mem_map_reproduces_the_papers_percentages() {
    let mut m = preset("ia32-pae").unwrap();
    let pct = |m: &Machine| (m.kernel_memory().mem_map_low_fraction().unwrap() * 100.0).floor();
    // Closed form: pages / cluster x 44 bytes.
    assert_eq!(m.kernel_memory().mem_map_bytes, (16u64 << 30) / 4096 * 44);
    assert_eq!(pct(&m), 19.0);
    let mut phys = m.phys.clone();
    phys.memory = Bytes(64 << 30);
    m.set_phys(phys, "--memory 64G").unwrap();
    assert_eq!(m.numa.nodes[3].memory, Bytes(16 << 30));
    assert_eq!(m.kernel_memory().mem_map_bytes, 704 << 20);
    assert_eq!(pct(&m), 78.0);
    m.kernel.page_cluster = 8;
    assert_eq!(m.kernel_memory().mem_map_bytes, 88 << 20);
    assert_eq!(pct(&m), 9.0);
    // A partial cluster still needs its structure.
    m.kernel.page_cluster = 1024;
    let k = m.kernel.mem_map_bytes(Bytes(4096 * 1025), 4096);
    assert_eq!(k, 2 * 44);
}

/// A preset's text with one line replaced, parsed as a file of that name.
fn edited(name: &str, from: &str, to: &str) -> Result<Machine, MachineError> {
    let text = preset_text(name).unwrap();
    assert!(text.contains(from), "{name} has no `{from}`");
    Machine::from_toml_str(&text.replacen(from, to, 1), "my.toml")
}

fn refused(name: &str, from: &str, to: &str, field: &str, says: &[&str]) {
    let e = edited(name, from, to).unwrap_err();
    let msg = e.to_string();
    assert!(msg.starts_with("my.toml: "), "{msg}");
    assert!(msg.contains(&format!("field `{field}`")), "{msg}");
    for s in says {
        assert!(msg.contains(s), "`{msg}` does not say `{s}`");
    }
}

#[test]
fn contradictions_name_the_file_the_field_and_what_is_allowed() {
    // A page size its geometry cannot map.
    refused(
        "ia32",
        r#"page_sizes = ["4K", "4M"]"#,
        r#"page_sizes = ["4K", "2M"]"#,
        "mmu.page_sizes",
        &["2M cannot be mapped", "4K, 4M"],
    );
    refused(
        "x86-64",
        r#"page_sizes = ["4K", "2M", "1G"]"#,
        r#"page_sizes = ["2M", "4K"]"#,
        "mmu.page_sizes",
        &["base page 4K"],
    );
    // Zones larger than memory.
    refused(
        "ia32-pae",
        r#"highmem = "896M""#,
        r#"highmem = "20G""#,
        "phys.highmem",
        &["low memory cannot be larger than memory"],
    );
    refused(
        "ia32-pae",
        r#"dma = "16M""#,
        r#"dma = "17G""#,
        "phys.dma",
        &["no larger than memory"],
    );
    // High memory on a 64-bit kernel.
    refused(
        "x86-64",
        "[phys]\n",
        "[phys]\nhighmem = \"1G\"\n",
        "phys.highmem",
        &["only a 32-bit kernel"],
    );
    // More CPUs named than exist; a CPU on two nodes; one on none.
    refused(
        "ia32-pae",
        "cpus = [12, 13, 14, 15]",
        "cpus = [12, 13, 14, 16]",
        "numa.nodes.cpus",
        &["CPU 16", "16 CPUs"],
    );
    refused(
        "ia32-pae",
        "cpus = [12, 13, 14, 15]",
        "cpus = [12, 13, 14, 3]",
        "numa.nodes.cpus",
        &["CPU 3 is on node 0 and on node 3"],
    );
    refused(
        "ia32-pae",
        "cpus = [12, 13, 14, 15]",
        "cpus = [12, 13, 14]",
        "numa.nodes.cpus",
        &["CPU 15 is on no node"],
    );
    // Nodes that do not add up to memory.
    refused(
        "ia32-pae",
        r#"{ memory = "4G", cpus = [0"#,
        r#"{ memory = "8G", cpus = [0"#,
        "numa.nodes.memory",
        &["20G in all", "16G"],
    );
    // A geometry that cannot exist, a struct page or cluster out of range, a bad TLB.
    refused(
        "ia32",
        "leaf_levels = [1, 2]",
        "leaf_levels = [2]",
        "page_table.leaf_levels",
        &["level 1"],
    );
    refused(
        "ia32-pae",
        "struct_page_bytes = 44",
        "struct_page_bytes = 0",
        "kernel.struct_page_bytes",
        &["1 to 4096"],
    );
    refused(
        "ia32-pae",
        "struct_page_bytes = 44",
        "struct_page_bytes = 44\npage_cluster = 3",
        "kernel.page_cluster",
        &["power of two"],
    );
    refused(
        "x86-64",
        "name = \"x86-64\"",
        "name = \"x86-64\"\ntlb = \"no-such\"",
        "tlb",
        &["weisberg"],
    );
    refused(
        "ia32-pae",
        "entries = 8, ways = 4",
        "entries = 8, ways = 3",
        "tlb",
        &["ways"],
    );
    // An unknown field is a parse error naming it and its line.
    let e = edited("x86-64", "[kernel]\n", "[kernel]\nstruct_pages = 1\n").unwrap_err();
    assert!(matches!(e, MachineError::Parse { .. }), "{e}");
    assert!(
        e.to_string().contains("struct_pages") && e.to_string().contains("line"),
        "{e}"
    );
}

#[test]
fn overrides_are_checked_against_the_machine() {
    let mut m = preset("ia32-pae").unwrap();
    let mut phys = m.phys.clone();
    phys.memory = Bytes((10 << 30) + 4096);
    let e = m.set_phys(phys, "--memory 10G").unwrap_err().to_string();
    assert!(e.contains("4 NUMA nodes"), "{e}");
    let mut phys = m.phys.clone();
    phys.memory = Bytes(512 << 20);
    let e = m.set_phys(phys, "--memory 512M").unwrap_err().to_string();
    assert!(e.contains("--memory 512M: field `phys.highmem`"), "{e}");
    assert!(m.check_sizes(&["2M".parse().unwrap()]).is_ok());
    let e = m.check_sizes(&["4M".parse().unwrap()]).unwrap_err();
    assert!(
        e.contains("ia32-pae cannot map 4M pages: its page table maps 4K, 2M"),
        "{e}"
    );
    let e = pagelab_machine::resolve("nope").unwrap_err().to_string();
    assert!(e.contains("ia32-pae") && e.contains(".toml"), "{e}");
    let e = pagelab_machine::resolve("/nonexistent/m.toml")
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent/m.toml"), "{e}");
}

#[test]
fn the_per_cpu_lists_are_the_papers_and_their_errors_name_file_line_and_field() {
    // ia32-pae gives the paper's values; a `[pcp]` without fields means them too.
    let pae = preset("ia32-pae").unwrap();
    assert_eq!(pae.pcp, Some(PcpConfig::PAPER));
    assert!(pae.describe().contains("batch 16, hot 32-96, cold 0-32"));
    let empty = edited("x86-64", "[kernel]\n", "[pcp]\n\n[kernel]\n").unwrap();
    assert_eq!(empty.pcp, Some(PcpConfig::PAPER));
    let some = edited("x86-64", "[kernel]\n", "[pcp]\nbatch = 8\n\n[kernel]\n").unwrap();
    assert_eq!(some.pcp.map(|p| (p.batch, p.hot.high)), Some((8, 96)));
    // No section: no lists (the other presets keep their results).
    assert_eq!(preset("x86-64").unwrap().pcp, None);
    // Values that cannot be: the file, the line of the section and the field.
    let line = |text: &str, from: &str| {
        let at = text.find(from).unwrap();
        text[..at].lines().count() + 1
    };
    let text = preset_text("ia32-pae").unwrap();
    for (from, to, field, says) in [
        (
            "hot = { low = 32, high = 96 }",
            "hot = { low = 96, high = 32 }",
            "pcp.hot",
            "low 96 and high 32 are not allowed",
        ),
        ("batch = 16", "batch = 0", "pcp.batch", "1 to 65536"),
        (
            "cold = { low = 0, high = 32 }",
            "cold = { low = 0, high = 100000 }",
            "pcp.cold",
            "at most 65536",
        ),
        ("batch = 16", "batches = 16", "batches", "unknown field"),
        (
            "cold = { low = 0, high = 32 }",
            "cold = { low = 0, hihg = 32 }",
            "hihg",
            "unknown field",
        ),
    ] {
        let e = edited("ia32-pae", from, to).unwrap_err();
        assert!(matches!(e, MachineError::Parse { .. }), "{e}");
        let msg = e.to_string();
        assert!(msg.starts_with("my.toml: "), "{msg}");
        assert!(msg.contains(field) && msg.contains(says), "{msg}");
        // toml points at the section or the value: at or after `[pcp]`.
        let at: usize = msg
            .split("line ")
            .nth(1)
            .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no line in {msg}"));
        assert!(
            (line(text, "[pcp]")..=line(text, from)).contains(&at),
            "line {at}: {msg}"
        );
    }
}
