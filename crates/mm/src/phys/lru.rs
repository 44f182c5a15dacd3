//! Per-zone active/inactive LRU lists of allocated pages, for reclaim.
//!
//! As in Linux 2.5 and later (Bligh and Hansen, OLS 2003), each zone has its own pair of
//! lists, and a superpage is one entry (Winwood et al., OLS 2002, 4.3: the LRU lists
//! "contain superpages"). Lists are doubly linked through a hash map keyed by
//! head pfn, so every operation is O(1) (splitting a page is O(pages made)).
//!
//! Aging follows Linux's `mark_page_accessed` two-touch rule: a page enters
//! the inactive list; a first access sets its referenced bit, a second moves
//! it to the head of the active list; an access to an active page moves it to
//! the head of its list. [`Lru::select_victims`] takes pages from the cold end
//! of the inactive list, gives a referenced one a second chance (to the active
//! head, bit cleared), and when the inactive list runs dry moves the coldest
//! active pages to the inactive list.
//!
//! The model's reclaim ([`crate::reclaim`]) keeps its referenced bits apart,
//! set at every translation as hardware sets a PTE's accessed bit, and ages
//! the lists itself through [`Lru::coldest`] and [`Lru::move_to_head_of`];
//! [`Lru::mark_accessed`] and [`Lru::select_victims`] are the software
//! two-touch rule, kept for uses without such bits.

use super::{Page, PhysError, ZoneId};
use pagelab_core::{Order, Pfn};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

const NIL: u64 = u64::MAX;

/// Which list of a zone a page is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LruList {
    /// Recently used twice or more.
    Active = 0,
    /// Used once, or aged out of the active list; reclaimed first.
    Inactive = 1,
}

#[derive(Clone, Copy, Debug)]
struct Node {
    /// Towards the head (more recent).
    prev: u64,
    /// Towards the tail (less recent).
    next: u64,
    order: u8,
    list: LruList,
    referenced: bool,
    zone: usize,
}

#[derive(Clone, Copy, Debug)]
struct ListHead {
    head: u64,
    tail: u64,
    pages: u64,
    frames: u64,
}

impl Default for ListHead {
    fn default() -> Self {
        ListHead {
            head: NIL,
            tail: NIL,
            pages: 0,
            frames: 0,
        }
    }
}

/// One zone's list sizes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LruZoneStats {
    /// Pages on the active list.
    pub active_pages: u64,
    /// Frames in those pages.
    pub active_frames: u64,
    /// Pages on the inactive list.
    pub inactive_pages: u64,
    /// Frames in those pages.
    pub inactive_frames: u64,
}

/// Active and inactive lists for each zone.
#[derive(Clone, Debug, Default)]
pub struct Lru {
    nodes: FxHashMap<u64, Node>,
    /// `lists[zone][list as usize]`.
    lists: Vec<[ListHead; 2]>,
}

impl Lru {
    /// Empty lists for `zones` zones.
    pub fn new(zones: usize) -> Lru {
        Lru {
            nodes: FxHashMap::default(),
            lists: vec![[ListHead::default(); 2]; zones],
        }
    }

    fn list_mut(&mut self, zone: usize, list: LruList) -> &mut ListHead {
        &mut self.lists[zone][list as usize]
    }

    /// Links a node (already in the map with zone/list/order set) at the head of its list.
    fn link_head(&mut self, pfn: u64) {
        let Some(n) = self.nodes.get(&pfn).copied() else {
            return;
        };
        let l = self.list_mut(n.zone, n.list);
        let old = l.head;
        l.head = pfn;
        if old == NIL {
            l.tail = pfn;
        }
        l.pages += 1;
        l.frames += 1 << n.order;
        if let Some(o) = self.nodes.get_mut(&old) {
            o.prev = pfn;
        }
        if let Some(me) = self.nodes.get_mut(&pfn) {
            me.prev = NIL;
            me.next = old;
        }
    }

    fn unlink(&mut self, pfn: u64) {
        let Some(n) = self.nodes.get(&pfn).copied() else {
            return;
        };
        match self.nodes.get_mut(&n.prev) {
            Some(p) => p.next = n.next,
            None => self.list_mut(n.zone, n.list).head = n.next,
        }
        match self.nodes.get_mut(&n.next) {
            Some(x) => x.prev = n.prev,
            None => self.list_mut(n.zone, n.list).tail = n.prev,
        }
        let l = self.list_mut(n.zone, n.list);
        l.pages -= 1;
        l.frames -= 1 << n.order;
    }

