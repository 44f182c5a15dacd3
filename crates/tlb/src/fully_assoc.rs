//! Fully associative LRU array with O(1) lookup, insert and eviction.
//!
//! Entries live in slots; an open-addressing hash table (linear probing,
//! backward-shift deletion, load at most one half) maps a key to its slot, and
//! an intrusive doubly-linked list over slot indices keeps the recency order.
//! Both stay small and flat, so 64 and 2048 entries cost about the same per access.

use crate::array::{key, unkey, Key, Tlb, EMPTY};
use pagelab_core::{PageSize, Vpn};

const NIL: u32 = u32::MAX;
const EMPTY_SLOT: Slot = Slot {
    key: EMPTY,
    prev: NIL,
    next: NIL,
    bucket: 0,
};

#[derive(Clone, Copy, Debug)]
struct Slot {
    key: Key,
    prev: u32,
    next: u32,
    /// Index of the hash bucket pointing at this slot.
    bucket: u32,
}

/// A fully associative TLB array with exact LRU replacement.
#[derive(Clone, Debug)]
pub struct FullyAssoc {
    slots: Vec<Slot>,
    /// Hash table of `slot + 1`; 0 marks an empty bucket.
    table: Vec<u32>,
    mask: usize,
    shift: u32,
    /// Most recent slot.
    head: u32,
    /// Least recent slot.
    tail: u32,
    len: usize,
}

