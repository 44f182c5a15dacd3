//! Sample results shaped like the paper's: misses fall with page size, memory grows.

#![allow(dead_code)]

use pagelab_core::{PageSize, SourceInfo};
use pagelab_report::{LevelStats, RefCounts, RunStats, SimResult, StudyResult};

/// The paper's page sizes, 4K to 256K.
pub fn sizes() -> Vec<PageSize> {
    (12..=18)
        .map(|s| PageSize::from_shift(s).unwrap())
        .collect()
}

/// One result per row of `(itlb_misses, code_kb, dtlb_misses, data_kb)`, one row per size.
pub fn sim(name: &str, rows: &[(u64, u64, u64, u64)]) -> SimResult {
    let instr = 50_000_000;
    let data = 20_000_000;
    let runs = sizes()
        .into_iter()
        .zip(rows)
        .map(|(size, &(im, ckb, dm, dkb))| RunStats {
            itlb_accesses: instr,
            itlb_misses: im,
            dtlb_accesses: data,
            dtlb_misses: dm,
            code_footprint_bytes: ckb << 10,
            data_footprint_bytes: dkb << 10,
            footprint_bytes: (ckb + dkb) << 10,
            faults: ((ckb + dkb) << 10) / size.bytes(),
            ..RunStats::new(size)
        })
        .collect();
    SimResult {
        source: SourceInfo {
            kind: "workload".into(),
            name: name.into(),
            compression: None,
            params: [("seed".to_string(), "1".to_string())]
                .into_iter()
                .collect(),
        },
        tlb: serde_json::json!({"name": "fa64", "entries": 64, "assoc": "full"}),
        refs: RefCounts { instr, data },
        runs,
        ..Default::default()
    }
}

/// Like crafty: iTLB misses vanish at 16K, dTLB misses only at 256K.
pub fn crafty() -> SimResult {
    sim(
        "crafty",
        &[
            (1_250_000, 180, 3_400_000, 2_100),
            (310_000, 200, 2_900_000, 2_140),
            (2_100, 224, 2_500_000, 2_200),
            (800, 256, 1_800_000, 2_300),
            (512, 320, 900_000, 2_400),
            (400, 384, 210_000, 2_560),
            (380, 512, 3_100, 2_816),
        ],
    )
}

/// Like vpr: data misses drop early; no iTLB misses at all past 64K.
pub fn vpr() -> SimResult {
    sim(
        "vpr",
        &[
            (90_000, 300, 1_500_000, 24_000),
            (60_000, 330, 400_000, 24_100),
            (30_000, 400, 90_000, 24_200),
            (9_000, 448, 1_200, 24_400),
            (0, 512, 900, 24_600),
            (0, 640, 850, 25_000),
            (0, 768, 800, 25_600),
        ],
    )
}

/// A study of both, with per-level counters on the first.
pub fn study() -> StudyResult {
    let mut a = crafty();
    for run in &mut a.runs {
        run.tlb_levels = vec![
            LevelStats {
                level: "l1i".into(),
                accesses: run.itlb_accesses,
                hits: run.itlb_accesses - run.itlb_misses,
                misses: run.itlb_misses,
            },
            LevelStats {
                level: "l1d".into(),
                accesses: run.dtlb_accesses,
                hits: run.dtlb_accesses - run.dtlb_misses,
                misses: run.dtlb_misses,
            },
        ];
    }
    StudyResult::new(vec![a, vpr()])
}
