//! Address, page-number and frame newtypes, and the conversions between them.
//!
//! Every conversion between a byte address, a page number and a frame lives
//! here, so that no other crate shifts by a page size by hand.

use crate::PageSize;
use serde::{Deserialize, Serialize};
use std::ops::{Add, AddAssign, Sub};

/// A virtual byte address.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
#[repr(transparent)]
pub struct VirtAddr(pub u64);

/// A virtual page number: a [`VirtAddr`] divided by some [`PageSize`].
///
/// A `Vpn` does not remember its page size; the code that holds one also holds
/// the size it was computed with.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
#[repr(transparent)]
pub struct Vpn(pub u64);

/// A physical frame number: a physical byte address divided by 4K, the
/// smallest page size, whatever base page size the modelled machine uses.
/// The physical allocator hands out and takes back `Pfn`s.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
#[repr(transparent)]
pub struct Pfn(pub u64);

/// A frame number in units of a page table's base page size (a physical byte
/// address divided by the base page size): what a page-table entry holds.
///
/// Like a [`Vpn`], it does not remember its size: the page table that holds
/// one knows its base page size. [`Pfn::to_base`] and [`BasePfn::to_pfn`]
/// convert.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
#[repr(transparent)]
pub struct BasePfn(pub u64);

impl VirtAddr {
    /// The page number of the page of `size` that holds this address.
    #[inline]
    pub fn vpn(self, size: PageSize) -> Vpn {
        Vpn(self.0 >> size.shift())
    }

    /// The number of the first page of `size` that starts at or after this
    /// address: one past the last page of a range ending here.
    #[inline]
    pub fn vpn_ceil(self, size: PageSize) -> Vpn {
        Vpn(self.0.div_ceil(size.bytes()))
    }

    /// The address rounded down to a multiple of `size`.
    #[inline]
    pub fn align_down(self, size: PageSize) -> VirtAddr {
        VirtAddr(self.0 & !(size.bytes() - 1))
    }

    /// The address rounded up to a multiple of `size` (saturating at the top
    /// of the address space, where no page of `size` starts).
    #[inline]
    pub fn align_up(self, size: PageSize) -> VirtAddr {
        VirtAddr(self.0.saturating_add(size.bytes() - 1) & !(size.bytes() - 1))
    }

    /// The address rounded up to a multiple of `size`, or `None` when no
    /// page of `size` starts at or after it.
    #[inline]
    pub fn checked_align_up(self, size: PageSize) -> Option<VirtAddr> {
        self.0.checked_next_multiple_of(size.bytes()).map(VirtAddr)
    }

    /// Whether the address is a multiple of `size`.
    #[inline]
    pub fn is_aligned(self, size: PageSize) -> bool {
        self.0 & (size.bytes() - 1) == 0
    }

    /// The byte offset of the address within its page of `size`.
    #[inline]
    pub fn page_offset(self, size: PageSize) -> u64 {
        self.0 & (size.bytes() - 1)
    }

    /// The address `bytes` further on, or `None` past the top of the address space.
    #[inline]
    pub fn checked_add(self, bytes: u64) -> Option<VirtAddr> {
        self.0.checked_add(bytes).map(VirtAddr)
    }

    /// The address `bytes` further on, stopping at the top of the address space.
    #[inline]
    pub fn saturating_add(self, bytes: u64) -> VirtAddr {
        VirtAddr(self.0.saturating_add(bytes))
    }

    /// The last byte of a reference of `size` bytes from here (this address for a
    /// zero-size reference), stopping at the top of the address space.
    #[inline]
    pub fn last_byte_of(self, size: u32) -> VirtAddr {
        self.saturating_add(u64::from(size.max(1) - 1))
    }

    /// The address `bytes` before, stopping at zero.
    #[inline]
    pub fn saturating_sub(self, bytes: u64) -> VirtAddr {
        VirtAddr(self.0.saturating_sub(bytes))
    }
}

impl Vpn {
    /// The first byte address of this page, given the size it was computed with.
    #[inline]
    pub fn start(self, size: PageSize) -> VirtAddr {
        VirtAddr(self.0 << size.shift())
    }
}