impl FullyAssoc {
    /// An empty array of `entries` entries. Panics if `entries` is 0 or above 2^24.
    pub fn new(entries: usize) -> FullyAssoc {
        assert!(
            (1..=1 << 24).contains(&entries),
            "fully associative TLB needs 1..=2^24 entries, got {entries}"
        );
        let buckets = (entries * 2).next_power_of_two().max(4);
        FullyAssoc {
            slots: vec![EMPTY_SLOT; entries],
            table: vec![0; buckets],
            mask: buckets - 1,
            shift: 64 - buckets.trailing_zeros(),
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }

    #[inline]
    fn home(&self, k: Key) -> usize {
        (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    /// The bucket holding `k`, if any.
    #[inline]
    fn find(&self, k: Key) -> Option<usize> {
        let mut i = self.home(k);
        loop {
            let s = self.table[i];
            if s == 0 {
                return None;
            }
            if self.slots[(s - 1) as usize].key == k {
                return Some(i);
            }
            i = (i + 1) & self.mask;
        }
    }

    #[inline]
    fn table_insert(&mut self, k: Key, slot: u32) {
        let mut i = self.home(k);
        while self.table[i] != 0 {
            i = (i + 1) & self.mask;
        }
        self.table[i] = slot + 1;
        self.slots[slot as usize].bucket = i as u32;
    }

    /// Empties bucket `i`, shifting later members of its probe run back so that
    /// lookups never need tombstones.
    fn table_remove(&mut self, mut i: usize) {
        let mut j = i;
        loop {
            j = (j + 1) & self.mask;
            let s = self.table[j];
            if s == 0 {
                self.table[i] = 0;
                return;
            }
            let h = self.home(self.slots[(s - 1) as usize].key);
            // The entry at j may move to i unless its home lies cyclically in (i, j].
            let stays = if i <= j {
                i < h && h <= j
            } else {
                i < h || h <= j
            };
            if !stays {
                self.table[i] = s;
                self.slots[(s - 1) as usize].bucket = i as u32;
                i = j;
            }
        }
    }

    #[inline]
    fn unlink(&mut self, s: u32) {
        let Slot { prev, next, .. } = self.slots[s as usize];
        if prev == NIL {
            self.head = next;
        } else {
            self.slots[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.slots[next as usize].prev = prev;
        }
    }

    #[inline]
    fn push_front(&mut self, s: u32) {
        self.slots[s as usize].prev = NIL;
        self.slots[s as usize].next = self.head;
        if self.head == NIL {
            self.tail = s;
        } else {
            self.slots[self.head as usize].prev = s;
        }
        self.head = s;
    }

    #[inline]
    fn touch(&mut self, s: u32) {
        if self.head != s {
            self.unlink(s);
            self.push_front(s);
        }
    }

    /// Inserts a key known to be absent; returns the evicted key, if any.
    #[inline]
    fn insert_absent(&mut self, k: Key) -> Option<Key> {
        let (slot, evicted) = if self.len < self.slots.len() {
            self.len += 1;
            ((self.len - 1) as u32, None)
        } else {
            let victim = self.tail;
            let old = self.slots[victim as usize].key;
            self.table_remove(self.slots[victim as usize].bucket as usize);
            self.unlink(victim);
            (victim, Some(old))
        };
        self.slots[slot as usize].key = k;
        self.table_insert(k, slot);
        self.push_front(slot);
        evicted
    }

    #[inline]
    pub(crate) fn access_key(&mut self, k: Key) -> bool {
        // Most references repeat the most recent page: skip the hash for them.
        if self.head != NIL && self.slots[self.head as usize].key == k {
            return true;
        }
        match self.find(k) {
            Some(b) => {
                self.touch(self.table[b] - 1);
                true
            }
            None => {
                self.insert_absent(k);
                false
            }
        }
    }

    #[inline(never)]
    pub(crate) fn access_key_outlined(&mut self, k: Key) -> bool {
        self.access_key(k)
    }

    /// Removes the entry in slot `s` (found at bucket `b`), keeping slots
    /// `0..len` dense by moving the last slot into the hole.
    fn remove_slot(&mut self, b: usize, s: u32) {
        self.table_remove(b);
        self.unlink(s);
        let last = (self.len - 1) as u32;
        if s != last {
            let moved = self.slots[last as usize];
            self.table[moved.bucket as usize] = s + 1;
            self.slots[s as usize] = moved;
            if moved.prev == NIL {
                self.head = s;
            } else {
                self.slots[moved.prev as usize].next = s;
            }
            if moved.next == NIL {
                self.tail = s;
            } else {
                self.slots[moved.next as usize].prev = s;
            }
        }
        self.slots[last as usize] = EMPTY_SLOT;
        self.len -= 1;
    }

    /// Cached pages from most to least recent.
    pub fn lru_order(&self) -> Vec<(Vpn, PageSize)> {
        let mut out = Vec::with_capacity(self.len);
        let mut s = self.head;
        while s != NIL {
            out.push(unkey(self.slots[s as usize].key));
            s = self.slots[s as usize].next;
        }
        out
    }
}

impl Tlb for FullyAssoc {
    #[inline]
    fn lookup(&mut self, vpn: Vpn, size: PageSize) -> bool {
        match self.find(key(vpn, size)) {
            Some(b) => {
                self.touch(self.table[b] - 1);
                true
            }
            None => false,
        }
    }

    fn insert(&mut self, vpn: Vpn, size: PageSize) -> Option<(Vpn, PageSize)> {
        if self.lookup(vpn, size) {
            return None;
        }
        self.insert_absent(key(vpn, size)).map(unkey)
    }

    #[inline]
    fn access(&mut self, vpn: Vpn, size: PageSize) -> bool {
        self.access_key(key(vpn, size))
    }

    fn contains(&self, vpn: Vpn, size: PageSize) -> bool {
        self.find(key(vpn, size)).is_some()
    }

    fn invalidate(&mut self, vpn: Vpn, size: PageSize) -> bool {
        match self.find(key(vpn, size)) {
            Some(b) => {
                self.remove_slot(b, self.table[b] - 1);
                true
            }
            None => false,
        }
    }

    fn invalidate_where(&mut self, mut remove: impl FnMut(Vpn, PageSize) -> bool) -> usize {
        let doomed: Vec<Key> = self.slots[..self.len]
            .iter()
            .map(|s| s.key)
            .filter(|&k| {
                let (v, s) = unkey(k);
                remove(v, s)
            })
            .collect();
        for k in &doomed {
            let (v, s) = unkey(*k);
            self.invalidate(v, s);
        }
        doomed.len()
    }

    fn flush(&mut self) {
        self.table.fill(0);
        self.slots.fill(EMPTY_SLOT);
        self.head = NIL;
        self.tail = NIL;
        self.len = 0;
    }

    fn len(&self) -> usize {
        self.len
    }

    fn capacity(&self) -> usize {
        self.slots.len()
    }

    fn resident(&self) -> Vec<(Vpn, PageSize)> {
        let mut v: Vec<_> = self.slots[..self.len]
            .iter()
            .map(|s| unkey(s.key))
            .collect();
        v.sort_by_key(|&(vpn, s)| (s, vpn));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_order_follows_accesses() {
        let k = PageSize::K4;
        let mut t = FullyAssoc::new(3);
        for v in [1, 2, 3, 1, 4] {
            t.access(Vpn(v), k);
        }
        // 2 was least recent when 4 arrived.
        assert_eq!(t.lru_order(), vec![(Vpn(4), k), (Vpn(1), k), (Vpn(3), k)]);
        assert!(t.invalidate(Vpn(1), k));
        assert_eq!(t.lru_order(), vec![(Vpn(4), k), (Vpn(3), k)]);
        assert!(!t.access(Vpn(5), k));
        assert!(!t.access(Vpn(6), k));
        assert_eq!(t.lru_order(), vec![(Vpn(6), k), (Vpn(5), k), (Vpn(4), k)]);
    }
}
