//! `pagelab convert`: between Lackey text and the native format.

use crate::args::ConvertArgs;
use crate::progress::Progress;
use anyhow::{Context, Result};
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
    let page_index = match (&a.page_index_tlb, a.no_page_index) {
        (_, true) => None,
        (Some(tlb), false) => {
            let tlb =
                pagelab_tlb::resolve(tlb).with_context(|| format!("--page-index-tlb {tlb}"))?;
            Some(pagelab_engine::page_filter_params(&tlb))
        }
        (None, false) => Some(pagelab_trace::DEFAULT_INDEX_FILTER),
    };
    if to != Format::Native && (a.page_index_tlb.is_some() || a.no_page_index) {
        anyhow::bail!(
            "--page-index-tlb and --no-page-index are for a native output; {} is written as Lackey text",
            a.output
        );
    }
    let mut src = pagelab_trace::open(&a.input, from)?;
    let progress = Progress::new(&a.input);
    let options = pagelab_trace::ConvertOptions { page_index };
    let stats =
        pagelab_trace::convert_with(&mut progress.watch(&mut *src), &a.output, to, options)?;
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
