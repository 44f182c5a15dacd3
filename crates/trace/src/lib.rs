//! Trace readers and writers.
//!
//! Every trace, whatever its format, is read through one seam, [`TraceSource`],
//! which hands out [`Event`]s in batches so that the engine's loop never pays a
//! virtual call per reference. Two formats are supported:
//!
//! - **Lackey**: the text printed by `valgrind --tool=lackey --trace-mem=yes`
//!   ([`LackeyReader`], [`LackeyWriter`]), optionally zstd- or xz-compressed;
//! - **native**: pagelab's own binary format, compact and fast to decode, and
//!   able to carry every [`Event`] variant ([`NativeReader`], [`NativeWriter`];
//!   the byte-level layout is in `docs/trace-format.md`).
//!
//! [`open`] opens a file (or `-` for standard input), detecting compression and
//! format; [`convert`] copies any source into a file of either format.
//!
//! ```
//! use pagelab_trace::{LackeyReader, NativeReader, NativeWriter, TraceSource};
//!
//! // Parse some Lackey text...
//! let text = "==1== Lackey\nI  04000b20,3\n L 1ffefffc58,8\n S 1ffefffc50,8\n";
//! let mut lackey = LackeyReader::new(text.as_bytes(), "example.lackey");
//! let mut events = Vec::new();
//! while lackey.fill(&mut events, 1024)? {}
//! assert_eq!(events.len(), 3);
//!
//! // ...write it in the native format and read it back.
//! let mut writer = NativeWriter::new(Vec::new())?;
//! for event in &events {
//!     writer.write(event)?;
//! }
//! let bytes = writer.finish()?;
//! let mut native = NativeReader::new(&bytes[..], "example.pgl");
//! let mut again = Vec::new();
//! while native.fill(&mut again, 1024)? {}
//! assert_eq!(again, events);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Contract: see [`TraceSource`].

#![warn(missing_docs)]

pub mod consumer;
mod convert;
mod lackey;
mod native;
mod open;
mod pages;
mod sink;
mod vfork;

pub use convert::{convert, convert_with, ConvertOptions, ConvertStats};
pub use lackey::{LackeyReader, LackeyWriter, PieceError, Pieces};
pub use native::{
    NativeReader, NativeWriter, DEFAULT_INDEX_FILTER, NATIVE_MAGIC, NATIVE_OLDEST_VERSION,
    NATIVE_VERSION, PAGE_INDEX_CHUNK,
};
pub use open::{open, Format};
pub use pages::{page_word, PageBatch, PageFilter, MAX_FILTER_DEPTH};
pub use sink::{PageSink, RecordSink};
pub use vfork::VforkOrder;

use pagelab_core::{Event, SourceInfo};
use std::sync::atomic::{AtomicU32, Ordering};

/// The largest reference size a reader accepts unless told otherwise: 64K.
///
/// Real tracers emit references of a few bytes up to a few hundred (a vector
/// register, an `xsave` area); one of 4 GiB is a crafted or corrupt record,
/// and every model would step each of its pages (50 such lines took 16 s and
/// 1.5 GB). Readers refuse a larger size with an error naming the file, the
/// line or byte offset and the size.
pub const DEFAULT_MAX_REF_SIZE: u32 = 64 << 10;

// The crate's own unit tests round-trip every representable record (sizes up
// to u32::MAX) through the formats: the limit is the readers' policy for
// users' input, tested from the binary (crates/cli/tests/bad_input.rs).
static MAX_REF_SIZE: AtomicU32 = AtomicU32::new(if cfg!(test) {
    u32::MAX
} else {
    DEFAULT_MAX_REF_SIZE
});

/// Sets the largest reference size the readers accept, for the whole
/// process (the binary's `--max-ref-size`). Process-wide because only the
/// readers' rare paths read it (sizes of three digits or more in Lackey
/// text, escaped sizes in the native format): the fast paths never do.
pub fn set_max_ref_size(bytes: u32) {
    MAX_REF_SIZE.store(bytes, Ordering::Relaxed);
}

/// The limit [`set_max_ref_size`] set.
pub fn max_ref_size() -> u32 {
    MAX_REF_SIZE.load(Ordering::Relaxed)
}

/// The reason a reader gives for a reference above [`max_ref_size`].
pub(crate) const REF_TOO_LARGE: &str = "reference size above the limit (--max-ref-size, 64K unless raised): no tracer emits one so large; raise --max-ref-size to read it anyway";

