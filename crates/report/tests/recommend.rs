//! The recommendation rule at its thresholds, and on the real gzip trace's counts.

use pagelab_core::{PageSize, SourceInfo};
use pagelab_report::recommend::{self, pick, Point, Rule};
use pagelab_report::{PolicyStats, RunStats, SimResult};

fn points(rows: &[(f64, f64)]) -> Vec<Point> {
    rows.iter()
        .enumerate()
        .map(|(i, &(misses, memory))| Point {
            label: format!("s{i}"),
            misses,
            memory,
        })
        .collect()
}

#[test]
fn a_drop_just_below_significant_does_not_move_the_choice_and_just_above_does() {
    let rule = Rule::default(); // 5% of the baseline's misses
                                // 1000 misses at the baseline; the second size removes 900; the third removes 49 (4.9%)
                                // or 51 (5.1%) more of the baseline's 1000.
    assert_eq!(
        pick(
            &points(&[(1000.0, 100.0), (100.0, 101.0), (51.0, 102.0)]),
            &rule
        ),
        1
    );
    assert_eq!(
        pick(
            &points(&[(1000.0, 100.0), (100.0, 101.0), (49.0, 102.0)]),
            &rule
        ),
        2
    );
    // Exactly 5% counts as significant.
    assert_eq!(
        pick(
            &points(&[(1000.0, 100.0), (100.0, 101.0), (50.0, 102.0)]),
            &rule
        ),
        2
    );
    // The first step itself below the threshold: stay at the baseline.
    assert_eq!(pick(&points(&[(1000.0, 100.0), (951.0, 101.0)]), &rule), 0);
    assert_eq!(pick(&points(&[(1000.0, 100.0), (949.0, 101.0)]), &rule), 1);
}

#[test]
fn memory_just_inside_the_budget_counts_and_just_outside_does_not() {
    let rule = Rule::default(); // +25%
    assert_eq!(pick(&points(&[(1000.0, 1000.0), (10.0, 1250.0)]), &rule), 1);
    assert_eq!(pick(&points(&[(1000.0, 1000.0), (10.0, 1251.0)]), &rule), 0);
    // A size past the budget does not stop an earlier one from being chosen, nor a later
    // one within it from being considered.
    assert_eq!(
        pick(
            &points(&[
                (1000.0, 1000.0),
                (500.0, 1100.0),
                (10.0, 1300.0),
                (480.0, 1200.0)
            ]),
            &rule
        ),
        1
    );
    let tight = Rule {
        max_memory_growth: 0.10,
        ..Rule::default()
    };
    assert_eq!(
        pick(&points(&[(1000.0, 1000.0), (10.0, 1100.0)]), &tight),
        1
    );
    assert_eq!(
        pick(&points(&[(1000.0, 1000.0), (10.0, 1101.0)]), &tight),
        0
    );
}

#[test]
fn a_plateau_then_a_second_significant_fall_moves_past_the_plateau() {
    // Misses fall, stay flat for two sizes, then fall again within the budget: "stop
    // falling significantly" means for every larger size, not only the next one.
    let p = points(&[
        (1000.0, 100.0),
        (600.0, 101.0),
        (600.0, 102.0),
        (100.0, 103.0),
    ]);
    assert_eq!(pick(&p, &Rule::default()), 3);
    // No misses at all: nothing to gain.
    assert_eq!(
        pick(&points(&[(0.0, 100.0), (0.0, 101.0)]), &Rule::default()),
        0
    );
    assert_eq!(pick(&[], &Rule::default()), 0);
}

#[test]
fn percentages_parse_as_people_write_them() {
    assert_eq!(recommend::parse_percent("25%").unwrap(), 0.25);
    assert_eq!(recommend::parse_percent(" 5 ").unwrap(), 0.05);
    assert_eq!(recommend::parse_percent("0.5%").unwrap(), 0.005);
    let e = recommend::parse_percent("lots").unwrap_err();
    assert!(e.contains("`lots`"), "{e}");
    assert!(recommend::parse_percent("-3%").is_err());
}

/// The real trace's expected counts (`tests/data/gzip-9.expected.json`, from the reference model).
fn gzip() -> SimResult {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/data/gzip-9.expected.json"
    ))
    .unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    SimResult {
        source: SourceInfo {
            kind: "lackey".into(),
            name: "gzip".into(),
            ..Default::default()
        },
        runs: serde_json::from_value(v["runs"].clone()).unwrap(),
        ..Default::default()
    }
}

