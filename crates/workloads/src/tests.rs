//! Unit tests that need the crate's internals: bounded buffers.

use super::*;
use code::{Driver, Generator};
use pagelab_core::Event;

/// Drains `refs` events from a driver in odd-sized batches into one reused
/// buffer, checking the carry-over buffer never outgrows one step.
fn drain_bounded<G: Generator>(mut d: Driver<G>, refs: u64) -> u64 {
    let mut out = Vec::with_capacity(8192);
    let mut seen = 0u64;
    while seen < refs {
        out.clear();
        if !d.fill(&mut out, 4093).unwrap() {
            break;
        }
        seen += out.len() as u64;
        assert!(
            d.pending_capacity() <= G::MAX_STEP,
            "carry-over buffer grew"
        );
        assert!(out.capacity() <= 8192, "the caller's buffer grew");
    }
    seen
}

fn cfg<T>(f: fn(&Params) -> Result<T, WorkloadError>, name: &str, spec: &str) -> T {
    let doc = DOCS.iter().find(|d| d.name == name).unwrap();
    let (_, pairs) = spec::split(spec).unwrap();
    f(&Params::new(doc, &pairs).unwrap()).unwrap()
}

#[test]
fn fifty_million_refs_each_in_bounded_memory() {
    const N: u64 = 50_000_000;
    let s = cfg(
        stride::Config::parse,
        "stride",
        "stride:heap=32M,iters=1000000",
    );
    assert!(N <= drain_bounded(Driver::new(stride::Stride::new(s)), N));
    let s = cfg(
        stream::Config::parse,
        "stream",
        "stream:n=1000000,iters=1000000",
    );
    assert!(N <= drain_bounded(Driver::new(stream::Stream::new(s)), N));
    let s = cfg(
        gups::Config::parse,
        "gups",
        "gups:table=1G,updates=100000000",
    );
    assert!(N <= drain_bounded(Driver::new(gups::Gups::new(s)), N));
    let s = cfg(
        chase::Config::parse,
        "chase",
        "chase:nodes=100000000,steps=100000000",
    );
    assert!(N <= drain_bounded(Driver::new(chase::Chase::new(s)), N));
}

#[test]
fn generators_hold_no_growing_buffers() {
    // The generators are plain counters and keys: their size is fixed at compile time
    // and small, so nothing in them can grow with the trace.
    assert!(std::mem::size_of::<stride::Stride>() <= 256);
    assert!(std::mem::size_of::<stream::Stream>() <= 256);
    assert!(std::mem::size_of::<gups::Gups>() <= 256);
    assert!(std::mem::size_of::<chase::Chase>() <= 256);
    let _ = Event::Exit { status: 0 };
}

#[test]
fn crate_docs_name_every_parameter_with_its_default() {
    let docs = include_str!("lib.rs");
    for d in catalog() {
        for p in d.params {
            let text = format!("`{}={}`", p.name, p.default);
            assert!(
                docs.contains(&text),
                "lib.rs docs lack {text} of {}",
                d.name
            );
        }
    }
}
