//! Helpers shared by the integration tests.
#![allow(dead_code)]

use pagelab_core::{AccessKind, Event, MemRef, VirtAddr};
use pagelab_trace::TraceSource;

/// The mmap chunk where `stride`, `gups` and `chase` put their data.
pub const MMAP_BASE: u64 = 0x7f3a_1c5e_3010;
/// The .bss where `stream` puts its arrays.
pub const BSS_BASE: u64 = 0x40_5060;

/// Every reference of `spec`, read in batches of `batch`.
pub fn refs_batched(spec: &str, batch: usize) -> Vec<MemRef> {
    let mut src = pagelab_workloads::open(spec).unwrap();
    let mut events = Vec::new();
    while src.fill(&mut events, batch).unwrap() {}
    events
        .into_iter()
        .map(|e| match e {
            Event::Ref(r) => r,
            other => panic!("workloads emit only references, got {other:?}"),
        })
        .collect()
}

/// Every reference of `spec`.
pub fn refs(spec: &str) -> Vec<MemRef> {
    refs_batched(spec, 10_000)
}

/// The data (non-instruction) references, as (address, size, kind).
pub fn data(refs: &[MemRef]) -> Vec<(u64, u32, AccessKind)> {
    refs.iter()
        .filter(|r| r.kind != AccessKind::Instr)
        .map(|r| (r.addr.0, r.size, r.kind))
        .collect()
}

/// The addresses of the references of one kind.
pub fn addrs(refs: &[MemRef], kind: AccessKind) -> Vec<u64> {
    refs.iter()
        .filter(|r| r.kind == kind)
        .map(|r| r.addr.0)
        .collect()
}

/// An instruction fetch.
pub fn i(addr: u64, size: u32) -> MemRef {
    MemRef {
        addr: VirtAddr(addr),
        size,
        kind: AccessKind::Instr,
    }
}

/// A data reference.
pub fn d(addr: u64, size: u32, kind: AccessKind) -> MemRef {
    MemRef {
        addr: VirtAddr(addr),
        size,
        kind,
    }
}
