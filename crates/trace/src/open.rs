//! Opening a trace file: compression and format detection.

use crate::{LackeyReader, NativeReader, TraceError, TraceSource, NATIVE_MAGIC};
use std::io::{self, Cursor, Read};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

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

/// Bytes read to tell the formats apart.
const SNIFF: usize = 64;

/// The format of a (decompressed) input from its first bytes: native when it
/// starts with the magic, Lackey when they are text. Binary bytes without the
/// magic are neither, and saying "bad Lackey line" about them would mislead
/// (a native trace with a damaged magic was reported so).
fn sniff(head: &[u8], path: &str, compression: Option<&str>) -> Result<Format, TraceError> {
    if head.starts_with(&NATIVE_MAGIC) {
        return Ok(Format::Native);
    }
    // A NUL: no text has one, and every native header does (its version is
    // a little-endian integer). Other control bytes are left to the Lackey
    // reader, which names the line they are on.
    let binary = memchr::memchr(0, head);
    let Some(at) = binary else {
        return Ok(Format::Lackey);
    };
    let start = &head[..head.len().min(NATIVE_MAGIC.len())];
    let alike = start
        .iter()
        .zip(NATIVE_MAGIC)
        .filter(|(a, b)| *a == b)
        .count();
    let hint = if alike >= NATIVE_MAGIC.len() / 2 {
        " (a native trace with a damaged magic?)"
    } else {
        ""
    };
    let within = compression.map_or(String::new(), |c| format!(" of the {c}-decompressed data"));
    Err(TraceError::Corrupt {
        source_name: path.to_string(),
        offset: at as u64,
        reason: format!(
            "byte {:#04x}{within} is not Lackey text, and the input does not start with the native magic `PAGELABT` but with `{}`{hint}: not a trace pagelab can read (give --format to force one)",
            head[at],
            pagelab_core::escape_bytes(start)
        ),
    })
}

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
    let mut head = Vec::with_capacity(SNIFF);
    (&file)
        .take(SNIFF as u64)
        .read_to_end(&mut head)
        .map_err(|e| TraceError::io(path, e))?;
    let plain = !head.starts_with(&ZSTD_MAGIC) && !head.starts_with(&XZ_MAGIC);
    let lackey = plain && format.map_or_else(|| sniff(&head, path, None), Ok)? == Format::Lackey;
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
    let kind = if head.starts_with(&ZSTD_MAGIC) {
        Some("zstd")
    } else if head.starts_with(&XZ_MAGIC) {
        Some("xz")
    } else {
        None
    };
    let (compression, input): (Option<String>, Input) = match kind {
        None => (None, input),
        Some(kind) => {
            let taken = Arc::new(AtomicU64::new(0));
            let counted = Counted {
                inner: input,
                taken: taken.clone(),
            };
            let d: Input = if kind == "zstd" {
                Box::new(
                    zstd::stream::read::Decoder::new(counted)
                        .map_err(|e| TraceError::io(path, e))?,
                )
            } else {
                Box::new(liblzma::read::XzDecoder::new_multi_decoder(counted))
            };
            (Some(kind.into()), Decompressed::boxed(d, kind, taken))
        }
    };
    let (head, input) = peek(input, SNIFF, path)?;
    let format = match format {
        Some(f) => f,
        None => sniff(&head, path, compression.as_deref())?,
    };
    Ok(match format {
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

/// The compressed input, counting the bytes the decoder has taken from it.
struct Counted {
    inner: Input,
    taken: Arc<AtomicU64>,
}

impl Read for Counted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.taken.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// A decoder's output, whose failures say what they mean: the libraries'
/// words ("incomplete frame", "premature eof") name neither the compression
/// nor where. The compressed offset is an upper bound (decoders read ahead).
struct Decompressed<R> {
    inner: R,
    kind: &'static str,
    taken: Arc<AtomicU64>,
    produced: u64,
}

impl<R: Read + Send + 'static> Decompressed<R> {
    fn boxed(inner: R, kind: &'static str, taken: Arc<AtomicU64>) -> Input {
        Box::new(Decompressed {
            inner,
            kind,
            taken,
            produced: 0,
        })
    }
}

impl<R: Read> Read for Decompressed<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.inner.read(buf) {
            Ok(n) => {
                self.produced += n as u64;
                Ok(n)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Err(e),
            Err(e) => Err(io::Error::new(
                e.kind(),
                format!(
                    "{}-compressed input corrupt or truncated within its first {} bytes, after {} bytes of decompressed data ({e})",
                    self.kind,
                    self.taken.load(Ordering::Relaxed),
                    self.produced
                ),
            )),
        }
    }
}
