//! The shape of a radix page table: levels, bits per level, leaf levels and
//! contiguous runs.

use super::PtError;
use pagelab_core::{BasePfn, PageSize, VirtAddr};
use serde::{Deserialize, Serialize};

/// The most levels a geometry may have (x86-64 with LA57 has five).
pub const MAX_LEVELS: usize = 5;

/// The largest frame number an entry can hold (48 bits).
const PFN_LIMIT: u64 = 1 << 48;

/// A geometry written out field by field (for presets and custom machines).
///
/// Levels are numbered from 1, the level whose entries map base pages, up to
/// the root; vectors are indexed by level minus one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GeometrySpec {
    /// Base page size: the size one level-1 entry maps.
    pub base: PageSize,
    /// Bits of virtual address each level translates, level 1 first.
    pub bits_per_level: Vec<u8>,
    /// Levels whose entries may be leaves (level 1 must be among them).
    pub leaf_levels: Vec<u8>,
    /// Per level, log2 of the longest contiguous run of leaf entries (0: no
    /// runs; levels not listed have none).
    #[serde(default)]
    pub max_run_shift: Vec<u8>,
    /// Bytes per entry (8 on x86-64, arm64 and POWER).
    pub entry_bytes: u8,
}

/// Why a [`GeometrySpec`] was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GeometryError {
    /// A field is out of range; the message says which and what is allowed.
    #[error("page-table geometry: field `{field}`: {why}")]
    Field {
        /// The field name.
        field: &'static str,
        /// What is allowed.
        why: String,
    },
}

/// Where a page of some size lives in the tree: the level of its entries and
/// how many consecutive entries (a power of two) it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Placement {
    /// Level of the leaf entries (1 = base-page entries).
    pub level: u8,
    /// log2 of the number of consecutive entries (0 = one entry).
    pub run_shift: u8,
}

/// The shape of a radix page table. Copyable, cheap to query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Geometry {
    base: PageSize,
    levels: u8,
    bits: [u8; MAX_LEVELS],
    leaf_mask: u8,
    max_run_shift: [u8; MAX_LEVELS],
    entry_bytes: u8,
}

impl Geometry {
    /// x86-64 with 4K pages: 4 levels of 512 8-byte entries, leaves of 4K, 2M
    /// and 1G, runs of 8K..1M (multi-size THP).
    pub fn x86_64() -> Geometry {
        Geometry::for_base(PageSize::K4)
    }

    /// x86-64 with five-level paging (LA57): as [`Geometry::x86_64`] with 57 bits.
    pub fn x86_64_la57() -> Geometry {
        let mut g = Geometry::x86_64();
        g.levels = 5;
        g.bits[4] = 9;
        g
    }

    /// arm64 with the 16K granule and 48-bit addresses: 11 bits per level, 4
    /// levels (the root has 2 entries), leaves of 16K and 32M, runs of 32K..16M.
    pub fn arm64_16k() -> Geometry {
        Geometry::for_base(PageSize::from_shift(14).unwrap_or(PageSize::K4))
    }

    /// arm64 with the 64K granule and 48-bit addresses: 13 bits per level, 3
    /// levels (the root has 64 entries), leaves of 64K and 512M, runs of 128K..256M.
    pub fn arm64_64k() -> Geometry {
        Geometry::for_base(PageSize::from_shift(16).unwrap_or(PageSize::K4))
    }

    /// POWER (Linux book3s64 radix MMU) with 64K pages, as Wong's (64KB pages on Power)
    /// machines run Linux today: 4 levels of 5, 9, 9 and 13 bits (52-bit
    /// addresses), leaves of 64K, 2M and 1G, runs of 128K..1M. Its level-1
    /// tables are only 256 bytes.
    pub fn power_64k() -> Geometry {
        Geometry {
            base: PageSize::from_shift(16).unwrap_or(PageSize::K4),
            levels: 4,
            bits: [5, 9, 9, 13, 0],
            leaf_mask: 0b111,
            max_run_shift: [4, 0, 0, 0, 0],
            entry_bytes: 8,
        }
    }

