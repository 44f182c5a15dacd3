//! `pool=SIZE`: a kernel's 4K pages on frames drawn at random from whole 2M blocks.
//!
//! Under nested paging what a 4K page's walk costs depends on how many 2M blocks of
//! (guest-)physical memory the data's frames fall in: on this project's Zen 4 guest the
//! every-page stride over 16M took about 2.0 ns a load with its frames in 8 blocks and 4.6
//! ns with them in 4096, the same frames in any order within their blocks costing the same
//! (`docs/cost.md`, session 38). Left to the kernel's allocator, the frames of one run fall
//! in 16 blocks and those of the next in 2600, so the 4K runs spread by a factor of two.
//! `pool=SIZE` takes that draw out of the measurement: the kernel faults in `SIZE` bytes of
//! whole 2M pages (THP, collapsed with `MADV_COLLAPSE` whatever the THP knobs say), splits
//! their mappings into 4K entries, and moves a random choice of their 4K pages (seeded, so
//! every run draws alike) under the data with `mremap`, one page each. The model is given
//! the same placement: 4K frames at random over `SIZE` bytes (`[frames] span`).
//!
//! Only the 4K baseline places its frames so ([`Advice::NoHugePage`]); under another
//! configuration the data is mapped as that configuration maps it, whole folios, and the
//! pool is not used.

use super::{Advice, Region, REGION_ALIGN};
use anyhow::{bail, Context, Result};
use pagelab_core::Bytes;

/// The base page the pool hands out.
const PAGE: usize = 4096;
/// `MADV_COLLAPSE` (Linux 6.1, `include/uapi/asm-generic/mman-common.h`): collapse the range
/// into THPs now, independent of the THP knobs.
const MADV_COLLAPSE: i32 = 25;
/// Mappings a process keeps besides the data's one per page (its own code, libraries,
/// stacks and the pool's pieces), under `vm.max_map_count`.
const MAP_HEADROOM: u64 = 2048;

/// `bytes` of data (a [`Region`]) whose 4K pages lie on frames drawn from a pool of `pool`
/// bytes of 2M blocks, by a generator seeded with `seed`; the data's first write follows,
/// by the caller. Returns the region and the 2M blocks the pool's frames fell in, as pagemap
/// shows them (its size over 2M where every block collapsed into a 2M page).
///
/// # Errors
/// A pool that is not whole 2M blocks or smaller than the data; more pages than
/// `vm.max_map_count` allows mappings; a pool larger than three quarters of the memory
/// available; pagemap hidden (not root), so the pool's frames cannot be checked; a pool
/// whose frames fell in more than twice its 2M blocks (THP missing or memory too
/// fragmented to collapse); a failed `mremap`.
pub fn pooled(bytes: u64, pool: u64, seed: u64) -> Result<(Region, u64)> {
    let block = REGION_ALIGN as u64;
    let pages = bytes.div_ceil(PAGE as u64);
    if !pool.is_multiple_of(block) || pool < pages * PAGE as u64 {
        bail!(
            "pool={} must be whole 2M blocks holding the data's {} ({} 4K pages)",
            Bytes(pool),
            Bytes(bytes),
            pages
        );
    }
    let limit = max_map_count()?;
    if pages + MAP_HEADROOM > limit {
        bail!(
            "pool=: the data's {pages} 4K pages would each be a mapping, past vm.max_map_count \
             ({limit}, less {MAP_HEADROOM} for the rest of the process): use less data"
        );
    }
    if let Some(avail) = mem_available()? {
        if pool > avail / 4 * 3 {
            bail!(
                "pool={} is more than three quarters of the memory available ({})",
                Bytes(pool),
                Bytes(avail)
            );
        }
    }
    let len = usize::try_from(pool).context("the pool does not fit this address space")?;
    let mut src = Region::new(len, Advice::HugePage)?;
    let base = src.as_mut_ptr();
    // From here the pool's mapping is unmapped by `left`, which skips the pages moved out.
    let mut left = PoolLeft {
        base,
        len: src.map_len(),
        moved: Vec::new(),
    };
    std::mem::forget(src);
    for off in (0..len).step_by(PAGE) {
        // SAFETY: off < len, inside the mapping, which no Rust reference covers.
        unsafe { base.add(off).write_volatile(1) };
    }
    // SAFETY: the range is exactly the pool's mapping. Its result is checked below, by the
    // frames it left, not by its return: a kernel without it leaves what THP gave.
    unsafe { libc::madvise(base.cast(), len, MADV_COLLAPSE) };
    let blocks = pool / block;
    // Where the kernel could not collapse a block, its frames may be contiguous but not
    // aligned to 2M, straddling two blocks: the pool's blocks are counted as they came.
    let got = match crate::probe::frames_of(base as u64, pool)? {
        None => bail!(
            "pool=: /proc/self/pagemap hides frame numbers (not root), so the pool's frames \
             cannot be checked"
        ),
        Some(f) if f.blocks > 2 * blocks => bail!(
            "pool={}: its frames came back in {} 2M blocks, {:.1}% of neighbouring pages on \
             neighbouring frames, more than twice its {blocks} (THP missing here, or memory \
             too fragmented to collapse)",
            Bytes(pool),
            f.blocks,
            f.neighbours * 100.0
        ),
        Some(f) => f.blocks,
    };
    // Split every 2M mapping into 4K entries (the frames stay): a protection change of one
    // page does it.
    use rustix::mm::MprotectFlags as ProtFlags;
    for b in (0..len).step_by(REGION_ALIGN) {
        // SAFETY: the page lies in the pool's mapping; its protection is restored at once.
        unsafe {
            rustix::mm::mprotect(base.add(b).cast(), PAGE, ProtFlags::READ)
                .and_then(|()| {
                    rustix::mm::mprotect(
                        base.add(b).cast(),
                        PAGE,
                        ProtFlags::READ | ProtFlags::WRITE,
                    )
                })
                .map_err(|e| {
                    anyhow::anyhow!("mprotect in the pool: {}", std::io::Error::from(e))
                })?;
        }
    }
    let data_len = usize::try_from(bytes).context("the data does not fit this address space")?;
    let mut data = Region::new(data_len, Advice::NoHugePage)?;
    let dst = data.as_mut_ptr();
    for (j, p) in draw(pool / PAGE as u64, pages, seed)
        .into_iter()
        .enumerate()
    {
        // SAFETY: the source is one 4K page of the pool's mapping, the target one 4K page of
        // the data's, both page-aligned; neither is referenced by Rust, and the move only
        // changes which frame backs the target.
        unsafe {
            rustix::mm::mremap_fixed(
                base.add(p as usize * PAGE).cast(),
                PAGE,
                PAGE,
                rustix::mm::MremapFlags::MAYMOVE,
                dst.add(j * PAGE).cast(),
            )
        }
        .map_err(|e| {
            anyhow::anyhow!(
                "mremap of the pool's page {p} under the data's page {j}: {}",
                std::io::Error::from(e)
            )
        })?;
        left.moved.push(p as usize);
    }
    // The moved pages kept the pool's MADV_HUGEPAGE: the data is the 4K baseline.
    // SAFETY: the range is the data's mapping.
    unsafe { libc::madvise(dst.cast(), data.map_len(), libc::MADV_NOHUGEPAGE) };
    Ok((data, got))
}

