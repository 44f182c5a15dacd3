//! Page sizes, orders and byte counts, written as people write them (`4K`, `64K`, `2M`, `1G`).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// The smallest page size pagelab models.
pub const MIN_PAGE_SHIFT: u8 = 12;
/// The largest page size pagelab models.
pub const MAX_PAGE_SHIFT: u8 = 30;

/// A page size: a power of two from 4K to 1G.
///
/// Serialized as a number of bytes in JSON; parsed from and displayed as `4K`, `2M`, `1G`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PageSize {
    shift: u8,
}

/// An allocation order: the log2 of a number of base pages.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Order(pub u8);

/// A count of bytes, displayed as people write sizes.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Bytes(pub u64);

/// Why a page size or byte count was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageSizeError {
    /// The text is not a number with an optional K, M or G suffix.
    #[error("`{0}` is not a size: write a number with an optional K, M or G suffix, like 4K, 64K, 2M or 1G")]
    Syntax(String),
    /// The size is not a power of two within 4K..=1G.
    #[error("page size `{0}` is not allowed: a page size is a power of two from 4K to 1G (4K, 8K, 16K, ..., 2M, ..., 1G)")]
    NotAPageSize(String),
}

impl PageSize {
    /// 4 KiB.
    pub const K4: PageSize = PageSize { shift: 12 };
    /// 2 MiB.
    pub const M2: PageSize = PageSize { shift: 21 };
    /// 1 GiB.
    pub const G1: PageSize = PageSize { shift: 30 };

    /// A page size from its log2, if within 4K..=1G.
    pub fn from_shift(shift: u8) -> Option<PageSize> {
        (MIN_PAGE_SHIFT..=MAX_PAGE_SHIFT)
            .contains(&shift)
            .then_some(PageSize { shift })
    }

    /// A page size from a byte count, if it is a power of two within 4K..=1G.
    pub fn from_bytes(bytes: u64) -> Option<PageSize> {
        if bytes.is_power_of_two() {
            PageSize::from_shift(bytes.trailing_zeros() as u8)
        } else {
            None
        }
    }

    /// log2 of the size in bytes.
    #[inline]
    pub const fn shift(self) -> u32 {
        self.shift as u32
    }

    /// The size in bytes.
    #[inline]
    pub const fn bytes(self) -> u64 {
        1u64 << self.shift
    }

    /// The smallest page size, 4K: the unit of a [`crate::Pfn`].
    pub const MIN: PageSize = PageSize::K4;

    /// How many page sizes there are (4K..=1G): the length of a table indexed
    /// by [`PageSize::index`].
    pub const COUNT: usize = (MAX_PAGE_SHIFT - MIN_PAGE_SHIFT) as usize + 1;

    /// Every page size, smallest first.
    pub fn all() -> impl DoubleEndedIterator<Item = PageSize> {
        (MIN_PAGE_SHIFT..=MAX_PAGE_SHIFT).map(|shift| PageSize { shift })
    }

    /// This size's place among all sizes: 0 for 4K, 1 for 8K, ..., 18 for 1G.
    #[inline]
    pub fn index(self) -> usize {
        (self.shift - MIN_PAGE_SHIFT) as usize
    }

    /// The size at place `index` of [`PageSize::all`], if there is one.
    #[inline]
    pub fn from_index(index: usize) -> Option<PageSize> {
        u8::try_from(index)
            .ok()
            .and_then(|i| i.checked_add(MIN_PAGE_SHIFT))
            .and_then(PageSize::from_shift)
    }

    /// log2 of the number of 4K frames ([`crate::Pfn`]s) a page of this size spans.
    #[inline]
    pub fn frame_shift(self) -> u32 {
        (self.shift - MIN_PAGE_SHIFT) as u32
    }

    /// The number of 4K frames a page of this size spans.
    #[inline]
    pub fn frames(self) -> u64 {
        1u64 << self.frame_shift()
    }

    /// The allocation order of a page of this size: log2 of its 4K frames.
    #[inline]
    pub fn frame_order(self) -> Order {
        Order(self.shift - MIN_PAGE_SHIFT)
    }

    /// The page size of a block of `order` 4K frames, if within 4K..=1G.
    #[inline]
    pub fn of_order(order: Order) -> Option<PageSize> {
        order
            .0
            .checked_add(MIN_PAGE_SHIFT)
            .and_then(PageSize::from_shift)
    }

    /// The number of pages of this size in `bytes`, rounded down.
    #[inline]
    pub fn pages_in(self, bytes: u64) -> u64 {
        bytes >> self.shift
    }

    /// The order of this size relative to a smaller `base` size, if `base` divides it.
    pub fn order_over(self, base: PageSize) -> Option<Order> {
        (self.shift >= base.shift).then(|| Order(self.shift - base.shift))
    }
}

impl FromStr for PageSize {
    type Err = PageSizeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bytes = parse_bytes(s)?;
        PageSize::from_bytes(bytes).ok_or_else(|| PageSizeError::NotAPageSize(s.trim().to_string()))
    }
}

impl fmt::Display for PageSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&Bytes(self.bytes()), f)
    }
}