    /// The geometry Linux uses for a base page size, generalised: a table is one
    /// base page of 8-byte entries, levels are added until 48 bits are
    /// translated (the root takes the remainder), every level whose entry maps
    /// at most 1G may hold leaves, and level 1 allows runs up to half a table.
    /// For 4K, 16K and 64K this is x86-64, arm64 16K and arm64 64K exactly.
    pub fn for_base(base: PageSize) -> Geometry {
        let per = (base.shift() - 3) as u8;
        let mut left = 48u32.saturating_sub(base.shift()).max(1);
        let mut bits = [0u8; MAX_LEVELS];
        let mut levels = 0;
        while left > 0 && levels < MAX_LEVELS {
            let b = left.min(per as u32) as u8;
            bits[levels] = b;
            left -= b as u32;
            levels += 1;
        }
        let mut g = Geometry {
            base,
            levels: levels as u8,
            bits,
            leaf_mask: 0,
            max_run_shift: [0; MAX_LEVELS],
            entry_bytes: 8,
        };
        for level in 1..=g.levels {
            if g.entry_shift(level) <= 30 {
                g.leaf_mask |= 1 << (level - 1);
            }
        }
        g.max_run_shift[0] = (bits[0] - 1).min((30 - base.shift()) as u8);
        g
    }

    /// A geometry from an explicit spec, checked.
    pub fn from_spec(spec: &GeometrySpec) -> Result<Geometry, GeometryError> {
        let bad = |field, why: String| Err(GeometryError::Field { field, why });
        let n = spec.bits_per_level.len();
        if n == 0 || n > MAX_LEVELS {
            return bad("bits_per_level", format!("give 1 to {MAX_LEVELS} levels"));
        }
        if spec.bits_per_level.iter().any(|&b| !(1..=20).contains(&b)) {
            return bad(
                "bits_per_level",
                "each level translates 1 to 20 bits".into(),
            );
        }
        let total: u32 = spec.bits_per_level.iter().map(|&b| b as u32).sum();
        if total + spec.base.shift() > 57 {
            return bad(
                "bits_per_level",
                "base plus all levels must be at most 57 bits".into(),
            );
        }
        if !(1..=64).contains(&spec.entry_bytes) {
            return bad("entry_bytes", "1 to 64 bytes per entry".into());
        }
        let mut g = Geometry {
            base: spec.base,
            levels: n as u8,
            bits: [0; MAX_LEVELS],
            leaf_mask: 0,
            max_run_shift: [0; MAX_LEVELS],
            entry_bytes: spec.entry_bytes,
        };
        g.bits[..n].copy_from_slice(&spec.bits_per_level);
        for &l in &spec.leaf_levels {
            if l == 0 || l as usize > n || g.entry_shift(l) > 30 {
                return bad(
                    "leaf_levels",
                    format!("level {l} is not a level whose entry maps at most 1G"),
                );
            }
            g.leaf_mask |= 1 << (l - 1);
        }
        if g.leaf_mask & 1 == 0 {
            return bad(
                "leaf_levels",
                "level 1 (base pages) must be a leaf level".into(),
            );
        }
        if spec.max_run_shift.len() > n {
            return bad("max_run_shift", "at most one value per level".into());
        }
        for (i, &r) in spec.max_run_shift.iter().enumerate() {
            let level = i as u8 + 1;
            let ok = r == 0
                || (g.is_leaf_level(level)
                    && r < g.bits[i]
                    && g.entry_shift(level) + r as u32 <= 30);
            if !ok {
                return bad("max_run_shift", format!("level {level}: a run needs a leaf level, must stay inside one table and map at most 1G"));
            }
            g.max_run_shift[i] = r;
        }
        Ok(g)
    }

    /// The base page size.
    pub fn base(&self) -> PageSize {
        self.base
    }

    /// Number of levels.
    pub fn levels(&self) -> u8 {
        self.levels
    }

    /// Bits translated at `level` (0 for a level that does not exist).
    pub fn bits(&self, level: u8) -> u8 {
        match level {
            1..=5 if level <= self.levels => self.bits[level as usize - 1],
            _ => 0,
        }
    }

    /// Entries in a table at `level`.
    pub fn entries(&self, level: u8) -> u64 {
        1 << self.bits(level)
    }

    /// Bytes per entry.
    pub fn entry_bytes(&self) -> u64 {
        self.entry_bytes as u64
    }

