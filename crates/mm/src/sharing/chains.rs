//! Reverse-map chains as hash-consed persistent lists.
//!
//! A page's chain lists the PTEs that map it, newest first, as 2.5's
//! `page_add_rmap` pushed them. A PTE is named by a *mapper*: the page table
//! that holds it and the displacement from page index to virtual page, which
//! is the same for every page of a mapping; so every page of a segment mapped
//! by the same processes in the same order has the same chain, and the model
//! stores that chain once. A page holds a chain id (4 bytes, like the pointer
//! in `struct page`), not a list: memory follows the physical pages and the
//! distinct chains, never the number of PTEs.

use rustc_hash::FxHashMap;

/// The empty chain.
pub const EMPTY: u32 = 0;

#[derive(Clone, Copy, Debug)]
struct Cell {
    mapper: u32,
    tail: u32,
    len: u32,
    refs: u32,
}

/// The arena of chains.
#[derive(Debug)]
pub struct Chains {
    cells: Vec<Cell>,
    free: Vec<u32>,
    intern: FxHashMap<(u32, u32), u32>,
    last_cons: (u32, u32, u32),
    last_remove: (u32, u32, u32, u32),
}

impl Default for Chains {
    fn default() -> Self {
        Chains::new()
    }
}

impl Chains {
    /// An arena holding only the empty chain.
    pub fn new() -> Chains {
        let empty = Cell {
            mapper: u32::MAX,
            tail: EMPTY,
            len: 0,
            refs: 1,
        };
        Chains {
            cells: vec![empty],
            free: Vec::new(),
            intern: FxHashMap::default(),
            last_cons: (u32::MAX, u32::MAX, EMPTY),
            last_remove: (u32::MAX, u32::MAX, EMPTY, 0),
        }
    }

    /// Number of entries in chain `c`.
    #[inline]
    pub fn len(&self, c: u32) -> u32 {
        self.cells[c as usize].len
    }

    /// Whether `c` is the empty chain.
    pub fn is_empty(&self, c: u32) -> bool {
        c == EMPTY
    }

    /// Distinct non-empty chains alive.
    pub fn live(&self) -> usize {
        self.cells.len() - 1 - self.free.len()
    }

    /// Takes a reference on `c` (a page now holds it).
    #[inline]
    pub fn retain(&mut self, c: u32) {
        self.retain_n(c, 1)
    }

    /// Takes `n` references on `c`.
    #[inline]
    pub fn retain_n(&mut self, c: u32, n: u32) {
        self.cells[c as usize].refs += n;
    }

    /// Drops a reference on `c`, freeing cells nobody holds.
    #[inline]
    pub fn release(&mut self, c: u32) {
        self.release_n(c, 1)
    }

    /// Drops `n` references on `c`, freeing cells nobody holds.
    pub fn release_n(&mut self, mut c: u32, n: u32) {
        let mut n = n;
        while c != EMPTY {
            let cell = &mut self.cells[c as usize];
            cell.refs -= n;
            n = 1;
            if cell.refs > 0 {
                return;
            }
            let (m, t) = (cell.mapper, cell.tail);
            self.intern.remove(&(m, t));
            self.free.push(c);
            // Ids are reused: forget answers that named this one.
            self.last_cons = (u32::MAX, u32::MAX, EMPTY);
            self.last_remove = (u32::MAX, u32::MAX, EMPTY, 0);
            c = t;
        }
    }

    /// The chain `mapper` followed by `tail` (not retained for the caller).
    #[inline]
    pub fn cons(&mut self, mapper: u32, tail: u32) -> u32 {
        if self.last_cons.0 == mapper && self.last_cons.1 == tail {
            return self.last_cons.2;
        }
        let c = match self.intern.get(&(mapper, tail)) {
            Some(&c) => c,
            None => {
                let cell = Cell {
                    mapper,
                    tail,
                    len: self.cells[tail as usize].len + 1,
                    refs: 0,
                };
                let c = match self.free.pop() {
                    Some(c) => {
                        self.cells[c as usize] = cell;
                        c
                    }
                    None => {
                        self.cells.push(cell);
                        (self.cells.len() - 1) as u32
                    }
                };
                self.retain(tail);
                self.intern.insert((mapper, tail), c);
                c
            }
        };
        self.last_cons = (mapper, tail, c);
        c
    }

    /// `c` without `mapper`'s entry, and the entries walked from the head to
    /// find it (its 1-based position); `None` if it is not there.
    pub fn remove(&mut self, mapper: u32, c: u32) -> Option<(u32, u32)> {
        if self.last_remove.0 == mapper && self.last_remove.1 == c {
            return Some((self.last_remove.2, self.last_remove.3));
        }
        let mut before = Vec::new();
        let mut at = c;
        while at != EMPTY && self.cells[at as usize].mapper != mapper {
            before.push(self.cells[at as usize].mapper);
            at = self.cells[at as usize].tail;
        }
        if at == EMPTY {
            return None;
        }
        let walked = before.len() as u32 + 1;
        let mut out = self.cells[at as usize].tail;
        for &m in before.iter().rev() {
            out = self.cons(m, out);
        }
        self.last_remove = (mapper, c, out, walked);
        Some((out, walked))
    }

    /// The mappers of `c`, newest first.
    pub fn mappers(&self, mut c: u32) -> Vec<u32> {
        let mut out = Vec::new();
        while c != EMPTY {
            out.push(self.cells[c as usize].mapper);
            c = self.cells[c as usize].tail;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_histories_share_one_chain_and_removal_walks_to_the_entry() {
        let mut ch = Chains::new();
        let mut pages = [EMPTY; 3];
        for m in 1..=4 {
            for p in pages.iter_mut() {
                let n = ch.cons(m, *p);
                ch.retain(n);
                ch.release(*p);
                *p = n;
            }
        }
        assert_eq!(pages[0], pages[2]);
        assert_eq!(ch.live(), 4);
        assert_eq!(ch.mappers(pages[0]), [4, 3, 2, 1]);
        // The oldest mapping is at the tail: four entries walked.
        let (rest, walked) = ch.remove(1, pages[0]).unwrap();
        assert_eq!((ch.mappers(rest), walked), (vec![4, 3, 2], 4));
        assert_eq!(ch.remove(9, pages[0]), None);
        for p in pages.iter_mut() {
            ch.retain(rest);
            ch.release(*p);
            *p = rest;
        }
        for p in pages {
            ch.release(p);
        }
        assert_eq!(ch.live(), 0);
    }
}
