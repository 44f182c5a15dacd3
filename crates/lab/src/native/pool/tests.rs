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

#[test]
fn what_is_left_of_a_pool_is_unmapped_around_its_holes() {
    use rustix::mm::{MapFlags, ProtFlags};
    let map = |at: *mut u8, pages: usize, flags: MapFlags| {
        // SAFETY: an anonymous mapping, at `at` only where nothing is mapped
        // (FIXED_NOREPLACE), aliasing nothing.
        unsafe {
            rustix::mm::mmap_anonymous(
                at.cast(),
                pages * PAGE,
                ProtFlags::READ | ProtFlags::WRITE,
                flags,
            )
        }
        .map(|p| p.cast::<u8>())
    };
    let base = map(std::ptr::null_mut(), 8, MapFlags::PRIVATE).unwrap();
    // Each page of the pool marked, to tell it from a mapping another test's thread may
    // make in the holes once the pool is gone (CI saw one take a page back).
    let marker = |p: usize| 0x5eed_0000_u64 + p as u64;
    for p in 0..8 {
        // SAFETY: page p is part of the mapping just made, readable and writable.
        unsafe { base.add(p * PAGE).cast::<u64>().write_volatile(marker(p)) };
    }
    // Whether the word at `at` still holds page p's marker, read through /proc/self/mem
    // (an unmapped address is an error there, not a fault; a guard page reads too).
    let marked = |at: *mut u8, p: usize| {
        use std::os::unix::fs::FileExt;
        let mem = std::fs::File::open("/proc/self/mem").unwrap();
        let mut word = [0u8; 8];
        mem.read_exact_at(&mut word, at as u64).is_ok() && u64::from_ne_bytes(word) == marker(p)
    };
    // Pages 3 and 6 moved out; another mapping took the hole at 3 since.
    // SAFETY: pages 3 and 6 are part of the mapping just made.
    unsafe {
        rustix::mm::munmap(base.add(3 * PAGE).cast(), PAGE).unwrap();
        rustix::mm::munmap(base.add(6 * PAGE).cast(), PAGE).unwrap();
    }
    // SAFETY: page 3 is inside the range just made, now unmapped.
    let other = map(
        unsafe { base.add(3 * PAGE) },
        1,
        MapFlags::PRIVATE | MapFlags::FIXED_NOREPLACE,
    )
    .unwrap();
    // SAFETY: the page was just mapped, readable and writable.
    unsafe { other.write_volatile(42) };
    drop(PoolLeft {
        base,
        len: 8 * PAGE,
        moved: vec![6, 3],
    });
    // The other mapping is still there.
    // SAFETY: as above; it would fault had the pool taken it.
    assert_eq!(unsafe { other.read_volatile() }, 42);
    // The rest of the pool is gone: each of its pages can be mapped afresh, or holds a
    // mapping that is not the pool's (another thread's, made since).
    for p in [0, 1, 2, 4, 5, 6, 7] {
        // SAFETY: page p is inside the pool's old range.
        let at = unsafe { base.add(p * PAGE) };
        match map(at, 1, MapFlags::PRIVATE | MapFlags::FIXED_NOREPLACE) {
            Ok(again) => {
                assert_eq!(again as usize, at as usize, "page {p}");
                assert!(!marked(at, p), "page {p} came back with the pool's data");
                // SAFETY: the page was just mapped by this test alone.
                unsafe { rustix::mm::munmap(at.cast(), PAGE).unwrap() };
            }
            Err(e) => {
                assert_eq!(e, rustix::io::Errno::EXIST, "page {p}");
                assert!(!marked(at, p), "page {p} is still the pool's");
            }
        }
    }
    // SAFETY: page 3 is the other mapping, this test's own.
    unsafe { rustix::mm::munmap(base.add(3 * PAGE).cast(), PAGE).unwrap() };
}

#[test]
fn a_pool_that_cannot_hold_the_data_or_is_not_whole_blocks_is_refused() {
    let e = pooled(16 << 20, 8 << 20, 1).unwrap_err().to_string();
    assert!(e.contains("pool=8M") && e.contains("4096 4K pages"), "{e}");
    let e = pooled(1 << 20, 3 << 20, 1).unwrap_err().to_string();
    assert!(e.contains("whole 2M blocks"), "{e}");
}

/// As root with THP: kernels lent pages from a reserve get them from its first bytes,
/// the same pages for the same seed, and give them back to their places (the same
/// frames) when their data is unmapped; a larger pool is made apart; the reserve is
/// gone after.
/// The mappings of this process (`/proc/self/maps`) that lie in `base..base + len`.
fn mappings_in(base: usize, len: usize) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .filter_map(|l| l.split_once('-'))
        .filter_map(|(from, _)| usize::from_str_radix(from, 16).ok())
        .filter(|&from| (base..base + len).contains(&from))
        .count()
}

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