    /// Bytes of one table at `level`.
    pub fn table_bytes(&self, level: u8) -> u64 {
        self.entries(level) * self.entry_bytes()
    }

    /// log2 of the bytes one entry at `level` maps.
    pub fn entry_shift(&self, level: u8) -> u32 {
        let below: u32 = self.bits[..(level.max(1) as usize - 1).min(MAX_LEVELS)]
            .iter()
            .map(|&b| b as u32)
            .sum();
        self.base.shift() + below
    }

    /// log2 of the bytes one table at `level` maps.
    pub fn table_shift(&self, level: u8) -> u32 {
        self.entry_shift(level) + self.bits(level) as u32
    }

    /// Bits of virtual address translated.
    pub fn va_bits(&self) -> u32 {
        self.table_shift(self.levels)
    }

    /// Whether entries at `level` may be leaves.
    pub fn is_leaf_level(&self, level: u8) -> bool {
        (1..=self.levels).contains(&level) && self.leaf_mask & (1 << (level - 1)) != 0
    }

    /// The leaf size at `level`, if it is a leaf level.
    pub fn leaf_size(&self, level: u8) -> Option<PageSize> {
        if self.is_leaf_level(level) {
            PageSize::from_shift(self.entry_shift(level) as u8)
        } else {
            None
        }
    }

    /// log2 of the longest contiguous run at `level`.
    pub fn max_run_shift(&self, level: u8) -> u8 {
        if (1..=self.levels).contains(&level) {
            self.max_run_shift[level as usize - 1]
        } else {
            0
        }
    }

    /// Where a page of `size` goes: at the highest leaf level whose entry is
    /// not larger, as a run if it is larger. `None` if the geometry cannot map it.
    pub fn placement(&self, size: PageSize) -> Option<Placement> {
        let level = (1..=self.levels)
            .rev()
            .find(|&l| self.is_leaf_level(l) && self.entry_shift(l) <= size.shift())?;
        let run_shift = (size.shift() - self.entry_shift(level)) as u8;
        (run_shift <= self.max_run_shift(level)).then_some(Placement { level, run_shift })
    }

    /// Every size this geometry can map, smallest first.
    pub fn sizes(&self) -> Vec<PageSize> {
        (self.base.shift()..=30)
            .filter_map(|s| PageSize::from_shift(s as u8))
            .filter(|&s| self.placement(s).is_some())
            .collect()
    }

    /// The highest leaf level below `level` (level 1 is always one).
    pub fn lower_leaf_level(&self, level: u8) -> u8 {
        (1..level)
            .rev()
            .find(|&l| self.is_leaf_level(l))
            .unwrap_or(1)
    }

    /// What splitting a page of `size` yields: the piece size and count, or
    /// `None` for a base page (or a size the geometry cannot map).
    pub fn split_of(&self, size: PageSize) -> Option<(PageSize, u64)> {
        let p = self.placement(size)?;
        let to_level = if p.run_shift > 0 {
            p.level
        } else if p.level > 1 {
            self.lower_leaf_level(p.level)
        } else {
            return None;
        };
        let to = PageSize::from_shift(self.entry_shift(to_level) as u8)?;
        Some((to, 1 << (size.shift() - to.shift())))
    }

    /// Checks the arguments of a map or unmap in the order the contract gives.
    pub fn check_page(
        &self,
        va: VirtAddr,
        pfn: BasePfn,
        size: PageSize,
    ) -> Result<Placement, PtError> {
        let placement = self.placement(size).ok_or(PtError::UnsupportedSize {
            size,
            base: self.base,
        })?;
        if !va.is_aligned(size) {
            return Err(PtError::Misaligned { va, size });
        }
        if va.0 >> self.va_bits() != 0 {
            return Err(PtError::OutOfRange {
                va,
                size,
                va_bits: self.va_bits(),
            });
        }
        let frames = 1u64 << (size.shift() - self.base.shift());
        if !pfn.0.is_multiple_of(frames) || pfn.0 >= PFN_LIMIT {
            return Err(PtError::BadPfn { pfn, size });
        }
        Ok(placement)
    }

