//! `write_html`: the HTML report of `pagelab report`, for results made in Python.

use pyo3::prelude::*;

/// Writes the self-contained HTML report of `documents` (pairs of a heading
/// and a `pagelab.sim/1`, `pagelab.study/1` or `pagelab.lab/1` JSON
/// document, laid side by side) to `path`, with the default recommendation
/// rule (`pagelab report`'s defaults).
#[pyfunction]
pub fn write_html(py: Python<'_>, path: String, documents: Vec<(String, String)>) -> PyResult<()> {
    py.detach(|| -> anyhow::Result<()> {
        let named = documents
            .iter()
            .map(|(name, text)| {
                Ok(pagelab_report::html::Named {
                    name: name.clone(),
                    result: pagelab_report::parse_any(text, name)?,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        pagelab_report::html::write_html(&path, &named, &Default::default())
    })
    .map_err(|e| crate::error(&e))
}
