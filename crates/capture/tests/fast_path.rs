//! The decoder's fast path against its general path: on random streams
//! (valid and damaged) and on the streams of real programs, the two must
//! give the same events and the same error at the same offset. And its
//! filtering parse (`fill_pages`), both ways, against filtering what `fill`
//! gives: the same page words and counts.

mod common;

use common::available;
use pagelab_capture::format::*;
use pagelab_capture::{Backend, PluginReader};
use pagelab_core::Event;
use pagelab_trace::{PageBatch, PageFilter, TraceSource};
use proptest::prelude::*;

/// Every event and the error's text, reading `max` events at a time.
fn decode(bytes: &[u8], max: usize, fast: bool) -> (Vec<Event>, Option<String>) {
    let mut r = PluginReader::new(bytes, "s");
    if !fast {
        r = r.without_fast_path();
    }
    let mut out = Vec::new();
    loop {
        match r.fill(&mut out, max) {
            Ok(true) => {}
            Ok(false) => return (out, None),
            Err(e) => return (out, Some(e.to_string())),
        }
    }
}

/// What the filter made of the stream: words, counts per side and other
/// events, and the error's text. `parse`: through `fill_pages` (with the
/// fast path or not), else `fill` and then the filter.
fn pages(
    bytes: &[u8],
    max: usize,
    parse: Option<bool>,
    filter: &PageFilter,
) -> (Vec<u64>, [u64; 2], u64, Option<String>) {
    let mut r = PluginReader::new(bytes, "s");
    if parse == Some(false) {
        r = r.without_fast_path();
    }
    let mut filter = filter.clone();
    let (mut words, mut refs, mut other) = (Vec::new(), [0; 2], 0);
    let mut batch = PageBatch::default();
    let err = loop {
        batch.clear();
        let res = match parse {
            Some(_) => r.fill_pages(&mut filter, &mut batch, max),
            None => {
                let res = r.fill(&mut batch.events, max);
                filter.take_events(&mut batch);
                res
            }
        };
        assert!(
            batch.events() <= max as u64,
            "a batch holds at most max events"
        );
        words.extend_from_slice(&batch.words);
        refs[0] += batch.refs[0];
        refs[1] += batch.refs[1];
        other += batch.other_events;
        match res {
            Ok(true) => assert!(batch.events() > 0),
            Ok(false) => break None,
            Err(e) => break Some(e.to_string()),
        }
    };
    (words, refs, other, err)
}

fn same_pages_all_ways(bytes: &[u8], max: usize) {
    for filter in [PageFilter::new(4, false), PageFilter::new(8, true)] {
        let want = pages(bytes, max, None, &filter);
        for fast in [true, false] {
            let got = pages(bytes, max, Some(fast), &filter);
            assert_eq!(got.3, want.3, "errors differ (fast path {fast})");
            assert_eq!(
                (got.1, got.2),
                (want.1, want.2),
                "counts differ (fast path {fast})"
            );
            assert!(got.0 == want.0, "page words differ (fast path {fast})");
        }
    }
}

fn same_both_ways(bytes: &[u8], max: usize) {
    let fast = decode(bytes, max, true);
    let general = decode(bytes, max, false);
    assert_eq!(fast.1, general.1, "errors differ");
    assert_eq!(fast.0.len(), general.0.len(), "event counts differ");
    if let Some(i) = (0..fast.0.len()).find(|&i| fast.0[i] != general.0[i]) {
        panic!(
            "event {i} differs: fast {:?}, general {:?}",
            fast.0[i], general.0[i]
        );
    }
}

