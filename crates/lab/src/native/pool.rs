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
//! A probe of many pooled kernels draws them all from one [`Reserve`] of its largest pool
//! ([`lending`]), faulted in once, each kernel's pages given back when it ends.
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
    if let Some(reserve) = LENDER.with(|l| l.borrow().clone()) {
        if reserve.len as u64 >= pool {
            return reserve.lend(bytes, pool, seed);
        }
    }
    // A pool of its own: a reserve drawn from once. Its range stays whole while the pages
    // move out (`MREMAP_DONTUNMAP`), so dropping it at the return unmaps exactly what is left
    // of it, and never a mapping another thread has made since.
    let own = Reserve::make(pool, &format!("pool={}", Bytes(pool)))?;
    let got = own.blocks(pool)?;
    let data = draw_under_data(own.base, pool, bytes, seed, &mut Vec::new())?;
    Ok((data, got))
}

/// `bytes` as a length, where they are at most three quarters of the memory available
/// (where the kernel says); `what` names them in the error.
fn fits_memory(bytes: u64, what: &str) -> Result<usize> {
    if let Some(avail) = mem_available()? {
        if bytes > avail / 4 * 3 {
            bail!(
                "{what} is more than three quarters of the memory available ({})",
                Bytes(avail)
            );
        }
    }
    usize::try_from(bytes).with_context(|| format!("{what} does not fit this address space"))
}

/// Maps `len` bytes advised for 2M pages and writes every 4K page of them, so that the
/// kernel faults them in as 2M pages where it can; the caller owns the mapping from here.
fn fault_in(len: usize) -> Result<*mut u8> {
    let mut src = Region::new(len, Advice::HugePage)?;
    let base = src.as_mut_ptr();
    std::mem::forget(src);
    for off in (0..len).step_by(PAGE) {
        // SAFETY: off < len, inside the mapping, which no Rust reference covers.
        unsafe { base.add(off).write_volatile(1) };
    }
    Ok(base)
}

/// Collapses the `pool` bytes at `base` into 2M pages, checks that their frames fell in
/// at most twice their blocks, and splits every 2M mapping into 4K entries (the frames
/// stay); returns the 2M blocks the frames fell in.
fn collapse_and_split(base: *mut u8, pool: u64) -> Result<u64> {
    let len = pool as usize;
    // SAFETY: the range is exactly the pool's mapping. Its result is checked below, by the
    // frames it left, not by its return: a kernel without it leaves what THP gave.
    unsafe { libc::madvise(base.cast(), len, MADV_COLLAPSE) };
    let got = blocks_of(base, pool)?;
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
    // From here the pool is 4K pages, as the data they go under is: khugepaged leaves it
    // alone, and a page moved out and back has its neighbours' flags again, so that the
    // kernel merges its mapping with theirs (else a reserve that lent many pages would be
    // a mapping for each, up to vm.max_map_count).
    // SAFETY: the range is exactly the pool's mapping.
    unsafe { libc::madvise(base.cast(), len, libc::MADV_NOHUGEPAGE) };
    Ok(got)
}

/// The 2M blocks the frames of the `pool` bytes at `base` fell in, as pagemap shows them.
/// Where the kernel could not collapse a block, its frames may be contiguous but not
/// aligned to 2M, straddling two blocks: the pool's blocks are counted as they came.
fn blocks_of(base: *mut u8, pool: u64) -> Result<u64> {
    let blocks = pool / REGION_ALIGN as u64;
    match crate::probe::frames_of(base as u64, pool)? {
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
        Some(f) => Ok(f.blocks),
    }
}

/// A new data region of `bytes` whose 4K pages are pages of the first `pool` bytes at
/// `base`, drawn with `seed` and moved under it with `mremap`, each one's index in the pool
/// added to `moved` as it goes. Each moved page's place in the pool is left mapped, empty
/// (`MREMAP_DONTUNMAP`), so that the pool's range has no hole another mapping could take
/// before the page comes back ([`Lent`]) or the pool is unmapped whole.
fn draw_under_data(
    base: *mut u8,
    pool: u64,
    bytes: u64,
    seed: u64,
    moved: &mut Vec<usize>,
) -> Result<Region> {
    let pages = bytes.div_ceil(PAGE as u64);
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
        unsafe { move_page(base.add(p as usize * PAGE), dst.add(j * PAGE)) }.map_err(|e| {
            anyhow::anyhow!(
                "mremap of the pool's page {p} under the data's page {j}: {e} (moving a page \
                 out and leaving its place mapped, MREMAP_DONTUNMAP, needs Linux 5.7)"
            )
        })?;
        moved.push(p as usize);
    }
    // The data is the 4K baseline (as the pool's pages are since they were split).
    // SAFETY: the range is the data's mapping.
    unsafe { libc::madvise(dst.cast(), data.map_len(), libc::MADV_NOHUGEPAGE) };
    Ok(data)
}

/// Moves the 4K page at `from` to `to` (its frame with it), leaving `from` mapped and empty.
///
/// # Safety
/// `from` and `to` are page-aligned pages of private anonymous mappings of this process
/// that no Rust reference covers.
unsafe fn move_page(from: *mut u8, to: *mut u8) -> std::io::Result<()> {
    use rustix::mm::MremapFlags;
    let flags = MremapFlags::MAYMOVE | MremapFlags::DONTUNMAP;
    // SAFETY: as the caller promises.
    unsafe { rustix::mm::mremap_fixed(from.cast(), PAGE, PAGE, flags, to.cast()) }
        .map(|_| ())
        .map_err(std::io::Error::from)
}

thread_local! {
    /// The reserve [`lending`] lends pooled kernels' pages from on this thread.
    static LENDER: std::cell::RefCell<Option<std::rc::Rc<Reserve>>> =
        const { std::cell::RefCell::new(None) };
}

