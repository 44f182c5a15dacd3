//! Helpers shared by the CLI's test binaries.

use std::process::Command;

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
