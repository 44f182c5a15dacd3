//! Helpers shared by the capture tests.
#![allow(dead_code)]

use pagelab_capture::layout::LayoutParams;
use pagelab_capture::{Backend, Capture, CaptureCommand, Relocated, StdoutTo};
use pagelab_core::{AccessKind, Event, VirtAddr};
use pagelab_trace::TraceSource;
use std::collections::BTreeSet;
use std::path::Path;

/// Whether the backend's tool is installed; prints why a test skips when not.
pub fn available(backend: Backend) -> bool {
    let found = match backend {
        Backend::Qemu => pagelab_capture::find_qemu().map(|_| ()),
        Backend::Valgrind => pagelab_capture::find_valgrind().map(|_| ()),
    };
    match found {
        Ok(()) => true,
        Err(e) => {
            eprintln!("SKIPPED: {e}");
            false
        }
    }
}

/// Captures `program args` and returns every event and the exit code; the
/// program's standard output goes to `stdout` if given, else to standard error.
pub fn capture(
    backend: Backend,
    program: &str,
    args: &[&str],
    stdout: Option<&Path>,
) -> (Vec<Event>, i32) {
    let cmd = CaptureCommand {
        backend,
        program: program.into(),
        args: args.iter().map(Into::into).collect(),
        stdout: stdout.map_or(StdoutTo::Stderr, |p| StdoutTo::File(p.to_path_buf())),
    };
    let mut cap = Capture::spawn(&cmd).expect("capture starts");
    let mut events = Vec::new();
    while cap.fill(&mut events, 65536).expect("trace decodes") {}
    let status = cap.status().expect("program waited for");
    (events, pagelab_capture::exit_code(status))
}

/// The capture test program (`capture/testprog`).
pub fn testprog() -> String {
    pagelab_capture::testprog_path()
        .to_string_lossy()
        .into_owned()
}

/// Instruction fetches and data references counted.
pub fn counts(events: &[Event]) -> (u64, u64) {
    let mut i = 0;
    let mut d = 0;
    for e in events {
        if let Event::Ref(r) = e {
            if r.kind == AccessKind::Instr {
                i += 1;
            } else {
                d += 1;
            }
        }
    }
    (i, d)
}

/// Pages (4K) touched by data references inside [start, start + len), relative to start.
pub fn data_pages_in(events: &[Event], start: u64, len: u64) -> BTreeSet<u64> {
    data_refs_in(events, start, len)
        .into_iter()
        .map(|(_, at, _)| at / 4096)
        .collect()
}

/// The data references inside [start, start + len) in order, as (kind, offset from
/// start, size).
pub fn data_refs_in(events: &[Event], start: u64, len: u64) -> Vec<(AccessKind, u64, u32)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Ref(r)
                if !r.kind.is_instr()
                    && r.addr >= VirtAddr(start)
                    && r.addr < VirtAddr(start + len) =>
            {
                Some((r.kind, r.addr - VirtAddr(start), r.size))
            }
            _ => None,
        })
        .collect()
}

/// The regions "PREFIXregion 0xADDR LEN ..." lines of the test program's output name.
pub fn regions(output: &str, prefix: &str) -> Vec<(u64, u64)> {
    output
        .lines()
        .filter_map(|l| l.strip_prefix(prefix)?.strip_prefix("region 0x"))
        .map(|rest| {
            let mut f = rest.split_whitespace();
            let addr = u64::from_str_radix(f.next().unwrap(), 16).unwrap();
            let len = f.next().unwrap().parse().unwrap();
            (addr, len)
        })
        .collect()
}

/// The data pages the test program touches in each region.
pub const TOUCHED: [u64; 6] = [0, 1, 5, 17, 40, 63];

/// Runs `program args` under a capture placed at Linux's addresses and
/// relocated there (docs/layout.md); its events. The program must succeed.
pub fn placed(program: &str, args: &[String]) -> Vec<Event> {
    let cmd = CaptureCommand {
        backend: Backend::Qemu,
        program: program.into(),
        args: args.iter().map(Into::into).collect(),
        stdout: StdoutTo::Stderr,
    };
    let (cap, setup) = Capture::spawn_relocatable(&cmd, LayoutParams::default()).unwrap();
    let mut src = Relocated::new(cap, setup);
    assert!(src.info().params["placement"].starts_with("linux"));
    let mut events = Vec::new();
    while src.fill(&mut events, 1 << 16).unwrap() {}
    let status = src.inner_mut().status().unwrap();
    assert_eq!(pagelab_capture::exit_code(status), 0);
    events
}