    /// Checks a range for protect: whole base pages inside the address space.
    /// Returns the exclusive end.
    pub fn check_range(&self, va: VirtAddr, len: u64) -> Result<u64, PtError> {
        let mask = self.base.bytes() - 1;
        let end = va.0.checked_add(len);
        match end {
            Some(end) if va.0 & mask == 0 && len & mask == 0 && end <= 1u64 << self.va_bits() => {
                Ok(end)
            }
            _ => Err(PtError::BadRange { va, len }),
        }
    }

    /// The frame count of a page of `size`, in base frames.
    pub fn frames(&self, size: PageSize) -> u64 {
        1 << (size.shift().saturating_sub(self.base.shift()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sz(s: &str) -> PageSize {
        s.parse().unwrap()
    }

    #[test]
    fn named_geometries() {
        let x = Geometry::x86_64();
        assert_eq!((x.levels(), x.va_bits(), x.table_bytes(1)), (4, 48, 4096));
        assert_eq!(x.leaf_size(2), Some(sz("2M")));
        assert_eq!(x.leaf_size(3), Some(sz("1G")));
        assert_eq!(x.leaf_size(4), None);
        let sizes: Vec<String> = x.sizes().iter().map(|s| s.to_string()).collect();
        assert_eq!(sizes.join(","), "4K,8K,16K,32K,64K,128K,256K,512K,1M,2M,1G");
        let a16 = Geometry::arm64_16k();
        assert_eq!((a16.levels(), a16.va_bits(), a16.entries(4)), (4, 48, 2));
        assert_eq!(a16.leaf_size(2), Some(sz("32M")));
        assert_eq!(
            a16.placement(sz("16M")),
            Some(Placement {
                level: 1,
                run_shift: 10
            })
        );
        let a64 = Geometry::arm64_64k();
        assert_eq!((a64.levels(), a64.va_bits(), a64.entries(3)), (3, 48, 64));
        assert_eq!(a64.leaf_size(2), Some(sz("512M")));
        assert_eq!(a64.placement(sz("1G")), None);
        let p = Geometry::power_64k();
        assert_eq!((p.va_bits(), p.table_bytes(1)), (52, 256));
        assert_eq!(p.sizes().len(), 7); // 64K..1M, 2M, 1G
        assert_eq!(Geometry::x86_64_la57().va_bits(), 57);
    }

    #[test]
    fn splits_and_checks() {
        let x = Geometry::x86_64();
        assert_eq!(x.split_of(sz("1G")), Some((sz("2M"), 512)));
        assert_eq!(x.split_of(sz("64K")), Some((sz("4K"), 16)));
        assert_eq!(x.split_of(sz("4K")), None);
        assert!(matches!(
            x.check_page(VirtAddr(0x1000), BasePfn(0), sz("8K")),
            Err(PtError::Misaligned { .. })
        ));
        assert!(matches!(
            x.check_page(VirtAddr(0), BasePfn(1), sz("8K")),
            Err(PtError::BadPfn { .. })
        ));
        assert!(matches!(
            x.check_page(VirtAddr(1 << 48), BasePfn(0), sz("4K")),
            Err(PtError::OutOfRange { .. })
        ));
        assert!(matches!(
            x.check_page(VirtAddr(0), BasePfn(0), sz("4M")),
            Err(PtError::UnsupportedSize { .. })
        ));
        assert!(x.check_range(VirtAddr(0x1000), 0x1001).is_err());
        assert_eq!(x.check_range(VirtAddr(0x1000), 0x1000), Ok(0x2000));
    }

    #[test]
    fn spec_is_checked() {
        let spec = GeometrySpec {
            base: PageSize::K4,
            bits_per_level: vec![9, 9, 9, 9],
            leaf_levels: vec![1, 2],
            max_run_shift: vec![4],
            entry_bytes: 8,
        };
        let g = Geometry::from_spec(&spec).unwrap();
        assert_eq!(g.sizes().last(), Some(&PageSize::M2));
        let bad = GeometrySpec {
            leaf_levels: vec![2],
            ..spec.clone()
        };
        assert!(Geometry::from_spec(&bad).is_err());
        let bad = GeometrySpec {
            max_run_shift: vec![9],
            ..spec
        };
        assert!(Geometry::from_spec(&bad).is_err());
    }
}
