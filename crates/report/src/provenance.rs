//! Where a result came from: pagelab's version, the command line, the machine, and a
//! checksum of each trace file read, so that a report can be traced back to its inputs.

use crate::lab::HostInfo;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::Path;

/// What made a result; an optional field of every result (absent from files written before
/// pagelab recorded it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// pagelab's version (`CARGO_PKG_VERSION` of the binary).
    pub pagelab_version: String,
    /// The command line, one argument per element.
    pub command_line: Vec<String>,
    /// The machine modelled, as given (`--machine`, or `machine=` in Python): a preset's name
    /// or a machine file's path; absent for the default machine and for lab results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// The machine the command ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostInfo>,
    /// A checksum of each input file read (traces; the bundled trace's embedded bytes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputChecksum>,
}

/// The size and checksum of one input.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputChecksum {
    /// The input as the result's source names it (a path, or `gzip` for the bundled trace).
    pub name: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// [`Checksum`] of its bytes as `pl2:` and 16 hex digits.
    pub checksum: String,
}

pub use pagelab_core::Checksum;

/// The checksum of `bytes`.
pub fn checksum_bytes(name: &str, bytes: &[u8]) -> InputChecksum {
    let mut c = Checksum::default();
    c.update(bytes);
    InputChecksum {
        name: name.to_string(),
        bytes: bytes.len() as u64,
        checksum: c.finish(),
    }
}

/// The checksum of the file at `path`, read through a memory map (or, where
/// the file cannot be mapped, in 1 MiB blocks).
///
/// The map spares the copy out of the page cache that `read` makes, which
/// cost as much as the hashing itself: with a trace that the study reads
/// at a few times the speed of `wc -l`, the checksum is a tenth of the run.
///
/// # Errors
/// When the file cannot be read; the message names it.
pub fn checksum_file(name: &str, path: &Path) -> anyhow::Result<InputChecksum> {
    use anyhow::Context;
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot open `{}` to checksum it", path.display()))?;
    let mut c = Checksum::default();
    // SAFETY: the map is read only while this function runs; a file
    // truncated meanwhile by another process would fault, as the trace
    // readers' own maps of the same file would.
    match unsafe { memmap2::Mmap::map(&file) } {
        Ok(map) => {
            let _ = map.advise(memmap2::Advice::Sequential);
            c.update(&map);
        }
        Err(_) => read_into(&mut c, file, path)?,
    }
    Ok(InputChecksum {
        name: name.to_string(),
        bytes: c.len(),
        checksum: c.finish(),
    })
}

/// Feeds all of `file` to `c` in 1 MiB reads.
fn read_into(c: &mut Checksum, mut file: std::fs::File, path: &Path) -> anyhow::Result<()> {
    use anyhow::Context;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .with_context(|| format!("cannot read `{}` to checksum it", path.display()))?;
        if n == 0 {
            return Ok(());
        }
        c.update(&buf[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_does_not_depend_on_how_the_bytes_are_fed() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        let whole = checksum_bytes("x", &data).checksum;
        for split in [1, 7, 31, 32, 33, 500, 999] {
            let mut c = Checksum::default();
            for part in data.chunks(split) {
                c.update(part);
            }
            assert_eq!(c.finish(), whole, "fed {split} bytes at a time");
        }
    }

    #[test]
    fn a_file_checksums_as_its_bytes() {
        let dir = std::env::temp_dir().join(format!("pagelab-checksum-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for len in [0usize, 1, 31, 32, 4097, 3 << 20] {
            let data: Vec<u8> = (0..len).map(|i| (i * 13 % 253) as u8).collect();
            let path = dir.join(format!("f{len}"));
            std::fs::write(&path, &data).unwrap();
            let want = checksum_bytes("f", &data);
            assert_eq!(
                checksum_file("f", &path).unwrap(),
                want,
                "{len} bytes, mapped"
            );
            let mut c = Checksum::default();
            read_into(&mut c, std::fs::File::open(&path).unwrap(), &path).unwrap();
            assert_eq!(c.finish(), want.checksum, "{len} bytes, read");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn checksum_tells_close_inputs_apart() {
        let a = vec![0u8; 64];
        let mut b = a.clone();
        b[63] = 1;
        let seen = [
            checksum_bytes("", &a).checksum,
            checksum_bytes("", &b).checksum,
            checksum_bytes("", &a[..63]).checksum,
            checksum_bytes("", &[]).checksum,
        ];
        for i in 0..seen.len() {
            for j in i + 1..seen.len() {
                assert_ne!(seen[i], seen[j]);
            }
        }
        assert!(seen[0].starts_with("pl2:") && seen[0].len() == 20);
    }
}
