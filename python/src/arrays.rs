//! `from_arrays`: a trace made in Python (three equal-length arrays) as a
//! trace source, read by the engine without the GIL and without a copy.

use crate::run::{ModelWords, Source};
use anyhow::bail;
use pagelab_core::{AccessKind, Event, MemRef, SourceInfo, VirtAddr};
use pagelab_trace::{TraceError, TraceSource};
use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;

/// Kinds by their code: the order of [`AccessKind`]'s discriminants.
const KINDS: [AccessKind; 4] = [
    AccessKind::Instr,
    AccessKind::Load,
    AccessKind::Store,
    AccessKind::Modify,
];

/// Studies (or runs the policies over) the references `addresses[i]`,
/// `kinds[i]`, `sizes[i]` (C-contiguous buffers of u64, u8 and u32) in order,
/// exactly as if they were read from a Lackey trace; returns the JSON result.
#[pyfunction]
pub fn from_arrays(
    py: Python<'_>,
    addresses: PyBuffer<u64>,
    kinds: PyBuffer<u8>,
    sizes: PyBuffer<u32>,
    name: String,
    model: ModelWords,
) -> PyResult<String> {
    let call = model.call("pagelab.from_arrays", vec![format!("name={name}")]);
    let src = ArraySource::new(addresses, kinds, sizes, name).map_err(|e| crate::error(&e))?;
    let threads = model.thread_bound()?;
    py.detach(|| {
        pagelab_engine::with_threads(threads, || {
            let (cfg, machine) = crate::run::study_config(&model)?;
            let src = Box::new(src) as Source;
            crate::run::simulate(src, &cfg, machine.as_ref(), &model, call, Vec::new())
        })
    })
    .map_err(|e| crate::error(&e))
}

/// Three buffers read as references, a batch at a time.
struct ArraySource {
    addresses: PyBuffer<u64>,
    kinds: PyBuffer<u8>,
    sizes: PyBuffer<u32>,
    len: usize,
    next: usize,
    name: String,
    failed: Option<String>,
}

impl ArraySource {
    fn new(
        addresses: PyBuffer<u64>,
        kinds: PyBuffer<u8>,
        sizes: PyBuffer<u32>,
        name: String,
    ) -> anyhow::Result<ArraySource> {
        let lens = [
            ("addresses", &addresses.dimensions(), addresses.item_count()),
            ("kinds", &kinds.dimensions(), kinds.item_count()),
            ("sizes", &sizes.dimensions(), sizes.item_count()),
        ];
        for (what, dims, _) in lens {
            if *dims != 1 {
                bail!("{name}: {what} has {dims} dimensions: give one-dimensional arrays");
            }
        }
        let len = addresses.item_count();
        if kinds.item_count() != len || sizes.item_count() != len {
            bail!(
                "{name}: the arrays differ in length: addresses {}, kinds {}, sizes {}",
                lens[0].2,
                lens[1].2,
                lens[2].2
            );
        }
        if !(addresses.is_c_contiguous() && kinds.is_c_contiguous() && sizes.is_c_contiguous()) {
            bail!("{name}: the arrays must be contiguous (numpy.ascontiguousarray makes them so)");
        }
        Ok(ArraySource {
            addresses,
            kinds,
            sizes,
            len,
            next: 0,
            name,
            failed: None,
        })
    }

    /// Item `i` of a buffer checked to be one-dimensional, contiguous and longer than `i`.
    fn item<T: pyo3::buffer::Element + Copy>(buf: &PyBuffer<T>, i: usize) -> T {
        let ptr = buf.buf_ptr() as *const T;
        // SAFETY: the buffer is C-contiguous with `len > i` items of T (checked
        // in `new`) and stays exported, so alive and unmoved, while `self`
        // holds it. Python code mutating the array from another thread during
        // the run would race, as with any buffer read without the GIL; the
        // Python docstring says the arrays are read during the call.
        unsafe { ptr.add(i).read() }
    }
}

impl TraceSource for ArraySource {
    fn fill(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, TraceError> {
        if let Some(reason) = &self.failed {
            return Err(TraceError::Other(reason.clone()));
        }
        let end = self.len.min(self.next + max);
        for i in self.next..end {
            let code = Self::item(&self.kinds, i);
            let Some(&kind) = KINDS.get(usize::from(code)) else {
                let reason = format!(
                    "{}: kinds[{i}] is {code}: a kind is 0 (instruction fetch), 1 (load), \
                     2 (store) or 3 (modify)",
                    self.name
                );
                self.failed = Some(reason.clone());
                return Err(TraceError::Other(reason));
            };
            let size = Self::item(&self.sizes, i);
            if size > pagelab_trace::max_ref_size() {
                let reason = format!(
                    "{}: sizes[{i}] is {size}: a reference size above the limit \
                     ({} bytes; --max-ref-size raises it)",
                    self.name,
                    pagelab_trace::max_ref_size()
                );
                self.failed = Some(reason.clone());
                return Err(TraceError::Other(reason));
            }
            out.push(Event::Ref(MemRef {
                addr: VirtAddr(Self::item(&self.addresses, i)),
                size,
                kind,
            }));
        }
        let more = end > self.next;
        self.next = end;
        Ok(more)
    }

    fn info(&self) -> SourceInfo {
        SourceInfo {
            kind: "arrays".to_string(),
            name: self.name.clone(),
            compression: None,
            params: Default::default(),
        }
    }
}
