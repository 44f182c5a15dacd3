//! A set of page numbers kept as sorted, disjoint, non-adjacent half-open
//! ranges, with a cursor that makes the common cases (a page inside or just
//! past the range touched last) constant time.
//!
//! This is what keeps the sharing model's memory independent of the number of
//! PTEs it models: a process that touches a 2G segment page by page holds one
//! range, not half a million entries.

/// Sorted disjoint ranges `[start, end)` of page numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IntervalSet {
    runs: Vec<(u64, u64)>,
    hint: usize,
}

impl IntervalSet {
    /// An empty set.
    pub fn new() -> IntervalSet {
        IntervalSet::default()
    }

    /// Whether no page is in the set.
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// The ranges, in order.
    pub fn runs(&self) -> &[(u64, u64)] {
        &self.runs
    }

    /// How many pages the set holds.
    pub fn pages(&self) -> u64 {
        self.runs.iter().map(|&(s, e)| e - s).sum()
    }

    /// Index of the first run whose end is past `v`.
    fn seek(&mut self, v: u64) -> usize {
        let h = self.hint.min(self.runs.len());
        // The cursor, or the run after it, usually answers.
        if h < self.runs.len() && self.runs[h].1 > v && (h == 0 || self.runs[h - 1].1 <= v) {
            return h;
        }
        if h + 1 < self.runs.len() && self.runs[h + 1].1 > v && self.runs[h].1 <= v {
            return h + 1;
        }
        self.runs.partition_point(|&(_, e)| e <= v)
    }

    /// Whether page `v` is in the set.
    #[inline]
    pub fn contains(&mut self, v: u64) -> bool {
        // Fast miss: `v` just past the run at the cursor (a sequential toucher).
        let h = self.hint;
        if h < self.runs.len()
            && self.runs[h].1 == v
            && (h + 1 == self.runs.len() || self.runs[h + 1].0 > v)
        {
            return false;
        }
        let i = self.seek(v);
        self.hint = i;
        i < self.runs.len() && self.runs[i].0 <= v
    }

    /// Adds page `v`; false if it was already there.
    #[inline]
    pub fn insert(&mut self, v: u64) -> bool {
        // Fast path: `v` extends the run at the cursor.
        self.extend_cursor(v) || self.insert_range(v, v + 1) == 1
    }

    /// Adds `v` if it extends the run at the cursor (so `v - 1` is in the
    /// set); false, changing nothing, otherwise.
    #[inline]
    pub fn extend_cursor(&mut self, v: u64) -> bool {
        let h = self.hint;
        if h < self.runs.len()
            && self.runs[h].1 == v
            && (h + 1 == self.runs.len() || self.runs[h + 1].0 > v + 1)
        {
            self.runs[h].1 = v + 1;
            return true;
        }
        false
    }

    /// Adds `[a, b)`; returns how many pages were new.
    pub fn insert_range(&mut self, a: u64, b: u64) -> u64 {
        if a >= b {
            return 0;
        }
        // Runs that touch or overlap [a, b) merge with it.
        let first = self.runs.partition_point(|&(_, e)| e < a);
        let last = self.runs.partition_point(|&(s, _)| s <= b);
        let mut covered = 0;
        let (mut lo, mut hi) = (a, b);
        for &(s, e) in &self.runs[first..last] {
            covered += e.min(b).saturating_sub(s.max(a));
            lo = lo.min(s);
            hi = hi.max(e);
        }
        self.runs.splice(first..last, [(lo, hi)]);
        self.hint = first;
        (b - a) - covered
    }

    /// Removes `[a, b)`; returns the ranges that were in the set.
    pub fn remove_range(&mut self, a: u64, b: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        if a >= b {
            return out;
        }
        let first = self.runs.partition_point(|&(_, e)| e <= a);
        let last = self.runs.partition_point(|&(s, _)| s < b);
        if first >= last {
            return out;
        }
        let mut keep = Vec::with_capacity(2);
        for &(s, e) in &self.runs[first..last] {
            out.push((s.max(a), e.min(b)));
            if s < a {
                keep.push((s, a));
            }
            if e > b {
                keep.push((b, e));
            }
        }
        self.runs.splice(first..last, keep);
        self.hint = first;
        out
    }

    /// Whether any page of `[a, b)` is in the set.
    pub fn any_in(&self, a: u64, b: u64) -> bool {
        if a >= b {
            return false;
        }
        let i = self.runs.partition_point(|&(_, e)| e <= a);
        i < self.runs.len() && self.runs[i].0 < b
    }

    /// Whether every page of `[a, b)` is in the set.
    pub fn covers(&self, a: u64, b: u64) -> bool {
        if a >= b {
            return true;
        }
        let i = self.runs.partition_point(|&(_, e)| e <= a);
        i < self.runs.len() && self.runs[i].0 <= a && self.runs[i].1 >= b
    }

    /// The pages of `[a, b)` in the set, as ranges.
    pub fn within(&self, a: u64, b: u64) -> Vec<(u64, u64)> {
        let first = self.runs.partition_point(|&(_, e)| e <= a);
        self.runs[first..]
            .iter()
            .take_while(|&&(s, _)| s < b)
            .map(|&(s, e)| (s.max(a), e.min(b)))
            .collect()
    }

    /// Checks the representation: sorted, disjoint, non-adjacent, non-empty runs.
    pub fn check(&self) -> Result<(), String> {
        for w in self.runs.windows(2) {
            if w[0].1 >= w[1].0 {
                return Err(format!("runs {:?} and {:?} touch or overlap", w[0], w[1]));
            }
        }
        match self.runs.iter().find(|r| r.0 >= r.1) {
            Some(r) => Err(format!("empty run {r:?}")),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        #[test]
        fn matches_a_btreeset(ops in prop::collection::vec((0u8..4, 0u64..64, 0u64..8), 1..80)) {
            let mut s = IntervalSet::new();
            let mut r = BTreeSet::new();
            for (op, a, len) in ops {
                match op {
                    0 => prop_assert_eq!(s.insert(a), r.insert(a)),
                    1 => {
                        let new = (a..a + len).filter(|v| r.insert(*v)).count() as u64;
                        prop_assert_eq!(s.insert_range(a, a + len), new);
                    }
                    2 => {
                        let gone: u64 = s.remove_range(a, a + len).iter().map(|(x, y)| y - x).sum();
                        let want = (a..a + len).filter(|v| r.remove(v)).count() as u64;
                        prop_assert_eq!(gone, want);
                    }
                    _ => {
                        prop_assert_eq!(s.contains(a), r.contains(&a));
                        prop_assert_eq!(s.any_in(a, a + len), r.range(a..a + len).next().is_some());
                    }
                }
                s.check().map_err(TestCaseError::fail)?;
                prop_assert_eq!(s.pages(), r.len() as u64);
            }
        }
    }
}
