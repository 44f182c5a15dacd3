//! The kernel's writes into a user buffer (read, pread64, getdents64, readlink, readlinkat,
//! getrandom) become stores in the decoded trace, one per 4K page, as many bytes as the
//! call returned: QEMU's plugin sees none of the kernel's accesses, and without them a
//! buffer that `read` fills first is modelled as read first (zero pages, then copies).

use pagelab_capture::format::*;
use pagelab_capture::PluginReader;
use pagelab_core::{AccessKind, Event, MemRef, VirtAddr};
use pagelab_trace::TraceSource;

fn decode(words: &[u64]) -> Vec<Event> {
    let bytes = to_bytes(words);
    let mut r = PluginReader::new(&bytes[..], "test");
    let mut out = Vec::new();
    while r.fill(&mut out, 1000).expect("a good stream") {}
    out
}

/// Stores as (address, size).
type Stores = Vec<(u64, u32)>;

fn stores(events: &[Event]) -> Stores {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Ref(MemRef {
                addr,
                size,
                kind: AccessKind::Store,
            }) => Some((addr.0, *size)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_read_writes_its_buffer_page_by_page() {
    let mut w = thread(7, 7).to_vec();
    // read(3, 0x70000ff0, 20000) = 10000: 16 bytes, two whole pages, 1792 bytes.
    w.extend(syscall(0, 10000, [3, 0x7000_0ff0, 20000, 0, 0, 0], None));
    assert_eq!(
        stores(&decode(&w)),
        vec![
            (0x7000_0ff0, 16),
            (0x7000_1000, 4096),
            (0x7000_2000, 4096),
            (0x7000_3000, 1792)
        ]
    );
    let first = decode(&w)
        .into_iter()
        .find(|e| matches!(e, Event::Ref(_)))
        .unwrap();
    assert_eq!(
        first,
        Event::Ref(MemRef {
            addr: VirtAddr(0x7000_0ff0),
            size: 16,
            kind: AccessKind::Store
        })
    );
}

#[test]
fn each_call_names_its_buffer_and_a_failure_or_nothing_read_writes_nothing() {
    let cases: [(u64, [u64; 6], Stores); 6] = [
        (17, [3, 0x1000, 100, 64, 0, 0], vec![(0x1000, 100)]), // pread64
        (89, [0x9000, 0x2000, 100, 0, 0, 0], vec![(0x2000, 100)]), // readlink
        (217, [3, 0x3000, 100, 0, 0, 0], vec![(0x3000, 100)]), // getdents64
        (267, [3, 0x9000, 0x4000, 100, 0, 0], vec![(0x4000, 100)]), // readlinkat
        (318, [0x5000, 100, 0, 0, 0, 0], vec![(0x5000, 100)]), // getrandom
        (1, [1, 0x6000, 100, 0, 0, 0], vec![]),                // write: reads the buffer
    ];
    for (num, args, want) in cases {
        let mut w = thread(7, 7).to_vec();
        w.extend(syscall(num, 100, args, None));
        assert_eq!(stores(&decode(&w)), want, "system call {num}");
    }
    for ret in [0i64, -14] {
        let mut w = thread(7, 7).to_vec();
        w.extend(syscall(0, ret, [3, 0x7000, 100, 0, 0, 0], None));
        assert_eq!(stores(&decode(&w)), vec![], "read returning {ret:#x}");
    }
    // A return past the buffer's size (a corrupt stream) writes the buffer only.
    let mut w = thread(7, 7).to_vec();
    // (A return past what any kernel returns is an error: the test below.)
    w.extend(syscall(0, 1000, [3, 0x7000, 100, 0, 0, 0], None));
    assert_eq!(stores(&decode(&w)), vec![(0x7000, 100)]);
}

#[test]
fn a_result_no_kernel_returns_is_a_corrupt_stream_not_millions_of_stores() {
    // Found by the qemu_stream fuzz target: a read "returning" 2^40 bytes into a buffer of
    // 2^40 became 2^28 stores and ran the fuzzer out of memory. Linux returns at most
    // MAX_RW_COUNT (0x7ffff000) from one call.
    let mut w = thread(7, 7).to_vec();
    w.extend(syscall(
        0,
        1 << 40,
        [3, 0x7000_0000, 1 << 40, 0, 0, 0],
        None,
    ));
    let bytes = to_bytes(&w);
    let mut r = PluginReader::new(&bytes[..], "test");
    let mut out = Vec::new();
    let e = loop {
        match r.fill(&mut out, 1000) {
            Ok(true) => continue,
            Ok(false) => panic!("decoded {} events from an impossible read", out.len()),
            Err(e) => break e.to_string(),
        }
    };
    assert!(e.contains("more than Linux returns from one call"), "{e}");
    assert!(e.contains("test"), "the error names the stream: {e}");
    assert!(out.len() < 10, "{} events", out.len());
    // The most a kernel returns is still decoded, page by page.
    let mut w = thread(7, 7).to_vec();
    w.extend(syscall(
        0,
        0x7fff_f000,
        [3, 0x1000_0000, 0x7fff_f000, 0, 0, 0],
        None,
    ));
    assert_eq!(stores(&decode(&w)).len(), 0x7fff_f000 / 4096);
}
