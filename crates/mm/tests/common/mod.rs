//! Helpers shared by the `pagelab-mm` integration tests (one copy of what the
//! policy, reclaim and fault-path tests each wrote for themselves): building an
//! `Mm`, mapping, advising, touching, and reading the policy's counters. Every
//! helper that changes the `Mm` runs `check()` after the step.

// Each test file is its own crate and uses only some of these helpers.
#![allow(dead_code)]

use pagelab_core::{Advice, Backing, Bytes, Event, MapEvent, Prot, Sharing, VirtAddr};
use pagelab_mm::pagetable::Translation;
use pagelab_mm::phys::{FrameAllocator, PhysConfig};
use pagelab_mm::policy::PolicySpec;
use pagelab_mm::system::Mm;

pub const K: u64 = 1 << 10;
pub const M: u64 = 1 << 20;
pub const RW: Prot = Prot(Prot::READ | Prot::WRITE);

/// An `Mm` under the policy `spec` with the physical configuration `phys`.
pub fn mm_with(spec: &str, phys: &PhysConfig) -> Mm {
    let spec: PolicySpec = spec.parse().unwrap();
    Mm::new(&spec, phys).unwrap()
}

/// An `Mm` under the policy `spec` with `memory` bytes, reclaim on (the default).
pub fn mm(spec: &str, memory: u64) -> Mm {
    mm_with(spec, &PhysConfig::new(Bytes(memory)))
}

/// An `Mm` under the policy `spec` with `memory` bytes and reclaim off, for
/// tests that fill memory on purpose to reach the fallbacks.
pub fn mm_no_reclaim(spec: &str, memory: u64) -> Mm {
    let mut phys = PhysConfig::new(Bytes(memory));
    phys.reclaim = false;
    mm_with(spec, &phys)
}

/// Applies `e`, then checks.
pub fn ev(m: &mut Mm, e: Event) {
    m.event(&e).unwrap();
    m.check().unwrap();
}

/// The event that maps `[start, start + len)` read-write.
pub fn map_event(start: u64, len: u64, backing: Backing, sharing: Sharing) -> Event {
    Event::Map(Box::new(MapEvent {
        start: VirtAddr(start),
        len,
        prot: RW,
        backing,
        sharing,
    }))
}

/// Maps `[start, start + len)` read-write, then checks.
pub fn map_as(m: &mut Mm, start: u64, len: u64, backing: Backing, sharing: Sharing) {
    ev(m, map_event(start, len, backing, sharing));
}

/// Maps `[start, start + len)` read-write, private and anonymous, then checks.
pub fn map(m: &mut Mm, start: u64, len: u64) {
    map_as(m, start, len, Backing::Anon, Sharing::Private);
}

/// Gives `advice` for `[start, start + len)`, then checks.
pub fn advise(m: &mut Mm, start: u64, len: u64, advice: Advice) {
    ev(
        m,
        Event::Advise {
            start: VirtAddr(start),
            len,
            advice,
        },
    );
}

/// Accesses `addr` (a write if `write`), checks, and returns the translation.
pub fn translate(m: &mut Mm, addr: u64, write: bool) -> Translation {
    let t = m
        .translate(pagelab_core::VirtAddr(addr), false, write)
        .unwrap();
    m.check().unwrap();
    t
}

/// Accesses `addr` (a write if `write`) and returns the size of the page that maps it.
pub fn access(m: &mut Mm, addr: u64, write: bool) -> u64 {
    translate(m, addr, write).size.bytes()
}

/// Accesses `addr` (a write if `write`) and returns the page that maps it:
/// (size, first 4K frame).
pub fn access_page(m: &mut Mm, addr: u64, write: bool) -> (u64, u64) {
    let t = translate(m, addr, write);
    (t.size.bytes(), t.pfn.0)
}

/// Touches `addr` (a write) and returns the size of the page that maps it.
pub fn touch(m: &mut Mm, addr: u64) -> u64 {
    access(m, addr, true)
}

/// Touches `addr` (a write) and returns the page that maps it: (size, first 4K frame).
pub fn touch_page(m: &mut Mm, addr: u64) -> (u64, u64) {
    access_page(m, addr, true)
}

/// The policy's counter `name` (which must exist).
pub fn counter(m: &Mm, name: &str) -> u64 {
    m.policy_counters()[name].as_u64().unwrap()
}

/// The policy's counter `name` for the page size `size` (0 if absent).
pub fn per_size(m: &Mm, name: &str, size: &str) -> u64 {
    m.policy_counters()[name][size].as_u64().unwrap_or(0)
}

/// Free 4K frames.
pub fn free_frames(m: &Mm) -> u64 {
    m.machine().phys.free_frames()
}
