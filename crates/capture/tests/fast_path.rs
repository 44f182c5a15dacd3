//! The decoder's fast path against its general path: on random streams
//! (valid and damaged) and on the streams of real programs, the two must
//! give the same events and the same error at the same offset.

mod common;

use common::available;
use pagelab_capture::format::*;
use pagelab_capture::{Backend, PluginReader};
use pagelab_core::Event;
use pagelab_trace::TraceSource;
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
        1 => (any::<u8>(), 0u16..14).prop_map(|(b, i)| Op::Insn(b, i)),
        12 => (0u16..14, 0u64..1 << 20, 0u8..6, any::<bool>()).prop_map(|(i, a, s, st)| Op::Mem(i, a, s, st)),
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
                let start = 0x40_0000 + id * 0x100;
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
            Op::Exec(b) => w.push(tb_exec(pick(&defined, *b))),
            Op::Insn(b, i) => w.push(insn_exec(pick(&defined, *b), *i as usize)),
            Op::Mem(i, a, s, st) => w.push(mem(*i as usize, *a, *s, *st)),
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn random_streams_decode_the_same_both_ways(
        ops in prop::collection::vec(op(), 0..400),
        damage in prop::bool::weighted(0.3),
        cut in prop::option::weighted(0.2, any::<prop::sample::Index>()),
        max in prop_oneof![1usize..8, 8usize..4096],
    ) {
        let mut bytes = to_bytes(&stream(&ops, damage));
        if let Some(c) = cut {
            let at = c.index(bytes.len() + 1);
            bytes.truncate(at);
        }
        same_both_ways(&bytes, max);
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

#[test]
fn real_streams_decode_the_same_both_ways() {
    let prog = common::testprog();
    for args in [&["fork", "sleep", "0.05"][..], &["threads"], &["touch"]] {
        let Some(bytes) = record(&prog, args) else {
            return;
        };
        for max in [65536, 1000, 7] {
            same_both_ways(&bytes, max);
        }
    }
    let input = std::env::temp_dir().join(format!("pagelab-fast-path-{}.in", std::process::id()));
    let mut data = std::fs::read("/usr/bin/env").unwrap_or_default();
    data.truncate(48 << 10);
    std::fs::write(&input, &data).unwrap();
    let gzip = pagelab_capture::which("gzip".as_ref()).expect("gzip in PATH");
    let bytes = record(
        gzip.to_str().unwrap(),
        &["-9", "-c", input.to_str().unwrap()],
    );
    std::fs::remove_file(&input).unwrap();
    if let Some(bytes) = bytes {
        same_both_ways(&bytes, 65536);
    }
}
