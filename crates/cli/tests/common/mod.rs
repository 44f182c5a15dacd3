//! Helpers shared by the CLI's test binaries: the binary, the bundled test data, scratch
//! directories that are removed when the test ends, and checks several binaries make.
#![allow(dead_code)] // each test binary uses its own subset

use std::ffi::OsStr;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `pagelab` binary under test.
pub fn pagelab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pagelab"))
}

/// The commands `pagelab --help` lists (without `help`), and that help text.
pub fn commands() -> (Vec<String>, String) {
    let out = pagelab().arg("--help").output().unwrap();
    assert!(out.status.success(), "pagelab --help failed");
    let top = String::from_utf8(out.stdout).unwrap();
    let list = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect::<Vec<_>>();
    assert!(list.len() >= 10, "too few commands in:\n{top}");
    (list, top)
}

/// Checks that the command whose output is `out` succeeded; a failure shows the exit status and
/// the command's standard error.
#[track_caller]
pub fn succeeded(out: &Output) {
    assert!(
        out.status.success(),
        "the command failed ({}); its stderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A file of the repository's `tests/data`.
pub fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data")
        .join(name)
}

/// A fresh, empty scratch directory under the system's temporary directory, named
/// `pagelab-<name>-<random>`. It is removed with its contents when dropped, also when the test
/// fails and unwinds; set `PAGELAB_KEEP_TMP=1` to keep it for a look after a failure.
pub struct Scratch(Option<tempfile::TempDir>, PathBuf);

/// Makes a [`Scratch`] directory whose name starts with `pagelab-<name>-`.
pub fn tmp(name: &str) -> Scratch {
    let dir = tempfile::Builder::new()
        .prefix(&format!("pagelab-{name}-"))
        .tempdir()
        .unwrap_or_else(|e| panic!("cannot make a scratch directory for {name}: {e}"));
    let path = dir.path().to_path_buf();
    if std::env::var_os("PAGELAB_KEEP_TMP").is_some() {
        eprintln!("keeping {}", dir.keep().display());
        return Scratch(None, path);
    }
    Scratch(Some(dir), path)
}

impl Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.1
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.1
    }
}

impl AsRef<OsStr> for Scratch {
    fn as_ref(&self) -> &OsStr {
        self.1.as_os_str()
    }
}

/// Runs `pagelab` with each of `commands` and standard output on `/dev/full`:
/// each must fail with exit 1 and an error naming standard output, not a
/// panic. Returns false, saying the test is skipped, where there is no
/// `/dev/full`.
pub fn full_stdout_is_a_clean_error(commands: &[&[&str]]) -> bool {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        eprintln!("skipped: no /dev/full on this machine");
        return false;
    };
    for args in commands {
        let out = Command::new(env!("CARGO_BIN_EXE_pagelab"))
            .args(*args)
            .stdout(full.try_clone().unwrap())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("cannot write to standard output") && !err.contains("panicked"),
            "{args:?}: {err}"
        );
    }
    true
}

/// The standard output of a run that must have succeeded (the panic shows its standard
/// output and error).
pub fn stdout_of_success(out: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}
