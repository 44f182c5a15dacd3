//! The radix page table against the BTreeMap reference: random sequences of
//! map, unmap, protect, split and walk with mixed sizes, on several
//! geometries. Every result (errors included), every mapping, every walk at
//! the mappings' edges and the table memory must agree; the reference counts
//! tables from address prefixes, independently of any tree.

use pagelab_core::{BasePfn, PageSize, VirtAddr};
use pagelab_mm::pagetable::{
    Geometry, GeometrySpec, PageTable, PteFlags, RadixPageTable, ReferencePageTable,
};
use proptest::prelude::*;

fn geometries() -> Vec<Geometry> {
    // A small five-level tree (8 entries per table) whose leaf levels skip
    // level 2, so a 256K leaf splits into a table of tables of 4K pages, and
    // with runs at two levels.
    let small = GeometrySpec {
        base: PageSize::K4,
        bits_per_level: vec![3, 3, 3, 3, 3],
        leaf_levels: vec![1, 3, 4],
        max_run_shift: vec![2, 0, 1],
        entry_bytes: 8,
    };
    vec![
        Geometry::x86_64(),
        Geometry::arm64_16k(),
        Geometry::arm64_64k(),
        Geometry::power_64k(),
        Geometry::from_spec(&small).unwrap(),
        Geometry::for_base("256K".parse().unwrap()),
    ]
}

/// Where an operation points: a region, three offsets at coarse, middle and
/// fine grain, and whether to knock it off alignment by one base page.
#[derive(Clone, Debug)]
struct Place {
    region: u8,
    hi: u8,
    mid: u8,
    lo: u8,
    skew: bool,
}

#[derive(Clone, Debug)]
enum Op {
    Map {
        size: usize,
        at: Place,
        pfn: u8,
        flags: u8,
    },
    Unmap {
        size: usize,
        at: Place,
    },
    Protect {
        at: Place,
        len: (u8, u8, u8),
        flags: u8,
    },
    Split {
        at: Place,
    },
    /// Unmap or split the `pick`-th mapping (modulo their number), if any.
    UnmapExisting {
        pick: u16,
    },
    /// Split the `pick`-th mapping at some offset inside it.
    SplitExisting {
        pick: u16,
        offset: u16,
    },
    Walk {
        at: Place,
    },
    Empty {
        at: Place,
        len: (u8, u8, u8),
    },
}

fn place() -> impl Strategy<Value = Place> {
    (0u8..5, 0u8..4, 0u8..4, 0u8..4, prop::bool::weighted(0.1)).prop_map(
        |(region, hi, mid, lo, skew)| Place {
            region,
            hi,
            mid,
            lo,
            skew,
        },
    )
}

fn op() -> impl Strategy<Value = Op> {
    let len = (0u8..3, 0u8..3, 0u8..5);
    prop_oneof![
        5 => (0usize..64, place(), any::<u8>(), 0u8..8).prop_map(|(size, at, pfn, flags)| Op::Map { size, at, pfn, flags }),
        2 => (0usize..64, place()).prop_map(|(size, at)| Op::Unmap { size, at }),
        2 => (place(), len.clone(), 0u8..8).prop_map(|(at, len, flags)| Op::Protect { at, len, flags }),
        1 => place().prop_map(|at| Op::Split { at }),
        2 => any::<u16>().prop_map(|pick| Op::UnmapExisting { pick }),
        1 => (any::<u16>(), any::<u16>()).prop_map(|(pick, offset)| Op::SplitExisting { pick, offset }),
        1 => place().prop_map(|at| Op::Walk { at }),
        1 => (place(), len).prop_map(|(at, len)| Op::Empty { at, len }),
    ]
}

/// The address space of a test: regions aligned to the largest page size.
struct Space {
    geo: Geometry,
    sizes: Vec<PageSize>,
    big: u64,
}

impl Space {
    fn new(geo: Geometry) -> Space {
        let sizes = geo.sizes();
        let big = sizes.last().unwrap().bytes();
        Space { geo, sizes, big }
    }

    fn region_base(&self, region: u8) -> u64 {
        let top = 1u64 << self.geo.va_bits();
        match region {
            0 => 0,
            1 => self.big,
            2 => 3 * self.big,
            3 => top - 2 * self.big,
            _ => top - self.big / 2,
        }
    }

