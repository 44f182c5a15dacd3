//! The study of a plain Lackey file, read in pieces on several threads with a
//! fresh repeat filter per piece, against the reference model; and the repeat
//! filter where it does the most (references over few pages).

use crate::common;

use common::{all_sizes, flat, real_events, reference, reference_hierarchy};
use pagelab_core::{parse_page_sizes, AccessKind, Event, MemRef, PageSize, SourceInfo, VirtAddr};
use pagelab_engine::{run_study, Study, StudyConfig};
use pagelab_report::RunStats;
use pagelab_trace::{LackeyWriter, PageBatch, Pieces, TraceError, TraceSource};
use proptest::prelude::*;
use std::path::PathBuf;

/// `events` as Lackey text in a fresh file, removed when dropped.
struct LackeyFile(PathBuf);

impl LackeyFile {
    fn new(events: &[Event]) -> LackeyFile {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("pagelab-pieces-{}-{n}.lackey", std::process::id()));
        let mut w = LackeyWriter::new(std::fs::File::create(&path).unwrap());
        for e in events {
            w.write(e).unwrap();
        }
        w.finish().unwrap();
        LackeyFile(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for LackeyFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A source whose pieces are `.1` bytes long.
struct SmallPieces(Box<dyn TraceSource + Send>, usize);

impl TraceSource for SmallPieces {
    fn fill(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, TraceError> {
        self.0.fill(out, max)
    }
    fn info(&self) -> SourceInfo {
        self.0.info()
    }
    fn pieces(&self) -> Option<Pieces> {
        self.0.pieces().map(|p| p.with_piece_size(self.1))
    }
}

/// The study of `file` read in pieces of `piece` bytes.
fn study_in_pieces(
    file: &LackeyFile,
    piece: usize,
    sizes: &[PageSize],
    tlb: &str,
) -> Vec<RunStats> {
    // The events include 70000-byte references (a reference over many pages,
    // just past the default limit): read them as `--max-ref-size 1M` would.
    pagelab_trace::set_max_ref_size(1 << 20);
    let src = pagelab_trace::open(file.path(), None).unwrap();
    assert!(
        src.pieces().is_some(),
        "a plain Lackey file is read in pieces"
    );
    let cfg = StudyConfig {
        page_sizes: sizes.to_vec(),
        tlb: pagelab_tlb::preset(tlb).unwrap(),
    };
    run_study(&mut SmallPieces(src, piece), &cfg, &mut ())
        .unwrap()
        .runs
}

/// References mostly over a handful of pages (the filter drops and defers
/// most of them), often over a few more pages than an L1 holds, now and then
/// far away, some spanning pages.
fn arb_local_event() -> impl Strategy<Value = Event> {
    let kind = prop_oneof![
        3 => Just(AccessKind::Instr),
        2 => Just(AccessKind::Load),
        1 => Just(AccessKind::Store),
        1 => Just(AccessKind::Modify),
    ];
    let addr = prop_oneof![
        12 => (0u64..6).prop_map(|p| (p << 12) | 0xff0),
        6 => 0u64..(8 << 12),
        // Just over the 64 entries of weisberg's L1s: a wrong LRU order shows as misses.
        4 => (0u64..80).prop_map(|p| p << 16 | 0x40),
        1 => 0u64..(1 << 30),
        1 => (1u64 << 40)..((1u64 << 40) + (300 << 12)),
    ];
    let size =
        prop_oneof![8 => 1u32..=16, 1 => Just(0u32), 1 => Just(4096u32), 1 => Just(70000u32)];
    (kind, addr, size).prop_map(|(kind, addr, size)| {
        Event::Ref(MemRef {
            addr: VirtAddr(addr),
            size,
            kind,
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Read in pieces of any size, the study gives the reference model's counts.
    #[test]
    fn pieces_of_any_size_match_reference(
        ev in proptest::collection::vec(arb_local_event(), 0..2500),
        piece in 1usize..3000,
    ) {
        let sizes = all_sizes();
        let file = LackeyFile::new(&ev);
        prop_assume!(!ev.is_empty());
        let got: Vec<_> = study_in_pieces(&file, piece, &sizes, "weisberg").iter().map(flat).collect();
        prop_assert_eq!(got, reference(&ev, &sizes, 64));
    }

    /// The same for every preset (set-associative, L2s, fragmenting arrays).
    #[test]
    fn pieces_match_oracle_hierarchy_for_every_preset(
        ev in proptest::collection::vec(arb_local_event(), 1..1500),
        piece in 1usize..2000,
    ) {
        let sizes = parse_page_sizes("4K,16K,2M,1G").unwrap();
        let file = LackeyFile::new(&ev);
        for name in pagelab_tlb::preset_names() {
            let tlb = pagelab_tlb::preset(name).unwrap();
            let got: Vec<_> = study_in_pieces(&file, piece, &sizes, name).iter().map(flat).collect();
            prop_assert_eq!(got, reference_hierarchy(&ev, &sizes, &tlb), "preset {}", name);
        }
    }

    /// Batches of fresh filters, each flushed, cut anywhere: the reference's counts.
    #[test]
    fn fresh_filters_at_any_cut_match_reference(
        ev in proptest::collection::vec(arb_local_event(), 0..3000),
        cuts in proptest::collection::vec(1usize..400, 1..20),
    ) {
        let sizes = all_sizes();
        let cfg = StudyConfig { page_sizes: sizes.clone(), tlb: pagelab_tlb::preset("weisberg").unwrap() };
        let mut study = Study::new(&cfg).unwrap();
        let mut rest = &ev[..];
        for cut in cuts.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (now, later) = rest.split_at((*cut).min(rest.len()));
            let mut filter = study.page_filter();
            let mut batch = PageBatch::default();
            for e in now {
                filter.event(e, &mut batch);
            }
            filter.flush(&mut batch);
            study.feed_pages(&batch);
            rest = later;
        }
        let got: Vec<_> = study.finish(Default::default()).runs.iter().map(flat).collect();
        prop_assert_eq!(got, reference(&ev, &sizes, 64));
    }
}

#[test]
fn real_trace_in_pieces_matches_the_stored_counts() {
    let events = real_events();
    let file = LackeyFile::new(&events);
    let sizes = all_sizes();
    let want = reference(&events[..300_000], &sizes, 64);
    let prefix = LackeyFile::new(&events[..300_000]);
    for piece in [777, 64 << 10] {
        let got: Vec<_> = study_in_pieces(&prefix, piece, &sizes, "weisberg")
            .iter()
            .map(flat)
            .collect();
        assert_eq!(got, want, "pieces of {piece} bytes");
    }
    // The whole trace, as `pagelab sim` reads it: 2 MiB pieces on every core.
    let stored: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/gzip-9.expected.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let cfg = StudyConfig {
        page_sizes: sizes.clone(),
        tlb: pagelab_tlb::preset("weisberg").unwrap(),
    };
    let mut src = pagelab_trace::open(file.path(), None).unwrap();
    let result = run_study(&mut *src, &cfg, &mut ()).unwrap();
    for (run, want) in result.runs.iter().zip(stored["runs"].as_array().unwrap()) {
        let got = flat(run);
        let field = |k: &str| want[k].as_u64().unwrap();
        assert_eq!(
            got,
            (
                field("itlb_accesses"),
                field("itlb_misses"),
                field("dtlb_accesses"),
                field("dtlb_misses"),
                field("code_footprint_bytes"),
                field("data_footprint_bytes"),
                field("footprint_bytes"),
                field("faults"),
            ),
            "page size {}",
            run.page_size
        );
    }
}

#[test]
fn an_error_in_a_later_piece_names_its_line_in_the_file() {
    let events: Vec<Event> = (0..20_000u64)
        .map(|i| {
            Event::Ref(MemRef {
                addr: VirtAddr(0x40_0000 + i * 40),
                size: 4,
                kind: AccessKind::Instr,
            })
        })
        .collect();
    let file = LackeyFile::new(&events);
    let mut text = std::fs::read_to_string(file.path()).unwrap();
    text.push_str("I  12,3\n L 1q,8\n");
    std::fs::write(file.path(), &text).unwrap();
    let cfg = StudyConfig {
        page_sizes: all_sizes(),
        tlb: pagelab_tlb::preset("weisberg").unwrap(),
    };
    for piece in [100, 5000, 2 << 20] {
        let src = pagelab_trace::open(file.path(), None).unwrap();
        let err = run_study(&mut SmallPieces(src, piece), &cfg, &mut ()).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("line 20002:"), "pieces of {piece}: {msg}");
        assert!(msg.contains("` L 1q,8`"), "{msg}");
    }
}
