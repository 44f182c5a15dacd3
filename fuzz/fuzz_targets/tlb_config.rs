//! TLB configurations as TOML (`--tlb FILE`).
//!
//! Input: TOML text. Checks: a refusal names the file; an accepted config
//! survives TOML -> config -> TOML -> config; and a small one, built, gives
//! the counters of the reference model (`pagelab_tlb::reference`) when the
//! study steps it over references, at 4K, 64K and 2M pages.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pagelab_core::{AccessKind, Event, MemRef, PageSize, VirtAddr};
use pagelab_engine::{Study, StudyConfig};
use pagelab_tlb::reference::RefHierarchy;
use pagelab_tlb::{Side, TlbConfig};

/// References that never cross a 4K page: an instruction walk and data over a
/// few hundred pages, in an order fixed by `seed`.
fn references(seed: u64) -> Vec<Event> {
    let mut x = seed | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..3000)
        .map(|i| {
            let r = next();
            let (kind, base, pages) = match r % 4 {
                0 => (AccessKind::Instr, 0x40_0000u64, 24),
                1 => (AccessKind::Load, 0x7f00_0000_0000, 600),
                2 => (AccessKind::Store, 0x7f00_0000_0000, 40),
                _ => (AccessKind::Modify, 0x1000_0000, 3000),
            };
            let page = (r >> 8) % pages + if i % 97 == 0 { 1 << 20 } else { 0 };
            Event::Ref(MemRef {
                addr: VirtAddr(base + (page << 12) + (r >> 40) % 4088),
                size: 8,
                kind,
            })
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let cfg = match TlbConfig::from_toml_str(text, "fuzz.toml") {
        Ok(cfg) => cfg,
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("fuzz.toml"), "refusal without the file: {msg}");
            return;
        }
    };
    let _ = cfg.describe();
    let again = toml::to_string(&cfg).expect("a config serialises");
    let back = TlbConfig::from_toml_str(&again, "again.toml")
        .unwrap_or_else(|e| panic!("own output refused: {e}\n{again}"));
    assert_eq!(back, cfg, "TOML round trip");

    let entries: usize = cfg
        .levels()
        .iter()
        .flat_map(|(_, l)| l.arrays.iter())
        .map(|a| a.entries)
        .sum();
    if entries > 1 << 14 {
        return;
    }
    let sizes = [
        PageSize::K4,
        PageSize::from_shift(16).unwrap(),
        PageSize::M2,
    ];
    let study_cfg = StudyConfig {
        page_sizes: sizes.to_vec(),
        tlb: cfg.clone(),
    };
    let mut study = Study::new(&study_cfg).expect("a valid config builds");
    let seed = data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let events = references(seed);
    for chunk in events.chunks(500) {
        study.feed(chunk);
    }
    let result = study.finish(Default::default());
    for (run, &size) in result.runs.iter().zip(&sizes) {
        let mut model = RefHierarchy::new(&cfg);
        for e in &events {
            if let Event::Ref(r) = e {
                model.access_addr(Side::of(r.kind), r.addr, size);
            }
        }
        let s = model.stats();
        assert_eq!(
            (
                run.itlb_accesses,
                run.itlb_misses,
                run.dtlb_accesses,
                run.dtlb_misses
            ),
            (
                s.instr.accesses,
                s.instr.misses,
                s.data.accesses,
                s.data.misses
            ),
            "study against the reference model at {size}"
        );
    }
});
