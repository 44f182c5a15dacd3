//! Lackey text into events on CPUs with AVX-512 (VBMI and VBMI2): the windows of
//! [`super::fast_pages`], each of up to eight lines read at once, with every line's
//! reference written out as an event (the reader's path for everything but the study's
//! page filter: the study with time, the policies, `convert`).
//!
//! [`parse_events`] has the contract of [`parse_blocks`] for an [`EventSink`] and gives
//! the same events, lines, stops and errors: a window with any line of another shape
//! sends its first line alone through [`parse_well_formed`] (the block loop's own
//! parse of a line) or the careful parser, exactly as the block loop would, and the
//! next window starts after it (tested against each other on every CPU that has the
//! instructions: `fast_pages_tests.rs`).

#[cfg(target_arch = "x86_64")]
use super::fast::{parse_blocks, parse_well_formed, Sink, KIND};
use super::fast::{EventSink, Parsed};
#[cfg(target_arch = "x86_64")]
use super::fast_pages::{
    avx512::{line_end, load_window, window},
    MAX_LINES,
};
#[cfg(target_arch = "x86_64")]
use super::line::parse_odd_line;
#[cfg(target_arch = "x86_64")]
use pagelab_core::{MemRef, VirtAddr};

/// Parses whole lines of `buf[start..complete]` into `out`, with the contract of
/// [`parse_blocks`]. Only where [`pagelab_core::isa::vbmi2_supported`].
pub(super) fn parse_events(
    buf: &[u8],
    complete: usize,
    start: usize,
    line: u64,
    out: &mut EventSink<'_>,
) -> Parsed {
    assert!(
        pagelab_core::isa::vbmi2_supported(),
        "parse_events needs AVX-512 VBMI2"
    );
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the CPU has every feature `avx512::parse_events` is compiled for (asserted
    // above).
    return unsafe { avx512::parse_events(buf, complete, start, line, out) };
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (buf, complete, start, line, out);
        unreachable!("no AVX-512 off x86-64")
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::*;

    #[target_feature(
        enable = "avx512f,avx512bw,avx512vl,avx512vbmi,avx512vbmi2,avx2,bmi1,bmi2,popcnt,lzcnt"
    )]
    pub(super) fn parse_events(
        buf: &[u8],
        complete: usize,
        start: usize,
        mut line: u64,
        out: &mut EventSink<'_>,
    ) -> Parsed {
        let mut s = start;
        let mut failed = Ok(());
        let (mut addr, mut meta) = ([0u64; MAX_LINES], [0u8; MAX_LINES]);
        while s < complete && out.room() >= MAX_LINES {
            let (w, nl) = load_window(buf, complete, s);
            let win = window(w, nl, &mut addr, &mut meta);
            if win.ok {
                out.begin_block();
                for i in 0..win.lines as usize {
                    out.push(MemRef {
                        addr: VirtAddr(addr[i]),
                        size: u32::from(meta[i] & 0x7f),
                        kind: KIND[usize::from((win.kinds >> (8 * i)) as u8)],
                    });
                }
                out.end_block();
                line += u64::from(win.lines);
                s += win.end as usize + 1;
                continue;
            }
            // The first line alone.
            let e = line_end(buf, complete, s, nl);
            if let Some(r) = parse_well_formed::<true>(buf, s, e) {
                out.push_one(r);
            } else {
                match parse_odd_line(&buf[..complete], s, e) {
                    Ok(Some(r)) => out.push_one(r),
                    Ok(None) => {}
                    Err(reason) => {
                        failed = Err(reason);
                        break;
                    }
                }
            }
            line += 1;
            s = e + 1;
        }
        if failed.is_ok() && s < complete {
            // Too little room left for a window: the block loop stops where it must.
            return parse_blocks(buf, complete, s, line, out);
        }
        (s, line, failed)
    }
}