/// Why a trace could not be read. Every variant names the input and the position.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// Reading the input failed.
    #[error("{source_name}: {err}")]
    Io {
        /// The input's name (path or `-`).
        source_name: String,
        /// The underlying error (already in the message, so not chained as a source:
        /// `anyhow`'s `{:#}` would print it twice).
        err: std::io::Error,
    },
    /// A text trace has a line that is not a valid record.
    #[error("{source_name} line {line}: {reason}: `{text}`")]
    Parse {
        /// The input's name.
        source_name: String,
        /// 1-based line number.
        line: u64,
        /// The offending line (truncated to 200 characters).
        text: String,
        /// What was expected.
        reason: String,
    },
    /// A binary trace is truncated or corrupt.
    #[error("{source_name} at byte offset {offset}: {reason}")]
    Corrupt {
        /// The input's name.
        source_name: String,
        /// Byte offset in the (compressed) file where the problem was found.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// Anything else: unknown format, bad option.
    #[error("{0}")]
    Other(String),
}

impl TraceError {
    /// A copy of this error; an I/O error is copied by kind and message.
    ///
    /// Sources use it to keep returning the same error after a failure.
    pub fn duplicate(&self) -> TraceError {
        match self {
            TraceError::Io { source_name, err } => TraceError::Io {
                source_name: source_name.clone(),
                err: std::io::Error::new(err.kind(), err.to_string()),
            },
            TraceError::Parse {
                source_name,
                line,
                text,
                reason,
            } => TraceError::Parse {
                source_name: source_name.clone(),
                line: *line,
                text: text.clone(),
                reason: reason.clone(),
            },
            TraceError::Corrupt {
                source_name,
                offset,
                reason,
            } => TraceError::Corrupt {
                source_name: source_name.clone(),
                offset: *offset,
                reason: reason.clone(),
            },
            TraceError::Other(s) => TraceError::Other(s.clone()),
        }
    }

    /// An I/O error on the input or output named `name`.
    pub fn io(name: &str, err: std::io::Error) -> TraceError {
        TraceError::Io {
            source_name: name.to_string(),
            err,
        }
    }
}

