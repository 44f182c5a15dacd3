//! Finding the backends' tools, and the plugin library that matches QEMU.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Why a capture could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// A tool a backend needs is not installed.
    #[error("{tool} not found (looked in PATH{env}): the {backend} backend needs it; install it with `apt-get install {package}` (or run scripts/setup.sh){alternative}")]
    Missing {
        /// The executable looked for.
        tool: String,
        /// The backend that needs it.
        backend: &'static str,
        /// The Debian package that provides it.
        package: &'static str,
        /// The environment variable that overrides the lookup, as text for the message.
        env: String,
        /// What else the user can do, as text for the message.
        alternative: &'static str,
    },
    /// The program to capture cannot be found.
    #[error("{0}: not found in PATH, or not an executable file")]
    NoProgram(String),
    /// Something failed on the way: what, and the cause.
    #[error("{what}: {err}")]
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        err: std::io::Error,
    },
    /// Anything else, as a message.
    #[error("{0}")]
    Other(String),
}

impl CaptureError {
    pub(crate) fn io(what: impl Into<String>, err: std::io::Error) -> CaptureError {
        CaptureError::Io {
            what: what.into(),
            err,
        }
    }
}

/// The executable `name` found in PATH (or `name` itself when it holds a slash).
pub fn which(name: &OsStr) -> Option<PathBuf> {
    let p = Path::new(name);
    if name.to_string_lossy().contains('/') {
        return is_executable(p).then(|| p.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|c| is_executable(c))
}

pub(crate) fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// QEMU's user-mode emulator for this machine's architecture (`$PAGELAB_QEMU` overrides).
pub fn find_qemu() -> Result<PathBuf, CaptureError> {
    let name = std::env::var_os("PAGELAB_QEMU").unwrap_or_else(|| "qemu-x86_64".into());
    which(&name).ok_or_else(|| CaptureError::Missing {
        tool: name.to_string_lossy().into_owned(),
        backend: "qemu",
        package: "qemu-user",
        env: " and $PAGELAB_QEMU".into(),
        alternative: ", or capture with --backend valgrind",
    })
}

/// Valgrind (`$PAGELAB_VALGRIND` overrides).
pub fn find_valgrind() -> Result<PathBuf, CaptureError> {
    let name = std::env::var_os("PAGELAB_VALGRIND").unwrap_or_else(|| "valgrind".into());
    which(&name).ok_or_else(|| CaptureError::Missing {
        tool: name.to_string_lossy().into_owned(),
        backend: "valgrind",
        package: "valgrind",
        env: " and $PAGELAB_VALGRIND".into(),
        alternative: ", or capture with --backend qemu",
    })
}

/// QEMU's version as (major, minor), from `qemu --version`.
pub fn qemu_version(qemu: &Path) -> Result<(u32, u32), CaptureError> {
    let out = Command::new(qemu)
        .arg("--version")
        .output()
        .map_err(|e| CaptureError::io(format!("running {} --version", qemu.display()), e))?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_qemu_version(&text).ok_or_else(|| {
        CaptureError::Other(format!(
            "{} --version printed no version: `{}`",
            qemu.display(),
            text.trim()
        ))
    })
}

/// Parses "qemu-x86_64 version 7.2.22 (Debian ...)" into (7, 2).
pub fn parse_qemu_version(text: &str) -> Option<(u32, u32)> {
    let v = text.split("version ").nth(1)?;
    let mut parts = v.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The plugin API version a QEMU accepts: 1 before 8.2, 2 from 8.2 on.
pub fn plugin_api_for(version: (u32, u32)) -> u32 {
    if version >= (8, 2) {
        2
    } else {
        1
    }
}

const PLUGIN_V1: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libpagelab_qemu_v1.so"));
const PLUGIN_V2: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libpagelab_qemu_v2.so"));

/// The path of the plugin library for plugin API version `api`.
///
/// `$PAGELAB_QEMU_PLUGIN` overrides. Otherwise the library the build made is
/// used where the build left it; when that is gone (an installed binary), the
/// copy embedded in this binary is written to pagelab's private directory
/// (`<tmp>/pagelab-<uid>/`, see [`pagelab_sys::private`]), and a file found
/// there is used only when its content is the embedded copy.
pub fn plugin_path(api: u32) -> Result<PathBuf, CaptureError> {
    if let Some(p) = std::env::var_os("PAGELAB_QEMU_PLUGIN") {
        return Ok(PathBuf::from(p));
    }
    let (bytes, file) = match api {
        1 => (PLUGIN_V1, "libpagelab_qemu_v1.so"),
        _ => (PLUGIN_V2, "libpagelab_qemu_v2.so"),
    };
    let built = Path::new(env!("OUT_DIR")).join(file);
    if std::fs::metadata(&built).map(|m| m.len()).ok() == Some(bytes.len() as u64) {
        return Ok(built);
    }
    // Never a shared directory: a library another user planted there would
    // run inside QEMU with our rights. The private directory's checks and
    // the content comparison are those of the LD_PRELOAD shim.
    let hash = pagelab_sys::private::content_hash(bytes);
    let name = format!("{}-{hash:016x}.so", file.trim_end_matches(".so"));
    pagelab_sys::private::install(bytes, &name, None)
        .map_err(|e| CaptureError::io("writing the QEMU plugin".to_string(), e))
}

const PLACE_LIB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libpagelab_place.so"));

/// The placement library preloaded into a program captured at Linux's
/// addresses (`capture/place/pagelab_place.c`), installed under the shortest
/// path the private directory allows (`/tmp/pagelab-UID/pl.so`).
///
/// Why short: ld.so loads a preloaded library with its own minimal malloc
/// (glibc's `elf/dl-minimal-malloc.c`), which takes memory in 8K mmaps, and
/// it copies the library's path into that memory twice (the `link_map`'s
/// name and its real name). The library's cost there can tip ld.so into one
/// more anonymous mmap than it makes natively, which then moves every later
/// mapping of the model's layout (and so the addresses the placed program is
/// given) one mapping's length down. python3 tips at a path of 24 bytes or
/// more (its ld.so makes a third 8K mmap, 8K under the kernel's addresses
/// from there on: docs/real-programs.md, "python3 at all sizes").
pub fn place_lib_path() -> Result<PathBuf, CaptureError> {
    pagelab_sys::private::install(PLACE_LIB, PLACE_LIB_NAME, None)
        .map_err(|e| CaptureError::io("writing the placement library".to_string(), e))
}

/// The placement library's file name in the private directory. One name for
/// every version: `install` replaces a file of other content (by rename, so a
/// QEMU that already loaded the old one keeps it).
const PLACE_LIB_NAME: &str = "pl.so";

/// The path of the capture test program (`capture/testprog`) the build made.
pub fn testprog_path() -> PathBuf {
    Path::new(env!("OUT_DIR")).join("pagelab_testprog")
}

/// The path of the layout test program (`capture/testprog/pagelab_layoutprog.c`)
/// the build made: it maps regions natively and prints where the kernel put them.
pub fn layoutprog_path() -> PathBuf {
    Path::new(env!("OUT_DIR")).join("pagelab_layoutprog")
}

/// The path of the placement test program (`capture/testprog/pagelab_placeprog.c`)
/// the build made: it maps regions and writes where they went.
pub fn placeprog_path() -> PathBuf {
    Path::new(env!("OUT_DIR")).join("pagelab_placeprog")
}

/// The path of the signal test program (`capture/testprog/pagelab_signalprog.c`) the
/// build made: system calls in a loop under a timer's signals.
pub fn signalprog_path() -> PathBuf {
    Path::new(env!("OUT_DIR")).join("pagelab_signalprog")
}

/// The path of the exec layout test program
/// (`capture/testprog/pagelab_execprog.c`) linked as `variant` says: `""`
/// (position-independent, dynamic), `"nopie"`, `"static"` or `"staticpie"`.
/// It prints the address space the kernel gave it at exec. The static
/// variants are missing where the C library has no static archive.
pub fn execprog_path(variant: &str) -> PathBuf {
    let name = match variant {
        "" => "pagelab_execprog".to_string(),
        v => format!("pagelab_execprog_{v}"),
    };
    Path::new(env!("OUT_DIR")).join(name)
}
