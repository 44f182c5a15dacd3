//! Output files that appear whole or not at all.
//!
//! A run that fails half way (a full disk, a bad trace record, Ctrl-C) must
//! not leave a truncated result behind: a partial Lackey file would later
//! read as a valid shorter trace, a partial JSON as a corrupt result. Every
//! file pagelab writes is written to a temporary file in the same directory
//! and renamed over the destination only when the whole content is written.

use std::fs::Permissions;
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A file being written at `path`: its bytes go to a temporary file beside
/// it, which [`AtomicFile::commit`] renames to `path`. Dropped without a
/// commit (an error, a panic), the temporary file is removed and `path` is
/// untouched.
///
/// A destination that exists and is not a regular file (`/dev/null`, a
/// FIFO, a terminal) is written in place: renaming over it would replace a
/// device node with a plain file. A symbolic link is followed, so that the
/// file it names is replaced, not the link.
#[derive(Debug)]
pub struct AtomicFile {
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    Temp {
        tmp: tempfile::NamedTempFile,
        path: PathBuf,
    },
    Direct(std::fs::File),
}

impl AtomicFile {
    /// Starts writing `path`. The temporary file is created in the same
    /// directory (so that the rename cannot cross file systems) with the
    /// permissions a plain create would give (0666 less the umask).
    pub fn create(path: impl AsRef<Path>) -> io::Result<AtomicFile> {
        let mut path = path.as_ref().to_path_buf();
        if let Ok(meta) = std::fs::metadata(&path) {
            if !meta.is_file() {
                let file = std::fs::OpenOptions::new().write(true).open(&path)?;
                return Ok(AtomicFile {
                    inner: Inner::Direct(file),
                });
            }
            if std::fs::symlink_metadata(&path)?.file_type().is_symlink() {
                path = std::fs::canonicalize(&path)?;
            }
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{}.", name.unwrap_or_default()))
            .suffix(".part")
            .permissions(Permissions::from_mode(0o666))
            .tempfile_in(dir)?;
        Ok(AtomicFile {
            inner: Inner::Temp { tmp, path },
        })
    }

    /// Flushes the content and renames it to the destination (a device or
    /// FIFO destination is only flushed).
    pub fn commit(self) -> io::Result<()> {
        match self.inner {
            Inner::Temp { mut tmp, path } => {
                tmp.flush()?;
                tmp.persist(&path).map_err(|e| e.error)?;
                Ok(())
            }
            Inner::Direct(mut f) => f.flush(),
        }
    }

    fn writer(&mut self) -> &mut dyn Write {
        match &mut self.inner {
            Inner::Temp { tmp, .. } => tmp,
            Inner::Direct(f) => f,
        }
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.writer().write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.writer().write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.writer().flush()
    }
}

/// Where a command writes a stream: standard output (`-`) or a file
/// written as an [`AtomicFile`] through a buffer.
#[derive(Debug)]
pub enum Output {
    /// Standard output, locked for the whole run.
    Stdout(io::StdoutLock<'static>),
    /// A file that appears at [`Output::commit`].
    File(io::BufWriter<AtomicFile>),
}

impl Output {
    /// Standard output for `-`, else an [`AtomicFile`] at `path`.
    pub fn create(path: &str) -> io::Result<Output> {
        Ok(if path == "-" {
            Output::Stdout(io::stdout().lock())
        } else {
            Output::File(io::BufWriter::with_capacity(
                1 << 20,
                AtomicFile::create(path)?,
            ))
        })
    }

    /// Flushes everything written; a file is renamed into place.
    pub fn commit(self) -> io::Result<()> {
        match self {
            Output::Stdout(mut s) => s.flush(),
            Output::File(f) => f.into_inner().map_err(|e| e.into_error())?.commit(),
        }
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Output::Stdout(s) => s.write(buf),
            Output::File(f) => f.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Output::Stdout(s) => s.write_all(buf),
            Output::File(f) => f.write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Output::Stdout(s) => s.flush(),
            Output::File(f) => f.flush(),
        }
    }
}

/// Writes `bytes` to `path` as one [`AtomicFile`]: `std::fs::write` that
/// leaves nothing behind on failure.
pub fn write_atomically(path: impl AsRef<Path>, bytes: impl AsRef<[u8]>) -> io::Result<()> {
    let mut f = AtomicFile::create(path)?;
    f.write_all(bytes.as_ref())?;
    f.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_appears_until_the_commit_and_nothing_stays_after_a_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        std::fs::write(&path, "old").unwrap();
        let mut f = AtomicFile::create(&path).unwrap();
        f.write_all(b"new content").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        drop(f);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        write_atomically(&path, "new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_ne!(mode & 0o044, 0, "readable like a plain create: {mode:o}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    /// Regression: `--json /dev/null` as root replaced the device node
    /// with a regular file (rename over it), breaking every later user.
    #[test]
    fn a_device_is_written_in_place_and_stays_a_device() {
        use std::os::unix::fs::FileTypeExt;
        write_atomically("/dev/null", "discarded").unwrap();
        let meta = std::fs::metadata("/dev/null").unwrap();
        assert!(
            meta.file_type().is_char_device(),
            "/dev/null is no longer a device"
        );
    }

    #[test]
    fn a_link_is_followed_and_the_file_it_names_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("real.json");
        let link = dir.path().join("link.json");
        std::fs::write(&target, "old").unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_atomically(&link, "new").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
    }
}
