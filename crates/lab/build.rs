//! Builds the lab's C parts with the workspace's own build: the LD_PRELOAD shim
//! (`capture/shim/pagelab_shim.c`, a shared library that the lab embeds and
//! writes out at run time, so an installed binary carries it) and the shim's
//! test program, and the test program of the folios mapped at exit
//! (`testprogs/folio_touch.c`).

use std::path::{Path, PathBuf};

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../..");
    let shim = root.join("capture/shim");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    println!("cargo:rerun-if-changed={}", shim.display());
    let so = out.join("libpagelab_shim.so");
    compile(
        &shim.join("pagelab_shim.c"),
        &so,
        &["-shared", "-fPIC", "-fvisibility=hidden"],
        &["-ldl"],
    );
    let testprog = out.join("pagelab_shim_testprog");
    compile(&shim.join("shim_testprog.c"), &testprog, &[], &[]);
    println!("cargo:rustc-env=PAGELAB_SHIM_SO={}", so.display());
    println!(
        "cargo:rustc-env=PAGELAB_SHIM_TESTPROG={}",
        testprog.display()
    );
    let testprogs = root.join("crates/lab/testprogs");
    println!("cargo:rerun-if-changed={}", testprogs.display());
    let folio_touch = out.join("pagelab_folio_touch");
    compile(&testprogs.join("folio_touch.c"), &folio_touch, &[], &[]);
    println!(
        "cargo:rustc-env=PAGELAB_FOLIO_TOUCH={}",
        folio_touch.display()
    );
}

/// Compiles one C file into `dst` with the C compiler the `cc` crate finds.
fn compile(src: &Path, dst: &Path, extra: &[&str], libs: &[&str]) {
    let compiler = cc::Build::new()
        .opt_level(2)
        .warnings(true)
        .extra_warnings(true)
        .get_compiler();
    let mut cmd = compiler.to_command();
    cmd.args(extra).arg("-o").arg(dst).arg(src).args(libs);
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler for {}: {e}", src.display()));
    if !status.success() {
        panic!("compiling {} failed ({status}): {cmd:?}", src.display());
    }
}