#[derive(Clone, Debug)]
enum Op {
    Def {
        sizes: Vec<u8>,
        per_insn: bool,
        listed: bool,
    },
    Exec(u8),
    Insn(u8, u16),
    Mem(u16, u64, u8, bool),
    MemX(u16, u64, u8, bool),
    Thread(u8),
    Mmap(u8),
    Fork(u8),
    Child(u8),
    Damage(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (prop::collection::vec(1u8..16, 1..12), prop::bool::weighted(0.2), prop::bool::weighted(0.2))
            .prop_map(|(sizes, per_insn, listed)| Op::Def { sizes, per_insn, listed }),
        10 => any::<u8>().prop_map(Op::Exec),
        3 => (any::<u8>(), 0u16..14).prop_map(|(b, i)| Op::Insn(b, i)),
        12 => (0u16..64, 0u64..1 << 20, 0u8..6, any::<bool>()).prop_map(|(i, a, s, st)| Op::Mem(i, a, s, st)),
        1 => (0u16..14, 1u64..1 << 8, 0u8..6, any::<bool>()).prop_map(|(i, a, s, st)| Op::MemX(i, a << 48, s, st)),
        2 => (0u8..4).prop_map(Op::Thread),
        1 => any::<u8>().prop_map(Op::Mmap),
        1 => (0u8..4).prop_map(Op::Fork),
        1 => (0u8..4).prop_map(Op::Child),
        1 => any::<u8>().prop_map(Op::Damage),
    ]
}

/// The words of `ops`; damage only when `damage` (else the stream is valid
/// but for accesses by instructions past a block's end and undefined blocks).
fn stream(ops: &[Op], damage: bool) -> Vec<u64> {
    let mut w = thread(100, 100).to_vec();
    let mut defined: Vec<(u64, usize)> = Vec::new();
    // The length of the block last run (of any thread): accesses mostly stay within it.
    let mut cur_len = 1;
    let pick = |defined: &[(u64, usize)], b: u8| -> u64 {
        match defined.len() {
            0 => 1,
            n if b == 255 => n as u64 + 1,
            n => defined[b as usize % n].0,
        }
    };
    for op in ops {
        match op {
            Op::Def {
                sizes,
                per_insn,
                listed,
            } => {
                let id = defined.len() as u64 + 1;
                let start = 0x40_0000 + id * 0x7c0;
                if *listed {
                    let n = sizes.len();
                    w.push(ext(X_TBDEF, 2 + n + n.div_ceil(8), id));
                    w.push(start);
                    w.push(n as u64 | (TB_ADDRS | (*per_insn as u64 * TB_PER_INSN)) << 32);
                    w.extend((0..n as u64).map(|i| start + 0x1000 * i));
                    for c in sizes.chunks(8) {
                        let mut b = [0u8; 8];
                        b[..c.len()].copy_from_slice(c);
                        w.push(u64::from_le_bytes(b));
                    }
                } else {
                    w.extend(tb_def(id, start, sizes, *per_insn));
                }
                defined.push((id, sizes.len()));
            }
            Op::Exec(b) => {
                let id = pick(&defined, *b);
                cur_len = defined.iter().find(|d| d.0 == id).map_or(1, |d| d.1);
                w.push(tb_exec(id));
            }
            Op::Insn(b, i) => {
                let id = pick(&defined, *b);
                // Mostly an instruction of the block, sometimes one past its end.
                let len = defined.iter().find(|d| d.0 == id).map_or(1, |d| d.1);
                w.push(insn_exec(id, *i as usize % (len + 1)));
                cur_len = len;
            }
            Op::Mem(i, a, s, st) => {
                // Sometimes past the block's end.
                let index = if *i == 63 {
                    cur_len
                } else {
                    *i as usize % cur_len
                };
                w.push(mem(index, *a, *s, *st));
            }
            Op::MemX(i, a, s, st) => {
                w.push(ext(
                    X_MEMX,
                    1,
                    *i as u64 | (*st as u64) << 10 | (*s as u64) << 11,
                ));
                w.push(*a);
            }
            Op::Thread(t) => w.extend(thread(100 + (*t as u32 % 2), 100 + *t as u32)),
            Op::Mmap(k) => w.extend(syscall(
                9,
                0x7000_0000 + *k as i64 * 0x10000,
                [0, 0x3000, 3, 0x22, u64::MAX, 0],
                None,
            )),
            Op::Fork(c) => w.push(ext(X_FORK, 0, 200 + *c as u64)),
            Op::Child(p) => w.extend([ext(X_CHILD, 1, 0), 100 + *p as u64 % 2]),
            Op::Damage(k) if damage => match k % 3 {
                0 => w.push(1 << 50 | 1),
                1 => w.push(ext(40, 0, 0)),
                _ => w.push(ext(X_TBDEF, 2, 5)),
            },
            Op::Damage(_) => {}
        }
    }
    w
}

