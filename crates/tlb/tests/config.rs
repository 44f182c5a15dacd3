//! Presets load and validate; every configuration error says where and what is allowed.

use pagelab_tlb::{
    load, preset, preset_names, presets, resolve, TlbConfig, TlbError, TlbHierarchy, DEFAULT_PRESET,
};

#[test]
fn every_preset_loads_validates_and_builds() {
    let all = presets();
    assert_eq!(all.len(), 8);
    assert_eq!(all[0].0, DEFAULT_PRESET);
    for (name, cfg) in all {
        assert_eq!(cfg.name, name, "preset file name and `name` agree");
        assert!(
            !cfg.description.is_empty() && !cfg.source.is_empty(),
            "{name} has description and source"
        );
        let text = pagelab_tlb::preset_text(name).unwrap();
        assert!(
            text.trim_start().starts_with("# Source"),
            "{name} opens with a source comment"
        );
        TlbHierarchy::new(&cfg).unwrap();
        let d = cfg.describe();
        assert_eq!(d.lines().count(), 1 + cfg.levels().len(), "{d}");
        assert!(d.starts_with(name));
        // Round trip through TOML.
        let again =
            TlbConfig::from_toml_str(&toml::to_string(&cfg).unwrap(), "round trip").unwrap();
        assert_eq!(again, cfg);
    }
}

#[test]
fn describe_shows_geometry() {
    let d = preset("skylake").unwrap().describe();
    assert!(
        d.contains("L1I          128 entries 8-way (4K) + 8 entries FA (2M)"),
        "{d}"
    );
    assert!(
        d.contains("L2 (unified) 1536 entries 12-way, XOR-indexed (4K/2M) + 16 entries 4-way (1G)"),
        "{d}"
    );
    let d = preset("pentium4").unwrap().describe();
    assert!(d.contains("(4K, others fragmented)"), "{d}");
    let d = preset("weisberg").unwrap().describe();
    assert!(d.contains("L1D          64 entries FA (all sizes)"), "{d}");
}

#[test]
fn unknown_preset_lists_valid_names() {
    let e = preset("haswell").unwrap_err().to_string();
    assert!(e.contains("haswell"), "{e}");
    for n in preset_names() {
        assert!(e.contains(n), "{e}");
    }
    assert!(e.contains(".toml"), "{e}");
}

