//! `TraceChunks`: a trace file's references as chunks of three byte strings
//! (u64 addresses, u8 kinds, u32 sizes, native byte order), which the Python
//! layer views as numpy arrays without a copy.

use crate::run::Source;
use pagelab_core::Event;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Iterates over a trace's references, `chunk` at a time (the last chunk may
/// be shorter). Events other than references (a native trace's map, unmap,
/// fork... events) are skipped and counted in `other_events`.
#[pyclass(module = "pagelab._native")]
pub struct TraceChunks {
    src: std::sync::Mutex<Source>,
    chunk: usize,
    events: Vec<Event>,
    done: bool,
    /// Events that were not references, so far.
    #[pyo3(get)]
    other_events: u64,
}

/// A chunk as Python gets it: addresses, kinds and sizes.
type Chunk<'py> = (
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
);

/// One chunk's columns.
#[derive(Default)]
struct Columns {
    addresses: Vec<u8>,
    kinds: Vec<u8>,
    sizes: Vec<u8>,
}

#[pymethods]
impl TraceChunks {
    /// Opens `path` (Lackey text, plain or compressed, or native; `format`
    /// overrides the detection) to read `chunk` references at a time.
    #[new]
    #[pyo3(signature = (path, format=None, chunk=1 << 20))]
    fn new(py: Python<'_>, path: String, format: Option<String>, chunk: usize) -> PyResult<Self> {
        if chunk == 0 {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "chunk must be at least 1 reference",
            ));
        }
        let src = py
            .detach(|| -> anyhow::Result<Source> {
                let format = format
                    .as_deref()
                    .map(|v| v.parse().map_err(|e| anyhow::anyhow!("--format {v}: {e}")))
                    .transpose()?;
                Ok(pagelab_trace::open(&path, format)?)
            })
            .map_err(|e| crate::error(&e))?;
        Ok(TraceChunks {
            src: std::sync::Mutex::new(src),
            chunk,
            events: Vec::new(),
            done: false,
            other_events: 0,
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next chunk as `(addresses, kinds, sizes)` byte strings, or the end.
    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Chunk<'py>>> {
        if self.done {
            return Ok(None);
        }
        let cols = py
            .detach(|| self.read_chunk())
            .map_err(|e| crate::error(&anyhow::Error::from(e)))?;
        if cols.kinds.is_empty() {
            return Ok(None);
        }
        Ok(Some((
            PyBytes::new(py, &cols.addresses),
            PyBytes::new(py, &cols.kinds),
            PyBytes::new(py, &cols.sizes),
        )))
    }
}

impl TraceChunks {
    /// Reads up to `chunk` references (fewer only at the end of the trace).
    fn read_chunk(&mut self) -> Result<Columns, pagelab_trace::TraceError> {
        let mut cols = Columns::default();
        let src = self.src.get_mut().unwrap_or_else(|p| p.into_inner());
        let mut refs = 0;
        while refs < self.chunk {
            // Never more events than references still wanted: the rest would
            // have to wait for the next chunk.
            self.events.clear();
            if !src.fill(&mut self.events, self.chunk - refs)? {
                self.done = true;
                break;
            }
            for e in &self.events {
                match e {
                    Event::Ref(r) => {
                        cols.addresses.extend_from_slice(&r.addr.0.to_ne_bytes());
                        cols.kinds.push(r.kind as u8);
                        cols.sizes.extend_from_slice(&r.size.to_ne_bytes());
                        refs += 1;
                    }
                    _ => self.other_events += 1,
                }
            }
        }
        Ok(cols)
    }
}