/// A stream of trace events.
///
/// Contract: `fill` appends at most `max` events to `out` (never clearing it)
/// and returns `Ok(true)` if it appended at least one, `Ok(false)` once the
/// trace is exhausted (appending nothing); after `Ok(false)` or an error, it
/// keeps returning the same. Events come in trace order. A source uses memory
/// bounded independently of the trace's length. Errors name the input and the
/// line or byte offset.
pub trait TraceSource {
    /// Appends up to `max` events to `out`; `Ok(false)` at end of trace.
    fn fill(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, TraceError>;
    /// Where this trace comes from.
    fn info(&self) -> SourceInfo;

    /// [`TraceSource::fill`] through `filter`: takes in up to `max` events,
    /// appending the words of the references `filter` keeps to `out` and
    /// counting every event in it. Answers as `fill` does (`Ok(true)` when
    /// it took in at least one event). A native trace's page index is taken a
    /// chunk at a time, so where it is read ([`NativeReader`]) a `max` below
    /// [`PAGE_INDEX_CHUNK`] may take in up to that many events.
    ///
    /// The default goes through `fill` (into `out.events`); a source that
    /// parses can filter as it parses, storing no event for the references
    /// dropped, and say so in [`TraceSource::parses_to_pages`].
    fn fill_pages(
        &mut self,
        filter: &mut PageFilter,
        out: &mut PageBatch,
        max: usize,
    ) -> Result<bool, TraceError> {
        fill_pages_by_events(self, filter, out, max)
    }

    /// Whether [`TraceSource::fill_pages`] filters as it parses, which costs
    /// less than `fill` alone. If not, a reader thread had better `fill` and
    /// leave the filtering to the thread that consumes the events.
    fn parses_to_pages(&self) -> bool {
        false
    }

    /// The whole trace as pieces to read in parallel, if this source can be
    /// read that way (a plain Lackey file in memory, not yet read); the
    /// source itself is then not needed.
    fn pieces(&self) -> Option<Pieces> {
        None
    }

    /// The size and [`pagelab_core::Checksum`] of the whole input file, where this source
    /// read every byte of it in order and hashed the bytes as it went (a mapped Lackey
    /// file read to its end), so that a result's provenance need not read the file again;
    /// `None` otherwise.
    fn read_checksum(&self) -> Option<(u64, String)> {
        None
    }

    /// The filter (depth, fragments) of this source's page index, once known (a native
    /// trace with one, after its header was read); `None` otherwise.
    fn page_index(&self) -> Option<(usize, bool)> {
        None
    }
}

/// A box or a mutable reference to a source is the source.
macro_rules! forward_source {
    ($($ptr:ty),*) => {$(
        impl<T: TraceSource + ?Sized> TraceSource for $ptr {
            fn fill(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, TraceError> {
                (**self).fill(out, max)
            }
            fn info(&self) -> SourceInfo {
                (**self).info()
            }
            fn fill_pages(
                &mut self,
                filter: &mut PageFilter,
                out: &mut PageBatch,
                max: usize,
            ) -> Result<bool, TraceError> {
                (**self).fill_pages(filter, out, max)
            }
            fn pieces(&self) -> Option<Pieces> {
                (**self).pieces()
            }
            fn parses_to_pages(&self) -> bool {
                (**self).parses_to_pages()
            }
            fn read_checksum(&self) -> Option<(u64, String)> {
                (**self).read_checksum()
            }
            fn page_index(&self) -> Option<(usize, bool)> {
                (**self).page_index()
            }
        }
    )*};
}

forward_source!(Box<T>, &mut T);

/// A trace source over events held in memory (tests, and traces built by
/// hand); its [`SourceInfo`] is the default one.
///
/// ```
/// use pagelab_core::{AccessKind, Event, MemRef, VirtAddr};
/// use pagelab_trace::{Events, TraceSource};
///
/// let r = Event::Ref(MemRef { addr: VirtAddr(4096), size: 8, kind: AccessKind::Load });
/// let mut src = Events(vec![r; 3].into_iter());
/// let mut out = Vec::new();
/// assert!(src.fill(&mut out, 2).unwrap() && out.len() == 2);
/// assert!(src.fill(&mut out, 2).unwrap() && out.len() == 3);
/// assert!(!src.fill(&mut out, 2).unwrap());
/// ```
pub struct Events(pub std::vec::IntoIter<Event>);

impl TraceSource for Events {
    fn fill(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, TraceError> {
        let before = out.len();
        out.extend(self.0.by_ref().take(max));
        Ok(out.len() > before)
    }
    fn info(&self) -> SourceInfo {
        SourceInfo::default()
    }
}

/// [`TraceSource::fill_pages`] the plain way: `src`'s events into
/// `out.events`, then through `filter` (the trait's default, for sources that
/// override it but sometimes need it).
pub fn fill_pages_by_events<S: TraceSource + ?Sized>(
    src: &mut S,
    filter: &mut PageFilter,
    out: &mut PageBatch,
    max: usize,
) -> Result<bool, TraceError> {
    out.events.clear();
    let r = src.fill(&mut out.events, max);
    filter.take_events(out);
    r
}

/// What a source has come to: still going, finished, or failed for good.
///
/// Keeps the contract that a source repeats its last answer after the end or
/// an error, and that the events read before an error are delivered (with
/// `Ok(true)`) before the error itself.
#[derive(Debug, Default)]
pub(crate) enum Latch {
    /// Still delivering events.
    #[default]
    Open,
    /// Returned `Ok(false)`.
    Finished,
    /// Returns (or is about to return) this error.
    Failed(TraceError),
}

/// The whole of a latched source's `fill`: repeat a final answer, else run
/// `inner` for one batch and settle its outcome (see [`Latch::settle`]).
pub(crate) fn fill_latched<S>(
    source: &mut S,
    out: &mut Vec<Event>,
    max: usize,
    latch: impl Fn(&mut S) -> &mut Latch,
    inner: impl FnOnce(&mut S, &mut Vec<Event>, usize) -> Result<(), TraceError>,
) -> Result<bool, TraceError> {
    fill_latched_counted(source, out, max, |o| o.len() as u64, latch, inner)
}

/// [`fill_latched`] for any output, whose events taken in so far `count` tells.
pub(crate) fn fill_latched_counted<S, O>(
    source: &mut S,
    out: &mut O,
    max: usize,
    count: impl Fn(&O) -> u64,
    latch: impl Fn(&mut S) -> &mut Latch,
    inner: impl FnOnce(&mut S, &mut O, usize) -> Result<(), TraceError>,
) -> Result<bool, TraceError> {
    if let Some(answer) = latch(source).repeat() {
        return answer;
    }
    let before = count(out);
    let r = inner(source, out, max);
    let appended = (count(out) - before) as usize;
    latch(source).settle(r, appended, max)
}

impl Latch {
    /// The answer to repeat, if the source has stopped.
    pub(crate) fn repeat(&self) -> Option<Result<bool, TraceError>> {
        match self {
            Latch::Open => None,
            Latch::Finished => Some(Ok(false)),
            Latch::Failed(e) => Some(Err(e.duplicate())),
        }
    }

    /// Turns the outcome of one batch into `fill`'s answer.
    ///
    /// `r` is `Ok` when the batch stopped at `max` or at the end of the trace;
    /// `appended` is how many events it appended. With `max > 0`, `Ok` and
    /// nothing appended means the end. An error after some events is held back
    /// until the next call so that those events are not lost.
    pub(crate) fn settle(
        &mut self,
        r: Result<(), TraceError>,
        appended: usize,
        max: usize,
    ) -> Result<bool, TraceError> {
        match r {
            Ok(()) if appended > 0 || max == 0 => Ok(true),
            Ok(()) => {
                *self = Latch::Finished;
                Ok(false)
            }
            Err(e) if appended > 0 => {
                *self = Latch::Failed(e);
                Ok(true)
            }
            Err(e) => {
                *self = Latch::Failed(e.duplicate());
                Err(e)
            }
        }
    }
}
