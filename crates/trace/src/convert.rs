//! Copying any trace source into a file of either format.

use crate::{Format, LackeyWriter, NativeWriter, TraceError, TraceSource};
use pagelab_core::Event;
use std::io;

/// What [`convert`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConvertStats {
    /// Events written to the output.
    pub events: u64,
    /// Events the output format cannot hold (non-references, for Lackey), not written.
    pub dropped: u64,
}

/// How [`convert_with`] writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvertOptions {
    /// A native output's page index: the filter (depth, fragments) it is made with, or
    /// none (see [`NativeWriter::with_page_index`]).
    pub page_index: Option<(usize, bool)>,
}

impl Default for ConvertOptions {
    /// A page index for the default TLB's study.
    fn default() -> Self {
        ConvertOptions {
            page_index: Some(crate::native::DEFAULT_INDEX_FILTER),
        }
    }
}

/// Events taken from the source at a time.
const BATCH: usize = 1 << 16;

/// Writes every event of `src` to `out_path` (`-` for standard output) in `format`.
///
/// A Lackey output whose name ends in `.zst` is compressed with zstd. A native
/// output is never compressed again: its blocks already are. Lackey cannot
/// hold events other than references; they are counted in
/// [`ConvertStats::dropped`].
pub fn convert(
    src: &mut dyn TraceSource,
    out_path: &str,
    format: Format,
) -> Result<ConvertStats, TraceError> {
    convert_with(src, out_path, format, ConvertOptions::default())
}

/// [`convert`] with `options`.
pub fn convert_with(
    src: &mut dyn TraceSource,
    out_path: &str,
    format: Format,
    options: ConvertOptions,
) -> Result<ConvertStats, TraceError> {
    let io_err = |e: io::Error| TraceError::io(out_path, e);
    // A failed conversion leaves no file: a partial Lackey file would read
    // later as a valid shorter trace.
    let out = pagelab_core::Output::create(out_path).map_err(io_err)?;
    match format {
        Format::Native => {
            let mut w = NativeWriter::new(out).map_err(io_err)?;
            w = match options.page_index {
                Some((depth, fragments)) => w.with_page_index(depth, fragments),
                None => w.without_page_index(),
            };
            pump(src, |e| w.write(e)).map_err(|e| e.named(out_path))?;
            let events = w.written();
            w.finish().map_err(io_err)?.commit().map_err(io_err)?;
            Ok(ConvertStats { events, dropped: 0 })
        }
        Format::Lackey if out_path.ends_with(".zst") => {
            let enc = zstd::stream::write::Encoder::new(out, 3).map_err(io_err)?;
            let mut w = LackeyWriter::new(enc);
            pump(src, |e| w.write(e)).map_err(|e| e.named(out_path))?;
            let stats = ConvertStats {
                events: w.written(),
                dropped: w.dropped(),
            };
            w.finish()
                .map_err(io_err)?
                .finish()
                .map_err(io_err)?
                .commit()
                .map_err(io_err)?;
            Ok(stats)
        }
        Format::Lackey => {
            // The Lackey writer gathers 64 KiB before each write: no BufWriter needed.
            let mut w = LackeyWriter::new(out);
            pump(src, |e| w.write(e)).map_err(|e| e.named(out_path))?;
            let stats = ConvertStats {
                events: w.written(),
                dropped: w.dropped(),
            };
            w.finish().map_err(io_err)?.commit().map_err(io_err)?;
            Ok(stats)
        }
    }
}

/// A failure while pumping: reading the source, or writing (named later).
enum PumpError {
    Read(TraceError),
    Write(io::Error),
}

impl PumpError {
    fn named(self, out_path: &str) -> TraceError {
        match self {
            PumpError::Read(e) => e,
            PumpError::Write(e) => TraceError::io(out_path, e),
        }
    }
}

fn pump(
    src: &mut dyn TraceSource,
    mut write: impl FnMut(&Event) -> io::Result<()>,
) -> Result<(), PumpError> {
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        batch.clear();
        if !src.fill(&mut batch, BATCH).map_err(PumpError::Read)? {
            return Ok(());
        }
        for e in &batch {
            write(e).map_err(PumpError::Write)?;
        }
    }
}