    fn move_to_head(&mut self, pfn: u64, list: LruList, referenced: bool) {
        self.unlink(pfn);
        if let Some(n) = self.nodes.get_mut(&pfn) {
            n.list = list;
            n.referenced = referenced;
        }
        self.link_head(pfn);
    }

    /// Puts a newly mapped page at the head of its zone's list.
    pub fn add(&mut self, zone: ZoneId, page: Page, list: LruList) -> Result<(), PhysError> {
        if zone.0 >= self.lists.len() {
            return Err(PhysError::NoSuchZone { zone: zone.0 });
        }
        if self.nodes.contains_key(&page.pfn.0) || page.pfn.0 == NIL {
            return Err(PhysError::AlreadyOnLru { pfn: page.pfn });
        }
        let node = Node {
            prev: NIL,
            next: NIL,
            order: page.order.0.min(63),
            list,
            referenced: false,
            zone: zone.0,
        };
        self.nodes.insert(page.pfn.0, node);
        self.link_head(page.pfn.0);
        Ok(())
    }

    /// Takes a page off its list (the caller is unmapping or freeing it).
    pub fn remove(&mut self, pfn: Pfn) -> Result<Page, PhysError> {
        self.unlink(pfn.0);
        let n = self
            .nodes
            .remove(&pfn.0)
            .ok_or(PhysError::NotOnLru { pfn })?;
        Ok(Page {
            pfn,
            order: Order(n.order),
        })
    }

    /// Records an access (Linux's `mark_page_accessed`; see the module docs).
    pub fn mark_accessed(&mut self, pfn: Pfn) -> Result<(), PhysError> {
        let n = self
            .nodes
            .get_mut(&pfn.0)
            .ok_or(PhysError::NotOnLru { pfn })?;
        match (n.list, n.referenced) {
            (LruList::Inactive, false) => n.referenced = true,
            (LruList::Inactive, true) | (LruList::Active, _) => {
                self.move_to_head(pfn.0, LruList::Active, false)
            }
        }
        Ok(())
    }

    /// Takes pages off `zone`'s lists until they hold at least `nr_frames`
    /// frames (or the lists are empty): least recent inactive pages first,
    /// referenced ones spared once, active pages aged into the inactive list
    /// only when it runs dry. The victims leave the LRU; the caller unmaps
    /// and frees them, or splits a large one and puts parts back.
    pub fn select_victims(&mut self, zone: ZoneId, nr_frames: u64) -> Vec<Page> {
        let mut victims = Vec::new();
        if zone.0 >= self.lists.len() {
            return victims;
        }
        let mut got = 0u64;
        while got < nr_frames {
            let [active, inactive] = self.lists[zone.0];
            if inactive.tail != NIL {
                let pfn = inactive.tail;
                let referenced = self.nodes.get(&pfn).is_some_and(|n| n.referenced);
                if referenced {
                    self.move_to_head(pfn, LruList::Active, false);
                } else if let Ok(page) = self.remove(Pfn(pfn)) {
                    got += 1 << page.order.0;
                    victims.push(page);
                }
            } else if active.tail != NIL {
                self.move_to_head(active.tail, LruList::Inactive, false);
            } else {
                break;
            }
        }
        victims
    }

    /// Replaces a page of order `n` by `2^n` order-0 pages at its place in its
    /// list, in ascending pfn order from the more recent end; after the
    /// allocator's `split`, so that parts can be reclaimed alone.
    pub fn split(&mut self, pfn: Pfn) -> Result<(), PhysError> {
        self.split_into(pfn, Order(0))
    }

    /// Replaces a page by pieces of order `piece` (below its own) at its place
    /// in its list, in ascending pfn order from the more recent end, each
    /// keeping its list and referenced bit. A page already of order `piece`
    /// or below is left alone.
    pub fn split_into(&mut self, pfn: Pfn, piece: Order) -> Result<(), PhysError> {
        let n = *self.nodes.get(&pfn.0).ok_or(PhysError::NotOnLru { pfn })?;
        if n.order <= piece.0 {
            return Ok(());
        }
        let step = 1u64 << piece.0;
        let count = 1u64 << (n.order - piece.0);
        let (first, last) = (pfn.0, pfn.0 + (count - 1) * step);
        for i in 0..count {
            let p = first + i * step;
            let node = Node {
                prev: if p == first { n.prev } else { p - step },
                next: if p == last { n.next } else { p + step },
                order: piece.0,
                ..n
            };
            self.nodes.insert(p, node);
        }
        match self.nodes.get_mut(&n.next) {
            Some(x) => x.prev = last,
            None => self.list_mut(n.zone, n.list).tail = last,
        }
        if n.prev == NIL {
            self.list_mut(n.zone, n.list).head = first;
        }
        self.list_mut(n.zone, n.list).pages += count - 1;
        Ok(())
    }

