//! Opening a trace file: compression and format detection.

use crate::{LackeyReader, NativeReader, TraceError, TraceSource, NATIVE_MAGIC};
use std::io::{Cursor, Read};
use std::str::FromStr;

/// A trace file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// Valgrind Lackey text (`valgrind --tool=lackey --trace-mem=yes`).
    Lackey,
    /// pagelab's native binary format (`docs/trace-format.md`).
    Native,
}

impl FromStr for Format {
    type Err = TraceError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "lackey" => Ok(Format::Lackey),
            "native" => Ok(Format::Native),
            _ => Err(TraceError::Other(format!(
                "unknown trace format `{s}`: valid formats are `lackey` and `native`"
            ))),
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Format::Lackey => "lackey",
            Format::Native => "native",
        })
    }
}

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
const XZ_MAGIC: [u8; 6] = [0xfd, b'7', b'z', b'X', b'Z', 0];

type Input = Box<dyn Read + Send>;

/// Opens the trace at `path` (`-` for standard input).
///
/// Compression is detected by magic bytes: zstd, xz, or none. The format is
/// then detected from the (decompressed) start of the input: the native magic
/// means [`Format::Native`], anything else [`Format::Lackey`]; `format`
/// overrides the detection. A native trace is normally not compressed again
/// (its blocks already are), but one that was is read through the decompressor.
///
/// A regular file of plain Lackey text is parsed in place through a memory
/// map ([`LackeyReader::mapped`]); it must not change while it is read.
pub fn open(path: &str, format: Option<Format>) -> Result<Box<dyn TraceSource + Send>, TraceError> {
    if path == "-" {
        return open_input(Box::new(std::io::stdin()), path, format);
    }
    let file = std::fs::File::open(path).map_err(|e| TraceError::io(path, e))?;
    let regular = file.metadata().is_ok_and(|m| m.is_file());
    let mut head = Vec::with_capacity(NATIVE_MAGIC.len());
    (&file)
        .take(NATIVE_MAGIC.len() as u64)
        .read_to_end(&mut head)
        .map_err(|e| TraceError::io(path, e))?;
    let plain = !head.starts_with(&ZSTD_MAGIC) && !head.starts_with(&XZ_MAGIC);
    let lackey = format.unwrap_or(if head == NATIVE_MAGIC {
        Format::Native
    } else {
        Format::Lackey
    }) == Format::Lackey;
    if regular && plain && lackey {
        return Ok(Box::new(LackeyReader::mapped(file, path)?));
    }
    open_input(Box::new(Cursor::new(head).chain(file)), path, format)
}

/// [`open`] on an input whose compression and format are still to be detected.
fn open_input(
    input: Input,
    path: &str,
    format: Option<Format>,
) -> Result<Box<dyn TraceSource + Send>, TraceError> {
    const _: () = assert!(NATIVE_MAGIC.len() >= XZ_MAGIC.len());
    let (head, input) = peek(input, XZ_MAGIC.len(), path)?;
    let (compression, input): (Option<String>, Input) = if head.starts_with(&ZSTD_MAGIC) {
        let d = zstd::stream::read::Decoder::new(input).map_err(|e| TraceError::io(path, e))?;
        (Some("zstd".into()), Box::new(d))
    } else if head.starts_with(&XZ_MAGIC) {
        (
            Some("xz".into()),
            Box::new(liblzma::read::XzDecoder::new_multi_decoder(input)),
        )
    } else {
        (None, input)
    };
    let (head, input) = peek(input, NATIVE_MAGIC.len(), path)?;
    let detected = if head == NATIVE_MAGIC {
        Format::Native
    } else {
        Format::Lackey
    };
    Ok(match format.unwrap_or(detected) {
        Format::Native => Box::new(NativeReader::new(input, path).with_compression(compression)),
        Format::Lackey => Box::new(LackeyReader::new(input, path).with_compression(compression)),
    })
}

/// Reads up to `n` bytes from the start of `input` and returns them with a
/// reader that still yields the whole input.
fn peek(mut input: Input, n: usize, name: &str) -> Result<(Vec<u8>, Input), TraceError> {
    let mut head = Vec::with_capacity(n);
    (&mut input)
        .take(n as u64)
        .read_to_end(&mut head)
        .map_err(|e| TraceError::io(name, e))?;
    let rest: Input = Box::new(Cursor::new(head.clone()).chain(input));
    Ok((head, rest))
}
