//! Anonymous private memory for a kernel's data: 2M-aligned, advised, unmapped on drop.

use super::Advice;
use anyhow::{bail, Result};

/// The alignment of every region (and the granule its mapping is rounded up to): one PMD.
pub const REGION_ALIGN: usize = 2 << 20;

/// A 2M-aligned anonymous private mapping whose first `len` bytes a kernel uses.
///
/// The mapping is `len` rounded up to a multiple of 2M, so that even a 128K heap lies
/// in a range where a 2M THP may be placed (as the paper's 4M-page heap did); only the
/// first `len` bytes are ever touched. Alignment comes from over-allocating by 2M and
/// unmapping the unaligned head and the tail.
#[derive(Debug)]
pub struct Region {
    base: *mut u8,
    len: usize,
    map_len: usize,
    /// Pages lent from a [`super::pool::Reserve`], given back before the unmapping.
    pub(super) lent: Option<super::pool::Lent>,
}

impl Region {
    /// Maps `len` bytes (at least 1) and applies `advice` to the whole mapping.
    ///
    /// # Errors
    /// When `len` is zero or too large, or mmap/madvise fail (the error says which, with errno).
    pub fn new(len: usize, advice: Advice) -> Result<Region> {
        if len == 0 {
            bail!("cannot map an empty region");
        }
        let Some(map_len) = len.checked_next_multiple_of(REGION_ALIGN) else {
            bail!("a region of {len} bytes is too large to map");
        };
        let total = map_len + REGION_ALIGN;
        use rustix::mm::{MapFlags, ProtFlags};
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing
        // aliases nothing.
        let raw = unsafe {
            rustix::mm::mmap_anonymous(
                std::ptr::null_mut(),
                total,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE,
            )
        }
        .map_err(|e| {
            anyhow::anyhow!("mmap of {total} bytes failed: {}", std::io::Error::from(e))
        })?;
        let raw = raw as usize;
        let base = raw.next_multiple_of(REGION_ALIGN);
        let head = base - raw;
        let tail = total - head - map_len;
        // SAFETY: both ranges lie inside the mapping just made and nothing refers to them;
        // a failure only leaves the slack mapped.
        unsafe {
            if head > 0 {
                let _ = rustix::mm::munmap(raw as *mut std::ffi::c_void, head);
            }
            if tail > 0 {
                let _ = rustix::mm::munmap((base + map_len) as *mut std::ffi::c_void, tail);
            }
        }
        let region = Region {
            base: base as *mut u8,
            len,
            map_len,
            lent: None,
        };
        // Never shared with a child: a fork (a test beside it that starts a program through
        // `pre_exec`) would otherwise write-protect its pages for copy-on-write, and the
        // kernel's next write to each would fault, counted as the loop's own.
        // SAFETY: the range is exactly our mapping, which holds no Rust object yet.
        unsafe {
            rustix::mm::madvise(
                base as *mut std::ffi::c_void,
                map_len,
                rustix::mm::Advice::LinuxDontFork,
            )
        }
        .map_err(|e| anyhow::anyhow!("madvise(DONTFORK) failed: {}", std::io::Error::from(e)))?;
        if let Some(advice_flag) = advice.madvise_flag() {
            // SAFETY: the range is exactly our mapping, which holds no Rust object yet.
            let rc =
                unsafe { rustix::mm::madvise(base as *mut std::ffi::c_void, map_len, advice_flag) };
            if let Err(e) = rc {
                bail!(
                    "madvise({advice}) of {map_len} bytes failed: {} (is THP in this kernel?)",
                    std::io::Error::from(e)
                );
            }
        }
        Ok(region)
    }

    /// The bytes a kernel uses (the mapping may be larger).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a region holds at least one byte.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The bytes mapped: [`Region::len`] rounded up to whole 2M.
    pub fn map_len(&self) -> usize {
        self.map_len
    }

    /// The first byte, 2M-aligned.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.base
    }

    /// The used bytes as `T`s (as many whole ones as fit). Untouched anonymous memory
    /// reads as zero, which is a valid `T` for the plain numbers the kernels use.
    pub fn as_mut_slice<T: Plain>(&mut self) -> &mut [T] {
        // SAFETY: the mapping is readable and writable, 2M-aligned (enough for any T),
        // zero-filled (a valid T by the `Plain` contract) and borrowed mutably from self.
        unsafe {
            std::slice::from_raw_parts_mut(self.base as *mut T, self.len / std::mem::size_of::<T>())
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if let Some(lent) = self.lent.take() {
            lent.give_back(self.base);
        }
        // SAFETY: the mapping is ours and no borrow of it outlives self.
        unsafe {
            let _ = rustix::mm::munmap(self.base as *mut std::ffi::c_void, self.map_len);
        }
    }
}

/// Types for which all-zero bytes are a valid value.
///
/// # Safety
/// Implement only for types where every bit pattern of zeros is a valid value.
pub unsafe trait Plain: Copy {}
// SAFETY: zero is a valid u64, usize and f64.
unsafe impl Plain for u64 {}
// SAFETY: as above.
unsafe impl Plain for usize {}
// SAFETY: as above.
unsafe impl Plain for f64 {}
