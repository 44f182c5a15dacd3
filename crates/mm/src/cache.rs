//! The page cache: file data in memory as folios, one entry per naturally
//! aligned extent of the file, each a naturally aligned block of frames.
//!
//! A folio of `size` covers file pages `[start, start + size / base)` with
//! `start` a multiple of `size / base` (aligned in file space), on frames
//! aligned to `size` (aligned in physical space, as the buddy allocator
//! hands them out). A large folio may be read whole at once (readahead of
//! the extent) or page by page into its reserved frames (GISP's page-cache
//! reservations); the folio records which of its pages hold data.

use pagelab_core::{PageSize, Pfn};
use rustc_hash::FxHashMap;

/// One cached extent of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Folio {
    /// First frame (4K units).
    pub pfn: Pfn,
    /// Size of the extent and of its block of frames.
    pub size: PageSize,
    /// Pages read so far, one bit per base page; empty when all are read.
    read: Vec<u64>,
    /// The number of pages read.
    read_count: u64,
}

impl Folio {
    /// A folio of `pages` base pages, all read (`whole`) or none yet.
    pub fn new(pfn: Pfn, size: PageSize, pages: u64, whole: bool) -> Folio {
        Folio {
            pfn,
            size,
            read: if whole {
                Vec::new()
            } else {
                vec![0; pages.div_ceil(64) as usize]
            },
            read_count: if whole { pages } else { 0 },
        }
    }

    /// Whether page `i` of the folio holds data.
    pub fn is_read(&self, i: u64) -> bool {
        self.read.is_empty() || self.read[(i / 64) as usize] & (1 << (i % 64)) != 0
    }

    /// Marks page `i` read; true when that completes the folio.
    pub fn set_read(&mut self, i: u64, pages: u64) -> bool {
        if self.is_read(i) {
            return self.read.is_empty();
        }
        self.read[(i / 64) as usize] |= 1 << (i % 64);
        self.read_count += 1;
        if self.read_count == pages {
            self.read = Vec::new();
        }
        self.read.is_empty()
    }

    /// Whether every page of the folio holds data.
    pub fn fully_read(&self) -> bool {
        self.read.is_empty()
    }

    /// Pages read so far.
    pub fn read_pages(&self) -> u64 {
        self.read_count
    }
}

/// Every file's cached folios.
#[derive(Clone, Debug)]
pub struct PageCache {
    base: PageSize,
    folios: FxHashMap<(u64, u64), Folio>,
    /// The folio sizes present at some time, largest first (lookups try each).
    sizes: Vec<PageSize>,
    frames: u64,
}

impl PageCache {
    /// An empty cache whose page indexes count `base` pages.
    pub fn new(base: PageSize) -> PageCache {
        PageCache {
            base,
            folios: FxHashMap::default(),
            sizes: Vec::new(),
            frames: 0,
        }
    }

    /// Base pages in a folio of `size`.
    pub fn pages(&self, size: PageSize) -> u64 {
        (size.bytes() / self.base.bytes()).max(1)
    }

    /// The folio holding page `index` of `file`, with its first page index.
    pub fn find(&self, file: u64, index: u64) -> Option<(u64, &Folio)> {
        self.sizes.iter().find_map(|&s| {
            let start = index & !(self.pages(s) - 1);
            self.folios
                .get(&(file, start))
                .filter(|f| f.size == s)
                .map(|f| (start, f))
        })
    }

    /// The folio starting at page `start` of `file`.
    pub fn get(&self, file: u64, start: u64) -> Option<&Folio> {
        self.folios.get(&(file, start))
    }

    /// The folio starting at page `start` of `file`, to update.
    pub fn get_mut(&mut self, file: u64, start: u64) -> Option<&mut Folio> {
        self.folios.get_mut(&(file, start))
    }

    /// Whether no folio of `file` overlaps pages `[start, start + pages)`.
    pub fn range_empty(&self, file: u64, start: u64, pages: u64) -> bool {
        self.sizes.iter().all(|&s| {
            let n = self.pages(s);
            let first = start & !(n - 1);
            (first..start + pages)
                .step_by(n as usize)
                .all(|i| self.folios.get(&(file, i)).is_none_or(|f| f.size != s))
        })
    }

    /// Adds a folio at page `start` of `file` (aligned to its size).
    pub fn insert(&mut self, file: u64, start: u64, folio: Folio) {
        if !self.sizes.contains(&folio.size) {
            self.sizes.push(folio.size);
            self.sizes.sort_unstable_by(|a, b| b.cmp(a));
        }
        self.frames += folio.size.frames();
        if let Some(old) = self.folios.insert((file, start), folio) {
            self.frames -= old.size.frames();
        }
    }

    /// Takes the folio at page `start` of `file` out of the cache.
    pub fn remove(&mut self, file: u64, start: u64) -> Option<Folio> {
        let f = self.folios.remove(&(file, start))?;
        self.frames -= f.size.frames();
        Some(f)
    }

    /// 4K frames held by the cache.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Every folio as `((file, first page), folio)`.
    pub fn iter(&self) -> impl Iterator<Item = (&(u64, u64), &Folio)> {
        self.folios.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_finds_the_folio_of_any_page_and_read_bits_complete_it() {
        let mut c = PageCache::new(PageSize::K4);
        c.insert(7, 512, Folio::new(Pfn(1024), PageSize::M2, 512, false));
        c.insert(7, 3, Folio::new(Pfn(5), PageSize::K4, 1, true));
        assert_eq!(
            c.find(7, 700).map(|(s, f)| (s, f.pfn)),
            Some((512, Pfn(1024)))
        );
        assert_eq!(c.find(7, 3).map(|(s, _)| s), Some(3));
        assert!(c.find(7, 4).is_none() && c.find(8, 512).is_none());
        assert!(!c.range_empty(7, 0, 512) && !c.range_empty(7, 1000, 4));
        assert!(c.range_empty(7, 1024, 512) && c.range_empty(7, 4, 4));
        assert_eq!(c.frames(), 513);
        let f = c.get_mut(7, 512).unwrap();
        assert!(!f.is_read(10));
        for i in 0..511 {
            assert!(!f.set_read(i, 512));
        }
        assert!(f.set_read(511, 512) && f.fully_read() && f.is_read(10));
        assert_eq!(c.remove(7, 512).map(|f| f.read_pages()), Some(512));
        assert_eq!(c.frames(), 1);
    }
}
