//! `pagelab convert`: between Lackey text and the native format.

use crate::args::ConvertArgs;
use crate::progress::Progress;
use anyhow::Result;
use pagelab_trace::Format;

/// The output format implied by a file name when `--to` is not given.
fn format_for_output(path: &str) -> Format {
    const LACKEY_SUFFIXES: [&str; 4] = [".txt", ".lackey", ".lackey.zst", ".txt.zst"];
    if LACKEY_SUFFIXES.iter().any(|s| path.ends_with(s)) {
        Format::Lackey
    } else {
        Format::Native
    }
}

pub fn run(a: ConvertArgs) -> Result<()> {
    let from = super::parse_format("--from", a.from.as_deref())?;
    let to = super::parse_format("--to", a.to.as_deref())?
        .unwrap_or_else(|| format_for_output(&a.output));
    let mut src = pagelab_trace::open(&a.input, from)?;
    let progress = Progress::new(&a.input);
    let stats = pagelab_trace::convert(&mut progress.watch(&mut *src), &a.output, to)?;
    progress.finish();
    eprintln!("pagelab: wrote {} events to {}", stats.events, a.output);
    if stats.dropped > 0 {
        eprintln!(
            "pagelab: warning: dropped {} events that Lackey text cannot carry (map, unmap, ...)",
            stats.dropped
        );
    }
    Ok(())
}