    fn va(&self, p: &Place, align: u64) -> u64 {
        let base = self.geo.base().bytes();
        let off = p.hi as u64 * (self.big / 2)
            + p.mid as u64 * (self.big / 512).max(base)
            + p.lo as u64 * 4 * base;
        let va = (self.region_base(p.region) + off) & !(align - 1);
        va + if p.skew { base } else { 0 }
    }

    fn len(&self, l: (u8, u8, u8)) -> u64 {
        let base = self.geo.base().bytes();
        l.0 as u64 * (self.big / 4) + l.1 as u64 * (self.big / 512).max(base) + l.2 as u64 * base
    }

    fn size(&self, i: usize) -> PageSize {
        // Mostly sizes the geometry maps; now and then one it does not.
        if i < 56 {
            self.sizes[i % self.sizes.len()]
        } else {
            PageSize::from_shift((12 + i % 19) as u8).unwrap()
        }
    }
}

fn compare(
    space: &Space,
    radix: &RadixPageTable,
    reference: &ReferencePageTable,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(radix.memory_bytes(), reference.memory_bytes());
    let (rs, fs) = (radix.stats(), reference.stats());
    prop_assert_eq!(&rs.tables_per_level, &fs.tables_per_level);
    prop_assert_eq!(&rs.leaves_per_size, &fs.leaves_per_size);
    prop_assert_eq!(rs.splits, fs.splits);
    prop_assert_eq!(
        rs.tables_allocated - rs.tables_freed,
        rs.tables_per_level.iter().sum::<u64>()
    );
    prop_assert!(rs.peak_memory_bytes >= rs.memory_bytes);
    for region in 0..5 {
        let base = space.region_base(region);
        let len = 2 * space.big;
        let mine = radix.mappings_in(VirtAddr(base), len);
        prop_assert_eq!(&mine, &reference.mappings_in(VirtAddr(base), len));
        // Every mapping's edges, or an even sample of them after big splits.
        let step = (mine.len() / 128).max(1);
        for m in mine.iter().step_by(step) {
            for va in [
                m.start.0,
                m.start.0 + m.size.bytes() / 2 + 1,
                m.start.0 + m.size.bytes() - 1,
                m.start.0 + m.size.bytes(),
            ] {
                prop_assert_eq!(
                    radix.walk(VirtAddr(va)),
                    reference.walk(VirtAddr(va)),
                    "walk {:#x}",
                    va
                );
                prop_assert_eq!(
                    radix.walk_levels(VirtAddr(va)),
                    reference.walk_levels(VirtAddr(va))
                );
            }
            if m.start.0 > 0 {
                let va = VirtAddr(m.start.0 - 1);
                prop_assert_eq!(radix.walk(va), reference.walk(va));
            }
        }
    }
    Ok(())
}

/// A short name for a result, for the tally (`PT_TALLY=1` prints it).
fn outcome<T, E: std::fmt::Debug>(op: &str, r: &Result<T, E>) -> String {
    match r {
        Ok(_) => format!("{op} ok"),
        Err(e) => format!(
            "{op} {}",
            format!("{e:?}").split([' ', '{']).next().unwrap_or("")
        ),
    }
}

