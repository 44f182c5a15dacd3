//! Builds the C parts of capture with the workspace's own build: the QEMU
//! plugin once per plugin API version (QEMU 7.2 accepts only version 1, QEMU
//! 8.2 and later only 2 and up; pagelab picks at run time) and the test
//! programs of the capture tests (references; Linux's mmap placement).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../..");
    let capture = root.join("capture");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    println!("cargo:rerun-if-changed={}", capture.display());
    let plugin = capture.join("qemu/pagelab_plugin.c");
    for api in [1, 2] {
        let so = out.join(format!("libpagelab_qemu_v{api}.so"));
        compile(
            &plugin,
            &so,
            &[
                "-shared",
                "-fPIC",
                "-fvisibility=hidden",
                &format!("-DPAGELAB_PLUGIN_API={api}"),
                &format!("-I{}", capture.join("qemu").display()),
            ],
        );
    }
    // The placement library, preloaded into the guest (docs/layout.md).
    compile(
        &capture.join("place/pagelab_place.c"),
        &out.join("libpagelab_place.so"),
        &["-shared", "-fPIC", "-fvisibility=hidden"],
    );
    for prog in [
        "pagelab_testprog",
        "pagelab_layoutprog",
        "pagelab_execprog",
        "pagelab_placeprog",
        "pagelab_signalprog",
    ] {
        compile(
            &capture.join(format!("testprog/{prog}.c")),
            &out.join(prog),
            &[],
        );
    }
    // The exec layout program linked each way the loader treats differently;
    // a static libc may be missing (the test then says so), so these may fail.
    for (suffix, flag) in [
        ("nopie", "-no-pie"),
        ("static", "-static"),
        ("staticpie", "-static-pie"),
    ] {
        let dst = out.join(format!("pagelab_execprog_{suffix}"));
        let _ = std::fs::remove_file(&dst);
        let mut cmd = compiler().to_command();
        cmd.arg(flag)
            .arg("-o")
            .arg(&dst)
            .arg(capture.join("testprog/pagelab_execprog.c"));
        if !cmd.status().is_ok_and(|s| s.success()) {
            println!("cargo:warning=cannot link the exec layout program with {flag}");
        }
    }
}

fn compiler() -> cc::Tool {
    cc::Build::new()
        .opt_level(2)
        .warnings(true)
        .extra_warnings(true)
        .get_compiler()
}

/// Compiles one C file into `dst` with the C compiler the `cc` crate finds.
fn compile(src: &Path, dst: &Path, extra: &[&str]) {
    let mut cmd = compiler().to_command();
    cmd.args(extra).arg("-o").arg(dst).arg(src).arg("-lpthread");
    run(cmd, src);
}

fn run(mut cmd: Command, src: &Path) {
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler for {}: {e}", src.display()));
    if !status.success() {
        panic!("compiling {} failed ({status}): {cmd:?}", src.display());
    }
}
