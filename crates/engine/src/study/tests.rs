//! Tests of `study` (a file of their own, to keep `study.rs` short).

use super::*;
use pagelab_core::{AccessKind, MemRef};
use pagelab_tlb::AVX512_RANKS;
use proptest::prelude::*;

fn arb_event() -> impl Strategy<Value = Event> {
    let kind = prop_oneof![Just(AccessKind::Instr), Just(AccessKind::Load)];
    let addr = prop_oneof![
        0u64..(300 << 12),
        (1u64 << 40)..((1u64 << 40) + (300 << 12))
    ];
    let size = prop_oneof![1u32..=16, Just(8192u32)];
    (kind, addr, size).prop_map(|(kind, addr, size)| {
        Event::Ref(MemRef {
            addr: VirtAddr(addr),
            size,
            kind,
        })
    })
}

/// The result of a study over `events`, its words stepped as `step` does.
fn run(events: &[Event], preset: &str, step: impl Fn(&mut Study, &[u64])) -> SimResult {
    let cfg = StudyConfig {
        page_sizes: pagelab_core::parse_page_sizes("4K,8K,16K,64K,256K,2M,1G").unwrap(),
        tlb: pagelab_tlb::preset(preset).unwrap(),
    };
    let mut study = Study::new(&cfg).unwrap();
    let mut filter = study.page_filter();
    let mut batch = PageBatch::default();
    for chunk in events.chunks(700) {
        batch.clear();
        for e in chunk {
            filter.event(e, &mut batch);
        }
        study.refs[0] += batch.refs[0];
        study.refs[1] += batch.refs[1];
        step(&mut study, &batch.words);
    }
    study.finish(SourceInfo::default())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// The portable fronts, the AVX2 ones (what a CPU without AVX-512 runs), the
    /// AVX-512 ones, each with either number of ranks, the whole L1 arrays
    /// in tiers (AVX2 and AVX-512), and the runs' own lookups give the same result.
    #[test]
    fn every_way_of_stepping_agrees(events in proptest::collection::vec(arb_event(), 0..4000)) {
        for preset in ["weisberg", "zen4"] {
            let own = run(&events, preset, |s, w| s.feed_each(w));
            let portable = run(&events, preset, |s, w| {
                let fronts = s.take_fronts().unwrap();
                s.feed_fronts::<PORTABLE, PORTABLE_RANKS>(w, fronts)
            });
            prop_assert_eq!(&portable.runs, &own.runs, "preset {}", preset);
            let portable8 = run(&events, preset, |s, w| {
                let fronts = s.take_fronts().unwrap();
                s.feed_fronts::<PORTABLE, AVX512_RANKS>(w, fronts)
            });
            prop_assert_eq!(&portable8.runs, &own.runs, "preset {}", preset);
            #[cfg(target_arch = "x86_64")]
            if pagelab_core::isa::Isa::Avx2.supported() {
                let avx2 = run(&events, preset, |s, w| {
                    let fronts = s.take_fronts().unwrap();
                    // SAFETY: the CPU has the features (checked).
                    unsafe { s.feed_fronts_avx2::<PORTABLE_RANKS>(w, fronts) }
                });
                prop_assert_eq!(&avx2.runs, &own.runs, "preset {}, AVX2", preset);
                let avx2_8 = run(&events, preset, |s, w| {
                    let fronts = s.take_fronts().unwrap();
                    // SAFETY: the CPU has the features (checked).
                    unsafe { s.feed_fronts_avx2::<AVX512_RANKS>(w, fronts) }
                });
                prop_assert_eq!(&avx2_8.runs, &own.runs, "preset {}, AVX2, 8 ranks", preset);
                let whole2 = run(&events, preset, |s, w| {
                    let whole = s.take_whole().unwrap();
                    // SAFETY: the CPU has the features (checked).
                    unsafe { s.feed_whole_avx2(w, whole) }
                });
                prop_assert_eq!(&whole2.runs, &own.runs, "preset {}, AVX2, whole L1", preset);
            } else {
                eprintln!("every_way_of_stepping_agrees: AVX2 fronts skipped: the CPU lacks AVX2");
            }
            #[cfg(target_arch = "x86_64")]
            if pagelab_core::isa::Isa::Avx512.supported() {
                let wide = run(&events, preset, |s, w| {
                    let fronts = s.take_fronts().unwrap();
                    // SAFETY: the CPU has the features (checked).
                    unsafe { s.feed_fronts_avx512::<AVX512_RANKS>(w, fronts) }
                });
                prop_assert_eq!(&wide.runs, &own.runs, "preset {}", preset);
                let wide4 = run(&events, preset, |s, w| {
                    let fronts = s.take_fronts().unwrap();
                    // SAFETY: the CPU has the features (checked).
                    unsafe { s.feed_fronts_avx512::<PORTABLE_RANKS>(w, fronts) }
                });
                prop_assert_eq!(&wide4.runs, &own.runs, "preset {}", preset);
                let whole = run(&events, preset, |s, w| {
                    let whole = s.take_whole().unwrap();
                    // SAFETY: the CPU has the features (checked).
                    unsafe { s.feed_whole_avx512(w, whole) }
                });
                prop_assert_eq!(&whole.runs, &own.runs, "preset {}", preset);
            } else {
                eprintln!("every_way_of_stepping_agrees: AVX-512 fronts skipped: the CPU lacks AVX-512");
            }
        }
    }
}