#[test]
fn on_the_real_gzip_trace_8k_is_chosen_and_a_tighter_budget_keeps_4k() {
    // By hand from the JSON: 4K has 81 + 164 = 245 misses in 843,776 bytes; 8K 129 misses in
    // 1,032,192 bytes (+22.3%, inside +25%); 16K needs 1,277,952 (+51%), outside.
    let r = gzip();
    let recs = recommend::study::all(std::slice::from_ref(&r), &Rule::default());
    assert_eq!(recs.len(), 1);
    let rec = &recs[0];
    assert_eq!(rec.choice.as_deref(), Some("8K"));
    assert!(
        rec.sentence.starts_with(
            "gzip: 8K pages: TLB misses \u{2212}47% (245 \u{2192} 129), memory +22% (824K \u{2192} 1008K)"
        ),
        "{}",
        rec.sentence
    );
    // 1G has the fewest misses (3, −98.8%) at 2G of memory: said, and said to be past the budget.
    assert!(
        rec.sentence.contains("1G pages would cut TLB misses \u{2212}99% but cost memory \u{d7}2,545, past the budget"),
        "{}",
        rec.sentence
    );
    // Two sizes: code stays 4K (8K's 55 iTLB misses need +36% code memory); data at 8K
    // (164 → 74 dTLB misses, +18% data memory); 16K data needs +54%.
    assert!(
        rec.sentence
            .contains("two sizes: 4K for code and small data")
            && rec
                .sentence
                .contains("8K for large data (dTLB misses \u{2212}55%, data memory +18%)"),
        "{}",
        rec.sentence
    );
    let tight = Rule {
        max_memory_growth: 0.20,
        ..Rule::default()
    };
    let rec = &recommend::study::all(std::slice::from_ref(&r), &tight)[0];
    assert_eq!(rec.choice.as_deref(), Some("4K"), "{}", rec.sentence);
    assert!(
        rec.sentence.contains("stay with 4K pages (TLB misses 245)"),
        "{}",
        rec.sentence
    );
    // With every byte allowed, misses keep falling significantly up to 1G.
    let loose = Rule {
        max_memory_growth: 10_000.0,
        ..Rule::default()
    };
    let rec = &recommend::study::all(std::slice::from_ref(&r), &loose)[0];
    assert_eq!(rec.choice.as_deref(), Some("2M"), "{}", rec.sentence);
}

fn policy_run(policy: &str, misses: u64, peak: u64) -> RunStats {
    RunStats {
        dtlb_misses: misses,
        mm: Some(PolicyStats {
            policy: policy.into(),
            peak_rss_bytes: peak,
            walk_refs: misses * 4,
            ..Default::default()
        }),
        ..RunStats::new(PageSize::K4)
    }
}

#[test]
fn policies_the_fewest_misses_within_the_budget_and_the_one_past_it_is_named() {
    let r = SimResult {
        source: SourceInfo {
            kind: "workload".into(),
            name: "gups".into(),
            ..Default::default()
        },
        runs: vec![
            policy_run("base:4K", 300_000, 16 << 20),
            policy_run("linux-thp:enabled=always", 9, 22 << 20),
            policy_run("reservation", 20_000, 16 << 20),
            policy_run("base:64K", 229_299, 17 << 20),
        ],
        ..Default::default()
    };
    let rec = &recommend::study::all(std::slice::from_ref(&r), &Rule::default())[0];
    assert_eq!(
        rec.choice.as_deref(),
        Some("reservation"),
        "{}",
        rec.sentence
    );
    assert!(
        rec.sentence
            .contains("TLB misses \u{2212}93% (300,000 \u{2192} 20,000)"),
        "{}",
        rec.sentence
    );
    assert!(
        rec.sentence.contains("linux-thp:enabled=always has fewer misses (9) but needs peak memory +38%, past the budget"),
        "{}",
        rec.sentence
    );
    // With room for 22M of 16M, THP is chosen.
    let loose = Rule {
        max_memory_growth: 0.40,
        ..Rule::default()
    };
    let rec = &recommend::study::all(std::slice::from_ref(&r), &loose)[0];
    assert_eq!(rec.choice.as_deref(), Some("linux-thp:enabled=always"));
    // Two policies within 5% of the baseline's misses of each other: the smaller memory wins.
    let mut close = r.clone();
    close.runs[1] = policy_run("eager", 10_000, 18 << 20);
    let rec = &recommend::study::all(std::slice::from_ref(&close), &Rule::default())[0];
    assert_eq!(
        rec.choice.as_deref(),
        Some("reservation"),
        "{}",
        rec.sentence
    );
}
