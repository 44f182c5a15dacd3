//! The native side of `pagelab validate`: a child process that performs a
//! workload's data references on real memory mapped at the workload's own
//! virtual addresses, so the kernel sees exactly the first touches the model
//! sees.
//!
//! The child maps the workload's data extent with `MAP_FIXED_NOREPLACE` at the
//! very addresses of the trace (the page-aligned hull of every data reference),
//! advises it with `MADV_HUGEPAGE` in madvise mode, and replays the references
//! twice: a dry pass that generates every event without touching memory (the
//! baseline: faults of the generator itself), then the real pass. It reports the
//! minor faults of each pass from `getrusage` and the change of the kernel's
//! THP counters over the real pass.

use crate::counters::CounterSnapshot;
use crate::sysfs::{Knob, Sysfs};
use anyhow::{bail, Context, Result};
use pagelab_core::{AccessKind, Event, MemRef, PageSize, VirtAddr};
use pagelab_trace::TraceSource;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Events generated per batch; the buffer is allocated once, before any counting.
const BATCH: usize = 1 << 15;

/// How the replay advises its mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Advise {
    /// No advice (the `always` settings need none).
    None,
    /// `madvise(MADV_HUGEPAGE)` on the whole mapping.
    Huge,
}

/// What one replay measured; printed by the child as one JSON line.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplayReport {
    /// The workload spec replayed.
    pub workload: String,
    /// First byte of the mapping.
    pub start: u64,
    /// Length of the mapping in bytes.
    pub len: u64,
    /// Whether the mapping was given MADV_HUGEPAGE.
    pub advised: bool,
    /// The THP settings the kernel held during the pass, in the model's words
    /// (`enabled=madvise,16K=never,...`).
    pub settings: String,
    /// Data references replayed.
    pub refs: u64,
    /// Minor faults of the second dry pass (generation only): the baseline.
    pub baseline_faults: u64,
    /// Minor faults of the real pass.
    pub faults: u64,
    /// Kernel counters that changed during the real pass.
    pub counters: BTreeMap<String, i64>,
    /// Seconds the real pass took.
    pub seconds: f64,
}

/// The page-aligned hull `[start, end)` of every data reference of `spec`.
pub fn data_extent(spec: &str) -> Result<(u64, u64)> {
    let mut src = pagelab_workloads::open(spec).with_context(|| format!("workload `{spec}`"))?;
    let (mut lo, mut hi) = (VirtAddr(u64::MAX), VirtAddr(0));
    for_each_data_ref(&mut *src, &mut Vec::new(), |r| {
        lo = lo.min(r.addr);
        hi = hi.max(r.last_byte() + 1);
        Ok(())
    })?;
    if lo >= hi {
        bail!("workload `{spec}` makes no data references");
    }
    let small = PageSize::MIN;
    Ok((lo.align_down(small).0, hi.align_up(small).0))
}

/// Calls `f` for every data reference of `src`, in order, generating them
/// into `buf` a batch at a time (a buffer allocated once, so that passes
/// measured for faults allocate nothing); stops at the first error `f`
/// returns. Returns the references seen.
pub(crate) fn for_each_data_ref(
    src: &mut dyn TraceSource,
    buf: &mut Vec<Event>,
    mut f: impl FnMut(&MemRef) -> Result<()>,
) -> Result<u64> {
    buf.reserve(BATCH);
    let mut n = 0;
    loop {
        buf.clear();
        if !src.fill(buf, BATCH)? {
            return Ok(n);
        }
        for ev in buf.iter() {
            if let Event::Ref(r) = ev {
                if !r.kind.is_instr() {
                    f(r)?;
                    n += 1;
                }
            }
        }
    }
}

