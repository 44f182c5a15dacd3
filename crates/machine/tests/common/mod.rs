//! Runs of the model on a machine, fed a list of events.

#![allow(dead_code)]

use pagelab_core::{AccessKind, Event, MemRef, ThreadId, VirtAddr};
use pagelab_engine::{run_policies, PolicyConfig};
use pagelab_machine::Machine;
use pagelab_trace::Events;

/// A machine file of `tests/data`.
pub fn machine(file: &str) -> Machine {
    let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    pagelab_machine::resolve(&path).unwrap()
}

/// Process `pid` runs from here on.
pub fn switch(pid: u32) -> Event {
    Event::Switch(ThreadId { pid, tid: pid })
}

/// A 4-byte store at `addr`.
pub fn store(addr: u64) -> Event {
    Event::Ref(MemRef {
        addr: VirtAddr(addr),
        size: 4,
        kind: AccessKind::Store,
    })
}

/// A 4-byte load at `addr`.
pub fn load(addr: u64) -> Event {
    Event::Ref(MemRef {
        addr: VirtAddr(addr),
        size: 4,
        kind: AccessKind::Load,
    })
}

/// The `mm` part of the result of a `base:4K` run of `events` on `m` (its
/// platform as `m.platform()` gives it, then `edit` applied), or the error.
pub fn run_with(
    m: &Machine,
    edit: impl FnOnce(&mut pagelab_mm::platform::Platform),
    events: Vec<Event>,
) -> Result<serde_json::Value, String> {
    let mut platform = m.platform();
    edit(&mut platform);
    let cfg = PolicyConfig {
        policies: vec!["base:4K".parse().unwrap()],
        tlb: m
            .tlb
            .clone()
            .unwrap_or_else(|| pagelab_tlb::preset(pagelab_tlb::DEFAULT_PRESET).unwrap()),
        phys: m.phys.clone(),
        strict: false,
        cow: Default::default(),
        file_faults: Default::default(),
        platform: Some(platform),
        exit_mappings: false,
    };
    let r =
        run_policies(&mut Events(events.into_iter()), &cfg, &mut ()).map_err(|e| e.to_string())?;
    Ok(serde_json::to_value(r.runs[0].mm.as_ref().unwrap()).unwrap())
}

/// As [`run_with`], on the machine's own platform.
pub fn run(m: &Machine, events: Vec<Event>) -> Result<serde_json::Value, String> {
    run_with(m, |_| {}, events)
}
