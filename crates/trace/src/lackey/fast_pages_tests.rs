//! Tests of the windows, `fast_pages` and `fast_events` (a file of their own, to keep
//! `fast_pages.rs` short).

use super::super::fast::{parse_blocks, EventSink, PageSink, READ_AHEAD};
use super::super::fast_events::parse_events;
use super::*;
use crate::consumer::{of_words, Lru};
use crate::{PageBatch, PageFilter};
use pagelab_core::Event;
use proptest::prelude::*;

/// What a parse of `text` into a fresh filter leaves: the consumer of its words (the
/// windows keep the repeats of other recent pages that the block loop's filter drops,
/// so their words differ, but not what a consumer makes of them), the references per
/// side, lines, error and stop.
type Outcome = (Lru, [u64; 2], u64, Result<(), &'static str>, usize);

/// Parses `text` in calls that each may take `step` more references, as the reader calls.
fn run(text: &[u8], fused: bool, step: u64) -> Outcome {
    let mut buf = text.to_vec();
    if !buf.ends_with(b"\n") {
        buf.push(b'\n');
    }
    let complete = buf.len();
    buf.resize(complete + READ_AHEAD, b'7');
    let mut filter = PageFilter::new(4, false);
    let mut batch = PageBatch::default();
    let (mut s, mut line, mut result) = (0, 0, Ok(()));
    while s < complete && result.is_ok() {
        let mut sink = PageSink {
            filter: &mut filter,
            out: &mut batch,
            goal: 0,
        };
        sink.goal = sink.out.events().saturating_add(step);
        (s, line, result) = if fused {
            parse_pages(&buf, complete, s, line, &mut sink)
        } else {
            parse_blocks(&buf, complete, s, line, &mut sink)
        };
        if step < 64 {
            // Below a block's worth the block loop takes nothing.
            break;
        }
    }
    filter.flush(&mut batch);
    (of_words(&batch.words), batch.refs, line, result, s)
}

/// What a parse of `text` into events leaves: the events, lines, error and stop.
type Events = (Vec<Event>, u64, Result<(), &'static str>, usize);

/// Parses `text` into events in calls that each may take `step` more, as the reader calls.
fn run_events(text: &[u8], windows: bool, step: usize) -> Events {
    let mut buf = text.to_vec();
    if !buf.ends_with(b"\n") {
        buf.push(b'\n');
    }
    let complete = buf.len();
    buf.resize(complete + READ_AHEAD, b'7');
    let mut events = Vec::new();
    let (mut s, mut line, mut result) = (0, 0, Ok(()));
    while s < complete && result.is_ok() {
        let goal = events.len().saturating_add(step);
        let mut sink = EventSink::new(&mut events, goal);
        (s, line, result) = if windows {
            parse_events(&buf, complete, s, line, &mut sink)
        } else {
            parse_blocks(&buf, complete, s, line, &mut sink)
        };
    }
    (events, line, result, s)
}

/// Lines of every kind, mostly well formed, often long runs of them.
fn long_text() -> impl Strategy<Value = Vec<u8>> {
    let line = prop_oneof![
        8 => (0u64..0x40, 0u64..0x1000, 0u32..=16).prop_map(|(p, o, n)| format!("I  {:08x},{n}", p << 12 | o)),
        8 => (0u64..0x40, 0u64..0x1000, 1u32..=99, 0..3usize).prop_map(|(p, o, n, k)| {
            format!(" {} {:010x},{n}", ["L", "S", "M"][k], 0x1f_f000_0000 | p << 12 | o)
        }),
        2 => (any::<u64>(), 1u32..=99, 1..=16usize).prop_map(|(a, n, d)| {
            format!(" L {:x},{n}", a >> (64 - 4 * d))
        }),
        1 => Just("==12== a line of Valgrind's own".to_string()),
        1 => Just(String::new()),
        1 => Just(format!("=={}", "x".repeat(100))),
        1 => Just("I  0400abcd,100".to_string()),
        1 => Just("I  04000ABC,4".to_string()),
        1 => Just("I  ,4".to_string()),
        1 => Just(" L 04000000,".to_string()),
        1 => Just(" L 04000000,4,5".to_string()),
        1 => Just(" X 04000000,4".to_string()),
        1 => Just("I 14000000,4".to_string()),
        1 => Just("QL 04000000,4".to_string()),
        1 => Just(" L  1ffefff000,8".to_string()),
        1 => Just("  S 1ffefff000,8".to_string()),
        1 => Just(" L ffffffffffffffff,8".to_string()),
        1 => Just(" L 1ffffffffffffffff,8".to_string()),
        // A byte from 0x80 on, which the windows' lookup of seven bits
        // must not take for the character it aliases (`~` marks it).
        2 => (0u64..0x40, 0usize..13, 0..2usize).prop_map(|(p, k, d)| {
            let l = if d == 0 {
                format!("I  {:08x},4", 0x0400_0000 | p << 12)
            } else {
                format!(" S {:08x},16", 0x0400_0000 | p << 12)
            };
            format!("{}~{}", &l[..k], &l[k..])
        }),
    ];
    (proptest::collection::vec(line, 0..600), any::<bool>()).prop_map(|(lines, last_nl)| {
        let mut text = lines.join("\n");
        if last_nl && !lines.is_empty() {
            text.push('\n');
        }
        // Each `~` gone, the byte after it with its top bit set.
        let mut bytes = Vec::with_capacity(text.len());
        let mut high = false;
        for b in text.into_bytes() {
            if b == b'~' {
                high = true;
            } else {
                bytes.push(if high { b | 0x80 } else { b });
                high = false;
            }
        }
        bytes
    })
}

/// Lines with the locality of a real trace: each side keeps to a few
/// pages, one of them shared (so many lines repeat the page of their
/// side's line before, or of the other side's), some
/// references cross into the next page, and now and then a line that the
/// windows leave to the careful parser.
fn local_text() -> impl Strategy<Value = Vec<u8>> {
    let size = prop_oneof![Just(4u32), Just(8), 1u32..=99];
    let step = (0u8..8, 0u64..4, 0u64..0x1000, any::<bool>(), size, 0u8..60);
    proptest::collection::vec(step, 0..1500).prop_map(|steps| {
        let mut text = String::new();
        for (side, page, off, near_end, size, odd) in steps {
            match odd {
                0 => text.push_str("==1== x\n"),
                1 => text.push_str(" L 04000ABC,4\n"),
                2 => text.push_str(&format!("I  {:08X},2\n", 0x0400_0000 + (page << 12))),
                _ => {}
            }
            let off = if near_end { 0xfff - off % 100 } else { off };
            let line = match side {
                0..=4 => format!("I  {:08x},{size}\n", 0x0400_0000 + (page << 12) + off),
                k => format!(
                    " {} {:010x},{size}\n",
                    ["L", "S", "M"][k as usize - 5],
                    // Page 3 of the data is the code's page 3.
                    if page == 3 {
                        0x0400_0000
                    } else {
                        0x1f_fefe_0000
                    } + (page << 12)
                        + off
                ),
            };
            text.push_str(&line);
        }
        text.into_bytes()
    })
}

/// Whether the window loop's tests cannot run here, saying so if not.
fn skipped(test: &str) -> bool {
    if available() {
        return false;
    }
    eprintln!("{test}: skipped: this CPU has no AVX-512 VBMI2, so the window loop never runs");
    true
}

/// The window loop gives the words, counts, lines, error and stop of the block loop.
#[test]
fn windows_agree_with_blocks() {
    if skipped("windows_agree_with_blocks") {
        return;
    }
    proptest!(ProptestConfig::with_cases(300), |(text in long_text(), step in prop_oneof![Just(u64::MAX), 64u64..3000])| {
        prop_assert_eq!(run(&text, true, step), run(&text, false, step));
    });
}

/// And on text with a real trace's repeats, which the windows drop before the filter.
#[test]
fn windows_agree_on_local_text() {
    if skipped("windows_agree_on_local_text") {
        return;
    }
    proptest!(ProptestConfig::with_cases(300), |(text in local_text(), step in prop_oneof![Just(u64::MAX), 64u64..3000])| {
        prop_assert_eq!(run(&text, true, step), run(&text, false, step));
    });
}

/// Also on the shorter, wilder texts of the parser's own tests (bad lines included).
#[test]
fn windows_agree_on_odd_text() {
    if skipped("windows_agree_on_odd_text") {
        return;
    }
    proptest!(ProptestConfig::with_cases(300), |(text in super::super::tests::arb_text())| {
        prop_assert_eq!(run(&text, true, u64::MAX), run(&text, false, u64::MAX));
    });
}

#[test]
fn an_error_is_at_its_line() {
    if skipped("an_error_is_at_its_line") {
        return;
    }
    let mut text = b"I  04000000,4\n".repeat(500);
    text.extend_from_slice(b" L 1234,x\n");
    text.extend_from_slice(&b" S 1ffefff000,8\n".repeat(500));
    let windows = run(&text, true, u64::MAX);
    assert_eq!(windows, run(&text, false, u64::MAX));
    assert_eq!(windows.1, [500, 0]);
    assert_eq!(windows.2, 500);
    assert!(windows.3.is_err());
    assert_eq!(windows.4, 500 * 14);
}

/// The windows into events give the events, lines, error and stop of the block loop.
#[test]
fn event_windows_agree_with_blocks() {
    if skipped("event_windows_agree_with_blocks") {
        return;
    }
    proptest!(ProptestConfig::with_cases(300), |(text in long_text(), step in prop_oneof![Just(usize::MAX), 64usize..3000])| {
        prop_assert_eq!(run_events(&text, true, step), run_events(&text, false, step));
    });
}

/// Also on the parser's own wilder texts, and where a call's room is a few windows' worth.
#[test]
fn event_windows_agree_on_odd_text() {
    if skipped("event_windows_agree_on_odd_text") {
        return;
    }
    proptest!(ProptestConfig::with_cases(300), |(text in super::super::tests::arb_text(), step in prop_oneof![Just(usize::MAX), 64usize..200])| {
        prop_assert_eq!(run_events(&text, true, step), run_events(&text, false, step));
    });
}

/// Every kind of line comes out as its event, and an error stops at its line.
#[test]
fn event_windows_read_each_kind_and_stop_at_an_error() {
    if skipped("event_windows_read_each_kind_and_stop_at_an_error") {
        return;
    }
    let mut text = b"I  04000000,4\n L 1ffefff008,8\n S 0,1\n M ffffffffffffff00,16\n".repeat(100);
    text.extend_from_slice(b" L 1234,x\n I  04000000,4\n");
    let windows = run_events(&text, true, usize::MAX);
    assert_eq!(windows, run_events(&text, false, usize::MAX));
    let (events, lines, result, stop) = windows;
    assert_eq!((events.len(), lines, stop), (400, 400, 100 * 60));
    assert!(result.is_err());
    let kinds: Vec<_> = events[..4]
        .iter()
        .map(|e| match e {
            Event::Ref(r) => (r.addr.0, r.size, r.kind),
            e => panic!("not a reference: {e:?}"),
        })
        .collect();
    use pagelab_core::AccessKind::*;
    assert_eq!(
        kinds,
        [
            (0x0400_0000, 4, Instr),
            (0x1f_feff_f008, 8, Load),
            (0, 1, Store),
            (0xffff_ffff_ffff_ff00, 16, Modify),
        ]
    );
}