/// Performs one reference on real memory: a load, a store, or a
/// read-modify-write instruction (which the CPU reports as a write fault).
///
/// # Safety
/// Every byte of the reference must lie in a mapping this process owns and no
/// Rust object lives in.
#[inline(always)]
unsafe fn touch(r: &MemRef) {
    let first = r.addr.0 as *mut u8;
    let last = r.last_byte().0 as *mut u8;
    for p in [first, last] {
        match r.kind {
            AccessKind::Load | AccessKind::Instr => {
                // SAFETY: `p` is the first or last byte of `r`, which the
                // caller guarantees lies in a mapping this process owns.
                unsafe { std::ptr::read_volatile(p) };
            }
            // SAFETY: as above; no Rust object lives at `p`, so the write
            // aliases nothing.
            AccessKind::Store => unsafe { std::ptr::write_volatile(p, 1) },
            // SAFETY: as above.
            AccessKind::Modify => unsafe { rmw(p) },
        }
        if last == first {
            break;
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn rmw(p: *mut u8) {
    // One instruction that reads and writes memory, as gups's `xor [mem], reg`.
    // SAFETY: the caller guarantees `p` is a writable byte no Rust object
    // lives in; the instruction touches that byte only and no stack.
    unsafe { std::arch::asm!("add byte ptr [{0}], 0", in(reg) p, options(nostack)) };
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
unsafe fn rmw(p: *mut u8) {
    std::ptr::write_volatile(p, std::ptr::read_volatile(p).wrapping_add(0));
}

fn minor_faults() -> u64 {
    pagelab_sys::process::minor_faults(pagelab_sys::process::Who::Process)
}

/// The model's words for the THP settings the kernel holds now.
pub fn current_settings(sysfs: &Sysfs) -> Result<String> {
    let mut out = format!("enabled={}", sysfs.read(&Knob::ThpEnabled)?);
    for size in sysfs.thp_sizes() {
        out.push_str(&format!(
            ",{size}={}",
            sysfs.read(&Knob::SizeEnabled(size))?
        ));
    }
    out.push_str(&format!(
        ",use_zero_page={}",
        sysfs.read(&Knob::UseZeroPage)?
    ));
    Ok(out)
}

/// Maps the extent of `spec` at its own addresses and replays its data references.
pub fn replay(spec: &str, advise: Advise, sysfs: &Sysfs) -> Result<ReplayReport> {
    let (start, end) = data_extent(spec)?;
    let len = end - start;
    use rustix::mm::{MapFlags, ProtFlags};
    // SAFETY: a fresh anonymous mapping at an address nothing else uses
    // (MAP_FIXED_NOREPLACE refuses to replace an existing mapping).
    let mapped = unsafe {
        rustix::mm::mmap_anonymous(
            start as *mut std::ffi::c_void,
            len as usize,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::PRIVATE | MapFlags::FIXED_NOREPLACE,
        )
    };
    let p = match mapped {
        Ok(p) if p as u64 == start => p,
        other => bail!(
            "cannot map {len} bytes at {start:#x}, the workload's own addresses: {} \
             (another mapping of this process is there; try the workload with another `align`)",
            match other {
                Err(e) => std::io::Error::from(e).to_string(),
                Ok(p) => format!("the kernel placed it at {p:p}"),
            }
        ),
    };
    if advise == Advise::Huge {
        // SAFETY: advising our own fresh mapping, which holds no Rust object.
        unsafe { rustix::mm::madvise(p, len as usize, rustix::mm::Advice::LinuxHugepage) }
            .map_err(|e| {
                anyhow::anyhow!("madvise(MADV_HUGEPAGE) failed: {}", std::io::Error::from(e))
            })?;
    }
    let settings = current_settings(sysfs)?;
    let mut buf = Vec::with_capacity(BATCH);
    // Two dry passes generate every reference without touching memory: the
    // first faults in the generator's code and data, the second (counted) is
    // the baseline, the faults any pass takes besides the touches themselves.
    let mut baseline_faults = 0;
    for _ in 0..2 {
        let mut src = pagelab_workloads::open(spec)?;
        let before = minor_faults();
        for_each_data_ref(&mut *src, &mut buf, |r| {
            std::hint::black_box(r);
            Ok(())
        })?;
        baseline_faults = minor_faults() - before;
    }

    let mut src = pagelab_workloads::open(spec)?;
    let counters_before = CounterSnapshot::take(sysfs);
    let t = std::time::Instant::now();
    let before = minor_faults();
    let refs = for_each_data_ref(&mut *src, &mut buf, |r| {
        // SAFETY: every data reference lies in [start, end), mapped above, which
        // holds no Rust object.
        unsafe { touch(r) };
        Ok(())
    })?;
    let faults = minor_faults() - before;
    let seconds = t.elapsed().as_secs_f64();
    let counters = counters_before.delta(&CounterSnapshot::take(sysfs));
    // SAFETY: unmapping the mapping made above; nothing refers to it. A failure would only
    // leave it mapped until this child exits.
    let _ = unsafe { rustix::mm::munmap(p, len as usize) };
    Ok(ReplayReport {
        workload: spec.to_string(),
        start,
        len,
        advised: advise == Advise::Huge,
        settings,
        refs,
        baseline_faults,
        faults,
        counters,
        seconds,
    })
}