    /// The least recent page of one list of `zone`.
    pub fn coldest(&self, zone: ZoneId, list: LruList) -> Option<Page> {
        let tail = self.lists.get(zone.0)?[list as usize].tail;
        let n = self.nodes.get(&tail)?;
        Some(Page {
            pfn: Pfn(tail),
            order: Order(n.order),
        })
    }

    /// Moves a page to the head (most recent end) of `list` in its zone,
    /// clearing its referenced bit: reclaim's second chance or deactivation.
    pub fn move_to_head_of(&mut self, pfn: Pfn, list: LruList) -> Result<(), PhysError> {
        if !self.nodes.contains_key(&pfn.0) {
            return Err(PhysError::NotOnLru { pfn });
        }
        self.move_to_head(pfn.0, list, false);
        Ok(())
    }

    /// The page on a list that holds frame `pfn` (its head or a later frame),
    /// searching heads down to `max_order` alignment.
    pub fn page_holding(&self, pfn: Pfn, max_order: Order) -> Option<Page> {
        (0..=max_order.0.min(63)).find_map(|k| {
            let head = pfn.0 & !((1u64 << k) - 1);
            let n = self.nodes.get(&head)?;
            (pfn.0 < head + (1u64 << n.order)).then_some(Page {
                pfn: Pfn(head),
                order: Order(n.order),
            })
        })
    }

    /// Whether a page headed by `pfn` is on a list.
    pub fn contains(&self, pfn: Pfn) -> bool {
        self.nodes.contains_key(&pfn.0)
    }

    /// The list a page is on, if any.
    pub fn list_of(&self, pfn: Pfn) -> Option<LruList> {
        self.nodes.get(&pfn.0).map(|n| n.list)
    }

    /// The pages of one list, most recent first.
    pub fn iter(&self, zone: ZoneId, list: LruList) -> impl Iterator<Item = Page> + '_ {
        let mut cur = self
            .lists
            .get(zone.0)
            .map_or(NIL, |l| l[list as usize].head);
        std::iter::from_fn(move || {
            let n = self.nodes.get(&cur)?;
            let page = Page {
                pfn: Pfn(cur),
                order: Order(n.order),
            };
            cur = n.next;
            Some(page)
        })
    }

    /// One zone's list sizes (zeros for an unknown zone).
    pub fn zone_stats(&self, zone: ZoneId) -> LruZoneStats {
        let Some([a, i]) = self.lists.get(zone.0) else {
            return LruZoneStats::default();
        };
        LruZoneStats {
            active_pages: a.pages,
            active_frames: a.frames,
            inactive_pages: i.pages,
            inactive_frames: i.frames,
        }
    }

    /// Verifies links, counts and that every page is on exactly one list. O(pages).
    pub fn check(&self) -> Result<(), PhysError> {
        let mut seen = 0u64;
        for (z, pair) in self.lists.iter().enumerate() {
            for list in [LruList::Active, LruList::Inactive] {
                let (mut pages, mut frames, mut prev) = (0u64, 0u64, NIL);
                for page in self.iter(ZoneId(z), list) {
                    let n = &self.nodes[&page.pfn.0];
                    if n.prev != prev
                        || n.list != list
                        || n.zone != z
                        || pages > self.nodes.len() as u64
                    {
                        return Err(PhysError::Invariant(format!(
                            "lru zone {z} {list:?}: broken link at {:#x}",
                            page.pfn.0
                        )));
                    }
                    prev = page.pfn.0;
                    pages += 1;
                    frames += 1 << n.order;
                }
                let l = pair[list as usize];
                if l.tail != prev || l.pages != pages || l.frames != frames {
                    return Err(PhysError::Invariant(format!(
                        "lru zone {z} {list:?}: tail or counts disagree with the links"
                    )));
                }
                seen += pages;
            }
        }
        if seen != self.nodes.len() as u64 {
            return Err(PhysError::Invariant(format!(
                "lru: {} pages in the map, {seen} on lists",
                self.nodes.len()
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "lru_tests.rs"]
mod tests;
