//! `fill_pages` (the generator's references straight through a page filter,
//! no event stored) gives the words and counts that filtering `fill`'s events
//! gives, whatever the batch sizes, and mixed with `fill` calls.

use pagelab_core::Event;
use pagelab_trace::{PageBatch, PageFilter, TraceSource};

/// Specs of every workload, small, with and without the memset pass, and
/// the multi-process ones (whose events include `Switch`, `Fork`, `Map`, ...).
const SPECS: &[&str] = &[
    "stride:heap=64K,every=3,iters=5",
    "stride:heap=16K,line=4K,iters=4,init=false",
    "stream:n=3000,iters=2",
    "stream:n=1000,iters=1,init=false,align=2M",
    "gups:table=64K,updates=20000",
    "gups:table=1M,updates=5000,seed=7,init=false",
    "chase:nodes=1000,node=24,steps=5000",
    "chase:nodes=4096,steps=9000,init=false",
    "shm-fanout:procs=3,segment=1M,touch=0.5",
    "forkexec:procs=2,jobs=3,text=64K,libs=1,lib=64K,anon=64K",
    "prefork:procs=2,jobs=3,text=64K,heap=256K",
];

/// What a filter of `depth` (with `fragments`) makes of `spec`, the events read
/// with `fill` in batches of `batch` and filtered one by one.
fn by_events(spec: &str, depth: usize, fragments: bool, batch: usize) -> PageBatch {
    let mut src = pagelab_workloads::open(spec).unwrap();
    let mut filter = PageFilter::new(depth, fragments);
    let mut out = PageBatch::default();
    let mut events: Vec<Event> = Vec::new();
    loop {
        events.clear();
        if !src.fill(&mut events, batch).unwrap() {
            break;
        }
        for e in &events {
            filter.event(e, &mut out);
        }
    }
    filter.flush(&mut out);
    out
}

/// The same through `fill_pages`, with batch sizes taken in turn from `sizes`;
/// where a size is given as `None`, that call is a `fill` whose events are
/// filtered here (so carried-over parts of steps cross from one to the other).
fn by_pages(spec: &str, depth: usize, fragments: bool, sizes: &[Option<usize>]) -> PageBatch {
    let mut src = pagelab_workloads::open(spec).unwrap();
    assert!(src.parses_to_pages(), "{spec}");
    let mut filter = PageFilter::new(depth, fragments);
    let mut all = PageBatch::default();
    let mut events: Vec<Event> = Vec::new();
    for i in 0.. {
        let mut batch = PageBatch::default();
        let more = match sizes[i % sizes.len()] {
            Some(max) => {
                let more = src.fill_pages(&mut filter, &mut batch, max).unwrap();
                assert!(batch.events() <= max as u64, "{spec}: took more than {max}");
                more
            }
            None => {
                events.clear();
                let more = src.fill(&mut events, 5).unwrap();
                for e in &events {
                    filter.event(e, &mut batch);
                }
                more
            }
        };
        all.words.extend_from_slice(&batch.words);
        all.refs[0] += batch.refs[0];
        all.refs[1] += batch.refs[1];
        all.other_events += batch.other_events;
        if !more {
            break;
        }
    }
    filter.flush(&mut all);
    all
}

#[test]
fn fill_pages_gives_the_words_of_filtered_events() {
    let runs: &[&[Option<usize>]] = &[
        &[Some(64 * 1024)],
        &[Some(1)],
        &[Some(7), Some(3), Some(4093)],
        &[Some(2), None, Some(11), None],
    ];
    for spec in SPECS {
        for (depth, fragments) in [(4, false), (1, false), (2, true)] {
            let want = by_events(spec, depth, fragments, 4093);
            assert!(want.events() > 0, "{spec}");
            for sizes in runs {
                let got = by_pages(spec, depth, fragments, sizes);
                assert_eq!(got.refs, want.refs, "{spec} depth {depth} {sizes:?}");
                assert_eq!(got.other_events, want.other_events, "{spec} {sizes:?}");
                assert!(
                    got.words == want.words,
                    "{spec} depth {depth} {sizes:?}: words differ"
                );
            }
        }
    }
}

#[test]
fn fill_pages_with_no_room_takes_nothing_and_says_more_may_come() {
    let mut src = pagelab_workloads::open("gups:updates=10").unwrap();
    let mut filter = PageFilter::new(4, false);
    let mut batch = PageBatch::default();
    assert!(src.fill_pages(&mut filter, &mut batch, 0).unwrap());
    assert_eq!(batch.events(), 0);
    while src.fill_pages(&mut filter, &mut batch, 1000).unwrap() {}
    assert!(!src.fill_pages(&mut filter, &mut batch, 0).unwrap());
}
