//! Workload specs (`--workload NAME[:key=value,...]`).
//!
//! Input: the spec text. Checks: `open` and `total_refs` agree on what is
//! refused and why; an accepted spec generates exactly `total_refs`
//! references when that is small (else at least its first batches without
//! fault); and the spec rebuilt from the source's own parameters generates
//! the same references.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pagelab_core::Event;
use pagelab_fuzz::drain;

const CAP: usize = 50_000;

fuzz_target!(|data: &[u8]| {
    let Ok(spec) = std::str::from_utf8(data) else {
        return;
    };
    let total = pagelab_workloads::total_refs(spec);
    let mut src = match pagelab_workloads::open(spec) {
        Ok(src) => src,
        Err(e) => {
            let msg = e.to_string();
            assert!(!msg.trim().is_empty());
            let other = total.expect_err("open refused what total_refs accepted");
            assert_eq!(
                other.to_string(),
                msg,
                "open and total_refs refuse differently"
            );
            return;
        }
    };
    let total = total.expect("total_refs refused what open accepted");
    let info = src.info();
    let got = drain(&mut *src, &[4096, 1, 777], CAP);
    let refs = got
        .events
        .iter()
        .filter(|e| matches!(e, Event::Ref(_)))
        .count() as u64;
    if got.error.is_none() {
        assert_eq!(
            refs, total,
            "references generated against total_refs for {spec}"
        );
    } else {
        assert_eq!(got.error.as_deref(), Some("(cap reached)"));
        assert!(
            total >= refs,
            "total_refs {total} below the {refs} generated"
        );
    }

    let params: Vec<String> = info
        .params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let rebuilt = format!("{}:{}", info.name, params.join(","));
    let mut again = pagelab_workloads::open(&rebuilt)
        .unwrap_or_else(|e| panic!("{rebuilt} (from {spec}) refused: {e}"));
    let second = drain(&mut *again, &[4096], got.events.len().max(1));
    assert_eq!(
        &second.events[..got.events.len()],
        &got.events[..],
        "{rebuilt} differs from {spec}"
    );
});
