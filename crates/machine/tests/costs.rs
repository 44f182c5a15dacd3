//! The time sections of a machine file (`[caches]`, `[walk_caches]`,
//! `[costs]`, `[nested]`): the presets carry them with their sources, and a
//! geometry that cannot exist or a missing latency is refused naming the
//! file, the field and what is allowed.

use pagelab_machine::{preset, preset_names, preset_text, Machine};

/// The error of a preset's text with one piece replaced, parsed as `my.toml`.
fn refused(name: &str, from: &str, to: &str) -> String {
    let text = preset_text(name).unwrap();
    assert!(text.contains(from), "{name} has no `{from}`");
    let e = Machine::from_toml_str(&text.replacen(from, to, 1), "my.toml").unwrap_err();
    let msg = e.to_string();
    assert!(msg.starts_with("my.toml: "), "{msg}");
    msg
}

#[test]
fn the_timed_presets_are_the_issues_machines() {
    let timed: Vec<&str> = preset_names()
        .into_iter()
        .filter(|n| preset(n).unwrap().cost.is_some())
        .collect();
    for want in [
        "pentium4",
        "pkunity",
        "power5plus",
        "power6",
        "zen3",
        "zen4",
        "emeraldrapids",
        "skylake",
        "neoverse-n1-4k",
        "neoverse-n1-16k",
        "neoverse-n1-64k",
    ] {
        assert!(timed.contains(&want), "{want} missing from {timed:?}");
        assert!(preset_text(want).unwrap().contains("[caches]"));
    }
    // The geometry-only machines stay untimed: their runs' JSON is unchanged.
    for plain in ["ia32", "ia32-pae", "x86-64", "arm64-4k"] {
        assert!(preset(plain).unwrap().cost.is_none(), "{plain}");
    }
    // Winwood et al.'s (OLS 2002) machine: 4-byte PTEs, 16 to a 64-byte L1 line.
    let p4 = preset("pentium4").unwrap();
    let c = p4.cost.unwrap();
    assert_eq!(p4.geometry.entry_bytes(), 4);
    assert_eq!(
        (c.caches.l1d.size, c.caches.l1d.ways, c.caches.l1d.line),
        (8 << 10, 4, 64)
    );
    // This VM is a guest: its preset can model nested paging.
    assert!(preset("zen4").unwrap().cost.unwrap().nested.is_some());
    // The Intel guest's: CPUID leaf 4's caches, as its file says.
    let emr = preset("emeraldrapids").unwrap().cost.unwrap();
    assert!(emr.nested.is_some());
    assert_eq!(
        [emr.caches.l1d.size, emr.caches.l2.unwrap().size],
        [48 << 10, 2 << 20]
    );
}

#[test]
fn a_cache_that_cannot_exist_is_refused_with_its_field() {
    let l1 = "l1d = { size = \"8K\", ways = 4, line = 64, latency = 2 }";
    let msg = refused(
        "pentium4",
        l1,
        "l1d = { size = \"8K\", ways = 3, line = 64, latency = 2 }",
    );
    assert!(
        msg.contains("field `caches.l1d.ways`") && msg.contains("must divide the lines"),
        "{msg}"
    );
    let msg = refused(
        "pentium4",
        l1,
        "l1d = { size = \"8K\", ways = 1, line = 8192, latency = 2 }",
    );
    assert!(
        msg.contains("field `caches.l1d.line`") && msg.contains("larger than the smallest page"),
        "{msg}"
    );
    let msg = refused(
        "pentium4",
        l1,
        "l1d = { size = \"8K\", ways = 4, line = 48, latency = 2 }",
    );
    assert!(
        msg.contains("field `caches.l1d.line`") && msg.contains("power of two"),
        "{msg}"
    );
    let msg = refused("pentium4", "latency = 7 }", "latency = 1 }");
    assert!(
        msg.contains("field `caches.l2.latency`") && msg.contains("grow with the level"),
        "{msg}"
    );
}

