//! Trace readers and writers.
//!
//! Every trace, whatever its format, is read through one seam, [`TraceSource`],
//! which hands out [`Event`]s in batches so that the engine's loop never pays a
//! virtual call per reference.
//!
//! Contract: see [`TraceSource`].

use pagelab_core::{Event, SourceInfo};

/// Why a trace could not be read. Every variant names the input and the position.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// Reading the input failed.
    #[error("{source_name}: {err}")]
    Io {
        /// The input's name (path or `-`).
        source_name: String,
        /// The underlying error.
        #[source]
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
}

impl<T: TraceSource + ?Sized> TraceSource for Box<T> {
    fn fill(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, TraceError> {
        (**self).fill(out, max)
    }
    fn info(&self) -> SourceInfo {
        (**self).info()
    }
}
