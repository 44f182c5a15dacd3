//! `#!` scripts: what the kernel runs for them (binfmt_script), for the
//! QEMU backend, which runs ELF files only.

use crate::tools::{self, CaptureError};
use std::ffi::OsString;
use std::fs::File;

/// Scripts within scripts the kernel follows (binfmt_script's recursion limit).
const MAX_SCRIPT_DEPTH: usize = 4;

/// What the kernel runs for `execve(program, [program, args...])`: argv[0],
/// the executable file and the arguments after argv[0]. A `#!` script runs
/// its interpreter with the optional argument of its first line and the
/// script's path in front of the arguments, interpreters that are scripts
/// in turn (up to [`MAX_SCRIPT_DEPTH`]).
pub(crate) fn resolve_script(
    program: &std::path::Path,
    args: &[OsString],
) -> Result<(OsString, std::path::PathBuf, Vec<OsString>), CaptureError> {
    use std::os::unix::ffi::OsStrExt;
    let mut argv0 = program.as_os_str().to_os_string();
    let mut file = program.to_path_buf();
    let mut rest = args.to_vec();
    for _ in 0..=MAX_SCRIPT_DEPTH {
        let Some(line) = shebang(&file)? else {
            return Ok((argv0, file, rest));
        };
        let shown = pagelab_core::escape(&file.display().to_string()).to_string();
        let (interp, arg) = split_shebang(&line).ok_or_else(|| {
            CaptureError::Other(format!("{shown} starts with `#!` but names no interpreter"))
        })?;
        let interp = std::ffi::OsStr::from_bytes(interp).to_os_string();
        let mut front = Vec::new();
        if let Some(a) = arg {
            front.push(std::ffi::OsStr::from_bytes(a).to_os_string());
        }
        front.push(file.into_os_string());
        front.append(&mut rest);
        rest = front;
        file = std::path::PathBuf::from(&interp);
        if !tools::is_executable(&file) {
            return Err(CaptureError::Other(format!(
                "{shown} is a `#!` script whose interpreter {} is not an executable file",
                pagelab_core::escape(&file.display().to_string())
            )));
        }
        argv0 = interp;
    }
    Err(CaptureError::Other(format!(
        "{}: `#!` scripts nested more than {MAX_SCRIPT_DEPTH} deep (the kernel refuses them too)",
        pagelab_core::escape(&program.display().to_string())
    )))
}

/// The first line of `path` (at most the 256 bytes the kernel reads) when it starts with `#!`.
fn shebang(path: &std::path::Path) -> Result<Option<Vec<u8>>, CaptureError> {
    let mut head = Vec::with_capacity(256);
    File::open(path)
        .and_then(|f| std::io::Read::read_to_end(&mut std::io::Read::take(f, 256), &mut head))
        .map_err(|e| CaptureError::io(format!("reading {}", path.display()), e))?;
    if !head.starts_with(b"#!") {
        return Ok(None);
    }
    let end = head.iter().position(|&b| b == b'\n').unwrap_or(head.len());
    head.truncate(end);
    Ok(Some(head))
}

/// A `#!` line split as binfmt_script splits it: the interpreter up to the
/// first blank, then the rest of the line, blanks around it dropped, as one
/// optional argument.
fn split_shebang(line: &[u8]) -> Option<(&[u8], Option<&[u8]>)> {
    let blank = |b: &u8| *b == b' ' || *b == b'\t';
    let line = line.strip_prefix(b"#!")?;
    let start = line.iter().position(|b| !blank(b))?;
    let line = &line[start..];
    let end = line.iter().rposition(|b| !blank(b))? + 1;
    let line = &line[..end];
    let cut = line.iter().position(blank).unwrap_or(line.len());
    let (interp, rest) = line.split_at(cut);
    let rest = &rest[rest.iter().position(|b| !blank(b)).unwrap_or(rest.len())..];
    Some((interp, (!rest.is_empty()).then_some(rest)))
}

#[cfg(test)]
mod tests {
    use super::split_shebang;

    #[test]
    fn shebang_lines_split_as_the_kernel_splits_them() {
        let s = |l: &[u8]| split_shebang(l).map(|(i, a)| (i.to_vec(), a.map(<[u8]>::to_vec)));
        assert_eq!(s(b"#!/bin/sh"), Some((b"/bin/sh".to_vec(), None)));
        assert_eq!(s(b"#! /bin/sh  \t"), Some((b"/bin/sh".to_vec(), None)));
        assert_eq!(
            s(b"#!/usr/bin/env  python3 -u "),
            Some((b"/usr/bin/env".to_vec(), Some(b"python3 -u".to_vec())))
        );
        assert_eq!(s(b"#!"), None);
        assert_eq!(s(b"#!  \t"), None);
    }
}
