//! The buddy allocator against a simple reference: a `Vec<bool>` per frame.
//!
//! The reference derives the free blocks from the free frames alone: walking
//! up from the first frame, each free frame starts the largest aligned block
//! (up to the largest order, inside the range) whose frames are all free.
//! A fully coalescing buddy allocator holds exactly these blocks, so the
//! reference can follow the same policy — the smallest order with a free
//! block at least the request, lowest address first — and must return the
//! *same pfn* on every allocation, the same error on every bad free, and the
//! same free blocks per order after every step. `check()` runs after every step.

use pagelab_core::{Order, Pfn};
use pagelab_mm::phys::{BuddyAllocator, PhysError};
use proptest::prelude::*;
use std::collections::HashMap;

struct Reference {
    start: u64,
    max: u8,
    free: Vec<bool>,
    /// Allocated blocks: head -> order.
    used: HashMap<u64, u8>,
}

impl Reference {
    fn new(start: u64, frames: u64, max: u8) -> Reference {
        Reference {
            start,
            max,
            free: vec![true; frames as usize],
            used: HashMap::new(),
        }
    }

    fn end(&self) -> u64 {
        self.start + self.free.len() as u64
    }

    fn all_free(&self, p: u64, k: u8) -> bool {
        p >= self.start
            && p + (1 << k) <= self.end()
            && (p..p + (1 << k)).all(|f| self.free[(f - self.start) as usize])
    }

    /// (head, order) of every free block, ascending.
    fn blocks(&self) -> Vec<(u64, u8)> {
        let mut out = Vec::new();
        let mut p = self.start;
        while p < self.end() {
            if !self.free[(p - self.start) as usize] {
                p += 1;
                continue;
            }
            let k = (0..=self.max)
                .rev()
                .find(|&k| p.is_multiple_of(1 << k) && self.all_free(p, k))
                .unwrap();
            out.push((p, k));
            p += 1 << k;
        }
        out
    }

    fn counts(&self) -> Vec<u64> {
        let mut c = vec![0; self.max as usize + 1];
        for (_, k) in self.blocks() {
            c[k as usize] += 1;
        }
        c
    }

    fn alloc(&mut self, n: u8) -> Option<u64> {
        let blocks = self.blocks();
        let (p, _) = (n..=self.max).find_map(|k| blocks.iter().find(|b| b.1 == k))?;
        let p = *p;
        self.set(p, n, false);
        self.used.insert(p, n);
        Some(p)
    }

    fn set(&mut self, p: u64, n: u8, free: bool) {
        for f in p..p + (1 << n) {
            self.free[(f - self.start) as usize] = free;
        }
    }

    fn free(&mut self, p: u64, n: u8) -> Result<(), PhysError> {
        let (pfn, order) = (Pfn(p), n);
        if n > self.max {
            return Err(PhysError::OrderTooLarge {
                order,
                max: self.max,
            });
        }
        if p < self.start || p.saturating_add(1 << n) > self.end() {
            let (start, end) = (Pfn(self.start), Pfn(self.end()));
            return Err(PhysError::OutOfRange {
                pfn,
                order,
                start,
                end,
            });
        }
        if !p.is_multiple_of(1 << n) {
            return Err(PhysError::Misaligned { pfn, order });
        }
        match self.used.get(&p) {
            Some(&k) if k == n => {}
            _ if self.free[(p - self.start) as usize] => {
                return Err(PhysError::DoubleFree { pfn, order })
            }
            Some(&actual) => return Err(PhysError::WrongOrder { pfn, order, actual }),
            None => return Err(PhysError::NotAllocated { pfn, order }),
        }
        self.used.remove(&p);
        self.set(p, n, true);
        Ok(())
    }

    fn split(&mut self, p: u64, n: u8) {
        self.used.remove(&p);
        for f in p..p + (1 << n) {
            self.used.insert(f, 0);
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Alloc(u8),
    /// Free the i-th live block (modulo the number live).
    Free(usize),
    /// Split the i-th live block, then free its frames later one by one.
    Split(usize),
    /// Free something arbitrary, usually wrong.
    Bogus(u64, u8),
}

fn op(max: u8) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..=max + 1).prop_map(Op::Alloc),
        3 => any::<usize>().prop_map(Op::Free),
        1 => any::<usize>().prop_map(Op::Split),
        1 => (0u64..700, 0..=max + 1).prop_map(|(p, o)| Op::Bogus(p, o)),
    ]
}

fn case() -> impl Strategy<Value = (u64, u64, u8, Vec<Op>)> {
    (0u64..40, 1u64..600, 0u8..=6).prop_flat_map(|(s, f, m)| {
        (
            Just(s),
            Just(f),
            Just(m),
            prop::collection::vec(op(m), 1..300),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn buddy_matches_reference((start, frames, max, ops) in case()) {
        let mut b = BuddyAllocator::new(Pfn(start), frames, Order(max)).unwrap();
        let mut r = Reference::new(start, frames, max);
        let mut live: Vec<(u64, u8)> = Vec::new();
        prop_assert_eq!(b.free_blocks(), &r.counts()[..]);
        for op in ops {
            match op {
                Op::Alloc(n) => {
                    let got = b.alloc(Order(n)).map(|p| p.0);
                    prop_assert_eq!(got, r.alloc(n), "alloc order {}", n);
                    if let Some(p) = got {
                        live.push((p, n));
                    }
                }
                Op::Free(i) if !live.is_empty() => {
                    let (p, n) = live.swap_remove(i % live.len());
                    prop_assert_eq!(b.free(Pfn(p), Order(n)), Ok(()));
                    prop_assert_eq!(r.free(p, n), Ok(()));
                }
                Op::Split(i) if !live.is_empty() => {
                    let (p, n) = live.swap_remove(i % live.len());
                    prop_assert_eq!(b.split(Pfn(p), Order(n)), Ok(()));
                    r.split(p, n);
                    live.extend((p..p + (1 << n)).map(|f| (f, 0)));
                }
                Op::Bogus(p, n) => {
                    let want = r.free(p, n);
                    prop_assert_eq!(b.free(Pfn(p), Order(n)), want.clone());
                    if want.is_ok() {
                        live.retain(|&(q, _)| q != p);
                    }
                }
                _ => {}
            }
            b.check().map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(b.free_blocks(), &r.counts()[..]);
            let free = r.free.iter().filter(|&&f| f).count() as u64;
            prop_assert_eq!(b.free_frames(), free);
        }
    }
}
