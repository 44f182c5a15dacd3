//! `--layout captured|linux` on `sim` and `study`: a program captured with
//! `-- PROGRAM` is modelled in Linux's layout by default (qemu backend), in
//! QEMU's with `--layout captured`; what cannot be relocated is an error
//! that says why. Under 5 s.

mod common;

use common::{pagelab, succeeded, tmp};

fn qemu() -> bool {
    let ok = pagelab_capture::find_qemu().is_ok();
    if !ok {
        eprintln!("SKIPPED: qemu-x86_64 is not installed");
    }
    ok
}

fn json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn layout_is_refused_where_nothing_can_be_relocated() {
    let trace = common::data("gzip-9.lackey.zst");
    for (args, want) in [
        (
            vec![
                "sim",
                "--layout",
                "linux",
                "--trace",
                trace.to_str().unwrap(),
            ],
            "a trace file does not record where the capture loaded the program",
        ),
        (
            vec![
                "sim",
                "--layout",
                "linux",
                "--backend",
                "valgrind",
                "--",
                "/bin/true",
            ],
            "--layout linux needs the qemu backend",
        ),
        (
            vec!["sim", "--layout", "native", "--", "/bin/true"],
            "--layout native: expected linux or captured",
        ),
    ] {
        let out = pagelab().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn a_captured_program_is_relocated_by_default_and_keeps_every_reference() {
    if !qemu() {
        return;
    }
    let dir = tmp("layout");
    let run = |layout: Option<&str>, placement: &str| {
        let j = dir.join(format!("{}-{placement}.json", layout.unwrap_or("default")));
        let mut cmd = pagelab();
        // The placement library does work of its own in the guest (ld.so loads it, each
        // mmap asks): off, the two layouts are of the same run.
        cmd.env("PAGELAB_PLACEMENT", placement);
        cmd.args(["sim", "--policy", "linux-thp:enabled=always", "--json"])
            .arg(&j);
        if let Some(l) = layout {
            cmd.args(["--layout", l]);
        }
        let out = cmd
            .args(["--", "gzip", "-9", "-c", "/etc/services"])
            .output()
            .unwrap();
        succeeded(&out);
        json(&j)
    };
    let placed = run(None, "on");
    assert!(placed["source"]["params"]["placement"]
        .as_str()
        .is_some_and(|p| p.starts_with("linux")));
    let linux = run(None, "off");
    let captured = run(Some("captured"), "off");
    assert_eq!(linux["source"]["params"]["layout"], "linux");
    assert_eq!(
        linux["source"]["params"]["placement"],
        "off (PAGELAB_PLACEMENT=off)"
    );
    assert!(captured["source"]["params"].get("layout").is_none());
    // Relocation moves references, never drops or adds one.
    assert_eq!(linux["refs"], captured["refs"]);
    // gzip's heap and libraries now lie where Linux puts them: its program
    // at 0x555555554000 instead of QEMU's 0x4000000000, so the model's page
    // tables and its 2M pages differ.
    let walks = |v: &serde_json::Value| v["runs"][0]["walk_refs"].as_u64().unwrap();
    assert_ne!(walks(&linux), walks(&captured));
}

#[test]
fn a_program_that_cannot_be_relocated_is_stopped_for_that_reason() {
    if !qemu() {
        return;
    }
    // The layout test program maps MAP_FIXED_NOREPLACE at an address QEMU
    // left free but that lies in no mapping the relocation knows: Linux's
    // layout cannot be modelled, and the program is stopped because of
    // that error, not "after the last reference of the window" (there is
    // none).
    let dir = tmp("unrelocatable");
    let file = dir.join("16k");
    std::fs::write(&file, vec![7u8; 16 << 10]).unwrap();
    let out = pagelab()
        .args(["sim", "--policy", "linux-thp", "--"])
        .arg(pagelab_capture::layoutprog_path())
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("MAP_FIXED at 0x600001000000"), "{err}");
    assert!(!err.contains("last reference of the window"), "{err}");
}

#[test]
fn a_file_exec_d_and_mmapped_is_read_into_the_page_cache_once() {
    if !qemu() {
        return;
    }
    // ld.so run as a program mmaps /bin/true (the capture's file id, by
    // device and inode); the shell then execs /bin/true (an image the
    // relocation maps). They are one file, so with a cold page cache the
    // exec'd true reads nothing the first run had not read: the kernel
    // would find every page it needs cached. Before one map served both,
    // the exec'd image was another file to the model (one 128K readahead
    // and one major fault more).
    let Ok(ld) = std::fs::canonicalize("/lib64/ld-linux-x86-64.so.2") else {
        eprintln!("SKIPPED: /lib64/ld-linux-x86-64.so.2 does not exist");
        return;
    };
    let ld = ld.to_str().unwrap().to_owned();
    let dir = tmp("one-file");
    let run = |script: &str| {
        let j = dir.join("sim.json");
        let out = pagelab()
            .args(["sim", "--policy", "linux-thp", "--page-cache", "cold"])
            .arg("--json")
            .arg(&j)
            .args(["--", "sh", "-c", script])
            .output()
            .unwrap();
        succeeded(&out);
        let run = json(&j)["runs"][0].clone();
        (run["major_faults"].clone(), run["file_read_bytes"].clone())
    };
    let once = run(&format!("{ld} /bin/true"));
    let twice = run(&format!("{ld} /bin/true; /bin/true"));
    assert!(once.0.as_u64().unwrap() > 0, "{once:?}");
    assert_eq!(twice, once);
}