/// A random stream as bytes, damaged now and then and cut short now and
/// then, and a batch size.
fn streams() -> impl Strategy<Value = (Vec<u8>, usize)> {
    (
        prop::collection::vec(op(), 0..400),
        prop::bool::weighted(0.3),
        prop::option::weighted(0.2, any::<prop::sample::Index>()),
        prop_oneof![1usize..8, 8usize..4096],
    )
        .prop_map(|(ops, damage, cut, max)| {
            let mut bytes = to_bytes(&stream(&ops, damage));
            if let Some(c) = cut {
                let at = c.index(bytes.len() + 1);
                bytes.truncate(at);
            }
            (bytes, max)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn random_streams_decode_the_same_both_ways((bytes, max) in streams()) {
        same_both_ways(&bytes, max);
    }

    #[test]
    fn random_streams_filter_the_same_all_ways((bytes, max) in streams()) {
        same_pages_all_ways(&bytes, max);
    }
}

/// The raw stream of `program args` under the plugin, written to a file.
fn record(program: &str, args: &[&str]) -> Option<Vec<u8>> {
    if !available(Backend::Qemu) {
        return None;
    }
    let qemu = pagelab_capture::find_qemu().unwrap();
    let api = pagelab_capture::plugin_api_for(pagelab_capture::qemu_version(&qemu).unwrap());
    let plugin = pagelab_capture::plugin_path(api).unwrap();
    let file = std::env::temp_dir().join(format!(
        "pagelab-fast-path-{}-{}.stream",
        std::process::id(),
        args.first().unwrap_or(&"")
    ));
    let status = std::process::Command::new("bash")
        .arg("-c")
        .arg(r#"out="$1"; shift; exec "$@" 250>"$out" >/dev/null"#)
        .arg("bash")
        .arg(&file)
        .arg(&qemu)
        .arg("-plugin")
        .arg(format!("{},fd=250", plugin.display()))
        .arg(program)
        .args(args)
        .status()
        .unwrap();
    assert!(status.success(), "{program} {args:?} under qemu: {status}");
    let bytes = std::fs::read(&file).unwrap();
    std::fs::remove_file(&file).unwrap();
    Some(bytes)
}

/// The stream of `gzip -9` compressing the first `len` bytes of
/// `/usr/bin/env` (from a file named with `tag`), as [`record`] gives it.
fn record_gzip(tag: &str, len: usize) -> Option<Vec<u8>> {
    let input =
        std::env::temp_dir().join(format!("pagelab-fast-path{tag}-{}.in", std::process::id()));
    let mut data = std::fs::read("/usr/bin/env").unwrap_or_default();
    data.truncate(len);
    std::fs::write(&input, &data).unwrap();
    let gzip = pagelab_capture::which("gzip".as_ref()).expect("gzip in PATH");
    let bytes = record(
        gzip.to_str().unwrap(),
        &["-9", "-c", input.to_str().unwrap()],
    );
    std::fs::remove_file(&input).unwrap();
    bytes
}

#[test]
fn real_streams_decode_the_same_both_ways() {
    let prog = common::testprog();
    for args in [&["fork", "sleep", "0.05"][..], &["threads"], &["touch"]] {
        let Some(bytes) = record(&prog, args) else {
            return;
        };
        for max in [65536, 1000, 7] {
            same_both_ways(&bytes, max);
            same_pages_all_ways(&bytes, max);
        }
    }
    let bytes = record_gzip("", 48 << 10);
    if let Some(bytes) = bytes {
        same_both_ways(&bytes, 65536);
        same_pages_all_ways(&bytes, 65536);
        same_pages_all_ways(&bytes, 3000);
    }
}

#[test]
fn an_instruction_decoded_on_the_general_path_moves_the_filters_page() {
    // Block 1 runs on the fast path (page 1), an instruction of block 2
    // (page 5, reported per instruction) on the general one, then block 1
    // again: its page must reach the filter again, which reorders its
    // recent pages (and block 3, on a new page, makes it tell the order).
    let mut w = thread(7, 7).to_vec();
    w.extend(tb_def(1, 0x1000, &[2, 2], false));
    w.extend(tb_def(2, 0x5000, &[3], true));
    w.extend(tb_def(3, 0x9000, &[3], false));
    for _ in 0..3 {
        w.push(tb_exec(1));
        w.push(mem(1, 0x9000, 3, false));
        w.push(insn_exec(2, 0));
    }
    w.push(tb_exec(1));
    w.push(mem(0, 0x9000, 3, true));
    w.push(tb_exec(3));
    same_pages_all_ways(&to_bytes(&w), 65536);
}

/// A source that only has `fill`: the trait's default `fill_pages`.
struct EventsOnly<S>(S);

impl<S: TraceSource> TraceSource for EventsOnly<S> {
    fn fill(
        &mut self,
        out: &mut Vec<Event>,
        max: usize,
    ) -> Result<bool, pagelab_trace::TraceError> {
        self.0.fill(out, max)
    }
    fn info(&self) -> pagelab_core::SourceInfo {
        self.0.info()
    }
}

#[test]
fn a_study_of_the_filtering_parse_equals_one_of_the_events() {
    let bytes = record_gzip("-study", 32 << 10);
    let Some(bytes) = bytes else {
        return;
    };
    let cfg = pagelab_engine::StudyConfig {
        page_sizes: pagelab_core::parse_page_sizes("4K,16K,64K,2M").unwrap(),
        tlb: pagelab_tlb::resolve("weisberg").unwrap(),
    };
    let mut parsed = PluginReader::new(&bytes[..], "s");
    assert!(parsed.parses_to_pages());
    let mut a = pagelab_engine::run_study(&mut parsed, &cfg, &mut ()).unwrap();
    let mut events = EventsOnly(PluginReader::new(&bytes[..], "s"));
    let mut b = pagelab_engine::run_study(&mut events, &cfg, &mut ()).unwrap();
    a.elapsed_seconds = None;
    b.elapsed_seconds = None;
    assert!(a.refs.instr > 100_000, "{:?}", a.refs);
    assert_eq!(format!("{:?}", a.runs), format!("{:?}", b.runs));
    assert_eq!(format!("{:?}", a.refs), format!("{:?}", b.refs));
}

/// A few small random streams (a fixed seed) through the fast decoder's raw
/// writes into the output's spare capacity and the general path: the test CI
/// runs under Miri (`scripts/test.sh`), where it checks those writes for
/// out-of-bounds and uninitialised accesses; natively it is one more sample.
#[test]
fn small_streams_for_miri() {
    let cases = if cfg!(miri) { 6 } else { 64 };
    let mut runner = proptest::test_runner::TestRunner::new_with_rng(
        ProptestConfig::with_cases(cases),
        proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::ChaCha,
        ),
    );
    let small = (prop::collection::vec(op(), 0..40), 1usize..64)
        .prop_map(|(ops, max)| (to_bytes(&stream(&ops, false)), max));
    runner
        .run(&small, |(bytes, max)| {
            same_both_ways(&bytes, max);
            Ok(())
        })
        .unwrap();
}
