//! Files pagelab carries inside its binary (the QEMU plugin) written out for
//! another program to load, in a directory only the current user can change.
//!
//! A shared, predictable path such as `/tmp/pagelab/` lets another user plant
//! a library there first, which pagelab would then hand to QEMU, running it
//! with pagelab's rights (root, for the lab). So the directory is per user
//! (`<tmp>/pagelab-<uid>/`), refused unless it is a real directory (not a
//! link) owned by this user and writable by nobody else, and a file is used
//! only when its content is the embedded bytes; otherwise it is written anew
//! (to a temporary name, then renamed).

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// pagelab's private directory under the temporary directory, created 0755
/// if missing and refused unless it is a real directory owned by this user
/// that nobody else can write.
pub fn private_dir() -> io::Result<PathBuf> {
    checked_dir(&std::env::temp_dir())
}

/// [`private_dir`] under `tmp`.
fn checked_dir(tmp: &Path) -> io::Result<PathBuf> {
    let uid = rustix::process::geteuid().as_raw();
    let dir = tmp.join(format!("pagelab-{uid}"));
    match fs::DirBuilder::new().mode(0o755).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(annotate(e, &format!("creating {}", dir.display()))),
    }
    let meta = fs::symlink_metadata(&dir)?;
    if !meta.file_type().is_dir() || meta.uid() != uid || meta.permissions().mode() & 0o022 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is not a directory owned by uid {uid} and writable only by it; remove it \
                 (pagelab writes the libraries it carries there)",
                dir.display()
            ),
        ));
    }
    Ok(dir)
}

/// The path of a file named `name` holding exactly `bytes` in the private
/// directory of `tmp` (the temporary directory when `None`): the file there
/// when its content matches, else a fresh copy.
pub fn install(bytes: &[u8], name: &str, tmp: Option<&Path>) -> io::Result<PathBuf> {
    let dir = checked_dir(tmp.unwrap_or(&std::env::temp_dir()))?;
    let path = dir.join(name);
    // Only a regular file is read: a link or a fifo planted before the
    // directory was ours is replaced, never followed.
    let regular = fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file());
    if regular && fs::read(&path).is_ok_and(|existing| existing == bytes) {
        return Ok(path);
    }
    static WRITER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
    let write = || -> io::Result<()> {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o755)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, &path)
    };
    write().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        annotate(e, &format!("writing {}", path.display()))
    })?;
    Ok(path)
}

/// FNV-1a, 64 bits: names a file by its content, so that binaries carrying
/// different versions never take each other's copy.
pub fn content_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn annotate(e: io::Error, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pagelab-sys-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_planted_file_is_replaced_by_the_embedded_bytes() {
        let tmp = scratch("planted");
        let uid = rustix::process::geteuid().as_raw();
        let dir = tmp.join(format!("pagelab-{uid}"));
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        fs::write(dir.join("lib.so"), b"planted").unwrap();
        let p = install(b"genuine", "lib.so", Some(&tmp)).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"genuine");
        // A link to elsewhere is replaced, and its target left alone.
        fs::write(tmp.join("target"), b"genuine").unwrap();
        fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink(tmp.join("target"), &p).unwrap();
        let p = install(b"genuine", "lib.so", Some(&tmp)).unwrap();
        assert!(fs::symlink_metadata(&p).unwrap().file_type().is_file());
        fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn a_directory_others_can_write_or_a_link_is_refused() {
        let tmp = scratch("open");
        let uid = rustix::process::geteuid().as_raw();
        let dir = tmp.join(format!("pagelab-{uid}"));
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
        let e = install(b"x", "lib.so", Some(&tmp)).unwrap_err();
        assert!(e.to_string().contains("writable only by it"), "{e}");
        assert!(!dir.join("lib.so").exists());
        fs::remove_dir(&dir).unwrap();
        let elsewhere = tmp.join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &dir).unwrap();
        let e = install(b"x", "lib.so", Some(&tmp)).unwrap_err();
        assert!(e.to_string().contains("not a directory owned"), "{e}");
        fs::remove_dir_all(&tmp).unwrap();
    }
}
