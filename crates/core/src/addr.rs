//! Address and page-number newtypes.

use crate::PageSize;
use serde::{Deserialize, Serialize};

/// A virtual byte address.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct VirtAddr(pub u64);

/// A virtual page number: a [`VirtAddr`] divided by some [`PageSize`].
///
/// A `Vpn` does not remember its page size; the code that holds one also holds
/// the size it was computed with.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Vpn(pub u64);

/// A physical frame number, in units of the smallest page size of the model.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Pfn(pub u64);

impl VirtAddr {
    /// The page number of the page of `size` that holds this address.
    #[inline]
    pub fn vpn(self, size: PageSize) -> Vpn {
        Vpn(self.0 >> size.shift())
    }

    /// The address rounded down to a multiple of `size`.
    #[inline]
    pub fn align_down(self, size: PageSize) -> VirtAddr {
        VirtAddr(self.0 & !(size.bytes() - 1))
    }

    /// Whether the address is a multiple of `size`.
    #[inline]
    pub fn is_aligned(self, size: PageSize) -> bool {
        self.0 & (size.bytes() - 1) == 0
    }
}

impl Vpn {
    /// The first byte address of this page, given the size it was computed with.
    #[inline]
    pub fn start(self, size: PageSize) -> VirtAddr {
        VirtAddr(self.0 << size.shift())
    }
}

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
        assert_eq!(VirtAddr(0x2fff).align_down(s), VirtAddr(0x2000));
        assert!(VirtAddr(0x3000).is_aligned(s));
        assert!(!VirtAddr(0x3001).is_aligned(s));
        assert_eq!(Vpn(3).start(s), VirtAddr(0x3000));
    }
}
