//! What made a result, as the command line and the Python package record it: pagelab's
//! version, the call, the machine modelled, this host, and a checksum of each trace read.

use anyhow::{Context, Result};
use pagelab_report::{InputChecksum, Provenance};
use std::path::Path;

/// The provenance of a result made by `call` (the command line's arguments, or the Python
/// function and its arguments), modelling `machine` (a preset name or a machine file, as
/// given) over `inputs`. A machine given as a file is checksummed among the inputs.
pub fn provenance(
    call: Vec<String>,
    machine: Option<&str>,
    mut inputs: Vec<InputChecksum>,
) -> Result<Provenance> {
    if let Some(m) = machine {
        let path = Path::new(m);
        if path.is_file() {
            inputs.push(
                pagelab_report::checksum_file(m, path)
                    .with_context(|| format!("checksumming the machine file `{m}`"))?,
            );
        }
    }
    Ok(Provenance {
        pagelab_version: env!("CARGO_PKG_VERSION").to_string(),
        command_line: call,
        machine: machine.map(str::to_string),
        host: Some(pagelab_lab::sysfs::Sysfs::host().host_info()),
        inputs,
    })
}

/// The checksum of the trace the user named `name` and `src` read: the one `src` took as
/// it read the file ([`pagelab_trace::TraceSource::read_checksum`]), else
/// [`input_checksum`]'s second pass.
///
/// # Errors
/// When the file cannot be read again; the message names it.
pub fn read_checksum(
    name: &str,
    src: &dyn pagelab_trace::TraceSource,
) -> Result<Option<InputChecksum>> {
    match src.read_checksum() {
        Some((bytes, checksum)) => Ok(Some(InputChecksum {
            name: name.to_string(),
            bytes,
            checksum,
        })),
        None => input_checksum(name),
    }
}

/// The checksum of a trace the user named: a regular file's bytes, the bundled trace's
/// embedded bytes; nothing for standard input, a workload or a program captured on the fly.
pub fn input_checksum(name: &str) -> Result<Option<InputChecksum>> {
    if name == crate::builtin::REAL {
        return Ok(Some(crate::builtin::real_trace_checksum()));
    }
    let path = Path::new(name);
    if name == "-" || !path.is_file() {
        return Ok(None);
    }
    pagelab_report::checksum_file(name, path)
        .map(Some)
        .with_context(|| format!("checksumming the trace `{name}` for the result's provenance"))
}