#[test]
fn resolve_takes_names_and_paths() {
    assert_eq!(resolve("zen4").unwrap().name, "zen4");
    let dir = std::env::temp_dir().join(format!("pagelab-tlb-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mine.toml");
    std::fs::write(&path, "name = \"mine\"\n[l1i]\narrays = [{ entries = 32 }]\n[l1d]\narrays = [{ entries = 32, ways = 4 }]\n")
        .unwrap();
    let cfg = resolve(path.to_str().unwrap()).unwrap();
    assert_eq!(
        (cfg.name.as_str(), cfg.l1d.arrays[0].ways),
        ("mine", Some(4))
    );
    std::fs::write(&path, "name = \"mine\"\n[l1i]\narrays = [{ entries = 32 }]\n[l1d]\narrays = [{ entries = 30, ways = 4 }]\n")
        .unwrap();
    let e = load(&path).unwrap_err().to_string();
    assert!(
        e.contains("mine.toml") && e.contains("[l1d] arrays[0].ways"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    let e = resolve("/nonexistent/x.toml").unwrap_err();
    assert!(matches!(e, TlbError::Io { .. }));
    assert!(e.to_string().contains("/nonexistent/x.toml"), "{e}");
}

const L1: &str = "name = \"t\"\n[l1i]\narrays = [{ entries = 8 }]\n";

/// A config with the given `[l1d]` body and extra text; returns the error message.
fn err_of(l1d: &str, extra: &str) -> String {
    let text = format!("{L1}[l1d]\n{l1d}\n{extra}");
    match TlbConfig::from_toml_str(&text, "my.toml") {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

fn assert_has(msg: &str, parts: &[&str]) {
    assert!(msg.starts_with("my.toml: "), "names the file: {msg}");
    for p in parts {
        assert!(msg.contains(p), "`{p}` missing from: {msg}");
    }
}

#[test]
fn geometry_errors() {
    assert_has(
        &err_of("arrays = [{ entries = 0 }]", ""),
        &["[l1d] arrays[0].entries", "from 1 to"],
    );
    assert_has(
        &err_of("arrays = [{ entries = 99999999 }]", ""),
        &["arrays[0].entries", "16777216"],
    );
    assert_has(
        &err_of("arrays = [{ entries = 8, ways = 0 }]", ""),
        &["arrays[0].ways", "at least 1", "omit ways"],
    );
    assert_has(
        &err_of("arrays = [{ entries = 4, ways = 8 }]", ""),
        &["arrays[0].ways", "cannot exceed entries"],
    );
    assert_has(
        &err_of("arrays = [{ entries = 60, ways = 8 }]", ""),
        &[
            "arrays[0].ways",
            "entries (60) must be a multiple of ways (8)",
        ],
    );
    assert_has(
        &err_of("arrays = [{ entries = 48, ways = 4 }]", ""),
        &["arrays[0].ways", "12 sets", "power of two"],
    );
    assert_has(&err_of("arrays = []", ""), &["[l1d]", "at least one array"]);
}

#[test]
fn size_list_errors() {
    assert_has(
        &err_of("arrays = [{ entries = 8, sizes = [] }]", ""),
        &["arrays[0].sizes", "at least one page size", "omitted"],
    );
    assert_has(
        &err_of("arrays = [{ entries = 8, sizes = [\"4K\", \"4K\"] }]", ""),
        &["arrays[0].sizes", "lists 4K twice"],
    );
    assert_has(
        &err_of("arrays = [{ entries = 8, sizes = [\"4K\"] }, { entries = 8, sizes = [\"2M\", \"4K\"] }]", ""),
        &["arrays[1].sizes", "4K is already listed by arrays[0]"],
    );
    assert_has(
        &err_of("arrays = [{ entries = 8 }, { entries = 8 }]", ""),
        &["arrays[1].sizes", "only one array per level may omit sizes"],
    );
    assert_has(
        &err_of("arrays = [{ entries = 8, sizes = [\"2M\"] }]", ""),
        &["[l1d]", "no array can hold 4K pages"],
    );
    assert_has(
        &err_of("arrays = [{ entries = 8, other_sizes = \"fragment\" }]", ""),
        &["arrays[0].other_sizes", "needs a sizes list"],
    );
}

#[test]
fn level_shape_errors() {
    let ok = "arrays = [{ entries = 8 }]";
    assert_has(
        &err_of(
            ok,
            "[l2]\narrays = [{ entries = 8 }]\n[l2i]\narrays = [{ entries = 8 }]",
        ),
        &["top level", "[l2]", "cannot be combined"],
    );
    assert_has(
        &err_of(ok, "[l2d]\narrays = [{ entries = 8 }]"),
        &["top level", "[l2d] needs [l2i]"],
    );
    assert_has(
        &err_of(ok, "[l2]\narrays = [{ entries = 6, ways = 4 }]"),
        &["[l2] arrays[0].ways", "multiple of ways"],
    );
    let e = TlbConfig::from_toml_str(
        "name = \" \"\n[l1i]\narrays = [{ entries = 8 }]\n[l1d]\narrays = [{ entries = 8 }]",
        "my.toml",
    )
    .unwrap_err()
    .to_string();
    assert_has(&e, &["name", "must not be empty"]);
}

#[test]
fn parse_errors_name_file_and_field() {
    assert_has(
        &err_of("arrays = [{ entries = 8, way = 2 }]", ""),
        &["unknown field `way`", "ways"],
    );
    assert_has(
        &err_of("arrays = [{ entries = 8 }]", "[l3]\narrays = []"),
        &["unknown field `l3`"],
    );
    assert_has(
        &err_of("arrays = [{ entries = 8, sizes = [\"3K\"] }]", ""),
        &["3K", "power of two from 4K to 1G"],
    );
    assert_has(
        &err_of("arrays = [{ entries = 8, other_sizes = \"split\" }]", ""),
        &["split", "hold", "fragment"],
    );
    assert_has(
        &err_of("arrays = [{ entries = \"many\" }]", ""),
        &["entries"],
    );
    let e = TlbConfig::from_toml_str("name = \"t\"\n[l1i]\narrays = [{ entries = 8 }]", "my.toml")
        .unwrap_err()
        .to_string();
    assert_has(&e, &["missing field `l1d`"]);
}
