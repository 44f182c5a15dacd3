//! A shared first level tells its callers when a data line is the same hit in every run
//! ([`SharedLine::hit_everywhere`]): only while no run holds the line's set itself.

use crate::common;

use pagelab_cache::{Caches, Line, SharedFirst};

/// Reads virtual data line `va` in the shared level and in every run (each run's
/// physical address is the virtual one plus its own offset); returns the shared answer.
fn read(shared: &SharedFirst, runs: &mut [Caches], va: u64) -> pagelab_cache::SharedLine {
    let line = shared.access(va);
    for (i, run) in runs.iter_mut().enumerate() {
        run.access_shared(line, || va + ((i as u64 + 1) << 32));
    }
    line
}

#[test]
fn a_line_is_a_hit_everywhere_only_while_no_run_holds_its_set() {
    let spec = common::l1_only();
    let mut runs = vec![Caches::new(&spec), Caches::new(&spec)];
    let shared = SharedFirst::new(&runs[0], 4096, u64::MAX).expect("64 sets within 4K");
    for run in &mut runs {
        run.share_first(&shared);
    }
    let (set3, set5) = (3 * 64, 5 * 64);
    // Cold: a miss, so not a hit anywhere; read again, a hit in every run.
    assert!(!read(&shared, &mut runs, set3).hit_everywhere());
    assert!(read(&shared, &mut runs, set3).hit_everywhere());
    assert!(!read(&shared, &mut runs, set5).hit_everywhere());
    // A walk of run 1 reads a page-table line into set 3: that set is now run 1's own.
    runs[1].access((7 << 40) + set3, Line::Table);
    assert!(runs[1].owns_first_sets());
    let line = read(&shared, &mut runs, set3);
    assert!(!line.hit_everywhere(), "{line:?}");
    // Set 5 is still shared by both.
    assert!(read(&shared, &mut runs, set5).hit_everywhere());
    // Eight new data lines of set 3 push the page-table line out of run 1's set (LRU):
    // shared again, and a repeat is once more the same hit in every run.
    for k in 1..=8u64 {
        read(&shared, &mut runs, set3 + (k << 12));
    }
    assert!(!runs[1].owns_first_sets());
    assert!(read(&shared, &mut runs, set3 + (8 << 12)).hit_everywhere());
}
