//! Workloads the binary carries: the synthetic generators of `pagelab-workloads`
//! plus one real program's trace, so that `pagelab study` shows real code too.

use anyhow::{bail, Context, Result};
use pagelab_trace::{LackeyReader, TraceSource};

/// The name of the bundled real trace.
pub const REAL: &str = "gzip";

/// What `pagelab workloads` says about the bundled real trace.
pub const REAL_SUMMARY: &str = "a real program: Valgrind Lackey trace of `gzip -9` compressing 20 KB of text \
     (4.5 M references, dynamic loader included; bundled in the binary, tests/data/gzip-9.lackey.zst)";

static REAL_TRACE: &[u8] = include_bytes!("../../../tests/data/gzip-9.lackey.zst");

/// The size and checksum of the bundled trace's embedded (compressed) bytes.
pub fn real_trace_checksum() -> pagelab_report::InputChecksum {
    pagelab_report::checksum_bytes(REAL, REAL_TRACE)
}

/// The default workloads of `pagelab study`: every synthetic one and the real trace.
pub fn default_set() -> Vec<String> {
    let mut v: Vec<String> = pagelab_workloads::default_set()
        .into_iter()
        .map(String::from)
        .collect();
    v.push(REAL.to_string());
    v
}

/// A source the engine can be moved to another thread with.
pub type Source = Box<dyn TraceSource + Send>;

/// Opens the input a user named: a trace file (`-` for standard input) in `format` (`lackey`
/// or `native`; recognised from the bytes when `None`), or a workload spec as [`open`] takes
/// it. `None` when neither is named; naming both is an error. `pagelab sim`/`sharing` and the
/// Python package's `study`/`sim` open their inputs here, so that they read the same input the
/// same way and fail with the same words.
pub fn open_input(
    trace: Option<&str>,
    workload: Option<&str>,
    format: Option<&str>,
) -> Result<Option<Source>> {
    Ok(Some(match (trace, workload) {
        (Some(_), Some(_)) => bail!("give one input: a trace or a workload, not both"),
        (Some(path), None) => {
            let format = format
                .map(|v| v.parse().map_err(|e| anyhow::anyhow!("--format {v}: {e}")))
                .transpose()?;
            pagelab_trace::open(path, format)?
        }
        (None, Some(spec)) => open(spec).with_context(|| format!("--workload {spec}"))?,
        (None, None) => return Ok(None),
    }))
}

/// Opens a workload spec: the bundled real trace by name, or a synthetic workload.
pub fn open(spec: &str) -> Result<Source> {
    if spec.trim() == REAL {
        let decoder = zstd::stream::read::Decoder::new(REAL_TRACE)
            .context("opening the bundled gzip trace")?;
        let reader = LackeyReader::new(decoder, "gzip (bundled Lackey trace of gzip -9)")
            .with_compression(Some("zstd".to_string()));
        return Ok(Box::new(reader));
    }
    // `gzip:...` is the bundled trace with parameters, which it has none of:
    // "unknown workload `gzip`" would contradict `pagelab workloads`.
    if let Some((name, params)) = spec.trim().split_once(':') {
        if name == REAL {
            anyhow::bail!(
                "workload {spec}: `{REAL}` is the bundled real trace, which takes no parameters \
                 (`:{params}`); write `--workload {REAL}`"
            );
        }
    }
    pagelab_workloads::open(spec)
        .with_context(|| format!("workload {spec} (`{REAL}`, the bundled real trace, is one more)"))
}
