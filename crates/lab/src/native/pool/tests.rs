use super::*;

#[test]
fn a_draw_is_distinct_in_range_and_the_same_for_a_seed() {
    let a = draw(1024, 300, 7);
    assert_eq!(a.len(), 300);
    let mut s = a.clone();
    s.sort_unstable();
    s.dedup();
    assert_eq!(s.len(), 300, "distinct");
    assert!(a.iter().all(|&p| p < 1024));
    assert_eq!(a, draw(1024, 300, 7));
    assert_ne!(a, draw(1024, 300, 8));
    // Not in order: a random choice, not the first pages.
    assert_ne!(a, (0..300).collect::<Vec<_>>());
    assert_eq!(draw(4, 10, 1).len(), 4);
}

/// As root with THP: a pool of a kernel's own gives the data its pages, frames and
/// contents with them, and what is left of it is unmapped whole when the draw is done.
#[test]
fn a_pool_of_its_own_moves_its_pages_under_the_data_and_is_unmapped_after() {
    if !pagelab_sys::process::is_root() {
        eprintln!("skipped: needs root (pagemap) for a pool");
        return;
    }
    let pool = match Reserve::make(4 << 20, "pool=4M") {
        Ok(r) => r,
        Err(e) => {
            eprintln!("skipped: no pool here: {e:#}");
            return;
        }
    };
    let (base, len) = (pool.base, pool.len);
    // Each page of the pool marked, to tell it from a mapping another test's thread may
    // make in the pool's range once it is gone.
    let marker = |p: usize| 0x5eed_0000_u64 + p as u64;
    for p in 0..len / PAGE {
        // SAFETY: page p is part of the pool's mapping, readable and writable.
        unsafe { base.add(p * PAGE).cast::<u64>().write_volatile(marker(p)) };
    }
    let mut moved = Vec::new();
    let mut data = draw_under_data(base, 4 << 20, 256 << 10, 5, &mut moved).unwrap();
    assert_eq!(
        moved,
        draw(1024, 64, 5)
            .iter()
            .map(|&p| p as usize)
            .collect::<Vec<_>>()
    );
    // While the pool is there, its range is whole: one mapping, however many pages left.
    assert_eq!(
        mappings_in(base as usize, len),
        1,
        "the pool's range has no hole"
    );
    drop(pool);
    let at = data.as_mut_ptr();
    for (j, &p) in moved.iter().enumerate() {
        // SAFETY: page j is part of the data's mapping, which the region owns.
        let got = unsafe { at.add(j * PAGE).cast::<u64>().read_volatile() };
        assert_eq!(got, marker(p), "the data's page {j} is the pool's page {p}");
    }
    // Whether the word at `at` holds page p's marker, read through /proc/self/mem (an
    // unmapped address is an error there, not a fault).
    let marked = |at: *mut u8, p: usize| {
        use std::os::unix::fs::FileExt;
        let mem = std::fs::File::open("/proc/self/mem").unwrap();
        let mut word = [0u8; 8];
        mem.read_exact_at(&mut word, at as u64).is_ok() && u64::from_ne_bytes(word) == marker(p)
    };
    for p in 0..len / PAGE {
        // Only the address: it is read through /proc/self/mem.
        let at = base.wrapping_add(p * PAGE);
        assert!(!marked(at, p), "the pool's page {p} is still mapped");
    }
}

#[test]
fn a_pool_that_cannot_hold_the_data_or_is_not_whole_blocks_is_refused() {
    let e = pooled(16 << 20, 8 << 20, 1).unwrap_err().to_string();
    assert!(e.contains("pool=8M") && e.contains("4096 4K pages"), "{e}");
    let e = pooled(1 << 20, 3 << 20, 1).unwrap_err().to_string();
    assert!(e.contains("whole 2M blocks"), "{e}");
}

/// The mappings of this process (`/proc/self/maps`) that lie in `base..base + len`.
fn mappings_in(base: usize, len: usize) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .filter_map(|l| l.split_once('-'))
        .filter_map(|(from, _)| usize::from_str_radix(from, 16).ok())
        .filter(|&from| (base..base + len).contains(&from))
        .count()
}

/// As root with THP: kernels lent pages from a reserve get them from its first bytes,
/// the same pages for the same seed, and give them back to their places (the same
/// frames) when their data is unmapped; a larger pool is made apart; the reserve is
/// gone after.
#[test]
fn a_reserve_lends_its_first_blocks_and_gets_them_back() {
    if !pagelab_sys::process::is_root() {
        eprintln!("skipped: needs root (pagemap) for a reserve");
        return;
    }
    let frames = |at: *mut u8, bytes: usize| -> Vec<u64> {
        use std::os::unix::fs::FileExt;
        let pagemap = std::fs::File::open("/proc/self/pagemap").unwrap();
        let mut buf = vec![0u8; bytes / PAGE * 8];
        pagemap
            .read_exact_at(&mut buf, at as u64 / PAGE as u64 * 8)
            .unwrap();
        buf.chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .map(|e| if e >> 63 == 1 { e & ((1 << 55) - 1) } else { 0 })
            .collect()
    };
    let reserve = match Reserve::new(16 << 20) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("skipped: no reserve here: {e:#}");
            return;
        }
    };
    let (base, len) = (reserve.base, reserve.len);
    let before = frames(base, len);
    assert!(
        before.iter().all(|&f| f != 0),
        "every page of the reserve is present"
    );
    let first_blocks: std::collections::HashSet<u64> =
        before[..(8 << 20) / PAGE].iter().map(|f| f >> 9).collect();
    lending(reserve, || {
        let mut seen = Vec::new();
        for _ in 0..2 {
            let (mut data, blocks) = pooled(1 << 20, 8 << 20, 3).unwrap();
            assert!(
                (4..=8).contains(&blocks),
                "{blocks} blocks for a pool of 8M"
            );
            let got = frames(data.as_mut_ptr(), 1 << 20);
            assert!(
                got.iter().all(|f| first_blocks.contains(&(f >> 9))),
                "the data's frames are the reserve's first 8M"
            );
            // Lent, the places are mapped and empty.
            let now = frames(base, len);
            assert_eq!(now.iter().filter(|&&f| f == 0).count(), 256);
            seen.push(got);
        }
        assert_eq!(seen[0], seen[1], "the same seed draws the same pages");
        // Given back: every page in its place, on its frame, and the places' mappings
        // merged again (not a mapping a page, up to vm.max_map_count).
        assert_eq!(frames(base, len), before);
        let pieces = mappings_in(base as usize, len);
        assert!(
            pieces <= 2,
            "the reserve is {pieces} mappings after 512 pages came back"
        );
        // A pool larger than the reserve is made apart.
        let (_, blocks) = pooled(1 << 20, 32 << 20, 3).unwrap();
        assert!(blocks >= 16, "{blocks}");
        assert_eq!(frames(base, len), before);
    });
    assert!(LENDER.with(|l| l.borrow().is_none()), "the lender is unset");
    // The reserve is unmapped: its pages are no longer on its frames (another test's
    // thread may map something in its range since, but not on those frames).
    assert_ne!(frames(base, len), before, "the reserve is unmapped");
}
