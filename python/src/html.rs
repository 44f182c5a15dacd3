//! `write_html`: the HTML report of `pagelab report`, for results made in Python.

use pyo3::prelude::*;

/// Writes the self-contained HTML report of `documents` (pairs of a heading
/// and a `pagelab.sim/1`, `pagelab.study/1`, `pagelab.lab/1` or
/// `pagelab.sweep/1` JSON document, laid side by side; a sweep as one column
/// per configuration, its heading prefixed to theirs) to `path`, with the
/// default recommendation rule (`pagelab report`'s defaults).
#[pyfunction]
pub fn write_html(py: Python<'_>, path: String, documents: Vec<(String, String)>) -> PyResult<()> {
    py.detach(|| -> anyhow::Result<()> {
        let mut named = Vec::new();
        for (name, text) in &documents {
            let origin = if name.is_empty() { "the sweep" } else { name };
            named.extend(pagelab_report::parse_columns(text, origin, name)?);
        }
        pagelab_report::html::write_html(&path, &named, &Default::default())
    })
    .map_err(|e| crate::error(&e))
}
