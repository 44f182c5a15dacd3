//! Native events through every memory-management policy (`pagelab sim`).
//!
//! Input: bytes that choose the physical memory (small enough that reclaim
//! runs), strictness, copy-on-write mode, and events of every kind near the
//! regions that break models (see `pagelab_fuzz::events`). The events go
//! through the native writer and reader, then through every policy at once.
//! A model error is a fine answer; a panic or a broken invariant is not (the
//! build has debug assertions, so the engine checks every model's invariants
//! at the end of the run).
#![no_main]

use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use pagelab_engine::{run_policies, PolicyConfig};
use pagelab_fuzz::events::event;
use pagelab_mm::fault::CowMode;
use pagelab_mm::phys::PhysConfig;
use pagelab_mm::policy::PolicySpec;
use pagelab_trace::{NativeReader, NativeWriter};

const POLICIES: [&str; 9] = [
    "base:4K",
    "base:64K",
    "eager",
    "explicit",
    "linux-thp",
    "linux-thp:enabled=always,64K=always",
    "relocation",
    "relocation:threshold=50%,scan=64,budget=16",
    "reservation",
];

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(memory_mb) = u.int_in_range(4u64..=64) else {
        return;
    };
    let strict: bool = u.arbitrary().unwrap_or(false);
    let cow = if u.arbitrary().unwrap_or(false) {
        CowMode::Whole
    } else {
        CowMode::Base
    };
    let mut events = Vec::new();
    while events.len() < 400 {
        match event(&mut u) {
            Ok(e) => events.push(e),
            Err(_) => break,
        }
    }
    if std::env::var_os("PAGELAB_FUZZ_DEBUG").is_some() {
        eprintln!("memory {memory_mb}M strict {strict} cow {cow:?}\n{events:#?}");
    }
    let mut w = NativeWriter::new(Vec::new()).unwrap();
    for e in &events {
        w.write(e).unwrap();
    }
    let bytes = w.finish().unwrap();
    let mut src = NativeReader::new(&bytes[..], "fuzz.pgl");
    let cfg = PolicyConfig {
        policies: POLICIES
            .iter()
            .map(|p| p.parse::<PolicySpec>().unwrap())
            .collect(),
        tlb: pagelab_tlb::preset("skylake").unwrap(),
        phys: PhysConfig::new(pagelab_core::Bytes(memory_mb << 20)),
        strict,
        cow,
        file_faults: Default::default(),
        platform: None,
        exit_mappings: false,
    };
    if let Err(e) = run_policies(&mut src, &cfg, &mut ()) {
        let msg = e.to_string();
        assert!(!msg.contains("invariant broken"), "{msg}");
        assert!(!msg.trim().is_empty());
    }
});