/// The pool's mapping less the 4K pages moved out of it under the data. Each move leaves a
/// hole in the pool's range, and the kernel may place another thread's new mapping in it
/// (a test running beside, an allocator's arena): unmapping the pool's whole range would
/// take that mapping too, and its owner would fault on memory it never freed. So this
/// unmaps what is left of the pool, run by run between the holes, and never a hole.
struct PoolLeft {
    base: *mut u8,
    /// Bytes of the pool's mapping.
    len: usize,
    /// The pages moved out (their index in the pool), in any order.
    moved: Vec<usize>,
}

impl Drop for PoolLeft {
    fn drop(&mut self) {
        self.moved.sort_unstable();
        let unmap = |from: usize, to: usize| {
            if to > from {
                // SAFETY: pages `from..to` are part of the pool's mapping, none of them moved
                // out, and nothing refers to them.
                unsafe {
                    let _ =
                        rustix::mm::munmap(self.base.add(from * PAGE).cast(), (to - from) * PAGE);
                }
            }
        };
        let mut start = 0;
        for &p in &self.moved {
            unmap(start, p);
            start = p + 1;
        }
        unmap(start, self.len / PAGE);
    }
}

/// `n` distinct numbers below `of`, in a random order from `seed` (a partial Fisher-Yates
/// shuffle with xorshift64*).
pub fn draw(of: u64, n: u64, seed: u64) -> Vec<u64> {
    let mut all: Vec<u64> = (0..of).collect();
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for i in 0..n.min(of) as usize {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let r = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
        let j = i + (r % (all.len() - i) as u64) as usize;
        all.swap(i, j);
    }
    all.truncate(n.min(of) as usize);
    all
}

fn max_map_count() -> Result<u64> {
    let text = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .context("reading /proc/sys/vm/max_map_count")?;
    text.trim()
        .parse()
        .with_context(|| format!("/proc/sys/vm/max_map_count holds `{}`", text.trim()))
}

/// `MemAvailable` from `/proc/meminfo`, bytes; `None` where the kernel does not give it.
pub(crate) fn mem_available() -> Result<Option<u64>> {
    let text = std::fs::read_to_string("/proc/meminfo").context("reading /proc/meminfo")?;
    Ok(crate::sysfs::meminfo_bytes(&text, "MemAvailable"))
}

#[cfg(test)]
mod tests {
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
}
