//! Physical-memory configurations as TOML (`--phys FILE`).
//!
//! Input: TOML text, read as the CLI reads it. Checks: an accepted
//! configuration builds a model (validation and construction agree), which
//! runs references under a base-page and a superpage policy without
//! breaking an invariant; a refused one names the field.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pagelab_core::{AccessKind, Event, MemRef, VirtAddr};
use pagelab_engine::{run_policies, PolicyConfig};
use pagelab_fuzz::VecSource;
use pagelab_mm::fault::CowMode;
use pagelab_mm::phys::PhysConfig;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(phys) = toml::from_str::<PhysConfig>(text) else {
        return;
    };
    if let Err(e) = phys.validate() {
        assert!(!e.field.is_empty() && !e.message.trim().is_empty(), "{e:?}");
        return;
    }
    // The model keeps per-frame state: memories past a few G would only
    // measure the allocator (a bound on the size is the CLI's business).
    if phys.memory.0 > 1 << 30 {
        return;
    }
    let events: Vec<Event> = (0..2000u64)
        .map(|i| {
            Event::Ref(MemRef {
                addr: VirtAddr(0x7f00_0000_0000 + (i * 0x1_1000) % (64 << 20)),
                size: 8,
                kind: if i % 3 == 0 {
                    AccessKind::Load
                } else {
                    AccessKind::Store
                },
            })
        })
        .collect();
    let cfg = PolicyConfig {
        policies: vec![
            "base:4K".parse().unwrap(),
            "eager".parse().unwrap(),
            "linux-thp".parse().unwrap(),
        ],
        tlb: pagelab_tlb::preset("skylake").unwrap(),
        phys,
        strict: false,
        cow: CowMode::Whole,
        file_faults: Default::default(),
        platform: None,
        exit_mappings: false,
    };
    match run_policies(&mut VecSource::new(events), &cfg, &mut ()) {
        Ok(r) => assert_eq!(r.runs.len(), 3),
        Err(e) => {
            let msg = e.to_string();
            assert!(!msg.contains("invariant broken"), "{msg}");
        }
    }
});