impl Serialize for PageSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.bytes())
    }
}

impl<'de> Deserialize<'de> for PageSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Num(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Num(n) => PageSize::from_bytes(n).ok_or_else(|| {
                serde::de::Error::custom(PageSizeError::NotAPageSize(n.to_string()))
            }),
            Raw::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// Parses a byte count written as `4096`, `4K`, `64k`, `2M`, `1G` or `1GiB`.
pub fn parse_bytes(s: &str) -> Result<u64, PageSizeError> {
    let t = s.trim();
    let err = || PageSizeError::Syntax(t.to_string());
    let lower = t.to_ascii_lowercase();
    let stripped = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower);
    let (digits, mult) = match stripped.chars().last() {
        Some('k') => (&stripped[..stripped.len() - 1], 1u64 << 10),
        Some('m') => (&stripped[..stripped.len() - 1], 1u64 << 20),
        Some('g') => (&stripped[..stripped.len() - 1], 1u64 << 30),
        Some('t') => (&stripped[..stripped.len() - 1], 1u64 << 40),
        _ => (stripped, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(err());
    }
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(err)
}

/// Parses a comma-separated list of page sizes (`4K,64K,2M`), sorted and without duplicates.
pub fn parse_page_sizes(s: &str) -> Result<Vec<PageSize>, PageSizeError> {
    let mut sizes = s
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(str::parse)
        .collect::<Result<Vec<PageSize>, _>>()?;
    if sizes.is_empty() {
        return Err(PageSizeError::Syntax(s.to_string()));
    }
    sizes.sort();
    sizes.dedup();
    Ok(sizes)
}

impl fmt::Display for Bytes {
    /// Exact multiples print as `64K`, `2M`; others with one decimal (`1.5M`); below 1K as `512B`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 4] = [
            (1 << 40, "T"),
            (1 << 30, "G"),
            (1 << 20, "M"),
            (1 << 10, "K"),
        ];
        let b = self.0;
        for (unit, name) in UNITS {
            if b >= unit {
                return if b.is_multiple_of(unit) {
                    f.pad(&format!("{}{}", b / unit, name))
                } else {
                    f.pad(&format!("{:.1}{}", b as f64 / unit as f64, name))
                };
            }
        }
        f.pad(&format!("{b}B"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_people_sizes() {
        assert_eq!("4K".parse::<PageSize>().unwrap().bytes(), 4096);
        assert_eq!("64k".parse::<PageSize>().unwrap().bytes(), 65536);
        assert_eq!("2M".parse::<PageSize>().unwrap(), PageSize::M2);
        assert_eq!("1GiB".parse::<PageSize>().unwrap(), PageSize::G1);
        assert_eq!("4096".parse::<PageSize>().unwrap(), PageSize::K4);
    }

    #[test]
    fn refuses_bad_sizes_with_reason() {
        let e = "3K".parse::<PageSize>().unwrap_err().to_string();
        assert!(
            e.contains("3K") && e.contains("power of two from 4K to 1G"),
            "{e}"
        );
        assert!(matches!(
            "2K".parse::<PageSize>(),
            Err(PageSizeError::NotAPageSize(_))
        ));
        assert!(matches!(
            "2G".parse::<PageSize>(),
            Err(PageSizeError::NotAPageSize(_))
        ));
        assert!(matches!(
            "x4K".parse::<PageSize>(),
            Err(PageSizeError::Syntax(_))
        ));
        assert!(matches!(
            "".parse::<PageSize>(),
            Err(PageSizeError::Syntax(_))
        ));
    }

    #[test]
    fn list_is_sorted_and_deduplicated() {
        let v = parse_page_sizes("2M,4K,64K,4K").unwrap();
        let names: Vec<String> = v.iter().map(|s| s.to_string()).collect();
        assert_eq!(names, ["4K", "64K", "2M"]);
    }

    #[test]
    fn bytes_display() {
        assert_eq!(Bytes(512).to_string(), "512B");
        assert_eq!(Bytes(4096).to_string(), "4K");
        assert_eq!(Bytes(3 << 19).to_string(), "1.5M");
        assert_eq!(Bytes(1 << 30).to_string(), "1G");
    }

    #[test]
    fn indices_orders_and_frames() {
        assert_eq!(PageSize::all().count(), PageSize::COUNT);
        for (i, s) in PageSize::all().enumerate() {
            assert_eq!(s.index(), i);
            assert_eq!(PageSize::from_index(i), Some(s));
            assert_eq!(PageSize::of_order(s.frame_order()), Some(s));
            assert_eq!(s.frames() * PageSize::MIN.bytes(), s.bytes());
        }
        assert_eq!(PageSize::from_index(PageSize::COUNT), None);
        assert_eq!(PageSize::M2.frame_order(), Order(9));
        assert_eq!(PageSize::K4.pages_in(10_000), 2);
    }

    proptest! {
        #[test]
        fn display_parse_round_trip(shift in 12u8..=30) {
            let s = PageSize::from_shift(shift).unwrap();
            prop_assert_eq!(s.to_string().parse::<PageSize>().unwrap(), s);
        }
    }
}