/// Whole 2M blocks faulted in once and lent to pooled kernels one after another
/// ([`lending`]), so that a probe of many pooled runs clears its largest pool once instead
/// of once a run (the block probe's runs cleared about 39G of pages for pools of at most
/// 8G). A kernel asking for `pool=SIZE` gets its pages drawn from the reserve's first SIZE
/// bytes, whole blocks as a pool of its own would be, and gives them back to their places
/// when its data is unmapped; the reserve's range stays mapped throughout (moved pages
/// leave their places empty, `MREMAP_DONTUNMAP`), so no other mapping can take a place.
pub struct Reserve {
    base: *mut u8,
    len: usize,
    /// Set where a page could not be given back: the reserve then lends no more.
    broken: std::cell::Cell<bool>,
    /// The 2M blocks the frames of the first SIZE bytes fall in, by SIZE, as counted so far:
    /// the frames never change, so pagemap is read once a size.
    blocks: std::cell::RefCell<Vec<(u64, u64)>>,
}

impl Reserve {
    /// `bytes` of 2M blocks, collapsed and split into 4K entries, their frames checked.
    ///
    /// # Errors
    /// As a pool of [`pooled`]: not whole blocks, more than three quarters of the memory
    /// available, pagemap hidden, frames in more than twice its blocks.
    pub fn new(bytes: u64) -> Result<Reserve> {
        Reserve::make(bytes, &format!("a reserve of {}", Bytes(bytes)))
    }

    /// As [`Reserve::new`], `what` naming it in the errors.
    fn make(bytes: u64, what: &str) -> Result<Reserve> {
        if bytes == 0 || !bytes.is_multiple_of(REGION_ALIGN as u64) {
            bail!("{what} is not whole 2M blocks");
        }
        let len = fits_memory(bytes, what)?;
        // From here the mapping is the reserve's, unmapped by its drop whatever fails.
        let reserve = Reserve {
            base: fault_in(len)?,
            len,
            broken: std::cell::Cell::new(false),
            blocks: std::cell::RefCell::new(Vec::new()),
        };
        let got = collapse_and_split(reserve.base, bytes)?;
        reserve.blocks.borrow_mut().push((bytes, got));
        Ok(reserve)
    }

    /// The 2M blocks the frames of the first `pool` bytes fall in ([`blocks_of`]), counted
    /// once a size.
    fn blocks(&self, pool: u64) -> Result<u64> {
        if let Some(&(_, got)) = self.blocks.borrow().iter().find(|&&(size, _)| size == pool) {
            return Ok(got);
        }
        let got = blocks_of(self.base, pool)?;
        self.blocks.borrow_mut().push((pool, got));
        Ok(got)
    }

    /// Data of `bytes` on pages drawn with `seed` from the first `pool` bytes, lent until
    /// the region is dropped; the blocks those bytes' frames fall in.
    fn lend(self: std::rc::Rc<Self>, bytes: u64, pool: u64, seed: u64) -> Result<(Region, u64)> {
        if self.broken.get() {
            bail!(
                "pool=: a page lent from the reserve could not be given back, so it lends no more"
            );
        }
        let got = self.blocks(pool)?;
        let mut pages = Vec::new();
        let drawn = draw_under_data(self.base, pool, bytes, seed, &mut pages);
        let mut data = match drawn {
            Ok(data) => data,
            Err(e) => {
                // The pages moved before the failure are unmapped with the data; their
                // places in the reserve stay empty, so it lends no more.
                self.broken.set(!pages.is_empty());
                return Err(e);
            }
        };
        data.lent = Some(Lent {
            reserve: self,
            pages,
        });
        Ok((data, got))
    }
}

impl Drop for Reserve {
    fn drop(&mut self) {
        // SAFETY: the range is exactly the reserve's mapping (never holed: pages lent out
        // left their places mapped), and no region holds a page of it (each holds an `Rc`).
        unsafe {
            let _ = rustix::mm::munmap(self.base.cast(), self.len);
        }
    }
}

/// Runs `f` with pooled kernels on this thread drawing from `reserve` (for pools no larger
/// than it; a larger one is made as before), and unmaps the reserve after, however `f`
/// ends.
pub fn lending<T>(reserve: Reserve, f: impl FnOnce() -> T) -> T {
    struct Unset;
    impl Drop for Unset {
        fn drop(&mut self) {
            LENDER.with(|l| l.borrow_mut().take());
        }
    }
    LENDER.with(|l| *l.borrow_mut() = Some(std::rc::Rc::new(reserve)));
    let _unset = Unset;
    f()
}

/// The reserve's pages under a data region, each given back to its place when the region
/// is dropped ([`Lent::give_back`]).
#[derive(Debug)]
pub(crate) struct Lent {
    reserve: std::rc::Rc<Reserve>,
    /// Page `j` of the data is the reserve's page `pages[j]`.
    pages: Vec<usize>,
}

impl std::fmt::Debug for Reserve {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Reserve({})", Bytes(self.len as u64))
    }
}

impl Lent {
    /// Moves the data's pages at `data` back to their places in the reserve, leaving the
    /// data's range mapped (empty) for its own unmapping. A page that cannot go back marks
    /// the reserve broken.
    pub(crate) fn give_back(&self, data: *mut u8) {
        for (j, &p) in self.pages.iter().enumerate() {
            // SAFETY: page j of the data is a 4K page of its mapping, p's place in the
            // reserve one of the reserve's (mapped, empty since it was lent); the region
            // being dropped, nothing refers to either.
            let back = unsafe { move_page(data.add(j * PAGE), self.reserve.base.add(p * PAGE)) };
            if back.is_err() {
                self.reserve.broken.set(true);
            }
        }
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
mod tests;
