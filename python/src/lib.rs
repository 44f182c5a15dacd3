//! `pagelab._native`: the engine behind the Python package `pagelab`.
//!
//! A thin layer: every function takes the words the command line takes,
//! builds the same engine inputs through [`pagelab::model`] and
//! [`pagelab::builtin`], runs the engine's highest-level entry points (the
//! ones `pagelab study` and `pagelab sim` call) with the GIL released, and
//! returns the versioned JSON result as a string. The Python side (the
//! `pagelab` package next to this crate) makes results, DataFrames and sweeps
//! from that JSON. No Python code runs per reference.
//!
//! Errors are raised as `pagelab.PagelabError` carrying the message the
//! command line prints after `pagelab: error: `.

#![warn(missing_docs)]

mod arrays;
mod chunks;
mod html;
mod run;

use pyo3::prelude::*;

pyo3::create_exception!(
    pagelab,
    PagelabError,
    pyo3::exceptions::PyException,
    "An error of pagelab's engine, with the message the command line prints."
);

/// An `anyhow` error as the command line shows it, raised as `PagelabError`.
pub(crate) fn error(e: &anyhow::Error) -> PyErr {
    PagelabError::new_err(pagelab_core::escape(&format!("{e:#}")).to_string())
}

/// Sets the largest reference a trace may hold for this process, as `--max-ref-size` does
/// (`size` as the command line writes it: `1M`, or bytes); returns the limit before, in bytes.
#[pyfunction]
fn set_max_ref_size(size: &str) -> PyResult<u32> {
    let bytes = pagelab::model::max_ref_size(size).map_err(|e| error(&e))?;
    let before = pagelab_trace::max_ref_size();
    pagelab_trace::set_max_ref_size(bytes);
    Ok(before)
}

/// A swept parameter's name, its values and one workload spec per value.
type Expanded = (String, Vec<u64>, Vec<String>);

/// The workloads of a spec with one parameter written `FROM..TO/STEP`, as `pagelab sim
/// --workload` expands it (`stride:heap=128K..512K/128K` gives one spec per heap): the
/// parameter's name, its values and the specs; `None` when the spec sweeps nothing.
#[pyfunction]
fn expand_workload(spec: &str) -> PyResult<Option<Expanded>> {
    let sweep = pagelab::param_sweep::expand(spec).map_err(|e| error(&e))?;
    Ok(sweep.map(|s| (s.param, s.values, s.specs)))
}

/// What a sweep knows of a workload's length before running it (its task's cost estimate):
/// `("refs", n)`, the exact references a synthetic workload emits, computed from its
/// parameters; or `("zstd-lackey", bytes)` for the bundled real trace (`gzip`), the size of
/// its compressed Lackey text, as a trace file is known by its size.
#[pyfunction]
fn workload_size(spec: &str) -> PyResult<(&'static str, u64)> {
    if spec.trim() == pagelab::builtin::REAL {
        return Ok(("zstd-lackey", pagelab::builtin::real_trace_checksum().bytes));
    }
    let refs = pagelab_workloads::total_refs(spec)
        .map_err(|e| error(&anyhow::Error::new(e).context(format!("workload {spec}"))))?;
    Ok(("refs", refs))
}

/// The module `pagelab._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("PagelabError", m.py().get_type::<PagelabError>())?;
    m.add_function(wrap_pyfunction!(run::run, m)?)?;
    m.add_function(wrap_pyfunction!(run::capture, m)?)?;
    m.add_function(wrap_pyfunction!(run::default_workloads, m)?)?;
    m.add_function(wrap_pyfunction!(arrays::from_arrays, m)?)?;
    m.add_function(wrap_pyfunction!(html::write_html, m)?)?;
    m.add_function(wrap_pyfunction!(set_max_ref_size, m)?)?;
    m.add_function(wrap_pyfunction!(expand_workload, m)?)?;
    m.add_function(wrap_pyfunction!(workload_size, m)?)?;
    m.add_class::<chunks::TraceChunks>()?;
    Ok(())
}