impl Pfn {
    /// log2 of the bytes of one frame: 12, a 4K frame.
    pub const SHIFT: u32 = crate::size::MIN_PAGE_SHIFT as u32;
    /// The bytes of one frame: 4K.
    pub const BYTES: u64 = 1 << Pfn::SHIFT;

    /// The number of whole 4K frames in `bytes`.
    #[inline]
    pub fn count_in(bytes: u64) -> u64 {
        bytes >> Pfn::SHIFT
    }

    /// The frame in units of base pages of `base` that holds this 4K frame.
    #[inline]
    pub fn to_base(self, base: PageSize) -> BasePfn {
        BasePfn(self.0 >> base.frame_shift())
    }
}

impl BasePfn {
    /// The first 4K frame of this base-page frame, given the page table's base size.
    #[inline]
    pub fn to_pfn(self, base: PageSize) -> Pfn {
        Pfn(self.0 << base.frame_shift())
    }
}

/// `n + bytes`, `n + pages` or `n + frames` for the type's own unit, and the
/// distance between two values in that unit.
macro_rules! unit_arithmetic {
    ($($t:ident: $unit:literal),*) => {$(
        impl Add<u64> for $t {
            type Output = $t;
            #[doc = concat!("The value ", $unit, " further on.")]
            #[inline]
            fn add(self, n: u64) -> $t {
                $t(self.0 + n)
            }
        }
        impl AddAssign<u64> for $t {
            #[inline]
            fn add_assign(&mut self, n: u64) {
                self.0 += n;
            }
        }
        impl Sub for $t {
            type Output = u64;
            #[doc = concat!("The distance in ", $unit, " from `other` up to `self`.")]
            #[inline]
            fn sub(self, other: $t) -> u64 {
                self.0 - other.0
            }
        }
    )*};
}

unit_arithmetic!(VirtAddr: "bytes", Vpn: "pages", Pfn: "4K frames", BasePfn: "base-page frames");

macro_rules! lower_hex {
    ($($t:ident),*) => {$(
        impl std::fmt::LowerHex for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::LowerHex::fmt(&self.0, f)
            }
        }
    )*};
}

lower_hex!(VirtAddr, Vpn, Pfn, BasePfn);

impl std::fmt::Display for VirtAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vpn_and_alignment() {
        let s = PageSize::from_bytes(4096).unwrap();
        assert_eq!(VirtAddr(0x2fff).vpn(s), Vpn(2));
        assert_eq!(VirtAddr(0x2001).vpn_ceil(s), Vpn(3));
        assert_eq!(VirtAddr(0x2000).vpn_ceil(s), Vpn(2));
        assert_eq!(VirtAddr(0x2fff).align_down(s), VirtAddr(0x2000));
        assert!(VirtAddr(0x3000).is_aligned(s));
        assert!(!VirtAddr(0x3001).is_aligned(s));
        assert_eq!(Vpn(3).start(s), VirtAddr(0x3000));
        assert_eq!(VirtAddr(0x2001).align_up(s), VirtAddr(0x3000));
        assert_eq!(VirtAddr(u64::MAX).align_up(s), VirtAddr(!0xfff));
        assert_eq!(VirtAddr(0x2fff).page_offset(s), 0xfff);
        assert_eq!(VirtAddr(0x1000) + 0x20, VirtAddr(0x1020));
        assert_eq!(VirtAddr(0x1020) - VirtAddr(0x1000), 0x20);
        assert_eq!(VirtAddr(u64::MAX).checked_add(1), None);
        assert_eq!(VirtAddr(0x2001).checked_align_up(s), Some(VirtAddr(0x3000)));
        assert_eq!(VirtAddr(u64::MAX).checked_align_up(s), None);
        assert_eq!(VirtAddr(5).saturating_sub(6), VirtAddr(0));
    }

    #[test]
    fn frames_convert_through_the_base_size() {
        let k16 = PageSize::from_bytes(16384).unwrap();
        assert_eq!(Pfn(12).to_base(k16), BasePfn(3));
        assert_eq!(BasePfn(3).to_pfn(k16), Pfn(12));
        assert_eq!(Pfn(12).to_base(PageSize::K4), BasePfn(12));
        assert_eq!(BasePfn(1).to_pfn(PageSize::M2), Pfn(512));
    }
}