fn run(geo: Geometry, ops: &[Op]) -> Result<(), TestCaseError> {
    let space = Space::new(geo);
    let mut radix = RadixPageTable::new(geo);
    let mut reference = ReferencePageTable::new(geo);
    let mut tally = std::collections::BTreeMap::<String, u32>::new();
    for op in ops {
        let outcome = match op {
            Op::Map {
                size,
                at,
                pfn,
                flags,
            } => {
                let size = space.size(*size);
                let va = VirtAddr(space.va(at, size.bytes()));
                let frames = geo.frames(size);
                let pfn = BasePfn(*pfn as u64 * frames + u64::from(*pfn % 32 == 31));
                let flags = PteFlags(*flags);
                let r = radix.map(va, pfn, size, flags);
                prop_assert_eq!(&r, &reference.map(va, pfn, size, flags), "{:?}", op);
                outcome("map", &r)
            }
            Op::Unmap { size, at } => {
                let size = space.size(*size);
                let va = VirtAddr(space.va(at, size.bytes()));
                let r = radix.unmap(va, size);
                prop_assert_eq!(&r, &reference.unmap(va, size), "{:?}", op);
                outcome("unmap", &r)
            }
            Op::Protect { at, len, flags } => {
                let va = VirtAddr(space.va(at, geo.base().bytes()));
                let len = space.len(*len);
                let flags = PteFlags(*flags);
                let r = radix.protect(va, len, flags);
                prop_assert_eq!(&r, &reference.protect(va, len, flags), "{:?}", op);
                let splits = r.as_ref().map(|r| r.splits.len().min(2)).unwrap_or(0);
                format!("{} splits {splits}", outcome("protect", &r))
            }
            Op::Split { at } => {
                let va = VirtAddr(space.va(at, 1));
                let r = radix.split(va);
                prop_assert_eq!(&r, &reference.split(va), "{:?}", op);
                outcome("split", &r)
            }
            Op::UnmapExisting { pick } => {
                let all = reference.mappings_in(VirtAddr(0), u64::MAX);
                let Some(m) = all.get(*pick as usize % all.len().max(1)) else {
                    continue;
                };
                let r = radix.unmap(m.start, m.size);
                prop_assert_eq!(&r, &reference.unmap(m.start, m.size), "{:?}", op);
                outcome("unmap existing", &r)
            }
            Op::SplitExisting { pick, offset } => {
                let all = reference.mappings_in(VirtAddr(0), u64::MAX);
                let Some(m) = all.get(*pick as usize % all.len().max(1)) else {
                    continue;
                };
                let va = VirtAddr(m.start.0 + (*offset as u64 * 4097) % m.size.bytes());
                let r = radix.split(va);
                prop_assert_eq!(&r, &reference.split(va), "{:?}", op);
                outcome("split existing", &r)
            }
            Op::Walk { at } => {
                let va = VirtAddr(space.va(at, 1) + at.mid as u64 * 8);
                prop_assert_eq!(radix.walk(va), reference.walk(va));
                prop_assert_eq!(radix.walk_levels(va), reference.walk_levels(va), "{:?}", va);
                format!("walk {}", radix.walk(va).is_some())
            }
            Op::Empty { at, len } => {
                let va = VirtAddr(space.va(at, 1));
                let len = space.len(*len);
                prop_assert_eq!(radix.is_unmapped(va, len), reference.is_unmapped(va, len));
                prop_assert_eq!(radix.mappings_in(va, len), reference.mappings_in(va, len));
                format!("empty {}", radix.is_unmapped(va, len))
            }
        };
        compare(&space, &radix, &reference)?;
        *tally.entry(outcome).or_default() += 1;
    }
    if std::env::var("PT_TALLY").is_ok() {
        eprintln!("{tally:?}");
    }
    // Unmapping everything frees every table but the root.
    for m in reference.mappings_in(VirtAddr(0), u64::MAX) {
        prop_assert_eq!(radix.unmap(m.start, m.size), Ok(m));
    }
    let levels = geo.levels();
    prop_assert_eq!(radix.memory_bytes(), geo.table_bytes(levels));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn radix_agrees_with_reference(g in 0usize..6, ops in prop::collection::vec(op(), 1..60)) {
        run(geometries()[g], &ops)?;
    }
}

#[test]
fn every_named_geometry_maps_each_of_its_sizes_in_one_place() {
    for geo in geometries() {
        let mut radix = RadixPageTable::new(geo);
        let mut reference = ReferencePageTable::new(geo);
        let big = geo.sizes().last().unwrap().bytes();
        for (i, size) in geo.sizes().into_iter().enumerate() {
            let va = VirtAddr((i as u64 + 1) * 2 * big);
            radix.map(va, BasePfn(0), size, PteFlags::RW).unwrap();
            reference.map(va, BasePfn(0), size, PteFlags::RW).unwrap();
            assert_eq!(radix.walk(va), reference.walk(va));
        }
        assert_eq!(radix.memory_bytes(), reference.memory_bytes(), "{geo:?}");
    }
}
