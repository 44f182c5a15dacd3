//! The study on a real program's trace (`tests/data/gzip-9.lackey.zst`, gzip -9
//! compressing 20 KB, captured with Valgrind Lackey) against counts that the
//! reference model computed, stored in `tests/data/gzip-9.expected.json`.
//! `PAGELAB_BLESS=1` rewrites that file from the reference model (never from the fast one).

use crate::common;

use common::{flat, real_events, reference, reference_hierarchy_levels, Figures};
use pagelab_core::{parse_page_sizes, Event, PageSize};
use pagelab_engine::{run_study, StudyConfig};
use std::path::PathBuf;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data")
        .join(name)
}

fn sizes() -> Vec<PageSize> {
    parse_page_sizes("4K,8K,16K,32K,64K,128K,256K,2M,1G").unwrap()
}

fn figures_json(f: &[Figures], sizes: &[PageSize]) -> serde_json::Value {
    let runs: Vec<serde_json::Value> = f
        .iter()
        .zip(sizes)
        .map(|(f, s)| {
            serde_json::json!({"page_size": s.bytes(), "itlb_accesses": f.0, "itlb_misses": f.1,
                "dtlb_accesses": f.2, "dtlb_misses": f.3, "code_footprint_bytes": f.4,
                "data_footprint_bytes": f.5, "footprint_bytes": f.6, "faults": f.7})
        })
        .collect();
    serde_json::json!({"trace": "gzip-9.lackey.zst", "tlb": "weisberg", "runs": runs})
}

fn fast_figures(path: &str, sizes: &[PageSize], tlb: &str) -> Vec<Figures> {
    fast_result(path, sizes, tlb)
        .runs
        .iter()
        .map(flat)
        .collect()
}

fn fast_result(path: &str, sizes: &[PageSize], tlb: &str) -> pagelab_report::SimResult {
    let cfg = StudyConfig {
        page_sizes: sizes.to_vec(),
        tlb: pagelab_tlb::preset(tlb).unwrap(),
    };
    let mut src = pagelab_trace::open(path, None).unwrap();
    run_study(&mut *src, &cfg, &mut ()).unwrap()
}

#[test]
fn weisberg_study_of_real_gzip_trace_matches_reference_counts() {
    let sizes = sizes();
    let events = real_events();
    assert_eq!(
        events.len(),
        4_518_898,
        "the stored trace has 4,518,898 references"
    );
    let expected_path = data("gzip-9.expected.json");
    let reference_json = figures_json(&reference(&events, &sizes, 64), &sizes);
    if std::env::var_os("PAGELAB_BLESS").is_some() {
        std::fs::write(
            &expected_path,
            serde_json::to_string_pretty(&reference_json).unwrap() + "\n",
        )
        .unwrap();
    }
    let stored: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&expected_path).unwrap()).unwrap();
    assert_eq!(
        reference_json, stored,
        "the reference model no longer gives the stored counts"
    );
    let fast = fast_figures(
        data("gzip-9.lackey.zst").to_str().unwrap(),
        &sizes,
        "weisberg",
    );
    assert_eq!(figures_json(&fast, &sizes), stored);
}

#[test]
fn every_preset_on_a_real_prefix_matches_the_oracle_hierarchy() {
    // The first 400,000 references: the dynamic loader and gzip's start, enough
    // to fill and thrash every preset's arrays.
    let events: Vec<Event> = real_events().into_iter().take(400_000).collect();
    let dir = std::env::temp_dir().join(format!("pagelab-real-prefix-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // One file without a page index, and one with the index each preset's study reads.
    let write = |name: &str, index: Option<(usize, bool)>| {
        let path = dir.join(name);
        let w = pagelab_trace::NativeWriter::new(std::fs::File::create(&path).unwrap()).unwrap();
        let mut w = match index {
            Some((depth, fragments)) => w.with_page_index(depth, fragments),
            None => w.without_page_index(),
        };
        for e in &events {
            w.write(e).unwrap();
        }
        w.finish().unwrap();
        path.to_str().unwrap().to_string()
    };
    let plain = write("plain.trace", None);
    let sizes = parse_page_sizes("4K,16K,64K,2M,1G").unwrap();
    for name in pagelab_tlb::preset_names() {
        let tlb = pagelab_tlb::preset(name).unwrap();
        let want = reference_hierarchy_levels(&events, &sizes, &tlb);
        let params = pagelab_engine::page_filter_params(&tlb);
        let indexed = write(&format!("{name}.trace"), Some(params));
        let from_records = fast_result(&plain, &sizes, name);
        let result = fast_result(&indexed, &sizes, name);
        assert_eq!(
            result.runs, from_records.runs,
            "preset {name}: the page index ({params:?}) and the records"
        );
        for (run, (figures, levels)) in result.runs.iter().zip(&want) {
            assert_eq!(
                &flat(run),
                figures,
                "preset {name}, page size {}",
                run.page_size
            );
            let got_levels: Vec<_> = run
                .tlb_levels
                .iter()
                .map(|l| (l.level.clone(), l.accesses, l.hits, l.misses))
                .collect();
            assert_eq!(
                &got_levels, levels,
                "preset {name}, page size {}: per-level counters",
                run.page_size
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