#[test]
fn a_missing_latency_or_section_is_refused_with_its_field() {
    let msg = refused("pentium4", ", latency = 7 }", " }");
    assert!(
        msg.contains("missing field `latency`") && msg.contains("l2 ="),
        "{msg}"
    );
    let msg = refused("pentium4", "memory_latency = 250\n", "");
    assert!(msg.contains("missing field `memory_latency`"), "{msg}");
    let msg = refused("pentium4", "[costs]\nbase_cpi = 1.0\ntlb_hit = [0]\n", "");
    assert!(
        msg.contains("field `costs`") && msg.contains("needs [costs]"),
        "{msg}"
    );
    let msg = refused("pentium4", "tlb_hit = [0]", "tlb_hit = [0, 7]");
    assert!(
        msg.contains("field `costs.tlb_hit`") && msg.contains("one per TLB level (1)"),
        "{msg}"
    );
    let msg = refused("zen4", "miss_buffers = 24", "miss_buffers = 0");
    assert!(
        msg.contains("field `overlap.miss_buffers`") && msg.contains("allowed 1 to 256"),
        "{msg}"
    );
    let msg = refused("zen4", "walkers = 6", "walkers = 1000");
    assert!(msg.contains("field `overlap.walkers`"), "{msg}");
    let msg = refused("zen4", "walkers = 6", "walkers = 6\nwalk_interval = 5000");
    assert!(
        msg.contains("field `overlap.walk_interval`") && msg.contains("allowed 0"),
        "{msg}"
    );
    let msg = refused("zen4", "walkers = 6", "walkers = 6\nwalks = \"sometimes\"");
    assert!(
        msg.contains("walks = \"sometimes\"") && msg.contains("expected `pooled` or `additive`"),
        "{msg}"
    );
    let msg = refused("zen4", "tlb_hit = [0, 7]", "tlb_hit = [0, 7]\nwalk = 20000");
    assert!(
        msg.contains("field `costs.walk`") && msg.contains("allowed 0"),
        "{msg}"
    );
    let ft = "placement = \"first-touch\"";
    let sc = "placement = \"scattered\"";
    let msg = refused("zen4", ft, &format!("{sc}\nspan = \"3M\""));
    assert!(
        msg.contains("field `frames.span`") && msg.contains("2M blocks"),
        "{msg}"
    );
    let msg = refused("zen4", ft, &format!("{ft}\nspan = \"2G\""));
    assert!(
        msg.contains("field `frames.span`") && msg.contains("scattered"),
        "{msg}"
    );
    let msg = refused("zen4", ft, &format!("{sc}\nneighbours = 1.5"));
    assert!(
        msg.contains("field `frames.neighbours`") && msg.contains("from 0 to 1"),
        "{msg}"
    );
    let msg = refused("zen4", ft, &format!("{ft}\nneighbours = 0.5"));
    assert!(
        msg.contains("field `frames.neighbours`") && msg.contains("scattered"),
        "{msg}"
    );
    let msg = refused("zen4", "walkers = 6", "walker = 6");
    assert!(msg.contains("unknown field `walker`"), "{msg}");
    let msg = refused(
        "zen4",
        "ntlb_entries =",
        "host_page = \"64K\"\nntlb_entries =",
    );
    assert!(
        msg.contains("field `nested.host_page`") && msg.contains("4K, 2M or 1G"),
        "{msg}"
    );
    let msg = refused(
        "zen4",
        "ntlb_entries =",
        "host_page = \"3K\"\nntlb_entries =",
    );
    assert!(msg.contains("host_page"), "{msg}");
    let ok = preset_text("zen4").unwrap().replacen(
        "ntlb_entries =",
        "host_page = \"1G\"\nntlb_entries =",
        1,
    );
    let m = Machine::from_toml_str(&ok, "my.toml").unwrap();
    assert_eq!(
        m.cost
            .unwrap()
            .nested
            .unwrap()
            .host_page
            .map(|p| p.to_string()),
        Some("1G".to_string())
    );
    let msg = refused(
        "zen4",
        "ntlb_entries =",
        "host_frames = \"random\"\nntlb_entries =",
    );
    assert!(
        msg.contains("host_frames")
            && msg.contains("unknown variant `random`")
            && msg.contains("first-touch")
            && msg.contains("scattered"),
        "{msg}"
    );
    let host_frames = |text: &str| {
        let m = Machine::from_toml_str(text, "my.toml").unwrap();
        m.cost.unwrap().nested.unwrap().host_frames
    };
    let zen4 = preset_text("zen4").unwrap();
    assert_eq!(host_frames(zen4), pagelab_cache::FramePlacement::Scattered);
    assert_eq!(
        host_frames(&zen4.replacen(
            "ntlb_entries =",
            "host_frames = \"first-touch\"\nntlb_entries =",
            1
        )),
        pagelab_cache::FramePlacement::FirstTouch
    );
    let msg = refused(
        "zen4",
        "placement = \"first-touch\"",
        "placement = \"random\"",
    );
    assert!(
        msg.contains("unknown variant `random`")
            && msg.contains("first-touch")
            && msg.contains("scattered"),
        "{msg}"
    );
    // Each time section but the two that carry time needs them.
    for (section, body) in [
        ("frames", "placement = \"scattered\""),
        ("overlap", "miss_buffers = 8\nwalkers = 2"),
        ("walk_caches", "entries = [4]"),
    ] {
        let msg = refused(
            "x86-64",
            "[kernel]",
            &format!("[{section}]\n{body}\n\n[kernel]"),
        );
        assert!(
            msg.contains(&format!("field `{section}`")) && msg.contains("without [caches]"),
            "{msg}"
        );
    }
}

#[test]
fn frames_are_placed_as_the_file_says() {
    use pagelab_cache::FramePlacement;
    let placement = |text: &str| {
        Machine::from_toml_str(text, "my.toml")
            .unwrap()
            .cost
            .unwrap()
            .frames
            .placement
    };
    let zen4 = preset_text("zen4").unwrap();
    assert_eq!(placement(zen4), FramePlacement::FirstTouch);
    let scattered = zen4.replace("placement = \"first-touch\"", "placement = \"scattered\"");
    assert_eq!(placement(&scattered), FramePlacement::Scattered);
    // A span and a share of neighbours, as `machines --measure` writes them.
    let measured = scattered.replace(
        "[frames]\nplacement = \"scattered\"",
        "[frames]\nplacement = \"scattered\"\nspan = \"20916M\"\nneighbours = 0.482",
    );
    let f = Machine::from_toml_str(&measured, "my.toml")
        .unwrap()
        .cost
        .unwrap()
        .frames;
    assert_eq!((f.span, f.neighbours), (Some(20916 << 20), Some(0.482)));
    // Without a [frames] section, first touch (every other preset).
    assert_eq!(
        preset("pentium4").unwrap().cost.unwrap().frames.placement,
        FramePlacement::FirstTouch
    );
}
